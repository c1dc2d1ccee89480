//! `dprof report --view causal` end to end on the library's causal example
//! (`dprof_fixtures::causal`): golden text and Coz format, JSON, and the errors a
//! person meets. `DPROF_BLESS=1 cargo test -p dprof-cli --test causal` rewrites the golden
//! files under tests/golden/.

#[path = "support/cli_test.rs"]
#[expect(
    dead_code,
    reason = "helpers shared by the CLI tests; this file needs only some"
)]
mod support;

use support::{dir_with, dprof, golden, one_line_error, stdout_of};

use dprof_fixtures::causal as example;

fn example_dir() -> tempfile::TempDir {
    dir_with(&[
        ("c.dprof", example::profile()),
        ("cs.dprof", example::profile_with_samples()),
        (
            "none.dprof",
            example::profile_of(&example::example_config(), &[]),
        ),
        ("dp.dprof", dprof_fixtures::data_profile::profile()),
        ("empty.dprof", example::nothing_to_rank_profile()),
        ("functions.dprof", example::functions_profile()),
        ("modules.dprof", example::modules_profile()),
    ])
}

#[test]
fn causal_text() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "c.dprof", "--view", "causal"],
    ));
    let squeezed = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        squeezed(&text).contains("3 task_struct -0.405 [-0.436, -0.374] hurts (contention)"),
        "{text}"
    );
    assert!(text.contains("no slope: never selected"), "{text}");
    assert!(text.contains("cut short by the end of the session: 1 (experiment 31)"));
    assert!(
        text.contains(
            "sped up but no delay inserted (no sample of the type's instructions): 1 (experiment 35)"
        ),
        "{text}"
    );
    assert!(text.contains("could not see:"), "{text}");
    golden("causal.txt", &text);
}

#[test]
fn causal_of_one_type() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "c.dprof",
            "--view",
            "causal",
            "--type",
            "skbuff_head_cache",
        ],
    ));
    golden("causal_type.txt", &text);
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "c.dprof", "--view", "causal", "--type", "inode"],
    ));
    assert!(
        err.contains("no type \"inode\" in the causal type table"),
        "{err}"
    );
}

#[test]
fn causal_json() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "c.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let first = &v["analyses"][0]["types"][0];
    assert_eq!(first["name"], "skbuff_head_cache");
    assert_eq!(first["fit"]["kind"], "slope");
    let (low, high) = (
        first["fit"]["low"].as_f64().expect("low"),
        first["fit"]["high"].as_f64().expect("high"),
    );
    assert!(low <= 0.5 && 0.5 <= high, "{first}");
    assert_eq!(
        v["analyses"][0]["types"][3]["fit"]["reason"],
        "never_selected"
    );
    let nothing_inserted = v["experiments"]
        .as_array()
        .expect("experiments")
        .iter()
        .find(|e| e["experiment"] == 35)
        .expect("experiment 35");
    assert_eq!(nothing_inserted["discarded"], "no_delay_inserted");
    assert_eq!(nothing_inserted["measured"]["delay_ns"], 0);
}

/// Plain `--json` carries the causal section when the profile has experiments.
#[test]
fn report_json_includes_causal() {
    let dir = example_dir();
    let text = stdout_of(&dprof(dir.path(), &["report", "cs.dprof", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["coverage"]["total_samples"], 26);
    assert_eq!(
        v["causal"]["analyses"][0]["types"][0]["name"],
        "skbuff_head_cache"
    );
    let text = stdout_of(&dprof(dir.path(), &["report", "dp.dprof", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert!(v.get("causal").is_none());
}

#[test]
fn causal_coz_format() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "c.dprof", "--view", "causal", "--format", "coz"],
    ));
    for line in text.lines() {
        let kind = line.split('\t').next().unwrap_or_default();
        assert!(
            ["startup", "experiment", "throughput-point", "samples"].contains(&kind),
            "{line}"
        );
    }
    golden("causal.coz", &text);
}

#[test]
fn a_profile_without_experiments_is_one_sentence() {
    let dir = example_dir();
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--view", "causal"],
    ));
    assert!(
        err.contains(
            "dp.dprof: the profile has no causal experiments: it was not collected by dprof causal"
        ),
        "{err}"
    );
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "none.dprof", "--view", "causal"],
    ));
    assert!(
        err.contains("none.dprof: the profile has no causal experiments: dprof causal ended before the first one"),
        "{err}"
    );
}

#[test]
fn coz_format_needs_the_causal_view() {
    let dir = example_dir();
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "c.dprof", "--format", "coz"],
    ));
    assert!(
        err.contains("--format coz goes with --view causal"),
        "{err}"
    );
}

/// A causal session without samples: the data profile points at the causal view.
#[test]
fn a_causal_profile_without_samples_points_at_the_view() {
    let dir = example_dir();
    let err = one_line_error(&dprof(dir.path(), &["report", "c.dprof"]));
    assert!(err.contains("dprof report --view causal"), "{err}");
}

/// Every experiment discarded: each format says why, the output is still written, and the
/// exit status is 3 (not 1, a failure; not 0, a ranking).
#[test]
fn nothing_to_rank_is_said_in_every_format_with_exit_status_3() {
    let dir = example_dir();
    let why = "none of the 4 experiments could be used (2 sped up but no delay inserted";
    let text = dprof(dir.path(), &["report", "empty.dprof", "--view", "causal"]);
    assert_eq!(text.status.code(), Some(3), "{text:?}");
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains(&format!("nothing to rank: {why}")),
        "{stdout}"
    );
    golden("causal_nothing_to_rank.txt", &stdout);

    let json = dprof(
        dir.path(),
        &["report", "empty.dprof", "--view", "causal", "--json"],
    );
    assert_eq!(json.status.code(), Some(3), "{json:?}");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("valid JSON");
    assert_eq!(v["why_empty"]["reason"], "no_usable_experiment");
    assert!(
        v["why_empty"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(why)),
        "{v}"
    );

    let coz = dprof(
        dir.path(),
        &[
            "report",
            "empty.dprof",
            "--view",
            "causal",
            "--format",
            "coz",
        ],
    );
    assert_eq!(coz.status.code(), Some(3), "{coz:?}");
    let stderr = String::from_utf8_lossy(&coz.stderr);
    assert!(
        stderr.starts_with(&format!("dprof: warning: {why}")),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&coz.stdout);
    assert!(stdout.starts_with("startup\t"), "{stdout}");
    assert!(!stdout.contains("experiment\t"), "{stdout}");

    // A ranking exits 0, and its JSON has no why_empty.
    let ranked = dprof(
        dir.path(),
        &["report", "c.dprof", "--view", "causal", "--json"],
    );
    assert_eq!(ranked.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&ranked.stdout).expect("valid JSON");
    assert!(v.get("why_empty").is_none(), "{v}");
}

/// `dprof causal --units functions`: the view ranks functions and names them as kallsyms
/// does (`name [module]` for a module's), and so does Coz's format's `selected`.
#[test]
fn causal_of_functions_names_the_functions() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "functions.dprof", "--view", "causal"],
    ));
    let squeezed = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains("3 functions in the table")
            && text.contains("functions ranked by slope")
            && text.contains("of the function's instructions"),
        "{text}"
    );
    assert!(
        squeezed(&text).contains("3 ext4_da_write_begin [ext4] -0.405 [-0.436, -0.374] hurts"),
        "{text}"
    );
    assert!(squeezed(&text).contains("sample rank"), "{text}");
    golden("causal_functions.txt", &text);

    let coz = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "functions.dprof",
            "--view",
            "causal",
            "--format",
            "coz",
        ],
    ));
    assert!(coz.contains("experiment\tselected=tcp_sendmsg\t"), "{coz}");
    assert!(
        coz.contains("experiment\tselected=ext4_da_write_begin [ext4]\t"),
        "{coz}"
    );
    assert!(coz.contains("samples\tlocation=copy_user_generic\tcount=900"));
    golden("causal_functions.coz", &coz);

    // One function, by its name or as the view writes it.
    for name in ["ext4_da_write_begin", "ext4_da_write_begin [ext4]"] {
        let text = stdout_of(&dprof(
            dir.path(),
            &[
                "report",
                "functions.dprof",
                "--view",
                "causal",
                "--type",
                name,
            ],
        ));
        assert!(
            text.contains("function ext4_da_write_begin [ext4] (slope -0.405"),
            "{text}"
        );
    }

    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "functions.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(v["types"][0]["unit"], "function");
    assert_eq!(v["types"][0]["name"], "tcp_sendmsg");
    assert_eq!(v["types"][2]["module"], "ext4");
}

/// `dprof causal --units modules`: modules in brackets, and what each entry sped up.
#[test]
fn causal_of_modules_says_which_functions_were_sped_up() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "modules.dprof", "--view", "causal"],
    ));
    assert!(text.contains("modules ranked by slope"), "{text}");
    assert!(
        text.contains(
            "module [vmlinux]: 3 functions sped up, most sampled first (tcp_sendmsg, \
             copy_user_generic, __alloc_skb); 31000 more in scope left out by the 16384 \
             instructions one entry takes"
        ),
        "{text}"
    );
    assert!(
        text.contains("module [nf_tables]: 1 functions sped up, most sampled first (nft_do_chain); every function in scope"),
        "{text}"
    );
    assert!(
        text.contains("[vmlinux] was sped up in its 3 most sampled functions only"),
        "{text}"
    );
    let coz = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "modules.dprof",
            "--view",
            "causal",
            "--format",
            "coz",
        ],
    ));
    assert!(coz.contains("experiment\tselected=[ext4]\t"), "{coz}");
    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "modules.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(v["types"][0]["unit"], "module");
    assert_eq!(v["types"][0]["functions"][2], "__alloc_skb");
    assert_eq!(v["types"][0]["functions_left_out"], 31_000);
    // A type table has no unit field: what older readers expect.
    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "c.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert!(v["types"][0].get("unit").is_none(), "{}", v["types"][0]);
}

/// A `--fixed-speedup 50` session: the view says how its slopes were found, and ranks the
/// type with the effect above the one without.
#[test]
fn a_fixed_speedup_session_says_how_its_slopes_were_found() {
    let mut config = example::config(&[("on_path", 10), ("off_path", 10)], &["user:req"], None);
    config.fixed_speedup_percent = Some(50);
    let pairs: Vec<u32> = (0..10).flat_map(|_| [0, 50]).chain([0]).collect();
    let planned = example::on_and_off_path(example::linear_experiments, &pairs, 0.4, 0.01, 7);
    let dir = dir_with(&[("fixed.dprof", example::profile_of(&config, &planned))]);
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "fixed.dprof", "--view", "causal"],
    ));
    assert!(
        text.contains(
            "every sped-up experiment at 50% (--fixed-speedup): their mean program speedup"
        ),
        "{text}"
    );
    let rank_of = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_owned)
    };
    assert_eq!(rank_of("on_path").as_deref(), Some("1"), "{text}");
    assert_eq!(rank_of("off_path").as_deref(), Some("2"), "{text}");
    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "fixed.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["fixed_speedup_percent"], 50, "{json}");
}

/// The units' arguments: each mistake refused before anything is opened, in one sentence,
/// with clap's usage status (2), and no profile left behind.
#[test]
fn bad_unit_arguments_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = [
        "causal",
        "-o",
        "bad.dprof",
        "--progress",
        "user:x",
        "--duration",
        "1s",
    ];
    for (args, needle) in [
        (
            &["--units", "lines"][..],
            "invalid value 'lines' for '--units <UNIT>'",
        ),
        (
            &["--units", "modules", "--functions", "tcp_sendmsg"],
            "--units modules contradicts --functions: give one of them",
        ),
        (
            &["--types", "TCP", "--functions", "tcp_sendmsg"],
            "'--types <TYPES>' cannot be used with '--functions <FUNCTIONS>'",
        ),
        (
            &["--units", "functions", "--scope", "tcp_[a-z]*"],
            "`[` cannot be in a glob",
        ),
        (
            &["--units", "functions", "--scope", "[ext4"],
            "a module pattern is [GLOB], closed by `]`",
        ),
        (
            &["--scope", "tcp_*"],
            "--scope `tcp_*` limits functions and modules, not types",
        ),
        (
            &["--units", "functions", "--scope", "no_such_prefix_xyz_*"],
            "--scope `no_such_prefix_xyz_*` matches no kernel function in /proc/kallsyms",
        ),
        (
            &["--functions", "no_such_function_xyz"],
            "no kernel function named `no_such_function_xyz` in /proc/kallsyms",
        ),
        (
            &["--modules", "no_such_module_xyz"],
            "no module named `no_such_module_xyz` in /proc/kallsyms",
        ),
        (
            &["--fixed-speedup", "0"],
            "invalid value '0' for '--fixed-speedup <PERCENT>': 0 is not in 1..=100",
        ),
        (
            &["--fixed-speedup", "101"],
            "invalid value '101' for '--fixed-speedup <PERCENT>': 101 is not in 1..=100",
        ),
    ] {
        let mut all: Vec<&str> = base.to_vec();
        all.extend_from_slice(args);
        assert_refused(dir.path(), &all, needle);
    }
}

/// `dprof ARGS` (which write `bad.dprof`) is refused with clap's usage status (2) and a
/// message holding `needle`, and leaves no profile behind.
fn assert_refused(dir: &std::path::Path, args: &[&str], needle: &str) {
    let out = dprof(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
    assert!(!dir.join("bad.dprof").exists());
    assert!(!dir.join("bad.dprof.partial").exists());
}

/// `--end-to-end`: its mistakes refused before anything is opened, in one sentence, with
/// the usage status (2), and no profile left behind.
#[test]
fn bad_end_to_end_arguments_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (args, needle) in [
        (
            &["--end-to-end", "5", "--progress", "user:x", "--", "true"][..],
            "'--end-to-end <RUNS>' cannot be used with '--progress <POINT>'",
        ),
        (
            &["--end-to-end", "5", "--duration", "1s", "--", "true"],
            "'--end-to-end <RUNS>' cannot be used with '--duration <TIME>'",
        ),
        (
            &["--end-to-end", "5", "--plan-time", "1s", "--", "true"],
            "'--end-to-end <RUNS>' cannot be used with '--plan-time <TIME>'",
        ),
        (
            &["--end-to-end", "1", "--", "true"],
            "invalid value '1' for '--end-to-end <RUNS>': 1 is not in 2..=100000",
        ),
        (
            &["--end-to-end", "5"],
            "--end-to-end runs a command several times, one experiment per run: give it after `--`",
        ),
    ] {
        let mut all = vec!["causal", "-o", "bad.dprof"];
        all.extend_from_slice(args);
        assert_refused(dir.path(), &all, needle);
    }
}

/// `--arrival` and `--arrival-speedup`: their mistakes refused before anything is opened.
#[test]
fn bad_arrival_arguments_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (args, needle) in [
        (
            &[
                "--progress",
                "user:x",
                "--arrival-speedup",
                "250us",
                "--",
                "true",
            ][..],
            "the following required arguments were not provided:\n  --arrival <POINT>",
        ),
        (
            &[
                "--progress",
                "user:x",
                "--arrival",
                "sampled:f",
                "--",
                "true",
            ],
            "an arrival point is a counted point (kprobe, tracepoint or user)",
        ),
        (
            &[
                "--progress",
                "user:x",
                "--arrival",
                "user:a",
                "--arrival-speedup",
                "0",
                "--",
                "true",
            ],
            "\"0\" is zero: an arrival speedup inserts some delay",
        ),
        (
            &["--end-to-end", "5", "--arrival", "user:a", "--", "true"],
            "'--end-to-end <RUNS>' cannot be used with '--arrival <POINT>'",
        ),
    ] {
        let mut all = vec!["causal", "-o", "bad.dprof"];
        all.extend_from_slice(args);
        assert_refused(dir.path(), &all, needle);
    }
}

/// An amplified session: the text view says how much the load was amplified and how, the
/// JSON carries the arrival point and each experiment's arrivals' delay, and Coz's format each
/// experiment's amplification.
#[test]
fn an_amplified_session_says_its_load() {
    let mut config = example::config(
        &[("on_path", 10), ("off_path", 10)],
        &["user:req", "user:arrive"],
        None,
    );
    config.arrival = Some(1);
    config.arrival_delay_ns = 250_000;
    config.fixed_speedup_percent = Some(50);
    let pairs: Vec<u32> = (0..10).flat_map(|_| [0, 50]).chain([0]).collect();
    let mut planned = example::on_and_off_path(example::linear_experiments, &pairs, 0.4, 0.01, 7);
    for p in &mut planned {
        // 400 arrivals of 250 us each: 100 ms of the wall time, on top of the rest.
        p.visits.push((400, p.wall_ns / 2 * 400));
        p.wall_ns += 100_000_000;
        p.delay_ns += 100_000_000;
        p.arrival_delay_ns = 250_000;
    }
    let dir = dir_with(&[("amp.dprof", example::profile_of(&config, &planned))]);
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "amp.dprof", "--view", "causal"],
    ));
    let load = text
        .lines()
        .find(|l| l.starts_with("load: amplified "))
        .unwrap_or_else(|| panic!("no load line: {text}"));
    assert!(
        load.contains("each arrival at user:arrive inserted 250.0 us for every other task"),
        "{load}"
    );
    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "amp.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["arrivals"]["point"], 1, "{json}");
    assert_eq!(v["arrivals"]["delay_per_arrival_ns"], 250_000, "{json}");
    assert_eq!(
        v["experiments"][0]["measured"]["arrival_delay_ns"], 100_000_000,
        "{json}"
    );
    let coz = stdout_of(&dprof(
        dir.path(),
        &["report", "amp.dprof", "--view", "causal", "--format", "coz"],
    ));
    assert!(
        coz.lines()
            .filter(|l| l.starts_with("experiment\t"))
            .all(|l| l.contains("\tamplification=")),
        "{coz}"
    );
}

/// An end-to-end session's view says that each experiment is a run, and ranks the type with
/// the effect first; the JSON carries the runs asked for.
#[test]
fn an_end_to_end_session_says_each_experiment_is_a_run() {
    let (kind, name) = dprof_format::END_TO_END_POINT;
    let mut config = example::config(
        &[("on_path", 10), ("off_path", 10)],
        &[&format!("{kind}:{name}")],
        None,
    );
    config.end_to_end_runs = Some(40);
    let speedups: Vec<u32> = (1..=10).flat_map(|i| [0, 10 * i]).collect();
    let planned = example::on_and_off_path(example::end_to_end_runs, &speedups, 0.3, 0.01, 9);
    let dir = dir_with(&[("e2e.dprof", example::profile_of(&config, &planned))]);
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "e2e.dprof", "--view", "causal"],
    ));
    assert!(
        text.contains(
            "end-to-end (--end-to-end 40): each experiment is one whole run of the command"
        ),
        "{text}"
    );
    let first = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("1"))
        .unwrap_or_default();
    assert!(first.contains("on_path"), "{text}");
    // 2.5 runs per second: a baseline written to the unit would read "2 visits/s".
    assert!(first.contains(" 2.5"), "{first}");
    assert!(first.contains(" visits/s"), "{first}");
    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "e2e.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["end_to_end_runs"], 40, "{json}");
}

#[test]
fn the_view_says_whose_delays_were_kept_and_what_was_credited() {
    let speedups: Vec<u32> = (1..=10).flat_map(|i| [0, 10 * i]).collect();
    let mut planned =
        example::on_and_off_path(example::linear_experiments, &speedups, 0.3, 0.01, 4);
    // 1.5 s credited over two experiments; one of them ran out of task slots.
    planned[1].credited_ns = 1_000_000_000;
    planned[3].credited_ns = 500_000_000;
    planned[3].flags = dprof_abi::EXPERIMENT_TASK_TABLE_FULL;
    let mut config = example::config(
        &[("on_path", 10), ("off_path", 10)],
        &["kprobe:tcp_sendmsg"],
        None,
    );
    let task = example::profile_of(&config, &planned);
    config.delay_accounting = dprof_format::DelayAccounting::Cpu;
    let cpu = example::profile_of(&config, &planned);
    let dir = dir_with(&[("task.dprof", task), ("cpu.dprof", cpu)]);
    let view = |file: &str| stdout_of(&dprof(dir.path(), &["report", file, "--view", "causal"]));
    let text = view("task.dprof");
    assert!(
        text.contains(
            "delays: per task (Coz's rules for threads): a task woken by a timer or an interrupt \
             serves the delays inserted while it slept"
        ),
        "{text}"
    );
    assert!(text.contains("(1500.0 ms credited in all)"), "{text}");
    assert!(
        text.contains(
            "1 experiment kept some tasks' delays per CPU: the module's task table was full"
        ),
        "{text}"
    );
    let text = view("cpu.dprof");
    assert!(
        text.contains(
            "delays: per CPU (--delay-accounting cpu): a CPU found idle is credited with what it \
             owes (1500.0 ms in all)"
        ),
        "{text}"
    );
    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "task.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["delay_accounting"], "task", "{json}");
    let full: Vec<bool> = v["experiments"]
        .as_array()
        .expect("experiments")
        .iter()
        .map(|e| e["measured"]["task_table_full"] == true)
        .collect();
    assert_eq!(full.iter().filter(|&&f| f).count(), 1, "{json}");
    assert!(full[3], "{json}");
    // The record itself, in `dprof dump`.
    let dump = stdout_of(&dprof(dir.path(), &["dump", "task.dprof"]));
    let flagged: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains(" task_table_full"))
        .collect();
    assert_eq!(flagged.len(), 1, "{dump}");
    assert!(flagged[0].contains("credited_ns=500000000"), "{dump}");
}

/// Experiments whose pauses stopped at the module's cap with debt left are counted and
/// warned about in the text, the JSON and `dprof dump`; one capped pause alone is not.
#[test]
fn the_view_warns_when_tasks_fell_behind_their_delays() {
    let speedups: Vec<u32> = (1..=10).flat_map(|i| [0, 10 * i]).collect();
    let mut planned =
        example::on_and_off_path(example::linear_experiments, &speedups, 0.3, 0.01, 4);
    // The fixture's experiments take 10 samples per type sample.
    let samples = planned[1].type_samples * 10;
    planned[1].capped_pauses = (samples / 4, 42_000_000);
    planned[3].capped_pauses = (samples / 10, 7_000_000);
    // Below both thresholds: a task first seen late serves its debt in one capped pause.
    planned[5].capped_pauses = (1, 90_000_000);
    let config = example::config(
        &[("on_path", 10), ("off_path", 10)],
        &["kprobe:tcp_sendmsg"],
        None,
    );
    let behind = example::profile_of(&config, &planned);
    for p in &mut planned {
        p.capped_pauses = (0, 0);
    }
    let kept_up = example::profile_of(&config, &planned);
    let dir = dir_with(&[("behind.dprof", behind), ("kept-up.dprof", kept_up)]);
    let view = |file: &str| stdout_of(&dprof(dir.path(), &["report", file, "--view", "causal"]));
    let text = view("behind.dprof");
    let usable = planned.len();
    let want = format!(
        "warning: tasks fell behind their delays in 2 of {usable} usable experiments ({} pauses \
         stopped at the 5 ms cap with more owed, up to 42.0 ms)",
        samples / 4 + samples / 10
    );
    assert!(text.contains(&want), "{want}\n{text}");
    assert!(
        text.contains("a shorter --period gives more pauses"),
        "{text}"
    );
    assert!(!view("kept-up.dprof").contains("fell behind"));
    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "behind.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["fell_behind"]["experiments"], 2, "{json}");
    assert_eq!(v["fell_behind"]["max_owed_ns"], 42_000_000, "{json}");
    assert_eq!(
        v["experiments"][5]["measured"]["capped_pauses"], 1,
        "{json}"
    );
    let dump = stdout_of(&dprof(dir.path(), &["dump", "behind.dprof"]));
    let capped: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains(" capped_pauses="))
        .collect();
    assert_eq!(capped.len(), 3, "{dump}");
    assert!(
        capped[0].contains("max_owed_after_pause_ns=42000000"),
        "{dump}"
    );
}

#[test]
fn an_unknown_delay_accounting_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_refused(
        dir.path(),
        &[
            "causal",
            "-o",
            "bad.dprof",
            "--delay-accounting",
            "thread",
            "--",
            "true",
        ],
        "invalid value 'thread' for '--delay-accounting <WHOSE>'",
    );
}

/// A session whose module counted samples outside `--scope` for their callers in it says so,
/// with the scope, in the text and the JSON; one whose module did not says nothing of it.
#[test]
fn the_view_says_when_helpers_were_counted_for_their_callers_in_scope() {
    let mut config = example::functions_config();
    config.callers_in_scope = true;
    let planned = example::example_planned();
    let dir = dir_with(&[
        ("callers.dprof", example::profile_of(&config, &planned)),
        ("own.dprof", example::functions_profile()),
    ]);
    let view = |file: &str| stdout_of(&dprof(dir.path(), &["report", file, "--view", "causal"]));
    let text = view("callers.dprof");
    assert!(
        text.contains(
            "scope: tcp_*,copy_*,[ext4]: a kernel sample outside it counted for the first \
             function in it on its call chain (up to 32 frames up), so a helper's time went to \
             its caller in scope"
        ),
        "{text}"
    );
    assert!(!view("own.dprof").contains("call chain"));
    let json = stdout_of(&dprof(
        dir.path(),
        &["report", "callers.dprof", "--view", "causal", "--json"],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        v["callers_in_scope"],
        serde_json::json!(["tcp_*", "copy_*", "[ext4]"]),
        "{json}"
    );
}
