//! Field names of bit-fields and unions, from the DWARF of each compiler and DWARF version the
//! kernel may be built with: clang (which writes bit-fields in the DWARF 2 form,
//! `DW_AT_bit_offset` from the storage unit's most significant bit, whatever the version) and,
//! where installed, gcc (`DW_AT_data_bit_offset` from DWARF 5 on).

use std::process::Command;

use super::{compile, DebugInfo};

const SOURCE: &str = r"
/* Bit-fields after a plain member, several in one byte, spanning bytes, and in a new unit. */
struct bits {
	unsigned char tag;          /* byte 0 */
	unsigned int a:4;           /* bits 8-11 */
	unsigned int b:4;           /* bits 12-15 */
	unsigned int c:12;          /* bits 16-27 */
	unsigned int d:4;           /* bits 28-31 */
	unsigned int e:20;          /* bits 32-51 */
	unsigned int :2;            /* bits 52-53, unnamed */
	unsigned int f:3;           /* bits 54-56: bytes 6 and 7 */
	unsigned short g;           /* bytes 8-9 */
	unsigned long long h:40;    /* bits 80-119 */
	unsigned long long i:24;    /* no room left in h's unit: bits 128-151 */
};

/* Union members shorter than later ones, and with padding where later ones have data. */
struct padded { char c; long v; };
struct longer { long w; long x; long y; };
struct with_union {
	int kind;
	union {
		struct padded first;    /* 8-23, padding at 9-15 */
		struct longer second;   /* 8-31 */
	} u;
	union {
		struct padded one;
		struct padded two;      /* the same padding */
	} both;                     /* 32-47 */
};

/* As restart_block: named structs in an anonymous union, an anonymous union in one. */
struct restart {
	long fn;
	union {
		struct {
			int *uaddr;
			unsigned int val, flags, bitset; /* then a hole at 28-31 */
			unsigned long long time;
		} futex;
		struct {
			int clockid, type;
			union { int *rmtp; long compat_rmtp; };
			unsigned long long expires;      /* 24-31 */
		} nanosleep;
	};
};

/* Anonymous structs and unions nested in each other. */
struct anon {
	union {
		struct { short s0; short s1; };
		int whole;
	};
	struct {
		union { char tag_c; int tag_i; };
		unsigned int flag:1;
		unsigned int mode:3;
	};
};

struct bits g_bits;
struct with_union g_with_union;
struct restart g_restart;
struct anon g_anon;
";

/// The object of [`SOURCE`] from each compiler and DWARF version, with a label.
fn objects(dir: &std::path::Path) -> Vec<(String, std::path::PathBuf)> {
    std::fs::write(dir.join("layouts.c"), SOURCE).expect("write source");
    let gcc = Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !gcc {
        eprintln!("gcc is not installed: only clang's DWARF is checked");
    }
    let compilers = [("clang", "install clang (scripts/setup does)")]
        .into_iter()
        .chain(gcc.then_some(("gcc", "install gcc")));
    let mut out = Vec::new();
    for (compiler, install) in compilers {
        for version in ["-gdwarf-2", "-gdwarf-4", "-gdwarf-5"] {
            let object = format!("{compiler}{version}.o");
            let args = ["-g", version, "-O0", "-c", "layouts.c", "-o", &object];
            compile(compiler, install, dir, &args);
            out.push((format!("{compiler} {version}"), dir.join(object)));
        }
    }
    out
}

/// Whether the DWARF of `info` has bit-fields in the DWARF 2 form (`DW_AT_bit_offset`) and in
/// the DWARF 4 one (`DW_AT_data_bit_offset`).
fn bit_field_forms(info: &DebugInfo) -> (bool, bool) {
    let mut forms = (false, false);
    for unit in info.vmlinux.units() {
        let mut entries = unit.entries();
        while let Ok(Some((_, e))) = entries.next_dfs() {
            forms.0 |= e.attr(gimli::DW_AT_bit_offset).is_ok_and(|a| a.is_some());
            forms.1 |= e
                .attr(gimli::DW_AT_data_bit_offset)
                .is_ok_and(|a| a.is_some());
        }
    }
    forms
}

/// `field_at` of every byte of struct `name`, as (offset, name) for the bytes that have one.
fn names(info: &DebugInfo, name: &str) -> Vec<(u64, String)> {
    let size = info.struct_size(name).expect("defined");
    (0..size)
        .filter_map(|b| info.field_at(name, b).map(|n| (b, n)))
        .collect()
}

/// `(first byte, name)` pairs to one entry per byte, each name running to the next start;
/// `None` marks bytes without a name.
fn bytes(runs: &[(u64, Option<&str>)], size: u64) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for (i, (start, name)) in runs.iter().enumerate() {
        let end = runs.get(i + 1).map_or(size, |r| r.0);
        if let Some(name) = name {
            out.extend((*start..end).map(|b| (b, (*name).to_owned())));
        }
    }
    out
}

#[test]
fn bit_fields_name_the_bytes_their_bits_occupy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut forms = (false, false);
    for (label, object) in objects(dir.path()) {
        let info = DebugInfo::load(&object, None).expect("loads");
        let found = bit_field_forms(&info);
        forms = (forms.0 | found.0, forms.1 | found.1);
        let fields: Vec<_> = info
            .struct_fields("bits")
            .expect("defined")
            .into_iter()
            .map(|f| (f.name, f.offset, f.size))
            .collect();
        let expected = [
            ("tag", 0, 1),
            ("a", 1, 1),
            ("b", 1, 1),
            ("c", 2, 2),
            ("d", 3, 1),
            ("e", 4, 3),
            ("f", 6, 2),
            ("g", 8, 2),
            ("h", 10, 5),
            ("i", 16, 3),
        ]
        .map(|(n, o, s)| (n.to_owned(), o, s));
        assert_eq!(fields, expected, "{label}");
        // Several bit-fields in a byte: the first one (a, not b; c, not d; e, not f).
        let runs = [
            (0, Some("tag")),
            (1, Some("a")),
            (2, Some("c")),
            (4, Some("e")),
            (7, Some("f")),
            (8, Some("g")),
            (10, Some("h")),
            (15, None),
            (16, Some("i")),
            (19, None),
        ];
        assert_eq!(names(&info, "bits"), bytes(&runs, 24), "{label}");
    }
    assert_eq!(forms, (true, true), "both bit-field forms were read");
}

#[test]
fn union_members_holding_a_byte_win_over_padding() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (label, object) in objects(dir.path()) {
        let info = DebugInfo::load(&object, None).expect("loads");
        let runs = [
            (0, Some("kind")),
            (4, None),
            (8, Some("u.first.c")),
            // Padding in `first`: `second` holds these bytes.
            (9, Some("u.second.w")),
            (16, Some("u.first.v")),
            // Past `first`.
            (24, Some("u.second.y")),
            (32, Some("both.one.c")),
            // Padding in every member: the first one.
            (33, Some("both.one")),
            (40, Some("both.one.v")),
        ];
        assert_eq!(names(&info, "with_union"), bytes(&runs, 48), "{label}");
        let runs = [
            (0, Some("fn")),
            (8, Some("futex.uaddr")),
            (16, Some("futex.val")),
            (20, Some("futex.flags")),
            (24, Some("futex.bitset")),
            // futex's hole: restart_block.nanosleep.expires, not restart_block.futex.
            (28, Some("nanosleep.expires")),
            (32, Some("futex.time")),
        ];
        assert_eq!(names(&info, "restart"), bytes(&runs, 40), "{label}");
        let runs = [
            (0, Some("s0")),
            (2, Some("s1")),
            (4, Some("tag_c")),
            (5, Some("tag_i")),
            // flag and mode share byte 8; then the anonymous struct's padding names nothing.
            (8, Some("flag")),
            (9, None),
        ];
        assert_eq!(names(&info, "anon"), bytes(&runs, 12), "{label}");
    }
}
