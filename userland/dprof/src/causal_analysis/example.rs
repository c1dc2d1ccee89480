//! Synthetic causal sessions with known answers: for the tests, the CLI's golden files and
//! the browser's snapshots.
//!
//! [`profile`] is a session over one throughput point, `kprobe:tcp_sendmsg`, with a type
//! table of five types whose effects are set when the visits are made up:
//! - `skbuff_head_cache`: program speedup = 0.5 x virtual speedup (on the critical path);
//! - `kmalloc-1k@__alloc_skb`: no effect, though it is the most sampled (rank 1 in the data
//!   profile, the two rankings disagree);
//! - `task_struct`: program speedup = -0.4 x virtual speedup (contention);
//! - `dentry` and `filp`: never selected (`filp` not even sampled in the planning phase);
//!
//! with +-1% of deterministic noise on each experiment's rate, and four experiments the
//! analysis must discard: one cut short, an end record without its start, one of a type
//! index outside the table, and one with no visit.

use dprof_abi::{
    ExperimentControl, ExperimentEnd, ExperimentStart, PointVisits, Record, EXPERIMENT_CUT_SHORT,
    MAX_PROGRESS_POINTS,
};

use super::ExperimentRecord;
use crate::profile::{CausalCollectConfig, CausalTypeSpec, ProfileHeader, ProgressPointSpec};

/// One experiment to make up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Its number.
    pub experiment: u32,
    /// Index in the type table.
    pub type_index: u32,
    /// Virtual speedup, percent.
    pub speedup_percent: u32,
    /// Wall time (ns).
    pub wall_ns: u64,
    /// Inserted delay (ns).
    pub delay_ns: u64,
    /// Samples on the type.
    pub type_samples: u64,
    /// `EXPERIMENT_*` flags.
    pub flags: u32,
    /// Per progress point: visits, and the sum of their times since the start (ns).
    pub visits: Vec<(u64, u64)>,
    /// Write the end record only (no start).
    pub without_start: bool,
}

impl Planned {
    /// An experiment whose visits of each point in `visits` fall evenly over its wall time.
    #[must_use]
    pub fn even(
        experiment: u32,
        type_index: u32,
        speedup_percent: u32,
        wall_ns: u64,
        delay_ns: u64,
        visits: &[u64],
    ) -> Self {
        Self {
            experiment,
            type_index,
            speedup_percent,
            wall_ns,
            delay_ns,
            type_samples: 400,
            flags: 0,
            // Visit i of n at (i + 1/2) wall / n: the sum is n x wall / 2.
            visits: visits
                .iter()
                .map(|&n| (n, (u128::from(n) * u128::from(wall_ns) / 2) as u64))
                .collect(),
            without_start: false,
        }
    }
}

/// A causal configuration: `types` as (name, planning samples), `points` as `kind:name`.
#[must_use]
pub fn config(
    types: &[(&str, u64)],
    points: &[&str],
    latency: Option<(usize, usize)>,
) -> CausalCollectConfig {
    CausalCollectConfig {
        points: points
            .iter()
            .map(|p| {
                let (kind, name) = p.split_once(':').unwrap_or(("user", p));
                ProgressPointSpec {
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                }
            })
            .collect(),
        latency,
        types: types
            .iter()
            .map(|&(name, plan_samples)| CausalTypeSpec {
                name: name.to_owned(),
                cache: None,
                ips: 4,
                plan_samples,
            })
            .collect(),
        plan_ns: Some(1_000_000_000),
        experiment_ns: 100_000_000,
        cooloff_ns: 10_000_000,
    }
}

/// The records of `planned`, in order: each experiment's start then its end, point totals
/// counted from the first.
#[must_use]
pub fn records(planned: &[Planned]) -> Vec<ExperimentRecord> {
    let mut totals = [0u64; MAX_PROGRESS_POINTS];
    let mut out = Vec::new();
    for p in planned {
        let control = ExperimentControl {
            experiment: p.experiment,
            type_index: p.type_index,
            speedup_percent: p.speedup_percent,
        };
        if !p.without_start {
            out.push(ExperimentRecord::Start(ExperimentStart {
                control,
                global_delay_ns: 0,
            }));
        }
        let mut points = [PointVisits::default(); MAX_PROGRESS_POINTS];
        for (i, &(visits, time_sum_ns)) in p.visits.iter().enumerate().take(MAX_PROGRESS_POINTS) {
            totals[i] += visits;
            points[i] = PointVisits {
                visits,
                time_sum_ns,
                total: totals[i],
            };
        }
        out.push(ExperimentRecord::End(ExperimentEnd {
            control,
            flags: p.flags,
            point_count: p.visits.len() as u32,
            wall_ns: p.wall_ns,
            delay_ns: p.delay_ns,
            paused_ns: p.delay_ns,
            credited_ns: 0,
            type_samples: p.type_samples,
            samples: p.type_samples * 10,
            points,
        }));
    }
    out
}

/// The library's example header with `config` as its causal configuration.
#[must_use]
pub fn header(config: &CausalCollectConfig) -> ProfileHeader {
    let mut header = crate::profile::example::example_header();
    header.config.events = vec!["samples".to_owned()];
    header.config.causal = Some(config.clone());
    header
}

/// A whole profile of `config` with the records of `planned` (one Records section).
#[must_use]
pub fn profile_of(config: &CausalCollectConfig, planned: &[Planned]) -> Vec<u8> {
    let mut time = 1_000_000u64;
    let chunk: Vec<(u32, u64, Record)> = records(planned)
        .into_iter()
        .map(|r| {
            time += 50_000_000;
            let record = match r {
                ExperimentRecord::Start(s) => Record::ExperimentStart(s),
                ExperimentRecord::End(e) => Record::ExperimentEnd(e),
            };
            (0, time, record)
        })
        .collect();
    crate::analysis::example::profile_with(
        &header(config),
        crate::analysis::example::KALLSYMS,
        &[chunk],
    )
}

/// Names of [`profile`]'s types, in table order.
pub const TYPES: [&str; 5] = [
    "skbuff_head_cache",
    "kmalloc-1k@__alloc_skb",
    "task_struct",
    "dentry",
    "filp",
];

/// The effect of each of [`profile`]'s selected types: program speedup per virtual speedup.
pub const EFFECTS: [f64; 3] = [0.5, 0.0, -0.4];

/// [`profile`]'s configuration.
#[must_use]
pub fn example_config() -> CausalCollectConfig {
    config(
        &[
            (TYPES[0], 500),
            (TYPES[1], 900),
            (TYPES[2], 300),
            (TYPES[3], 50),
            (TYPES[4], 0),
        ],
        &["kprobe:tcp_sendmsg"],
        None,
    )
}

/// Uniform noise in [-1, 1] from a fixed linear congruential sequence.
#[derive(Clone, Debug)]
pub struct Noise(u64);

impl Noise {
    /// A sequence starting from `seed`.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next value.
    pub fn next_unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// Experiments of one type whose rate is `base_rate x (1 + effect x speedup) x (1 + noise x
/// u)`, `u` uniform in [-1, 1], over 100 ms of effective time each, numbered from `first`.
#[must_use]
pub fn linear_experiments(
    first: u32,
    type_index: u32,
    speedups: &[u32],
    effect: f64,
    noise: f64,
    sequence: &mut Noise,
) -> Vec<Planned> {
    const EFFECTIVE_NS: u64 = 100_000_000;
    const BASE_RATE: f64 = 200_000.0;
    speedups
        .iter()
        .enumerate()
        .map(|(i, &speedup)| {
            let s = f64::from(speedup) / 100.0;
            let rate = BASE_RATE * (1.0 + effect * s) * (1.0 + noise * sequence.next_unit());
            let visits = (rate * EFFECTIVE_NS as f64 / 1e9).round() as u64;
            // Delay grows with the speedup, as it does when samples of the type pay it.
            let delay_ns = (EFFECTIVE_NS as f64 * 0.2 * s) as u64;
            Planned::even(
                first + i as u32,
                type_index,
                speedup,
                EFFECTIVE_NS + delay_ns,
                delay_ns,
                &[visits],
            )
        })
        .collect()
}

/// The speedups each of [`profile`]'s selected types is run at: half at 0%, as Coz does.
pub const SPEEDUPS: [u32; 10] = [0, 25, 0, 50, 0, 75, 0, 100, 0, 10];

/// [`profile`]'s experiments.
#[must_use]
pub fn example_planned() -> Vec<Planned> {
    let mut noise = Noise::new(11);
    let mut planned = Vec::new();
    for (type_index, effect) in EFFECTS.iter().enumerate() {
        planned.extend(linear_experiments(
            1 + 10 * type_index as u32,
            type_index as u32,
            &SPEEDUPS,
            *effect,
            0.01,
            &mut noise,
        ));
    }
    // The four the analysis must discard.
    let mut cut = Planned::even(31, 0, 30, 40_000_000, 1_000_000, &[8_000]);
    cut.flags = EXPERIMENT_CUT_SHORT;
    let mut orphan = Planned::even(32, 1, 20, 100_000_000, 2_000_000, &[20_000]);
    orphan.without_start = true;
    let outside = Planned::even(33, 7, 40, 100_000_000, 8_000_000, &[20_000]);
    let idle = Planned::even(34, 1, 0, 100_000_000, 0, &[0]);
    planned.extend([cut, orphan, outside, idle]);
    planned
}

/// The example session (see the module's doc).
#[must_use]
pub fn profile() -> Vec<u8> {
    profile_of(&example_config(), &example_planned())
}

/// [`profile`]'s experiments after the records of the data-profile example
/// ([`crate::analysis::example`]): a causal session whose planning phase kept its samples.
#[must_use]
pub fn profile_with_samples() -> Vec<u8> {
    let mut chunks: Vec<Vec<(u32, u64, Record)>> = crate::analysis::example::records().to_vec();
    let last = chunks
        .iter()
        .flatten()
        .map(|(_, t, _)| *t)
        .max()
        .unwrap_or(0);
    let experiments: Vec<(u32, u64, Record)> = records(&example_planned())
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let record = match r {
                ExperimentRecord::Start(s) => Record::ExperimentStart(s),
                ExperimentRecord::End(e) => Record::ExperimentEnd(e),
            };
            (0, last + 1_000 * (i as u64 + 1), record)
        })
        .collect();
    chunks.push(experiments);
    crate::analysis::example::profile_with(
        &header(&example_config()),
        crate::analysis::example::KALLSYMS,
        &chunks,
    )
}
