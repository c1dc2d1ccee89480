//! Debug information of small C files compiled at test time with the system's `cc -g`: a
//! relocatable object (as a module `.ko` is) and a linked executable with a build id (as a
//! vmlinux is).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use dprof_fixtures::profile::example_header;

mod instruction_types;
mod layouts;

const SOURCE: &str = r#"
struct inner { int a; short b; };
struct list_head { struct list_head *next, *prev; };
struct sample_obj {
	long id;
	struct inner in;
	union { int u_int; char u_bytes[4]; };
	unsigned flags:3;
	unsigned more:5;
	struct list_head lists[2];
	char name[16];
	void (*fn)(void);
	const struct inner *ptr;
};
typedef struct sample_obj sample_t;
const char linux_banner[] = "Linux version 6.12.0-test (a@b) (gcc) #1 SMP\n";
sample_t global_obj;
int counter = 5;
__attribute__((section(".data..percpu"))) long pcpu_var[4];
/* A size-0 alias at a per-CPU variable's address, as the kernel's linker script makes
   const_pcpu_hot of pcpu_hot. */
asm(".pushsection .data..percpu,\"aw\"\n"
    ".globl pcpu_alias\n.type pcpu_alias, @object\n.size pcpu_alias, 0\npcpu_alias:\n"
    ".globl pcpu_sized\n.type pcpu_sized, @object\n.size pcpu_sized, 16\npcpu_sized:\n"
    ".zero 16\n.popsection");
static inline int helper(struct sample_obj *o) { return o->in.a * 3; }
int func(struct sample_obj *o)
{
	return helper(o) + o->in.b + 1;
}
"#;

const BANNER: &str = "Linux version 6.12.0-test (a@b) (gcc) #1 SMP";

struct Built {
    _dir: tempfile::TempDir,
    object: PathBuf,
    linked: PathBuf,
}

fn cc(dir: &Path, args: &[&str]) {
    compile("cc", "install gcc (cc)", dir, args);
}

/// Runs C compiler `compiler` with `args` in `dir`; `install` says how to get it.
fn compile(compiler: &str, install: &str, dir: &Path, args: &[&str]) {
    let out = Command::new(compiler)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("these tests need {compiler} ({e}): {install}"));
    assert!(
        out.status.success(),
        "{compiler} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn build() -> Built {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("t.c"), SOURCE).expect("write source");
    cc(dir.path(), &["-g", "-O2", "-c", "t.c", "-o", "t.o"]);
    cc(
        dir.path(),
        &[
            "-g",
            "-O2",
            "-nostdlib",
            "-static",
            "-no-pie",
            "-Wl,--build-id=sha1",
            "-Wl,-e,func",
            "t.c",
            "-o",
            "t.elf",
        ],
    );
    Built {
        object: dir.path().join("t.o"),
        linked: dir.path().join("t.elf"),
        _dir: dir,
    }
}

fn field(name: &str, offset: u64, size: u64, type_name: &str) -> Field {
    Field {
        name: name.to_owned(),
        offset,
        size,
        type_name: type_name.to_owned(),
    }
}

#[test]
fn struct_layouts_flatten_nested_members() {
    let built = build();
    for path in [&built.object, &built.linked] {
        let info = DebugInfo::load(path, None).expect("loads");
        let fields = info.struct_fields("sample_obj").expect("defined");
        assert_eq!(
            fields,
            [
                field("id", 0, 8, "long int"),
                field("in", 8, 8, "struct inner"),
                field("in.a", 8, 4, "int"),
                field("in.b", 12, 2, "short int"),
                field("u_int", 16, 4, "int"),
                field("u_bytes", 16, 4, "char [4]"),
                field("flags", 20, 1, "unsigned int"),
                field("more", 20, 1, "unsigned int"),
                field("lists", 24, 32, "struct list_head [2]"),
                field("name", 56, 16, "char [16]"),
                field("fn", 72, 8, "fn *"),
                field("ptr", 80, 8, "const struct inner *"),
            ],
            "{}",
            path.display()
        );
        assert_eq!(info.struct_size("struct sample_obj"), Some(88));
        assert_eq!(
            info.struct_size("sample_t"),
            Some(88),
            "through the typedef"
        );
        assert_eq!(info.struct_fields("no_such_struct"), None);
    }
}

#[test]
fn field_at_names_the_innermost_member() {
    let built = build();
    let info = DebugInfo::load(&built.object, None).expect("loads");
    let at = |offset| info.field_at("sample_obj", offset);
    assert_eq!(at(0).as_deref(), Some("id"));
    assert_eq!(at(7).as_deref(), Some("id"));
    assert_eq!(at(9).as_deref(), Some("in.a"));
    assert_eq!(at(12).as_deref(), Some("in.b"));
    assert_eq!(at(14).as_deref(), Some("in"), "struct inner's tail padding");
    assert_eq!(at(21), None, "padding after the bit-fields is no member");
    assert_eq!(at(17).as_deref(), Some("u_int"), "the first union member");
    assert_eq!(at(20).as_deref(), Some("flags"));
    assert_eq!(at(24).as_deref(), Some("lists[0].next"));
    assert_eq!(at(48).as_deref(), Some("lists[1].prev"));
    assert_eq!(at(60).as_deref(), Some("name[4]"));
    assert_eq!(at(87).as_deref(), Some("ptr"));
    assert_eq!(at(88), None, "past the end");
    assert_eq!(info.field_at("nope", 0), None);
}

#[test]
fn variables_have_their_types_for_naming_their_bytes() {
    let built = build();
    for path in [&built.object, &built.linked] {
        let info = DebugInfo::load(path, None).expect("loads");
        assert_eq!(
            info.variable_type("global_obj"),
            Some(VariableType::Composite("sample_t".to_owned())),
            "a typedef of a struct, by the name field_at takes ({})",
            path.display()
        );
        assert_eq!(
            info.field_at("sample_t", 9).as_deref(),
            Some("in.a"),
            "{}",
            path.display()
        );
        assert_eq!(
            info.variable_type("counter"),
            Some(VariableType::Scalar { size: 4 })
        );
        assert_eq!(
            info.variable_type("pcpu_var"),
            Some(VariableType::ScalarArray {
                elem_size: 8,
                count: 4
            })
        );
        assert_eq!(info.variable_type("no_such_variable"), None);
        assert_eq!(
            info.variable_type("func"),
            None,
            "a function is no variable"
        );
    }
}

#[test]
fn banner_and_build_id_validate_the_profile() {
    let built = build();
    let info = DebugInfo::load(&built.linked, None).expect("loads");
    assert_eq!(info.banner(), Some(BANNER));
    let id = info.build_id().expect("linked with --build-id");
    assert_eq!(id.len(), 40);

    let mut header = example_header();
    header.build_id = Some(id.to_uppercase());
    assert_eq!(info.matches(&header).expect("same id"), MatchedBy::BuildId);
    header.build_id = Some("00".repeat(20));
    let err = info.matches(&header).expect_err("other id");
    assert!(
        err.to_string().starts_with(&format!(
            "vmlinux {} does not match",
            built.linked.display()
        )),
        "{err}"
    );

    // Without build ids: banners.
    header.build_id = None;
    header.proc_version = Some(format!("{BANNER}\n"));
    assert_eq!(
        info.matches(&header).expect("same banner"),
        MatchedBy::Banner
    );
    header.proc_version = Some("Linux version 6.12.0-test (a@b) (gcc) #2 SMP".to_owned());
    let err = info.matches(&header).expect_err("other build");
    assert_eq!(
        err.to_string(),
        format!(
            "vmlinux {} does not match the profile: its banner says \"{BANNER}\", the profiled \
             kernel's says \"Linux version 6.12.0-test (a@b) (gcc) #2 SMP\"",
            built.linked.display()
        )
    );

    // An old profile: only the release.
    header.proc_version = None;
    header.kernel_release = "6.12.0-test".to_owned();
    assert_eq!(info.matches(&header).expect("same"), MatchedBy::ReleaseOnly);
    header.kernel_release = "6.13.0".to_owned();
    assert!(matches!(
        info.matches(&header),
        Err(DebugInfoError::ReleaseMismatch { .. })
    ));

    // The relocatable object has no build id: banners decide.
    let object = DebugInfo::load(&built.object, None).expect("loads");
    assert_eq!(object.build_id(), None);
    assert_eq!(object.banner(), Some(BANNER));
    header.build_id = Some(id);
    header.proc_version = Some(BANNER.to_owned());
    assert_eq!(object.matches(&header).expect("banner"), MatchedBy::Banner);
}

#[test]
fn symbols_have_exact_sizes_and_per_cpu_is_apart() {
    let built = build();
    let info = DebugInfo::load(&built.linked, None).expect("loads");
    let counter = info.vmlinux.objects.iter().find(|s| s.name == "counter");
    let counter = counter.expect("counter").address;
    let d = info.data_symbol(counter + 2).expect("in counter");
    assert_eq!(
        (d.name, d.start, d.size, d.offset, d.percpu, d.module),
        ("counter", counter, 4, 2, false, None)
    );
    let obj = info
        .vmlinux
        .objects
        .iter()
        .find(|s| s.name == "global_obj")
        .expect("global_obj")
        .address;
    assert_eq!(
        info.data_symbol(obj + 87).map(|d| (d.name, d.size)),
        Some(("global_obj", 88))
    );
    assert_eq!(info.data_symbol(obj + 88).map(|d| d.name), None);
    // The linker script merges .data..percpu into .data; the object keeps it apart.
    let object = DebugInfo::load(&built.object, None).expect("loads");
    let pcpu = object
        .vmlinux
        .objects
        .iter()
        .find(|s| s.name == "pcpu_var")
        .expect("pcpu_var");
    assert!(pcpu.percpu);
    let p = object.percpu_symbol(pcpu.address + 8).expect("per-CPU");
    assert_eq!(
        (p.name, p.size, p.offset, p.percpu),
        ("pcpu_var", 32, 8, true)
    );
    assert!(object
        .data_symbol(pcpu.address)
        .is_none_or(|d| d.name != "pcpu_var"));
    // At its first byte, a size-0 alias yields to the sized variable there.
    let address_of = |name: &str| {
        let s = object.vmlinux.objects.iter().find(|s| s.name == name);
        s.map(|s| (s.address, s.size)).expect(name)
    };
    let (alias, sized) = (address_of("pcpu_alias"), address_of("pcpu_sized"));
    assert_eq!((alias.0, alias.1, sized.1), (sized.0, 0, 16));
    for offset in [0, 8] {
        assert_eq!(
            object
                .percpu_symbol(sized.0 + offset)
                .map(|p| (p.name, p.offset)),
            Some(("pcpu_sized", offset))
        );
    }
    assert_eq!(
        info.symbol_size("linux_banner"),
        Some(BANNER.len() as u64 + 2)
    );
    assert!(info.symbol_size("func").is_some_and(|s| s > 0));
}

#[test]
fn ips_map_to_lines_with_inlined_frames() {
    let built = build();
    let info = DebugInfo::load(&built.linked, None).expect("loads");
    let func = info.vmlinux.text_symbols["func"];
    let frames = info.frames(func);
    let last = frames.last().expect("a frame");
    assert_eq!(last.function.as_deref(), Some("func"));
    assert!(
        last.file.as_deref().is_some_and(|f| f.ends_with("t.c")),
        "{frames:?}"
    );
    assert!(!last.inlined);
    // Somewhere in func, helper is inlined.
    let size = info.symbol_size("func").expect("size");
    let inlined = (func..func + size).any(|ip| {
        let f = info.frames(ip);
        f.len() == 2 && f[0].function.as_deref() == Some("helper") && f[0].inlined
    });
    assert!(inlined, "helper inlined into func");
    assert!(info.frames(0x10).is_empty());
}

#[test]
fn kaslr_shift_comes_from_kallsyms() {
    let built = build();
    let mut info = DebugInfo::load(&built.linked, None).expect("loads");
    let func = info.vmlinux.text_symbols["func"];
    let shift = 0x2000_0000;
    let kallsyms = Kallsyms::parse(format!("{:016x} T func\n", func + shift).as_bytes());
    // No _stext in this tiny file: nothing to place it by.
    assert_eq!(info.kaslr_offset(&kallsyms), None);
    let kallsyms = Kallsyms::parse(
        format!(
            "{:016x} T _stext\n{:016x} T func\n",
            func + shift,
            func + shift
        )
        .as_bytes(),
    );
    info.vmlinux.text_symbols.insert("_stext".to_owned(), func);
    assert_eq!(info.kaslr_offset(&kallsyms), Some(shift));
    let missing = info.use_kallsyms(&kallsyms).expect("placed");
    assert!(missing.is_empty());
    assert_eq!(
        info.frames(func + shift)
            .last()
            .and_then(|f| f.function.clone()),
        Some("func".to_owned())
    );
    let counter = info
        .vmlinux
        .objects
        .iter()
        .find(|s| s.name == "counter")
        .expect("counter")
        .address;
    assert_eq!(
        info.data_symbol(counter + shift).map(|d| (d.name, d.start)),
        Some(("counter", counter + shift))
    );
    // A symbol that moved by another amount: a wrong vmlinux.
    let wrong = Kallsyms::parse(
        format!("{:016x} T _stext\n{:016x} T func\n", func + shift, func).as_bytes(),
    );
    let mut info = DebugInfo::load(&built.linked, None).expect("loads");
    info.vmlinux
        .text_symbols
        .insert("_stext".to_owned(), func - 1);
    let err = info.use_kallsyms(&wrong).expect_err("disagrees");
    assert!(err.to_string().contains("func is at"), "{err}");
}

#[test]
fn modules_are_relocated_to_their_kallsyms_addresses() {
    let built = build();
    let linked = DebugInfo::load(&built.linked, None).expect("loads");
    let dir = built.object.parent().expect("dir").to_path_buf();
    std::fs::copy(&built.object, dir.join("test_mod.ko")).expect("copy");
    let mut info = DebugInfo::load(&built.linked, Some(&dir)).expect("loads");
    let kallsyms = Kallsyms::parse(
        b"ffffffff81000000 T _stext\n\
          ffffffffc0000000 t func\t[test_mod]\n\
          ffffffffc0002000 d counter\t[test_mod]\n\
          ffffffffc0004000 t other_func\t[other_mod]\n",
    );
    let missing = info.use_kallsyms(&kallsyms).expect("loads the module");
    assert_eq!(missing, ["other_mod"]);
    assert_eq!(info.modules(), ["test_mod"]);
    let frames = info.frames(0xffff_ffff_c000_0000);
    assert_eq!(
        frames.last().and_then(|f| f.function.as_deref()),
        Some("func"),
        "{frames:?}"
    );
    let d = info
        .data_symbol(0xffff_ffff_c000_2001)
        .expect("module data");
    assert_eq!(
        (d.name, d.start, d.offset, d.module),
        ("counter", 0xffff_ffff_c000_2000, 1, Some("test_mod"))
    );
    // Struct layouts of a module-only type would come from the module too.
    assert_eq!(
        info.struct_size("sample_obj"),
        linked.struct_size("sample_obj")
    );
}

#[test]
fn not_elf_and_stripped_files_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("vmlinux");
    std::fs::write(&text, "not an elf").expect("write");
    let err = DebugInfo::load(&text, None).expect_err("not ELF");
    assert!(
        err.to_string()
            .starts_with(&format!("{} is not an ELF file", text.display())),
        "{err}"
    );
    let err = DebugInfo::load(&dir.path().join("missing"), None).expect_err("missing");
    assert!(err.to_string().starts_with("cannot read "), "{err}");
    std::fs::write(dir.path().join("s.c"), "int x;\n").expect("write");
    cc(dir.path(), &["-c", "s.c", "-o", "s.o"]);
    let err = DebugInfo::load(&dir.path().join("s.o"), None).expect_err("no DWARF");
    assert!(
        err.to_string().contains("has no debug information"),
        "{err}"
    );
}

#[test]
fn build_id_notes() {
    let note = |name: &[u8], kind: u32, desc: &[u8]| {
        let mut out = Vec::new();
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(name);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(desc);
        out.resize(out.len().next_multiple_of(4), 0);
        out
    };
    let mut notes = note(b"Xen\0", 3, &[1, 2, 3]);
    notes.extend(note(b"GNU\0", 1, &[9; 16]));
    notes.extend(note(b"GNU\0", 3, &[0xab, 0xcd, 0xef]));
    assert_eq!(gnu_build_id(&notes), Some(&[0xab, 0xcd, 0xef][..]));
    assert_eq!(hex(gnu_build_id(&notes).expect("id")), "abcdef");
    assert_eq!(gnu_build_id(&notes[..notes.len() - 4]), None, "cut");
    assert_eq!(gnu_build_id(&[]), None);
    assert_eq!(gnu_build_id(&[0xff; 12]), None);
}

/// A real kernel: `DPROF_TEST_VMLINUX=/path/to/vmlinux cargo test -p dprof real_vmlinux`
/// (scripts/test sets it to the guest kernel's vmlinux).
#[test]
fn real_vmlinux() {
    let Some(path) = std::env::var_os("DPROF_TEST_VMLINUX") else {
        // scripts/test sets both: there, a missing vmlinux is a failure, not a skip.
        assert!(
            std::env::var_os("DPROF_TEST_REQUIRE_EXTERNAL").is_none(),
            "DPROF_TEST_VMLINUX is not set but DPROF_TEST_REQUIRE_EXTERNAL is"
        );
        eprintln!("skipped: set DPROF_TEST_VMLINUX to a vmlinux with debug info");
        return;
    };
    let t = std::time::Instant::now();
    let info = DebugInfo::load(Path::new(&path), None).expect("loads");
    eprintln!("loaded in {:?}", t.elapsed());
    eprintln!("banner: {:?}", info.banner());
    eprintln!("build id: {:?}", info.build_id());
    assert!(info
        .banner()
        .is_some_and(|b| b.starts_with("Linux version 6.12")));
    let size = info.struct_size("sk_buff").expect("struct sk_buff");
    assert!((200..=512).contains(&size), "sk_buff is {size} bytes");
    let fields = info.struct_fields("sock").expect("struct sock");
    let refcnt = fields
        .iter()
        .find(|f| f.name.ends_with("skc_refcnt.refs.counter"))
        .expect("sock.__sk_common.skc_refcnt is a field");
    assert_eq!(
        info.field_at("sock", refcnt.offset).as_deref(),
        Some(refcnt.name.as_str())
    );
    let kfree = info.vmlinux.text_symbols["kfree"];
    let frames = info.frames(kfree + 0x20);
    assert!(
        frames.iter().any(|f| f
            .file
            .as_deref()
            .is_some_and(|file| file.ends_with("mm/slub.c"))),
        "kfree+0x20 is in mm/slub.c: {frames:?}"
    );
    // jiffies is a linker-script alias of jiffies_64 and has no size of its own.
    assert_eq!(info.symbol_size("jiffies_64"), Some(8));
}
