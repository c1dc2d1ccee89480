//! Debug information of the profiled kernel: a vmlinux (and, optionally, module `.ko` files)
//! read with `object`, `gimli` and `addr2line`.
//!
//! What it gives:
//! - **source lines**: an ip to its function, file and line, inlined frames included
//!   ([`DebugInfo::frames`]);
//! - **exact symbol sizes** from the ELF symbol table, where kallsyms only allows estimates
//!   ([`DebugInfo::data_symbol`], [`DebugInfo::percpu_symbol`], [`DebugInfo::symbol_size`]);
//! - **struct layouts** from DWARF, nested members flattened to dotted names
//!   ([`DebugInfo::struct_fields`], [`DebugInfo::field_at`]);
//! - **the struct a register points to** at an instruction: the pointer variable DWARF
//!   locates in it there, perf's data-type method ([`DebugInfo::pointer_target`], the DWARF
//!   side in `debuginfo/instruction_types.rs`);
//! - **validation** that the vmlinux is the kernel that was profiled ([`DebugInfo::matches`]):
//!   its GNU build id and `linux_banner` against the profile's. A wrong vmlinux would give
//!   wrong names everywhere, so a mismatch is an error, never a warning.
//!
//! Addresses: profiles hold run-time addresses. With KASLR the kernel image is shifted from
//! its link addresses; [`DebugInfo::use_kallsyms`] finds that shift from the profile's
//! kallsyms snapshot and, with a debug directory, loads each profiled module's `MODULE.ko`
//! and places its sections where kallsyms says the module's symbols are.
//!
//! Module support and its limits: a `.ko` is a relocatable object. Its DWARF is relocated here
//! (the `.rela.debug_*` sections applied), each allocated section placed at the address that a
//! kallsyms symbol of that section shows. Sections without any symbol in kallsyms (and so
//! without a known address) stay at 0, and lookups into them find nothing. Per-CPU variables
//! of modules are not resolved (the module's per-CPU block address is not in the profile).
//!
//! The parsing core ([`DebugInfo::from_bytes`], [`DebugInfo::add_module`]) takes bytes and does
//! no I/O; [`DebugInfo::load`] and [`DebugInfo::use_kallsyms`] read files.

use std::borrow::Cow;
use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use gimli::{AttributeValue, EndianArcSlice, Reader as _, RunTimeEndian, UnitOffset};
use object::{Object, ObjectSection, ObjectSymbol, RelocationKind, RelocationTarget};

use crate::symbols::Kallsyms;
use dprof_format::ProfileHeader;
use instruction_types::RegisterVariable;

mod instruction_types;
#[cfg(test)]
mod tests;

/// The gimli reader: slices of one shared buffer (the file, or a relocated section).
type R = EndianArcSlice<RunTimeEndian>;

/// Lower-case hex of `bytes`.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The descriptor of the GNU build id note (`NT_GNU_BUILD_ID`, type 3, name "GNU") in a
/// blob of ELF notes, as `/sys/kernel/notes` and a `.notes` section hold them (4-byte
/// aligned, native little-endian). `None` when there is none or the blob is malformed.
#[must_use]
pub fn gnu_build_id(notes: &[u8]) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let u32_at = |at: usize| -> Option<u32> {
        let b = notes.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut at = 0usize;
    while at + 12 <= notes.len() {
        let namesz = usize::try_from(u32_at(at)?).ok()?;
        let descsz = usize::try_from(u32_at(at + 4)?).ok()?;
        let kind = u32_at(at + 8)?;
        let name_at = at + 12;
        let desc_at = name_at.checked_add(namesz.checked_next_multiple_of(4)?)?;
        let end = desc_at.checked_add(descsz.checked_next_multiple_of(4)?)?;
        let name = notes.get(name_at..name_at + namesz)?;
        let desc = notes.get(desc_at..desc_at + descsz)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(desc);
        }
        at = end;
    }
    None
}

/// Why debug information could not be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DebugInfoError {
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an ELF object dprof can read.
    #[error("{} is not an ELF file dprof can read: {what}", path.display())]
    NotElf {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        what: String,
    },
    /// The file has no DWARF.
    #[error(
        "{} has no debug information (.debug_info): use the vmlinux of a kernel built with \
         CONFIG_DEBUG_INFO, not a stripped one",
        path.display()
    )]
    NoDebugInfo {
        /// The file.
        path: PathBuf,
    },
    /// The DWARF is malformed.
    #[error("the debug information of {} is malformed", path.display())]
    Dwarf {
        /// The file.
        path: PathBuf,
        /// What gimli said.
        #[source]
        source: gimli::Error,
    },
    /// The vmlinux's banner differs from the profiled kernel's.
    #[error(
        "vmlinux {} does not match the profile: its banner says {ours:?}, the profiled \
         kernel's says {theirs:?}",
        path.display()
    )]
    BannerMismatch {
        /// The vmlinux.
        path: PathBuf,
        /// Its `linux_banner`.
        ours: String,
        /// The profile's `/proc/version`.
        theirs: String,
    },
    /// The vmlinux's build id differs from the profiled kernel's.
    #[error(
        "vmlinux {} does not match the profile: its build id is {ours}, the profiled kernel's \
         is {theirs}",
        path.display()
    )]
    BuildIdMismatch {
        /// The vmlinux.
        path: PathBuf,
        /// Its build id (hex).
        ours: String,
        /// The profile's build id (hex).
        theirs: String,
    },
    /// The vmlinux's release differs from the profile's (when nothing stronger can be
    /// compared).
    #[error(
        "vmlinux {} does not match the profile: it is release {ours:?}, the profiled kernel \
         was {theirs:?}",
        path.display()
    )]
    ReleaseMismatch {
        /// The vmlinux.
        path: PathBuf,
        /// The release in its banner.
        ours: String,
        /// The profile's `kernel_release`.
        theirs: String,
    },
    /// Nothing to compare: the vmlinux has neither build id nor banner, or the profile
    /// recorded neither.
    #[error(
        "cannot check that vmlinux {} is the profiled kernel: {why}",
        path.display()
    )]
    CannotVerify {
        /// The vmlinux.
        path: PathBuf,
        /// What is missing.
        why: String,
    },
    /// The profile's kallsyms and the vmlinux disagree on where the kernel is.
    #[error(
        "cannot place vmlinux {} at the profile's addresses: {why}",
        path.display()
    )]
    Placement {
        /// The vmlinux.
        path: PathBuf,
        /// What disagreed.
        why: String,
    },
}

/// How [`DebugInfo::matches`] established that the vmlinux is the profiled kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchedBy {
    /// The GNU build ids are equal (the strongest check).
    BuildId,
    /// The banners (`linux_banner` and `/proc/version`) are equal: same release, build user,
    /// host, compiler and build number and time.
    Banner,
    /// Only the release in the banner equals the profile's `kernel_release` (a profile from
    /// before dprof recorded the banner): a rebuilt kernel of the same release would pass, so
    /// callers should say so.
    ReleaseOnly,
}

/// One frame of an ip's source position: innermost (inlined) first, the real function last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFrame {
    /// The function (as named in DWARF), if known.
    pub function: Option<String>,
    /// The source file, if known.
    pub file: Option<String>,
    /// The line, if known.
    pub line: Option<u32>,
    /// Whether this frame was inlined into the next one.
    pub inlined: bool,
}

/// A variable from the ELF symbol table, with its exact size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSymbol<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its run-time start address (for per-CPU variables: the offset in the per-CPU area).
    pub start: u64,
    /// Its size from the symbol table.
    pub size: u64,
    /// Bytes from `start` of the address looked up.
    pub offset: u64,
    /// A per-CPU variable.
    pub percpu: bool,
    /// The module it belongs to; `None` for vmlinux.
    pub module: Option<&'a str>,
}

/// One member of a struct, nested members flattened (`sk.__sk_common.skc_refcnt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Dotted path from the struct; members of anonymous structs and unions appear without a
    /// component for the anonymous member, as C code names them.
    pub name: String,
    /// Byte offset from the start of the struct (for bit-fields, the byte of their first bit).
    pub offset: u64,
    /// Size in bytes (for bit-fields, the bytes their bits span).
    pub size: u64,
    /// The member's type as C spells it (`int`, `struct list_head`, `char [16]`, `void *`).
    pub type_name: String,
}

/// The struct a memory operand's base register points to at an instruction, from the DWARF
/// location of the variable it holds there ([`DebugInfo::pointer_target`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointerTarget {
    /// The variable or parameter in the register.
    pub variable: String,
    /// The struct or union its type points to, bare (`sk_buff`), as
    /// [`DebugInfo::field_at`] takes it.
    pub struct_name: String,
    /// The member at the operand's displacement, when the layout is known and holds it.
    pub field: Option<String>,
}

/// A kernel object's symbol with its exact size.
#[derive(Clone, Debug)]
struct ElfSymbol {
    name: String,
    /// Run-time address (link address for vmlinux before KASLR).
    address: u64,
    size: u64,
    percpu: bool,
}

/// A member of a laid-out type.
#[derive(Clone, Debug)]
struct Member {
    name: Option<String>,
    offset: u64,
    size: u64,
    type_name: String,
    inner: Inner,
}

/// What a member holds, as far as naming offsets inside it needs.
#[derive(Clone, Debug)]
enum Inner {
    Scalar,
    Composite(Vec<Member>),
    Array {
        elem_size: u64,
        count: u64,
        /// The element's members, when elements are structs or unions.
        elem: Vec<Member>,
    },
}

/// What a global or per-CPU variable is, for naming the bytes of it that samples touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VariableType {
    /// A struct or union, or a typedef of one, by the name [`crate::report::FieldSource::field_at`] takes
    /// (`struct rq` for `runqueues`).
    Composite(String),
    /// A number, pointer or enum of `size` bytes: its bytes are the variable itself.
    Scalar {
        /// Bytes.
        size: u64,
    },
    /// An array of numbers, pointers or enums: its bytes are its elements (`name[i]`).
    ScalarArray {
        /// Bytes per element.
        elem_size: u64,
        /// Elements; 0 when the declaration does not say (`extern long table[]`).
        count: u64,
    },
}

impl VariableType {
    /// The name of the bytes at `offset` in variable `variable` of this type, unless they
    /// are past it or the type is a struct (whose fields name them).
    #[must_use]
    pub fn scalar_at(&self, variable: &str, offset: u64) -> Option<String> {
        match *self {
            Self::Composite(_) => None,
            Self::Scalar { size } => (offset < size).then(|| variable.to_owned()),
            Self::ScalarArray { elem_size, count } => {
                let index = offset.checked_div(elem_size)?;
                (count == 0 || index < count).then(|| format!("{variable}[{index}]"))
            }
        }
    }
}

/// A type as described by DWARF, resolved as far as layouts need.
struct TypeDesc {
    name: String,
    size: Option<u64>,
    inner: Inner,
}

/// Deepest nesting of struct members expanded (real kernel types stay far below).
const MAX_DEPTH: usize = 24;

/// Most qualifiers (const, volatile, ...) followed on one type: C stacks a few at most.
const MAX_QUALIFIERS: usize = 8;

/// A function's code range and DIE: `(begin, end, offset)`.
type FunctionRange = (u64, u64, UnitOffset);

/// What DWARF locates in a register at an instruction, by (file address, DWARF register).
type RegisterVariables = HashMap<(u64, u16), Option<Rc<RegisterVariable>>>;

/// One ELF file's symbols and DWARF.
struct ElfDebug {
    /// Address shift from the file's addresses to run-time ones (KASLR for vmlinux).
    shift: u64,
    /// Byte order, which decides where DWARF 2 bit-field offsets (`DW_AT_bit_offset`) count
    /// from.
    little_endian: bool,
    /// Data and per-CPU symbols with a size, sorted by address.
    objects: Vec<ElfSymbol>,
    /// Name to index in `objects` (and sizes of functions, by name).
    sizes: HashMap<String, u64>,
    /// Run-time ranges of the code this file covers (modules); empty for vmlinux.
    text: Vec<Range<u64>>,
    banner: Option<String>,
    build_id: Option<Vec<u8>>,
    /// Text symbol addresses by name, to place the file (before `shift`).
    text_symbols: HashMap<String, u64>,
    dwarf: Arc<gimli::Dwarf<R>>,
    lines: addr2line::Context<R>,
    units: OnceCell<Vec<gimli::Unit<R>>>,
    /// Struct, union and typedef names to their (unit index, offset).
    type_index: OnceCell<HashMap<String, (usize, UnitOffset)>>,
    /// Variables at the top level of units, by name: every definition (statics of one name
    /// in several units), else the first declaration.
    variable_index: OnceCell<HashMap<String, Vec<(usize, UnitOffset)>>>,
    layouts: RefCell<HashMap<String, Option<Rc<Member>>>>,
    /// Each unit's code ranges, for [`DebugInfo::pointer_target`] (read on first use).
    unit_ranges: OnceCell<Vec<(u64, u64, usize)>>,
    /// Each unit's top-level functions, read when one of its ips is first asked about.
    unit_functions: RefCell<HashMap<usize, Rc<[FunctionRange]>>>,
    /// Answers by (file address, DWARF register).
    register_variables: RefCell<RegisterVariables>,
}

/// Debug information of a vmlinux and, optionally, of modules.
pub struct DebugInfo {
    path: PathBuf,
    debug_dir: Option<PathBuf>,
    vmlinux: ElfDebug,
    /// Loaded modules by name, in name order.
    modules: Vec<(String, ElfDebug)>,
}

impl std::fmt::Debug for DebugInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugInfo")
            .field("path", &self.path)
            .field("debug_dir", &self.debug_dir)
            .field("banner", &self.vmlinux.banner)
            .field(
                "modules",
                &self.modules.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

fn elf_error(path: &Path, e: &object::Error) -> DebugInfoError {
    DebugInfoError::NotElf {
        path: path.to_path_buf(),
        what: e.to_string(),
    }
}

fn dwarf_error(path: &Path) -> impl Fn(gimli::Error) -> DebugInfoError + '_ {
    move |source| DebugInfoError::Dwarf {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `value` as a little- or big-endian integer of `size` bytes at `at`.
fn patch(data: &mut [u8], at: usize, size: u8, value: u64, little: bool) {
    let n = usize::from(size / 8);
    let Some(slot) = data.get_mut(at..at + n) else {
        return;
    };
    let bytes = if little {
        value.to_le_bytes()
    } else {
        value.to_be_bytes()
    };
    if little {
        slot.copy_from_slice(&bytes[..n]);
    } else {
        slot.copy_from_slice(&bytes[8 - n..]);
    }
}

impl ElfDebug {
    /// Parses one ELF file. `bases` places sections of a relocatable file (section name to
    /// run-time address); an executable's own addresses are kept.
    #[expect(clippy::too_many_lines, reason = "one pass over one file")]
    fn parse(
        path: &Path,
        data: &Arc<[u8]>,
        bases: &dyn Fn(&str) -> Option<u64>,
    ) -> Result<Self, DebugInfoError> {
        let file = object::File::parse(&**data).map_err(|e| elf_error(path, &e))?;
        let relocatable = file.kind() == object::ObjectKind::Relocatable;
        let little = file.is_little_endian();
        let endian = if little {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        // Section index to its run-time base (relocatable files only).
        let section_base = |index: object::SectionIndex| -> u64 {
            if !relocatable {
                return 0;
            }
            file.section_by_index(index)
                .ok()
                .and_then(|s| s.name().ok().and_then(bases))
                .unwrap_or(0)
        };
        if file.section_by_name(".debug_info").is_none() {
            return Err(DebugInfoError::NoDebugInfo {
                path: path.to_path_buf(),
            });
        }
        let whole = R::new(Arc::clone(data), endian);
        let load = |id: gimli::SectionId| -> Result<R, gimli::Error> {
            let Some(section) = file.section_by_name(id.name()) else {
                return Ok(R::new(Arc::from(&[][..]), endian));
            };
            let bytes = section.uncompressed_data().map_err(|_| gimli::Error::Io)?;
            if !relocatable {
                if let Cow::Borrowed(slice) = bytes {
                    // A slice of the file: share the buffer instead of copying it.
                    let start = slice.as_ptr() as usize - data.as_ptr() as usize;
                    return Ok(whole.range(start..start + slice.len()));
                }
                return Ok(R::new(Arc::from(bytes.into_owned()), endian));
            }
            let mut owned = bytes.into_owned();
            for (offset, reloc) in section.relocations() {
                if reloc.kind() != RelocationKind::Absolute || !matches!(reloc.size(), 32 | 64) {
                    continue;
                }
                let target = match reloc.target() {
                    RelocationTarget::Symbol(index) => file.symbol_by_index(index).ok().map(|s| {
                        s.section_index()
                            .map_or(0, section_base)
                            .wrapping_add(s.address())
                    }),
                    RelocationTarget::Section(index) => Some(section_base(index)),
                    _ => None,
                };
                let Some(target) = target else { continue };
                let value = target.wrapping_add(reloc.addend() as u64);
                if let Ok(at) = usize::try_from(offset) {
                    patch(&mut owned, at, reloc.size(), value, little);
                }
            }
            Ok(R::new(Arc::from(owned), endian))
        };
        let dwarf = gimli::Dwarf::load(load).map_err(dwarf_error(path))?;
        let dwarf = Arc::new(dwarf);
        let lines =
            addr2line::Context::from_arc_dwarf(Arc::clone(&dwarf)).map_err(dwarf_error(path))?;

        let mut objects = Vec::new();
        let mut sizes = HashMap::new();
        let mut text_symbols = HashMap::new();
        let mut banner = None;
        let mut text = Vec::new();
        for sym in file.symbols() {
            let Ok(name) = sym.name() else { continue };
            let Some(index) = sym.section_index() else {
                continue;
            };
            if name.is_empty() || sym.is_undefined() {
                continue;
            }
            let address = section_base(index).wrapping_add(sym.address());
            let section = file.section_by_index(index).ok();
            let section_name = section.as_ref().and_then(|s| s.name().ok()).unwrap_or("");
            let in_text = section
                .as_ref()
                .is_some_and(|s| s.kind() == object::SectionKind::Text);
            match sym.kind() {
                object::SymbolKind::Unknown | object::SymbolKind::Label if in_text => {
                    // Markers such as _stext.
                    text_symbols.entry(name.to_owned()).or_insert(address);
                }
                object::SymbolKind::Text => {
                    text_symbols.insert(name.to_owned(), address);
                    if sym.size() > 0 {
                        sizes.insert(name.to_owned(), sym.size());
                    }
                }
                object::SymbolKind::Data | object::SymbolKind::Tls => {
                    if name == "linux_banner" {
                        banner = section.as_ref().and_then(|s| {
                            let bytes = s.uncompressed_data().ok()?;
                            let start = usize::try_from(sym.address() - s.address()).ok()?;
                            let end = start + usize::try_from(sym.size()).ok()?;
                            let raw = bytes.get(start..end.min(bytes.len()))?;
                            let raw = raw.split(|&b| b == 0).next()?;
                            Some(String::from_utf8_lossy(raw).trim().to_owned())
                        });
                    }
                    let size = sizes.entry(name.to_owned()).or_insert(0);
                    *size = (*size).max(sym.size());
                    objects.push(ElfSymbol {
                        name: name.to_owned(),
                        address,
                        size: sym.size(),
                        percpu: section_name == ".data..percpu",
                    });
                }
                _ => {}
            }
        }
        objects.sort_by(|a, b| a.address.cmp(&b.address).then(b.size.cmp(&a.size)));
        if relocatable {
            for section in file.sections() {
                let is_text = section.kind() == object::SectionKind::Text;
                if let (true, Ok(name)) = (is_text, section.name()) {
                    if let Some(base) = bases(name) {
                        text.push(base..base + section.size());
                    }
                }
            }
        }
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        Ok(Self {
            shift: 0,
            little_endian: little,
            objects,
            sizes,
            text,
            banner,
            build_id,
            text_symbols,
            dwarf,
            lines,
            units: OnceCell::new(),
            type_index: OnceCell::new(),
            variable_index: OnceCell::new(),
            layouts: RefCell::new(HashMap::new()),
            unit_ranges: OnceCell::new(),
            unit_functions: RefCell::new(HashMap::new()),
            register_variables: RefCell::new(HashMap::new()),
        })
    }

    /// The pointer-to-struct variable DWARF locates in `register` at run-time address `ip`.
    fn register_variable(&self, ip: u64, register: u16) -> Option<Rc<RegisterVariable>> {
        let pc = ip.wrapping_sub(self.shift);
        if let Some(cached) = self.register_variables.borrow().get(&(pc, register)) {
            return cached.clone();
        }
        let units = self.units();
        let ranges = self
            .unit_ranges
            .get_or_init(|| instruction_types::unit_code_ranges(&self.dwarf, units));
        let found = instruction_types::units_at(ranges, pc).find_map(|u| {
            let unit = &units[u];
            let functions = self.unit_functions(u)?;
            let function = instruction_types::function_at(&functions, pc)?;
            instruction_types::register_variable(&self.dwarf, unit, function, pc, register)
                .ok()
                .flatten()
        });
        let found = found.map(Rc::new);
        self.register_variables
            .borrow_mut()
            .insert((pc, register), found.clone());
        found
    }

    fn unit_functions(&self, u: usize) -> Option<Rc<[FunctionRange]>> {
        if let Some(f) = self.unit_functions.borrow().get(&u) {
            return Some(Rc::clone(f));
        }
        let functions: Rc<[_]> = instruction_types::unit_functions(&self.dwarf, &self.units()[u])
            .ok()?
            .into();
        self.unit_functions
            .borrow_mut()
            .insert(u, Rc::clone(&functions));
        Some(functions)
    }

    fn frames(&self, ip: u64) -> Vec<SourceFrame> {
        let probe = ip.wrapping_sub(self.shift);
        let Ok(mut iter) = self.lines.find_frames(probe).skip_all_loads() else {
            return Vec::new();
        };
        let mut frames = Vec::new();
        while let Ok(Some(frame)) = iter.next() {
            frames.push(SourceFrame {
                function: frame
                    .function
                    .as_ref()
                    .and_then(|f| f.raw_name().ok())
                    .map(Cow::into_owned),
                file: frame
                    .location
                    .as_ref()
                    .and_then(|l| l.file)
                    .map(str::to_owned),
                line: frame.location.as_ref().and_then(|l| l.line),
                inlined: true,
            });
        }
        if let Some(last) = frames.last_mut() {
            last.inlined = false;
        }
        frames
    }

    /// The object among `objects` (percpu or not) holding `addr` (a run-time address).
    fn object_at(&self, addr: u64, percpu: bool) -> Option<(&ElfSymbol, u64)> {
        let addr = if percpu {
            addr
        } else {
            addr.wrapping_sub(self.shift)
        };
        // Objects may overlap (aliases); look back over those starting at or below addr. A
        // sized object wins over a size-0 alias at its address (the linker's
        // `const_pcpu_hot = pcpu_hot`), which has no variable of its own in the DWARF and
        // so no type; the alias names only an address no sized object holds.
        let after = self.objects.partition_point(|s| s.address <= addr);
        let candidates = || {
            self.objects[..after]
                .iter()
                .rev()
                .take(16)
                .filter(|s| s.percpu == percpu)
        };
        candidates()
            .find(|s| addr - s.address < s.size)
            .or_else(|| candidates().find(|s| s.size == 0 && s.address == addr))
            .map(|s| (s, addr - s.address))
    }

    fn units(&self) -> &[gimli::Unit<R>] {
        self.units.get_or_init(|| {
            let mut units = Vec::new();
            let mut headers = self.dwarf.units();
            while let Ok(Some(header)) = headers.next() {
                if let Ok(unit) = self.dwarf.unit(header) {
                    units.push(unit);
                }
            }
            units
        })
    }

    /// Struct, union and typedef definitions by name, from the top level of every unit.
    fn type_index(&self) -> &HashMap<String, (usize, UnitOffset)> {
        self.type_index.get_or_init(|| {
            let mut index = HashMap::new();
            for (i, unit) in self.units().iter().enumerate() {
                let _ = self.index_unit(i, unit, &mut index);
            }
            index
        })
    }

    /// Calls `each` on every entry at the top level of `unit` (children of its root).
    fn top_level(
        unit: &gimli::Unit<R>,
        mut each: impl FnMut(&gimli::DebuggingInformationEntry<'_, '_, R>) -> gimli::Result<()>,
    ) -> gimli::Result<()> {
        let mut tree = unit.entries_tree(None)?;
        let root = tree.root()?;
        let mut children = root.children();
        while let Some(child) = children.next()? {
            each(child.entry())?;
        }
        Ok(())
    }

    fn is_declaration(entry: &gimli::DebuggingInformationEntry<'_, '_, R>) -> gimli::Result<bool> {
        Ok(matches!(
            entry.attr_value(gimli::DW_AT_declaration)?,
            Some(AttributeValue::Flag(true))
        ))
    }

    fn index_unit(
        &self,
        i: usize,
        unit: &gimli::Unit<R>,
        index: &mut HashMap<String, (usize, UnitOffset)>,
    ) -> gimli::Result<()> {
        Self::top_level(unit, |entry| {
            let prefix = match entry.tag() {
                gimli::DW_TAG_structure_type => "struct ",
                gimli::DW_TAG_union_type => "union ",
                gimli::DW_TAG_typedef => "",
                _ => return Ok(()),
            };
            if Self::is_declaration(entry)? {
                return Ok(());
            }
            let Some(name) = entry.attr_value(gimli::DW_AT_name)? else {
                return Ok(());
            };
            let name = self.dwarf.attr_string(unit, name)?;
            let name = name.to_string_lossy()?;
            index
                .entry(format!("{prefix}{name}"))
                .or_insert((i, entry.offset()));
            Ok(())
        })
    }

    /// Variables by name, from the top level of every unit: every definition, else the
    /// first declaration (of a variable the linker script defines).
    fn variable_index(&self) -> &HashMap<String, Vec<(usize, UnitOffset)>> {
        self.variable_index.get_or_init(|| {
            let mut index: HashMap<String, Vec<(usize, UnitOffset)>> = HashMap::new();
            let mut declared: HashMap<String, (usize, UnitOffset)> = HashMap::new();
            for (i, unit) in self.units().iter().enumerate() {
                let _ = self.index_unit_variables(i, unit, &mut index, &mut declared);
            }
            for (name, at) in declared {
                index.entry(name).or_insert_with(|| vec![at]);
            }
            index
        })
    }

    fn index_unit_variables(
        &self,
        i: usize,
        unit: &gimli::Unit<R>,
        index: &mut HashMap<String, Vec<(usize, UnitOffset)>>,
        declared: &mut HashMap<String, (usize, UnitOffset)>,
    ) -> gimli::Result<()> {
        Self::top_level(unit, |entry| {
            if entry.tag() != gimli::DW_TAG_variable {
                return Ok(());
            }
            if Self::is_declaration(entry)? {
                if let Some(name) = self.name_of(unit, entry) {
                    declared.entry(name).or_insert((i, entry.offset()));
                }
                return Ok(());
            }
            // A definition that completes a declaration has its name there.
            let named = match entry.attr_value(gimli::DW_AT_specification)? {
                Some(spec) => self.type_ref(i, &spec).and_then(|(du, doff)| {
                    let decl = self.units()[du].entry(doff).ok()?;
                    self.name_of(&self.units()[du], &decl)
                }),
                None => self.name_of(unit, entry),
            };
            if let Some(name) = named {
                index.entry(name).or_default().push((i, entry.offset()));
            }
            Ok(())
        })
    }

    /// The type of the variable at (`u`, `offset`), or of the declaration it completes.
    fn variable_type_ref(&self, u: usize, offset: UnitOffset) -> Option<(usize, UnitOffset)> {
        let entry = self.units()[u].entry(offset).ok()?;
        if let Some(ty) = entry.attr_value(gimli::DW_AT_type).ok()? {
            return self.type_ref(u, &ty);
        }
        let spec = entry.attr_value(gimli::DW_AT_specification).ok()??;
        let (du, doff) = self.type_ref(u, &spec)?;
        let decl = self.units()[du].entry(doff).ok()?;
        let ty = decl.attr_value(gimli::DW_AT_type).ok()??;
        self.type_ref(du, &ty)
    }

    /// (`u`, `offset`) past const, volatile, restrict and _Atomic.
    fn unqualified(&self, mut u: usize, mut offset: UnitOffset) -> Option<(usize, UnitOffset)> {
        for _ in 0..MAX_QUALIFIERS {
            let entry = self.units()[u].entry(offset).ok()?;
            if !matches!(
                entry.tag(),
                gimli::DW_TAG_const_type
                    | gimli::DW_TAG_volatile_type
                    | gimli::DW_TAG_restrict_type
                    | gimli::DW_TAG_atomic_type
            ) {
                return Some((u, offset));
            }
            let next = entry.attr_value(gimli::DW_AT_type).ok()??;
            (u, offset) = self.type_ref(u, &next)?;
        }
        None
    }

    /// The type of variable `name`, as far as naming its bytes needs; `None` for an array of
    /// structs, a variable no unit defines or declares, or statics of one name whose types
    /// differ. Definitions first; a variable that only the linker script defines (`jiffies`)
    /// by its first declaration.
    fn variable_type(&self, name: &str) -> Option<VariableType> {
        let mut found: Option<VariableType> = None;
        for &(u, offset) in self.variable_index().get(name)? {
            let (tu, toff) = self.variable_type_ref(u, offset)?;
            let (tu, toff) = self.unqualified(tu, toff)?;
            let unit = &self.units()[tu];
            let entry = unit.entry(toff).ok()?;
            let named = match entry.tag() {
                gimli::DW_TAG_structure_type => {
                    Some(format!("struct {}", self.name_of(unit, &entry)?))
                }
                gimli::DW_TAG_union_type => Some(format!("union {}", self.name_of(unit, &entry)?)),
                gimli::DW_TAG_typedef => self.name_of(unit, &entry),
                _ => None,
            };
            let this = match named {
                Some(name) if self.layout(&name).is_some() => VariableType::Composite(name),
                _ => match self.describe(tu, toff, 0).ok()? {
                    TypeDesc {
                        inner: Inner::Scalar,
                        size: Some(size),
                        ..
                    } if size > 0 => VariableType::Scalar { size },
                    TypeDesc {
                        inner:
                            Inner::Array {
                                elem_size,
                                count,
                                elem,
                            },
                        ..
                    } if elem.is_empty() && elem_size > 0 => {
                        VariableType::ScalarArray { elem_size, count }
                    }
                    _ => return None,
                },
            };
            match &found {
                Some(other) if *other != this => return None,
                _ => found = Some(this),
            }
        }
        found
    }

    /// The unit index and offset an attribute's type reference points to.
    fn type_ref(
        &self,
        unit_index: usize,
        value: &AttributeValue<R>,
    ) -> Option<(usize, UnitOffset)> {
        match *value {
            AttributeValue::UnitRef(offset) => Some((unit_index, offset)),
            AttributeValue::DebugInfoRef(offset) => {
                let units = self.units();
                units.iter().enumerate().find_map(|(i, u)| {
                    let unit_offset = offset.to_unit_offset(&u.header)?;
                    Some((i, unit_offset))
                })
            }
            _ => None,
        }
    }

    /// The layout of the struct or union `name` ("sock", "struct sock", "union foo", or a
    /// typedef of one).
    fn layout(&self, name: &str) -> Option<Rc<Member>> {
        if let Some(cached) = self.layouts.borrow().get(name) {
            return cached.clone();
        }
        let index = self.type_index();
        let found = [
            name.to_owned(),
            format!("struct {name}"),
            format!("union {name}"),
        ]
        .into_iter()
        .find_map(|key| index.get(&key).copied());
        let layout = found.and_then(|(u, offset)| {
            let desc = self.describe(u, offset, 0).ok()?;
            matches!(desc.inner, Inner::Composite(_)).then(|| {
                Rc::new(Member {
                    name: None,
                    offset: 0,
                    size: desc.size.unwrap_or(0),
                    type_name: desc.name,
                    inner: desc.inner,
                })
            })
        });
        self.layouts
            .borrow_mut()
            .insert(name.to_owned(), layout.clone());
        layout
    }

    fn attr_u64(
        entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
        at: gimli::DwAt,
    ) -> Option<u64> {
        entry
            .attr_value(at)
            .ok()
            .flatten()
            .and_then(|v| v.udata_value())
    }

    fn name_of(
        &self,
        unit: &gimli::Unit<R>,
        entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    ) -> Option<String> {
        let value = entry.attr_value(gimli::DW_AT_name).ok()??;
        let s = self.dwarf.attr_string(unit, value).ok()?;
        Some(s.to_string_lossy().ok()?.into_owned())
    }

    /// Describes the type at (`u`, `offset`): its C name, size and, for structs, unions and
    /// arrays of them, members. `depth` bounds the expansion of nested composites.
    fn describe(&self, u: usize, offset: UnitOffset, depth: usize) -> gimli::Result<TypeDesc> {
        let unit = &self.units()[u];
        let entry = unit.entry(offset)?;
        let next = entry
            .attr_value(gimli::DW_AT_type)?
            .and_then(|v| self.type_ref(u, &v));
        let byte_size = Self::attr_u64(&entry, gimli::DW_AT_byte_size);
        let name = self.name_of(unit, &entry);
        let tag = entry.tag();
        let opaque = |n: &str| TypeDesc {
            name: n.to_owned(),
            size: byte_size,
            inner: Inner::Scalar,
        };
        Ok(match tag {
            gimli::DW_TAG_enumeration_type => TypeDesc {
                name: format!("enum {}", name.as_deref().unwrap_or("{...}")),
                size: byte_size,
                inner: Inner::Scalar,
            },
            gimli::DW_TAG_pointer_type | gimli::DW_TAG_reference_type => {
                let target = match next {
                    Some((nu, no)) => self.type_name(nu, no, 0),
                    None => "void".to_owned(),
                };
                TypeDesc {
                    name: format!("{target} *"),
                    size: byte_size.or(Some(8)),
                    inner: Inner::Scalar,
                }
            }
            gimli::DW_TAG_typedef => {
                let inner = match next {
                    Some((nu, no)) => self.describe(nu, no, depth)?,
                    None => opaque("void"),
                };
                TypeDesc {
                    name: name.unwrap_or_else(|| inner.name.clone()),
                    size: inner.size,
                    inner: inner.inner,
                }
            }
            gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => {
                let qualifier = match tag {
                    gimli::DW_TAG_const_type => "const",
                    gimli::DW_TAG_volatile_type => "volatile",
                    gimli::DW_TAG_restrict_type => "restrict",
                    _ => "_Atomic",
                };
                let inner = match next {
                    Some((nu, no)) => self.describe(nu, no, depth)?,
                    None => opaque("void"),
                };
                TypeDesc {
                    name: format!("{qualifier} {}", inner.name),
                    size: inner.size,
                    inner: inner.inner,
                }
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type => {
                self.describe_composite(u, offset, &entry, name.as_deref(), depth)?
            }
            gimli::DW_TAG_array_type => self.describe_array(u, offset, next, byte_size, depth)?,
            gimli::DW_TAG_subroutine_type => opaque("fn"),
            _ => opaque(name.as_deref().unwrap_or("?")),
        })
    }

    /// A struct or union: its members, or (a declaration) the definition of that name.
    fn describe_composite(
        &self,
        u: usize,
        offset: UnitOffset,
        entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
        name: Option<&str>,
        depth: usize,
    ) -> gimli::Result<TypeDesc> {
        let keyword = if entry.tag() == gimli::DW_TAG_union_type {
            "union"
        } else {
            "struct"
        };
        let full = format!("{keyword} {}", name.unwrap_or("{...}"));
        let byte_size = Self::attr_u64(entry, gimli::DW_AT_byte_size);
        let declaration = Self::is_declaration(entry)?;
        if declaration && depth < MAX_DEPTH {
            // Another unit has the definition.
            if let Some(&(du, doff)) = self.type_index().get(&full) {
                if (du, doff) != (u, offset) {
                    return self.describe(du, doff, depth);
                }
            }
        }
        if declaration || depth >= MAX_DEPTH {
            return Ok(TypeDesc {
                name: full,
                size: byte_size,
                inner: Inner::Scalar,
            });
        }
        Ok(TypeDesc {
            name: full,
            size: byte_size,
            inner: Inner::Composite(self.members(u, offset, depth + 1)?),
        })
    }

    /// An array of the type at `elem`: its dimensions and, for structs, the element layout.
    fn describe_array(
        &self,
        u: usize,
        offset: UnitOffset,
        elem: Option<(usize, UnitOffset)>,
        byte_size: Option<u64>,
        depth: usize,
    ) -> gimli::Result<TypeDesc> {
        let elem = match elem {
            Some((nu, no)) => self.describe(nu, no, depth)?,
            None => TypeDesc {
                name: "?".to_owned(),
                size: None,
                inner: Inner::Scalar,
            },
        };
        let counts = self.array_counts(u, offset)?;
        let count: Option<u64> = counts.iter().try_fold(1u64, |a, c| a.checked_mul((*c)?));
        let dims: String = counts
            .iter()
            .map(|c| c.map_or_else(|| "[]".to_owned(), |n| format!("[{n}]")))
            .collect();
        let elem_size = elem.size.unwrap_or(0);
        Ok(TypeDesc {
            name: format!("{} {dims}", elem.name),
            size: byte_size.or_else(|| count.map(|c| c.saturating_mul(elem_size))),
            inner: Inner::Array {
                elem_size,
                count: count.unwrap_or(0),
                elem: match elem.inner {
                    Inner::Composite(m) => m,
                    _ => Vec::new(),
                },
            },
        })
    }

    /// A type's C name without expanding it (for pointer targets).
    fn type_name(&self, u: usize, offset: UnitOffset, depth: usize) -> String {
        let unit = &self.units()[u];
        let Ok(entry) = unit.entry(offset) else {
            return "?".to_owned();
        };
        let name = self.name_of(unit, &entry);
        let next = || {
            entry
                .attr_value(gimli::DW_AT_type)
                .ok()
                .flatten()
                .and_then(|v| self.type_ref(u, &v))
        };
        let inner = |d: usize| {
            if d > MAX_DEPTH {
                return "?".to_owned();
            }
            next().map_or_else(|| "void".to_owned(), |(nu, no)| self.type_name(nu, no, d))
        };
        match entry.tag() {
            gimli::DW_TAG_structure_type => {
                format!("struct {}", name.as_deref().unwrap_or("{...}"))
            }
            gimli::DW_TAG_union_type => format!("union {}", name.as_deref().unwrap_or("{...}")),
            gimli::DW_TAG_enumeration_type => {
                format!("enum {}", name.as_deref().unwrap_or("{...}"))
            }
            gimli::DW_TAG_pointer_type => format!("{} *", inner(depth + 1)),
            gimli::DW_TAG_const_type => format!("const {}", inner(depth + 1)),
            gimli::DW_TAG_volatile_type => format!("volatile {}", inner(depth + 1)),
            gimli::DW_TAG_array_type => format!("{} []", inner(depth + 1)),
            gimli::DW_TAG_subroutine_type => "fn".to_owned(),
            _ => name.unwrap_or_else(|| "?".to_owned()),
        }
    }

    /// Element counts of each dimension of the array at (`u`, `offset`); `None` for a
    /// flexible one.
    fn array_counts(&self, u: usize, offset: UnitOffset) -> gimli::Result<Vec<Option<u64>>> {
        let unit = &self.units()[u];
        let mut tree = unit.entries_tree(Some(offset))?;
        let root = tree.root()?;
        let mut children = root.children();
        let mut counts = Vec::new();
        while let Some(child) = children.next()? {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_subrange_type {
                continue;
            }
            let count = Self::attr_u64(e, gimli::DW_AT_count).or_else(|| {
                let upper = e.attr_value(gimli::DW_AT_upper_bound).ok()??;
                // An upper bound of -1 (flexible arrays in some producers) is no count.
                match upper {
                    AttributeValue::Sdata(v) if v < 0 => None,
                    v => v.udata_value().map(|n| n + 1),
                }
            });
            counts.push(count);
        }
        if counts.is_empty() {
            counts.push(None);
        }
        Ok(counts)
    }

    /// The members of the struct or union at (`u`, `offset`).
    fn members(&self, u: usize, offset: UnitOffset, depth: usize) -> gimli::Result<Vec<Member>> {
        let unit = &self.units()[u];
        let mut tree = unit.entries_tree(Some(offset))?;
        let root = tree.root()?;
        let mut children = root.children();
        let mut members = Vec::new();
        while let Some(child) = children.next()? {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_member {
                continue;
            }
            let name = self.name_of(unit, e);
            let location = match e.attr_value(gimli::DW_AT_data_member_location)? {
                Some(AttributeValue::Exprloc(expr)) => plus_uconst(&expr),
                Some(v) => v.udata_value(),
                None => None,
            };
            let ty = match e
                .attr_value(gimli::DW_AT_type)?
                .and_then(|v| self.type_ref(u, &v))
            {
                Some((tu, to)) => self.describe(tu, to, depth)?,
                None => TypeDesc {
                    name: "?".to_owned(),
                    size: None,
                    inner: Inner::Scalar,
                },
            };
            let (offset, size, inner) = match Self::attr_u64(e, gimli::DW_AT_bit_size) {
                // A bit-field: the bytes its bits occupy, nothing inside.
                Some(bits) => {
                    let first = self.first_bit(e, location, bits, ty.size);
                    let end = if bits == 0 { first } else { first + bits };
                    (first / 8, end.div_ceil(8) - first / 8, Inner::Scalar)
                }
                None => (location.unwrap_or(0), ty.size.unwrap_or(0), ty.inner),
            };
            members.push(Member {
                name,
                offset,
                size,
                type_name: ty.name,
                inner,
            });
        }
        Ok(members)
    }

    /// The first bit of bit-field `e`, `bits` wide, from the start of its struct or union.
    /// DWARF 4 and later may say it directly (`DW_AT_data_bit_offset`, as GCC does). The
    /// DWARF 2 form, which clang 14 writes for every DWARF version, places a storage unit of
    /// `DW_AT_byte_size` bytes (the type's size when absent) at `DW_AT_data_member_location`
    /// and counts `DW_AT_bit_offset` from that unit's most significant bit: on a
    /// little-endian machine, from its last bit down.
    fn first_bit(
        &self,
        e: &gimli::DebuggingInformationEntry<'_, '_, R>,
        location: Option<u64>,
        bits: u64,
        type_size: Option<u64>,
    ) -> u64 {
        if let Some(first) = Self::attr_u64(e, gimli::DW_AT_data_bit_offset) {
            return first;
        }
        let base = location.unwrap_or(0).saturating_mul(8);
        // Signed: GCC gives a field that runs past its unit's end a negative offset.
        let from_msb = match e.attr_value(gimli::DW_AT_bit_offset).ok().flatten() {
            Some(AttributeValue::Sdata(v)) => v,
            Some(v) => match v.udata_value() {
                Some(v) => i64::try_from(v).unwrap_or(i64::MAX),
                None => return base,
            },
            None => return base,
        };
        let within = if self.little_endian {
            let unit = Self::attr_u64(e, gimli::DW_AT_byte_size)
                .or(type_size)
                .unwrap_or(0);
            let unit = i64::try_from(unit.saturating_mul(8)).unwrap_or(i64::MAX);
            unit.saturating_sub(from_msb)
                .saturating_sub(i64::try_from(bits).unwrap_or(i64::MAX))
        } else {
            from_msb
        };
        base.saturating_add_signed(within)
    }
}

/// The offset of a `DW_OP_plus_uconst N` location expression (DWARF 2 member locations).
fn plus_uconst(expr: &gimli::Expression<R>) -> Option<u64> {
    let mut r = expr.0.clone();
    let op = r.read_u8().ok()?;
    (op == gimli::DW_OP_plus_uconst.0)
        .then(|| r.read_uleb128().ok())
        .flatten()
}

/// Appends the flattened fields of `members` under `prefix` at `base`.
fn flatten(members: &[Member], prefix: &str, base: u64, out: &mut Vec<Field>) {
    for m in members {
        let offset = base + m.offset;
        let name = match &m.name {
            Some(n) if prefix.is_empty() => n.clone(),
            Some(n) => format!("{prefix}.{n}"),
            None => prefix.to_owned(),
        };
        if m.name.is_some() {
            out.push(Field {
                name: name.clone(),
                offset,
                size: m.size,
                type_name: m.type_name.clone(),
            });
        }
        if let Inner::Composite(inner) = &m.inner {
            flatten(inner, &name, offset, out);
        }
    }
}

/// What [`name_at`] found at an offset.
enum Found {
    /// A scalar member (or array element) holds the byte.
    Held(String),
    /// Only a struct, union or array element spans the byte: it is padding inside it.
    Padding(String),
}

/// The dotted name of the member at `offset` in `members`, innermost member that holds it.
fn name_at(members: &[Member], offset: u64, prefix: &str) -> Option<String> {
    match find_at(members, offset, prefix)? {
        Found::Held(name) | Found::Padding(name) => Some(name),
    }
}

/// The first member, in declaration order, that holds `offset`; else the innermost struct,
/// union or array element whose padding it is. Union members overlap: one whose padding covers
/// the byte must not hide a later one that holds it. In a struct, members do not overlap (but
/// for bit-fields sharing a byte, which all hold it), so the first that spans it is the answer.
fn find_at(members: &[Member], offset: u64, prefix: &str) -> Option<Found> {
    let mut padding = None;
    for m in members {
        if offset < m.offset || offset - m.offset >= m.size {
            continue;
        }
        let within = offset - m.offset;
        let name = match &m.name {
            Some(n) if prefix.is_empty() => n.clone(),
            Some(n) => format!("{prefix}.{n}"),
            None => prefix.to_owned(),
        };
        let found = match &m.inner {
            // An unnamed scalar is an unnamed bit-field: padding that names nothing.
            Inner::Scalar => m.name.is_some().then_some(Found::Held(name)),
            Inner::Composite(inner) => find_at(inner, within, &name)
                .or_else(|| m.name.is_some().then_some(Found::Padding(name))),
            Inner::Array {
                elem_size,
                count,
                elem,
            } => Some(if *elem_size > 0 && within / elem_size < (*count).max(1) {
                let i = within / elem_size;
                let element = format!("{name}[{i}]");
                if elem.is_empty() {
                    Found::Held(element)
                } else {
                    find_at(elem, within % elem_size, &element).unwrap_or(Found::Padding(element))
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

impl DebugInfo {
    /// Reads `vmlinux`; `debug_dir` is where [`DebugInfo::use_kallsyms`] looks for
    /// `MODULE.ko` files.
    ///
    /// # Errors
    /// When the file cannot be read, is not ELF, or has no or malformed DWARF.
    pub fn load(vmlinux: &Path, debug_dir: Option<&Path>) -> Result<Self, DebugInfoError> {
        let bytes = std::fs::read(vmlinux).map_err(|source| DebugInfoError::Read {
            path: vmlinux.to_path_buf(),
            source,
        })?;
        let mut info = Self::from_bytes(vmlinux, bytes)?;
        info.debug_dir = debug_dir.map(Path::to_path_buf);
        Ok(info)
    }

    /// Parses a vmlinux from its bytes; `path` names it in messages.
    ///
    /// # Errors
    /// When the bytes are not ELF, or have no or malformed DWARF.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Self, DebugInfoError> {
        let vmlinux = ElfDebug::parse(path, &Arc::from(bytes), &|_| None)?;
        Ok(Self {
            path: path.to_path_buf(),
            debug_dir: None,
            vmlinux,
            modules: Vec::new(),
        })
    }

    /// The vmlinux's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The vmlinux's `linux_banner` ("Linux version ..."), trimmed.
    #[must_use]
    pub fn banner(&self) -> Option<&str> {
        self.vmlinux.banner.as_deref()
    }

    /// The vmlinux's GNU build id, lower-case hex.
    #[must_use]
    pub fn build_id(&self) -> Option<String> {
        self.vmlinux.build_id.as_deref().map(hex)
    }

    /// Checks that this vmlinux is the kernel `header` was collected on: build ids when both
    /// have one, else banners, else (old profiles) the release.
    ///
    /// # Errors
    /// [`DebugInfoError::BuildIdMismatch`], [`DebugInfoError::BannerMismatch`] or
    /// [`DebugInfoError::ReleaseMismatch`] when they differ; [`DebugInfoError::CannotVerify`]
    /// when there is nothing to compare.
    pub fn matches(&self, header: &ProfileHeader) -> Result<MatchedBy, DebugInfoError> {
        let path = self.path.clone();
        if let (Some(ours), Some(theirs)) = (self.build_id(), header.build_id.as_deref()) {
            let theirs = theirs.trim().to_ascii_lowercase();
            return if ours == theirs {
                Ok(MatchedBy::BuildId)
            } else {
                Err(DebugInfoError::BuildIdMismatch { path, ours, theirs })
            };
        }
        let Some(ours) = self.banner() else {
            return Err(DebugInfoError::CannotVerify {
                path,
                why: "it has neither a GNU build id nor a linux_banner symbol".to_owned(),
            });
        };
        if let Some(theirs) = header.proc_version.as_deref() {
            return if ours == theirs.trim() {
                Ok(MatchedBy::Banner)
            } else {
                Err(DebugInfoError::BannerMismatch {
                    path,
                    ours: ours.to_owned(),
                    theirs: theirs.trim().to_owned(),
                })
            };
        }
        // "Linux version RELEASE (...": the release is the third word.
        let release = ours.split_whitespace().nth(2).unwrap_or("");
        if release == header.kernel_release {
            Ok(MatchedBy::ReleaseOnly)
        } else {
            Err(DebugInfoError::ReleaseMismatch {
                path,
                ours: release.to_owned(),
                theirs: header.kernel_release.clone(),
            })
        }
    }

    /// Shift between the vmlinux's link addresses and the run-time addresses of `kallsyms`
    /// (the KASLR offset; 0 without KASLR), from `_stext`.
    #[must_use]
    pub fn kaslr_offset(&self, kallsyms: &Kallsyms) -> Option<u64> {
        ["_stext", "_text", "startup_64"].iter().find_map(|name| {
            let linked = *self.vmlinux.text_symbols.get(*name)?;
            let run = kallsyms
                .text_symbols()
                .iter()
                .find(|s| s.module.is_none() && s.name == *name)?
                .address;
            Some(run.wrapping_sub(linked))
        })
    }

    /// Places the vmlinux at the run-time addresses of the profile's `kallsyms` (KASLR), and
    /// loads `MODULE.ko` from the debug directory for each module that has symbols in
    /// `kallsyms`. Returns the names of modules with no `.ko` there (all of them without a
    /// debug directory), for a report to list.
    ///
    /// # Errors
    /// [`DebugInfoError::Placement`] when `kallsyms` and the vmlinux disagree (a symbol
    /// other than the one used to place it is elsewhere); errors reading a `.ko` that exists.
    pub fn use_kallsyms(&mut self, kallsyms: &Kallsyms) -> Result<Vec<String>, DebugInfoError> {
        if let Some(shift) = self.kaslr_offset(kallsyms) {
            // A second opinion: every function in both must have moved by the same amount.
            // Static functions can share a name (several `edge_show`s), and the vmlinux table
            // keeps one address per name: only names that occur once can testify.
            let mut occurrences: HashMap<&str, u32> = HashMap::new();
            for s in kallsyms
                .text_symbols()
                .iter()
                .filter(|s| s.module.is_none())
            {
                *occurrences.entry(s.name.as_str()).or_default() += 1;
            }
            let disagree = kallsyms
                .text_symbols()
                .iter()
                .filter(|s| s.module.is_none() && occurrences.get(s.name.as_str()) == Some(&1))
                .step_by(97)
                .take(64)
                .find(|s| {
                    self.vmlinux
                        .text_symbols
                        .get(&s.name)
                        .is_some_and(|&a| a.wrapping_add(shift) != s.address)
                });
            if let Some(s) = disagree {
                return Err(DebugInfoError::Placement {
                    path: self.path.clone(),
                    why: format!(
                        "{} is at {:#x} in the profile, but the vmlinux puts it at {:#x}",
                        s.name,
                        s.address,
                        self.vmlinux.text_symbols[&s.name].wrapping_add(shift)
                    ),
                });
            }
            self.vmlinux.shift = shift;
        }
        let mut names: Vec<&str> = kallsyms
            .text_symbols()
            .iter()
            .chain(kallsyms.data_symbols())
            .filter_map(|s| s.module.as_deref())
            .collect();
        names.sort_unstable();
        names.dedup();
        let mut missing = Vec::new();
        for name in names {
            if self.modules.iter().any(|(n, _)| n == name) {
                continue;
            }
            let found = self.debug_dir.as_ref().and_then(|dir| {
                [name.to_owned(), name.replace('_', "-")]
                    .into_iter()
                    .map(|n| dir.join(format!("{n}.ko")))
                    .find(|p| p.is_file())
            });
            let Some(path) = found else {
                missing.push(name.to_owned());
                continue;
            };
            let bytes = std::fs::read(&path).map_err(|source| DebugInfoError::Read {
                path: path.clone(),
                source,
            })?;
            self.add_module_from(&path, name, bytes, kallsyms)?;
        }
        Ok(missing)
    }

    /// Adds module `name` from the bytes of its `.ko`, placing its sections where
    /// `kallsyms` shows the module's symbols.
    ///
    /// # Errors
    /// When the bytes are not ELF or their DWARF is missing or malformed.
    pub fn add_module(
        &mut self,
        name: &str,
        ko: Vec<u8>,
        kallsyms: &Kallsyms,
    ) -> Result<(), DebugInfoError> {
        let path = PathBuf::from(format!("{name}.ko"));
        self.add_module_from(&path, name, ko, kallsyms)
    }

    fn add_module_from(
        &mut self,
        path: &Path,
        name: &str,
        ko: Vec<u8>,
        kallsyms: &Kallsyms,
    ) -> Result<(), DebugInfoError> {
        let data: Arc<[u8]> = Arc::from(ko);
        let bases = section_bases(path, &data, name, kallsyms)?;
        let elf = ElfDebug::parse(path, &data, &|section| bases.get(section).copied())?;
        let at = self.modules.partition_point(|(n, _)| n.as_str() < name);
        self.modules.insert(at, (name.to_owned(), elf));
        Ok(())
    }

    /// Names of the modules with debug information.
    #[must_use]
    pub fn modules(&self) -> Vec<&str> {
        self.modules.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Source frames of run-time address `ip`, innermost (inlined) first; empty when no debug
    /// information covers it.
    #[must_use]
    pub fn frames(&self, ip: u64) -> Vec<SourceFrame> {
        if let Some((_, m)) = self
            .modules
            .iter()
            .find(|(_, m)| m.text.iter().any(|r| r.contains(&ip)))
        {
            return m.frames(ip);
        }
        self.vmlinux.frames(ip)
    }

    /// The struct the memory operand `displacement(register)` of the instruction at run-time
    /// address `ip` points into, and the member at the displacement: the variable or
    /// parameter whose DWARF location at `ip` is `register` (a DWARF register number: 0 `%rax`,
    /// 1 `%rdx`, 2 `%rcx`, 3 `%rbx`, 4 `%rsi`, 5 `%rdi`, 6 `%rbp`, 7 `%rsp`, 8-15 `%r8`-`%r15`),
    /// when its type is a pointer to a struct or union. `None` when no variable is located
    /// there (optimized out, a temporary the compiler did not describe), or it is no such
    /// pointer, or the displacement falls outside the struct (`container_of`, a cast to a
    /// struct that embeds it: the declared type does not describe the access, as perf
    /// judges too). Answers are cached by ip and register.
    #[must_use]
    pub fn pointer_target(
        &self,
        ip: u64,
        register: u16,
        displacement: i64,
    ) -> Option<PointerTarget> {
        let elf = self
            .modules
            .iter()
            .find(|(_, m)| m.text.iter().any(|r| r.contains(&ip)))
            .map_or(&self.vmlinux, |(_, m)| m);
        let found = elf.register_variable(ip, register)?;
        // As perf does: a displacement outside the struct (a `container_of`, a cast to a
        // bigger struct that embeds it) is not an access to the type the pointer declares.
        let size = self.struct_size(&found.struct_name)?;
        let displacement_in = u64::try_from(displacement).ok().filter(|&d| d < size)?;
        let field = self.field_at(&found.struct_name, displacement_in);
        Some(PointerTarget {
            variable: found.variable.clone(),
            struct_name: found.struct_name.clone(),
            field,
        })
    }

    /// The variable (not per-CPU) holding run-time address `addr`, with its exact size.
    #[must_use]
    pub fn data_symbol(&self, addr: u64) -> Option<DataSymbol<'_>> {
        let found = self
            .vmlinux
            .object_at(addr, false)
            .map(|(s, offset)| (s, offset, self.vmlinux.shift, None))
            .or_else(|| {
                self.modules.iter().find_map(|(name, m)| {
                    m.object_at(addr, false)
                        .map(|(s, offset)| (s, offset, 0, Some(name.as_str())))
                })
            });
        found.map(|(s, offset, shift, module)| DataSymbol {
            name: &s.name,
            start: s.address.wrapping_add(shift),
            size: s.size,
            offset,
            percpu: false,
            module,
        })
    }

    /// The per-CPU variable at `offset` in the per-CPU area (`addr - gs_base`), with its
    /// exact size (vmlinux only).
    #[must_use]
    pub fn percpu_symbol(&self, offset: u64) -> Option<DataSymbol<'_>> {
        self.vmlinux
            .object_at(offset, true)
            .map(|(s, within)| DataSymbol {
                name: &s.name,
                start: s.address,
                size: s.size,
                offset: within,
                percpu: true,
                module: None,
            })
    }

    /// The size of the symbol `name` (function or variable) in the vmlinux's symbol table.
    #[must_use]
    pub fn symbol_size(&self, name: &str) -> Option<u64> {
        self.vmlinux.sizes.get(name).copied()
    }

    fn layout(&self, name: &str) -> Option<Rc<Member>> {
        self.vmlinux
            .layout(name)
            .or_else(|| self.modules.iter().find_map(|(_, m)| m.layout(name)))
    }

    /// The type of the vmlinux's global or per-CPU variable `name`, as far as naming its
    /// bytes needs (`struct rq` for `runqueues`); `None` for an array of structs, a variable
    /// no unit defines or declares, or statics of one name whose types differ.
    #[must_use]
    pub fn variable_type(&self, name: &str) -> Option<VariableType> {
        self.vmlinux.variable_type(name)
    }

    /// The size of struct or union `name` (also "struct NAME", "union NAME", or a typedef).
    #[must_use]
    pub fn struct_size(&self, name: &str) -> Option<u64> {
        self.layout(name).map(|l| l.size)
    }

    /// The members of struct or union `name` (also "struct NAME", "union NAME", or a
    /// typedef of one), flattened in declaration order: each named member, then the members
    /// inside it when it is a struct or union. `None` when no debug information defines it.
    /// The vmlinux is searched first, then modules in name order; the first definition found
    /// is used (the kernel has a few distinct structs of one name in different files).
    #[must_use]
    pub fn struct_fields(&self, name: &str) -> Option<Vec<Field>> {
        let layout = self.layout(name)?;
        let mut out = Vec::new();
        if let Inner::Composite(members) = &layout.inner {
            flatten(members, "", 0, &mut out);
        }
        Some(out)
    }

    /// The dotted name of the innermost member of struct `name` at byte `offset`, array
    /// elements included (`queue[2].head`). A byte that several members hold (bit-fields
    /// sharing it, union members) is named after the first of them in declaration order;
    /// padding inside a named struct or union member after that member. `None` when `offset`
    /// is past the struct, in padding no named member spans, or the struct is unknown.
    #[must_use]
    pub fn field_at(&self, name: &str, offset: u64) -> Option<String> {
        let layout = self.layout(name)?;
        match &layout.inner {
            Inner::Composite(members) => name_at(members, offset, ""),
            _ => None,
        }
    }
}

/// Run-time base of each section of module `name`'s `.ko`: for each section with a symbol
/// that `kallsyms` also lists for the module, that symbol's run-time address minus its
/// offset in the section.
fn section_bases(
    path: &Path,
    data: &[u8],
    name: &str,
    kallsyms: &Kallsyms,
) -> Result<HashMap<String, u64>, DebugInfoError> {
    let run: HashMap<&str, u64> = kallsyms
        .text_symbols()
        .iter()
        .chain(kallsyms.data_symbols())
        .filter(|s| s.module.as_deref() == Some(name))
        .map(|s| (s.name.as_str(), s.address))
        .collect();
    let file = object::File::parse(data).map_err(|e| elf_error(path, &e))?;
    let mut bases = HashMap::new();
    for sym in file.symbols() {
        let (Ok(sym_name), Some(index)) = (sym.name(), sym.section_index()) else {
            continue;
        };
        let Some(&at) = run.get(sym_name) else {
            continue;
        };
        if let Ok(section) = file.section_by_index(index) {
            if let Ok(section_name) = section.name() {
                bases
                    .entry(section_name.to_owned())
                    .or_insert(at.wrapping_sub(sym.address()));
            }
        }
    }
    Ok(bases)
}
