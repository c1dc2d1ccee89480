use super::*;

/// `kmem_cache_alloc` as Linux 6.18 defines it (print fmt cut).
const ALLOC_6_18: &str = "name: kmem_cache_alloc
ID: 659
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long call_site;\toffset:8;\tsize:8;\tsigned:0;
\tfield:const void * ptr;\toffset:16;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] name;\toffset:24;\tsize:4;\tsigned:0;
\tfield:size_t bytes_req;\toffset:32;\tsize:8;\tsigned:0;
\tfield:size_t bytes_alloc;\toffset:40;\tsize:8;\tsigned:0;
\tfield:unsigned long gfp_flags;\toffset:48;\tsize:8;\tsigned:0;
\tfield:int node;\toffset:56;\tsize:4;\tsigned:1;
\tfield:bool accounted;\toffset:60;\tsize:1;\tsigned:0;

print fmt: \"call_site=%pS ptr=%p name=%s\", (void *)REC->call_site, REC->ptr, __get_str(name)
";

/// The same event on Debian 12's Linux 6.1: no cache name.
pub(crate) const ALLOC_6_1: &str = "name: kmem_cache_alloc
ID: 520
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long call_site;\toffset:8;\tsize:8;\tsigned:0;
\tfield:const void * ptr;\toffset:16;\tsize:8;\tsigned:0;
\tfield:size_t bytes_req;\toffset:24;\tsize:8;\tsigned:0;
\tfield:size_t bytes_alloc;\toffset:32;\tsize:8;\tsigned:0;
\tfield:unsigned long gfp_flags;\toffset:40;\tsize:8;\tsigned:0;
\tfield:int node;\toffset:48;\tsize:4;\tsigned:1;
\tfield:bool accounted;\toffset:52;\tsize:1;\tsigned:0;

print fmt: \"call_site=%pS ptr=%p\", (void *)REC->call_site, REC->ptr
";

pub(crate) fn alloc_6_18() -> Format {
    Format::parse(ALLOC_6_18).expect("parses")
}

#[test]
fn fields_are_read_from_the_format_file() {
    let f = alloc_6_18();
    assert_eq!((f.name.as_str(), f.id), ("kmem_cache_alloc", 659));
    let name = f.field("name").expect("6.18 names the cache");
    assert_eq!(
        (name.offset, name.size, name.kind),
        (24, 4, FieldKind::DataLoc)
    );
    let ptr = f.field("ptr").expect("ptr");
    assert_eq!((ptr.offset, ptr.size, ptr.kind), (16, 8, FieldKind::Scalar));
    assert_eq!(f.field("node").map(|n| n.offset), Some(56));
    assert!(f.field("common_pid").is_some());
    assert!(f.field("nope").is_none());
}

#[test]
fn linux_6_1_has_no_cache_name_and_other_offsets() {
    let f = Format::parse(ALLOC_6_1).expect("parses");
    assert!(f.field("name").is_none());
    assert_eq!(f.field("bytes_alloc").map(|b| b.offset), Some(32));
}

#[test]
fn bad_format_files_are_refused_with_the_line() {
    assert_eq!(
        Format::parse("ID: 3\n").expect_err("refused"),
        "no name line"
    );
    assert_eq!(
        Format::parse("name: x\n").expect_err("refused"),
        "no ID line"
    );
    let err = Format::parse("name: x\nID: 1\n\tfield:int a;\toffset:zero;\tsize:4;\n")
        .expect_err("refused");
    assert!(err.contains("offset:zero"), "{err}");
    let err = Format::parse("name: x\nID: 1\n\tfield:__data_loc char[] s;\toffset:8;\tsize:8;\n")
        .expect_err("refused");
    assert!(err.contains("bad field"), "{err}");
}

#[test]
fn raw_records_give_scalars_and_strings_and_nothing_out_of_bounds() {
    let f = alloc_6_18();
    let mut raw = vec![0u8; 64];
    raw[16..24].copy_from_slice(&0xffff_8880_1234_5600u64.to_le_bytes());
    raw[56..60].copy_from_slice(&(-1i32).to_le_bytes());
    // The name "dentry\0" at offset 64, 7 bytes long.
    raw[24..28].copy_from_slice(&(0x40u32 | (7 << 16)).to_le_bytes());
    raw.extend_from_slice(b"dentry\0");
    let r = RawRecord(&raw);
    let field = |n: &str| f.field(n).expect("field").clone();
    assert_eq!(r.unsigned(&field("ptr")), Some(0xffff_8880_1234_5600));
    assert_eq!(r.signed(&field("node")), Some(-1));
    assert_eq!(r.string(&field("name")), Some(&b"dentry"[..]));
    // A location past the end, and a record cut short.
    raw[24..28].copy_from_slice(&(0xc8u32 | (7 << 16)).to_le_bytes());
    assert_eq!(RawRecord(&raw).string(&field("name")), None);
    assert_eq!(RawRecord(&raw[..20]).unsigned(&field("ptr")), None);
}
