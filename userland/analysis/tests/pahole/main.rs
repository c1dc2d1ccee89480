//! dprof's field names against pahole's layouts of a real kernel.
//!
//! `DPROF_TEST_VMLINUX=/path/to/vmlinux cargo test -p dprof-analysis --test pahole -- --nocapture`
//! (`scripts/test` sets it to the guest kernel's vmlinux, and `DPROF_TEST_REQUIRE_EXTERNAL`,
//! which makes a missing vmlinux a failure). It needs `pahole` (scripts/setup installs it).
//!
//! pahole (`-F dwarf -E`) lays out each struct of [`STRUCTS`] from the same DWARF, with its own
//! reading of bit-fields. Paths are built as dprof builds them: named members joined by dots,
//! anonymous structs and unions adding no component, array elements as `name[i]` (one flat
//! index for arrays of arrays). The rules:
//!
//! - **Bytes of a named member** (a scalar, a pointer, an element of an array of scalars, a
//!   bit-field's bytes from its first bit to its last): [`DebugInfo::field_at`] must give the
//!   path of the first such member, in declaration order, that holds the byte. Bit-fields
//!   sharing a byte name it after the first of them; union members after the first one that
//!   holds the byte, whatever padding the earlier ones have there.
//! - **Bytes no named member holds** (holes, tail padding): `field_at` may say nothing, or
//!   name a struct, union or array element that spans the byte.
//! - **Fields**: [`DebugInfo::struct_fields`] must list every named member outside arrays of
//!   structs with pahole's offset and size (a bit-field: its first byte and the bytes its bits
//!   span), and the struct must have pahole's size.
//!
//! Where the vmlinux has a `.BTF` section (pahole writes it from the same DWARF), [`Btf`]'s
//! names are held to the first two rules as well.

mod parse;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use dprof_analysis::btf::Btf;
use dprof_analysis::debuginfo::DebugInfo;
use dprof_analysis::report::FieldSource;
use object::{Object, ObjectSection};
use parse::Node;

/// Structs compared: the hot kernel types of networking, processes, files and memory.
const STRUCTS: &[&str] = &[
    "tcp_sock",
    "sk_buff",
    "task_struct",
    "restart_block",
    "inode",
    "sock",
    "mm_struct",
    "file",
    "dentry",
    "page",
    "net_device",
    "super_block",
];

/// Bytes `start..end` of the struct belong to the member at `path`.
struct Span {
    path: String,
    start: u64,
    end: u64,
    /// Which named leaf member (the elements of an array of scalars are one).
    field: usize,
}

/// What pahole says about one struct.
#[derive(Default)]
struct Expected {
    /// Named leaf members in declaration order.
    leaves: Vec<Span>,
    /// Named structs, unions and array elements of structs.
    composites: Vec<Span>,
    /// Members outside arrays of structs: path to (offset, size).
    fields: Vec<(String, u64, u64)>,
    /// How many named leaf members.
    leaf_count: usize,
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Collects the spans of `nodes`; `shift` moves element 0's offsets to element i's.
fn collect(nodes: &[Node], shift: u64, prefix: &str, in_element: bool, out: &mut Expected) {
    for n in nodes {
        let path = n
            .name
            .as_deref()
            .map_or_else(|| prefix.to_owned(), |name| join(prefix, name));
        let start = n.offset + shift;
        let named = n.name.is_some();
        if let Some((bit, width)) = n.bits {
            if named && width > 0 {
                let first = start * 8 + bit;
                let (from, to) = (first / 8, (first + width - 1) / 8 + 1);
                out.leaves.push(Span {
                    path: path.clone(),
                    start: from,
                    end: to,
                    field: out.leaf_count,
                });
                out.leaf_count += 1;
                if !in_element {
                    out.fields.push((path, from, to - from));
                }
            }
            continue;
        }
        if named && !in_element {
            out.fields.push((path.clone(), start, n.size));
        }
        match (&n.children, n.count) {
            (Some(children), None) => {
                if named {
                    out.composites.push(Span {
                        path: path.clone(),
                        start,
                        end: start + n.size,
                        field: usize::MAX,
                    });
                }
                collect(children, shift, &path, in_element, out);
            }
            (Some(children), Some(count)) => {
                let elem = n.size.checked_div(count).unwrap_or(0);
                for i in 0..count {
                    let element = format!("{path}[{i}]");
                    out.composites.push(Span {
                        path: element.clone(),
                        start: start + i * elem,
                        end: start + (i + 1) * elem,
                        field: usize::MAX,
                    });
                    collect(children, shift + i * elem, &element, true, out);
                }
            }
            (None, Some(count)) => {
                let elem = n.size.checked_div(count).unwrap_or(0);
                for i in 0..count {
                    out.leaves.push(Span {
                        path: format!("{path}[{i}]"),
                        start: start + i * elem,
                        end: start + (i + 1) * elem,
                        field: out.leaf_count,
                    });
                }
                out.leaf_count += 1;
            }
            (None, None) => {
                if named {
                    out.leaves.push(Span {
                        path,
                        start,
                        end: start + n.size,
                        field: out.leaf_count,
                    });
                    out.leaf_count += 1;
                }
            }
        }
    }
}

/// Counts of one comparison.
#[derive(Default)]
struct Tally {
    leaf_fields: usize,
    leaf_bytes: usize,
    wrong_bytes: usize,
    wrong_fields: usize,
    hole_bytes: usize,
    wrong_hole_bytes: usize,
    listed_fields: usize,
    wrong_listed: usize,
    wrong_sizes: usize,
}

impl Tally {
    fn add(&mut self, t: &Tally) {
        self.leaf_fields += t.leaf_fields;
        self.leaf_bytes += t.leaf_bytes;
        self.wrong_bytes += t.wrong_bytes;
        self.wrong_fields += t.wrong_fields;
        self.hole_bytes += t.hole_bytes;
        self.wrong_hole_bytes += t.wrong_hole_bytes;
        self.listed_fields += t.listed_fields;
        self.wrong_listed += t.wrong_listed;
        self.wrong_sizes += t.wrong_sizes;
    }
}

/// Compares struct `s` as `info` names it with pahole's layout of it; prints the first
/// disagreements (`shown` counts them over all structs).
fn compare(info: &DebugInfo, s: &parse::Struct, shown: &mut usize) -> Tally {
    let mut show = |line: String| {
        if *shown < 60 {
            println!("  {line}");
        }
        *shown += 1;
    };
    let name = s.name.as_str();
    let mut expected = Expected::default();
    collect(&s.members, 0, "", false, &mut expected);
    let size = s.size.expect("pahole printed the size");
    let mut mine = compare_names(info, name, size, &expected, &mut show);
    if info.struct_size(name) != Some(size) {
        mine.wrong_sizes += 1;
        show(format!(
            "{name}: pahole says {size} bytes, dprof {:?}",
            info.struct_size(name)
        ));
    }
    let listed: HashMap<String, (u64, u64)> = info
        .struct_fields(name)
        .unwrap_or_default()
        .into_iter()
        .map(|f| (f.name, (f.offset, f.size)))
        .collect();
    for (path, offset, size) in &expected.fields {
        mine.listed_fields += 1;
        let got = listed.get(path);
        if got != Some(&(*offset, *size)) {
            mine.wrong_listed += 1;
            show(format!(
                "{name}.{path}: pahole at {offset} size {size}, struct_fields {got:?}"
            ));
        }
    }
    mine
}

/// Compares the names `source` gives each byte of struct `name` with the `expected` layout:
/// the rules on bytes of named members and bytes in holes.
fn compare_names(
    source: &dyn FieldSource,
    name: &str,
    size: u64,
    expected: &Expected,
    show: &mut dyn FnMut(String),
) -> Tally {
    let mut mine = Tally::default();
    // First leaf in declaration order that holds each byte.
    let mut owner: Vec<Option<usize>> = vec![None; usize::try_from(size).expect("small")];
    for (i, leaf) in expected.leaves.iter().enumerate() {
        for b in leaf.start..leaf.end.min(size) {
            owner[b as usize].get_or_insert(i);
        }
    }
    let mut wrong_fields = std::collections::BTreeSet::new();
    for (b, owner) in owner.iter().enumerate() {
        let b = b as u64;
        let got = source.field_at(name, b);
        if let Some(i) = owner {
            let leaf = &expected.leaves[*i];
            mine.leaf_bytes += 1;
            if got.as_deref() != Some(leaf.path.as_str()) {
                mine.wrong_bytes += 1;
                if wrong_fields.insert(leaf.field) {
                    show(format!(
                        "{name} +{b}: pahole {}, dprof {}",
                        leaf.path,
                        got.as_deref().unwrap_or("(nothing)")
                    ));
                }
            }
        } else {
            mine.hole_bytes += 1;
            let spans = |path: &str| {
                expected
                    .composites
                    .iter()
                    .any(|c| c.path == path && (c.start..c.end).contains(&b))
            };
            if !got.as_deref().is_none_or(spans) {
                mine.wrong_hole_bytes += 1;
                show(format!(
                    "{name} +{b}: a hole for pahole, dprof {}",
                    got.as_deref().unwrap_or("")
                ));
            }
        }
    }
    mine.leaf_fields = expected.leaf_count;
    mine.wrong_fields = wrong_fields.len();
    mine
}

/// The vmlinux's `.BTF` section, parsed; `None` when it has none.
fn vmlinux_btf(vmlinux: &Path) -> Option<Btf> {
    let bytes = std::fs::read(vmlinux).expect("the vmlinux is readable");
    let file = object::File::parse(&*bytes).expect("the vmlinux is an ELF file");
    let section = file.section_by_name(".BTF")?;
    let data = section.uncompressed_data().expect("its .BTF section reads");
    Some(Btf::parse(&data).expect("its .BTF section is valid BTF"))
}

/// BTF's names of the bytes of every struct of [`STRUCTS`] against pahole's layouts.
fn compare_btf(btf: &Btf, structs: &[parse::Struct]) -> Tally {
    let mut tally = Tally::default();
    let mut shown = 0;
    let mut show = |line: String| {
        if shown < 60 {
            println!("  BTF: {line}");
        }
        shown += 1;
    };
    for name in STRUCTS {
        let s = structs
            .iter()
            .find(|s| s.name == *name)
            .unwrap_or_else(|| panic!("pahole printed no struct {name}"));
        let mut expected = Expected::default();
        collect(&s.members, 0, "", false, &mut expected);
        let size = s.size.expect("pahole printed the size");
        let mut t = compare_names(btf, name, size, &expected, &mut show);
        if btf.struct_size(name) != Some(size) {
            t.wrong_sizes += 1;
            show(format!(
                "{name}: pahole says {size} bytes, BTF {:?}",
                btf.struct_size(name)
            ));
        }
        tally.add(&t);
    }
    println!(
        "BTF over {} structs: {} bytes in {} named members, {} wrong ({} members); {} bytes in \
         holes, {} wrong; {} sizes wrong",
        STRUCTS.len(),
        tally.leaf_bytes,
        tally.leaf_fields,
        tally.wrong_bytes,
        tally.wrong_fields,
        tally.hole_bytes,
        tally.wrong_hole_bytes,
        tally.wrong_sizes
    );
    tally
}

#[test]
fn field_names_agree_with_pahole() {
    let Some(vmlinux) = std::env::var_os("DPROF_TEST_VMLINUX") else {
        // scripts/test sets both: there, a missing vmlinux is a failure, not a skip.
        assert!(
            std::env::var_os("DPROF_TEST_REQUIRE_EXTERNAL").is_none(),
            "DPROF_TEST_VMLINUX is not set but DPROF_TEST_REQUIRE_EXTERNAL is"
        );
        eprintln!("skipped: set DPROF_TEST_VMLINUX to a vmlinux with debug info");
        return;
    };
    let out = Command::new("pahole")
        .args(["-F", "dwarf", "-E", "-C", &STRUCTS.join(",")])
        .arg(&vmlinux)
        .output()
        .expect("this check needs pahole: install it (Debian package pahole; scripts/setup does)");
    assert!(
        out.status.success(),
        "pahole failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let structs = parse::parse(&String::from_utf8_lossy(&out.stdout));
    let info = DebugInfo::load(Path::new(&vmlinux), None).expect("the vmlinux loads");
    let mut tally = Tally::default();
    let mut shown = 0;
    for name in STRUCTS {
        let s = structs
            .iter()
            .find(|s| s.name == *name)
            .unwrap_or_else(|| panic!("pahole printed no struct {name}"));
        let t = compare(&info, s, &mut shown);
        tally.add(&t);
        println!(
            "{name}: {} bytes in {} named members, {} wrong ({} members); {} bytes in holes, {} \
             wrong; {} listed fields, {} wrong",
            t.leaf_bytes,
            t.leaf_fields,
            t.wrong_bytes,
            t.wrong_fields,
            t.hole_bytes,
            t.wrong_hole_bytes,
            t.listed_fields,
            t.wrong_listed
        );
    }
    println!(
        "total over {} structs: {} bytes in {} named members, {} wrong ({} members); {} bytes in \
         holes, {} wrong; {} listed fields, {} wrong; {} sizes wrong",
        STRUCTS.len(),
        tally.leaf_bytes,
        tally.leaf_fields,
        tally.wrong_bytes,
        tally.wrong_fields,
        tally.hole_bytes,
        tally.wrong_hole_bytes,
        tally.listed_fields,
        tally.wrong_listed,
        tally.wrong_sizes
    );
    assert!(tally.leaf_bytes > 10_000, "pahole's output was not read");
    let btf = if let Some(btf) = vmlinux_btf(Path::new(&vmlinux)) {
        compare_btf(&btf, &structs)
    } else {
        println!("BTF: the vmlinux has no .BTF section; not compared");
        Tally::default()
    };
    assert_eq!(
        (
            tally.wrong_bytes,
            tally.wrong_hole_bytes,
            tally.wrong_listed,
            tally.wrong_sizes
        ),
        (0, 0, 0, 0),
        "dprof and pahole disagree (listed above)"
    );
    assert_eq!(
        (btf.wrong_bytes, btf.wrong_hole_bytes, btf.wrong_sizes),
        (0, 0, 0),
        "dprof's BTF names and pahole disagree (listed above with BTF:)"
    );
}
