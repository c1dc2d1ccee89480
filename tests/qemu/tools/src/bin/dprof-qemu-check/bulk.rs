//! `selftest-bulk`: slab objects allocated and freed in bulk (`kmem_cache_alloc_bulk`,
//! `kmem_cache_free_bulk`, `kfree_bulk`), which fire no kmem tracepoint, against the exact
//! counts the `bulk` workload of `dprof_selftest.ko` keeps (kmod/selftest/bulk.rs):
//!
//! - every `dprof_selftest_bulk` object is allocated and freed by the module's bulk probes
//!   (flagged `ALLOC_BULK`, `FREE_BULK`), as many as the workload counted, and none is left
//!   live at the end;
//! - every `kfree_bulk` free is recorded, with the kmalloc cache its allocation (through the
//!   kmalloc tracepoint) named;
//! - the data profile types the workload's accesses as `dprof_selftest_bulk`, field `value`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use dprof_abi::{Record, ALLOC_BULK, FREE_BULK};
use dprof_format::Profile;

use super::json_report::{field_name_at, find_type, report_json, type_samples_in};

const TYPE: &str = "dprof_selftest_bulk";

#[expect(
    clippy::too_many_lines,
    reason = "one linear report; splitting it would only scatter it"
)]
pub(crate) fn check(dir: &Path) -> Result<String> {
    let counts = std::fs::read_to_string(dir.join("bulk_objects")).context("bulk_objects")?;
    let numbers: Vec<u64> = counts
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("bulk_objects: two numbers")?;
    let [bulk_objects, kfree_bulk_objects] = numbers[..] else {
        anyhow::bail!("bulk_objects: {counts:?}, not two numbers");
    };
    let profile = Profile::open(&dir.join("bulk.dprof")).context("opening bulk.dprof")?;
    let mut report = String::new();
    let mut bulk_cache = None;
    // ptr -> (cache, flags) of each live object, as the records go.
    let mut live: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
    let (mut bulk_allocs, mut bulk_frees, mut unflagged) = (0u64, 0u64, 0u64);
    // kfree_bulk frees of objects allocated while collecting, of objects allocated before
    // (kfree_rcu's batches free those too), and of objects whose recorded cache differs.
    let (mut kfree_bulk, mut kfree_bulk_older, mut kfree_bulk_unmatched) = (0u64, 0u64, 0u64);
    let mut kfree_bulk_caches = BTreeSet::new();
    let mut records = Vec::new();
    for item in profile.records() {
        let (_, record) = item.context("reading bulk.dprof")?;
        if let Record::CacheInfo(info) = &record {
            if info.name_bytes() == TYPE.as_bytes() {
                bulk_cache = Some(info.cache);
            }
        }
        records.push(record);
    }
    let bulk_cache = bulk_cache.with_context(|| format!("no CacheInfo for {TYPE}"))?;
    for record in records {
        match record {
            Record::Alloc(a) => {
                if a.cache == bulk_cache {
                    if a.flags & ALLOC_BULK != 0 {
                        bulk_allocs += 1;
                    } else {
                        unflagged += 1;
                    }
                }
                live.insert(a.ptr, (a.cache, a.flags));
            }
            Record::Free(f) => {
                let was = live.remove(&f.ptr);
                if f.cache == bulk_cache {
                    if f.flags & FREE_BULK != 0 {
                        bulk_frees += 1;
                    } else {
                        unflagged += 1;
                    }
                } else if f.flags & FREE_BULK != 0 {
                    kfree_bulk_caches.insert(f.cache);
                    match was {
                        None => kfree_bulk_older += 1,
                        Some((cache, _)) if cache == f.cache => kfree_bulk += 1,
                        Some(_) => kfree_bulk_unmatched += 1,
                    }
                }
            }
            _ => {}
        }
    }
    let left_live = live.values().filter(|&&(c, _)| c == bulk_cache).count();
    writeln!(
        report,
        "{TYPE}: the workload allocated and freed {bulk_objects} objects in bulk; the profile \
         has {bulk_allocs} bulk allocations and {bulk_frees} bulk frees of it ({unflagged} not \
         flagged bulk), {left_live} left live"
    )?;
    writeln!(
        report,
        "kfree_bulk: the workload freed {kfree_bulk_objects} kmalloc objects; the profile has \
         {kfree_bulk} bulk frees of objects allocated while collecting, in {} caches, \
         {kfree_bulk_older} of objects allocated before, {kfree_bulk_unmatched} whose cache \
         differs from their allocation's",
        kfree_bulk_caches.len()
    )?;
    ensure!(bulk_objects > 0, "the workload allocated nothing");
    ensure!(
        bulk_allocs == bulk_objects && bulk_frees == bulk_objects && unflagged == 0,
        "bulk events of {TYPE} differ from the workload's count"
    );
    ensure!(
        left_live == 0,
        "{left_live} {TYPE} objects look live forever"
    );
    // Other kernel code may free in bulk too (kfree_rcu's batches): at least the workload's.
    ensure!(
        kfree_bulk >= kfree_bulk_objects && kfree_bulk_objects > 0,
        "kfree_bulk frees are missing"
    );
    ensure!(
        kfree_bulk_unmatched == 0,
        "a kfree_bulk free names another cache than its object's allocation"
    );
    let json = report_json(&dir.join("bulk.dprof"), &[])?;
    let ty = find_type(&json, TYPE)?;
    let samples = type_samples_in(ty, "dprof_selftest_bulk_touch");
    let field = field_name_at(ty, 8);
    writeln!(
        report,
        "data profile: {samples} samples of {TYPE} in dprof_selftest_bulk_touch, field at +8: \
         {field:?}"
    )?;
    ensure!(samples > 0, "no sample typed {TYPE} in its access function");
    Ok(report)
}
