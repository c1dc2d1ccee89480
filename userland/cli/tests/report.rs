//! `dprof report` end to end on the library's data-profile example
//! (`dprof_fixtures::data_profile`): golden text and JSON, and the errors a person meets.
//! `DPROF_BLESS=1 cargo test -p dprof-cli --test report` rewrites the golden files under
//! tests/golden/.

#[path = "support/cli_test.rs"]
mod support;
use std::path::PathBuf;

use support::{dir_with, dprof, golden, one_line_error, records_sections, stdout_of, steady_json};

use dprof_fixtures::data_profile as example;

fn example_dir() -> tempfile::TempDir {
    dir_with(&[("dp.dprof", example::profile())])
}

#[test]
fn report_text() {
    let dir = example_dir();
    golden(
        "report.txt",
        &stdout_of(&dprof(dir.path(), &["report", "dp.dprof"])),
    );
}

#[test]
fn report_type_text() {
    let dir = example_dir();
    golden(
        "report_type.txt",
        &stdout_of(&dprof(
            dir.path(),
            &["report", "dp.dprof", "--type", "skbuff_head_cache"],
        )),
    );
}

#[test]
fn report_json() {
    let dir = example_dir();
    let text = stdout_of(&dprof(dir.path(), &["report", "dp.dprof", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["coverage"]["total_samples"], 26);
    assert_eq!(v["data_profile"]["types"][0]["name"], "skbuff_head_cache");
    assert_eq!(v["data_profile"]["types"][0]["struct_name"], "sk_buff");
    golden("report.json", &steady_json(&text));
}

#[test]
fn report_type_json_and_top() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--json", "--type", "percpu:runqueues"],
    ));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["name"], "percpu:runqueues");
    assert_eq!(v["bounced_objects"], 1);
    let text = stdout_of(&dprof(dir.path(), &["report", "dp.dprof", "--top", "2"]));
    assert!(
        text.contains("... 6 more types (--top N shows more)"),
        "{text}"
    );
    assert!(!text.contains("kmalloc-large"), "{text}");
}

#[test]
fn type_map_names_structs() {
    let dir = dir_with(&[
        ("dp.dprof", example::profile()),
        ("map.txt", b"# mine\ntask_struct = my_task\n".to_vec()),
        ("bad.txt", b"filp my_file\n".to_vec()),
    ]);
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--type-map", "map.txt"],
    ));
    assert!(text.contains("task_struct (my_task)"), "{text}");
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--type-map", "bad.txt"],
    ));
    assert!(err.contains("bad.txt: line 1 of the type map"), "{err}");
}

#[test]
fn unknown_type_lists_close_names() {
    let dir = example_dir();
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--type", "skbuff"],
    ));
    assert_eq!(
        err,
        "dprof: error: no type \"skbuff\" in the profile; did you mean: skbuff_head_cache?\n"
    );
    let err = one_line_error(&dprof(dir.path(), &["report", "dp.dprof", "--type", "zz"]));
    assert!(
        err.contains("the most sampled are: skbuff_head_cache, task_struct"),
        "{err}"
    );
}

#[test]
fn a_profile_without_samples_is_refused() {
    let records = example::records()[0]
        .iter()
        .filter(|(_, _, r)| !matches!(r, dprof_abi::Record::AccessSample(_)))
        .copied()
        .collect();
    let dir = dir_with(&[(
        "slab.dprof",
        example::profile_with(&example::header(), example::KALLSYMS, &[records]),
    )]);
    let err = one_line_error(&dprof(dir.path(), &["report", "slab.dprof"]));
    assert_eq!(
        err,
        "dprof: error: slab.dprof: the profile has no access samples: collect with --events \
         samples\n"
    );
}

#[test]
fn empty_kallsyms_warns_and_shows_addresses() {
    let dir = dir_with(&[(
        "nosyms.dprof",
        example::profile_with(&example::header(), "", &example::records()),
    )]);
    let out = dprof(dir.path(), &["report", "nosyms.dprof"]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert!(
        stderr.starts_with("dprof: warning: the profile's kallsyms snapshot has no usable symbols"),
        "{stderr}"
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(stdout.contains("kmalloc-1k@0xffffffff81200080"), "{stdout}");
    assert!(stdout.contains("0xffffffff81101040"), "{stdout}");
}

/// Standard output of a run that succeeded, with warnings on standard error.
fn warned_stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// A kernel that merged slab caches: the pool is split by allocation site, the report says
/// which caches share it, and the warning names it.
#[test]
fn merged_caches_are_split_by_site_and_listed() {
    let dir = dir_with(&[("merged.dprof", dprof_fixtures::merged::profile())]);
    let out = dprof(dir.path(), &["report", "merged.dprof"]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert!(
        stderr.contains(
            "dprof: warning: slab merging was on: 1 of the report's caches (rtable) are pools"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("some types are merged"), "{stderr}");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let types: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("rank"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        types,
        [
            "rtable@ip_route_output_key_hash",
            "rtable@locks_alloc_lock",
            "dentry"
        ],
        "{stdout}"
    );
    let merged: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("merged caches:"))
        .collect();
    assert_eq!(
        merged,
        ["merged caches: rtable = {file_lock_cache, rtable} (pool :0000192)"],
        "{stdout}"
    );
    // A per-site type of the pool is no struct of the cache's name.
    assert!(!stdout.contains("(rtable)"), "{stdout}");

    let text = warned_stdout(&dprof(
        dir.path(),
        &[
            "report",
            "merged.dprof",
            "--type",
            "rtable@locks_alloc_lock",
        ],
    ));
    assert!(
        text.contains("allocated in locks_alloc_lock")
            && text.contains("merged caches: rtable = {file_lock_cache, rtable}"),
        "{text}"
    );
    let text = warned_stdout(&dprof(
        dir.path(),
        &["report", "merged.dprof", "--type", "dentry"],
    ));
    assert!(!text.contains("merged caches"), "{text}");

    let text = warned_stdout(&dprof(dir.path(), &["report", "merged.dprof", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(
        v["profile"]["merged_caches"],
        serde_json::json!([{
            "cache": "rtable",
            "pool": ":0000192",
            "aliases": ["file_lock_cache", "rtable"],
        }])
    );
}

#[test]
fn a_bad_profile_is_one_line() {
    let dir = dir_with(&[("junk.dprof", b"not a profile".to_vec())]);
    let err = one_line_error(&dprof(dir.path(), &["report", "junk.dprof"]));
    assert!(err.contains("junk.dprof: not a dprof profile"), "{err}");
    let err = one_line_error(&dprof(dir.path(), &["report", "missing.dprof"]));
    assert!(err.contains("cannot read missing.dprof"), "{err}");
}

/// The records are read during the analysis: a corrupt block after good ones is an error
/// naming its offset, and no report.
#[test]
fn a_corrupt_second_block_is_an_error_and_no_report() {
    let mut bytes = example::profile();
    let blocks = records_sections(&bytes);
    assert!(blocks.len() >= 2, "the example has a block per CPU");
    let (second, len) = blocks[1];
    bytes[second + 16 + len / 2] ^= 0x01;
    let dir = dir_with(&[("bad.dprof", bytes)]);
    for args in [
        &["report", "bad.dprof"][..],
        &["report", "bad.dprof", "--json"],
    ] {
        let out = dprof(dir.path(), args);
        let err = one_line_error(&out);
        assert!(
            err.starts_with(&format!(
                "dprof: error: bad.dprof: Block section at offset {second} is corrupt: its \
                 header says CRC-32 0x"
            )),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{args:?} printed a report");
    }
}

/// With a real vmlinux (`DPROF_TEST_VMLINUX=PATH`, its System.map next to it): field names of
/// `sk_buff` come from its DWARF. The profile is the example's records with the vmlinux's
/// symbols and build id, as if collected on that kernel.
#[test]
fn vmlinux_names_fields() {
    let Some(vmlinux) = std::env::var_os("DPROF_TEST_VMLINUX").map(PathBuf::from) else {
        // scripts/test sets both: there, a missing vmlinux is a failure, not a skip.
        assert!(
            std::env::var_os("DPROF_TEST_REQUIRE_EXTERNAL").is_none(),
            "DPROF_TEST_VMLINUX is not set but DPROF_TEST_REQUIRE_EXTERNAL is"
        );
        eprintln!("skipped: set DPROF_TEST_VMLINUX to a vmlinux with debug info");
        return;
    };
    let system_map = vmlinux.with_file_name("System.map");
    let kallsyms = std::fs::read_to_string(&system_map).expect("System.map next to vmlinux");
    let debug = dprof_analysis::debuginfo::DebugInfo::load(&vmlinux, None).expect("vmlinux loads");
    let mut header = example::header();
    header.build_id = debug.build_id();
    let dir = dir_with(&[(
        "real.dprof",
        example::profile_with(&header, &kallsyms, &example::records()),
    )]);
    let vmlinux = vmlinux.to_str().expect("utf-8 path");
    let text = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "real.dprof",
            "--vmlinux",
            vmlinux,
            "--type",
            "skbuff_head_cache",
        ],
    ));
    println!("{text}");
    assert!(!text.contains("field names need --vmlinux"), "{text}");
    // sk_buff starts with a union of {next, prev, ...} and rbnode: offset 8 is named.
    let line = text
        .lines()
        .find(|l| l.starts_with("+0x8 "))
        .expect("offset 8 listed");
    assert!(
        line.split_whitespace()
            .nth(1)
            .is_some_and(|f| f.chars().any(char::is_alphabetic)),
        "{line}"
    );
}

/// Without --vmlinux, the kernel's BTF in the profile names the fields: the example's
/// `sk_buff` (`dprof_fixtures::btf::example`) has `prev` at 0x8 (in an anonymous struct in
/// an anonymous union), `sk` at 0x10 and `len` at 0x70.
#[test]
fn btf_in_the_profile_names_fields() {
    let dir = dir_with(&[(
        "btf.dprof",
        example::profile_with_btf(&dprof_fixtures::btf::example()),
    )]);
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "btf.dprof", "--type", "skbuff_head_cache"],
    ));
    assert!(!text.contains("field names need --vmlinux"), "{text}");
    let fields: Vec<(&str, &str)> = text
        .lines()
        .skip_while(|l| !l.starts_with("Offsets"))
        .filter(|l| l.starts_with('+'))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?, words.next()?))
        })
        .collect();
    assert_eq!(
        fields,
        [("+0x8", "prev"), ("+0x70", "len"), ("+0x10", "sk")],
        "{text}"
    );
    let json = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "btf.dprof",
            "--json",
            "--type",
            "skbuff_head_cache",
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(v["struct_name"], "sk_buff");
    assert_eq!(v["fields"][0]["field"], "prev");
    // The data profile's other types have no struct in this BTF: offsets only.
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "btf.dprof", "--type", "task_struct"],
    ));
    assert!(text.contains("+0x8 "), "{text}");
}

/// With a real kernel's BTF (`DPROF_TEST_BTF=/sys/kernel/btf/vmlinux`, which scripts/test
/// sets where the file exists) in the profile: `sk_buff`'s fields are named from it.
#[test]
fn real_btf_names_fields() {
    let Some(path) = std::env::var_os("DPROF_TEST_BTF") else {
        eprintln!("skipped: set DPROF_TEST_BTF to a kernel's BTF, e.g. /sys/kernel/btf/vmlinux");
        return;
    };
    let btf = std::fs::read(path).expect("DPROF_TEST_BTF is readable");
    let dir = dir_with(&[("real.dprof", example::profile_with_btf(&btf))]);
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "real.dprof", "--type", "skbuff_head_cache"],
    ));
    assert!(!text.contains("field names need --vmlinux"), "{text}");
    // sk_buff has started with `struct sk_buff *next, *prev` (in anonymous members) for years.
    let line = text
        .lines()
        .find(|l| l.starts_with("+0x8 "))
        .expect("offset 8 listed");
    assert_eq!(line.split_whitespace().nth(1), Some("prev"), "{text}");
}

/// A Btf section that does not parse costs the field names, with one warning, not the report.
#[test]
fn a_bad_btf_section_is_one_warning() {
    let dir = dir_with(&[(
        "bad.dprof",
        example::profile_with_btf(b"not BTF at all, but long enough"),
    )]);
    let out = dprof(
        dir.path(),
        &["report", "bad.dprof", "--type", "skbuff_head_cache"],
    );
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(
        stderr,
        "dprof: warning: the profile's BTF section does not parse (not BTF: the magic is \
         0x6f6e, not 0xeb9f): fields stay unnamed (--vmlinux names them from DWARF)\n"
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        stdout.contains("Offsets (field names need --vmlinux)"),
        "{stdout}"
    );
}

fn hw_dir() -> tempfile::TempDir {
    use dprof_fixtures::hardware::{profile, Sampler};
    dir_with(&[
        ("ibs.dprof", profile(Sampler::Ibs)),
        ("pebs.dprof", profile(Sampler::Pebs)),
    ])
}

/// A profile from IBS: ranked by misses, with miss rates, latencies, HITM and data sources.
#[test]
fn report_ibs_text() {
    let dir = hw_dir();
    let text = stdout_of(&dprof(dir.path(), &["report", "ibs.dprof"]));
    assert!(
        text.contains("Data profile: 5 types, ranked by L1 data-cache misses (IBS)"),
        "{text}"
    );
    golden("report_ibs.txt", &text);
}

#[test]
fn report_ibs_type_text() {
    let dir = hw_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "ibs.dprof", "--type", "skbuff_head_cache"],
    ));
    assert!(
        text.contains(
            "hardware: 7 samples with hit/miss data: 5 missed L1 (71.4% miss rate, 55.6% of all \
             misses), 2 HITM, mean latency 170.0 cycles (4 samples)"
        ),
        "{text}"
    );
    golden("report_ibs_type.txt", &text);
}

/// Everything the text shows is in the JSON, with exact numbers.
#[test]
fn report_ibs_json() {
    let dir = hw_dir();
    let text = stdout_of(&dprof(dir.path(), &["report", "ibs.dprof", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let dp = &v["data_profile"];
    assert_eq!(dp["metric"], "misses");
    let hw = &dp["hardware"];
    assert_eq!(hw["samplers"], serde_json::json!(["ibs"]));
    assert_eq!(hw["samples"], 21);
    assert_eq!(hw["resolved_samples"], 20);
    assert_eq!(hw["misses"], 9);
    assert_eq!(hw["miss_rate"], 0.45);
    assert_eq!(hw["hitm"], 3);
    assert_eq!(hw["mean_latency_cycles"], 210.5);
    assert_eq!(hw["address_mismatches"], 1);
    assert_eq!(
        hw["sources"][0],
        serde_json::json!({"source": "l1", "samples": 11})
    );
    let skb = &dp["types"][0];
    assert_eq!(skb["name"], "skbuff_head_cache");
    assert_eq!(skb["hardware"]["misses"], 5);
    assert_eq!(skb["hardware"]["hitm"], 2);
    assert_eq!(skb["hardware"]["mean_latency_cycles"], 170.0);
    assert_eq!(
        skb["hardware"]["sources"][3],
        serde_json::json!({"source": "near_cache", "samples": 1})
    );
    assert_eq!(skb["fields"][0]["offset"], 8);
    assert_eq!(skb["fields"][0]["misses"], 3);
    assert_eq!(skb["functions"][0]["function"], "tcp_recvmsg");
    assert_eq!(skb["functions"][0]["misses"], 4);
    assert_eq!(dp["types"][2]["name"], "task_struct");
    assert_eq!(dp["types"][2]["samples"], 9);
    assert_eq!(v["unknown_functions"][0]["misses"], 1);
    golden("report_ibs.json", &steady_json(&text));
    // One type, cut to one field and function.
    let text = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "ibs.dprof",
            "--json",
            "--type",
            "kmalloc-1k@__alloc_skb",
            "--top",
            "1",
        ],
    ));
    let t: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(t["hardware"]["misses"], 2);
    assert_eq!(t["hardware"]["mean_latency_cycles"], 235.0);
    assert_eq!(t["fields"].as_array().map(Vec::len), Some(1));
}

/// A profile from PEBS: the same layout, PEBS's latencies (every load has one).
#[test]
fn report_pebs_text() {
    let dir = hw_dir();
    let text = stdout_of(&dprof(dir.path(), &["report", "pebs.dprof"]));
    assert!(
        text.contains("ranked by L1 data-cache misses (PEBS)"),
        "{text}"
    );
    golden("report_pebs.txt", &text);
}
