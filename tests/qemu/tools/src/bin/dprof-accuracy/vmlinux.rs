//! What the comparison needs of the guest kernel's vmlinux, read once for both tools: its
//! function symbols, the bytes of its code (to tell which sampled instructions touch memory)
//! and the C type of each global variable (dprof names globals and per-CPU variables by
//! variable, perf by the variable's type).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use gimli::{AttributeValue, EndianSlice, LittleEndian, UnitOffset};
use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};

/// What the comparison asks of the kernel's code.
pub trait KernelCode {
    /// The function holding `ip`.
    fn function(&self, ip: u64) -> Option<&str>;
    /// The code from `ip` to the end of its section.
    fn code_at(&self, ip: u64) -> Option<&[u8]>;
}

/// A vmlinux's functions, code and global variable types.
pub struct Vmlinux {
    /// `(start, end, name)`, sorted by start.
    functions: Vec<(u64, u64, String)>,
    /// Executable sections: `(address, bytes)`.
    code: Vec<(u64, Vec<u8>)>,
    /// Variable name to its C type as DWARF spells it (`struct rq`, `long unsigned int`);
    /// `None` when static variables of one name have different types.
    variable_types: HashMap<String, Option<String>>,
}

impl Vmlinux {
    /// Reads `path`.
    ///
    /// # Errors
    /// The file cannot be read, is no ELF file, or its DWARF does not parse.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let elf = object::File::parse(&*bytes)
            .with_context(|| format!("{} is not an ELF file", path.display()))?;
        let mut functions: Vec<(u64, u64, String)> = elf
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .filter_map(|s| {
                let name = s.name().ok()?;
                Some((s.address(), s.address() + s.size(), name.to_owned()))
            })
            .collect();
        functions.sort_unstable();
        let code = elf
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .filter_map(|s| Some((s.address(), s.data().ok()?.to_vec())))
            .collect();
        let variable_types = variable_types(&elf)
            .with_context(|| format!("reading the DWARF of {}", path.display()))?;
        Ok(Self {
            functions,
            code,
            variable_types,
        })
    }

    /// The C type of global or per-CPU variable `name`, when DWARF names one type for it.
    pub fn variable_type(&self, name: &str) -> Option<&str> {
        self.variable_types.get(name)?.as_deref()
    }
}

impl KernelCode for Vmlinux {
    fn function(&self, ip: u64) -> Option<&str> {
        let after = self.functions.partition_point(|(start, _, _)| *start <= ip);
        let (_, end, name) = self.functions.get(after.checked_sub(1)?)?;
        (ip < *end).then_some(name.as_str())
    }

    fn code_at(&self, ip: u64) -> Option<&[u8]> {
        self.code.iter().find_map(|(address, bytes)| {
            let from = usize::try_from(ip.checked_sub(*address)?).ok()?;
            bytes.get(from..).filter(|rest| !rest.is_empty())
        })
    }
}

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// The type of each variable declared at a compilation unit's top level, by name.
fn variable_types(elf: &object::File<'_>) -> Result<HashMap<String, Option<String>>> {
    let dwarf = gimli::Dwarf::load(|id| -> Result<Slice<'_>, gimli::Error> {
        let data = elf
            .section_by_name(id.name())
            .and_then(|s| s.data().ok())
            .unwrap_or_default();
        Ok(EndianSlice::new(data, LittleEndian))
    })?;
    let mut out: HashMap<String, Option<String>> = HashMap::new();
    let mut headers = dwarf.units();
    while let Some(header) = headers.next()? {
        let unit = dwarf.unit(header)?;
        let mut tree = unit.entries_tree(None)?;
        let root = tree.root()?;
        let mut children = root.children();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            if entry.tag() != gimli::DW_TAG_variable {
                continue;
            }
            // A definition of a variable declared earlier in the unit names it through its
            // declaration.
            let declared = match entry.attr_value(gimli::DW_AT_specification)? {
                Some(AttributeValue::UnitRef(at)) => Some(unit.entry(at)?),
                _ => None,
            };
            let attr = |at| -> Result<Option<AttributeValue<Slice<'_>>>, gimli::Error> {
                match entry.attr_value(at)? {
                    Some(v) => Ok(Some(v)),
                    None => declared.as_ref().map_or(Ok(None), |d| d.attr_value(at)),
                }
            };
            let Some(name) = attr(gimli::DW_AT_name)? else {
                continue;
            };
            let name = dwarf
                .attr_string(&unit, name)?
                .to_string_lossy()
                .into_owned();
            let Some(AttributeValue::UnitRef(type_at)) = attr(gimli::DW_AT_type)? else {
                continue;
            };
            let type_name = type_name(&dwarf, &unit, type_at, 0);
            match out.get_mut(&name) {
                None => {
                    out.insert(name, type_name);
                }
                // Two static variables of one name and different types: no answer.
                Some(known) if *known != type_name => *known = None,
                Some(_) => {}
            }
        }
    }
    Ok(out)
}

/// How deep [`type_name`] follows type references (qualifiers and pointers nest a few).
const MAX_TYPE_DEPTH: u32 = 16;

/// A type's name as perf prints it: `struct X`, `union X`, `enum X`, base and typedef names
/// as declared, `T*` for a pointer, `T[]` for an array, qualifiers dropped.
fn type_name(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &gimli::Unit<Slice<'_>>,
    at: UnitOffset,
    depth: u32,
) -> Option<String> {
    if depth > MAX_TYPE_DEPTH {
        return None;
    }
    let entry = unit.entry(at).ok()?;
    let name = || -> Option<String> {
        let value = entry.attr_value(gimli::DW_AT_name).ok()??;
        Some(
            dwarf
                .attr_string(unit, value)
                .ok()?
                .to_string_lossy()
                .into_owned(),
        )
    };
    let inner = || match entry.attr_value(gimli::DW_AT_type).ok()? {
        Some(AttributeValue::UnitRef(next)) => type_name(dwarf, unit, next, depth + 1),
        _ => Some("void".to_owned()),
    };
    match entry.tag() {
        gimli::DW_TAG_base_type | gimli::DW_TAG_typedef => name(),
        // perf calls an anonymous struct `struct` (`static struct { ... } tk_core`).
        gimli::DW_TAG_structure_type => {
            Some(name().map_or("struct".into(), |n| format!("struct {n}")))
        }
        gimli::DW_TAG_union_type => Some(name().map_or("union".into(), |n| format!("union {n}"))),
        gimli::DW_TAG_enumeration_type => name().map(|n| format!("enum {n}")),
        gimli::DW_TAG_pointer_type => inner().map(|t| format!("{t}*")),
        gimli::DW_TAG_array_type => inner().map(|t| format!("{t}[]")),
        gimli::DW_TAG_const_type
        | gimli::DW_TAG_volatile_type
        | gimli::DW_TAG_restrict_type
        | gimli::DW_TAG_atomic_type => inner(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guest kernel's vmlinux, where the test environment names one.
    fn real_vmlinux() -> Option<Vmlinux> {
        let Some(path) = std::env::var_os("DPROF_TEST_VMLINUX") else {
            assert!(
                std::env::var_os("DPROF_TEST_REQUIRE_EXTERNAL").is_none(),
                "DPROF_TEST_VMLINUX is not set but DPROF_TEST_REQUIRE_EXTERNAL is"
            );
            eprintln!("skipped: set DPROF_TEST_VMLINUX to a vmlinux with debug info");
            return None;
        };
        Some(Vmlinux::load(Path::new(&path)).expect("DPROF_TEST_VMLINUX loads"))
    }

    #[test]
    fn knows_functions_code_and_variable_types_of_a_real_kernel() {
        let Some(v) = real_vmlinux() else { return };
        let (start, _, name) = v
            .functions
            .iter()
            .find(|(_, _, n)| n == "schedule")
            .expect("vmlinux has schedule()")
            .clone();
        assert_eq!(v.function(start + 1), Some(name.as_str()));
        assert!(v.code_at(start).is_some_and(|c| c.len() > 16));
        // clang spells base types `unsigned long` where gcc says `long unsigned int`.
        assert_eq!(v.variable_type("jiffies_64"), Some("u64"));
        assert_eq!(v.variable_type("init_task"), Some("struct task_struct"));
        assert_eq!(v.variable_type("tk_core"), Some("struct"));
        assert_eq!(v.variable_type("runqueues"), Some("struct rq"));
    }

    #[test]
    fn a_file_that_is_not_elf_is_named() {
        let dir = std::env::temp_dir().join(format!("dprof-accuracy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let path = dir.join("not-elf");
        std::fs::write(&path, b"hello").expect("a temporary file");
        let e = Vmlinux::load(&path).err().expect("text is no ELF file");
        assert!(format!("{e:#}").contains("is not an ELF file"), "{e:#}");
        let e = Vmlinux::load(&dir.join("missing"))
            .err()
            .expect("a missing file is an error");
        assert!(format!("{e:#}").contains("cannot read"), "{e:#}");
        std::fs::remove_dir_all(&dir).expect("removing the temporary directory");
    }
}
