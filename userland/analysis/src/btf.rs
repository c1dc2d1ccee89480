//! Struct layouts from BTF, the kernel's compact type information (`/sys/kernel/btf/vmlinux`,
//! carried in a profile's Btf section): field names for the report when no vmlinux with DWARF
//! is at hand. Names follow [`DebugInfo::field_at`](crate::debuginfo::DebugInfo::field_at):
//! dotted paths through nested structs and unions, anonymous members adding nothing to the
//! path, `[i]` for array elements, the first union member that holds a byte winning over
//! another's padding, `None` in padding no named member spans, and a bit-field named for the
//! bytes it occupies.
//!
//! The bytes are parsed by `btf-rs` (the retis project's BTF reader): it reads a byte slice,
//! knows every kind the kernel writes (`ENUM64`, `DECL_TAG`, `TYPE_TAG` included), and needs
//! only small crates. Its errors are returned, not panicked on; the header is checked here
//! first, because the crate sizes its tables from the header's lengths before it reads them.

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use btf_rs::{BtfType, Struct, Type};

use crate::debuginfo::VariableType;
use crate::percpu_section::{PercpuLayout, PercpuVariable};
use crate::report::FieldSource;

/// Deepest nesting of types followed (typedef chains, nested structs, arrays): real kernel
/// types stay far below, and a malformed blob's cycles stop here.
const MAX_DEPTH: usize = 24;

/// Members one [`Btf::field_at`] may look at: names take one member per level, except that
/// a union member with padding at the offset sends the search on to its siblings, which a
/// malformed blob could make exponential.
const MEMBER_BUDGET: u32 = 1 << 16;

/// The name of the static per-CPU section's DATASEC.
const PERCPU_SECTION: &str = ".data..percpu";

/// Size of a pointer: BTF gives pointers no size, and dprof profiles x86-64 kernels.
const POINTER_SIZE: u64 = 8;

/// Size of the BTF header this reader needs (`struct btf_header`).
const HEADER_LEN: usize = 24;

/// Why BTF bytes could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BtfError {
    /// Fewer bytes than a header.
    #[error("{len} bytes are too few for a BTF header ({HEADER_LEN} bytes)")]
    Short {
        /// The length.
        len: usize,
    },
    /// The first two bytes are not BTF's magic.
    #[error("not BTF: the magic is {magic:#06x}, not 0xeb9f")]
    Magic {
        /// The first two bytes, little-endian.
        magic: u16,
    },
    /// The header places a section outside the bytes.
    #[error(
        "the BTF header places its {section} section at bytes {start}..{end}, past the end \
         of the {len} bytes"
    )]
    OutOfBounds {
        /// "type" or "string".
        section: &'static str,
        /// Where the header says it starts.
        start: u64,
        /// Where it ends.
        end: u64,
        /// The bytes' length.
        len: usize,
    },
    /// The types or strings do not parse.
    #[error("{0}")]
    Parse(String),
}

/// Struct layouts from one BTF blob, with an index from names to types built once.
pub struct Btf {
    raw: btf_rs::Btf,
    /// `struct NAME`, `union NAME` and typedef names to the type each names. Where a struct
    /// name has several types, the first with members wins.
    index: HashMap<String, u32>,
    /// Variables (pahole encodes the per-CPU ones, and globals when asked) to their types;
    /// `None` where variables of one name have different types.
    variables: HashMap<String, Option<u32>>,
    /// The `.data..percpu` DATASEC: the per-CPU variables' offsets.
    percpu_section: Option<u32>,
}

impl std::fmt::Debug for Btf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Btf")
            .field("names", &self.index.len())
            .finish_non_exhaustive()
    }
}

/// What a member holds, as far as naming offsets inside it needs.
enum Inner {
    Scalar,
    Composite(Struct),
    Array {
        elem_size: u64,
        count: u64,
        /// The element's layout, when elements are structs or unions.
        elem: Option<Struct>,
    },
}

/// What [`Btf::find_at`] found at an offset.
enum Found {
    /// A scalar member (or array element) holds the byte.
    Held(String),
    /// Only a struct, union or array element spans the byte: it is padding inside it.
    Padding(String),
}

/// A type resolved through typedefs and qualifiers: its size and what it holds.
struct Desc {
    size: u64,
    inner: Inner,
}

impl Desc {
    const fn scalar(size: u64) -> Self {
        Self {
            size,
            inner: Inner::Scalar,
        }
    }
}

impl Btf {
    /// Parses `bytes`, a BTF blob such as `/sys/kernel/btf/vmlinux` or a profile's Btf
    /// section, and indexes its struct, union and typedef names.
    ///
    /// # Errors
    /// [`BtfError`] when the bytes are not whole, valid BTF.
    pub fn parse(bytes: &[u8]) -> Result<Self, BtfError> {
        check_header(bytes)?;
        let btf = btf_rs::Btf::from_bytes(bytes).map_err(|e| BtfError::Parse(e.to_string()))?;
        let mut index: HashMap<String, (u32, bool)> = HashMap::new();
        let mut variables: HashMap<String, Option<u32>> = HashMap::new();
        let mut percpu_section = None;
        let (first, last) = btf.base().type_id_range();
        for id in first..=last {
            let Ok(ty) = btf.resolve_type_by_id(id) else {
                continue;
            };
            if let Type::Var(v) = &ty {
                if let (Ok(name), Some(type_id)) = (btf.resolve_name(v), v.get_type_id()) {
                    variables
                        .entry(name)
                        .and_modify(|known| {
                            if *known != Some(type_id) {
                                *known = None;
                            }
                        })
                        .or_insert(Some(type_id));
                }
                continue;
            }
            if let Type::Datasec(d) = &ty {
                if btf.resolve_name(d).is_ok_and(|n| n == PERCPU_SECTION) {
                    percpu_section = Some(id);
                }
                continue;
            }
            let (key, has_members) = match &ty {
                Type::Struct(s) | Type::Union(s) => {
                    let keyword = if matches!(ty, Type::Union(_)) {
                        "union"
                    } else {
                        "struct"
                    };
                    match btf.resolve_name(s) {
                        Ok(name) if !name.is_empty() => {
                            (format!("{keyword} {name}"), !s.members.is_empty())
                        }
                        _ => continue,
                    }
                }
                Type::Typedef(t) => match btf.resolve_name(t) {
                    Ok(name) if !name.is_empty() => (name, true),
                    _ => continue,
                },
                _ => continue,
            };
            let entry = index.entry(key).or_insert((id, has_members));
            // An empty definition (a struct of size 0, or one only declared in a unit) gives
            // way to one with members.
            if !entry.1 && has_members {
                *entry = (id, true);
            }
        }
        Ok(Self {
            raw: btf,
            index: index.into_iter().map(|(k, (id, _))| (k, id)).collect(),
            variables,
            percpu_section,
        })
    }

    /// The static per-CPU section (`.data..percpu`): its size and its variables' offsets and
    /// sizes, sorted by offset. Empty when the BTF has no such section.
    #[must_use]
    pub fn percpu_layout(&self) -> PercpuLayout {
        let Some(Ok(Type::Datasec(section))) = self
            .percpu_section
            .map(|id| self.raw.resolve_type_by_id(id))
        else {
            return PercpuLayout::default();
        };
        let mut variables: Vec<PercpuVariable> = section
            .variables
            .iter()
            .filter_map(|v| {
                let Ok(Type::Var(var)) = self.raw.resolve_type_by_id(v.get_type_id()?) else {
                    return None;
                };
                Some(PercpuVariable {
                    name: self.raw.resolve_name(&var).ok()?,
                    offset: u64::from(v.offset()),
                    size: v.size() as u64,
                })
            })
            .collect();
        variables.sort_by(|a, b| a.offset.cmp(&b.offset).then_with(|| a.name.cmp(&b.name)));
        PercpuLayout {
            bytes: section.size() as u64,
            variables,
        }
    }

    /// The struct or union `name` ("sock", "struct sock", "union foo", or a typedef of one).
    fn layout(&self, name: &str) -> Option<Desc> {
        [
            name.to_owned(),
            format!("struct {name}"),
            format!("union {name}"),
        ]
        .iter()
        .filter_map(|key| self.index.get(key))
        .find_map(|&id| {
            let desc = self.describe(id, 0)?;
            matches!(desc.inner, Inner::Composite(_)).then_some(desc)
        })
    }

    /// The size of struct or union `name` (also "struct NAME", "union NAME", or a typedef).
    #[must_use]
    pub fn struct_size(&self, name: &str) -> Option<u64> {
        self.layout(name).map(|d| d.size)
    }

    /// The dotted name of the innermost member of struct `name` at byte `offset`, array
    /// elements included (`frags[1].prev`). A byte that several members hold (bit-fields
    /// sharing it, union members) is named after the first of them in declaration order;
    /// padding inside a named struct or union member after that member. `None` when `offset`
    /// is past the struct, in padding no named member spans, or the struct is unknown. As
    /// [`DebugInfo::field_at`] names it.
    ///
    /// [`DebugInfo::field_at`]: crate::debuginfo::DebugInfo::field_at
    #[must_use]
    pub fn field_at(&self, name: &str, offset: u64) -> Option<String> {
        let Inner::Composite(s) = self.layout(name)?.inner else {
            return None;
        };
        let mut budget = MEMBER_BUDGET;
        match self.find_at(&s, offset, "", 1, &mut budget)? {
            Found::Held(name) | Found::Padding(name) => Some(name),
        }
    }

    /// The type of variable `name`, as far as naming its bytes needs (`struct rq` for
    /// `runqueues`); `None` for an array of structs, a variable the BTF does not list (pahole lists
    /// the per-CPU ones, and globals when asked), or variables of one name whose types
    /// differ.
    #[must_use]
    pub fn variable_type(&self, name: &str) -> Option<VariableType> {
        let mut id = (*self.variables.get(name)?)?;
        for _ in 0..MAX_DEPTH {
            let ty = self.raw.resolve_type_by_id(id).ok()?;
            let (keyword, named) = match &ty {
                Type::Const(t) | Type::Volatile(t) | Type::Restrict(t) => {
                    id = t.get_type_id()?;
                    continue;
                }
                Type::TypeTag(t) => {
                    id = t.get_type_id()?;
                    continue;
                }
                Type::Struct(t) | Type::Union(t) => {
                    let keyword = if matches!(ty, Type::Union(_)) {
                        "union "
                    } else {
                        "struct "
                    };
                    (keyword, self.raw.resolve_name(t))
                }
                Type::Typedef(t) => ("", self.raw.resolve_name(t)),
                _ => ("", Ok(String::new())),
            };
            let desc = self.describe(id, 0)?;
            return match desc.inner {
                Inner::Composite(_) => {
                    let name = named.ok().filter(|n| !n.is_empty())?;
                    Some(VariableType::Composite(format!("{keyword}{name}")))
                }
                Inner::Scalar if desc.size > 0 => Some(VariableType::Scalar { size: desc.size }),
                Inner::Array {
                    elem_size,
                    count,
                    elem: None,
                } if elem_size > 0 => Some(VariableType::ScalarArray { elem_size, count }),
                Inner::Scalar | Inner::Array { .. } => None,
            };
        }
        None
    }

    /// The byte offset of member `member` of struct `name`, looking through anonymous
    /// structs and unions (`slab_cache` of `struct slab` lies in one on some kernels).
    #[must_use]
    pub fn member_offset(&self, name: &str, member: &str) -> Option<u64> {
        let Inner::Composite(s) = self.layout(name)?.inner else {
            return None;
        };
        let mut budget = MEMBER_BUDGET;
        self.find_member(&s, member, 1, &mut budget)
    }

    /// The value of enumerator `name` (`PGTY_slab`, `PG_slab`) in any enum of the BTF. A
    /// walk over every type: for a few lookups when a collection starts, not per sample.
    #[must_use]
    pub fn enumerator(&self, name: &str) -> Option<i64> {
        let (first, last) = self.raw.base().type_id_range();
        (first..=last).find_map(|id| match self.raw.resolve_type_by_id(id).ok()? {
            Type::Enum(e) => e.members.iter().find_map(|m| {
                (self.raw.resolve_name(m).ok()? == name).then(|| {
                    if e.is_signed() {
                        i64::from(m.val() as i32)
                    } else {
                        i64::from(m.val())
                    }
                })
            }),
            Type::Enum64(e) => e
                .members
                .iter()
                .find_map(|m| (self.raw.resolve_name(m).ok()? == name).then(|| m.val() as i64)),
            _ => None,
        })
    }

    fn find_member(&self, s: &Struct, member: &str, depth: usize, budget: &mut u32) -> Option<u64> {
        if depth > MAX_DEPTH {
            return None;
        }
        for m in &s.members {
            *budget = budget.checked_sub(1)?;
            let start = u64::from(m.bit_offset() / 8);
            let name = self.raw.resolve_name(m).unwrap_or_default();
            if name == member {
                return Some(start);
            }
            if !name.is_empty() {
                continue;
            }
            let inner = m.get_type_id().and_then(|t| self.describe(t, depth));
            if let Some(Desc {
                inner: Inner::Composite(inner),
                ..
            }) = inner
            {
                if let Some(at) = self.find_member(&inner, member, depth + 1, budget) {
                    return Some(start + at);
                }
            }
        }
        None
    }

    /// The size and contents of type `id`, through typedefs and qualifiers; `None` when the
    /// chain is broken or too deep.
    fn describe(&self, id: u32, depth: usize) -> Option<Desc> {
        if depth > MAX_DEPTH {
            return None;
        }
        let ty = self.raw.resolve_type_by_id(id).ok()?;
        let size = |s: usize| s as u64;
        Some(match ty {
            Type::Struct(s) | Type::Union(s) => Desc {
                size: size(s.size()),
                inner: Inner::Composite(s),
            },
            Type::Int(t) => Desc::scalar(size(t.size())),
            Type::Enum(t) => Desc::scalar(size(t.size())),
            Type::Enum64(t) => Desc::scalar(size(t.size())),
            Type::Float(t) => Desc::scalar(size(t.size())),
            Type::Ptr(_) => Desc::scalar(POINTER_SIZE),
            Type::Typedef(t) => self.describe(t.get_type_id()?, depth + 1)?,
            Type::Const(t) | Type::Volatile(t) | Type::Restrict(t) => {
                self.describe(t.get_type_id()?, depth + 1)?
            }
            Type::TypeTag(t) => self.describe(t.get_type_id()?, depth + 1)?,
            Type::Array(a) => self.describe_array(&a, depth)?,
            Type::Fwd(f) => {
                // A declaration: the definition of that name, as DWARF's are followed.
                let keyword = if f.is_union() { "union" } else { "struct" };
                let name = self.raw.resolve_name(&f).ok()?;
                match self.index.get(&format!("{keyword} {name}")) {
                    Some(&def) if def != id => self.describe(def, depth + 1)?,
                    _ => Desc::scalar(0),
                }
            }
            // void, functions, variables, sections, tags: nothing a member holds by value.
            _ => Desc::scalar(0),
        })
    }

    /// An array: its element count and size. Arrays of arrays are one array of all their
    /// elements, indexed by the innermost element, as DWARF lists a C array's dimensions
    /// on one type.
    fn describe_array(&self, a: &btf_rs::Array, depth: usize) -> Option<Desc> {
        let elem = self.describe(a.get_type_id()?, depth + 1)?;
        let len = a.len() as u64;
        let size = len.saturating_mul(elem.size);
        let inner = match elem.inner {
            Inner::Array {
                elem_size,
                count,
                elem,
            } => Inner::Array {
                elem_size,
                count: len.saturating_mul(count),
                elem,
            },
            Inner::Composite(s) => Inner::Array {
                elem_size: elem.size,
                count: len,
                elem: Some(s),
            },
            Inner::Scalar => Inner::Array {
                elem_size: elem.size,
                count: len,
                elem: None,
            },
        };
        Some(Desc { size, inner })
    }

    /// The first member of `s`, in declaration order, that holds `offset`; else the innermost
    /// struct, union or array element whose padding it is. Union members overlap: one whose
    /// padding covers the byte must not hide a later one that holds it (`restart_block.futex`
    /// is shorter than `restart_block.nanosleep`). In a struct, members do not overlap (but for
    /// bit-fields sharing a byte, which all hold it), so the first that spans it is the answer.
    /// As `find_at` in [`crate::debuginfo`] finds it.
    fn find_at(
        &self,
        s: &Struct,
        offset: u64,
        prefix: &str,
        depth: usize,
        budget: &mut u32,
    ) -> Option<Found> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut padding = None;
        for m in &s.members {
            *budget = budget.checked_sub(1)?;
            let start = u64::from(m.bit_offset() / 8);
            if offset < start {
                continue;
            }
            let Some(desc) = m.get_type_id().and_then(|t| self.describe(t, depth)) else {
                continue;
            };
            let (size, inner) = match m.bitfield_size() {
                // A bit-field: the bytes it occupies, nothing inside.
                Some(bits) if bits > 0 => (
                    u64::from(m.bit_offset() % 8 + bits).div_ceil(8),
                    Inner::Scalar,
                ),
                // A bit-field in a struct without the kind flag (its width is in the INT
                // type, which btf-rs does not show): name the byte it starts in. pahole
                // sets the flag for every struct with bit-fields.
                _ if m.bit_offset() % 8 != 0 => (1, Inner::Scalar),
                _ => (desc.size, desc.inner),
            };
            let within = offset - start;
            if within >= size {
                continue;
            }
            let member = self.raw.resolve_name(m).unwrap_or_default();
            let named = !member.is_empty();
            let name = match (named, prefix.is_empty()) {
                (false, _) => prefix.to_owned(),
                (true, true) => member,
                (true, false) => format!("{prefix}.{member}"),
            };
            let found = match inner {
                // An unnamed scalar is an unnamed bit-field: padding that names nothing.
                Inner::Scalar => named.then_some(Found::Held(name)),
                Inner::Composite(inner) => self
                    .find_at(&inner, within, &name, depth + 1, budget)
                    .or_else(|| named.then_some(Found::Padding(name))),
                Inner::Array {
                    elem_size,
                    count,
                    elem,
                } => Some(if elem_size > 0 && within / elem_size < count.max(1) {
                    let element = format!("{name}[{}]", within / elem_size);
                    match elem {
                        None => Found::Held(element),
                        Some(e) => self
                            .find_at(&e, within % elem_size, &element, depth + 1, budget)
                            .unwrap_or(Found::Padding(element)),
                    }
                } else {
                    Found::Held(name)
                }),
            };
            match found {
                Some(held @ Found::Held(_)) => return Some(held),
                Some(p @ Found::Padding(_)) => {
                    padding.get_or_insert(p);
                }
                None => {}
            }
        }
        padding
    }
}

/// Checks the header's magic and that its sections lie within `bytes`.
fn check_header(bytes: &[u8]) -> Result<(), BtfError> {
    let Some(header) = bytes.get(..HEADER_LEN) else {
        return Err(BtfError::Short { len: bytes.len() });
    };
    let magic = u16::from_le_bytes([header[0], header[1]]);
    let little = match magic {
        0xeb9f => true,
        0x9feb => false,
        _ => return Err(BtfError::Magic { magic }),
    };
    let word = |at: usize| {
        let b = [header[at], header[at + 1], header[at + 2], header[at + 3]];
        u64::from(if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let hdr_len = word(4);
    for (section, off, len) in [("type", word(8), word(12)), ("string", word(16), word(20))] {
        let start = hdr_len + off;
        let end = start + len;
        if end > bytes.len() as u64 {
            return Err(BtfError::OutOfBounds {
                section,
                start,
                end,
                len: bytes.len(),
            });
        }
    }
    Ok(())
}

impl FieldSource for Btf {
    fn has_struct(&self, name: &str) -> bool {
        self.layout(name).is_some()
    }

    fn field_at(&self, struct_name: &str, offset: u64) -> Option<String> {
        Self::field_at(self, struct_name, offset)
    }

    fn variable_type(&self, name: &str) -> Option<VariableType> {
        Self::variable_type(self, name)
    }
}
