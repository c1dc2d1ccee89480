//! Known answers: slopes recovered from made-up experiments, latency by Little's law, every
//! reason to discard, the profile round trip and Coz's format read back by the viewer's rules.

use std::collections::BTreeMap;

use super::*;
use dprof_export::coz::write_coz;
use dprof_fixtures::causal::{self as example, linear_experiments, Noise, Planned};
use dprof_format::Profile;
use dprof_model::causal::{
    CausalReport, Discard, EmptyCausalReason, Fit, Measurement, NoSlope, PointCount, Slope, Target,
};

fn one_point(types: &[(&str, u64)]) -> CausalCollectConfig {
    example::config(types, &["kprobe:tcp_sendmsg"], None)
}

/// Speedups 5 to 100% in 5% steps, each once after a 0% run, and a last 0% run: as
/// `dprof causal` pairs them (half at 0%, as Coz does).
fn coz_mix() -> Vec<u32> {
    let mut speedups: Vec<u32> = (1..=20).flat_map(|i| [0, i * 5]).collect();
    speedups.push(0);
    speedups
}

fn only_slope(report: &CausalReport, analysis: usize, type_name: &str) -> Slope {
    let t = report.analyses[analysis]
        .types
        .iter()
        .find(|t| t.name == type_name)
        .expect("the type is listed");
    *t.fit.slope().expect("a slope")
}

/// Program speedup = 0.5 x virtual speedup with +-2% noise: the slope is found, its interval
/// holds 0.5 and excludes 0.
#[test]
fn a_linear_effect_is_recovered_within_its_interval() {
    let config = one_point(&[("on_path", 10)]);
    let planned = linear_experiments(1, 0, &coz_mix(), 0.5, 0.02, &mut Noise::new(1));
    let report = analyze(&config, &example::records(&planned));
    let s = only_slope(&report, 0, "on_path");
    eprintln!(
        "linear 0.5: slope {:.4} [{:.4}, {:.4}]",
        s.slope, s.low, s.high
    );
    assert!(s.low <= 0.5 && 0.5 <= s.high, "{s:?}");
    assert!((s.slope - 0.5).abs() < 0.05, "{s:?}");
    assert!(!s.within_noise && !s.hurts, "{s:?}");
    // The line goes through the 20 sped-up experiments, each against its pair's 0% one.
    assert_eq!(s.points, 20);
    assert_eq!(s.distinct_speedups, 21);
    // t at 18 degrees of freedom.
    assert!((s.t_critical - 2.1009).abs() < 1e-3, "{s:?}");
    let t = &report.analyses[0].types[0];
    assert_eq!(
        (t.rank, t.experiments, t.baseline_experiments),
        (Some(1), 41, 21)
    );
    let baseline = t.baseline.expect("a baseline");
    assert!((baseline / 200_000.0 - 1.0).abs() < 0.01, "{baseline}");
    // Pooled points: 21 speedups, the 0% one exactly 0.
    assert_eq!(t.speedups.len(), 21);
    assert!(t.speedups[0].program_speedup.abs() < 1e-12);
    let full = t.speedups.last().expect("100%");
    assert_eq!(full.speedup_percent, 100);
    assert!((full.program_speedup - 0.5).abs() < 0.03, "{full:?}");
}

/// A sampled point's visits are sample counts: the analysis is the same (the slope is found
/// from them as from counted visits, here with the +-10% noise of a few hundred samples per
/// experiment), and its throughput analysis says it is sampled.
#[test]
fn a_sampled_point_is_analysed_like_a_counted_one_and_says_so() {
    let config = example::config(&[("on_path", 10)], &["sampled:tcp_sendmsg"], None);
    let planned = linear_experiments(1, 0, &coz_mix(), 0.5, 0.10, &mut Noise::new(3));
    let report = analyze(&config, &example::records(&planned));
    assert_eq!(report.points, ["sampled:tcp_sendmsg"]);
    let s = only_slope(&report, 0, "on_path");
    assert!(s.low <= 0.5 && 0.5 <= s.high, "{s:?}");
    assert!(!s.within_noise, "{s:?}");
    let note = report.analyses[0].sampled_note().expect("a sampled point");
    assert!(note.contains("not calls"), "{note}");
    // Counted points say nothing.
    let counted = analyze(&one_point(&[("on_path", 10)]), &example::records(&planned));
    assert_eq!(counted.analyses[0].sampled_note(), None);
}

/// No effect: the interval contains 0 and the type is flagged within noise.
#[test]
fn no_effect_is_within_noise() {
    let config = one_point(&[("off_path", 10)]);
    let planned = linear_experiments(1, 0, &coz_mix(), 0.0, 0.02, &mut Noise::new(2));
    let report = analyze(&config, &example::records(&planned));
    let s = only_slope(&report, 0, "off_path");
    eprintln!(
        "no effect: slope {:.4} [{:.4}, {:.4}]",
        s.slope, s.low, s.high
    );
    assert!(s.low <= 0.0 && 0.0 <= s.high, "{s:?}");
    assert!(s.within_noise && !s.hurts, "{s:?}");
    assert!(s.slope.abs() < 0.03, "{s:?}");
}

/// Contention: speeding the type up slows the program; the interval is below 0.
#[test]
fn contention_hurts() {
    let config = one_point(&[("contended", 10)]);
    let planned = linear_experiments(1, 0, &coz_mix(), -0.4, 0.02, &mut Noise::new(3));
    let report = analyze(&config, &example::records(&planned));
    let s = only_slope(&report, 0, "contended");
    eprintln!(
        "contention -0.4: slope {:.4} [{:.4}, {:.4}]",
        s.slope, s.low, s.high
    );
    assert!(s.low <= -0.4 && -0.4 <= s.high, "{s:?}");
    assert!(s.hurts && !s.within_noise, "{s:?}");
}

/// The three together: ranked by slope, the data-profile rank carried beside it.
#[test]
fn types_are_ranked_by_slope_with_their_data_profile_rank() {
    let config = one_point(&[("contended", 30), ("on_path", 10), ("off_path", 20)]);
    let mut noise = Noise::new(4);
    let mut planned = linear_experiments(1, 0, &coz_mix(), -0.4, 0.02, &mut noise);
    planned.extend(linear_experiments(
        101,
        1,
        &coz_mix(),
        0.5,
        0.02,
        &mut noise,
    ));
    planned.extend(linear_experiments(
        201,
        2,
        &coz_mix(),
        0.0,
        0.02,
        &mut noise,
    ));
    let report = analyze(&config, &example::records(&planned));
    let ranked: Vec<(&str, Option<usize>, Option<usize>)> = report.analyses[0]
        .types
        .iter()
        .map(|t| (t.name.as_str(), t.rank, t.data_profile_rank))
        .collect();
    assert_eq!(
        ranked,
        [
            ("on_path", Some(1), Some(3)),
            ("off_path", Some(2), Some(2)),
            ("contended", Some(3), Some(1)),
        ]
    );
    assert!(report.unseen.is_empty(), "{:?}", report.unseen);
}

/// Requests arriving every `GAP` ns, each lasting a known time; experiments back to back.
struct Requests {
    /// (arrival, departure) of every request, by arrival.
    spans: Vec<(u64, u64)>,
}

const GAP: u64 = 1_000;

impl Requests {
    /// Requests over `windows` (start, wall, wall latency), arrivals at `k x GAP + 250`.
    fn over(windows: &[(u64, u64, u64)]) -> Self {
        let mut spans = Vec::new();
        for &(start, wall, latency) in windows {
            let mut arrival = start + 250;
            while arrival < start + wall {
                spans.push((arrival, arrival + latency));
                arrival += GAP;
            }
        }
        Self { spans }
    }

    /// (visits, time sum) of arrivals and of departures in `[start, start + wall)`.
    fn counts(&self, start: u64, wall: u64) -> [(u64, u64); 2] {
        let within = |t: u64| (start..start + wall).contains(&t);
        let sum = |times: &mut dyn Iterator<Item = u64>| {
            times
                .filter(|&t| within(t))
                .fold((0, 0), |(n, s), t| (n + 1, s + (t - start)))
        };
        [
            sum(&mut self.spans.iter().map(|s| s.0)),
            sum(&mut self.spans.iter().map(|s| s.1)),
        ]
    }
}

/// Latency experiments: each (speedup, effective latency) with 1 ms of wall time, back to
/// back; the delay is `0.2 x speedup` of the wall time, and the wall latency the effective one
/// stretched by `wall / effective`.
fn latency_planned(runs: &[(u32, f64)]) -> Vec<Planned> {
    const WALL: u64 = 1_000_000;
    let windows: Vec<(u64, u64, u64, u64)> = runs
        .iter()
        .enumerate()
        .map(|(i, &(speedup, latency))| {
            let delay = (WALL as f64 * 0.2 * f64::from(speedup) / 100.0) as u64;
            let wall_latency = latency * WALL as f64 / (WALL - delay) as f64;
            (i as u64 * WALL, WALL, delay, wall_latency.round() as u64)
        })
        .collect();
    let requests = Requests::over(
        &windows
            .iter()
            .map(|&(s, w, _, l)| (s, w, l))
            .collect::<Vec<_>>(),
    );
    windows
        .iter()
        .zip(runs)
        .enumerate()
        .map(|(i, (&(start, wall, delay, _), &(speedup, _)))| {
            let [begin, end] = requests.counts(start, wall);
            Planned {
                experiment: i as u32 + 1,
                type_index: 0,
                speedup_percent: speedup,
                wall_ns: wall,
                delay_ns: delay,
                type_samples: 100,
                flags: 0,
                credited_ns: 0,
                arrival_delay_ns: 0,
                visits: vec![begin, end],
                without_start: false,
                capped_pauses: (0, 0),
            }
        })
        .collect()
}

fn latency_config() -> CausalCollectConfig {
    example::config(&[("request", 5)], &["user:begin", "user:end"], Some((0, 1)))
}

/// A constant 4 us of effective latency, measured through 25% of inserted delay: Little's law
/// over effective time gives it back.
#[test]
fn latency_by_littles_law_is_the_known_latency() {
    let runs: Vec<(u32, f64)> = [0, 0, 0, 100, 100, 0]
        .iter()
        .map(|&s| (s, 4_000.0))
        .collect();
    let report = analyze(
        &latency_config(),
        &example::records(&latency_planned(&runs)),
    );
    let latency = report.analyses.last().expect("the latency analysis");
    assert_eq!(latency.target, Target::Latency { begin: 0, end: 1 });
    assert_eq!(latency.name, "user:begin -> user:end");
    let t = &latency.types[0];
    let baseline = t.baseline.expect("a baseline");
    eprintln!("latency: baseline {baseline:.1} ns (4000 known)");
    assert!((baseline - 4_000.0).abs() < 4.0, "{baseline}");
    for p in &t.experiment_points {
        // The 100% runs paid 20% of their wall time in delay: effective time takes it out.
        // Within 0.3%: a window's edges (the first begins with nothing in flight) are off
        // by about latency / window.
        assert!((p.value - 4_000.0).abs() < 12.0, "{p:?}");
    }
    // Two distinct speedups: listed, no slope.
    assert_eq!(
        t.fit,
        Fit::NoSlope {
            reason: NoSlope::TooFewSpeedups,
            distinct_speedups: 2
        }
    );
}

/// Latency that falls as 1 / (1 + 0.5 x speedup): program speedup = 0.5 x virtual speedup.
#[test]
fn latency_mode_recovers_a_linear_effect() {
    let mut noise = Noise::new(5);
    let runs: Vec<(u32, f64)> = coz_mix()
        .into_iter()
        .map(|s| {
            let latency = 4_000.0 / (1.0 + 0.5 * f64::from(s) / 100.0);
            (s, latency * (1.0 + 0.01 * noise.next_unit()))
        })
        .collect();
    let report = analyze(
        &latency_config(),
        &example::records(&latency_planned(&runs)),
    );
    let s = only_slope(&report, 2, "request");
    eprintln!(
        "latency 0.5: slope {:.4} [{:.4}, {:.4}]",
        s.slope, s.low, s.high
    );
    assert!(s.low <= 0.5 && 0.5 <= s.high, "{s:?}");
    assert!((s.slope - 0.5).abs() < 0.05, "{s:?}");
    assert!(!s.within_noise && !s.hurts);
}

#[test]
fn in_flight_integral_follows_the_formula() {
    // 2 in flight at the start; begin visited at 100 and 300, end at 200, over T = 1000:
    // 2 x 1000 + (2 x 1000 - 400) - (1 x 1000 - 200) = 2800.
    let m = Measurement {
        cut_short: false,
        wall_ns: 1_000,
        delay_ns: 0,
        paused_ns: 0,
        task_table_full: false,
        credited_ns: 0,
        type_samples: 0,
        samples: 0,
        arrival_delay_ns: 0,
        points: vec![
            PointCount {
                visits: 2,
                time_sum_ns: 400,
                total: 12,
            },
            PointCount {
                visits: 1,
                time_sum_ns: 200,
                total: 9,
            },
        ],
        in_flight_delay: None,
        capped_pauses: 0,
        max_owed_after_pause_ns: 0,
    };
    assert_eq!(m.in_flight_integral_wall(0, 1), Some(2_800.0));
    assert_eq!(m.mean_in_flight(0, 1), Some(2.8));
    assert_eq!(m.in_flight_integral_wall(0, 2), None);
}

/// One request at a time, in flight 20% of the experiment: each takes 2000 ns of wall time,
/// of which 1000 ns are pauses inserted while it was in flight (its own code was sped up), so
/// its effective latency is 1000 ns. The module's in-flight weighing gives exactly that;
/// scaling the integral by effective over wall time, as for profiles before ABI 9, gives
/// 1800 ns.
#[test]
fn latency_takes_out_the_pauses_that_fell_while_requests_were_in_flight() {
    const REQUESTS: u64 = 100;
    const GAP: u64 = 10_000;
    let begins: u64 = (0..REQUESTS).map(|i| i * GAP).sum();
    let m = |in_flight_delay| Measurement {
        cut_short: false,
        wall_ns: REQUESTS * GAP,
        delay_ns: REQUESTS * 1_000,
        paused_ns: REQUESTS * 1_000,
        task_table_full: false,
        credited_ns: 0,
        type_samples: REQUESTS,
        samples: REQUESTS * 10,
        arrival_delay_ns: 0,
        points: vec![
            PointCount {
                visits: REQUESTS,
                time_sum_ns: begins,
                total: REQUESTS,
            },
            PointCount {
                visits: REQUESTS,
                time_sum_ns: begins + REQUESTS * 2_000,
                total: REQUESTS,
            },
        ],
        in_flight_delay,
        capped_pauses: 0,
        max_owed_after_pause_ns: 0,
    };
    let latency = |m: &Measurement| {
        measure(m, Target::Latency { begin: 0, end: 1 })
            .expect("measured")
            .value()
    };
    // Each delay of 1000 ns went in with one request in flight.
    let weighed = latency(&m(Some(REQUESTS * 1_000)));
    let scaled = latency(&m(None));
    eprintln!("latency: weighed {weighed} ns, scaled {scaled} ns, known 1000 ns");
    assert!((weighed - 1_000.0).abs() < 1e-6, "{weighed}");
    assert!((scaled - 1_800.0).abs() < 1e-6, "{scaled}");
    // A weighed sum over the integral is a count that cannot be.
    assert_eq!(
        measure(
            &m(Some(REQUESTS * 2_000)),
            Target::Latency { begin: 0, end: 1 }
        )
        .err(),
        Some(Discard::NoRequestsInFlight)
    );
}

/// The profile says whether the module weighed its delays: only then is the record's sum
/// read, and never without a latency pair.
#[test]
fn the_in_flight_sum_is_read_only_from_profiles_that_have_it() {
    let end = ExperimentEnd {
        point_count: 2,
        in_flight_delay: 5,
        ..ExperimentEnd::default()
    };
    let mut config = latency_config();
    assert_eq!(measurement(&config, &end).in_flight_delay, None);
    config.in_flight_delays = true;
    assert_eq!(measurement(&config, &end).in_flight_delay, Some(5));
    config.latency = None;
    assert_eq!(measurement(&config, &end).in_flight_delay, None);
}

#[test]
fn a_profile_without_experiments_says_so() {
    let plain = Profile::from_vec(dprof_fixtures::profile::example_profile()).expect("valid");
    assert!(matches!(
        analyze_profile(&plain),
        Err(CausalError::NotCausal)
    ));
    let empty = example::profile_of(&example::example_config(), &[]);
    let empty = Profile::from_vec(empty).expect("valid");
    let err = analyze_profile(&empty).expect_err("no experiments");
    assert!(matches!(err, CausalError::NoExperiments));
    assert!(err.to_string().contains("no causal experiments"), "{err}");
}

#[test]
fn a_type_never_selected_is_listed_with_the_reason() {
    let config = one_point(&[("selected", 10), ("never", 0)]);
    let planned = linear_experiments(1, 0, &coz_mix(), 0.5, 0.0, &mut Noise::new(6));
    let report = analyze(&config, &example::records(&planned));
    let never = report.analyses[0]
        .types
        .iter()
        .find(|t| t.name == "never")
        .expect("listed");
    assert_eq!(
        (never.rank, never.data_profile_rank, never.experiments),
        (None, None, 0)
    );
    assert_eq!(
        never.fit,
        Fit::NoSlope {
            reason: NoSlope::NeverSelected,
            distinct_speedups: 0
        }
    );
    assert_eq!(report.types[1].selected, 0);
    assert!(
        report.unseen[0].starts_with("1 of 2 types were never selected"),
        "{:?}",
        report.unseen
    );
}

/// No sample of the type in any experiment: nothing was inserted, the sped-up experiments
/// are discarded, the type has no slope and the view says why.
#[test]
fn a_type_with_no_sample_during_its_experiments_is_noted() {
    let config = one_point(&[("unsampled", 10)]);
    let mut planned = linear_experiments(1, 0, &[0, 50, 0, 100], 0.0, 0.0, &mut Noise::new(6));
    for p in &mut planned {
        p.type_samples = 0;
        p.wall_ns -= p.delay_ns;
        p.delay_ns = 0;
    }
    let report = analyze(&config, &example::records(&planned));
    assert!(
        report.unseen.iter().any(|l| l.contains(
            "no sample fell on the accesses of unsampled during their experiments, so no delay \
             was inserted and their sped-up experiments are discarded"
        )),
        "{:?}",
        report.unseen
    );
    let discarded: Vec<(u32, Option<Discard>)> = report
        .experiments
        .iter()
        .map(|e| (e.experiment, e.discarded))
        .collect();
    assert_eq!(
        discarded,
        [
            (1, None),
            (2, Some(Discard::NoDelayInserted)),
            (3, None),
            (4, Some(Discard::NoDelayInserted))
        ]
    );
    assert_eq!(
        report.analyses[0].types[0].fit,
        Fit::NoSlope {
            reason: NoSlope::TooFewSpeedups,
            distinct_speedups: 1
        }
    );
}

/// Program speedup = 0.5 x virtual speedup, and beside the experiments that inserted their
/// delay, sped-up experiments at 60 to 100% during which no sample fell on the type: nothing
/// was inserted, so the program ran as at 0%. Counted at their nominal speedups they pulled
/// the slope down to 0.13 [-0.09, +0.35], within noise (measured before the fix); discarded,
/// the slope is the type's, and the view says how many and why.
#[test]
fn experiments_that_inserted_no_delay_do_not_count() {
    let config = one_point(&[("on_path", 10)]);
    let mut planned = linear_experiments(1, 0, &coz_mix(), 0.5, 0.01, &mut Noise::new(14));
    let mut nothing = linear_experiments(100, 0, &[0; 10], 0.0, 0.01, &mut Noise::new(15));
    for (p, speedup) in nothing
        .iter_mut()
        .zip([60, 65, 70, 75, 80, 85, 90, 95, 100, 100])
    {
        p.speedup_percent = speedup;
        p.type_samples = 0;
    }
    planned.extend(nothing);
    let report = analyze(&config, &example::records(&planned));
    let s = only_slope(&report, 0, "on_path");
    eprintln!(
        "no delay inserted: slope {:.4} [{:.4}, {:.4}]",
        s.slope, s.low, s.high
    );
    assert!(s.low <= 0.5 && 0.5 <= s.high, "{s:?}");
    assert_eq!(s.points, 20);
    let groups = report.discard_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].reason, Discard::NoDelayInserted);
    assert_eq!(groups[0].analysis, None);
    assert_eq!(groups[0].experiments, (100..110).collect::<Vec<u32>>());
    // The 0% experiments inserted nothing either, as they should: all of them are used.
    assert_eq!(report.analyses[0].types[0].baseline_experiments, 21);
}

/// Zero visits in every experiment: all discarded with that reason, no slope.
#[test]
fn zero_visits_everywhere_leaves_no_slope() {
    let config = one_point(&[("quiet", 10)]);
    let planned: Vec<Planned> = [0, 0, 50, 100]
        .iter()
        .enumerate()
        .map(|(i, &s)| Planned::even(i as u32, 0, s, 100_000_000, 1_000, &[0]))
        .collect();
    let report = analyze(&config, &example::records(&planned));
    let analysis = &report.analyses[0];
    assert_eq!(analysis.discarded.len(), 4);
    assert!(analysis
        .discarded
        .iter()
        .all(|d| d.reason == Discard::ZeroVisits));
    assert_eq!(
        analysis.types[0].fit,
        Fit::NoSlope {
            reason: NoSlope::AllDiscarded,
            distinct_speedups: 0
        }
    );
    let groups = report.discard_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].reason, Discard::ZeroVisits);
    assert_eq!(groups[0].analysis.as_deref(), Some("kprobe:tcp_sendmsg"));
    assert_eq!(groups[0].experiments, [0, 1, 2, 3]);
}

#[test]
fn a_type_index_outside_the_table_is_discarded() {
    let config = one_point(&[("only", 10)]);
    let planned = vec![Planned::even(1, 5, 50, 100_000_000, 1_000, &[100])];
    let report = analyze(&config, &example::records(&planned));
    assert_eq!(
        report.experiments[0].discarded,
        Some(Discard::TypeNotInTable)
    );
    assert_eq!(report.types[0].selected, 0);
    assert!(report.analyses[0].discarded.is_empty());
}

/// Every record-level reason, each on its own experiment.
#[test]
fn unusable_experiments_are_discarded_with_their_reason() {
    let config = one_point(&[("a", 10)]);
    let mut cut = Planned::even(2, 0, 50, 100_000_000, 0, &[10]);
    cut.flags = dprof_abi::EXPERIMENT_CUT_SHORT;
    let mut orphan = Planned::even(3, 0, 50, 100_000_000, 0, &[10]);
    orphan.without_start = true;
    let no_time = Planned::even(4, 0, 50, 100_000_000, 100_000_000, &[10]);
    let two_points = Planned::even(5, 0, 50, 100_000_000, 0, &[10, 10]);
    let nothing_inserted = Planned::even(8, 0, 50, 100_000_000, 0, &[10]);
    let mut records = example::records(&[
        Planned::even(1, 0, 0, 100_000_000, 0, &[10]),
        cut,
        orphan,
        no_time,
        two_points,
        nothing_inserted,
    ]);
    // A start with no end, and an end whose start named another speedup.
    let control = |experiment, speedup_percent| dprof_abi::ExperimentControl {
        experiment,
        type_index: 0,
        speedup_percent,
        arrival_delay_ns: 0,
    };
    records.push(ExperimentRecord::Start(dprof_abi::ExperimentStart {
        control: control(6, 10),
        global_delay_ns: 0,
    }));
    records.push(ExperimentRecord::Start(dprof_abi::ExperimentStart {
        control: control(7, 10),
        global_delay_ns: 0,
    }));
    let ExperimentRecord::End(mut end) =
        example::records(&[Planned::even(7, 0, 20, 100_000_000, 0, &[10])])[1]
    else {
        panic!("an end record");
    };
    end.control = control(7, 20);
    records.push(ExperimentRecord::End(end));
    let report = analyze(&config, &records);
    let reasons: BTreeMap<u32, Option<Discard>> = report
        .experiments
        .iter()
        .map(|e| (e.experiment, e.discarded))
        .collect();
    assert_eq!(
        reasons,
        BTreeMap::from([
            (1, None),
            (2, Some(Discard::CutShort)),
            (3, Some(Discard::EndWithoutStart)),
            (4, Some(Discard::NoEffectiveTime)),
            (5, Some(Discard::PointCountMismatch)),
            (6, Some(Discard::StartWithoutEnd)),
            (7, Some(Discard::ControlMismatch)),
            (8, Some(Discard::NoDelayInserted)),
        ])
    );
    assert_eq!(report.discarded_experiments(), 7);
    assert_eq!(
        report.analyses[0].types[0].fit,
        Fit::NoSlope {
            reason: NoSlope::TooFewSpeedups,
            distinct_speedups: 1
        }
    );
}

/// A type with experiments but none at 0%: no slope, its experiments discarded for it.
#[test]
fn without_a_baseline_there_is_no_slope() {
    let config = one_point(&[("no_zero", 10)]);
    let planned = linear_experiments(1, 0, &[25, 50, 75, 100], 0.5, 0.0, &mut Noise::new(8));
    let report = analyze(&config, &example::records(&planned));
    let analysis = &report.analyses[0];
    assert_eq!(
        analysis.types[0].fit,
        Fit::NoSlope {
            reason: NoSlope::NoBaseline,
            distinct_speedups: 4
        }
    );
    assert_eq!(analysis.types[0].baseline, None);
    assert_eq!(analysis.discarded.len(), 4);
    assert!(analysis
        .discarded
        .iter()
        .all(|d| d.reason == Discard::NoBaseline));
}

/// A machine that gets 2% faster with every experiment, and a type with no effect whose
/// speedups rise over the run: each sped-up experiment between two 0% ones of the other
/// type, its own type's 0% experiments all at the end. Against the 0% experiments just
/// before and after it, whatever their type, the drift cancels and the slope is 0; against
/// its own type's nearest 0% experiment (far later, on a faster machine) it would be a
/// steep spurious one.
#[test]
fn a_drift_is_cancelled_by_the_baselines_on_both_sides() {
    const EFFECTIVE_NS: u64 = 100_000_000;
    let config = one_point(&[("other", 10), ("no_effect", 20)]);
    let mut noise = Noise::new(12);
    let mut planned = Vec::new();
    let mut add = |type_index: u32, speedup: u32| {
        let number = planned.len() as u32 + 1;
        let rate = 200_000.0 * (1.0 + 0.02 * f64::from(number));
        let rate = rate * (1.0 + 0.002 * noise.next_unit());
        let visits = (rate * EFFECTIVE_NS as f64 / 1e9).round() as u64;
        let delay_ns = EFFECTIVE_NS * u64::from(speedup) / 500;
        planned.push(Planned::even(
            number,
            type_index,
            speedup,
            EFFECTIVE_NS + delay_ns,
            delay_ns,
            &[visits],
        ));
    };
    for step in 1..=20 {
        add(0, 0);
        add(1, step * 5);
    }
    add(0, 0);
    for _ in 0..3 {
        add(1, 0);
    }
    let report = analyze(&config, &example::records(&planned));
    let s = only_slope(&report, 0, "no_effect");
    eprintln!(
        "drift, no effect: slope {:.4} [{:.4}, {:.4}], intercept {:.4}",
        s.slope, s.low, s.high, s.intercept
    );
    assert!(s.slope.abs() < 0.01 && s.intercept.abs() < 0.01, "{s:?}");
    assert!(s.within_noise, "{s:?}");
}

/// An end record read before its start (another CPU's ring) still pairs.
#[test]
fn records_pair_by_experiment_number_not_by_order() {
    let config = one_point(&[("a", 10)]);
    let mut records = example::records(&linear_experiments(
        1,
        0,
        &[0, 50, 0, 100, 0, 25],
        0.5,
        0.0,
        &mut Noise::new(9),
    ));
    records.swap(2, 3);
    let report = analyze(&config, &records);
    assert_eq!(report.discarded_experiments(), 0);
    assert!(report.analyses[0].types[0].fit.slope().is_some());
}

#[test]
fn the_example_profile_ranks_its_types() {
    let profile = Profile::from_vec(example::profile()).expect("valid");
    let report = analyze_profile(&profile).expect("experiments");
    let analysis = &report.analyses[0];
    let names: Vec<&str> = analysis.types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "skbuff_head_cache",
            "kmalloc-1k@__alloc_skb",
            "task_struct",
            "dentry",
            "filp"
        ]
    );
    for t in &analysis.types {
        if let Some(s) = t.fit.slope() {
            eprintln!(
                "example {}: slope {:.4} [{:.4}, {:.4}]",
                t.name, s.slope, s.low, s.high
            );
        }
    }
    let slope = |i: usize| *analysis.types[i].fit.slope().expect("a slope");
    assert!(slope(0).low <= 0.5 && 0.5 <= slope(0).high);
    assert!(slope(1).within_noise);
    assert!(slope(2).hurts && slope(2).low <= -0.4 && -0.4 <= slope(2).high);
    let groups: Vec<(Discard, bool, Vec<u32>)> = report
        .discard_groups()
        .into_iter()
        .map(|g| (g.reason, g.analysis.is_some(), g.experiments))
        .collect();
    assert_eq!(
        groups,
        [
            (Discard::TypeNotInTable, false, vec![33]),
            (Discard::EndWithoutStart, false, vec![32]),
            (Discard::CutShort, false, vec![31]),
            (Discard::NoDelayInserted, false, vec![35]),
            (Discard::ZeroVisits, true, vec![34]),
        ]
    );
    // The full analysis of the profile carries the same causal report.
    let full = crate::pipeline::analyze(&profile, &crate::pipeline::Options::default())
        .expect("valid records");
    assert_eq!(full.causal.as_ref(), Some(&report));
    let json = serde_json::to_string(&full).expect("serializes");
    let back: dprof_model::Report = serde_json::from_str(&json).expect("reads back");
    assert_eq!(back.causal, full.causal);
}

/// A line of a Coz profile as the viewer reads it: the first field is the type, the others
/// `key=value` split at the first `=`; integers where the viewer calls `parseInt`, which
/// stops at the first character that is not a digit, so a value must be digits only to mean
/// what it says.
#[derive(Debug)]
struct CozLine {
    kind: String,
    text: BTreeMap<String, String>,
}

impl CozLine {
    fn parse(line: &str) -> Self {
        let mut parts = line.split('\t');
        let kind = parts.next().unwrap_or_default().to_owned();
        let text = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Self { kind, text }
    }

    fn int(&self, key: &str) -> f64 {
        let v = &self.text[key];
        assert!(
            !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()),
            "{key}={v} is not what parseInt reads"
        );
        v.parse().expect("digits")
    }

    fn float(&self, key: &str) -> f64 {
        self.text[key].parse().expect("a number")
    }
}

/// What the viewer computes: per (selected, point), per speedup, its progress speedup
/// against speedup 0 (throughput: `1 - period / baseline period`; latency: the viewer's
/// sign).
fn viewer(text: &str) -> BTreeMap<(String, String), BTreeMap<u64, f64>> {
    #[derive(Default, Clone, Copy)]
    struct Acc {
        delta: f64,
        duration: f64,
        arrivals: f64,
        difference: f64,
        latency: bool,
    }
    let mut data: BTreeMap<(String, String), BTreeMap<u64, Acc>> = BTreeMap::new();
    let mut experiment: Option<CozLine> = None;
    for line in text.split('\n').filter(|l| !l.is_empty()) {
        let entry = CozLine::parse(line);
        match entry.kind.as_str() {
            "startup" | "shutdown" | "samples" | "runtime" => {}
            "experiment" => {
                entry.int("duration");
                entry.int("selected-samples");
                experiment = Some(entry);
            }
            kind @ ("throughput-point" | "latency-point") => {
                let e = experiment.as_ref().expect("a point follows an experiment");
                let key = (e.text["selected"].clone(), entry.text["name"].clone());
                let speedup = (e.float("speedup") * 1000.0).round() as u64;
                let acc = data.entry(key).or_default().entry(speedup).or_default();
                let duration = e.int("duration");
                if kind == "throughput-point" {
                    acc.delta += entry.int("delta");
                } else {
                    acc.latency = true;
                    acc.arrivals += entry.int("arrivals");
                    entry.int("departures");
                    // The viewer's running mean of `difference`, weighted by duration.
                    acc.difference = (acc.difference * acc.duration
                        + entry.int("difference") * duration)
                        / (acc.duration + duration);
                }
                acc.duration += duration;
            }
            other => panic!("the viewer rejects a line of type {other:?}"),
        }
    }
    data.into_iter()
        .filter_map(|(key, by_speedup)| {
            let point = |a: &Acc| {
                if a.latency {
                    a.difference / (a.arrivals / a.duration)
                } else {
                    a.duration / a.delta
                }
            };
            let base = by_speedup.get(&0)?;
            let b = point(base);
            let speedups = by_speedup
                .iter()
                .map(|(&s, a)| {
                    let progress = (b - point(a)) / b;
                    (s, if a.latency { -progress } else { progress })
                })
                .collect();
            Some((key, speedups))
        })
        .collect()
}

#[test]
fn coz_format_reads_back_through_the_viewers_rules() {
    let profile = Profile::from_vec(example::profile()).expect("valid");
    let report = analyze_profile(&profile).expect("experiments");
    let mut out = Vec::new();
    write_coz(&report, &mut out).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.starts_with("startup\ttime=0\n"), "{text}");
    assert!(
        text.contains("experiment\tselected=skbuff_head_cache\tspeedup=0.25\tduration=100000000\tselected-samples=400\nthroughput-point\tname=kprobe:tcp_sendmsg\tdelta="),
        "{text}"
    );
    assert!(text.contains("samples\tlocation=kmalloc-1k@__alloc_skb\tcount=900\n"));
    // Discarded experiments are not there: 30 used, 5 discarded.
    assert_eq!(text.matches("experiment\t").count(), 30);
    let seen = viewer(&text);
    assert_eq!(seen.len(), 3);
    let analysis = &report.analyses[0];
    for t in analysis.types.iter().filter(|t| t.fit.slope().is_some()) {
        let plotted = &seen[&(t.name.clone(), analysis.name.clone())];
        assert_eq!(plotted.len(), t.speedups.len());
        for p in &t.speedups {
            // The viewer plots 1 - 1 / (1 + s) where the causal view says s.
            let expected = 1.0 - 1.0 / (1.0 + p.program_speedup);
            let got = plotted[&(u64::from(p.speedup_percent) * 10)];
            assert!((got - expected).abs() < 1e-9, "{} {p:?}: {got}", t.name);
        }
    }
}

#[test]
fn coz_latency_points_give_the_viewer_the_latency() {
    // 4 us at 1 request per us: 4 in flight (5 through 20% of delay), integers, so nothing is
    // lost to rounding.
    let runs: Vec<(u32, f64)> = [0, 0, 100, 100].iter().map(|&s| (s, 4_000.0)).collect();
    let report = analyze(
        &latency_config(),
        &example::records(&latency_planned(&runs)),
    );
    let mut out = Vec::new();
    write_coz(&report, &mut out).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.contains("latency-point\tname=user:begin -> user:end\tarrivals=1000\tdepartures="),
        "{text}"
    );
    let seen = viewer(&text);
    let plotted = &seen[&("request".to_owned(), "user:begin -> user:end".to_owned())];
    for (&speedup, &progress) in plotted {
        assert!(progress.abs() < 0.01, "{speedup}: {progress}");
    }
}

/// Names with tabs cannot break Coz's lines.
#[test]
fn coz_fields_keep_to_their_line() {
    let config = one_point(&[("odd\tname\n", 10)]);
    let planned = linear_experiments(1, 0, &[0, 50, 100], 0.5, 0.0, &mut Noise::new(9));
    let report = analyze(&config, &example::records(&planned));
    let mut out = Vec::new();
    write_coz(&report, &mut out).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("selected=odd name \t"), "{text}");
    viewer(&text);
}

/// Every experiment discarded: the report says so, with the counts by reason and what to do
/// about the largest group.
#[test]
fn nothing_usable_says_why_the_report_is_empty() {
    let report = analyze(
        &example::example_config(),
        &example::records(&example::nothing_to_rank_planned()),
    );
    let empty = report.why_empty.clone().expect("nothing to rank");
    assert_eq!(empty.reason, EmptyCausalReason::NoUsableExperiment);
    assert_eq!(
        empty.message,
        "none of the 4 experiments could be used (2 sped up but no delay inserted (no sample \
         of the type's instructions), 2 zero visits for kprobe:tcp_sendmsg), so there is \
         nothing to rank or plot: no sample fell on the types' instructions during their \
         experiments; speed up types the workload touches while it runs, or sample more \
         often (--period)"
    );
    // Coz's format then has no experiment: what the warning is for.
    let mut out = Vec::new();
    write_coz(&report, &mut out).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(!text.contains("experiment\t"), "{text}");
}

/// Experiments used, but too few speedups for a slope: the report says which type lacks what.
#[test]
fn no_slope_says_why_the_report_is_empty() {
    let config = one_point(&[("short", 10), ("never", 5)]);
    let planned = linear_experiments(1, 0, &[0, 50, 0, 50, 0], 0.5, 0.0, &mut Noise::new(3));
    let report = analyze(&config, &example::records(&planned));
    let empty = report.why_empty.clone().expect("nothing to rank");
    assert_eq!(empty.reason, EmptyCausalReason::NoSlope);
    assert_eq!(
        empty.message,
        "no type has a slope (short for kprobe:tcp_sendmsg: 2 distinct speedups, 3 needed), \
         so there is nothing to rank: a slope needs a 0% baseline and 3 distinct virtual \
         speedups (run the session for longer)"
    );
}

/// `--fixed-speedup 20`: 20 pairs at 0% and 20%, program speedup 0.5 x virtual with +-2%
/// noise. The slope is the mean program speedup at 20% over 20%, its interval the mean's t
/// interval over 19 degrees of freedom, the line through the origin; the report says the
/// speedup was fixed.
#[test]
fn a_fixed_speedup_gives_the_mean_effect_over_the_speedup() {
    let mut config = one_point(&[("on_path", 10), ("off_path", 10)]);
    config.fixed_speedup_percent = Some(20);
    let pairs: Vec<u32> = (0..20).flat_map(|_| [0, 20]).chain([0]).collect();
    let planned = example::on_and_off_path(linear_experiments, &pairs, 0.5, 0.02, 5);
    let report = analyze(&config, &example::records(&planned));
    assert_eq!(report.fixed_speedup_percent, Some(20));
    let on = only_slope(&report, 0, "on_path");
    eprintln!(
        "fixed 20%, effect 0.5: slope {:.4} [{:.4}, {:.4}]",
        on.slope, on.low, on.high
    );
    assert!(on.low <= 0.5 && 0.5 <= on.high, "{on:?}");
    assert!((on.slope - 0.5).abs() < 0.1, "{on:?}");
    assert!(!on.within_noise && !on.hurts, "{on:?}");
    assert_eq!(
        (on.points, on.distinct_speedups, on.intercept),
        (20, 2, 0.0)
    );
    // t at 19 degrees of freedom.
    assert!((on.t_critical - 2.0930).abs() < 1e-3, "{on:?}");
    // The slope is exactly the mean of the sped-up points' program speedups over 0.2.
    let t = &report.analyses[0].types[0];
    let at_20: Vec<f64> = t
        .experiment_points
        .iter()
        .filter(|p| p.speedup_percent == 20)
        .map(|p| p.program_speedup)
        .collect();
    let mean = at_20.iter().sum::<f64>() / at_20.len() as f64;
    assert!(
        (on.slope - mean / 0.2).abs() < 1e-12,
        "{} vs {}",
        on.slope,
        mean / 0.2
    );
    let off = only_slope(&report, 0, "off_path");
    eprintln!(
        "fixed 20%, no effect: slope {:.4} [{:.4}, {:.4}]",
        off.slope, off.low, off.high
    );
    assert!(off.within_noise, "{off:?}");
    assert_eq!(report.analyses[0].types[0].name, "on_path");
    assert_eq!(report.why_empty, None);
}

/// `--fixed-speedup` with one sped-up experiment: no interval, and the report says what a
/// slope needs in that mode.
#[test]
fn a_fixed_speedup_needs_two_sped_up_experiments() {
    let mut config = one_point(&[("short", 10)]);
    config.fixed_speedup_percent = Some(50);
    let planned = linear_experiments(1, 0, &[0, 50, 0], 0.5, 0.0, &mut Noise::new(3));
    let report = analyze(&config, &example::records(&planned));
    let t = &report.analyses[0].types[0];
    assert_eq!(
        t.fit,
        Fit::NoSlope {
            reason: NoSlope::TooFewExperiments,
            distinct_speedups: 2
        }
    );
    let empty = report.why_empty.clone().expect("nothing to rank");
    assert_eq!(
        empty.message,
        "no type has a slope (short for kprobe:tcp_sendmsg: fewer than 2 sped-up \
         experiments), so there is nothing to rank: a slope needs a 0% baseline and 2 sped-up \
         experiments at the fixed speedup (run the session for longer)"
    );
}

/// A report with a slope is not empty.
/// Under load amplification every experiment's arrivals inserted their delay: each
/// experiment's share of it and its amplification come from the arrival point's visits,
/// the slope is measured as ever, a sped-up experiment whose type had no sample is still
/// discarded though arrivals inserted delay, and the text and Coz's format say it.
#[test]
fn amplified_load_is_measured_per_experiment() {
    const DELAY: u32 = 500_000;
    const ARRIVALS: u64 = 200;
    let mut config = example::config(
        &[("on_path", 10)],
        &["kprobe:depart", "kprobe:arrive"],
        None,
    );
    config.arrival = Some(1);
    config.arrival_delay_ns = u64::from(DELAY);
    let arrival_delay = ARRIVALS * u64::from(DELAY);
    let effective = 100_000_000u64;
    let mut planned: Vec<Planned> = coz_mix()
        .iter()
        .enumerate()
        .map(|(i, &speedup)| {
            let s = f64::from(speedup) / 100.0;
            // Departures per effective second: 1500 x (1 + 0.5 s).
            let departures = (150.0 * (1.0 + 0.5 * s)).round() as u64;
            let type_delay = (effective as f64 * 0.2 * s) as u64;
            let mut p = Planned::even(
                i as u32 + 1,
                0,
                speedup,
                effective + arrival_delay + type_delay,
                arrival_delay + type_delay,
                &[departures, ARRIVALS],
            );
            p.arrival_delay_ns = DELAY;
            p
        })
        .collect();
    let mut unsampled = Planned::even(
        100,
        0,
        50,
        effective + arrival_delay,
        arrival_delay,
        &[150, ARRIVALS],
    );
    unsampled.arrival_delay_ns = DELAY;
    unsampled.type_samples = 0;
    planned.push(unsampled);
    let report = analyze(&config, &example::records(&planned));
    let zero = report.experiments[0].measured.as_ref().expect("measured");
    assert_eq!(zero.arrival_delay_ns, arrival_delay);
    let amplification = zero.amplification().expect("effective time left");
    assert!((amplification - 2.0).abs() < 1e-9, "{amplification}");
    let last = report.experiments.last().expect("the unsampled one");
    assert_eq!(last.discarded, Some(Discard::NoDelayInserted));
    let [low, pooled, high] = report.amplification().expect("amplified");
    assert!((pooled - 2.0).abs() < 1e-9 && low <= pooled && pooled <= high);
    let slope = only_slope(&report, 0, "on_path");
    assert!((slope.slope - 0.5).abs() < 0.02, "{slope:?}");
    let note = report.load_note().expect("a load note");
    assert!(
        note.starts_with("load: amplified 2.00x") && note.contains("500.0 us"),
        "{note}"
    );
    let mut coz = Vec::new();
    write_coz(&report, &mut coz).expect("written");
    let coz = String::from_utf8(coz).expect("text");
    let experiments: Vec<&str> = coz
        .lines()
        .filter(|l| l.starts_with("experiment"))
        .collect();
    assert!(!experiments.is_empty());
    assert!(
        experiments
            .iter()
            .all(|l| l.ends_with("\tamplification=2.0000")),
        "{coz}"
    );
    // Arrivals without a speedup: a note, no amplification, no field.
    config.arrival_delay_ns = 0;
    for p in &mut planned {
        p.arrival_delay_ns = 0;
    }
    let plain = analyze(&config, &example::records(&planned));
    assert_eq!(plain.amplification(), None);
    assert!(plain
        .load_note()
        .expect("a load note")
        .contains("not amplified"));
    let mut coz = Vec::new();
    write_coz(&plain, &mut coz).expect("written");
    assert!(!String::from_utf8_lossy(&coz).contains("amplification"));
}

#[test]
fn a_ranking_has_no_why_empty() {
    let report = analyze(
        &example::example_config(),
        &example::records(&example::example_planned()),
    );
    assert_eq!(report.why_empty, None);
}

/// A table of functions: each entry says it is one, with its module, and the report's words
/// follow (no slope, nothing sampled, nothing usable) with the names as kallsyms writes them.
#[test]
fn code_units_are_named_as_functions_and_modules() {
    let config = example::functions_config();
    let report = analyze(&config, &example::records(&example::example_planned()));
    let labels: Vec<String> = report.types.iter().map(CausalType::label).collect();
    assert_eq!(
        labels,
        [
            "tcp_sendmsg",
            "copy_user_generic",
            "ext4_da_write_begin [ext4]"
        ]
    );
    assert_eq!(report.unit(), Some(CausalUnit::Function));
    assert_eq!(report.units_plural(), "functions");
    assert_eq!(report.types[2].module.as_deref(), Some("ext4"));
    // The ranking is the types' example's: the analysis does not depend on the unit.
    let slope = only_slope(&report, 0, "ext4_da_write_begin");
    assert!(slope.hurts, "{slope:?}");

    // Nothing usable: the remedy speaks of functions.
    let empty = analyze(
        &config,
        &example::records(&example::nothing_to_rank_planned()),
    )
    .why_empty
    .expect("nothing to rank");
    assert!(
        empty.message.ends_with(
            "no sample fell on the functions' instructions during their experiments; speed up \
             functions the workload executes while it runs, or sample more often (--period)"
        ),
        "{}",
        empty.message
    );

    // No sample on a function: said of its instructions, by its label.
    let mut planned = linear_experiments(1, 2, &[0, 50, 0, 100], 0.0, 0.0, &mut Noise::new(6));
    for p in &mut planned {
        p.type_samples = 0;
        p.wall_ns -= p.delay_ns;
        p.delay_ns = 0;
    }
    let report = analyze(&config, &example::records(&planned));
    assert!(
        report.unseen.iter().any(|l| l.starts_with(
            "no sample fell on the instructions of ext4_da_write_begin [ext4] during their \
             experiments"
        )),
        "{:?}",
        report.unseen
    );
    assert!(
        report
            .unseen
            .iter()
            .any(|l| l.starts_with("2 of 3 functions were never selected")),
        "{:?}",
        report.unseen
    );
    let empty = report.why_empty.expect("no slope");
    assert!(
        empty.message.starts_with(
            "no function has a slope (ext4_da_write_begin [ext4] for kprobe:tcp_sendmsg:"
        ),
        "{}",
        empty.message
    );

    // Modules: in brackets, with what the instruction cap left out.
    let report = analyze(
        &example::modules_config(),
        &example::records(&example::example_planned()),
    );
    assert_eq!(report.label_of(0), "[vmlinux]");
    assert_eq!(report.types[0].functions.len(), 3);
    assert!(
        report.unseen.contains(
            &"[vmlinux] was sped up in its 3 most sampled functions only: 31000 more of its \
              functions in scope did not fit in the 16384 instructions one entry takes"
                .to_owned()
        ),
        "{:?}",
        report.unseen
    );
    let mut out = Vec::new();
    write_coz(&report, &mut out).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.contains("experiment\tselected=[nf_tables]\t"),
        "{text}"
    );
    assert!(
        text.contains("samples\tlocation=[vmlinux]\tcount=900"),
        "{text}"
    );
}

/// End-to-end runs (`--end-to-end`): one visit per experiment, at its end, and a run's time
/// that shrinks with the type's speedup. Runs per effective second give the known slope back,
/// and the report says how the experiments were made.
#[test]
fn end_to_end_runs_give_the_known_slope() {
    let (kind, name) = dprof_format::END_TO_END_POINT;
    let mut config = example::config(
        &[("on_path", 10), ("off_path", 10)],
        &[&format!("{kind}:{name}")],
        None,
    );
    config.end_to_end_runs = Some(80);
    let planned = example::on_and_off_path(example::end_to_end_runs, &coz_mix(), 0.3, 0.01, 17);
    let report = analyze(&config, &example::records(&planned));
    assert_eq!(report.end_to_end_runs, Some(80));
    assert_eq!(report.points, ["end-to-end:run"]);
    assert!(report
        .experiments
        .iter()
        .all(|e| e.measured.as_ref().is_some_and(|m| m.points[0].visits == 1)));
    let on = only_slope(&report, 0, "on_path");
    eprintln!(
        "end to end, effect 0.3: slope {:.4} [{:.4}, {:.4}]",
        on.slope, on.low, on.high
    );
    assert!(on.low <= 0.3 && 0.3 <= on.high, "{on:?}");
    assert!(!on.within_noise, "{on:?}");
    let off = only_slope(&report, 0, "off_path");
    assert!(off.within_noise, "{off:?}");
    assert_eq!(report.analyses[0].types[0].name, "on_path");
}

/// An end-to-end session too short for a slope says to give it more runs.
#[test]
fn an_end_to_end_session_without_a_slope_asks_for_more_runs() {
    let (kind, name) = dprof_format::END_TO_END_POINT;
    let mut config = example::config(&[("on_path", 10)], &[&format!("{kind}:{name}")], None);
    config.end_to_end_runs = Some(2);
    let mut noise = Noise::new(3);
    let planned = example::end_to_end_runs(1, 0, &[0, 50], 0.3, 0.01, &mut noise);
    let report = analyze(&config, &example::records(&planned));
    let why = report.why_empty.expect("no slope from one pair");
    assert!(
        why.message.contains("give --end-to-end more runs than 2"),
        "{}",
        why.message
    );
}
