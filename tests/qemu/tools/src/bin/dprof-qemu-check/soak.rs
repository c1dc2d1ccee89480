//! `dprof-qemu-check soak DIR`: a long collection at the highest rate with rings too small on
//! purpose (`soak.sh`) must lose records, and account for every one of them.
//!
//! - **Complete**: `soak.dprof` opens (it has its End and Stop sections), no `.partial` is
//!   left, and it stopped because its duration elapsed, after at least that long.
//! - **Exact losses**: per CPU, the `Lost` records (which the module writes for drops not yet
//!   reported, when the collector reads) sum to the module's drop counter for that CPU in the
//!   Stop section, and the other records of that CPU to its written counter: nothing lost
//!   that was not counted, nothing counted that was not lost, nothing read twice. The rings
//!   must have overflowed (some records lost), or the scenario tested nothing.
//! - **Analysed**: the library reads the whole profile and counts the same losses.
//! - **No ring left behind**: dprof.ko's vmalloc'ed memory (its rings) showed in
//!   `/proc/vmallocinfo` during the collection and is gone once the collector closed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use dprof_abi::Record;
use dprof_analysis::pipeline::{analyze, Options};
use dprof_format::{DeviceCounters, Profile, StopReason};

/// Per CPU: records other than `Lost`, and the sum of the `Lost` records' counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CpuTally {
    records: u64,
    lost: u64,
}

pub(crate) fn check(dir: &Path) -> Result<String> {
    let mut report = String::new();
    let seconds: u64 = std::fs::read_to_string(dir.join("seconds"))
        .context("reading the requested duration (seconds)")?
        .trim()
        .parse()
        .context("the requested duration (seconds)")?;
    ensure!(
        !dir.join("soak.dprof.partial").exists(),
        "soak.dprof.partial exists: the collection did not finish"
    );
    let profile = Profile::open(&dir.join("soak.dprof")).context("opening soak.dprof")?;
    let stop = profile.stop();
    writeln!(
        report,
        "stop: {} after {:.1} s (asked for {seconds} s)",
        stop.reason,
        stop.elapsed_ns as f64 / 1e9
    )?;
    ensure!(
        stop.reason == StopReason::DurationElapsed,
        "the collection stopped because {}, not because its duration elapsed",
        stop.reason
    );
    ensure!(
        stop.elapsed_ns >= seconds * 1_000_000_000,
        "the collection lasted {:.1} s, less than the {seconds} s asked for",
        stop.elapsed_ns as f64 / 1e9
    );
    let device = stop
        .device
        .as_ref()
        .context("the stop section has no module counters")?;

    let mut failures = compare_counts(&profile, device, &mut report)?;
    let lost = device.records_lost;
    writeln!(
        report,
        "total: {} records written, {lost} dropped ({:.1}%)",
        device.records_written,
        100.0 * lost as f64 / (device.records_written + lost).max(1) as f64
    )?;
    if lost == 0 {
        failures.push(
            "no record was lost: the rings never overflowed, so losses were not tested".into(),
        );
    }

    let analysis = analyze(&profile, &Options::default()).context("analysing soak.dprof")?;
    writeln!(
        report,
        "analysis: {} samples, {} records lost",
        analysis.coverage.total_samples, analysis.profile.lost_records
    )?;
    if analysis.profile.lost_records != lost {
        failures.push(format!(
            "the analysis counts {} lost records, the module {lost}",
            analysis.profile.lost_records
        ));
    }

    check_rings_freed(dir, device.cpus.len(), &mut report, &mut failures)?;

    ensure!(
        failures.is_empty(),
        "{report}\nFAILED:\n  {}",
        failures.join("\n  ")
    );
    writeln!(report, "soak: all checks passed")?;
    Ok(report)
}

/// Per CPU, the profile's records and `Lost` counts against the module's counters; the
/// disagreements, as failures.
fn compare_counts(
    profile: &Profile,
    device: &DeviceCounters,
    report: &mut String,
) -> Result<Vec<String>> {
    let mut tally: BTreeMap<u32, CpuTally> = BTreeMap::new();
    for item in profile.records() {
        let (header, record) = item.context("reading soak.dprof")?;
        let cpu = tally.entry(header.cpu).or_default();
        match record {
            Record::Lost(l) => cpu.lost += l.count,
            _ => cpu.records += 1,
        }
    }
    let mut failures = Vec::new();
    for (cpu, counters) in device.cpus.iter().enumerate() {
        let seen = tally.remove(&(cpu as u32)).unwrap_or_default();
        writeln!(
            report,
            "cpu {cpu}: {} records and {} lost in the profile; the module wrote {} and dropped {}",
            seen.records, seen.lost, counters.records_written, counters.records_lost
        )?;
        if seen.records != counters.records_written {
            failures.push(format!(
                "cpu {cpu}: {} records in the profile, the module wrote {}",
                seen.records, counters.records_written
            ));
        }
        if seen.lost != counters.records_lost {
            failures.push(format!(
                "cpu {cpu}: Lost records count {}, the module dropped {}",
                seen.lost, counters.records_lost
            ));
        }
    }
    for (cpu, seen) in &tally {
        failures.push(format!(
            "{} records and {} lost on cpu {cpu}, which the module has no counters for",
            seen.records, seen.lost
        ));
    }
    Ok(failures)
}

/// dprof.ko's vmalloc areas (its rings, one per CPU at least) in `/proc/vmallocinfo` during
/// the collection and after it.
fn check_rings_freed(
    dir: &Path,
    cpus: usize,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let vmalloc = |name: &str| -> Result<usize> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(text.lines().filter(|l| !l.trim().is_empty()).count())
    };
    let (during, after) = (vmalloc("vmalloc.during")?, vmalloc("vmalloc.after")?);
    writeln!(
        report,
        "dprof.ko's vmalloc areas: {during} during the collection, {after} after it"
    )?;
    if during < cpus {
        failures.push(format!(
            "{during} vmalloc areas of dprof.ko during the collection, want one ring per CPU \
             ({cpus}) at least: the check after it would see nothing either way"
        ));
    }
    if after != 0 {
        failures.push(format!(
            "{after} vmalloc areas of dprof.ko are left after the collector closed"
        ));
    }

    Ok(())
}
