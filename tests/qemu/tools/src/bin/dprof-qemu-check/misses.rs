//! `dprof-qemu-check selftest-misses DIR`: the miss classification and working set views
//! against the `dprof_selftest.ko` workloads of `kmod/selftest/misses.rs`, one profile each,
//! whose causes of misses are known by construction:
//!
//! | profile           | type                    | accesses (function, CPU, offset)                   | class         |
//! |-------------------|-------------------------|----------------------------------------------------|---------------|
//! | `falseshare`      | `dprof_selftest_pair`   | `write_left` CPU 0 +0, `write_right` CPU 1 +32      | false sharing |
//! | `trueshare`       | `dprof_selftest_shared` | `share_write` CPU 0 +0, `share_read` CPU 1 +0       | true sharing  |
//! | `conflict`        | `dprof_selftest_stride` | `stride_touch` CPU 0 +0, objects a page apart      | conflict      |
//! | `capacity`        | `dprof_selftest_sweep`  | `sweep_touch` CPU 0, every line of 48 MiB          | capacity      |
//!
//! First what the raw records and the data profile show (the workloads did what they claim:
//! samples in the known functions on the known CPUs at the known offsets, histories with
//! both CPUs taking turns, objects placed at the stride), then the views:
//!
//! - each type's dominant class is its known one, by at least [`MIN_MARGIN_POINTS`];
//! - the false-sharing evidence names both fields and both functions, each as the writer
//!   before a miss of the other; the true-sharing evidence names both functions on `value`;
//! - the working set by set lists, in each conflicted set, exactly the selftest types placed
//!   there (the conflict type, with its objects there), and every set it must flag;
//! - the conflict type's lines lie in exactly the sets its objects' addresses map to (from
//!   the stride and the report's geometry), and the sets holding more lines than ways and at
//!   least twice the mean are exactly the flagged ones; the capacity type has no flagged set;
//! - the library's exact live-object count of the sweep type ([`LiveIndex`], what the working
//!   set view is drawn from) agrees with /proc/slabinfo's active objects, sampled in the guest
//!   during the run, within SLUB's per-CPU slack (see [`check_slabinfo`]); the view's series
//!   agrees with a count made here from the allocation and free records.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use dprof_abi::Record;
use dprof_analysis::decode::{DecodeOutcome, Decoder};
use dprof_analysis::pipeline::{Analyzer, Options};
use dprof_analysis::symbols::Kallsyms;
use dprof_analysis::views::LiveIndex;
use dprof_format::Profile;
use dprof_model::histories::HitCheck;
use serde_json::Value;

use super::json_report::{
    field_name_at, find_type, guest_vmlinux, percent, report_json, type_samples_in,
};

/// Share of a function's decoded samples that must resolve to the type, as in
/// selftest-data-profile.
const MIN_RESOLVED_PERCENT: f64 = 90.0;
/// Decoded samples each known function needs for its numbers to mean anything.
const MIN_FUNCTION_SAMPLES: u64 = 20;
/// Share of a type's samples that must come from its known functions at its known offsets.
/// The rest can only be other kernel code touching the objects (none does by design).
const MIN_KNOWN_PERCENT: f64 = 95.0;
/// Complete histories a sharing case needs.
const MIN_HISTORIES: usize = 10;
/// Share of the sharing cases' complete histories with accesses from both CPUs.
const MIN_BOTH_CPUS_PERCENT: f64 = 90.0;
/// The known class must hold at least this share of the type's samples...
///
/// By construction every access of each workload has its one cause: in the sharing cases
/// every access follows a write by the other CPU to the line (to other bytes: false sharing;
/// to the same bytes: true sharing) since this CPU last touched it, except CPU 0's first of
/// each round, 1 in 64 (expected 63/64 = 98.4%); the conflict type cycles 32 lines through
/// each of 8 sets of 2 or 16 ways (100%); the capacity type sweeps 48 MiB through 16 MiB in
/// order (100%). The margins leave room for histories whose other CPU started watching late.
const MIN_DOMINANT_PERCENT: f64 = 90.0;
/// ...and lead the runner-up by at least this many percentage points.
const MIN_MARGIN_POINTS: f64 = 80.0;
/// Samples of a type the classification is judged on at least.
const MIN_CLASSIFIED_SAMPLES: f64 = 100.0;
/// Sets of the capacity type: the fullest must hold less than this many times the mean lines
/// (the paper's conflict factor: 1 KiB objects on slab pages from the buddy allocator spread
/// over every set; measured: 1.00 at L1d and L2, 1.02 at L3).
const MAX_CAPACITY_SET_SKEW: f64 = 2.0;

/// One access function of a workload and what it is known to do.
struct KnownAccess {
    function: &'static str,
    cpu: u32,
    /// Offsets it touches in the object.
    offsets: &'static [u64],
    /// The field at those offsets (a prefix: `line` for `line[..]`).
    field: &'static str,
}

/// One workload: its profile, its type, its accesses and its class.
struct Case {
    profile: &'static str,
    type_name: &'static str,
    accesses: &'static [KnownAccess],
    class: &'static str,
}

const SWEEP_LINES: [u64; 16] = [
    0, 64, 128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960,
];

const FALSE_SHARING: Case = Case {
    profile: "falseshare.dprof",
    type_name: "dprof_selftest_pair",
    accesses: &[
        KnownAccess {
            function: "dprof_selftest_write_left",
            cpu: 0,
            offsets: &[0],
            field: "left",
        },
        KnownAccess {
            function: "dprof_selftest_write_right",
            cpu: 1,
            offsets: &[32],
            field: "right",
        },
    ],
    class: "false_sharing",
};

const TRUE_SHARING: Case = Case {
    profile: "trueshare.dprof",
    type_name: "dprof_selftest_shared",
    accesses: &[
        KnownAccess {
            function: "dprof_selftest_share_write",
            cpu: 0,
            offsets: &[0],
            field: "value",
        },
        KnownAccess {
            function: "dprof_selftest_share_read",
            cpu: 1,
            offsets: &[0],
            field: "value",
        },
    ],
    class: "true_sharing",
};

const CONFLICT: Case = Case {
    profile: "conflict.dprof",
    type_name: "dprof_selftest_stride",
    accesses: &[KnownAccess {
        function: "dprof_selftest_stride_touch",
        cpu: 0,
        offsets: &[0],
        field: "key",
    }],
    class: "conflict",
};

const CAPACITY: Case = Case {
    profile: "capacity.dprof",
    type_name: "dprof_selftest_sweep",
    accesses: &[KnownAccess {
        function: "dprof_selftest_sweep_touch",
        cpu: 0,
        offsets: &SWEEP_LINES,
        field: "line",
    }],
    class: "capacity",
};

/// Runs every check; failures are collected so that one report shows them all.
pub(crate) fn check(dir: &Path) -> Result<String> {
    let vmlinux = guest_vmlinux()?;
    let mut report = String::new();
    let mut failures = Vec::new();
    if let Ok(timings) = std::fs::read_to_string(dir.join("timings")) {
        writeln!(
            report,
            "guest time per case: {}",
            timings.trim().replace('\n', ", ")
        )?;
    }
    for case in [&FALSE_SHARING, &TRUE_SHARING, &CONFLICT, &CAPACITY] {
        let path = dir.join(case.profile);
        let profile = Profile::open(&path).with_context(|| format!("opening {}", case.profile))?;
        writeln!(
            report,
            "== {} ({}, known class {})",
            case.profile, case.type_name, case.class
        )?;
        let json = report_json(
            &path,
            &["--vmlinux", &vmlinux, "--debug-dir", &dir.to_string_lossy()],
        )?;
        check_data_profile(&profile, &json, case, &mut report, &mut failures)?;
        if case.accesses.len() == 2 {
            check_histories(&profile, case, &mut report, &mut failures)?;
        }
        let live = (case.class == "capacity")
            .then(|| LiveCount::of_cache(&profile, case.type_name))
            .transpose()?;
        if let Some(live) = &live {
            check_slabinfo(dir, &profile, live, &mut report, &mut failures)?;
        }
        let Some(misses) = json.get("misses").filter(|m| m.is_object()) else {
            failures.push(format!(
                "{}: the report has no miss classification (report.misses): this dprof does \
                 not compute the views",
                case.profile
            ));
            continue;
        };
        check_classification(misses, case, &mut report, &mut failures)?;
        let working_set = json.get("working_set").filter(|w| w.is_object());
        match (case.class, working_set) {
            (_, None) => failures.push(format!(
                "{}: the report has no working set view (report.working_set)",
                case.profile
            )),
            ("conflict", Some(ws)) => {
                check_conflict_sets(&profile, misses, ws, &mut report, &mut failures)?;
            }
            ("capacity", Some(ws)) => {
                check_capacity_sets(misses, ws, &mut report, &mut failures)?;
                if let Some(live) = &live {
                    check_live_series(ws, live, &mut report, &mut failures)?;
                }
            }
            _ => {}
        }
    }
    if failures.is_empty() {
        writeln!(report, "selftest-misses: all checks passed")?;
        Ok(report)
    } else {
        bail!("{report}\nFAILED:\n  {}", failures.join("\n  "))
    }
}

/// The workload did what it claims, as the data profile sees it: its functions' samples on
/// their CPUs, resolved to the type, at the known offsets and fields.
#[expect(
    clippy::too_many_lines,
    reason = "one linear report; splitting it would only scatter it"
)]
fn check_data_profile(
    profile: &Profile,
    json: &Value,
    case: &Case,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    // Ground truth per function: samples whose instruction touched memory (under TCG many
    // land on the instruction after an access, or on the return), and on which CPU.
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let mut decoder = Decoder::new();
    let mut on_access: BTreeMap<&str, u64> = BTreeMap::new();
    let mut off_cpu: BTreeMap<&str, u64> = BTreeMap::new();
    for item in profile.records() {
        let (header, record) = item.context("reading the profile")?;
        let Record::AccessSample(sample) = record else {
            continue;
        };
        let Some(location) = kallsyms.lookup(sample.ip) else {
            continue;
        };
        let Some(known) = case
            .accesses
            .iter()
            .find(|a| a.function == location.symbol.name)
        else {
            continue;
        };
        if matches!(decoder.access(&sample), DecodeOutcome::Access(_)) {
            *on_access.entry(known.function).or_default() += 1;
            if header.cpu != known.cpu {
                *off_cpu.entry(known.function).or_default() += 1;
            }
        }
    }
    let ty = find_type(json, case.type_name)?;
    let type_samples = ty["samples"].as_u64().unwrap_or(0);
    let mut known_samples = 0;
    for known in case.accesses {
        let total = on_access.get(known.function).copied().unwrap_or(0);
        let resolved = type_samples_in(ty, known.function);
        known_samples += resolved;
        let pct = percent(resolved, total);
        let wrong_cpu = off_cpu.get(known.function).copied().unwrap_or(0);
        writeln!(
            report,
            "  {}: {total} samples on its accesses (all on CPU {}: {}), {resolved} resolve to {} \
             ({pct:.1}%, want >= {MIN_RESOLVED_PERCENT}%)",
            known.function,
            known.cpu,
            if wrong_cpu == 0 {
                "yes".to_string()
            } else {
                format!("no, {wrong_cpu} elsewhere")
            },
            case.type_name
        )?;
        if total < MIN_FUNCTION_SAMPLES {
            failures.push(format!(
                "{}: only {total} samples on its accesses (want >= {MIN_FUNCTION_SAMPLES})",
                known.function
            ));
        } else if pct < MIN_RESOLVED_PERCENT {
            failures.push(format!(
                "{}: {pct:.1}% of its samples resolve to {}",
                known.function, case.type_name
            ));
        }
        if wrong_cpu > 0 {
            failures.push(format!(
                "{}: {wrong_cpu} samples on another CPU than {}",
                known.function, known.cpu
            ));
        }
        for &offset in known.offsets {
            let field = field_name_at(ty, offset);
            if !field.as_deref().is_some_and(|f| f.starts_with(known.field)) {
                failures.push(format!(
                    "{} offset {offset}: field {field:?}, want {}",
                    case.type_name, known.field
                ));
            }
        }
    }
    // Every known offset sampled, and nothing else of the type sampled to speak of.
    let known_offsets: BTreeSet<u64> = case
        .accesses
        .iter()
        .flat_map(|a| a.offsets.iter().copied())
        .collect();
    let mut at_known_offsets = 0;
    let mut sampled_offsets = BTreeSet::new();
    for field in ty["fields"].as_array().into_iter().flatten() {
        let (Some(offset), Some(samples)) = (field["offset"].as_u64(), field["samples"].as_u64())
        else {
            continue;
        };
        if known_offsets.contains(&offset) && samples > 0 {
            at_known_offsets += samples;
            sampled_offsets.insert(offset);
        }
    }
    let from_known = percent(known_samples, type_samples);
    let at_known = percent(at_known_offsets, type_samples);
    writeln!(
        report,
        "  {}: {type_samples} samples, {from_known:.1}% from the known functions, {at_known:.1}% at \
         the known offsets ({} of {} offsets sampled), want >= {MIN_KNOWN_PERCENT}% each",
        case.type_name,
        sampled_offsets.len(),
        known_offsets.len()
    )?;
    if from_known < MIN_KNOWN_PERCENT || at_known < MIN_KNOWN_PERCENT {
        failures.push(format!(
            "{}: {from_known:.1}% of its samples from the known functions, {at_known:.1}% at the \
             known offsets",
            case.type_name
        ));
    }
    if sampled_offsets != known_offsets {
        failures.push(format!(
            "{}: offsets sampled {sampled_offsets:?}, want all of {known_offsets:?}",
            case.type_name
        ));
    }
    Ok(())
}

/// The sharing cases' histories: complete, accesses from both CPUs taking turns, each by the
/// known function on the known CPU at the known range.
fn check_histories(
    profile: &Profile,
    case: &Case,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let histories = dprof_analysis::histories::assemble(profile, &kallsyms)
        .context("assembling the histories")?;
    let function = |ip: u64| kallsyms.lookup(ip).map(|l| l.symbol.name.clone());
    let (mut complete, mut both_cpus, mut hits, mut known_hits, mut changes) = (0, 0, 0, 0, 0);
    let mut writes_by_cpu: BTreeMap<u32, u64> = BTreeMap::new();
    for history in histories
        .histories
        .iter()
        .filter(|h| h.type_name == case.type_name && h.is_complete())
    {
        complete += 1;
        // QEMU's TCG reports traps for unaligned stores elsewhere in the page; real debug
        // registers do not. They are the machine's, not accesses.
        let history = history.without_mismatches();
        let cpus: BTreeSet<u32> = history.hits.iter().map(|h| h.cpu).collect();
        both_cpus += usize::from(cpus.len() == 2);
        // Hits that follow one on the other CPU: the free's CPU change is no turn taken.
        changes += history.hits.iter().filter(|h| h.cpu_change).count() as u64;
        for hit in &history.hits {
            hits += 1;
            let name = function(hit.ip());
            let known = case.accesses.iter().any(|a| {
                name.as_deref() == Some(a.function)
                    && hit.cpu == a.cpu
                    && a.offsets.contains(&u64::from(hit.range.offset))
            });
            known_hits += u64::from(known);
            if hit.check == HitCheck::Verified
                && hit.kind.is_some_and(|k| k != dprof_model::AccessKind::Read)
            {
                *writes_by_cpu.entry(hit.cpu).or_default() += 1;
            }
        }
    }
    let both_pct = percent(both_cpus as u64, complete as u64);
    writeln!(
        report,
        "  histories: {complete} complete, {both_pct:.0}% with accesses from both CPUs (want >= \
         {MIN_BOTH_CPUS_PERCENT}%), {hits} hits ({known_hits} by the known function, CPU and \
         range), {changes} CPU changes, verified writes per CPU {writes_by_cpu:?}"
    )?;
    if complete < MIN_HISTORIES {
        failures.push(format!(
            "{}: only {complete} complete histories (want >= {MIN_HISTORIES})",
            case.type_name
        ));
    }
    if both_pct < MIN_BOTH_CPUS_PERCENT {
        failures.push(format!(
            "{}: {both_pct:.0}% of histories have accesses from both CPUs",
            case.type_name
        ));
    }
    if known_hits != hits {
        failures.push(format!(
            "{}: {} of {hits} hits are not a known function on its CPU and range",
            case.type_name,
            hits - known_hits
        ));
    }
    // The CPUs take turns: nearly every hit follows one on the other CPU.
    if changes * 10 < hits * 9 {
        failures.push(format!(
            "{}: {changes} CPU changes in {hits} hits: the CPUs did not take turns",
            case.type_name
        ));
    }
    if writes_by_cpu.len() != 2 {
        failures.push(format!(
            "{}: writes from CPUs {:?}, want both",
            case.type_name,
            writes_by_cpu.keys().collect::<Vec<_>>()
        ));
    }
    Ok(())
}

fn misses_type<'a>(misses: &'a Value, name: &str) -> Option<&'a Value> {
    misses["types"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
}

/// The type's dominant class is the known one, by the stated share and margin; for the
/// sharing cases, the evidence names both functions and fields.
fn check_classification(
    misses: &Value,
    case: &Case,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let Some(ty) = misses_type(misses, case.type_name) else {
        failures.push(format!(
            "{}: not in the miss classification",
            case.type_name
        ));
        return Ok(());
    };
    let mut classes: Vec<(String, f64)> = ty["classes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| Some((c["class"].as_str()?.to_string(), c["percent"].as_f64()?)))
        .collect();
    classes.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total = ty["total"].as_f64().unwrap_or(0.0);
    let share = classes
        .iter()
        .find(|(c, _)| c == case.class)
        .map_or(0.0, |&(_, p)| p);
    let runner_up = classes
        .iter()
        .filter(|(c, _)| c != case.class)
        .map(|&(_, p)| p)
        .fold(0.0, f64::max);
    let margin = share - runner_up;
    let listed: Vec<String> = classes
        .iter()
        .map(|(c, p)| format!("{c} {p:.1}%"))
        .collect();
    writeln!(
        report,
        "  classification of {total:.0} samples: {}; dominant {} by {:.1} points (reported); {} \
         leads by {margin:.1} points (want {} >= {MIN_DOMINANT_PERCENT}% and a lead >= \
         {MIN_MARGIN_POINTS} points)",
        listed.join(", "),
        ty["dominant"],
        ty["margin"].as_f64().unwrap_or(f64::NAN),
        case.class,
        case.class
    )?;
    if total < MIN_CLASSIFIED_SAMPLES {
        failures.push(format!(
            "{}: only {total} classified samples (want >= {MIN_CLASSIFIED_SAMPLES})",
            case.type_name
        ));
    }
    if ty["dominant"] != case.class {
        failures.push(format!(
            "{}: dominant class {}, want {}",
            case.type_name, ty["dominant"], case.class
        ));
    }
    if share < MIN_DOMINANT_PERCENT || margin < MIN_MARGIN_POINTS {
        failures.push(format!(
            "{}: {} holds {share:.1}% and leads by {margin:.1} points",
            case.type_name, case.class
        ));
    }
    if (ty["margin"].as_f64().unwrap_or(f64::NAN) - margin).abs() > 0.05 && margin > 0.0 {
        failures.push(format!(
            "{}: reported margin {} disagrees with the classes ({margin:.2})",
            case.type_name, ty["margin"]
        ));
    }
    if case.accesses.len() == 2 {
        check_sharing_evidence(ty, case, report, failures)?;
    }
    Ok(())
}

/// Each known access appears as the miss after a write by the other known access (the
/// evidence of a sharing miss: the remote writer, and the access that missed).
fn check_sharing_evidence(
    ty: &Value,
    case: &Case,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let site = |s: &Value| {
        format!(
            "{} CPU {} +{} {}",
            s["function"].as_str().unwrap_or("?"),
            s["cpu"],
            s["offset"],
            s["field"].as_str().unwrap_or("?")
        )
    };
    let matches = |s: &Value, a: &KnownAccess| {
        s["function"]
            .as_str()
            .is_some_and(|f| f.split([' ', '+']).next() == Some(a.function))
            && s["cpu"] == a.cpu
            && s["field"].as_str().is_some_and(|f| f.starts_with(a.field))
            && s["offset"].as_u64().is_some_and(|o| a.offsets.contains(&o))
    };
    let evidence: Vec<&Value> = ty["sharing"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["class"] == case.class)
        .collect();
    for e in evidence.iter().take(4) {
        writeln!(
            report,
            "  evidence (seen {} times in histories): {} wrote, then {} missed",
            e["count"],
            site(&e["writer"]),
            site(&e["missing"])
        )?;
    }
    let [first, second] = case.accesses else {
        bail!("a sharing case has two accesses");
    };
    for (writer, missing) in [(first, second), (second, first)] {
        let found = evidence
            .iter()
            .any(|e| matches(&e["writer"], writer) && matches(&e["missing"], missing));
        if !found {
            failures.push(format!(
                "{}: no {} evidence of {} (CPU {}, {}) writing before {} (CPU {}, {}) missed",
                case.type_name,
                case.class,
                writer.function,
                writer.cpu,
                writer.field,
                missing.function,
                missing.cpu,
                missing.field
            ));
        }
    }
    Ok(())
}

/// A cache level of the report's geometry; histograms and flags name it (`L1d`).
#[derive(Clone, Debug)]
struct CacheLevel {
    name: String,
    sets: u64,
    ways: u64,
    line: u64,
}

fn geometry(misses: &Value) -> Result<Vec<CacheLevel>> {
    let levels: Vec<CacheLevel> = misses["geometry"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| {
            Some(CacheLevel {
                name: g["name"].as_str()?.to_string(),
                sets: g["sets"].as_u64().filter(|&s| s > 0)?,
                ways: g["ways"].as_u64().filter(|&w| w > 0)?,
                line: g["line_bytes"].as_u64().filter(|&l| l > 0)?,
            })
        })
        .collect();
    ensure!(!levels.is_empty(), "the report gives no cache geometry");
    Ok(levels)
}

/// The histogram of `type_name` at `level` in the working set view.
fn histogram<'a>(ws: &'a Value, type_name: &str, level: &CacheLevel) -> Option<&'a Value> {
    ws["types"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == type_name)?["histograms"]
        .as_array()?
        .iter()
        .find(|h| h["level"] == level.name.as_str())
}

fn flagged(value: &Value) -> BTreeSet<u64> {
    value["flagged_sets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect()
}

/// `(lines, sets with lines)` of a histogram.
fn histogram_totals(h: &Value) -> (u64, u64) {
    h["lines_per_set"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| Some((b["lines"].as_u64()?, b["sets"].as_u64()?)))
        .filter(|&(lines, _)| lines > 0)
        .fold((0, 0), |(l, s), (lines, sets)| (l + lines * sets, s + sets))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The conflict type: its objects are a stride apart (every allocation on a slot boundary),
/// so its lines can only fall in the sets that are multiples of gcd(stride / line, sets).
/// From the objects' own addresses the check computes each set's lines and which sets must be
/// flagged (more lines than ways and at least twice the mean over all sets), and wants the
/// report's histogram and flags to be exactly that.
#[expect(
    clippy::too_many_lines,
    reason = "one linear report; splitting it would only scatter it"
)]
fn check_conflict_sets(
    profile: &Profile,
    misses: &Value,
    ws: &Value,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let name = CONFLICT.type_name;
    // A CacheInfo may follow records of its cache in file order: match after the pass.
    let mut cache = None;
    let mut stride = 0u64;
    let mut allocs = Vec::new();
    for item in profile.records() {
        match item.context("reading the profile")?.1 {
            Record::CacheInfo(info) if info.name_bytes() == name.as_bytes() => {
                cache = Some(info.cache);
                stride = u64::from(info.size);
            }
            Record::Alloc(a) => allocs.push((a.cache, a.ptr)),
            _ => {}
        }
    }
    ensure!(stride > 0, "no CacheInfo for {name}");
    let objects: BTreeSet<u64> = allocs
        .iter()
        .filter(|&&(c, _)| Some(c) == cache)
        .map(|&(_, p)| p)
        .collect();
    let off_stride = objects.iter().filter(|&&p| p % stride != 0).count();
    writeln!(
        report,
        "  {} objects of {name}, stride {stride} bytes (the slot size), {off_stride} not on a \
         multiple of it",
        objects.len()
    )?;
    ensure!(
        off_stride == 0 && !objects.is_empty(),
        "{name}: objects are not placed at the stride: the workload is wrong"
    );
    // The histograms show a type at its peak: here every object at once.
    let peak = LiveCount::of_cache(profile, name)?.peak();
    ensure!(
        peak == objects.len() as i64,
        "{name}: {peak} objects live at the peak, not all {}: the workload is wrong",
        objects.len()
    );
    let ty = misses_type(misses, name);
    let mut flagged_somewhere = false;
    for level in geometry(misses)? {
        // Expected: from the stride and the geometry, the sets that can hold a line; from the
        // addresses (offset 0, the only one touched), the lines of each set.
        let step = gcd((stride / level.line).max(1), level.sets);
        let reachable = level.sets / step;
        let mut per_set: BTreeMap<u64, u64> = BTreeMap::new();
        for &p in &objects {
            *per_set.entry((p / level.line) % level.sets).or_default() += 1;
        }
        let lines = objects.len() as u64;
        let mean = lines as f64 / level.sets as f64;
        let want_flagged: BTreeSet<u64> = per_set
            .iter()
            .filter(|&(_, &n)| n > level.ways && n as f64 >= 2.0 * mean)
            .map(|(&s, _)| s)
            .collect();
        let stray = per_set.keys().filter(|&&s| s % step != 0).count();
        ensure!(
            stray == 0,
            "{name}: a set off the stride's multiples: the arithmetic is wrong"
        );
        let Some(h) = histogram(ws, name, &level) else {
            failures.push(format!(
                "{name}: no {} histogram in the working set",
                level.name
            ));
            continue;
        };
        let (h_lines, h_sets) = histogram_totals(h);
        let h_flagged = flagged(h);
        let conflict = ty.and_then(|t| {
            t["conflict"]
                .as_array()?
                .iter()
                .find(|c| c["level"] == level.name.as_str())
        });
        let c_flagged = conflict.map(flagged).unwrap_or_default();
        let c_lines = conflict.and_then(|c| c["lines_in_flagged_sets"].as_u64());
        writeln!(
            report,
            "  {}: {} sets x {} ways: lines can only fall in the {reachable} sets that are \
             multiples of {step}; the {lines} objects use {} of them (max {} lines, mean {mean:.2} \
             over all sets), so {} must be flagged; histogram: {h_lines} lines in {h_sets} sets, \
             flagged {}; classification flags {} with {c_lines:?} lines",
            level.name,
            level.sets,
            level.ways,
            per_set.len(),
            per_set.values().max().unwrap_or(&0),
            want_flagged.len(),
            h_flagged.len(),
            c_flagged.len()
        )?;
        if h_lines != lines || h_sets != per_set.len() as u64 {
            failures.push(format!(
                "{name} {}: histogram has {h_lines} lines in {h_sets} sets, the objects give \
                 {lines} lines in {} sets",
                level.name,
                per_set.len()
            ));
        }
        if h_flagged != want_flagged || c_flagged != want_flagged {
            failures.push(format!(
                "{name} {}: flagged sets {h_flagged:?} (histogram), {c_flagged:?} \
                 (classification), want {want_flagged:?}",
                level.name
            ));
        }
        check_sets_by_type(ws, &level, &want_flagged, &per_set, report, failures)?;
        let want_in_flagged: u64 = want_flagged.iter().map(|s| per_set[s]).sum();
        if !want_flagged.is_empty() && c_lines != Some(want_in_flagged) {
            failures.push(format!(
                "{name} {}: {c_lines:?} lines in flagged sets, want {want_in_flagged}",
                level.name
            ));
        }
        flagged_somewhere |= !want_flagged.is_empty();
    }
    if !flagged_somewhere {
        failures.push(format!(
            "{name}: no level has a set to flag: the workload is too small"
        ));
    }
    Ok(())
}

/// The working set by set (`working_set.by_set`, all types together, the paper's section
/// 3.2): at `level`, every set the conflict type must flag is among the conflicted sets, and
/// every conflicted set lists exactly the selftest types placed there: the conflict type
/// alone, with as many objects as its addresses put in that set.
fn check_sets_by_type(
    ws: &Value,
    level: &CacheLevel,
    want_flagged: &BTreeSet<u64>,
    per_set: &BTreeMap<u64, u64>,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let name = CONFLICT.type_name;
    let Some(sets) = ws["by_set"]
        .as_array()
        .and_then(|levels| levels.iter().find(|l| l["level"] == level.name.as_str()))
    else {
        failures.push(format!("no {} sets in working_set.by_set", level.name));
        return Ok(());
    };
    let occupied = sets["occupied"].as_array().context("by_set.occupied")?;
    let conflicted: BTreeMap<u64, &Value> = occupied
        .iter()
        .filter(|s| s["conflicted"] == true)
        .filter_map(|s| Some((s["set"].as_u64()?, s)))
        .collect();
    let mut wrong = Vec::new();
    for (&set, occupants) in &conflicted {
        let selftest: BTreeMap<&str, u64> = occupants["types"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| Some((t["name"].as_str()?, t["objects"].as_u64()?)))
            .filter(|(n, _)| n.starts_with("dprof_selftest_"))
            .collect();
        let want: BTreeMap<&str, u64> = per_set.get(&set).map(|&n| (name, n)).into_iter().collect();
        if selftest != want {
            wrong.push(format!("set {set}: {selftest:?}, want {want:?}"));
        }
    }
    let missing: Vec<u64> = want_flagged
        .iter()
        .filter(|s| !conflicted.contains_key(s))
        .copied()
        .collect();
    writeln!(
        report,
        "  {} by set: {} conflicted sets, all types together; {} of the {} sets {name} must flag \
         among them; selftest types listed wrongly in {}",
        level.name,
        conflicted.len(),
        want_flagged.len() - missing.len(),
        want_flagged.len(),
        wrong.len()
    )?;
    if !missing.is_empty() {
        failures.push(format!(
            "{name} {}: sets {missing:?} are not conflicted in the by-set view",
            level.name
        ));
    }
    if !wrong.is_empty() {
        failures.push(format!(
            "{} by set: conflicted sets list other selftest types than those placed there: {}",
            level.name,
            wrong.join("; ")
        ));
    }
    Ok(())
}

/// The capacity type: no flagged set at any level, lines spread evenly, a working set larger
/// than the cache it is judged against.
fn check_capacity_sets(
    misses: &Value,
    ws: &Value,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let name = CAPACITY.type_name;
    for level in geometry(misses)? {
        let Some(h) = histogram(ws, name, &level) else {
            failures.push(format!(
                "{name}: no {} histogram in the working set",
                level.name
            ));
            continue;
        };
        let (lines, sets) = histogram_totals(h);
        let max = h["max_lines_per_set"].as_f64().unwrap_or(0.0);
        let mean = h["mean_lines_per_set"].as_f64().unwrap_or(0.0);
        let skew = if mean > 0.0 {
            max / mean
        } else {
            f64::INFINITY
        };
        let h_flagged = flagged(h);
        writeln!(
            report,
            "  {}: {lines} lines in {sets} of {} sets, max {max} per set, mean {mean:.1} (max/mean \
             {skew:.2}, want < {MAX_CAPACITY_SET_SKEW}), flagged {}",
            level.name,
            level.sets,
            h_flagged.len()
        )?;
        if !h_flagged.is_empty() {
            failures.push(format!(
                "{name} {}: {} sets flagged as conflict",
                level.name,
                h_flagged.len()
            ));
        }
        if skew >= MAX_CAPACITY_SET_SKEW {
            failures.push(format!(
                "{name} {}: lines spread unevenly (max/mean {skew:.2})",
                level.name
            ));
        }
    }
    let ty = misses_type(misses, name);
    let conflict_flags: usize = ty
        .and_then(|t| t["conflict"].as_array())
        .into_iter()
        .flatten()
        .map(|c| flagged(c).len())
        .sum();
    if conflict_flags > 0 {
        failures.push(format!(
            "{name}: the classification flags {conflict_flags} sets"
        ));
    }
    let capacity = ty.map(|t| &t["capacity"]);
    match capacity.filter(|c| c.is_object()) {
        Some(c) => {
            let (ws_bytes, cache_bytes) = (
                c["working_set_bytes"].as_u64().unwrap_or(0),
                c["cache_bytes"].as_u64().unwrap_or(u64::MAX),
            );
            writeln!(
                report,
                "  capacity evidence: working set {ws_bytes} bytes over the {} cache of \
                 {cache_bytes} bytes, {} of its sets covered",
                c["level"], c["sets_covered_fraction"]
            )?;
            if ws_bytes <= cache_bytes {
                failures.push(format!(
                    "{name}: capacity evidence with a working set of {ws_bytes} bytes, not over \
                     the cache's {cache_bytes}"
                ));
            }
        }
        None => failures.push(format!("{name}: no capacity evidence")),
    }
    Ok(())
}

/// One /proc/slabinfo reading of the sweep cache, bracketed by two clock readings.
struct SlabinfoSample {
    begin_ns: u64,
    end_ns: u64,
    active: u64,
}

/// The samples, and SLUB's bound on active minus live objects: per CPU, its active slab and
/// up to `cpu_partial_slabs` partial slabs hold free objects that /proc/slabinfo counts as
/// active; mm/slub.c sizes that list as `DIV_ROUND_UP(cpu_partial * 2, objects per slab)`.
fn read_slabinfo_samples(path: &Path, cpus: u64) -> Result<(Vec<SlabinfoSample>, u64)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .context("empty slabinfo samples")?
        .split_whitespace()
        .collect();
    let field = |key: &str| -> Result<u64> {
        let at = header
            .iter()
            .position(|&w| w == key)
            .with_context(|| format!("no {key} in the samples' header"))?;
        Ok(header.get(at + 1).context("header cut")?.parse()?)
    };
    let per_slab = field("objs_per_slab")?.max(1);
    let cpu_partial_slabs = (field("cpu_partial")? * 2).div_ceil(per_slab);
    let slack = per_slab * cpus * (1 + cpu_partial_slabs);
    let mut samples = Vec::new();
    for line in lines {
        let f: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .with_context(|| format!("bad sample line {line:?}"))?;
        let [begin_ns, end_ns, active, _total] = f[..] else {
            bail!("bad sample line {line:?}");
        };
        samples.push(SlabinfoSample {
            begin_ns,
            end_ns,
            active,
        });
    }
    Ok((samples, slack))
}

/// Live objects of one cache over time, from the profile's allocations and frees.
struct LiveCount {
    /// (time, live objects after the event), in time order.
    steps: Vec<(u64, i64)>,
}

impl LiveCount {
    fn of_cache(profile: &Profile, name: &str) -> Result<Self> {
        // A CacheInfo may follow records of its cache in file order: match after the pass.
        let mut cache = None;
        let mut all = Vec::new();
        for item in profile.records() {
            let (header, record) = item.context("reading the profile")?;
            match record {
                Record::CacheInfo(info) if info.name_bytes() == name.as_bytes() => {
                    cache = Some(info.cache);
                }
                Record::Alloc(a) => all.push((a.cache, header.time_ns, 1i64)),
                Record::Free(f) => all.push((f.cache, header.time_ns, -1)),
                _ => {}
            }
        }
        let cache = cache.with_context(|| format!("no CacheInfo for {name}"))?;
        let mut events: Vec<(u64, i64)> = all
            .into_iter()
            .filter(|&(c, _, _)| c == cache)
            .map(|(_, t, d)| (t, d))
            .collect();
        events.sort_unstable();
        let mut live = 0;
        let steps = events
            .into_iter()
            .map(|(t, d)| {
                live += d;
                (t, live)
            })
            .collect();
        Ok(Self { steps })
    }

    /// Most objects live at once.
    fn peak(&self) -> i64 {
        self.steps.iter().map(|&(_, n)| n).max().unwrap_or(0)
    }

    /// Live objects at `t`.
    fn at(&self, t: u64) -> i64 {
        let after = self.steps.partition_point(|&(s, _)| s <= t);
        after.checked_sub(1).map_or(0, |i| self.steps[i].1)
    }

    /// `begin`, then the time of every allocation or free in `(begin, end]`: where the count
    /// can take each of the values it has in `[begin, end]`.
    fn times_in(&self, begin: u64, end: u64) -> impl Iterator<Item = u64> + '_ {
        let from = self.steps.partition_point(|&(s, _)| s <= begin);
        let to = self.steps.partition_point(|&(s, _)| s <= end);
        std::iter::once(begin).chain(self.steps[from..to].iter().map(|&(t, _)| t))
    }
}

/// The library's exact live-object index of a profile, as the working set view computes it.
fn library_live_index(profile: &Profile) -> Result<LiveIndex> {
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let mut analyzer = Analyzer::new(profile.header(), &kallsyms, &Options::default());
    analyzer.record_views();
    for item in profile.records() {
        let (header, record) = item.context("reading the profile")?;
        analyzer.push(&header, &record);
    }
    let (_, _, recorded) = analyzer.finish_with_views();
    Ok(LiveIndex::from_recorded(
        &recorded.context("the analysis recorded nothing for the views")?,
    ))
}

/// /proc/slabinfo's active objects, sampled in the guest while the capacity workload grew and
/// shrank, against the library's exact live count: `live_min <= active <= live_max + slack`
/// over each sample's clock bracket, the count taken at both ends and at every allocation or
/// free between (SLUB counts free objects of per-CPU slabs as active, never fewer than the
/// live ones, except objects KFENCE served, which it does not count at all; on a KASAN kernel
/// freed objects stay active while quarantined, so only the lower bound holds). The library's
/// count must also equal the one made here from the records.
fn check_slabinfo(
    dir: &Path,
    profile: &Profile,
    live: &LiveCount,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let name = CAPACITY.type_name;
    let cpus = u64::from(profile.header().online_cpus);
    let (samples, slack) = read_slabinfo_samples(&dir.join("slabinfo.samples"), cpus)?;
    // Objects KFENCE served during the run (debug kernels): traced, so live here, but never
    // active in slabinfo. At most that many fewer active objects than live ones.
    let kfence_allocs = match (
        super::kfence::read_kfence_counts(&dir.join("kfence.before"))?,
        super::kfence::read_kfence_counts(&dir.join("kfence.after"))?,
    ) {
        (Some(b), Some(a)) => i64::try_from(a.allocs.saturating_sub(b.allocs))?,
        _ => 0,
    };
    let (Some(&(first, _)), Some(&(last, _))) = (live.steps.first(), live.steps.last()) else {
        bail!("{name}: no allocation in the profile");
    };
    let index = library_live_index(profile)?;
    let quarantine = super::kasan::enabled(profile);
    let peak = live.peak();
    let (mut compared, mut outside, mut max_excess, mut moving) = (0, Vec::new(), 0i64, 0);
    let mut disagreements = 0;
    for s in samples
        .iter()
        .filter(|s| s.begin_ns >= first && s.end_ns <= last)
    {
        compared += 1;
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for t in live.times_in(s.begin_ns, s.end_ns) {
            let n = i64::try_from(index.live_objects(name, t))?;
            disagreements += usize::from(n != live.at(t));
            (lo, hi) = (lo.min(n), hi.max(n));
        }
        moving += usize::from(lo != hi);
        let active = i64::try_from(s.active)?;
        max_excess = max_excess.max(active - hi);
        // KASAN's quarantine keeps freed objects active for a while: only a shortfall counts.
        if active < lo - kfence_allocs || !quarantine && active > hi + i64::try_from(slack)? {
            outside.push(format!("t={} active {active} live {lo}..{hi}", s.begin_ns));
        }
    }
    if disagreements > 0 {
        failures.push(format!(
            "{name}: the library's live count differs from the records' at {disagreements} moments"
        ));
    }
    let distinct: BTreeSet<u64> = samples.iter().map(|s| s.active).collect();
    writeln!(
        report,
        "  /proc/slabinfo: {compared} samples during the run ({} distinct active counts, {moving} \
         taken while the count moved), live objects peak {peak}; active - live at most \
         {max_excess}, tolerance live..live+{slack} ({cpus} CPUs x objects per slab x (1 + per-CPU \
         partial slabs), less {kfence_allocs} objects KFENCE served{}; {} outside",
        distinct.len(),
        if quarantine {
            ", and no upper bound: KASAN's quarantine keeps freed objects active"
        } else {
            ""
        },
        outside.len()
    )?;
    if compared < 20 || distinct.len() < 10 {
        failures.push(format!(
            "{name}: only {compared} slabinfo samples with {} distinct counts during the run",
            distinct.len()
        ));
    }
    if !outside.is_empty() {
        failures.push(format!(
            "{name}: {} slabinfo samples outside the tolerance, e.g. {:?}",
            outside.len(),
            &outside[..outside.len().min(3)]
        ));
    }
    Ok(())
}

/// The working set view's live objects of the sweep type: the same exact count at each of its
/// time points, and the same peak.
fn check_live_series(
    ws: &Value,
    live: &LiveCount,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let name = CAPACITY.type_name;
    let peak = live.peak();
    let times: Vec<u64> = ws["times_ns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    let ty = ws["types"]
        .as_array()
        .and_then(|types| types.iter().find(|t| t["name"] == name));
    let series: Vec<i64> = ty
        .and_then(|t| t["live_objects"].as_array())
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .collect();
    let wrong = times
        .iter()
        .zip(&series)
        .filter(|&(&t, &n)| live.at(t) != n)
        .count();
    writeln!(
        report,
        "  working set view: {} time points, {wrong} where its live objects differ from the \
         records' count; peak {}",
        times.len(),
        ty.map_or(Value::Null, |t| t["peak_objects"].clone())
    )?;
    if times.len() < 2 || times.len() != series.len() || wrong > 0 {
        failures.push(format!(
            "{name}: the working set series ({} times, {} counts) differs from the records' live \
             count at {wrong} points",
            times.len(),
            series.len()
        ));
    }
    if ty.and_then(|t| t["peak_objects"].as_i64()) != Some(peak) {
        failures.push(format!("{name}: peak objects not {peak}"));
    }
    Ok(())
}
