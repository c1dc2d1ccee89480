use dprof_analysis::pipeline::{AccessStats, Analyzer, Options, SampledAccesses};
use dprof_analysis::symbols::Kallsyms;
use dprof_fixtures::data_profile as example;
use dprof_model::{TypeKind, TypeProfile};

use super::*;

fn point(kind: &str, name: &str) -> ProgressPointSpec {
    ProgressPointSpec {
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

#[test]
fn progress_points_parse_by_kind_and_refuse_the_rest() {
    assert_eq!(
        parse_point("kprobe:udp_sendmsg"),
        Ok(point("kprobe", "udp_sendmsg"))
    );
    let tp = parse_point("tracepoint:net:net_dev_xmit").expect("a tracepoint");
    assert_eq!(tp, point("tracepoint", "net:net_dev_xmit"));
    // The module looks tracepoints up by event name.
    let symbols = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let module = |spec: &ProgressPointSpec| module_point(spec, &symbols).expect("resolves");
    assert_eq!(module(&tp).name_bytes(), b"net_dev_xmit");
    assert_eq!(module(&tp).kind, dprof_abi::PROGRESS_TRACEPOINT);
    assert_eq!(module(&point("user", "req")).kind, dprof_abi::PROGRESS_USER);
    assert_eq!(
        parse_point("sampled:tcp_sendmsg"),
        Ok(point("sampled", "tcp_sendmsg"))
    );
    for (bad, why) in [
        ("udp_sendmsg", "is not KIND:NAME"),
        ("sampled", "sampled:FUNCTION"),
        ("sampled:", "printable ASCII"),
        ("uprobe:foo", "unknown progress point kind `uprobe`"),
        ("user:", "printable ASCII"),
        ("user:two words", "printable ASCII"),
        ("tracepoint:net:", "printable ASCII"),
    ] {
        let err = parse_point(bad).expect_err(bad);
        assert!(err.contains(why), "{bad}: {err}");
    }
    let long = format!("user:{}", "x".repeat(dprof_abi::PROGRESS_NAME_BYTES));
    assert!(parse_point(&long)
        .expect_err("too long")
        .contains("longer than 63"));
}

/// A sampled point is its function's code, up to the next symbol, in the core kernel or a
/// module; a function kallsyms lacks, or has twice, is refused before anything is opened.
#[test]
fn sampled_points_resolve_to_their_function_or_are_refused() {
    let text = format!(
        "{}ffffffff81700000 t tcp_sendmsg\nffffffff81701000 T _etext\n",
        example::profiler_kallsyms()
    );
    let symbols = Kallsyms::parse(text.as_bytes());
    let sampled = module_point(&point("sampled", "tcp_recvmsg"), &symbols).expect("resolves");
    assert_eq!(sampled.kind, dprof_abi::PROGRESS_SAMPLED);
    assert_eq!(sampled.name_bytes(), b"tcp_recvmsg");
    assert_eq!(
        (sampled.start, sampled.end),
        (0xffff_ffff_8110_1000, 0xffff_ffff_8120_0000)
    );
    let in_module = module_point(&point("sampled", "dprof_selftest_produce"), &symbols)
        .expect("a module's function");
    assert_eq!(
        (in_module.start, in_module.end),
        (0xffff_ffff_c001_0000, 0xffff_ffff_c001_0400)
    );
    for (name, why) in [
        (
            "no_such_function",
            "no kernel function named `no_such_function`",
        ),
        ("tcp_sendmsg", "2 kernel functions are named `tcp_sendmsg`"),
        // The last symbol: nothing ends it.
        (
            "dprof_selftest_consume",
            "the end of `dprof_selftest_consume` is unknown",
        ),
    ] {
        let err = check_points(&[point("sampled", name)], &symbols).expect_err(name);
        assert!(err.to_string().contains(why), "{name}: {err}");
        assert!(module_point(&point("sampled", name), &symbols).is_none());
    }
    let plan = causal_plan(
        &[
            point("sampled", "tcp_recvmsg"),
            point("kprobe", "tcp_recvmsg"),
        ],
        None,
        None,
        &symbols,
        0,
    );
    let mut buf = [0u8; CausalPlan::SIZE];
    plan.encode(&mut buf);
    let decoded = CausalPlan::decode(&buf).expect("the module takes it");
    assert_eq!(decoded.used_points()[0], sampled);
    assert_eq!(decoded.used_points()[1].start, 0);
}

#[test]
fn latency_takes_two_different_points_and_adds_them_to_the_plan() {
    assert!(parse_latency("user:a").is_err());
    assert!(parse_latency("user:a,user:a")
        .expect_err("same point")
        .contains("same point"));
    assert!(parse_latency("sampled:f,user:done")
        .expect_err("sampled")
        .contains("counts samples, not arrivals"));
    let (begin, end) = parse_latency("kprobe:f,user:done").expect("two points");
    assert_eq!((begin.kind.as_str(), end.name.as_str()), ("kprobe", "done"));
}

#[test]
fn type_lists_parse_and_are_bounded() {
    assert_eq!(parse_selection("auto"), Ok(Selection::Auto));
    assert_eq!(
        parse_selection("TCP, skbuff_head_cache"),
        Ok(Selection::Named(vec![
            "TCP".to_owned(),
            "skbuff_head_cache".to_owned()
        ]))
    );
    assert!(parse_selection("TCP,,UDP").is_err());
    let many = vec!["t"; dprof_abi::MAX_CAUSAL_TYPES + 1].join(",");
    assert!(parse_selection(&many)
        .expect_err("too many")
        .contains("at most"));
}

/// The data profile of the analysis example (`sk_buff`s, a `task_struct`, kmalloc-1k by site).
fn example_report() -> (Report, Vec<String>) {
    let header = example::header();
    let symbols = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let mut analyzer = Analyzer::new(&header, &symbols, &Options::default());
    for chunk in example::records() {
        for (cpu, time_ns, record) in chunk {
            let header = dprof_abi::RecordHeader {
                kind: record.kind() as u16,
                size: record.kind().record_size() as u16,
                cpu,
                time_ns,
            };
            analyzer.push(&header, &record);
        }
    }
    let (report, _) = analyzer.finish_with_accesses();
    let names = report
        .data_profile
        .types
        .iter()
        .map(|t| t.name.clone())
        .collect();
    (report, names)
}

fn samples(n: u64) -> AccessStats {
    AccessStats {
        samples: n,
        ..AccessStats::default()
    }
}

#[test]
fn instructions_go_to_the_type_most_of_their_samples_touched() {
    let (report, names) = example_report();
    assert!(names.len() >= 3, "{names:?}");
    let (a, b, c) = (names[0].as_str(), names[1].as_str(), names[2].as_str());
    let mut accesses = SampledAccesses::default();
    // 0x10: mostly a's. 0x20: b's alone, at two offsets. 0x30: shared three ways (no owner).
    accesses.insert(a, 0x10, 0, samples(3));
    accesses.insert(b, 0x10, 0, samples(1));
    accesses.insert(b, 0x20, 0, samples(2));
    accesses.insert(b, 0x20, 8, samples(2));
    accesses.insert(a, 0x30, 0, samples(1));
    accesses.insert(b, 0x30, 0, samples(1));
    accesses.insert(c, 0x30, 0, samples(1));
    let choice = Selection::Named(vec![a.to_owned(), b.to_owned(), c.to_owned()]);
    let (chosen, notes) = choose_types(&choice, 6, &report, &accesses).expect("a and b");
    let ips: Vec<(&str, &[u64])> = chosen
        .iter()
        .map(|t| (t.spec.name.as_str(), t.ips.as_slice()))
        .collect();
    assert_eq!(ips, [(a, &[0x10][..]), (b, &[0x20][..])]);
    assert_eq!(chosen[0].spec.ips, 1);
    // c's only instruction is shared: it is left out, and the note says why.
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains(c) && notes[0].contains("cannot be told apart"));
    // The data profile's samples come along for the report's side-by-side ranking.
    let a_samples = report.data_profile.types[0].samples;
    assert_eq!(chosen[0].spec.plan_samples, a_samples);
}

#[test]
fn a_type_never_sampled_or_no_type_at_all_is_a_clear_error() {
    let (report, names) = example_report();
    let accesses = SampledAccesses::default();
    let err = choose_types(
        &Selection::Named(vec!["no_such_type".to_owned()]),
        6,
        &report,
        &accesses,
    )
    .expect_err("unknown type");
    let text = err.to_string();
    assert!(text.contains("`no_such_type` was never sampled"), "{text}");
    assert!(text.contains(&names[0]), "names the sampled types: {text}");
    // The example's types have fewer than MIN_PLAN_SAMPLES samples each.
    let err = choose_types(&Selection::Auto, 6, &report, &accesses).expect_err("too few");
    assert!(
        err.to_string().contains("no data type had 20 samples"),
        "{err}"
    );
    // A named type whose instructions are all unknown is left out, and with nothing left
    // that is an error too.
    let err = choose_types(
        &Selection::Named(vec![names[0].clone()]),
        6,
        &report,
        &accesses,
    )
    .expect_err("no instructions");
    assert!(err.to_string().contains("no type is left"), "{err}");
}

/// `--types auto` takes the most sampled data types and skips the pseudo-types ranked among
/// them (saying which); named, a pseudo-type is taken.
#[test]
fn the_automatic_plan_skips_pseudo_types_unless_named() {
    let (mut report, _) = example_report();
    let template = report.data_profile.types[0].clone();
    let ranked = [
        ("stack", TypeKind::Stack, 900),
        ("percpu:fixed_percpu_data", TypeKind::Percpu, 800),
        ("user memory", TypeKind::Region, 700),
        ("skbuff_head_cache", TypeKind::Slab, 600),
        ("struct page", TypeKind::Region, 500),
        ("percpu:(dynamic)", TypeKind::Percpu, 400),
        ("global:jiffies", TypeKind::Global, 300),
        ("vmalloc", TypeKind::Region, 200),
        ("percpu:runqueues", TypeKind::Percpu, 100),
    ];
    report.data_profile.types = ranked
        .iter()
        .enumerate()
        .map(|(i, &(name, kind, n))| TypeProfile {
            rank: i + 1,
            name: name.to_owned(),
            kind,
            cache: None,
            site: None,
            samples: n,
            ..template.clone()
        })
        .collect();
    let mut accesses = SampledAccesses::default();
    for (i, &(name, _, n)) in ranked.iter().enumerate() {
        accesses.insert(name, 0x100 * (i as u64 + 1), 0, samples(n));
    }
    let (chosen, notes) =
        choose_types(&Selection::Auto, 2, &report, &accesses).expect("two data types");
    let names: Vec<&str> = chosen.iter().map(|t| t.spec.name.as_str()).collect();
    assert_eq!(names, ["skbuff_head_cache", "global:jiffies"]);
    assert_eq!(
        notes,
        [
            "skipped pseudo-types, which no change to a data type makes faster: stack (the \
          kernel stacks), percpu:fixed_percpu_data (the stack protector's canary), user memory \
          (a region of memory, not one data type), struct page (a region of memory, not one \
          data type), percpu:(dynamic) (per-CPU memory that no symbol names) (name them with \
          --types to experiment on them)"
        ]
    );
    // With room for more, every data type is taken, and only data types.
    let (chosen, _) =
        choose_types(&Selection::Auto, 32, &report, &accesses).expect("three data types");
    let names: Vec<&str> = chosen.iter().map(|t| t.spec.name.as_str()).collect();
    assert_eq!(
        names,
        ["skbuff_head_cache", "global:jiffies", "percpu:runqueues"]
    );
    // Named, a pseudo-type is taken, with its instructions.
    let asked = Selection::Named(vec!["stack".to_owned(), "user memory".to_owned()]);
    let (chosen, notes) = choose_types(&asked, 6, &report, &accesses).expect("named");
    let ips: Vec<(&str, &[u64])> = chosen
        .iter()
        .map(|t| (t.spec.name.as_str(), t.ips.as_slice()))
        .collect();
    assert_eq!(
        ips,
        [("stack", &[0x100][..]), ("user memory", &[0x300][..])]
    );
    assert!(notes.is_empty(), "{notes:?}");
    // Only pseudo-types sampled enough: a clear error that names them.
    report.data_profile.types.retain(|t| t.name == "stack");
    let err = choose_types(&Selection::Auto, 6, &report, &accesses).expect_err("none left");
    assert!(
        err.to_string()
            .contains("no data type had 20 samples or more in the profiling phase"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("pseudo-types skipped: stack (the kernel stacks)"),
        "{err}"
    );
}

#[test]
fn plans_list_each_point_once_in_order() {
    let points = [point("kprobe", "f"), point("user", "done")];
    let symbols = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let plan = causal_plan(
        &points,
        None,
        None,
        &symbols,
        dprof_abi::CAUSAL_RECORD_SAMPLES,
    );
    let mut buf = [0u8; CausalPlan::SIZE];
    plan.encode(&mut buf);
    let decoded = CausalPlan::decode(&buf).expect("a valid plan");
    assert_eq!(decoded.used_points().len(), 2);
    assert_eq!(decoded.used_points()[1].name_bytes(), b"done");
    assert_eq!(decoded.arrival_index(), None);
    assert_eq!(decoded.latency_pair(), None);
    // A latency pair (END first here) is marked on its points, as the module takes it.
    let plan = causal_plan(&points, Some((1, 0)), None, &symbols, 0);
    plan.encode(&mut buf);
    let decoded = CausalPlan::decode(&buf).expect("a valid plan with a latency pair");
    assert_eq!(decoded.latency_pair(), Some((1, 0)));
    assert_eq!(decoded.used_points()[1].latency, dprof_abi::LATENCY_BEGIN);
}

/// The arrival point joins the plan's points (once, if it is also a progress point) and the
/// plan names it, 1-based, as the module takes it.
#[test]
fn the_arrival_point_is_in_the_plan() {
    let symbols = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let mut options = end_to_end_options(&["true"]);
    options.end_to_end = None;
    options.progress = vec![point("user", "done")];
    options.arrival = Some(point("kprobe", "f"));
    let plan = points_of(&options);
    assert_eq!(
        plan.points,
        vec![point("user", "done"), point("kprobe", "f")]
    );
    assert_eq!(plan.arrival, Some(1));
    options.progress.push(point("kprobe", "f"));
    assert_eq!(points_of(&options).points.len(), 2, "one point, two roles");
    let module = causal_plan(&plan.points, plan.latency, plan.arrival, &symbols, 0);
    let mut buf = [0u8; CausalPlan::SIZE];
    module.encode(&mut buf);
    let decoded = CausalPlan::decode(&buf).expect("a valid plan");
    assert_eq!(decoded.arrival, 2);
    assert_eq!(decoded.arrival_index(), Some(1));
}

/// `--arrival-speedup` needs `--arrival`, and end-to-end runs take neither: refused by the
/// library for callers that build the options themselves.
#[test]
fn arrival_options_are_checked() {
    let refused = |options: &CausalOptions| match check_arrival(options) {
        Err(CollectError::Usage(why)) => why,
        other => panic!("not refused: {other:?}"),
    };
    let mut options = end_to_end_options(&["true"]);
    options.end_to_end = None;
    assert!(check_arrival(&options).is_ok());
    options.arrival_speedup_ns = Some(1000);
    assert!(refused(&options).contains("name the point where requests arrive with --arrival"));
    options.arrival = Some(point("user", "req"));
    assert!(check_arrival(&options).is_ok());
    options.end_to_end = Some(10);
    assert!(refused(&options).contains("it takes no --arrival"));
}

#[test]
fn arrival_speedups_parse_with_units_and_stay_in_range() {
    assert_eq!(parse_arrival_speedup("250us"), Ok(250_000));
    assert_eq!(parse_arrival_speedup("1ms"), Ok(1_000_000));
    assert_eq!(parse_arrival_speedup("800ns"), Ok(800));
    assert_eq!(parse_arrival_speedup("1500"), Ok(1500));
    assert_eq!(parse_arrival_speedup("4s"), Ok(4_000_000_000));
    for (bad, why) in [
        ("0", "is zero"),
        ("0ns", "is zero"),
        ("5s", "more than the module takes per arrival"),
        ("99999999999999999999999", "out of range"),
        ("fast", "not a time per arrival"),
        ("12xs", "not a time per arrival"),
        ("12xns", "not a number of nanoseconds"),
    ] {
        let err = parse_arrival_speedup(bad).expect_err(bad);
        assert!(err.contains(why), "{bad}: {err}");
    }
    assert!(parse_arrival("sampled:tcp_recvmsg")
        .expect_err("a sampled arrival")
        .contains("counts samples, not requests"));
    assert_eq!(parse_arrival("user:req"), Ok(point("user", "req")));
}

/// `--units` and the lists: a list implies its unit, `--units` alone means `auto`, and the
/// two must agree.
#[test]
fn units_and_lists_agree_or_are_refused() {
    let functions = Selection::Named(vec!["tcp_sendmsg".to_owned()]);
    assert_eq!(
        unit_selection(None, None),
        Ok((CausalUnit::Type, Selection::Auto))
    );
    assert_eq!(
        unit_selection(Some(CausalUnit::Module), None),
        Ok((CausalUnit::Module, Selection::Auto))
    );
    assert_eq!(
        unit_selection(None, Some((CausalUnit::Function, functions.clone()))),
        Ok((CausalUnit::Function, functions.clone()))
    );
    assert_eq!(
        unit_selection(
            Some(CausalUnit::Function),
            Some((CausalUnit::Function, functions.clone()))
        ),
        Ok((CausalUnit::Function, functions.clone()))
    );
    assert_eq!(
        unit_selection(
            Some(CausalUnit::Module),
            Some((CausalUnit::Function, functions))
        ),
        Err("--units modules contradicts --functions: give one of them".to_owned())
    );
}

/// The summary's overhead line: startup, the time between experiments and the delays, each
/// as a share of the wall time.
#[test]
fn overhead_is_split_into_startup_gaps_and_delays_against_wall_time() {
    let tally = Tally {
        delay_ns: 1_500_000_000,
        between_ns: 600_000_000,
        ..Tally::default()
    };
    let line = overhead_summary(3_000_000_000, &tally, 30_000_000_000);
    assert!(
        line.contains("startup (profiling phase and planning) 3"),
        "{line}"
    );
    assert!(line.contains("3.000000000 s = 10.0%"), "{line}");
    assert!(
        line.contains("between experiments 0.600000000 s = 2.0% and delays"),
        "{line}"
    );
    assert!(line.contains("= 5.0% of 30"), "{line}");
    // A run stopped at once divides by nothing without a panic.
    assert!(overhead_summary(0, &Tally::default(), 0).contains("= 0.0%"));
}

/// Pairs: one type, one sped-up experiment and one at 0% in either order; the speedups in 5%
/// steps from 5% to 100%, or always the fixed one.
#[test]
fn experiments_come_in_pairs_at_random_or_fixed_speedups() {
    let mut rng = fastrand::Rng::with_seed(9);
    let mut seen = std::collections::BTreeSet::new();
    let mut zero_first = 0;
    for _ in 0..2000 {
        let [first, second] = next_pair(&mut rng, 3, None);
        assert_eq!(first.0, second.0);
        assert!(first.0 < 3);
        let speedup = first.1.max(second.1);
        assert_eq!(first.1.min(second.1), 0, "{first:?} {second:?}");
        assert!(
            speedup % 5 == 0 && (5..=100).contains(&speedup),
            "{speedup}"
        );
        seen.insert(speedup);
        zero_first += usize::from(first.1 == 0);
    }
    assert_eq!(seen.len(), 20, "every 5% step drawn: {seen:?}");
    assert!(
        (800..1200).contains(&zero_first),
        "{zero_first} of 2000 pairs start at 0%"
    );
    for _ in 0..200 {
        let [first, second] = next_pair(&mut rng, 3, Some(35));
        let mut speedups = [first.1, second.1];
        speedups.sort_unstable();
        assert_eq!(speedups, [0, 35]);
    }
}

/// End-to-end options as the CLI would make them, with `command`.
fn end_to_end_options(command: &[&str]) -> CausalOptions {
    CausalOptions {
        output: "e2e.dprof".into(),
        duration: None,
        progress: Vec::new(),
        latency: None,
        unit: CausalUnit::Type,
        selection: Selection::Auto,
        top: 6,
        scope: crate::scope::Scope::default(),
        plan_time: Duration::from_secs(5),
        experiment: Duration::from_millis(200),
        min_visits: 5,
        cooloff: Duration::from_millis(10),
        seed: None,
        fixed_speedup: None,
        delay_accounting: dprof_format::DelayAccounting::Task,
        arrival: None,
        arrival_speedup_ns: None,
        end_to_end: Some(10),
        period: None,
        sampler: crate::options::SamplerChoice::Auto,
        ring_size: 16 << 20,
        device: dprof_abi::DEVICE_PATH.into(),
        command: command.iter().map(Into::into).collect(),
    }
}

/// The library refuses what the CLI's clap refuses beside `--end-to-end`, for callers that
/// build the options themselves, and gives an end-to-end session its one point.
#[test]
fn end_to_end_options_are_checked_and_get_the_run_point() {
    let good = end_to_end_options(&["true"]);
    assert!(check_end_to_end(&good).is_ok());
    let plan = points_of(&good);
    assert_eq!(
        (plan.points, plan.latency, plan.arrival),
        (vec![point("end-to-end", "run")], None, None)
    );
    assert_eq!(
        module_point_name("end-to-end", "run"),
        END_TO_END_USER_POINT
    );
    let refused = |options: &CausalOptions| match check_end_to_end(options) {
        Err(CollectError::Usage(why)) => why,
        other => panic!("not refused: {other:?}"),
    };
    assert!(refused(&end_to_end_options(&[])).contains("give it after `--`"));
    let mut with_point = good.clone();
    with_point.progress = vec![point("user", "req")];
    assert!(refused(&with_point).contains("it takes no --progress or --latency"));
    let mut with_duration = good;
    with_duration.duration = Some(Duration::from_secs(1));
    assert!(refused(&with_duration).contains("it takes no --duration"));
}
