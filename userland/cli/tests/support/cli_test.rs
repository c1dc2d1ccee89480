//! Helpers shared by the CLI's integration tests: run the `dprof` binary, compare with golden
//! files, and check the shape of errors. Included with `#[path]` by each test file; not a
//! test of its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `dprof ARGS` in `dir`.
pub fn dprof(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dprof"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("dprof runs")
}

/// A temporary directory holding `files`.
pub fn dir_with(files: &[(&str, Vec<u8>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).expect("write file");
    }
    dir
}

/// Compares `actual` with tests/golden/NAME; `DPROF_BLESS=1` rewrites the file instead.
pub fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("DPROF_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; run with DPROF_BLESS=1 to create it",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "output differs from {} (DPROF_BLESS=1 rewrites it):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

/// A `dprof report --json` text with the working set's simulation time and throughput (which
/// vary from run to run) zeroed, for golden files.
pub fn steady_json(text: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
    if let Some(sim) = v
        .get_mut("working_set")
        .and_then(|w| w.get_mut("simulation"))
        .and_then(serde_json::Value::as_object_mut)
    {
        sim.insert("seconds".to_owned(), 0.0.into());
        sim.insert("accesses_per_second".to_owned(), 0.0.into());
    }
    serde_json::to_string_pretty(&v).expect("serializes") + "\n"
}

/// Standard output of a run that succeeded quietly.
pub fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "dprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// One line on stderr, exit status 1.
pub fn one_line_error(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8(out.stderr.clone()).expect("utf-8");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("dprof: error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// Header offset and payload length of each Block section (the records) of a whole profile.
pub fn records_sections(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = dprof_format::FILE_HEADER_SIZE;
    while let Some(h) = bytes.get(pos..pos + dprof_format::SECTION_HEADER_SIZE) {
        let kind = u32::from_le_bytes(h[..4].try_into().expect("4 bytes"));
        let len = u64::from_le_bytes(h[8..].try_into().expect("8 bytes")) as usize;
        if kind == dprof_format::SectionKind::Block as u32 {
            out.push((pos, len));
        }
        pos += dprof_format::SECTION_HEADER_SIZE + len;
    }
    out
}
