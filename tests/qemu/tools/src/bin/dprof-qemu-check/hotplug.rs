//! `cpu-hotplug`: CPUs 2 and 3 of a 4-CPU guest went offline and came back during three
//! collections (the harness already failed the run on any kernel report):
//!
//! - samples: every CPU that came back is sampled again after it returned (perf drops a CPU's
//!   counters when it goes offline; the module's hotplug callback makes them anew), was
//!   sampled before it left, and no sample is timed while it was offline;
//! - histories: they complete, every decoded access hit its watched range, and after CPUs 2
//!   and 3 came back, objects handed from CPU 2 to CPU 3 were watched on both (perf drops a
//!   CPU's breakpoints too; the module's hotplug callback makes them anew);
//! - causal: the experiments were recorded and the causal view reads them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use dprof_abi::Record;
use dprof_format::Profile;

use super::json_report::{causal_view_json, report_json};

/// The `/proc/uptime` readings around each transition have centisecond resolution.
const UPTIME_SLACK_NS: u64 = 20_000_000;

/// `(time, cpu, online)` transitions, from a log of `NS CPU offline|online` lines.
fn transitions(path: &Path) -> Result<Vec<(u64, u32, bool)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            let (Some(t), Some(cpu), Some(state)) = (words.next(), words.next(), words.next())
            else {
                anyhow::bail!("{}: bad line {line:?}", path.display());
            };
            Ok((t.parse()?, cpu.parse()?, state == "online"))
        })
        .collect()
}

pub(crate) fn check(dir: &Path) -> Result<String> {
    let mut report = String::new();
    check_samples(dir, &mut report)?;
    check_histories(dir, &mut report)?;
    check_causal(dir, &mut report)?;
    Ok(report)
}

fn check_samples(dir: &Path, report: &mut String) -> Result<()> {
    let moves = transitions(&dir.join("samples.hotplug"))?;
    ensure!(moves.len() >= 4, "only {} hotplug transitions", moves.len());
    let profile = Profile::open(&dir.join("samples.dprof")).context("opening samples.dprof")?;
    let mut times: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for item in profile.records() {
        let (header, record) = item.context("reading samples.dprof")?;
        if matches!(record, Record::AccessSample(_)) {
            times.entry(header.cpu).or_default().push(header.time_ns);
        }
    }
    let mut cpus: Vec<u32> = moves.iter().map(|m| m.1).collect();
    cpus.sort_unstable();
    cpus.dedup();
    for cpu in cpus {
        let own: Vec<&(u64, u32, bool)> = moves.iter().filter(|m| m.1 == cpu).collect();
        let first_off = own
            .iter()
            .find(|m| !m.2)
            .map(|m| m.0)
            .context("never offline")?;
        let last_on = own
            .iter()
            .rev()
            .find(|m| m.2)
            .map(|m| m.0)
            .context("never online")?;
        let samples = times.get(&cpu).map_or(&[][..], Vec::as_slice);
        let before = samples
            .iter()
            .filter(|&&t| t + UPTIME_SLACK_NS < first_off)
            .count();
        let after = samples
            .iter()
            .filter(|&&t| t > last_on + UPTIME_SLACK_NS)
            .count();
        // Offline spans: each offline to the next online.
        let mut while_off = 0;
        for pair in own.windows(2) {
            if let [(off, _, false), (on, _, true)] = pair {
                while_off += samples
                    .iter()
                    .filter(|&&t| t > off + UPTIME_SLACK_NS && t + UPTIME_SLACK_NS < *on)
                    .count();
            }
        }
        writeln!(
            report,
            "CPU {cpu}: {} offline spans; samples before it first left {before}, while offline \
             {while_off}, after it last came back {after}",
            own.iter().filter(|m| !m.2).count()
        )?;
        ensure!(
            before > 0,
            "CPU {cpu} was not sampled before it went offline"
        );
        ensure!(
            after > 0,
            "CPU {cpu} was not sampled after it came back online: its counter was not remade"
        );
        ensure!(
            while_off == 0,
            "CPU {cpu} has samples timed while it was offline"
        );
    }
    Ok(())
}

fn check_histories(dir: &Path, report: &mut String) -> Result<()> {
    let moves = transitions(&dir.join("histories.hotplug"))?;
    let flow = report_json(
        &dir.join("histories.dprof"),
        &["--view", "data-flow", "--type", "dprof_selftest_obj"],
    )?;
    let complete = flow["complete"].as_u64().unwrap_or(0);
    let checks = &flow["checks"];
    let count = |k: &str| checks[k].as_u64().unwrap_or(0);
    writeln!(
        report,
        "histories across {} hotplug transitions: {complete} complete; decoded accesses: {} \
         verified, {} mismatched",
        moves.len(),
        count("verified"),
        count("mismatched")
    )?;
    ensure!(complete >= 3, "only {complete} complete histories");
    ensure!(
        count("mismatched") == 0,
        "decoded accesses disagree with the debug registers"
    );
    ensure!(count("verified") > 0, "no access verified");

    // Hits on each returned CPU after its last return.
    let last_on: BTreeMap<u32, u64> = moves
        .iter()
        .filter(|m| m.2)
        .map(|m| (m.1, m.0 + UPTIME_SLACK_NS))
        .collect();
    let profile = Profile::open(&dir.join("histories.dprof")).context("opening histories.dprof")?;
    let mut hits_after: BTreeMap<u32, u64> = last_on.keys().map(|&cpu| (cpu, 0)).collect();
    for item in profile.records() {
        let (header, record) = item.context("reading histories.dprof")?;
        if let (Record::HistoryHit(_), Some(&since)) = (record, last_on.get(&header.cpu)) {
            if header.time_ns > since {
                *hits_after.entry(header.cpu).or_default() += 1;
            }
        }
    }
    writeln!(
        report,
        "  hits after each CPU's last return (handoff from CPU 2 to CPU 3): {hits_after:?}"
    )?;
    for (cpu, hits) in &hits_after {
        ensure!(
            *hits > 0,
            "no hit on CPU {cpu} after it came back online: its breakpoints were not remade"
        );
    }
    Ok(())
}

fn check_causal(dir: &Path, report: &mut String) -> Result<()> {
    let profile = Profile::open(&dir.join("causal.dprof")).context("opening causal.dprof")?;
    let mut ended = 0;
    for item in profile.records() {
        if matches!(
            item.context("reading causal.dprof")?.1,
            Record::ExperimentEnd(_)
        ) {
            ended += 1;
        }
    }
    let (_, ranked_nothing) = causal_view_json(&dir.join("causal.dprof"))?;
    writeln!(
        report,
        "causal: {ended} experiments ended while CPUs came and went; the causal view {}",
        if ranked_nothing {
            "ranks nothing (and says why)"
        } else {
            "ranks the type"
        }
    )?;
    ensure!(ended > 0, "no experiment was recorded");
    Ok(())
}
