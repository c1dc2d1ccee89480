//! `dprof report --view data-flow` end to end on the library's history example
//! (`dprof_fixtures::histories`): golden text and DOT, JSON, and the errors a person meets.
//! `DPROF_BLESS=1 cargo test -p dprof-cli --test data_flow` rewrites the golden files under
//! tests/golden/.

#[path = "support/cli_test.rs"]
#[expect(
    dead_code,
    reason = "helpers shared by the CLI tests; this file needs only some"
)]
mod support;

use support::{dir_with, dprof, golden, one_line_error, stdout_of};

use dprof_fixtures::histories as example;

fn example_dir() -> tempfile::TempDir {
    dir_with(&[
        ("h.dprof", example::profile()),
        ("hb.dprof", example::profile_with_btf()),
        ("elsewhere.dprof", example::freed_elsewhere_profile()),
        ("timeout.dprof", example::timed_out_profile()),
        ("dp.dprof", dprof_fixtures::data_profile::profile()),
        (
            "full.dprof",
            dprof_fixtures::full_histories::profile_with_btf(),
        ),
    ])
}

/// `dprof report full.dprof --view data-flow --type fc_obj ARGS`: the type watched over its
/// whole object (`dprof_fixtures::full_histories`).
fn fc_obj_flow(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "report",
        "full.dprof",
        "--view",
        "data-flow",
        "--type",
        "fc_obj",
    ];
    all.extend(args);
    dprof(dir, &all)
}

/// A type watched over its whole object: its sets, the convergence curve, the cost per round
/// and the merged paths in place of the pairwise path traces.
#[test]
fn whole_object_text() {
    let dir = example_dir();
    let text = stdout_of(&fc_obj_flow(dir.path(), &[]));
    assert!(
        text.contains(
            "Whole object (--histories full): 5 history sets of 6 targets, 4 chunks of 32 bytes \
             (+0x0/8 +0x8/8 +0x10/8 +0x18/8)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "distinct paths after 1..5 sets: 1 1 1 2 2; no new path in the last 1 sets\n"
        ),
        "{text}"
    );
    assert!(text.contains("merge: 1 of 30 histories left out"), "{text}");
    assert!(
        text.contains("Merged path 1: 4 sets (80.0%), fc_alloc to fc_free"),
        "{text}"
    );
    // Each merged step says what the samples of its instruction and chunk saw: with the
    // software sampler, no outcome.
    assert!(
        text.contains(
            "==cpu==>      1000 ns  fc_use+0x0        +0x10/8 data  read      1  1 samples, no \
             miss data (software sampler)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("      1100 ns  fc_use+0x4        +0x18/8 len   read      1  -\n"),
        "{text}"
    );
    // The merged paths stand in for the pairwise path traces, which one line counts.
    assert!(!text.contains("Path 1:"), "{text}");
    assert!(
        text.contains(
            "13 path traces, each the part of the path one target's chunks saw, are merged \
             below; --json lists them (paths)\n"
        ),
        "{text}"
    );
    golden("data_flow_full.txt", &text);
}

/// `--json` is the model: the merged paths, the curve and the costs under `full`.
#[test]
fn whole_object_json() {
    let dir = example_dir();
    let json = stdout_of(&fc_obj_flow(dir.path(), &["--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let full = &v["full"];
    assert_eq!(full["sets"], 5);
    assert_eq!(full["rounds"], 5);
    assert_eq!(full["incomplete_rounds"], 1);
    assert_eq!(full["unmatched_histories"], 5);
    assert_eq!(full["unmerged_histories"], 1);
    assert_eq!(
        full["distinct_paths_after"],
        serde_json::json!([1, 1, 1, 2, 2])
    );
    assert_eq!(full["last_new_path_at"], 4);
    assert_eq!(full["total_cost"]["histories"], 37);
    assert_eq!(full["cost"][1]["histories"], 7);
    assert_eq!(full["cost"][5]["complete"], false);
    let steps = &full["paths"][0]["steps"];
    let order: Vec<(String, String, u64)> = steps
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["function"].as_str().unwrap_or_default().to_owned(),
                s["field"].as_str().unwrap_or_default().to_owned(),
                s["cpu"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect();
    let step = |f: &str, field: &str, cpu| (f.to_owned(), field.to_owned(), cpu);
    assert_eq!(
        order,
        vec![
            step("fc_fill", "head", 0),
            step("fc_fill", "data", 0),
            step("fc_use", "data", 1),
            step("fc_use", "len", 1),
        ]
    );
    assert_eq!(steps[2]["cpu_change"], true);
    // What the samples of a step's instruction and chunk say; absent where none matched.
    assert_eq!(steps[0]["sampled"]["samples"], 2);
    assert_eq!(steps[0]["sampled"]["misses"], serde_json::Value::Null);
    assert!(steps[1].get("sampled").is_none(), "{}", steps[1]);
    // A type collected without `full` has none.
    // The pairwise path traces the text leaves out are all here.
    assert_eq!(v["paths"].as_array().map(Vec::len), Some(13));
    let pairwise = stdout_of(&st_obj_flow(dir.path(), "hb.dprof", &["--json"]));
    assert!(!pairwise.contains("\"full\""), "{pairwise}");
}

/// `dprof report FILE --view data-flow --type st_obj ARGS`.
fn st_obj_flow(dir: &std::path::Path, file: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["report", file, "--view", "data-flow", "--type", "st_obj"];
    all.extend(args);
    dprof(dir, &all)
}

/// The text of the profile whose BTF names the watched fields.
#[test]
fn data_flow_text() {
    let dir = example_dir();
    let text = stdout_of(&st_obj_flow(dir.path(), "hb.dprof", &[]));
    assert!(text.contains("st_producer"), "{text}");
    assert!(
        text.contains("  ==cpu==> st_consumer  2 (2 CPU changes)"),
        "{text}"
    );
    assert!(
        text.contains(", 2 CPU changes from alloc to free\n"),
        "{text}"
    );
    assert!(
        text.contains("  fields: +0x10/8 payload (W 2), +0x18/4 len (R 3)"),
        "{text}"
    );
    assert!(
        text.contains("field order: +0x10/8 payload before +0x18/4 len"),
        "{text}"
    );
    assert!(text.contains("st_producer+0x8   +0x18/4 len"), "{text}");
    golden("data_flow.txt", &text);
}

/// Without debug info the same view shows the offsets alone.
#[test]
fn without_field_names_the_offsets_stand_alone() {
    let dir = example_dir();
    let text = stdout_of(&st_obj_flow(dir.path(), "h.dprof", &[]));
    assert!(
        text.contains("  fields: +0x10/8 (W 2), +0x18/4 (R 3)"),
        "{text}"
    );
    assert!(!text.contains("payload"), "{text}");
}

/// An object freed on another CPU than its last access: the header, the edge, the JSON and
/// the DOT graph count that CPU change alike (the header once said 0).
#[test]
fn every_format_counts_the_same_cpu_changes() {
    let dir = example_dir();
    let text = stdout_of(&st_obj_flow(dir.path(), "elsewhere.dprof", &[]));
    assert!(
        text.starts_with(
            "Data flow of st_obj: 2 histories (2 alloc to free), 3 hits, 1 CPU changes from \
             alloc to free\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  ==cpu==> st_free  1 (1 CPU changes)"),
        "{text}"
    );
    let json = stdout_of(&st_obj_flow(dir.path(), "elsewhere.dprof", &["--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(v["data_flow"]["cpu_changes"], 1);
    let on_edges: u64 = v["data_flow"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .filter_map(|e| e["cpu_changes"].as_u64())
        .sum();
    assert_eq!(on_edges, 1);
    let dot = stdout_of(&st_obj_flow(
        dir.path(),
        "elsewhere.dprof",
        &["--format", "dot"],
    ));
    assert!(
        dot.contains("label=\"st_obj: 2 histories, 1 CPU changes\";"),
        "{dot}"
    );
    assert!(dot.contains("(1 CPU changes)\", color=red"), "{dot}");
}

/// `st_free` frees one object and hands another on to `st_consumer`: only `st_consumer` is
/// pinned to the bottom of the DOT graph, so the step out of `st_free` points down.
#[test]
fn dot_pins_to_the_bottom_only_the_free_nodes_no_step_leaves() {
    let dir = example_dir();
    let dot = stdout_of(&st_obj_flow(
        dir.path(),
        "elsewhere.dprof",
        &["--format", "dot"],
    ));
    let id = |function: &str| {
        dot.lines()
            .find(|l| l.contains(&format!("[label=\"{function}\\n")))
            .and_then(|l| l.split_whitespace().next())
            .map_or_else(|| panic!("no node {function}: {dot}"), str::to_owned)
    };
    let sinks = dot
        .lines()
        .find(|l| l.contains("rank=sink"))
        .unwrap_or_else(|| panic!("no sink: {dot}"));
    assert_eq!(sinks, format!("  {{ rank=sink; {}; }}", id("st_consumer")));
    assert!(
        dot.contains(&format!("{} -> {}", id("st_free"), id("st_consumer"))),
        "{dot}"
    );
}

/// A type with a history but none from allocation to free: every format says there is no
/// data flow and why; the DOT graph is a note (so that `dot -Tsvg` draws the reason), with a
/// warning on standard error, and the exit status is 0 as for the text.
#[test]
fn a_type_whose_only_history_timed_out_says_so_in_every_format() {
    let dir = example_dir();
    let why = "no history of st_obj ran from allocation to free (1 timed out): no data flow \
               (collect longer, or with a longer --history-timeout)";
    let text = stdout_of(&st_obj_flow(dir.path(), "timeout.dprof", &[]));
    assert!(text.ends_with(&format!("\n{why}\n")), "{text}");

    let json = stdout_of(&st_obj_flow(dir.path(), "timeout.dprof", &["--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(v["data_flow"]["why_empty"]["reason"], "no_complete_history");
    assert_eq!(v["data_flow"]["why_empty"]["message"], why);

    let out = st_obj_flow(dir.path(), "timeout.dprof", &["--format", "dot"]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(stderr, format!("dprof: warning: {why}\n"));
    let dot = String::from_utf8(out.stdout).expect("utf-8");
    assert!(dot.starts_with("digraph data_flow {\n"), "{dot}");
    assert!(dot.contains("label=\"st_obj: no data flow\";"), "{dot}");
    assert!(dot.contains("shape=note"), "{dot}");
    assert!(dot.contains(why), "{dot}");
    assert!(!dot.contains("0 histories"), "{dot}");
}

#[test]
fn without_a_type_the_type_with_most_histories_is_shown_and_named() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &["report", "h.dprof", "--view", "data-flow"],
    ));
    assert!(
        text.starts_with(
            "(st_obj is the type with the most histories (4); --type NAME shows another)\n"
        ),
        "{text}"
    );
    let dot = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "h.dprof",
            "--view",
            "data-flow",
            "--format",
            "dot",
        ],
    ));
    assert!(
        dot.starts_with("// st_obj is the type with the most histories"),
        "{dot}"
    );
}

/// A type watched over its whole object: the DOT graph draws its merged paths beside the
/// functions.
#[test]
fn whole_object_dot() {
    let dir = example_dir();
    let dot = stdout_of(&fc_obj_flow(dir.path(), &["--format", "dot"]));
    assert!(dot.contains("subgraph cluster_merged1 {"), "{dot}");
    assert!(dot.contains("subgraph cluster_merged2 {"), "{dot}");
    assert!(
        dot.contains("m1_1 -> m1_2 [label=\"cpu 0 to 1\", color=red, penwidth=3];"),
        "{dot}"
    );
    golden("data_flow_full.dot", &dot);
}

#[test]
fn data_flow_dot() {
    let dir = example_dir();
    let dot = stdout_of(&st_obj_flow(dir.path(), "hb.dprof", &["--format", "dot"]));
    assert!(dot.starts_with("digraph data_flow {"), "{dot}");
    assert!(dot.contains("+0x10/8 payload (W 2)\\l"), "{dot}");
    golden("data_flow.dot", &dot);
}

#[test]
fn data_flow_json() {
    let dir = example_dir();
    let text = stdout_of(&dprof(
        dir.path(),
        &[
            "report",
            "h.dprof",
            "--view",
            "data-flow",
            "--type",
            "st_obj",
            "--json",
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["name"], "st_obj");
    assert_eq!(v["histories"], 4);
    assert_eq!(v["complete"], 3);
    assert_eq!(v["convergence"]["last_new_path_at"], 3);
    assert_eq!(v["paths"][0]["histories"], 2);
    let edges = v["data_flow"]["edges"].as_array().expect("edges");
    let cpu: Vec<(&str, &str)> = edges
        .iter()
        .filter(|e| e["cpu_changes"].as_u64() > Some(0))
        .map(|e| {
            (
                e["from"].as_str().unwrap_or(""),
                e["to"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(cpu, vec![("st_producer", "st_consumer")]);
    assert_eq!(v["data_flow"]["cpu_changes"], 2);
    assert!(v.get("cpu_changes").is_none(), "one count, the data flow's");
    // With the struct's BTF, the ranges name their fields beside their offsets.
    let named = stdout_of(&st_obj_flow(dir.path(), "hb.dprof", &["--json"]));
    let n: serde_json::Value = serde_json::from_str(&named).expect("valid JSON");
    let element = &n["paths"][0]["elements"][2];
    assert_eq!(
        (&element["range"]["offset"], &element["field"]),
        (&0x18.into(), &"len".into())
    );
    assert_eq!(n["field_orders"][0]["first_field"], "payload");
    let producer = n["data_flow"]["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|x| x["function"] == "st_producer"))
        .expect("st_producer");
    assert_eq!(producer["ranges"][1]["field"], "len");
    assert_eq!(producer["ranges"][1]["reads"], 3);
    assert!(v["paths"][0]["elements"][2]["field"].is_null());
    // The whole report carries the same section.
    let whole = stdout_of(&dprof(dir.path(), &["report", "h.dprof", "--json"]));
    let w: serde_json::Value = serde_json::from_str(&whole).expect("valid JSON");
    assert_eq!(w["histories"]["types"][0]["name"], "st_obj");
    assert_eq!(w["histories"]["checks"]["verified"], 15);
}

#[test]
fn no_histories_is_an_error_that_says_what_to_do() {
    let dir = example_dir();
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "dp.dprof", "--view", "data-flow"],
    ));
    assert!(
        err.contains("no histories collected: run dprof collect --histories"),
        "{err}"
    );
    // The data profile of a profile without histories has no histories section.
    let whole = stdout_of(&dprof(dir.path(), &["report", "dp.dprof", "--json"]));
    let w: serde_json::Value = serde_json::from_str(&whole).expect("valid JSON");
    assert!(w.get("histories").is_none());
}

#[test]
fn an_unknown_type_lists_the_types_with_histories() {
    let dir = example_dir();
    let err = one_line_error(&dprof(
        dir.path(),
        &[
            "report",
            "h.dprof",
            "--view",
            "data-flow",
            "--type",
            "skbuff_head_cache",
        ],
    ));
    assert!(
        err.contains("no histories of type \"skbuff_head_cache\" in the profile; types with histories: st_obj (4)"),
        "{err}"
    );
}

#[test]
fn dot_needs_the_data_flow_view() {
    let dir = example_dir();
    let err = one_line_error(&dprof(
        dir.path(),
        &["report", "h.dprof", "--format", "dot"],
    ));
    assert!(
        err.contains("--format dot goes with --view data-flow"),
        "{err}"
    );
}

/// `--top N` bounds the cost table's rounds and the merged paths, and says how many more there
/// are; the totals stay.
#[test]
fn whole_object_top_bounds_sets_and_merged_paths() {
    let dir = example_dir();
    let text = stdout_of(&fc_obj_flow(dir.path(), &["--top", "1"]));
    assert!(
        text.contains("... 5 more rounds (--top N shows more)\n"),
        "{text}"
    );
    assert!(
        text.contains("... 1 more merged paths (--top N shows more)\n"),
        "{text}"
    );
    assert!(text.contains("\ntotal "), "{text}");
    assert!(!text.contains("Merged path 2"), "{text}");
}
