//! The `dprof` binary end to end: golden output of `dprof dump` on the library's example
//! profile, and the errors a person meets. `DPROF_BLESS=1 cargo test -p dprof-cli` rewrites
//! the golden files under tests/golden/.

#[path = "support/cli_test.rs"]
#[expect(
    dead_code,
    reason = "helpers shared by the CLI tests; this file needs only some"
)]
mod support;
use support::{dir_with, dprof, golden, one_line_error, records_sections, stdout_of};

fn example_dir() -> tempfile::TempDir {
    dir_with(&[("small.dprof", dprof_fixtures::profile::example_profile())])
}

#[test]
fn dump_text() {
    let dir = example_dir();
    golden(
        "dump.txt",
        &stdout_of(&dprof(dir.path(), &["dump", "small.dprof"])),
    );
}

#[test]
fn dump_json() {
    let dir = example_dir();
    let text = stdout_of(&dprof(dir.path(), &["dump", "--json", "small.dprof"]));
    let v: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
    assert_eq!(v["records"].as_array().map(Vec::len), Some(14));
    assert_eq!(v["records"][2]["symbol"], "__alloc_skb+0x42");
    let sample = &v["records"][11];
    assert_eq!(sample["kind"], "sample");
    assert_eq!(sample["symbol"], "__alloc_skb+0x60");
    assert_eq!(sample["insn"], "488b4710");
    assert_eq!(sample["access"]["addr"], "0xffff888004010010");
    assert_eq!(sample["access"]["kind"], "read");
    assert_eq!(sample["regs"]["rdi"], "0xffff888004010000");
    assert_eq!(v["records"][12]["access"]["gs_relative"], true);
    assert_eq!(v["records"][13]["access"]["none"], "user_mode");
    assert_eq!(v["header"]["config"]["sampling"]["period_ns"], 1_000_000);
    assert_eq!(v["header"]["module"]["nr_cpu_ids"], 4);
    golden("dump.json", &text);
}

/// The Btf section is listed with the other snapshots, in text and JSON.
#[test]
fn dump_lists_the_btf_section() {
    let btf = dprof_fixtures::btf::example();
    let dir = dir_with(&[(
        "btf.dprof",
        dprof_fixtures::data_profile::profile_with_btf(&btf),
    )]);
    let text = stdout_of(&dprof(dir.path(), &["dump", "btf.dprof"]));
    assert!(
        text.lines()
            .any(|l| l == format!("btf: {} bytes", btf.len())),
        "{text}"
    );
    let json = stdout_of(&dprof(dir.path(), &["dump", "--json", "btf.dprof"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("one JSON document");
    assert_eq!(v["btf_bytes"], btf.len());
}

/// IBS samples show their raw registers: the ones the sample's caps say exist, by name.
#[test]
fn dump_shows_ibs_registers() {
    use dprof_fixtures::hardware::{profile, Sampler};
    let dir = dir_with(&[("ibs.dprof", profile(Sampler::Ibs))]);
    let text = stdout_of(&dprof(dir.path(), &["dump", "ibs.dprof"]));
    let line = text
        .lines()
        .find(|l| l.contains(" ibs_sample ") && l.contains("IbsOpData3="))
        .unwrap_or_else(|| panic!("no IBS sample with its registers in:\n{text}"));
    for name in [
        "IbsOpCtl=",
        "IbsOpRip=",
        "IbsOpData=",
        "IbsDcLinAd=",
        "IbsDcPhysAd=",
    ] {
        assert!(line.contains(name), "{name} missing: {line}");
    }
    let json = stdout_of(&dprof(dir.path(), &["dump", "--json", "ibs.dprof"]));
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let samples: Vec<&serde_json::Value> = value["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["kind"] == "ibs_sample")
        .collect();
    assert!(!samples.is_empty(), "{json}");
    for s in samples {
        let ibs = &s["ibs"];
        assert!(
            ibs["IbsOpData3"].is_string() && ibs["caps"].is_string(),
            "{s}"
        );
    }
}

#[test]
fn dump_summary_text() {
    let dir = example_dir();
    golden(
        "summary.txt",
        &stdout_of(&dprof(dir.path(), &["dump", "--summary", "small.dprof"])),
    );
}

#[test]
fn dump_summary_json() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["dump", "--summary", "--json", "small.dprof"],
    ));
    let v: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
    assert_eq!(v["summary"]["lost"], 7);
    assert_eq!(v["summary"]["caches"][0]["name"], "skbuff_head_cache");
    assert_eq!(v["summary"]["kinds"]["sample"], 3);
    assert_eq!(
        v["summary"]["samples"]["top_functions"][0]["function"],
        "__alloc_skb"
    );
    assert_eq!(v["summary"]["samples"]["decode"]["gs_relative"], 1);
    golden("summary.json", &text);
}

#[test]
fn dump_missing_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = one_line_error(&dprof(dir.path(), &["dump", "nope.dprof"]));
    assert!(
        err.starts_with("dprof: error: cannot read nope.dprof: "),
        "{err}"
    );
}

#[test]
fn dump_truncated_file_names_the_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = dprof_fixtures::profile::example_profile();
    let cut = bytes.len() - 10;
    std::fs::write(dir.path().join("cut.dprof"), &bytes[..cut]).expect("write");
    let err = one_line_error(&dprof(dir.path(), &["dump", "cut.dprof"]));
    assert!(
        err.contains(&format!("file ends at offset {cut} inside a End section")),
        "{err}"
    );
}

#[test]
fn dump_corrupt_file_names_the_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bytes = dprof_fixtures::profile::example_profile();
    // A byte inside the kallsyms snapshot: the section's CRC no longer matches.
    let at = bytes
        .windows(12)
        .position(|w| w == b"kfree_skbmem")
        .expect("the example's kallsyms");
    bytes[at] ^= 0xff;
    std::fs::write(dir.path().join("bad.dprof"), &bytes).expect("write");
    let err = one_line_error(&dprof(dir.path(), &["dump", "--summary", "bad.dprof"]));
    assert!(err.starts_with("dprof: error: bad.dprof: "), "{err}");
    assert!(err.contains("at offset "), "{err}");
    assert!(err.contains("is corrupt"), "{err}");
}

/// Records are printed as they are read: a corrupt second chunk comes after the first
/// chunk's records, as an error with exit status 1.
#[test]
fn dump_ends_with_the_error_of_a_corrupt_chunk() {
    let good = dprof_fixtures::profile::example_profile();
    let mut bytes = good.clone();
    let (second, len) = records_sections(&bytes)[1];
    bytes[second + 16 + len - 1] ^= 0x80;
    let dir = dir_with(&[("good.dprof", good), ("bad.dprof", bytes)]);
    let expected = format!("dprof: error: bad.dprof: Block section at offset {second} is corrupt");
    let out = dprof(dir.path(), &["dump", "bad.dprof"]);
    let err = one_line_error(&out);
    assert!(err.starts_with(&expected), "{err}");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let whole = stdout_of(&dprof(dir.path(), &["dump", "good.dprof"]));
    let records = |text: &str| text.lines().filter(|l| l.starts_with("cpu=")).count();
    assert!(
        whole
            .replace("good.dprof", "bad.dprof")
            .starts_with(&stdout)
            && (1..records(&whole)).contains(&records(&stdout)),
        "the first chunk's records, then the error:\n{stdout}"
    );
    // --json leaves an unfinished document; --summary prints nothing.
    let out = dprof(dir.path(), &["dump", "--json", "bad.dprof"]);
    assert!(one_line_error(&out).starts_with(&expected));
    assert!(serde_json::from_slice::<serde_json::Value>(&out.stdout).is_err());
    for args in [
        &["dump", "--summary", "bad.dprof"][..],
        &["dump", "--summary", "--json", "bad.dprof"],
    ] {
        let out = dprof(dir.path(), args);
        assert!(one_line_error(&out).starts_with(&expected), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn dump_foreign_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("x.txt"), "hello\n").expect("write");
    let err = one_line_error(&dprof(dir.path(), &["dump", "--json", "x.txt"]));
    assert_eq!(
        err,
        "dprof: error: x.txt: not a dprof profile: bad magic at offset 0\n"
    );
}

#[test]
fn collect_without_device_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dprof(
        dir.path(),
        &[
            "collect",
            "--backend",
            "module",
            "--device",
            "no-such-device",
            "-o",
            "out.dprof",
            "--duration",
            "1s",
        ],
    );
    let err = one_line_error(&out);
    assert_eq!(
        err,
        "dprof: error: no-such-device does not exist: load the module with `insmod dprof.ko`\n"
    );
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

#[test]
fn perf_backend_refuses_histories_before_creating_anything() {
    let dir = tempfile::tempdir().expect("tempdir");
    for backend in [
        &["--backend", "perf"][..],
        &["--device", "no-such-device"][..],
    ] {
        let mut args = vec!["collect", "-o", "out.dprof", "--duration", "1s"];
        args.extend_from_slice(backend);
        args.extend_from_slice(&["--histories", "auto"]);
        let out = dprof(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("object access histories (--histories) need dprof.ko")
                && stderr.contains("--backend module"),
            "{stderr}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }
}

#[test]
fn collect_needs_exactly_one_of_command_and_duration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dprof(dir.path(), &["collect", "-o", "out.dprof"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nothing would end the collection"),
        "{stderr}"
    );
    let out = dprof(
        dir.path(),
        &[
            "collect",
            "-o",
            "out.dprof",
            "--duration",
            "1s",
            "--",
            "true",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not both"), "{stderr}");
    let out = dprof(
        dir.path(),
        &[
            "collect",
            "-o",
            "out.dprof",
            "--duration",
            "1s",
            "--ring-size",
            "3M",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a power of two"), "{stderr}");
    for (args, needle) in [
        (&["--period", "1us"][..], "is shorter than"),
        (&["--sampler", "zen"], "invalid value 'zen'"),
        (
            &["--events", "slab", "--sample-user"],
            "need the samples event",
        ),
        (
            &["--events", "slab", "--sampler", "ibs"],
            "need the samples event",
        ),
    ] {
        let mut argv = vec!["collect", "-o", "out.dprof", "--duration", "1s"];
        argv.extend_from_slice(args);
        let out = dprof(dir.path(), &argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

#[test]
fn help_explains_commands_and_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let top = stdout_of(&dprof(dir.path(), &["--help"]));
    assert!(top.contains("collect") && top.contains("dump"), "{top}");
    let collect = stdout_of(&dprof(dir.path(), &["collect", "--help"]));
    for needle in [
        "[default: 4M]",
        "[default: slab,samples when the module has a sampler",
        "[default: 1ms for software, 262144 ops for IBS, 100003 loads for PEBS]",
        "auto picks IBS, then PEBS, then software",
        "[default: auto]",
        "[default: /dev/dprof]",
        "--duration",
        "--sample-user",
        "--period",
        "PATH.partial",
    ] {
        assert!(
            collect.contains(needle),
            "collect --help lacks {needle}:\n{collect}"
        );
    }
    let dump = stdout_of(&dprof(dir.path(), &["dump", "--help"]));
    for needle in ["--json", "--summary", "offset"] {
        assert!(dump.contains(needle), "dump --help lacks {needle}:\n{dump}");
    }
    let causal = stdout_of(&dprof(dir.path(), &["causal", "--help"]));
    for needle in [
        "--scope",
        "a kernel sample outside the scope counts for the first function in",
        "it on its call chain",
    ] {
        assert!(
            causal.contains(needle),
            "causal --help lacks {needle}:\n{causal}"
        );
    }
}

/// Asking for a hardware sampler the machine lacks fails with one sentence naming what is
/// missing, before the device is opened. Where the machine has it, the device is what fails.
#[test]
fn collect_with_an_absent_hardware_sampler_says_why() {
    let found = dprof_collect::samplers::detect(std::path::Path::new("/"));
    let dir = tempfile::tempdir().expect("tempdir");
    for (sampler, name, detection) in [
        ("ibs", "IBS", found.ibs.as_ref().err()),
        ("pebs", "PEBS", found.pebs.as_ref().err()),
    ] {
        let out = dprof(
            dir.path(),
            &[
                "collect",
                "--device",
                "no-such-device",
                "-o",
                "out.dprof",
                "--duration",
                "1s",
                "--sampler",
                sampler,
            ],
        );
        let err = one_line_error(&out);
        match detection {
            Some(why) => assert_eq!(
                err,
                format!("dprof: error: cannot sample with {name}: {why}; use --sampler software\n")
            ),
            None => assert!(err.contains("no-such-device does not exist"), "{err}"),
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

/// A count is no period for the software sampler, whatever the machine.
#[test]
fn collect_checks_the_period_against_the_sampler_before_the_device() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dprof(
        dir.path(),
        &[
            "collect",
            "--device",
            "no-such-device",
            "-o",
            "out.dprof",
            "--duration",
            "1s",
            "--sampler",
            "software",
            "--period",
            "65536",
        ],
    );
    assert_eq!(
        one_line_error(&out),
        "dprof: error: --period 65536 is a count of events, but the software sampler takes the \
         time between samples, e.g. --period 1ms\n"
    );
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}
