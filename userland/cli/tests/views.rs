//! `dprof report --view misses` and `--view working-set` end to end on the library's views
//! example (`dprof_fixtures::views`): golden text and CSV, JSON, `--cache`, and the errors a
//! person meets. `DPROF_BLESS=1 cargo test -p dprof-cli --test views` rewrites the golden
//! files under tests/golden/.

#[path = "support/cli_test.rs"]
#[expect(
    dead_code,
    reason = "helpers shared by the CLI tests; this file needs only some"
)]
mod support;

use support::{dir_with, dprof, golden, one_line_error, stdout_of, steady_json};

use dprof_fixtures::views as example;

fn example_dir() -> tempfile::TempDir {
    dir_with(&[
        ("v.dprof", example::profile()),
        ("nogeo.dprof", example::profile_with(2, Vec::new())),
        ("dp.dprof", dprof_fixtures::data_profile::profile()),
    ])
}

/// The simulation's time and throughput vary from run to run: replaced for golden files.
fn without_timing(text: &str) -> String {
    text.lines()
        .map(|line| match line.find(" accesses in ") {
            Some(at) if line.starts_with("simulation: ") => {
                let seed = line.find(" (seed").map_or("", |s| &line[s..]);
                format!("{} accesses in T s: R M accesses/s{seed}", &line[..at])
            }
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn json(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let text = stdout_of(&dprof(dir, args));
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn misses_text() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "v.dprof", "--view", "misses"],
    ));
    assert!(
        text.contains("inferred: the software sampler has no miss bits"),
        "{text}"
    );
    golden("misses.txt", &text);
}

#[test]
fn misses_of_one_type_show_the_evidence() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "misses",
            "--type",
            example::PAIR,
        ],
    ));
    let squeezed = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        squeezed(&text).contains("false sharing 1 vw_write_a +0x0/8 0 vw_write_b +0x8/8 1"),
        "{text}"
    );
    assert!(
        squeezed(&text).contains("true sharing 1 vw_write_a +0x0/8 1 vw_read_a +0x0/8 0"),
        "{text}"
    );
    golden("misses_type.txt", &text);
    let page = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "misses",
            "--type",
            example::PAGE,
        ],
    ));
    assert!(
        page.contains(
            "conflict at L1d: 8 flagged sets (0, 64, 128, 192, 256, 320, 384, 448) hold 32 of \
             its lines; 32.0 samples there"
        ),
        "{page}"
    );
    let small = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "misses",
            "--type",
            example::SMALL,
        ],
    ));
    assert!(small.contains("2 samples: cannot tell 100.0%"), "{small}");
    assert!(
        small.contains("Cannot tell: the line holds a neighbour object too"),
        "{small}"
    );
}

#[test]
fn working_set_text() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "v.dprof", "--view", "working-set"],
    ));
    assert!(text.contains("vw_page"), "{text}");
    golden("working_set.txt", &without_timing(&text));
    let one = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "working-set",
            "--type",
            example::PAGE,
        ],
    ));
    assert!(
        one.contains("flagged sets: 0, 64, 128, 192, 256, 320, 384, 448"),
        "{one}"
    );
    golden("working_set_type.txt", &without_timing(&one));
}

#[test]
fn working_set_histograms_as_csv() {
    let dir = example_dir();
    let csv = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "working-set",
            "--format",
            "csv",
        ],
    ));
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("type,level,lines_per_set,sets,flagged"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 5));
    let page_l1: Vec<&Vec<&str>> = rows
        .iter()
        .filter(|r| r[0] == example::PAGE && r[1] == "L1d")
        .collect();
    assert_eq!(
        page_l1,
        [
            &vec!["vw_page", "L1d", "0", "504", "no"],
            &vec!["vw_page", "L1d", "4", "8", "yes"]
        ]
    );
    // Every type's buckets add up to the level's sets.
    for (name, level, sets) in [(example::SWEEP, "L2", 512), (example::PAIR, "L3", 16384)] {
        let sum: u64 = rows
            .iter()
            .filter(|r| r[0] == name && r[1] == level)
            .map(|r| r[3].parse::<u64>().expect("number"))
            .sum();
        assert_eq!(sum, sets, "{name} {level}");
    }
    golden("working_set.csv", &csv);
    let one = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "working-set",
            "--format",
            "csv",
            "--type",
            example::SWEEP,
        ],
    ));
    assert!(
        one.lines().skip(1).all(|l| l.starts_with("vw_sweep,")),
        "{one}"
    );
}

fn shared_sets_dir() -> tempfile::TempDir {
    dir_with(&[("s.dprof", dprof_fixtures::shared_sets::profile())])
}

/// The shared-sets example: the 8 L1d sets its two page-aligned types share come first, each
/// with both types, their objects and sites; `--top` caps the sets with a line saying how to
/// see the rest.
#[test]
fn working_set_by_set_text() {
    let dir = shared_sets_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "s.dprof", "--view", "working-set", "--by-set"],
    ));
    let squeezed: Vec<String> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let at = |needle: &str| {
        squeezed
            .iter()
            .position(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("{needle}: {text}"))
    };
    let l1 = at("L1d sets at the level's peak");
    assert!(squeezed[l1].ends_with("2 ways; 8 conflicted"), "{text}");
    assert_eq!(
        squeezed[l1 + 2],
        "0 4 conflicted ss_page 2 2 ss_page_alloc 2",
        "{text}"
    );
    assert_eq!(
        squeezed[l1 + 3],
        "ss_skb 2 2 ss_send_ack 1, ss_send_fin 1",
        "{text}"
    );
    assert_eq!(
        squeezed[l1 + 4],
        "64 4 conflicted ss_page 2 2 ss_page_alloc 2",
        "{text}"
    );
    // 8 shared sets and 2 of the 63 spread ones: 10 per level by default.
    assert!(
        squeezed.contains(
            &"... 61 more sets (--top N shows more; --json and --format csv have them all)"
                .to_owned()
        ),
        "{text}"
    );
    assert!(
        squeezed.contains(&"ss_skb from ss_send_fin: path 1 (1 history, 50.0%): ss_send_fin > vw_write_a > vw_free".to_owned())
            || squeezed.contains(&"ss_skb from ss_send_fin: path 2 (1 history, 50.0%): ss_send_fin > vw_write_a > vw_free".to_owned()),
        "{text}"
    );
    golden("working_set_by_set.txt", &without_timing(&text));
    let few = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "s.dprof",
            "--view",
            "working-set",
            "--by-set",
            "--top",
            "2",
            "--type",
            dprof_fixtures::shared_sets::SPREAD,
        ],
    ));
    assert!(few.contains("... 61 more sets (--top N"), "{few}");
    assert!(!few.contains("ss_page_alloc"), "{few}");
    // The views example: the sweep fills every L1d set, so no set is conflicted for all types
    // together, but the pages' own histogram flags the sets of their stride, which lead.
    let example = example_dir();
    let pages = stdout_of(&dprof(
        example.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "working-set",
            "--by-set",
            "--top",
            "1",
        ],
    ));
    let squeezed: Vec<String> = pages
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert!(
        squeezed.contains(&"0 8 vw_page 4 4 flagged vw_alloc 4".to_owned()),
        "{pages}"
    );
    assert!(
        squeezed.contains(&"vw_sweep 4 4 vw_alloc 4".to_owned()),
        "{pages}"
    );
}

#[test]
fn working_set_by_set_as_csv() {
    let dir = shared_sets_dir();
    let csv = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "s.dprof",
            "--view",
            "working-set",
            "--by-set",
            "--format",
            "csv",
        ],
    ));
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("level,set,set_lines,conflicted,type,objects,type_lines,type_flagged,site,site_objects,paths")
    );
    let rows: Vec<&str> = lines.collect();
    // L1d: 8 shared sets x (1 page site + 2 skb sites) + 63 spread sets; as many in L2; L3
    // has 95 sets of one object each.
    assert_eq!(rows.len(), 2 * (8 * 3 + 63) + 95, "{csv}");
    assert_eq!(rows[0], "L1d,0,4,yes,ss_page,2,2,no,ss_page_alloc,2,");
    assert!(
        rows[1].starts_with("L1d,0,4,yes,ss_skb,2,2,no,ss_send_ack,1,")
            && rows[1].ends_with(":ss_send_ack > vw_read_a > vw_free"),
        "{csv}"
    );
    assert_eq!(rows[24], "L1d,1,1,no,ss_spread,1,1,no,ss_spread_alloc,1,");
    golden("working_set_by_set.csv", &csv);
}

#[test]
fn by_set_goes_with_the_working_set_view() {
    let dir = shared_sets_dir();
    let out = dprof(dir.path(), &["report", "s.dprof", "--by-set"]);
    assert_eq!(
        one_line_error(&out),
        "dprof: error: --by-set goes with --view working-set\n"
    );
}

#[test]
fn json_has_both_views_and_type_narrows_them() {
    let dir = example_dir();
    let text = stdout_of(&dprof(dir.path(), &["report", "v.dprof", "--json"]));
    let all: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    // The golden file keeps the first sets of each level: hundreds are listed.
    let mut shown: serde_json::Value =
        serde_json::from_str(&steady_json(&text)).expect("valid JSON");
    for level in shown["working_set"]["by_set"]
        .as_array_mut()
        .expect("by_set")
    {
        level["occupied"]
            .as_array_mut()
            .expect("occupied")
            .truncate(3);
    }
    golden(
        "views.json",
        &(serde_json::to_string_pretty(&shown).expect("serializes") + "\n"),
    );
    assert_eq!(
        all["working_set"]["by_set"][2]["occupied"]
            .as_array()
            .map(Vec::len),
        Some(256)
    );
    assert_eq!(all["misses"]["inferred"], true);
    assert_eq!(all["misses"]["types"].as_array().map(Vec::len), Some(4));
    assert_eq!(
        all["working_set"]["times_ns"].as_array().map(Vec::len),
        Some(100)
    );
    let pair = json(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "misses",
            "--json",
            "--type",
            example::PAIR,
        ],
    );
    let types = pair["misses"]["types"].as_array().expect("types");
    assert_eq!(types.len(), 1);
    assert_eq!(types[0]["name"], example::PAIR);
    assert_eq!(types[0]["dominant"], "false_sharing");
    let classes: Vec<&str> = types[0]["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .filter_map(|c| c["class"].as_str())
        .collect();
    assert_eq!(
        classes,
        [
            "true_sharing",
            "false_sharing",
            "conflict",
            "capacity",
            "cannot_tell",
            "unclassified"
        ]
    );
    let ws = json(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "working-set",
            "--json",
            "--type",
            example::SWEEP,
        ],
    );
    assert_eq!(ws["working_set"]["types"].as_array().map(Vec::len), Some(1));
    assert_eq!(ws["working_set"]["types"][0]["peak_objects"], 2048);
    assert_eq!(ws["working_set"]["simulation"]["objects"], 2083);
}

#[test]
fn cache_overrides_change_the_answer_and_are_labelled() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "misses",
            "--type",
            example::PAGE,
            "--cache",
            "L1d=256K/8/64",
        ],
    ));
    assert!(
        text.contains("caches: L1d 256 KiB 8-way, 64-byte lines, 512 sets (per CPU, --cache); L2"),
        "{text}"
    );
    assert!(
        text.contains("conflict: no set flagged at any level"),
        "{text}"
    );
    let v = json(
        dir.path(),
        &["report", "v.dprof", "--json", "--cache", "L2=1M/8/64"],
    );
    assert_eq!(v["working_set"]["geometry"][1]["source"], "override");
    assert_eq!(v["working_set"]["geometry"][1]["sets"], 2048);
    let sims = json(
        dir.path(),
        &["report", "v.dprof", "--json", "--sim-objects", "100"],
    );
    // The largest 1/2^k of the 2083 objects within 100.
    assert_eq!(sims["working_set"]["simulation"]["objects"], 65);
}

#[test]
fn a_profile_without_geometry_says_so() {
    let dir = example_dir();
    let out = dprof(
        dir.path(),
        &["report", "nogeo.dprof", "--view", "working-set"],
    );
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("dprof: warning: the profile gives no usable cache geometry"),
        "{stderr}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("caches: none known (--cache gives them)"),
        "{text}"
    );
    assert!(
        text.contains(
            "no cache geometry: conflict, capacity, histograms and the simulation are empty"
        ),
        "{text}"
    );
    let csv = dprof(
        dir.path(),
        &[
            "report",
            "nogeo.dprof",
            "--view",
            "working-set",
            "--format",
            "csv",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&csv.stdout),
        "type,level,lines_per_set,sets,flagged\n"
    );
}

#[test]
fn bad_arguments_are_one_clear_line() {
    let dir = example_dir();
    let err = one_line_error(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "misses",
            "--cache",
            "L1d=50K/12/64",
        ],
    ));
    assert_eq!(
        err,
        "dprof: error: --cache: \"L1d=50K/12/64\": 51200 bytes is not a multiple of 12 ways x \
         64-byte lines\n"
    );
    let err = one_line_error(&dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "misses",
            "--cache",
            "L1i=32K/8/64",
        ],
    ));
    assert!(err.contains("unknown cache \"L1i\""), "{err}");
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "v.dprof", "--format", "csv"],
    ));
    assert_eq!(
        err,
        "dprof: error: --format csv goes with --view working-set\n"
    );
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "v.dprof", "--cache", "L1d=48K/12/64"],
    ));
    assert_eq!(
        err,
        "dprof: error: --cache goes with --view misses, --view working-set or --json\n"
    );
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "v.dprof", "--view", "misses", "--type", "vw_nope"],
    ));
    assert_eq!(
        err,
        "dprof: error: no type \"vw_nope\" in the miss classification; types there: vw_sweep, \
         vw_page, vw_pair, vw_small\n"
    );
    // Clap's own errors (exit status 2) name the option.
    let out = dprof(
        dir.path(),
        &[
            "report",
            "v.dprof",
            "--view",
            "working-set",
            "--sim-objects",
            "0",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("'--sim-objects <N>'"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn help_explains_the_views_and_the_cache_syntax() {
    let dir = example_dir();
    let help = stdout_of(&dprof(dir.path(), &["report", "--help"]));
    for needle in [
        "--view misses classifies",
        "--view working-set shows",
        "NAME=SIZE/WAYS/LINE",
        "L1d=48K/12/64,L2=2M/16/64",
        "--sim-objects <N>",
        "--format csv prints the histograms",
        "--view working-set --by-set shows",
        "--by-set",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

#[test]
fn a_profile_without_slab_objects_has_empty_views() {
    let dir = example_dir();
    // The data-profile example has slab objects but no histories: no sharing can be seen.
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--view", "misses"],
    ));
    assert!(
        text.contains("no object access histories (collect --histories)"),
        "{text}"
    );
}
