//! The crate's register tables against the real kernel headers: every bitfield of every
//! union in `arch/x86/include/asm/amd-ibs.h` (position and width, both directions, reserved
//! fields excluded), the `IBS_DATA_SRC_*` codes, the `IBS_CAPS_*` bits and op-control masks
//! of `asm/perf_event.h`, and the IBS MSR numbers of `asm/msr-index.h`.
//!
//! The kernel source root comes from `DPROF_TEST_KERNEL_SRC`, else the newest
//! `/var/cache/dprof/src/linux-source-6.12-*/`. Without either the test is skipped, unless
//! `DPROF_TEST_REQUIRE_EXTERNAL=1` (scripts/test) makes that a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dprof_ibs::interpret::DATA_SRC_CODES;
use dprof_ibs::{Caps, IbsOpCtl, IbsOpData, Register};

const CACHE_DIR: &str = "/var/cache/dprof/src";
const CACHE_PREFIX: &str = "linux-source-6.12-";

fn kernel_source() -> Option<PathBuf> {
    if let Some(root) = std::env::var_os("DPROF_TEST_KERNEL_SRC") {
        let root = PathBuf::from(root);
        assert!(
            root.join("arch/x86/include/asm/amd-ibs.h").is_file(),
            "DPROF_TEST_KERNEL_SRC={} has no arch/x86/include/asm/amd-ibs.h",
            root.display()
        );
        return Some(root);
    }
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(CACHE_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(CACHE_PREFIX))
        .map(|e| e.path())
        .filter(|p| p.join("arch/x86/include/asm/amd-ibs.h").is_file())
        .collect();
    candidates.sort();
    candidates.pop()
}

/// The kernel source root, or `None` after saying why the test is skipped.
fn kernel_source_or_skip() -> Option<PathBuf> {
    let found = kernel_source();
    if found.is_none() {
        let why = format!(
            "no kernel source: set DPROF_TEST_KERNEL_SRC to a Linux 6.12 source tree \
             (none under {CACHE_DIR}/{CACHE_PREFIX}*)"
        );
        assert!(
            std::env::var("DPROF_TEST_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
            "DPROF_TEST_REQUIRE_EXTERNAL=1 but {why}"
        );
        eprintln!("skipped: {why}");
    }
    found
}

fn read(root: &Path, rel: &str) -> String {
    let path = root.join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `text` without `/* ... */` and `// ...` comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b + 2..]
                    .find("*/")
                    .expect("unterminated comment in header");
                out.push(' ');
                rest = &rest[b + 2 + end + 2..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |nl| &rest[l + nl..]);
            }
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(_), None) => unreachable!("covered by the first arm"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bitfield {
    shift: u32,
    width: u32,
}

/// Each `union NAME { __u64 val; struct { __u64 a:1, b:2, ...; }; };` as NAME -> fields in
/// declaration order (reserved ones included, so the shifts add up).
fn parse_unions(header: &str) -> BTreeMap<String, Vec<(String, Bitfield)>> {
    let text = strip_comments(header);
    let mut unions = BTreeMap::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("union ") {
        rest = &rest[at + "union ".len()..];
        let Some(open) = rest.find('{') else { break };
        let name = rest[..open].trim().to_owned();
        if name.is_empty() {
            // An anonymous union inside a struct (`perf_ibs_data`'s caps), not a register.
            rest = &rest[open + 1..];
            continue;
        }
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "odd union name {name:?}"
        );
        let body_start = open + 1;
        let struct_at = body_start
            + rest[body_start..]
                .find("struct")
                .unwrap_or_else(|| panic!("union {name} has no struct"));
        let fields_start = struct_at
            + rest[struct_at..]
                .find('{')
                .unwrap_or_else(|| panic!("union {name}: struct without a body"))
            + 1;
        let fields_end = fields_start
            + rest[fields_start..]
                .find('}')
                .unwrap_or_else(|| panic!("union {name}: unterminated struct"));
        let decl = rest[fields_start..fields_end].trim();
        let decl = decl
            .strip_prefix("__u64")
            .unwrap_or_else(|| panic!("union {name}: bitfields are not __u64: {decl:?}"));
        let decl = decl.trim().trim_end_matches(';');
        let mut shift = 0;
        let mut fields = Vec::new();
        for item in decl.split(',') {
            let (field, width) = item
                .split_once(':')
                .unwrap_or_else(|| panic!("union {name}: not `name:width`: {item:?}"));
            let width: u32 = width
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("union {name}: width of {field}: {e}"));
            fields.push((field.trim().to_owned(), Bitfield { shift, width }));
            shift += width;
        }
        assert_eq!(shift, 64, "union {name}: bitfields cover {shift} bits");
        unions.insert(name, fields);
        rest = &rest[fields_end..];
    }
    unions
}

fn is_reserved(name: &str) -> bool {
    name.starts_with("reserved")
}

#[test]
fn bitfields_match_amd_ibs_h() {
    let Some(root) = kernel_source_or_skip() else {
        return;
    };
    let unions = parse_unions(&read(&root, "arch/x86/include/asm/amd-ibs.h"));
    assert!(
        unions.len() >= 6,
        "found only {} unions: {:?}",
        unions.len(),
        unions.keys()
    );
    let mut checked = 0;
    for (union, header_fields) in &unions {
        let register = Register::ALL
            .into_iter()
            .find(|r| r.header_union() == Some(union.as_str()))
            .unwrap_or_else(|| panic!("union {union} in the header has no register in the crate"));
        let crate_fields: BTreeMap<&str, Bitfield> = register
            .fields()
            .iter()
            .map(|f| {
                assert_eq!(
                    f.register, register,
                    "{} lists a field of another register",
                    f.name
                );
                (
                    f.name,
                    Bitfield {
                        shift: f.shift,
                        width: f.width,
                    },
                )
            })
            .collect();
        let named: Vec<_> = header_fields
            .iter()
            .filter(|(name, _)| !is_reserved(name))
            .collect();
        for (name, want) in &named {
            let got = crate_fields.get(name.as_str()).unwrap_or_else(|| {
                panic!(
                    "{union}.{name} is in the header but not in {}",
                    register.name()
                )
            });
            assert_eq!(got, want, "{union}.{name}: crate vs header");
            checked += 1;
        }
        for name in crate_fields.keys() {
            assert!(
                named.iter().any(|(n, _)| n == name),
                "{}.{name} is in the crate but not in union {union}",
                register.name()
            );
        }
        // The crate's reserved mask is exactly the header's reserved fields.
        let header_reserved = header_fields
            .iter()
            .filter(|(name, _)| is_reserved(name))
            .fold(0u64, |m, (_, b)| {
                m | (u64::MAX >> (64 - b.width)) << b.shift
            });
        assert_eq!(
            register.reserved_mask(),
            header_reserved,
            "{union} reserved bits"
        );
    }
    for register in Register::ALL {
        match register.header_union() {
            Some(union) => assert!(
                unions.contains_key(union),
                "{} claims union {union}, which the header lacks",
                register.name()
            ),
            None => assert!(
                register.fields().is_empty(),
                "{} has fields but no union in the header",
                register.name()
            ),
        }
    }
    eprintln!("checked {checked} bitfields in {} unions", unions.len());
    assert!(checked >= 50, "only {checked} bitfields checked");
}

/// `#define NAME VALUE` lines whose name starts with `prefix`, VALUE as written.
fn defines<'a>(text: &'a str, prefix: &str) -> Vec<(&'a str, &'a str)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("#define")?;
            let rest = rest.trim_start();
            let (name, value) = rest.split_once(char::is_whitespace)?;
            name.starts_with(prefix).then_some((name, value.trim()))
        })
        .collect()
}

/// A header constant such as `0xc0011033`, `12`, `(1U<<5)`, `(0x7FULL<<20)`.
fn eval(value: &str) -> u64 {
    let v = value.trim().trim_start_matches('(').trim_end_matches(')');
    if let Some((a, b)) = v.split_once("<<") {
        return eval(a) << eval(b);
    }
    let v = v.trim().trim_end_matches(['U', 'L', 'u', 'l']);
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    }
    .unwrap_or_else(|e| panic!("cannot evaluate {value:?}: {e}"))
}

#[test]
fn data_src_codes_match_amd_ibs_h() {
    let Some(root) = kernel_source_or_skip() else {
        return;
    };
    let text = strip_comments(&read(&root, "arch/x86/include/asm/amd-ibs.h"));
    let header = defines(&text, "IBS_DATA_SRC_");
    assert_eq!(header.len(), DATA_SRC_CODES.len(), "{header:?}");
    for (name, value) in header {
        let ours = DATA_SRC_CODES
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is not in DATA_SRC_CODES"));
        assert_eq!(u64::from(ours.1), eval(value), "{name}");
    }
}

#[test]
fn caps_and_op_masks_match_perf_event_h() {
    let Some(root) = kernel_source_or_skip() else {
        return;
    };
    let text = strip_comments(&read(&root, "arch/x86/include/asm/perf_event.h"));
    let caps: Vec<_> = defines(&text, "IBS_CAPS_")
        .into_iter()
        .filter(|(name, _)| *name != "IBS_CAPS_DEFAULT")
        .collect();
    assert_eq!(caps.len(), Caps::NAMED.len(), "{caps:?}");
    for (name, value) in caps {
        let short = name.trim_start_matches("IBS_CAPS_");
        let (_, ours) = Caps::NAMED
            .iter()
            .find(|(n, _)| *n == short)
            .unwrap_or_else(|| panic!("{name} is not in Caps::NAMED"));
        assert_eq!(u64::from(ours.0), eval(value), "{name}");
    }

    let ctl = |name: &str| Register::OpCtl.field(name).expect(name).mask_in_place();
    let data = |name: &str| Register::OpData.field(name).expect(name).mask_in_place();
    let defined: BTreeMap<&str, &str> = defines(&text, "IBS_").into_iter().collect();
    let mask = |name: &str| eval(defined.get(name).unwrap_or_else(|| panic!("no {name}")));
    for (name, ours) in [
        ("IBS_OP_CNT_CTL", ctl("cnt_ctl")),
        ("IBS_OP_VAL", ctl("op_val")),
        ("IBS_OP_ENABLE", ctl("op_en")),
        ("IBS_OP_L3MISSONLY", ctl("l3_miss_only")),
        ("IBS_OP_MAX_CNT", ctl("opmaxcnt")),
        ("IBS_OP_MAX_CNT_EXT_MASK", ctl("opmaxcnt_ext")),
        ("IBS_RIP_INVALID", data("op_rip_invalid")),
    ] {
        assert_eq!(mask(name), ours, "{name}");
    }
    // The typed accessors agree with the masks too.
    assert!(IbsOpCtl(mask("IBS_OP_VAL")).op_val());
    assert!(IbsOpData(mask("IBS_RIP_INVALID")).op_rip_invalid());
    // The current count's random low 7 bits and the rest lie within `opcurcnt`.
    let cur = ctl("opcurcnt");
    for name in ["IBS_OP_CUR_CNT", "IBS_OP_CUR_CNT_RAND"] {
        assert_eq!(mask(name) & !cur, 0, "{name} outside opcurcnt");
    }
}

#[test]
fn msr_numbers_match_msr_index_h() {
    let Some(root) = kernel_source_or_skip() else {
        return;
    };
    let text = strip_comments(&read(&root, "arch/x86/include/asm/msr-index.h"));
    let msrs: BTreeMap<&str, u64> = defines(&text, "MSR_AMD64_")
        .into_iter()
        .filter(|(_, v)| v.starts_with("0x"))
        .map(|(n, v)| (n, eval(v)))
        .collect();
    for (name, register) in [
        ("MSR_AMD64_IBSFETCHCTL", Register::FetchCtl),
        ("MSR_AMD64_IBSOPCTL", Register::OpCtl),
        ("MSR_AMD64_IBSOPRIP", Register::OpRip),
        ("MSR_AMD64_IBSOPDATA", Register::OpData),
        ("MSR_AMD64_IBSOPDATA2", Register::OpData2),
        ("MSR_AMD64_IBSOPDATA3", Register::OpData3),
        ("MSR_AMD64_IBSDCLINAD", Register::DcLinAd),
        ("MSR_AMD64_IBSDCPHYSAD", Register::DcPhysAd),
        ("MSR_AMD64_IBSBRTARGET", Register::BrTarget),
        ("MSR_AMD64_ICIBSEXTDCTL", Register::IcIbsExtdCtl),
        ("MSR_AMD64_IBSOPDATA4", Register::OpData4),
    ] {
        assert_eq!(
            msrs.get(name),
            Some(&u64::from(register.msr())),
            "{name} vs {}",
            register.name()
        );
    }
    // The raw blob's fixed part is IbsOpCtl and the next MSR_AMD64_IBSOP_REG_COUNT - 1 MSRs.
    let count = defines(&text, "MSR_AMD64_IBSOP_REG_COUNT")
        .first()
        .map(|(_, v)| eval(v))
        .expect("MSR_AMD64_IBSOP_REG_COUNT");
    assert_eq!(
        dprof_ibs::IbsOpSample::raw_len(Caps(0)) as u64,
        4 + 8 * count
    );
}

#[test]
fn comment_stripping() {
    assert_eq!(strip_comments("a /* b\n c */ d // e\nf"), "a   d \nf");
    let unions =
        parse_unions("union x { __u64 val; struct { __u64 a:3, /* c */ reserved:60, b:1; }; };");
    assert_eq!(
        unions["x"],
        vec![
            ("a".to_owned(), Bitfield { shift: 0, width: 3 }),
            (
                "reserved".to_owned(),
                Bitfield {
                    shift: 3,
                    width: 60
                }
            ),
            (
                "b".to_owned(),
                Bitfield {
                    shift: 63,
                    width: 1
                }
            ),
        ]
    );
}
