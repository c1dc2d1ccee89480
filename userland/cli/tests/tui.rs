//! `dprof tui` end to end.
//!
//! Without a terminal: the errors a person meets before the browser opens (an empty, corrupt
//! or foreign file, a one-type JSON, no terminal) print one line, exit 1, and write nothing
//! to the screen. Under tmux, a real terminal: the browser draws the data profile, follows
//! keys and resizes, and gives the terminal back (main screen, cursor, cooked mode) on `q` and
//! when the analysis fails after it took the terminal. tmux is a Debian package (scripts/setup
//! installs it); without it the tmux tests are skipped with a message, unless
//! `DPROF_TEST_REQUIRE_EXTERNAL=1` (scripts/test), which makes its absence a failure.

#[path = "support/cli_test.rs"]
#[expect(dead_code, reason = "the golden files are other tests' business")]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::{dir_with, dprof, one_line_error, records_sections, stdout_of};

use dprof_fixtures::data_profile as example;

/// One line on stderr, exit 1, and nothing on stdout: no escape sequences reached the screen.
fn refused(out: &Output) -> String {
    assert!(out.stdout.is_empty(), "stdout: {:?}", out.stdout);
    one_line_error(out)
}

#[test]
fn an_empty_file_is_refused_before_the_terminal() {
    let dir = dir_with(&[("empty.dprof", Vec::new())]);
    let err = refused(&dprof(dir.path(), &["tui", "empty.dprof"]));
    assert!(
        err.contains("empty.dprof: the file is empty: neither a dprof profile nor a JSON report"),
        "{err}"
    );
}

#[test]
fn a_corrupt_or_foreign_file_is_refused_before_the_terminal() {
    let profile = example::profile();
    let dir = dir_with(&[
        ("cut.dprof", profile[..100].to_vec()),
        ("foreign.bin", b"\x7fELF\x02\x01\x01".to_vec()),
        ("broken.json", b"{\"profile\": 3}".to_vec()),
        ("missing-dir", Vec::new()),
    ]);
    let err = refused(&dprof(dir.path(), &["tui", "cut.dprof"]));
    assert!(err.contains("cut.dprof: file ends at offset 100"), "{err}");
    assert!(err.contains("truncated"), "{err}");
    let err = refused(&dprof(dir.path(), &["tui", "foreign.bin"]));
    assert!(
        err.contains("foreign.bin: neither a dprof profile (bad magic at offset 0) nor a JSON"),
        "{err}"
    );
    let err = refused(&dprof(dir.path(), &["tui", "broken.json"]));
    assert!(
        err.contains("broken.json: not a report written by dprof report --json"),
        "{err}"
    );
    let err = refused(&dprof(dir.path(), &["tui", "absent.dprof"]));
    assert!(err.contains("cannot read absent.dprof"), "{err}");
}

#[test]
fn one_type_of_json_is_refused_with_what_to_do() {
    let dir = dir_with(&[("dp.dprof", example::profile())]);
    let one_type = stdout_of(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--json", "--type", "task_struct"],
    ));
    std::fs::write(dir.path().join("type.json"), one_type).expect("write");
    let err = refused(&dprof(dir.path(), &["tui", "type.json"]));
    assert!(
        err.contains("type.json: this JSON is one type (dprof report --json --type)"),
        "{err}"
    );
    let whole = stdout_of(&dprof(dir.path(), &["report", "dp.dprof", "--json"]));
    std::fs::write(dir.path().join("dp.json"), whole).expect("write");
    let err = refused(&dprof(
        dir.path(),
        &["tui", "dp.json", "--vmlinux", "vmlinux"],
    ));
    assert!(err.contains("dp.json is a JSON report"), "{err}");
}

#[test]
fn a_bad_cache_spec_or_cache_on_json_is_refused_before_the_terminal() {
    let dir = dir_with(&[("dp.dprof", example::profile())]);
    let err = refused(&dprof(
        dir.path(),
        &["tui", "dp.dprof", "--cache", "L1d=banana"],
    ));
    assert!(err.contains("--cache"), "{err}");
    let whole = stdout_of(&dprof(dir.path(), &["report", "dp.dprof", "--json"]));
    std::fs::write(dir.path().join("dp.json"), whole).expect("write");
    let err = refused(&dprof(
        dir.path(),
        &["tui", "dp.json", "--cache", "L1d=48K/12/64"],
    ));
    assert!(
        err.contains("dp.json is a JSON report: its views were computed when it was written"),
        "{err}"
    );
}

#[test]
fn without_a_terminal_it_says_what_to_use() {
    let dir = dir_with(&[("dp.dprof", example::profile())]);
    let err = refused(&dprof(dir.path(), &["tui", "dp.dprof"]));
    assert!(err.contains("dprof tui needs a terminal"), "{err}");
    assert!(err.contains("dprof report"), "{err}");
}

#[test]
fn help_describes_the_browser() {
    let dir = dir_with(&[]);
    let help = stdout_of(&dprof(dir.path(), &["tui", "--help"]));
    for needle in [
        "dprof report --json",
        "--vmlinux",
        "Data profile",
        "? lists every key",
    ] {
        assert!(help.contains(needle), "tui --help lacks {needle}:\n{help}");
    }
    let top = stdout_of(&dprof(dir.path(), &["--help"]));
    assert!(top.contains("tui"), "{top}");
}

/// A tmux server of its own (its socket in the test's directory), with one detached session
/// running a command; killed on drop.
struct Tmux {
    socket: PathBuf,
}

/// How long a screen may take to show (debug builds on a loaded machine).
const WAIT: Duration = Duration::from_secs(30);

impl Tmux {
    /// Whether tmux can be used here; fails when it cannot but must.
    fn available() -> bool {
        if Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return true;
        }
        assert!(
            std::env::var("DPROF_TEST_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
            "tmux is not installed (apt-get install tmux; scripts/setup does) but \
             DPROF_TEST_REQUIRE_EXTERNAL=1"
        );
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        false
    }

    /// Runs `dprof ARGS` in `dir` in a `width` x `height` terminal. When dprof ends, the pane
    /// prints its exit status, saves `stty -a` to `dir/stty.txt` and prints `pane done`.
    fn run_dprof(dir: &Path, args: &str, width: u16, height: u16) -> Self {
        let tmux = Self {
            socket: dir.join("tmux.socket"),
        };
        let script = format!(
            "'{}' {args}; echo \"dprof exited $?\"; stty -a > stty.txt; echo 'pane done'; \
             sleep 600",
            env!("CARGO_BIN_EXE_dprof")
        );
        let out = tmux.command(&[
            "new-session",
            "-d",
            "-s",
            "dprof",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "-c",
            &dir.display().to_string(),
            &script,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        tmux
    }

    fn command(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs")
    }

    /// The visible screen.
    fn screen(&self) -> String {
        let out = self.command(&["capture-pane", "-p", "-t", "dprof"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `needle`; returns the screen.
    fn wait_for(&self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                start.elapsed() < WAIT,
                "no {needle:?} on the screen after {WAIT:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "dprof"];
        args.extend(keys);
        let out = self.command(&args);
        assert!(out.status.success(), "tmux send-keys: {out:?}");
    }

    /// A tmux format of the pane, e.g. `#{alternate_on}`.
    fn pane(&self, format: &str) -> String {
        let out = self.command(&["display-message", "-p", "-t", "dprof", format]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn resize(&self, width: u16, height: u16) {
        let out = self.command(&[
            "resize-window",
            "-t",
            "dprof",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
        assert!(out.status.success(), "tmux resize-window: {out:?}");
    }

    /// After dprof ended: the main screen is back, with the cursor, in cooked mode.
    fn assert_terminal_restored(&self, dir: &Path) {
        self.wait_for("pane done");
        assert_eq!(
            self.pane("#{alternate_on}"),
            "0",
            "still on the alternate screen"
        );
        assert_eq!(
            self.pane("#{cursor_flag}"),
            "1",
            "the cursor is still hidden"
        );
        let stty = std::fs::read_to_string(dir.join("stty.txt")).expect("stty -a ran");
        let flags: Vec<&str> = stty.split_whitespace().collect();
        for flag in ["icanon", "echo", "isig"] {
            assert!(
                flags.contains(&flag),
                "the terminal is left without {flag} (raw mode):\n{stty}"
            );
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command(&["kill-server"]);
    }
}

fn pathbuf(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().to_path_buf()
}

/// The example profile and `extra` more samples, each a read of an `sk_buff` from CPU 1:
/// enough records that a debug build analyzes them for seconds.
fn big_profile(extra: usize) -> Vec<u8> {
    /// Records per Records section (about 200 bytes each; a section holds at most 4 MiB).
    const PER_CHUNK: usize = 10_000;
    let sample = dprof_abi::Record::AccessSample(dprof_fixtures::profile::software_sample(
        0xffff_ffff_8110_1020,
        example::LOAD_RDI_70,
        &[(dprof_abi::reg::RDI, example::SKB_A)],
        example::gs_base(1),
    ));
    let mut chunks: Vec<Vec<(u32, u64, dprof_abi::Record)>> = example::records().into();
    let mut time = 1_000_000;
    for _ in 0..extra.div_ceil(PER_CHUNK) {
        chunks.push(
            (0..PER_CHUNK)
                .map(|_| {
                    time += 1_000;
                    (1, time, sample)
                })
                .collect(),
        );
    }
    example::profile_with(&example::header(), example::KALLSYMS, &chunks)
}

#[test]
fn browses_a_profile_in_a_real_terminal() {
    if !Tmux::available() {
        return;
    }
    let dir = dir_with(&[("dp.dprof", example::profile())]);
    let tmux = Tmux::run_dprof(dir.path(), "tui dp.dprof", 100, 30);
    let screen = tmux.wait_for("skbuff_head_cache");
    for heading in [
        "rank",
        "type",
        "samples",
        "share",
        "objects",
        "bounce",
        "coverage:",
    ] {
        assert!(screen.contains(heading), "no {heading:?}:\n{screen}");
    }
    assert!(screen.contains("1 Data profile"), "{screen}");
    assert_eq!(
        tmux.pane("#{alternate_on}"),
        "1",
        "the browser uses the alternate screen"
    );

    // Open the first type, back, the help, then a resize down to too small and back.
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Heat: samples per byte");
    assert!(
        screen.contains("skbuff_head_cache (sk_buff) · slab #1"),
        "{screen}"
    );
    tmux.keys(&["BSpace"]);
    tmux.wait_for("rank ▲");
    tmux.keys(&["?"]);
    tmux.wait_for("reverse the sort");
    tmux.keys(&["x"]);
    tmux.resize(40, 10);
    tmux.wait_for("terminal too small: 40x10");
    tmux.resize(80, 24);
    let screen = tmux.wait_for("skbuff_head_cache");
    assert!(!screen.contains("too small"), "{screen}");

    tmux.keys(&["q"]);
    let screen = tmux.wait_for("dprof exited 0");
    assert!(
        !screen.contains("rank ▲"),
        "the browser's screen stayed:\n{screen}"
    );
    tmux.assert_terminal_restored(&pathbuf(&dir));
}

/// Without --vmlinux the profile's BTF names the fields, as in `dprof report`.
#[test]
fn the_type_view_names_fields_from_the_profiles_btf() {
    if !Tmux::available() {
        return;
    }
    let dir = dir_with(&[(
        "btf.dprof",
        example::profile_with_btf(&dprof_fixtures::btf::example()),
    )]);
    let tmux = Tmux::run_dprof(dir.path(), "tui btf.dprof", 100, 30);
    tmux.wait_for("skbuff_head_cache");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Heat: samples per byte");
    let screen = tmux.wait_for("prev");
    assert!(screen.contains("len"), "{screen}");
    tmux.keys(&["q"]);
    tmux.wait_for("dprof exited 0");
    tmux.assert_terminal_restored(&pathbuf(&dir));
}

#[test]
fn browses_a_saved_json_report() {
    if !Tmux::available() {
        return;
    }
    let dir = dir_with(&[("dp.dprof", example::profile())]);
    let json = stdout_of(&dprof(dir.path(), &["report", "dp.dprof", "--json"]));
    std::fs::write(dir.path().join("dp.json"), json).expect("write");
    let tmux = Tmux::run_dprof(dir.path(), "tui dp.json", 100, 30);
    let screen = tmux.wait_for("percpu:runqueues");
    assert!(screen.contains("skbuff_head_cache (sk_buff)"), "{screen}");
    tmux.keys(&["q"]);
    tmux.wait_for("dprof exited 0");
    tmux.assert_terminal_restored(&pathbuf(&dir));
}

/// A profile is analyzed with the miss classification and working-set views: their tabs show
/// the views example's types, and the geometry line says which levels --cache gave.
#[test]
fn browses_the_misses_and_working_set_of_a_profile() {
    if !Tmux::available() {
        return;
    }
    let dir = dir_with(&[("vw.dprof", dprof_fixtures::views::profile())]);
    let tmux = Tmux::run_dprof(dir.path(), "tui vw.dprof --cache L2=1M/16/64", 100, 30);
    tmux.wait_for("vw_sweep");
    // Each needle waited for: a capture can catch the screen half drawn.
    tmux.keys(&["3"]);
    tmux.wait_for("Misses · vw_");
    tmux.wait_for("false sharing +25.0");
    tmux.keys(&["4"]);
    tmux.wait_for("Live objects");
    tmux.wait_for("caches (profile and --cache)");
    tmux.wait_for("L2 1 MiB 16-way");
    tmux.keys(&["q"]);
    tmux.wait_for("dprof exited 0");
    tmux.assert_terminal_restored(&pathbuf(&dir));
}

/// A large profile: the progress shows while it is analyzed, keys work meanwhile, and q quits
/// without waiting for the analysis.
#[test]
fn loading_shows_progress_and_keys_work_meanwhile() {
    if !Tmux::available() {
        return;
    }
    let dir = dir_with(&[("big.dprof", big_profile(200_000))]);
    let tmux = Tmux::run_dprof(dir.path(), "tui big.dprof", 100, 30);
    let screen = tmux.wait_for("records (");
    assert!(screen.contains("loading big.dprof"), "{screen}");
    let records = 200_000 + example::records().iter().map(Vec::len).sum::<usize>();
    let total = format!("of {},{:03} records", records / 1000, records % 1000);
    assert!(screen.contains(&total), "no {total:?}:\n{screen}");
    tmux.keys(&["?"]);
    tmux.wait_for("reverse the sort");
    tmux.keys(&["x", "q"]);
    let screen = tmux.wait_for("dprof exited 0");
    assert!(!screen.contains("rank ▲"), "{screen}");
    tmux.assert_terminal_restored(&pathbuf(&dir));
}

/// The records are read by the analysis, after the browser took the terminal: a corrupt chunk
/// ends it, and the error prints on the restored screen.
#[test]
fn a_corrupt_chunk_found_while_browsing_restores_the_terminal() {
    if !Tmux::available() {
        return;
    }
    let mut bytes = example::profile();
    let &(at, len) = records_sections(&bytes).last().expect("a Records section");
    bytes[at + dprof_format::SECTION_HEADER_SIZE + len - 1] ^= 0x40;
    let dir = dir_with(&[("bad.dprof", bytes)]);
    let tmux = Tmux::run_dprof(dir.path(), "tui bad.dprof", 100, 30);
    let screen = tmux.wait_for("dprof exited 1");
    assert!(screen.contains("dprof: error: bad.dprof: "), "{screen}");
    assert!(screen.contains("CRC"), "{screen}");
    tmux.assert_terminal_restored(&pathbuf(&dir));
}
