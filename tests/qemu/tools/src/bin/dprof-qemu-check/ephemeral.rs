//! `selftest-cache-destroy`: caches created and destroyed while the module traces their
//! objects, against the exact counts the `ephemeral` workload of `dprof_selftest.ko` keeps
//! (kmod/selftest/ephemeral.rs). `dprof_selftest_eph_a` and `_b` take turns, the next one
//! usually in the `kmem_cache` the last one freed:
//!
//! - some `kmem_cache` address carried both names in turn (else the run tested nothing),
//!   except on a KASAN kernel (the debug variant): its quarantine holds every freed
//!   `kmem_cache` back from reuse (it keeps up to 1/32 of memory), so no address comes back
//!   and the report says that the reuse case holds on the default kernel only;
//! - every allocation and free is counted under the name its cache had then, as many of each
//!   as the workload counted: a module that kept naming caches by address would give the
//!   second cache's objects the first one's name;
//! - with histories planned on the `eph_a` that existed when collection started, every
//!   history watches an object of that very cache: none of the caches created later at its
//!   address (a module that kept the target's address would watch them).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use dprof_abi::Record;
use dprof_format::Profile;

const NAMES: [&str; 2] = ["dprof_selftest_eph_a", "dprof_selftest_eph_b"];

pub(crate) fn check(dir: &Path) -> Result<String> {
    let counts =
        std::fs::read_to_string(dir.join("ephemeral_objects")).context("ephemeral_objects")?;
    let expected: Vec<u64> = counts
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("ephemeral_objects: two numbers")?;
    ensure!(
        expected.len() == 2,
        "ephemeral_objects: {counts:?}, not two numbers"
    );
    let profile = Profile::open(&dir.join("ephemeral.dprof")).context("opening ephemeral.dprof")?;
    // The name each cache has now, as the records go (in time order).
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    // Every name each cache address carried.
    let mut carried: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    let mut allocs: BTreeMap<String, u64> = BTreeMap::new();
    let mut frees: BTreeMap<String, u64> = BTreeMap::new();
    for item in profile.records() {
        let (_, record) = item.context("reading ephemeral.dprof")?;
        let (cache, counter) = match &record {
            Record::CacheInfo(info) => {
                let name = String::from_utf8_lossy(info.name_bytes()).into_owned();
                carried.entry(info.cache).or_default().insert(name.clone());
                names.insert(info.cache, name);
                continue;
            }
            Record::Alloc(a) => (a.cache, &mut allocs),
            Record::Free(f) => (f.cache, &mut frees),
            _ => continue,
        };
        if let Some(name) = names.get(&cache).filter(|n| NAMES.contains(&n.as_str())) {
            *counter.entry(name.clone()).or_default() += 1;
        }
    }
    let reused = carried
        .values()
        .filter(|n| NAMES.iter().all(|name| n.contains(*name)))
        .count();
    let mut report = String::new();
    for (name, &want) in NAMES.iter().zip(&expected) {
        let (a, f) = (
            allocs.get(*name).copied().unwrap_or(0),
            frees.get(*name).copied().unwrap_or(0),
        );
        writeln!(
            report,
            "{name}: {want} objects by the workload's count, {a} allocations and {f} frees \
             under that name in the profile"
        )?;
        ensure!(
            a == want && f == want,
            "{name}: {a} allocations and {f} frees recorded under its name, not {want}"
        );
    }
    writeln!(
        report,
        "{reused} kmem_cache addresses carried both names in turn ({} caches in all)",
        carried.len()
    )?;
    let quarantined = super::kasan::enabled(&profile);
    if quarantined && reused == 0 {
        writeln!(
            report,
            "the debug kernel's KASAN quarantine held every freed kmem_cache back: no address \
             was reused, so the reuse case is checked on the default kernel only"
        )?;
    } else {
        ensure!(
            reused > 0,
            "no kmem_cache address was reused by the other cache: the run tested nothing"
        );
    }
    check_histories(dir, quarantined, &mut report)?;
    Ok(report)
}

/// The histories run: each history's cache, by how many caches that `kmem_cache` address
/// had described before it (1: the planned cache itself).
fn check_histories(dir: &Path, quarantined: bool, report: &mut String) -> Result<()> {
    let path = dir.join("ephemeral-histories.dprof");
    let profile = Profile::open(&path).context("opening ephemeral-histories.dprof")?;
    // CacheInfos of each address so far, and the name of the latest.
    let mut described: BTreeMap<u64, (u32, String)> = BTreeMap::new();
    let (mut on_planned, mut on_later) = (0u64, Vec::new());
    let mut planned = BTreeSet::new();
    for item in profile.records() {
        let (_, record) = item.context("reading ephemeral-histories.dprof")?;
        match &record {
            Record::CacheInfo(info) => {
                let entry = described.entry(info.cache).or_insert((0, String::new()));
                entry.0 += 1;
                entry.1 = String::from_utf8_lossy(info.name_bytes()).into_owned();
            }
            Record::HistoryStart(h) => match described.get(&h.cache) {
                Some((1, name)) if name == NAMES[0] => {
                    on_planned += 1;
                    planned.insert(h.cache);
                }
                other => on_later.push(format!("history {} on {other:?}", h.history)),
            },
            _ => {}
        }
    }
    // How many caches the planned `kmem_cache` address described in all.
    let reused = planned
        .iter()
        .filter_map(|c| described.get(c))
        .map(|&(n, _)| n)
        .max()
        .unwrap_or(0);
    writeln!(
        report,
        "histories of {}: {on_planned} on the planned cache, {} on caches created later; its \
         kmem_cache address described {reused} caches in turn",
        NAMES[0],
        on_later.len()
    )?;
    ensure!(
        on_later.is_empty(),
        "histories watched caches created after the planned one was destroyed: {:?}",
        &on_later[..on_later.len().min(5)]
    );
    ensure!(
        on_planned > 0,
        "no history of the planned cache: the run tested nothing"
    );
    ensure!(
        reused > 1 || quarantined,
        "the planned cache's address described no other cache: the run tested nothing"
    );
    Ok(())
}
