//! `selftest-cache-destroy`: caches created and destroyed while the module traces their
//! objects, against the exact counts the `ephemeral` workload of `dprof_selftest.ko` keeps
//! (kmod/selftest/ephemeral.rs). `dprof_selftest_eph_a` and `_b` take turns, the next one
//! usually in the `kmem_cache` the last one freed:
//!
//! - some `kmem_cache` address carried both names in turn (else the run tested nothing);
//! - every allocation and free is counted under the name its cache had then, as many of each
//!   as the workload counted: a module that kept naming caches by address would give the
//!   second cache's objects the first one's name.

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
    ensure!(
        reused > 0,
        "no kmem_cache address was reused by the other cache: the run tested nothing"
    );
    Ok(report)
}
