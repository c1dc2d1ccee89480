//! `dprof report` end to end on the library's data-profile example
//! (`dprof::analysis::example`): golden text and JSON, and the errors a person meets.
//! `DPROF_BLESS=1 cargo test -p dprof-cli --test report` rewrites the golden files under
//! tests/golden/.

#[path = "support/cli_test.rs"]
mod support;
use std::path::PathBuf;

use support::{dir_with, dprof, golden, one_line_error, stdout_of};

use dprof::analysis::example;

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
    golden("report.json", &text);
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
        text.contains("... 7 more types (--top N shows more)"),
        "{text}"
    );
    assert!(!text.contains("kmalloc-large"), "{text}");
}

#[test]
fn type_map_names_structs() {
    let dir = dir_with(&[
        ("dp.dprof", example::profile()),
        ("map.txt", b"# mine\nfilp = my_file\n".to_vec()),
        ("bad.txt", b"filp my_file\n".to_vec()),
    ]);
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--type-map", "map.txt"],
    ));
    assert!(text.contains("filp (my_file)"), "{text}");
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

#[test]
fn a_bad_profile_is_one_line() {
    let dir = dir_with(&[("junk.dprof", b"not a profile".to_vec())]);
    let err = one_line_error(&dprof(dir.path(), &["report", "junk.dprof"]));
    assert!(err.contains("junk.dprof: not a dprof profile"), "{err}");
    let err = one_line_error(&dprof(dir.path(), &["report", "missing.dprof"]));
    assert!(err.contains("cannot read missing.dprof"), "{err}");
}

/// With a real vmlinux (`DPROF_TEST_VMLINUX=PATH`, its System.map next to it): field names of
/// `sk_buff` come from its DWARF. The profile is the example's records with the vmlinux's
/// symbols and build id, as if collected on that kernel.
#[test]
fn vmlinux_names_fields() {
    let Some(vmlinux) = std::env::var_os("DPROF_TEST_VMLINUX").map(PathBuf::from) else {
        eprintln!("skipped: set DPROF_TEST_VMLINUX to a vmlinux with debug info");
        return;
    };
    let system_map = vmlinux.with_file_name("System.map");
    let kallsyms = std::fs::read_to_string(&system_map).expect("System.map next to vmlinux");
    let debug = dprof::debuginfo::DebugInfo::load(&vmlinux, None).expect("vmlinux loads");
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
