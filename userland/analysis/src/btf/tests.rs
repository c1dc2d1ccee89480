use dprof_fixtures::btf::{example, BtfBuilder, BtfMember, SK_BUFF_SIZE};

use super::*;

fn parse(bytes: &[u8]) -> Btf {
    Btf::parse(bytes).expect("valid BTF")
}

#[test]
fn the_example_sk_buff_is_named_as_dwarf_would_name_it() {
    let btf = parse(&example());
    assert_eq!(btf.struct_size("sk_buff"), Some(u64::from(SK_BUFF_SIZE)));
    assert_eq!(btf.struct_size("struct sk_buff"), Some(232));
    assert_eq!(btf.struct_size("list_head"), Some(16));
    for (offset, field) in [
        // An anonymous union of an anonymous struct and a named one: only names show.
        (0, Some("next")),
        (7, Some("next")),
        (8, Some("prev")),
        // A pointer to a struct only declared.
        (0x10, Some("sk")),
        (0x18, Some("cb[0]")),
        (0x47, Some("cb[47]")),
        (0x48, Some("_skb_refdst")),
        (0x50, None),
        (0x6f, None),
        (0x70, Some("len")),
        (0x73, Some("len")),
        (0x74, Some("data_len")),
        // Bit-fields: the first that holds the byte.
        (0x78, Some("cloned")),
        (0x79, Some("pkt_type")),
        (0x7a, None),
        // An array of structs: element and member.
        (0x80, Some("frags[0].next")),
        (0x98, Some("frags[1].prev")),
        (0x9f, Some("frags[1].prev")),
        // Through a typedef, and a pointer to const.
        (0xa0, Some("tail")),
        (0xa3, Some("tail")),
        (0xa4, None),
        (0xa8, Some("owner")),
        (0xe7, None),
        (0xe8, None),
        (u64::MAX, None),
    ] {
        assert_eq!(
            btf.field_at("sk_buff", offset).as_deref(),
            field,
            "offset {offset:#x}"
        );
    }
    assert_eq!(btf.field_at("list_head", 8).as_deref(), Some("prev"));
    assert_eq!(btf.field_at("nothing", 0), None);
}

#[test]
fn field_source_knows_structs_not_declarations_or_scalars() {
    let btf = parse(&example());
    let source: &dyn FieldSource = &btf;
    assert!(source.has_struct("sk_buff"));
    assert!(source.has_struct("struct list_head"));
    // Only declared: no layout.
    assert!(!source.has_struct("sock"));
    assert!(!source.has_struct("unsigned int"));
    // A typedef of an integer is no struct.
    assert!(!source.has_struct("sk_buff_data_t"));
    assert_eq!(source.field_at("sk_buff", 0x10).as_deref(), Some("sk"));
}

/// The bytes of a blob written out by hand, without the builder: `struct pair { int a; int b;
/// }`.
#[test]
fn a_blob_written_byte_by_byte() {
    let words: &[u32] = &[
        // [1] INT "int" size 4, 32 bits
        1,
        1 << 24,
        4,
        32,
        // [2] STRUCT "pair" size 8, 2 members
        5,
        (4 << 24) | 2,
        8,
        // a: type 1, bit 0; b: type 1, bit 32
        10,
        1,
        0,
        12,
        1,
        32,
    ];
    let strings = b"\0int\0pair\0a\0b\0";
    let types: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut bytes = vec![0x9f, 0xeb, 1, 0];
    for w in [
        24,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.len() as u32,
    ] {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    bytes.extend_from_slice(&types);
    bytes.extend_from_slice(strings);
    let btf = parse(&bytes);
    assert_eq!(btf.struct_size("pair"), Some(8));
    assert_eq!(btf.field_at("pair", 0).as_deref(), Some("a"));
    assert_eq!(btf.field_at("pair", 4).as_deref(), Some("b"));
    assert_eq!(btf.field_at("pair", 8), None);
}

/// Unions with padding, arrays of arrays, typedef names, named nested structs, a name with an
/// empty definition before the real one.
#[test]
fn nested_types_follow_the_dwarf_conventions() {
    let mut b = BtfBuilder::new();
    let int = b.int("int", 4);
    let long = b.int("long int", 8);
    let char_t = b.int("char", 1);
    // struct inner { int x; /* 4 bytes padding */ long y; };
    let inner = b.struct_type(
        "inner",
        16,
        &[BtfMember::at("x", int, 0), BtfMember::at("y", long, 8)],
    );
    // union u { struct inner in; char c; };
    let u = b.union_type(
        "u",
        16,
        &[BtfMember::at("in", inner, 0), BtfMember::at("c", char_t, 0)],
    );
    // union { struct { int a; long b; }; long whole; }: padding in the first, not the second.
    let ab = b.struct_type(
        "",
        16,
        &[BtfMember::at("a", int, 0), BtfMember::at("b", long, 8)],
    );
    let anon = b.union_type(
        "",
        16,
        &[BtfMember::at("", ab, 0), BtfMember::at("whole", long, 0)],
    );
    // int grid[2][3];
    let row = b.array(int, int, 3);
    let grid = b.array(row, int, 2);
    b.struct_type("outer", 0, &[]);
    let outer = b.struct_type(
        "outer",
        64,
        &[
            BtfMember::at("u", u, 0),
            BtfMember::at("", anon, 16),
            BtfMember::at("grid", grid, 32),
        ],
    );
    b.typedef("outer_t", outer);
    let btf = parse(&b.finish());
    for (offset, field) in [
        (0, Some("u.in.x")),
        // Padding inside `in`: the member that holds it, as DWARF names it.
        (5, Some("u.in")),
        (8, Some("u.in.y")),
        (16, Some("a")),
        // Padding of the anonymous struct: the union's other member.
        (20, Some("whole")),
        (24, Some("b")),
        (32, Some("grid[0]")),
        (32 + 4 * 4, Some("grid[4]")),
        (32 + 23, Some("grid[5]")),
        (56, None),
    ] {
        assert_eq!(
            btf.field_at("outer", offset).as_deref(),
            field,
            "offset {offset}"
        );
    }
    assert_eq!(btf.struct_size("outer"), Some(64), "the one with members");
    assert_eq!(btf.field_at("outer_t", 8).as_deref(), Some("u.in.y"));
    assert_eq!(btf.field_at("union u", 0).as_deref(), Some("in.x"));
    assert_eq!(btf.field_at("u", 0).as_deref(), Some("in.x"));
}

/// Union members shorter than later ones, or with padding where later ones have data: a byte
/// is named after the first member that holds it, as the DWARF resolver names it.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "two layouts built type by type, then tables of names"
)]
fn union_members_holding_a_byte_win_over_padding() {
    let mut b = BtfBuilder::new();
    let char_t = b.int("char", 1);
    let int = b.int("int", 4);
    let uint = b.int("unsigned int", 4);
    let long = b.int("long int", 8);
    let u64_t = b.int("long long unsigned int", 8);
    let int_ptr = b.ptr(int);
    // struct padded { char c; long v; };  struct longer { long w, x, y; };
    let padded = b.struct_type(
        "padded",
        16,
        &[BtfMember::at("c", char_t, 0), BtfMember::at("v", long, 8)],
    );
    let longer = b.struct_type(
        "longer",
        24,
        &[
            BtfMember::at("w", long, 0),
            BtfMember::at("x", long, 8),
            BtfMember::at("y", long, 16),
        ],
    );
    // union { struct padded first; struct longer second; } u;  padding at 1..8 of `first`.
    let u = b.union_type(
        "",
        24,
        &[
            BtfMember::at("first", padded, 0),
            BtfMember::at("second", longer, 0),
        ],
    );
    // union { struct padded one; struct padded two; } both;  the same padding in each.
    let both = b.union_type(
        "",
        16,
        &[
            BtfMember::at("one", padded, 0),
            BtfMember::at("two", padded, 0),
        ],
    );
    b.struct_type(
        "with_union",
        48,
        &[
            BtfMember::at("kind", int, 0),
            BtfMember::at("u", u, 8),
            BtfMember::at("both", both, 32),
        ],
    );
    // As restart_block: named structs in an anonymous union, an anonymous union in one.
    let futex = b.struct_type(
        "",
        32,
        &[
            BtfMember::at("uaddr", int_ptr, 0),
            BtfMember::at("val", uint, 8),
            BtfMember::at("flags", uint, 12),
            BtfMember::at("bitset", uint, 16),
            // A hole at 20..24.
            BtfMember::at("time", u64_t, 24),
        ],
    );
    let rmtp = b.union_type(
        "",
        8,
        &[
            BtfMember::at("rmtp", int_ptr, 0),
            BtfMember::at("compat_rmtp", long, 0),
        ],
    );
    let nanosleep = b.struct_type(
        "",
        24,
        &[
            BtfMember::at("clockid", int, 0),
            BtfMember::at("type", int, 4),
            BtfMember::at("", rmtp, 8),
            BtfMember::at("expires", u64_t, 16),
        ],
    );
    let calls = b.union_type(
        "",
        32,
        &[
            BtfMember::at("futex", futex, 0),
            BtfMember::at("nanosleep", nanosleep, 0),
        ],
    );
    let long_ptr = b.ptr(long);
    b.struct_type(
        "restart",
        40,
        &[
            BtfMember::at("fn", long_ptr, 0),
            BtfMember::at("", calls, 8),
        ],
    );
    let btf = parse(&b.finish());
    for (offset, field) in [
        (0, Some("kind")),
        (4, None),
        (8, Some("u.first.c")),
        // Padding in `first`: `second` holds these bytes.
        (9, Some("u.second.w")),
        (15, Some("u.second.w")),
        (16, Some("u.first.v")),
        // Past `first`.
        (24, Some("u.second.y")),
        (32, Some("both.one.c")),
        // Padding in every member: the first one.
        (33, Some("both.one")),
        (40, Some("both.one.v")),
        (48, None),
    ] {
        assert_eq!(
            btf.field_at("with_union", offset).as_deref(),
            field,
            "with_union +{offset}"
        );
    }
    for (offset, field) in [
        (0, Some("fn")),
        (8, Some("futex.uaddr")),
        (16, Some("futex.val")),
        (24, Some("futex.bitset")),
        // futex's hole: nanosleep.expires, not futex.
        (28, Some("nanosleep.expires")),
        (31, Some("nanosleep.expires")),
        (32, Some("futex.time")),
    ] {
        assert_eq!(
            btf.field_at("restart", offset).as_deref(),
            field,
            "restart +{offset}"
        );
    }
}

#[test]
fn cycles_and_bad_references_end() {
    let mut b = BtfBuilder::new();
    let int = b.int("int", 4);
    // typedef loop_a -> loop_b -> loop_a
    let loop_a = b.next_id();
    b.typedef("loop_a", loop_a + 1);
    b.typedef("loop_b", loop_a);
    // struct cyc { struct cyc inner; int x; }: itself by value.
    let cyc = b.next_id();
    b.struct_type(
        "cyc",
        8,
        &[
            BtfMember::at("inner", cyc, 0),
            BtfMember::at("x", int, 4),
            BtfMember::at("l", loop_a, 0),
            BtfMember::at("missing", 999, 0),
        ],
    );
    let btf = parse(&b.finish());
    assert!(!btf.has_struct("loop_a"));
    assert_eq!(btf.field_at("loop_a", 0), None);
    // The nesting ends at the depth limit, with some name.
    let name = btf.field_at("cyc", 0).expect("named");
    assert!(name.starts_with("inner.inner."), "{name}");
    assert!(name.len() < 1000, "{name}");
    assert!(btf.field_at("cyc", 4).is_some());
}

#[test]
fn bad_bytes_are_errors_not_panics() {
    assert!(matches!(Btf::parse(&[]), Err(BtfError::Short { len: 0 })));
    let good = example();
    let mut magic = good.clone();
    magic[0] = 0;
    let err = Btf::parse(&magic).expect_err("bad magic");
    assert_eq!(err.to_string(), "not BTF: the magic is 0xeb00, not 0xeb9f");
    let mut long = good.clone();
    // The string section's length, past the end.
    long[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = Btf::parse(&long).expect_err("out of bounds");
    assert!(
        err.to_string()
            .starts_with("the BTF header places its string section at bytes"),
        "{err}"
    );
    for cut in 0..good.len() {
        assert!(Btf::parse(&good[..cut]).is_err(), "cut at {cut}");
    }
    let answer = |bytes: &[u8]| {
        if let Ok(btf) = Btf::parse(bytes) {
            for offset in [0, 8, 0x18, 0x78, 0x98, 0xa8] {
                let _ = btf.field_at("sk_buff", offset);
            }
            let _ = btf.has_struct("list_head");
        }
    };
    // Every byte changed: whatever parses answers without panicking.
    for i in 0..good.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut bytes = good.clone();
            bytes[i] ^= flip;
            answer(&bytes);
        }
    }
    // And a few bytes at a time, at random (xorshift, fixed seed).
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..2000 {
        let mut bytes = good.clone();
        for _ in 0..=next() % 4 {
            let i = (next() % bytes.len() as u64) as usize;
            bytes[i] = next() as u8;
        }
        answer(&bytes);
    }
}

/// The byte offset of member `member` in `s`, from btf-rs's member lists (in anonymous
/// members too: recent kernels put `dentry.d_name` in an anonymous union).
fn find(raw: &btf_rs::Btf, s: &Struct, member: &str, depth: usize) -> Option<u64> {
    s.members.iter().find_map(|m| {
        let at = u64::from(m.bit_offset() / 8);
        let name = raw.resolve_name(m).ok()?;
        if name == member {
            return Some(at);
        }
        if !name.is_empty() || depth > 4 {
            return None;
        }
        match raw.resolve_type_by_id(m.get_type_id()?).ok()? {
            Type::Struct(inner) | Type::Union(inner) => {
                find(raw, &inner, member, depth + 1).map(|o| at + o)
            }
            _ => None,
        }
    })
}

/// The BTF of a real kernel: `DPROF_TEST_BTF=/sys/kernel/btf/vmlinux` (scripts/test sets it
/// where the file exists). Offsets are found with btf-rs's own member lists, and checked
/// with facts no kernel has changed in years.
#[test]
fn real_kernel_btf() {
    let Some(path) = std::env::var_os("DPROF_TEST_BTF") else {
        // scripts/test sets it where the kernel has BTF; a machine without any cannot run this.
        eprintln!("skipped: set DPROF_TEST_BTF to a kernel's BTF, e.g. /sys/kernel/btf/vmlinux");
        return;
    };
    let bytes = std::fs::read(&path).expect("DPROF_TEST_BTF is readable");
    let btf = parse(&bytes);
    let raw = btf_rs::Btf::from_bytes(&bytes).expect("btf-rs reads it");
    // The byte offset of member `member` of struct `name`.
    let offset_of = |name: &str, member: &str| -> u64 {
        raw.resolve_types_by_name(name)
            .expect("resolves")
            .iter()
            .find_map(|t| match t {
                Type::Struct(s) => find(&raw, s, member, 0),
                _ => None,
            })
            .unwrap_or_else(|| panic!("struct {name} has a member {member}"))
    };

    // Layouts that have not changed in many years.
    assert_eq!(btf.struct_size("list_head"), Some(16));
    assert_eq!(btf.member_offset("list_head", "prev"), Some(8));
    assert_eq!(btf.member_offset("list_head", "nope"), None);
    assert_eq!(
        btf.member_offset("dentry", "d_inode"),
        Some(offset_of("dentry", "d_inode"))
    );
    // What the perf backend reads to find an object's cache on kernels whose tracepoint
    // does not name it.
    assert!(btf.member_offset("slab", "slab_cache").is_some());
    assert!(btf.member_offset("kmem_cache", "name").is_some());
    assert_eq!(btf.field_at("list_head", 0).as_deref(), Some("next"));
    assert_eq!(btf.field_at("list_head", 8).as_deref(), Some("prev"));
    assert_eq!(btf.field_at("list_head", 16), None);
    assert_eq!(btf.field_at("hlist_node", 8).as_deref(), Some("pprev"));
    assert_eq!(btf.field_at("callback_head", 8).as_deref(), Some("func"));
    // atomic_t is a typedef of an anonymous struct.
    assert_eq!(btf.field_at("atomic_t", 0).as_deref(), Some("counter"));
    // Every kernel with per-CPU data has a .data..percpu DATASEC with runqueues in it, and
    // its variables lie inside it.
    let percpu = btf.percpu_layout();
    let runqueues = percpu
        .variables
        .iter()
        .find(|v| v.name == "runqueues")
        .expect("runqueues is a per-CPU variable");
    assert_eq!(Some(runqueues.size), btf.struct_size("rq"));
    assert!(percpu
        .variables
        .iter()
        .all(|v| v.offset + v.size <= percpu.bytes));
    assert!(percpu
        .variables
        .windows(2)
        .all(|w| w[0].offset <= w[1].offset));
    // Per-CPU variables, which pahole always encodes.
    assert_eq!(
        btf.variable_type("runqueues"),
        Some(VariableType::Composite("struct rq".to_owned()))
    );
    assert_eq!(
        btf.variable_type("this_cpu_off"),
        Some(VariableType::Scalar { size: 8 })
    );
    assert_eq!(btf.variable_type("no_such_variable_xyz"), None);
    assert_eq!(btf.field_at("inode", 0).as_deref(), Some("i_mode"));
    assert!(btf.struct_size("inode").is_some_and(|s| s > 256));
    // sk_buff starts with an anonymous union whose first member is an anonymous struct of
    // next and prev.
    assert_eq!(btf.field_at("sk_buff", 0).as_deref(), Some("next"));
    assert_eq!(btf.field_at("sk_buff", 8).as_deref(), Some("prev"));

    let d_inode = offset_of("dentry", "d_inode");
    assert_eq!(btf.field_at("dentry", d_inode).as_deref(), Some("d_inode"));
    assert_eq!(
        btf.field_at("dentry", d_inode + 7).as_deref(),
        Some("d_inode")
    );
    let d_name = offset_of("dentry", "d_name");
    // struct qstr: a union of {hash, len} and hash_len, then the name pointer. Since 6.14
    // d_name shares an anonymous union with a const alias, `__d_name`, declared first.
    let at_name = btf.field_at("dentry", d_name).expect("named");
    assert!(at_name.ends_with("d_name.hash"), "{at_name}");
    let at_pointer = btf.field_at("dentry", d_name + 8).expect("named");
    assert!(at_pointer.ends_with("d_name.name"), "{at_pointer}");
    let len = offset_of("sk_buff", "len");
    assert_eq!(btf.field_at("sk_buff", len).as_deref(), Some("len"));
    let cb = offset_of("sk_buff", "cb");
    assert_eq!(btf.field_at("sk_buff", cb + 5).as_deref(), Some("cb[5]"));

    // Every byte of a large struct, quickly: most are named.
    let size = btf.struct_size("task_struct").expect("task_struct");
    let start = std::time::Instant::now();
    let named = (0..size)
        .filter(|&o| btf.field_at("task_struct", o).is_some())
        .count() as u64;
    let took = start.elapsed();
    assert!(named * 10 > size * 8, "{named} of {size} bytes named");
    eprintln!("task_struct: {named} of {size} bytes named in {took:?}");
}

#[test]
fn the_percpu_section_lists_its_variables_by_offset() {
    let mut b = BtfBuilder::new();
    let int = b.int("int", 4);
    let long = b.int("long", 8);
    let counter = b.var("counter", int);
    let offset = b.var("this_cpu_off", long);
    let global = b.var("jiffies", long);
    b.datasec(".data..percpu", 4096, &[(offset, 64, 8), (counter, 0, 4)]);
    b.datasec(".data", 8, &[(global, 0, 8)]);
    let btf = parse(&b.finish());
    let layout = btf.percpu_layout();
    assert_eq!(layout.bytes, 4096);
    let listed: Vec<(&str, u64, u64)> = layout
        .variables
        .iter()
        .map(|v| (v.name.as_str(), v.offset, v.size))
        .collect();
    assert_eq!(listed, [("counter", 0, 4), ("this_cpu_off", 64, 8)]);
    // Without the section there is nothing to place.
    assert_eq!(parse(&example()).percpu_layout(), PercpuLayout::default());
}
