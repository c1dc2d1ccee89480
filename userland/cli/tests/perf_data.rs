//! `dprof report perf.data`: a perf.data recorded by perf itself with the README's command
//! line, converted on this machine. Recording needs root and `/usr/bin/perf`; scripts/test runs
//! as root and sets `DPROF_TEST_REQUIRE_EXTERNAL`, so there a missing one fails these tests.
//! The bad-input tests need neither.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use dprof_collect::perf::PERF_RECORD_COMMAND;
use serde_json::Value;

const PERF: &str = "/usr/bin/perf";

/// One recording at a time: each sees the whole machine.
static MACHINE: Mutex<()> = Mutex::new(());

/// Whether this process may record with perf; with `DPROF_TEST_REQUIRE_EXTERNAL` set, that it
/// may not is a failure.
fn perf_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let perf = Path::new(PERF).exists();
    if root && perf {
        return true;
    }
    assert!(
        std::env::var_os("DPROF_TEST_REQUIRE_EXTERNAL").is_none(),
        "the perf.data tests need root and {PERF} (root: {root}, perf: {perf}; Debian's package \
         is linux-perf)"
    );
    eprintln!("skipped: the perf.data tests need root and {PERF}");
    false
}

fn dprof(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dprof"));
    cmd.args(args).env_remove("RUST_BACKTRACE");
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `perf record` as `PERF_RECORD_COMMAND` says, with `changes` made to its words, into
/// `output`, recording `sh -c script`.
fn perf_record(output: &Path, script: &str, changes: impl Fn(Vec<String>) -> Vec<String>) {
    let words: Vec<String> = PERF_RECORD_COMMAND
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let words = changes(words);
    let dash = words
        .iter()
        .position(|w| w == "--")
        .expect("a -- in the command");
    assert_eq!(words[..2], ["perf", "record"], "{words:?}");
    let out = Command::new(PERF)
        .arg("record")
        .arg("-o")
        .arg(output)
        .args(&words[2..dash])
        .args(["--", "sh", "-c", script])
        .output()
        .expect("perf runs");
    assert!(out.status.success(), "perf record failed: {}", stderr(&out));
}

/// A file per iteration created and deleted in a fresh directory: dentries allocated, looked
/// up and freed.
fn file_churn(dir: &Path, files: u32) -> String {
    format!(
        "set -e; d={d}; mkdir -p $d; i=0; while [ $i -lt {files} ]; do : > $d/f$i; i=$((i+1)); \
         done; for r in 1 2 3; do ls -l $d > /dev/null; done; rm -rf $d",
        d = dir.join("churn").display()
    )
}

/// The one error line of a failed `dprof`.
fn one_error(out: &Output) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("dprof: error: "), "{err}");
    err
}

fn count(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

#[test]
fn a_perf_record_of_file_churn_is_reported_like_a_profile() {
    let _machine = MACHINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !perf_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("perf.data");
    perf_record(&data, &file_churn(dir.path(), 2000), |w| w);

    let out = dprof(&["report", "--json"])
        .arg(&data)
        .output()
        .expect("dprof runs");
    let err = stderr(&out);
    assert!(out.status.success(), "report failed: {err}");
    assert!(
        err.lines().any(|l| l.starts_with("dprof: converted ")
            && l.contains(" samples, ")
            && l.contains(" slab events")),
        "{err}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the report is JSON");
    let types = report["data_profile"]["types"].as_array().expect("types");
    assert!(!types.is_empty(), "no types");
    let dentry = types
        .iter()
        .find(|t| t["name"] == "dentry")
        .expect("dentry is a type");
    assert!(count(dentry, "allocs") >= 2000, "{dentry}");
    assert_eq!(dentry["struct_name"], "dentry");
    let coverage = &report["coverage"];
    assert!(count(coverage, "total_samples") > 0, "{coverage}");
    assert!(count(coverage, "resolved_samples") > 0, "{coverage}");

    // dump and tui load it the same way (tui then needs a terminal, which a test has not).
    let out = dprof(&["dump", "--summary"])
        .arg(&data)
        .output()
        .expect("dprof runs");
    assert!(out.status.success(), "dump failed: {}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("perf.data"),
        "the header names perf.data as the backend"
    );
    let out = dprof(&["tui"]).arg(&data).output().expect("dprof runs");
    let err = stderr(&out);
    assert!(err.contains("dprof: converted "), "{err}");
    assert!(err.contains("needs a terminal"), "{err}");

    // The same file cut short: one sentence, no panic.
    let bytes = std::fs::read(&data).expect("read");
    let cut = dir.path().join("cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let out = dprof(&["report"]).arg(&cut).output().expect("dprof runs");
    let err = one_error(&out);
    assert!(err.contains("truncated or corrupt"), "{err}");
}

/// Records `true` with the command line changed by `changes`, and returns dprof's error.
fn refusal(changes: impl Fn(Vec<String>) -> Vec<String>) -> Option<String> {
    let _machine = MACHINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !perf_available() {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("perf.data");
    perf_record(&data, "true", changes);
    let out = dprof(&["report"]).arg(&data).output().expect("dprof runs");
    Some(one_error(&out))
}

#[test]
fn samples_without_registers_are_refused_with_the_command_line() {
    let Some(err) = refusal(|w| {
        w.into_iter()
            .filter(|w| !w.starts_with("--intr-regs"))
            .collect()
    }) else {
        return;
    };
    assert!(err.contains("lack the interrupted registers"), "{err}");
    assert!(err.contains(PERF_RECORD_COMMAND), "{err}");
}

#[test]
fn a_perf_data_without_the_kmem_events_is_refused() {
    // Every `-e EVENT` but the sampler's.
    let Some(err) = refusal(|w| {
        let mut kept = Vec::new();
        let mut words = w.into_iter().peekable();
        while let Some(word) = words.next() {
            if word == "-e" && words.peek().is_some_and(|e| e.starts_with("kmem:")) {
                words.next();
                continue;
            }
            kept.push(word);
        }
        kept
    }) else {
        return;
    };
    assert!(
        err.contains("lacks kmem:kmem_cache_alloc, kmem:kmalloc, kmem:kmem_cache_free, kmem:kfree"),
        "{err}"
    );
}

#[test]
fn kmem_events_sampled_by_c_are_refused() {
    // `-c` sets every event's period, the tracepoints' too.
    let Some(err) = refusal(|w| {
        let mut w: Vec<String> = w
            .into_iter()
            .map(|w| {
                if w.starts_with("cpu-clock/") {
                    "cpu-clock".to_owned()
                } else {
                    w
                }
            })
            .collect();
        w.splice(2..2, ["-c".to_owned(), "100000".to_owned()]);
        w
    }) else {
        return;
    };
    assert!(err.contains("was sampled (one hit in 100000)"), "{err}");
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

#[test]
fn a_cut_perf_data_is_one_error_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    // perf's header, claiming a data section far longer than the file.
    let mut bytes = b"PERFILE2".to_vec();
    for v in [104u64, 128, 0, 0, 104, 1 << 20, 0, 0] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.extend_from_slice(&[0; 32]);
    bytes.extend_from_slice(&[0; 100]);
    let file = write(dir.path(), "perf.data", &bytes);
    for command in ["report", "dump"] {
        let out = dprof(&[command]).arg(&file).output().expect("dprof runs");
        let err = one_error(&out);
        assert!(
            err.contains("perf.data: the perf.data is truncated or corrupt: its data section ends"),
            "{err}"
        );
    }
    let file = write(dir.path(), "short.data", b"PERFILE2\x68\0");
    let err = one_error(&dprof(&["report"]).arg(&file).output().expect("dprof runs"));
    assert!(err.contains("truncated or corrupt"), "{err}");
}

#[test]
fn a_file_named_perf_data_that_is_not_one_is_not_a_dprof_profile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(dir.path(), "perf.data", b"just some text\n");
    let err = one_error(&dprof(&["report"]).arg(&file).output().expect("dprof runs"));
    assert!(
        err.ends_with("perf.data: not a dprof profile: bad magic at offset 0\n"),
        "{err}"
    );
}
