use std::path::Path;

use super::*;
use dprof_format::{CollectConfig, CpuId, ModuleInfo, Target};

fn put(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn cache(root: &Path, cpu: u32, index: u32, fields: &[(&str, &str)]) {
    for (name, value) in fields {
        put(
            root,
            &format!("sys/devices/system/cpu/cpu{cpu}/cache/index{index}/{name}"),
            &format!("{value}\n"),
        );
    }
}

/// A 4-CPU machine: private L1d/L1i, L2 per pair, one L3; plus entries sysfs also has that
/// are not CPUs or caches.
fn fake_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    put(root, "proc/sys/kernel/osrelease", "6.12.0-dprof\n");
    put(
        root,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz console=ttyS0 quiet\n",
    );
    put(
        root,
        "proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n\
         model name\t: AMD EPYC 7B13 64-Core Processor\n\n\
         processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n\
         model name\t: AMD EPYC 7B13 64-Core Processor\n",
    );
    put(root, "proc/kallsyms", "ffffffff81000000 T _stext\n");
    put(
        root,
        "proc/modules",
        "dprof 65536 0 - Live 0xffffffffc0100000 (O)\n",
    );
    put(root, "sys/devices/system/cpu/online", "0-3\n");
    put(
        root,
        "sys/devices/system/cpu/cpuidle/current_driver",
        "none\n",
    );
    put(root, "sys/devices/system/cpu/cpufreq/boost", "1\n");
    for cpu in 0..4 {
        let own = cpu.to_string();
        let pair = if cpu < 2 { "0-1" } else { "2-3" };
        let l1 = |t| {
            [
                ("level", "1"),
                ("type", t),
                ("size", "32K"),
                ("ways_of_associativity", "8"),
                ("coherency_line_size", "64"),
                ("number_of_sets", "64"),
                ("shared_cpu_list", own.as_str()),
            ]
        };
        cache(root, cpu, 0, &l1("Data"));
        cache(root, cpu, 1, &l1("Instruction"));
        cache(
            root,
            cpu,
            2,
            &[
                ("level", "2"),
                ("type", "Unified"),
                ("size", "512K"),
                ("ways_of_associativity", "8"),
                ("coherency_line_size", "64"),
                ("number_of_sets", "1024"),
                ("shared_cpu_list", pair),
            ],
        );
        // Like some hypervisors: no sets or ways for the last level.
        cache(
            root,
            cpu,
            3,
            &[
                ("level", "3"),
                ("type", "Unified"),
                ("size", "32768K"),
                ("coherency_line_size", "64"),
                ("shared_cpu_list", "0-3"),
            ],
        );
    }
    // An index without level/type is skipped.
    cache(root, 0, 9, &[("size", "1K")]);
    dir
}

#[test]
fn reads_release_cmdline_model_and_cpus() {
    let dir = fake_tree();
    let root = dir.path();
    assert_eq!(kernel_release(root).expect("release"), "6.12.0-dprof");
    assert_eq!(
        boot_cmdline(root).expect("cmdline"),
        "BOOT_IMAGE=/vmlinuz console=ttyS0 quiet"
    );
    assert_eq!(
        cpu_model(root).expect("model"),
        "AMD EPYC 7B13 64-Core Processor"
    );
    assert_eq!(online_cpus(root).expect("cpus"), 4);
    assert_eq!(
        kallsyms(root).expect("kallsyms"),
        b"ffffffff81000000 T _stext\n"
    );
    assert!(modules(root).expect("modules").starts_with(b"dprof "));
}

#[test]
fn one_entry_per_distinct_cache() {
    let dir = fake_tree();
    let caches = cache_geometry(dir.path());
    let brief: Vec<(u32, &str, Option<u64>, &str)> = caches
        .iter()
        .map(|c| {
            (
                c.level,
                c.cache_type.as_str(),
                c.size_bytes,
                c.shared_cpu_list.as_str(),
            )
        })
        .collect();
    let l1 = 32 * 1024;
    assert_eq!(
        brief,
        [
            (1, "Data", Some(l1), "0"),
            (1, "Instruction", Some(l1), "0"),
            (1, "Data", Some(l1), "1"),
            (1, "Instruction", Some(l1), "1"),
            (1, "Data", Some(l1), "2"),
            (1, "Instruction", Some(l1), "2"),
            (1, "Data", Some(l1), "3"),
            (1, "Instruction", Some(l1), "3"),
            (2, "Unified", Some(512 * 1024), "0-1"),
            (2, "Unified", Some(512 * 1024), "2-3"),
            (3, "Unified", Some(32 << 20), "0-3"),
        ]
    );
    assert_eq!(
        (caches[0].ways, caches[0].line_bytes, caches[0].sets),
        (Some(8), Some(64), Some(64))
    );
    let l3 = &caches[10];
    assert_eq!((l3.ways, l3.line_bytes, l3.sets), (None, Some(64), None));
}

#[test]
fn no_cache_information_is_an_empty_list() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(cache_geometry(dir.path()).is_empty());
}

#[test]
fn gathers_a_whole_header() {
    let dir = fake_tree();
    let config = CollectConfig {
        backend: None,
        events: vec!["slab".to_owned()],
        ring_bytes: 1 << 20,
        target: Target::Duration { ns: 1_000_000_000 },
        sampling: None,
        histories: None,
        causal: None,
        sample_registers: dprof_format::SampleRegisters::All,
        history_registers: dprof_format::HistoryRegisters::All,
        collector_pid: None,
    };
    let module = ModuleInfo::from(dprof_abi::VersionInfo {
        abi_version: 1,
        nr_cpu_ids: 4,
        ..dprof_abi::VersionInfo::default()
    });
    let header = gather_header(dir.path(), config.clone(), module, 42).expect("header");
    assert_eq!(header.dprof_version, crate::VERSION);
    assert_eq!(header.created_unix_s, 42);
    assert_eq!(header.online_cpus, 4);
    assert_eq!(header.caches.len(), 11);
    assert!(header.slab_merging, "no slab_nomerge in the fake cmdline");
    assert_eq!(header.config, config);
    assert_eq!(header.module.nr_cpu_ids, 4);
    assert_eq!(
        header.proc_version, None,
        "no proc/version in the fake tree"
    );
    assert_eq!(header.build_id, None);
    assert!(header.merged_caches.is_empty(), "no sys/kernel/slab");
    slab_tree(dir.path());
    put(
        dir.path(),
        "proc/version",
        "Linux version 6.12.0-dprof (a@b) #1 SMP\n",
    );
    std::fs::create_dir_all(dir.path().join("sys/kernel")).expect("mkdir");
    std::fs::write(dir.path().join("sys/kernel/notes"), kernel_notes()).expect("write");
    let header = gather_header(dir.path(), config, module, 42).expect("header");
    assert_eq!(
        header.proc_version.as_deref(),
        Some("Linux version 6.12.0-dprof (a@b) #1 SMP")
    );
    assert_eq!(
        header.build_id.as_deref(),
        Some("e4f18d9dc1d0e6fc2b17e93e885a647b3c0a6fc1")
    );
    assert_eq!(header.merged_caches, merged_caches(dir.path()));
    assert_eq!(header.merged_caches.len(), 2);
}

/// A `/sys/kernel/slab` as SLUB makes it: two pools shared by several caches (links made in
/// no particular order), a mergeable cache alone in its pool, unmerged caches as plain
/// directories, and a link that is no pool.
fn slab_tree(root: &Path) {
    let slab = root.join("sys/kernel/slab");
    for dir in [
        ":0000192",
        ":a-0000104",
        ":A-0001344",
        "dentry",
        "kmalloc-64",
    ] {
        std::fs::create_dir_all(slab.join(dir)).expect("mkdir");
    }
    put(root, "sys/kernel/slab/dentry/object_size", "192\n");
    for (alias, pool) in [
        ("rtable", ":0000192"),
        ("file_lock_cache", ":0000192"),
        ("aio_kiocb", ":0000192"),
        ("UDP", ":A-0001344"),
        ("UDP-Lite", ":A-0001344"),
        ("ext4_fc_dentry_update", ":a-0000104"),
        ("not_a_pool", "dentry"),
    ] {
        std::os::unix::fs::symlink(pool, slab.join(alias)).expect("symlink");
    }
}

#[test]
fn merged_caches_are_the_pools_with_several_links() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(merged_caches(dir.path()).is_empty(), "no sys/kernel/slab");
    slab_tree(dir.path());
    let pool = |pool: &str, aliases: &[&str]| MergedCache {
        pool: pool.to_owned(),
        aliases: aliases.iter().map(|&a| a.to_owned()).collect(),
    };
    assert_eq!(
        merged_caches(dir.path()),
        [
            pool(":0000192", &["aio_kiocb", "file_lock_cache", "rtable"]),
            pool(":A-0001344", &["UDP", "UDP-Lite"]),
        ]
    );
}

#[test]
fn a_slab_object_size_is_read_through_aliases_and_never_outside_the_slab_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(slab_object_size(dir.path(), "dentry"), None, "no sysfs");
    slab_tree(dir.path());
    assert_eq!(slab_object_size(dir.path(), "dentry"), Some(192));
    assert_eq!(
        slab_object_size(dir.path(), "not_a_pool"),
        Some(192),
        "an alias"
    );
    assert_eq!(slab_object_size(dir.path(), "no_such_cache"), None);
    assert_eq!(slab_object_size(dir.path(), "../slab/dentry"), None);
}

/// A `/sys/kernel/notes` as a real kernel exports it: a Xen-less mix of notes, the GNU build
/// id second.
fn kernel_notes() -> Vec<u8> {
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
    let id = [
        0xe4, 0xf1, 0x8d, 0x9d, 0xc1, 0xd0, 0xe6, 0xfc, 0x2b, 0x17, 0xe9, 0x3e, 0x88, 0x5a, 0x64,
        0x7b, 0x3c, 0x0a, 0x6f, 0xc1,
    ];
    let mut notes = note(b"Linux\0", 0x101, &[0; 4]);
    notes.extend(note(b"GNU\0", 3, &id));
    notes.extend(note(b"Linux\0", 0x100, b"6.12.0-dprof\0"));
    notes
}

#[test]
fn missing_files_name_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = kernel_release(dir.path()).expect_err("missing");
    assert!(
        err.to_string().starts_with(&format!(
            "cannot read {}/proc/sys/kernel/osrelease",
            dir.path().display()
        )),
        "{err}"
    );
    put(dir.path(), "sys/devices/system/cpu/online", "zero\n");
    let err = online_cpus(dir.path()).expect_err("malformed");
    assert!(
        err.to_string().ends_with("\"zero\" is not a CPU list"),
        "{err}"
    );
}

#[test]
fn cpu_model_falls_back_to_unknown() {
    let dir = tempfile::tempdir().expect("tempdir");
    put(
        dir.path(),
        "proc/cpuinfo",
        "processor\t: 0\nCPU implementer\t: 0x41\n",
    );
    assert_eq!(cpu_model(dir.path()).expect("model"), "unknown");
}

/// Family and model come from the first CPU; without all of vendor, family and model (not
/// x86) there is no CPU id rather than a guessed one.
#[test]
fn cpu_id_is_the_first_cpus_vendor_family_and_model() {
    let dir = fake_tree();
    assert_eq!(
        cpu_id(dir.path()).expect("cpuinfo"),
        Some(CpuId {
            vendor: "AuthenticAMD".to_owned(),
            family: 25,
            model: 1,
        })
    );
    let arm = tempfile::tempdir().expect("tempdir");
    put(
        arm.path(),
        "proc/cpuinfo",
        "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n",
    );
    assert_eq!(cpu_id(arm.path()).expect("cpuinfo"), None);
}

#[test]
fn cpu_lists() {
    assert_eq!(cpu_list_len("0"), Some(1));
    assert_eq!(cpu_list_len("0-3"), Some(4));
    assert_eq!(cpu_list_len("0-3,8,10-11\n"), Some(7));
    assert_eq!(cpu_list_len(""), Some(0));
    assert_eq!(cpu_list_len("3-1"), None);
    assert_eq!(cpu_list_len("a"), None);
}

#[test]
fn cache_sizes() {
    assert_eq!(parse_cache_size("32K"), Some(32768));
    assert_eq!(parse_cache_size("16M"), Some(16 << 20));
    assert_eq!(parse_cache_size("512"), Some(512));
    assert_eq!(parse_cache_size("1X"), None);
    assert_eq!(parse_cache_size(""), None);
}

#[test]
fn slab_merging_from_cmdline() {
    assert!(slab_merging("console=ttyS0"));
    assert!(!slab_merging("console=ttyS0 slab_nomerge"));
    assert!(!slab_merging("slub_nomerge quiet"));
    assert!(slab_merging("noslab_nomerge=1"));
}

#[test]
fn kallsyms_addresses_are_the_kernel_s_own() {
    let text = b"ffffffff81000000 T _text\n\
                 ffffffffc0001000 t _text\t[some_module]\n\
                 ffffffffc0002000 d page_offset_base\t[other]\n\
                 ffffffff82a00000 D page_offset_base\n";
    assert_eq!(kallsyms_address(text, "_text"), Some(0xffff_ffff_8100_0000));
    assert_eq!(
        kallsyms_address(text, "page_offset_base"),
        Some(0xffff_ffff_82a0_0000)
    );
    assert_eq!(kallsyms_address(text, "vmemmap_base"), None);
    assert_eq!(
        kallsyms_address(b"0000000000000000 T _text\n", "_text"),
        Some(0)
    );
}

/// This machine's `/proc/iomem` lines for the kernel image, as root reads them.
const IOMEM: &str = "00100000-bffdffff : System RAM
  01000000-0225b13f : Kernel code
  02400000-02dfefff : Kernel rodata
  02e00000-0307a57f : Kernel data
  03928000-03a59fff : Kernel bss
c0000000-febfffff : PCI Bus 0000:00
";

#[test]
fn the_kernel_image_s_sections_are_placed_at_text_s_link_address() {
    let sections = kernel_image_sections(IOMEM, 0xffff_ffff_9000_0000);
    let at = |start: u64, end: u64, kind| ImageSection { kind, start, end };
    assert_eq!(
        sections,
        [
            at(
                0xffff_ffff_9000_0000,
                0xffff_ffff_9125_b140,
                ImageSectionKind::Code
            ),
            at(
                0xffff_ffff_9140_0000,
                0xffff_ffff_91df_f000,
                ImageSectionKind::Rodata
            ),
            at(
                0xffff_ffff_91e0_0000,
                0xffff_ffff_9207_a580,
                ImageSectionKind::Data
            ),
            at(
                0xffff_ffff_9292_8000,
                0xffff_ffff_92a5_a000,
                ImageSectionKind::Bss
            ),
        ]
    );
}

#[test]
fn a_kernel_image_hidden_or_unplaced_gives_no_sections() {
    // Not root: /proc/iomem shows zeros.
    let hidden = "00000000-00000000 : System RAM
  00000000-00000000 : Kernel code
  00000000-00000000 : Kernel data
";
    assert!(iomem_kernel_ranges(hidden).is_empty());
    assert!(kernel_image_sections(hidden, 0xffff_ffff_8100_0000).is_empty());
    // kallsyms hides _text, or the kernel's code is not listed.
    assert!(kernel_image_sections(IOMEM, 0).is_empty());
    let no_code: String = IOMEM
        .lines()
        .filter(|l| !l.contains("code"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(kernel_image_sections(&no_code, 0xffff_ffff_8100_0000).is_empty());
    // Overlapping ranges: none is trusted.
    let overlapping = IOMEM.replace("02e00000-0307a57f", "02d00000-0307a57f");
    assert!(kernel_image_sections(&overlapping, 0xffff_ffff_8100_0000).is_empty());
    // Read from a tree: no iomem at all.
    let root = tempfile::tempdir().expect("tempdir");
    assert!(kernel_image(root.path(), b"ffffffff81000000 T _text\n").is_empty());
    put(root.path(), "proc/iomem", IOMEM);
    assert_eq!(
        kernel_image(root.path(), b"ffffffff81000000 T _text\n").len(),
        4
    );
}
