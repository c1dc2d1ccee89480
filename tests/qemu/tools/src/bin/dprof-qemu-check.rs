//! Host-side checks of what QEMU scenarios leave behind.
//!
//! `dprof-qemu-check slab-workload DIR` compares the profile the guest collected with the
//! kernel's own counters, snapshotted in the guest around the workload:
//!
//! - SLUB statistics (`/sys/kernel/slab/*/alloc_fastpath` + `alloc_slowpath`, and the `free_*`
//!   pair) count every allocation and free exactly. Each snapshot is bracketed by
//!   `/proc/uptime` readings (10 ms resolution, the same clock as the records' timestamps),
//!   so for every cache `traced(inner window) <= counter delta <= traced(outer window)` must hold
//!   when the tracepoints see everything. Whatever the delta exceeds the outer count by was not
//!   traced. SLUB's bulk APIs (`kmem_cache_alloc_bulk`, `kmem_cache_free_bulk`, and
//!   `kfree_bulk` under `kfree_rcu`) emit no tracepoint; the module probes them, and the gap
//!   left is measured and bounded. SLUB counts a bulk free that takes its slow path once per
//!   slab, so bulk frees are left out of the upper bound.
//! - `/proc/slabinfo` active objects move with allocs minus frees, up to the free objects that
//!   sit in per-CPU slabs (SLUB counts those as active): that slack is bounded by the per-CPU
//!   partial lists.
//!
//! `dprof-qemu-check selftest-data-profile DIR` checks the data profile of `dprof_selftest.ko`
//! against what the module is known to do, and `workload-data-profile DIR` the data profile of
//! real programs; both also check the effective addresses computed from the samples.
//!
//! `dprof-qemu-check selftest-histories DIR` checks the object access histories of
//! `dprof_selftest_obj` against the selftest's known path (written on CPU 0 in
//! `dprof_selftest_produce`, read on CPU 1 in `dprof_selftest_consume`, freed there), that
//! the module left no debug register watching anything after stop, and that the whole-object
//! histories of `dprof_selftest_relay` merge into its known field order.
//!
//! `dprof-qemu-check kernel-histories DIR` checks histories of `skbuff_head_cache` under
//! loopback TCP (decoded accesses agree with the debug registers; the cost per history; the
//! whole `sk_buff` merged per history set) and a 60 s stress run at the highest rate (no debug
//! register left armed or reserved).
//!
//! `dprof-qemu-check selftest-misses DIR` checks the miss classification and working set views
//! against the `dprof_selftest.ko` workloads with one known cause of misses each, and the
//! working set's live objects against /proc/slabinfo (`misses.rs` beside this file).
//!
//! `dprof-qemu-check selftest-causal DIR` checks the data profile of the `causal` workload of
//! `dprof_selftest.ko`: the off-path type has more samples than the critical-path one
//! (`causal.rs` beside this file); `causal-end-to-end DIR` its end-to-end session's
//! experiments and ranking; `causal-blocking DIR` per-task delay accounting against per-CPU
//! on a workload that sleeps on a timer (`causal_blocking.rs`); `causal-real-workload DIR`
//! an end-to-end session over busybox httpd and wget, and its overhead split
//! (`causal_real.rs`); `causal-arrival DIR` load amplification against the same open-loop
//! workload not amplified (`causal_arrival.rs`).
//!
//! `dprof-qemu-check backends-agree DIR` checks that the module and the perf backend, run on
//! the same workload, agree on the top slab types and on allocations per cache
//! (`backends.rs` beside this file).
//!
//! `dprof-qemu-check selftest-bulk DIR` checks that bulk allocations and frees, which fire no
//! tracepoint, are recorded exactly (`bulk.rs` beside this file).
//!
//! `dprof-qemu-check selftest-cache-destroy DIR` checks that objects of caches created and
//! destroyed during collection, one in the `kmem_cache` another freed, keep their own cache's
//! name (`ephemeral.rs` beside this file).
//!
//! `dprof-qemu-check cpu-hotplug DIR` checks collections during which CPUs went offline and
//! came back (`hotplug.rs` beside this file).
//!
//! `dprof-qemu-check soak DIR` checks a long collection whose rings overflowed on purpose:
//! every lost record counted exactly, per CPU, and no ring left allocated (`soak.rs`).
//!
//! The report is printed and saved as DIR/check.txt.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use dprof_abi::Record;
use dprof_analysis::decode::{DecodeOutcome, Decoder};
use dprof_analysis::kernel_debugging::DebuggingCode;
use dprof_analysis::symbols::Kallsyms;
use dprof_format::Profile;

use json_report::{field_name_at, find_type, guest_vmlinux, percent, report_json, type_samples_in};
use kfence::{read_kfence_counts, KfenceCounts};

// A binary's modules sit beside it in src/bin, where Cargo would take them for binaries.
#[path = "dprof-qemu-check/backends.rs"]
mod backends;
#[path = "dprof-qemu-check/bulk.rs"]
mod bulk;
#[path = "dprof-qemu-check/causal.rs"]
mod causal;
#[path = "dprof-qemu-check/causal_arrival.rs"]
mod causal_arrival;
#[path = "dprof-qemu-check/causal_blocking.rs"]
mod causal_blocking;
#[path = "dprof-qemu-check/causal_real.rs"]
mod causal_real;
#[path = "dprof-qemu-check/ephemeral.rs"]
mod ephemeral;
#[path = "dprof-qemu-check/hotplug.rs"]
mod hotplug;
#[path = "dprof-qemu-check/json_report.rs"]
mod json_report;
#[path = "dprof-qemu-check/kasan.rs"]
mod kasan;
#[path = "dprof-qemu-check/kfence.rs"]
mod kfence;
#[path = "dprof-qemu-check/misses.rs"]
mod misses;
#[path = "dprof-qemu-check/soak.rs"]
mod soak;

/// /proc/uptime has centisecond resolution; one more millisecond covers the gap between a
/// counter's increment and the tracepoint's timestamp.
const UPTIME_RESOLUTION_NS: u64 = 10_000_000;
const SKEW_NS: u64 = 1_000_000;

/// Objects of `dprof_selftest_obj` expected to be sampled on both CPUs below which not seeing
/// a bounce is chance, not a wrong answer: on a KASAN kernel the checks called from every
/// access take most samples (one run: 81 and 50 samples over 14,000 objects, 0.3 expected).
const MIN_EXPECTED_BOUNCED: f64 = 5.0;

/// Caches the acceptance names, checked strictly; others are reported.
const NAMED: [&str; 2] = ["skbuff_head_cache", "task_struct"];

#[derive(Clone, Copy, Default)]
struct SlubCounters {
    allocs: u64,
    frees: u64,
    cpu_partial: u64,
}

fn read_slubstats(path: &Path) -> Result<BTreeMap<String, SlubCounters>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        ensure!(fields.len() == 6, "{}: bad line {line:?}", path.display());
        let n = |i: usize| -> Result<u64> { Ok(fields[i].parse()?) };
        map.insert(
            fields[0].to_string(),
            SlubCounters {
                allocs: n(1)? + n(2)?,
                frees: n(3)? + n(4)?,
                cpu_partial: n(5)?,
            },
        );
    }
    Ok(map)
}

#[derive(Clone, Copy, Default)]
struct SlabinfoLine {
    active_objs: i64,
    objs_per_slab: i64,
}

fn read_slabinfo(path: &Path) -> Result<BTreeMap<String, SlabinfoLine>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut map = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with("slabinfo") && !l.starts_with('#'))
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        ensure!(fields.len() >= 5, "{}: bad line {line:?}", path.display());
        map.insert(
            fields[0].to_string(),
            SlabinfoLine {
                active_objs: fields[1].parse()?,
                objs_per_slab: fields[4].parse()?,
            },
        );
    }
    Ok(map)
}

fn read_uptime_ns(path: &Path) -> Result<u64> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (secs, frac) = text
        .trim()
        .split_once('.')
        .context("uptime without a fraction")?;
    ensure!(frac.len() == 2, "uptime {text:?} is not in centiseconds");
    Ok(secs.parse::<u64>()? * 1_000_000_000 + frac.parse::<u64>()? * 10_000_000)
}

/// Traced events of one cache inside the inner and outer windows.
#[derive(Clone, Copy, Default)]
struct Traced {
    allocs_inner: u64,
    allocs_outer: u64,
    frees_inner: u64,
    /// Of `frees_inner`, bulk ones (the module's probe on `kmem_cache_free_bulk`).
    bulk_frees_inner: u64,
    frees_outer: u64,
}

#[expect(
    clippy::too_many_lines,
    reason = "one linear report; splitting it would only scatter it"
)]
fn check_slab_workload(dir: &Path) -> Result<String> {
    let profile = Profile::open(&dir.join("slab.dprof")).context("opening the guest's profile")?;
    let mut report = String::new();

    // The reader checks every record as it reads it; check what it cannot know. Cache names
    // are collected on the way, and records are matched to them after the pass, as a
    // CacheInfo may come after a record of its cache in file order.
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    let mut records_per_cache: BTreeMap<u64, u64> = BTreeMap::new();
    let nr_cpus = profile.header().module.nr_cpu_ids;
    let mut lost_per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
    let mut records = 0u64;
    for item in profile.records() {
        let (header, record) = item.context("reading the guest's profile")?;
        records += 1;
        ensure!(
            header.cpu < nr_cpus,
            "record on CPU {} of {nr_cpus}",
            header.cpu
        );
        match record {
            Record::Alloc(a) => {
                ensure!(a.ptr != 0, "allocation of a null pointer");
                *records_per_cache.entry(a.cache).or_default() += 1;
            }
            Record::Free(f) => *records_per_cache.entry(f.cache).or_default() += 1,
            Record::Lost(l) => *lost_per_cpu.entry(header.cpu).or_default() += l.count,
            Record::CacheInfo(info) => {
                names
                    .entry(info.cache)
                    .or_insert_with(|| String::from_utf8_lossy(info.name_bytes()).into_owned());
            }
            Record::AccessSample(_)
            | Record::HistoryStart(_)
            | Record::HistoryArm(_)
            | Record::HistoryHit(_)
            | Record::HistoryEnd(_)
            | Record::ExperimentStart(_)
            | Record::ExperimentEnd(_) => {}
        }
    }
    let unnamed: u64 = records_per_cache
        .iter()
        .filter(|&(cache, _)| *cache != 0 && !names.contains_key(cache))
        .map(|(_, n)| n)
        .sum();
    ensure!(
        unnamed == 0,
        "{unnamed} records name a cache with no CacheInfo"
    );
    for wanted in NAMED {
        ensure!(
            names.values().any(|n| n == wanted),
            "no CacheInfo for {wanted}"
        );
    }
    let kmalloc_names = names.values().filter(|n| n.starts_with("kmalloc-")).count();
    ensure!(kmalloc_names > 0, "no CacheInfo for any kmalloc-* cache");
    let lost: u64 = lost_per_cpu.values().sum();
    writeln!(
        report,
        "profile: {records} records, {} caches named ({kmalloc_names} kmalloc-*), lost per CPU: {lost_per_cpu:?}",
        names.len()
    )?;
    ensure!(
        lost == 0,
        "{lost} records were lost: the exact comparison below needs all of them (raise --ring-size)"
    );

    let before = read_slubstats(&dir.join("slubstats.before"))?;
    let after = read_slubstats(&dir.join("slubstats.after"))?;
    // Objects KFENCE served between the snapshots (any cache): traced, but in none of SLUB's
    // counters, so each comparison with SLUB allows that many more.
    let kfence = match (
        read_kfence_counts(&dir.join("kfence.before"))?,
        read_kfence_counts(&dir.join("kfence.after"))?,
    ) {
        (Some(b), Some(a)) => KfenceCounts {
            allocs: a.allocs.saturating_sub(b.allocs),
            frees: a.frees.saturating_sub(b.frees),
        },
        _ => KfenceCounts::default(),
    };
    writeln!(
        report,
        "KFENCE served {} allocations and {} frees between the snapshots",
        kfence.allocs, kfence.frees
    )?;
    let quarantine = kasan::enabled(&profile);
    if quarantine {
        writeln!(
            report,
            "KASAN: SLUB counts a free when its quarantine lets the object go, so frees are \
             not bounded by its counters, and slabinfo's active objects only from below"
        )?;
    }
    let up = |name: &str| read_uptime_ns(&dir.join(format!("uptime.{name}")));
    let (b0, b1, a0, a1) = (
        up("before.begin")?,
        up("before.end")?,
        up("after.begin")?,
        up("after.end")?,
    );
    // A reading u means the true time is in [u, u + 10 ms).
    let inner = (
        b1 + UPTIME_RESOLUTION_NS + SKEW_NS,
        a0.saturating_sub(SKEW_NS),
    );
    let outer = (
        b0.saturating_sub(SKEW_NS),
        a1 + UPTIME_RESOLUTION_NS + SKEW_NS,
    );
    ensure!(inner.0 < inner.1, "the workload ran too briefly to compare");
    writeln!(
        report,
        "windows (ms since boot): inner {}..{}, outer {}..{}",
        inner.0 / 1_000_000,
        inner.1 / 1_000_000,
        outer.0 / 1_000_000,
        outer.1 / 1_000_000
    )?;

    let mut traced: BTreeMap<String, Traced> = BTreeMap::new();
    for item in profile.records() {
        let (header, record) = item.context("reading the guest's profile")?;
        let t = header.time_ns;
        let in_inner = (inner.0..inner.1).contains(&t);
        let in_outer = (outer.0..outer.1).contains(&t);
        let (cache, is_alloc, bulk_free) = match record {
            Record::Alloc(a) => (a.cache, true, false),
            Record::Free(f) => (f.cache, false, f.flags & dprof_abi::FREE_BULK != 0),
            _ => continue,
        };
        let Some(name) = names.get(&cache) else {
            continue;
        };
        let entry = traced.entry(name.clone()).or_default();
        match (is_alloc, in_inner, in_outer) {
            (true, i, o) => {
                entry.allocs_inner += u64::from(i);
                entry.allocs_outer += u64::from(o);
            }
            (false, i, o) => {
                entry.frees_inner += u64::from(i);
                entry.bulk_frees_inner += u64::from(i && bulk_free);
                entry.frees_outer += u64::from(o);
            }
        }
    }

    writeln!(
        report,
        "{:<24} {:>8} {:>8} {:>8} {:>9}   {:>8} {:>8} {:>8} {:>9}",
        "cache",
        "a.inner",
        "a.slub",
        "a.outer",
        "untraced",
        "f.inner",
        "f.slub",
        "f.outer",
        "untraced"
    )?;
    let mut failures = Vec::new();
    let (mut total_alloc_delta, mut total_alloc_untraced) = (0u64, 0u64);
    let (mut total_free_delta, mut total_free_untraced) = (0u64, 0u64);
    let mut rows: Vec<(&String, u64, u64, Traced)> = after
        .iter()
        .filter_map(|(name, a)| {
            let b = before.get(name)?;
            let t = traced.get(name).copied().unwrap_or_default();
            Some((name, a.allocs - b.allocs, a.frees - b.frees, t))
        })
        .collect();
    rows.sort_by_key(|&(name, allocs, _, _)| {
        (!NAMED.contains(&name.as_str()), std::cmp::Reverse(allocs))
    });
    for &(name, alloc_delta, free_delta, t) in &rows {
        let alloc_untraced = alloc_delta.saturating_sub(t.allocs_outer);
        let free_untraced = free_delta.saturating_sub(t.frees_outer);
        total_alloc_delta += alloc_delta;
        total_alloc_untraced += alloc_untraced;
        total_free_delta += free_delta;
        total_free_untraced += free_untraced;
        // Never more traced events than happened: that would be a duplicate or a misnamed cache.
        if t.allocs_inner > alloc_delta + kfence.allocs {
            failures.push(format!(
                "{name}: {} allocs traced in the inner window, SLUB counted {alloc_delta}",
                t.allocs_inner
            ));
        }
        // SLUB counts a bulk free that takes its slow path once per slab, not per object
        // (`__slab_free`'s one FREE_SLOWPATH): only the other frees are bounded by its count.
        // With KASAN it counts a free when the quarantine lets the object go, later.
        let single_frees = t.frees_inner - t.bulk_frees_inner;
        if !quarantine && single_frees > free_delta + kfence.frees {
            failures.push(format!(
                "{name}: {single_frees} frees (not bulk) traced in the inner window, SLUB \
                 counted {free_delta}"
            ));
        }
        let is_named_cache = NAMED.contains(&name.as_str());
        if is_named_cache {
            ensure!(
                alloc_delta >= 20,
                "{name}: only {alloc_delta} allocations: the workload did not exercise it"
            );
            // The named caches are allocated one object at a time: every allocation is traced.
            if alloc_untraced > 0 {
                failures.push(format!(
                    "{name}: {alloc_untraced} of {alloc_delta} allocations not traced"
                ));
            }
            // skb heads go back in bulk from the per-CPU NAPI cache (napi_skb_cache_put ->
            // kmem_cache_free_bulk), which the module probes: a gap here is a missed probe,
            // allowed bounded for kernels without one.
            if !quarantine && free_untraced * 2 > free_delta.max(1) {
                failures.push(format!(
                    "{name}: {free_untraced} of {free_delta} frees not traced (more than half)"
                ));
            }
        }
        if is_named_cache || alloc_delta >= 100 {
            writeln!(
                report,
                "{name:<24} {:>8} {alloc_delta:>8} {:>8} {alloc_untraced:>9}   {:>8} {free_delta:>8} {:>8} {free_untraced:>9}",
                t.allocs_inner, t.allocs_outer, t.frees_inner, t.frees_outer
            )?;
        }
    }
    writeln!(
        report,
        "all caches: {total_alloc_untraced} of {total_alloc_delta} allocations ({:.1}%) and {total_free_untraced} of {total_free_delta} frees ({:.1}%) went through untraced bulk paths",
        percent(total_alloc_untraced, total_alloc_delta),
        percent(total_free_untraced, total_free_delta)
    )?;
    // Bulk paths are a small part of the slab traffic; a large gap would mean missing probes.
    if percent(total_alloc_untraced, total_alloc_delta) > 5.0 {
        failures.push("more than 5% of all allocations untraced".to_string());
    }

    // /proc/slabinfo: net change of active objects against traced allocs - frees.
    let info_before = read_slabinfo(&dir.join("slabinfo.before"))?;
    let info_after = read_slabinfo(&dir.join("slabinfo.after"))?;
    let cpus = i64::from(profile.header().online_cpus);
    for name in NAMED {
        let (Some(b), Some(a)) = (info_before.get(name), info_after.get(name)) else {
            bail!("{name} missing from /proc/slabinfo");
        };
        let t = traced.get(name).copied().unwrap_or_default();
        let untraced_frees =
            rows.iter()
                .find(|r| r.0 == name)
                .map_or(0, |&(_, _, f, t)| f.saturating_sub(t.frees_outer)) as i64;
        let net_traced = t.allocs_outer as i64 - t.frees_outer as i64 - untraced_frees;
        let delta_active = a.active_objs - b.active_objs;
        // Free objects in per-CPU slabs count as active in SLUB's slabinfo, and their number
        // changes freely: per CPU, the active slab plus up to cpu_partial_slabs partial slabs,
        // which mm/slub.c sizes as DIV_ROUND_UP(cpu_partial * 2, objects per slab).
        let cpu_partial = before.get(name).map_or(0, |c| c.cpu_partial) as i64;
        let per_slab = a.objs_per_slab.max(1);
        let cpu_partial_slabs = (cpu_partial * 2 + per_slab - 1) / per_slab;
        let slack = cpus * per_slab * (1 + cpu_partial_slabs)
            + i64::try_from(kfence.allocs.max(kfence.frees))?;
        writeln!(
            report,
            "slabinfo {name}: active objects {delta_active:+}, traced net {net_traced:+} (bulk frees included), tolerance +/-{slack}"
        )?;
        // Quarantined objects stay active: with KASAN, only a shortfall is a disagreement.
        let disagrees = if quarantine {
            delta_active - net_traced < -slack
        } else {
            (delta_active - net_traced).abs() > slack
        };
        if disagrees {
            failures.push(format!(
                "{name}: /proc/slabinfo active objects moved {delta_active:+}, traced net {net_traced:+}, beyond +/-{slack}"
            ));
        }
    }

    if failures.is_empty() {
        writeln!(report, "slab-workload: all checks passed")?;
        Ok(report)
    } else {
        bail!("{report}\nFAILED:\n  {}", failures.join("\n  "))
    }
}

/// Where a computed data address lies, by the x86-64 kernel memory layouts
/// (`Documentation/arch/x86/x86_64/mm.rst`). Both 4-level and 5-level paging occur: QEMU's
/// `-cpu max` has LA57, and so do recent server CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum AddressClass {
    /// Direct map, vmalloc/vmap (stacks included), vmemmap, cpu entry area, kernel image,
    /// modules, fixmap.
    Kernel,
    /// A plausible user address (kernel code touching user memory, e.g. in uaccess helpers).
    User,
    /// Nothing can be mapped there: a wrong register or displacement.
    Garbage,
}

/// Where `addr` lies; KASAN's shadow is the kernel's on a kernel with KASAN (`debugging`).
fn classify_address(addr: u64, debugging: &DebuggingCode) -> AddressClass {
    const KERNEL_REGIONS: [(u64, u64); 8] = [
        // 4-level paging
        (0xffff_8880_0000_0000, 0xffff_c880_0000_0000), // direct map
        (0xffff_c900_0000_0000, 0xffff_e900_0000_0000), // vmalloc/ioremap
        (0xffff_ea00_0000_0000, 0xffff_eb00_0000_0000), // vmemmap
        // 5-level paging
        (0xff11_0000_0000_0000, 0xff91_0000_0000_0000), // direct map
        (0xffa0_0000_0000_0000, 0xffd2_0000_0000_0000), // vmalloc/ioremap
        (0xffd4_0000_0000_0000, 0xffd6_0000_0000_0000), // vmemmap
        // both
        (0xffff_fe00_0000_0000, 0xffff_fe80_0000_0000), // cpu entry area
        (0xffff_ffff_8000_0000, 0xffff_ffff_ffe0_0000), // kernel image, modules, fixmap
    ];
    if KERNEL_REGIONS
        .iter()
        .any(|&(lo, hi)| (lo..hi).contains(&addr))
        || debugging.is_kasan_shadow(addr)
    {
        AddressClass::Kernel
    } else if (0x1_0000..0x0000_8000_0000_0000).contains(&addr) {
        // mmap_min_addr keeps the first 64 KiB unmapped.
        AddressClass::User
    } else {
        AddressClass::Garbage
    }
}

/// For samples whose instruction has one memory operand, the computed address must be a
/// mapped address in at least 99% of cases.
fn check_effective_addresses(profile: &Profile, report: &mut String) -> Result<()> {
    let mut decoder = Decoder::new();
    let debugging = kasan::debugging_code(profile);
    let mut counts: BTreeMap<AddressClass, u64> = BTreeMap::new();
    let mut garbage_examples = Vec::new();
    for item in profile.records() {
        let (_, record) = item.context("reading the guest's profile")?;
        let Record::AccessSample(sample) = record else {
            continue;
        };
        if let DecodeOutcome::Access(access) = decoder.access(&sample) {
            let class = classify_address(access.addr, &debugging);
            *counts.entry(class).or_default() += 1;
            if class == AddressClass::Garbage && garbage_examples.len() < 5 {
                garbage_examples.push(format!("ip {:#x} -> {:#x}", sample.ip, access.addr));
            }
        }
    }
    let total: u64 = counts.values().sum();
    let garbage = counts.get(&AddressClass::Garbage).copied().unwrap_or(0);
    writeln!(
        report,
        "effective addresses of single-operand samples: {counts:?} of {total}"
    )?;
    ensure!(
        total >= 100,
        "only {total} samples with one memory operand: too few to judge"
    );
    ensure!(
        garbage * 100 <= total,
        "{garbage} of {total} computed addresses cannot be mapped (more than 1%), e.g. {garbage_examples:?}"
    );
    Ok(())
}

fn check_selftest(dir: &Path) -> Result<String> {
    let path = dir.join("selftest.dprof");
    let profile = Profile::open(&path).context("opening the guest's profile")?;
    let mut report = String::new();
    check_effective_addresses(&profile, &mut report)?;

    // Ground truth: every sample whose ip is in an access function, by the kallsyms snapshot.
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let mut in_function: BTreeMap<String, u64> = BTreeMap::new();
    for item in profile.records() {
        let (_, record) = item.context("reading the guest's profile")?;
        let Record::AccessSample(sample) = record else {
            continue;
        };
        if let Some(location) = kallsyms.lookup(sample.ip) {
            if location.symbol.name.starts_with("dprof_selftest_") {
                *in_function.entry(location.symbol.name.clone()).or_default() += 1;
            }
        }
    }
    writeln!(report, "samples in selftest functions: {in_function:?}")?;

    // Field names come from the DWARF of the guest kernel and of dprof_selftest.ko.
    let vmlinux = guest_vmlinux()?;
    let json = report_json(
        &path,
        &["--vmlinux", &vmlinux, "--debug-dir", &dir.to_string_lossy()],
    )?;
    let obj = find_type(&json, "dprof_selftest_obj")?;
    let local = find_type(&json, "dprof_selftest_local")?;
    let mut failures = Vec::new();
    for (function, ty, type_name) in [
        ("dprof_selftest_produce", obj, "dprof_selftest_obj"),
        ("dprof_selftest_consume", obj, "dprof_selftest_obj"),
        ("dprof_selftest_local_touch", local, "dprof_selftest_local"),
    ] {
        let total = in_function.get(function).copied().unwrap_or(0);
        let resolved = type_samples_in(ty, function);
        let pct = percent(resolved, total);
        writeln!(
            report,
            "{function}: {resolved} of {total} samples resolve to {type_name} ({pct:.1}%)"
        )?;
        if total < 20 {
            failures.push(format!("{function}: only {total} samples"));
        } else if pct < 90.0 {
            failures.push(format!(
                "{function}: {pct:.1}% of its samples resolve to {type_name}, want >= 90%"
            ));
        }
    }
    for (ty, type_name, offset, want) in [
        (obj, "dprof_selftest_obj", 8, "a"),
        (obj, "dprof_selftest_obj", 16, "b"),
        (local, "dprof_selftest_local", 0, "count"),
        (local, "dprof_selftest_local", 8, "value"),
    ] {
        let got = field_name_at(ty, offset);
        writeln!(report, "{type_name}+{offset}: field {got:?}")?;
        if got.as_deref() != Some(want) {
            failures.push(format!(
                "{type_name} offset {offset} named {got:?}, want {want}"
            ));
        }
    }
    let (obj_bounce, local_bounce) = (obj["bounce"].as_bool(), local["bounce"].as_bool());
    writeln!(
        report,
        "bounce: dprof_selftest_obj {obj_bounce:?} ({} objects), dprof_selftest_local {local_bounce:?} ({} objects)",
        obj["bounced_objects"], local["bounced_objects"]
    )?;
    // An object bounces when samples catch it on both CPUs in its lifetime: with P samples
    // in the producer and C in the consumer spread over N objects, about P x C / N objects
    // are caught on both.
    let sampled = |f: &str| in_function.get(f).copied().unwrap_or(0) as f64;
    let expected_bounced = sampled("dprof_selftest_produce") * sampled("dprof_selftest_consume")
        / obj["allocs"].as_u64().unwrap_or(0).max(1) as f64;
    writeln!(
        report,
        "objects expected to be sampled on both CPUs: {expected_bounced:.1} (samples in the \
         producer x samples in the consumer / objects)"
    )?;
    if obj_bounce != Some(true) {
        if expected_bounced >= MIN_EXPECTED_BOUNCED {
            failures.push("dprof_selftest_obj is not flagged as bouncing".to_string());
        } else {
            writeln!(
                report,
                "too few samples per object to see a bounce here (want {MIN_EXPECTED_BOUNCED} \
                 expected): the bounce is not checked in this run"
            )?;
        }
    }
    if local_bounce != Some(false) {
        failures.push("dprof_selftest_local is flagged as bouncing".to_string());
    }
    check_no_frees_missed_at_start(dir, &mut report, &mut failures)?;
    if failures.is_empty() {
        writeln!(report, "selftest-data-profile: all checks passed")?;
        Ok(report)
    } else {
        bail!("{report}\nFAILED:\n  {}", failures.join("\n  "))
    }
}

/// `start.dprof` began and ended while the `local` workload allocated and freed one
/// `dprof_selftest_local` at a time on CPU 0: every allocation it records must have its free
/// recorded, but for the one object live when it stopped. Frees missed while the probes
/// were being attached (allocation probes first) would show as allocations without their
/// free.
fn check_no_frees_missed_at_start(
    dir: &Path,
    report: &mut String,
    failures: &mut Vec<String>,
) -> Result<()> {
    let profile =
        Profile::open(&dir.join("start.dprof")).context("opening the guest's start.dprof")?;
    let summary = dprof_analysis::summary::Summary::of(&profile).context("reading start.dprof")?;
    let (allocs, frees) = summary
        .caches
        .iter()
        .filter(|c| c.name == "dprof_selftest_local")
        .fold((0, 0), |(a, f), c| (a + c.allocs, f + c.frees));
    writeln!(
        report,
        "collection started under load: dprof_selftest_local {allocs} allocations, {frees} frees"
    )?;
    if allocs < 100 {
        failures.push(format!(
            "start.dprof: only {allocs} dprof_selftest_local allocations: the load did not run"
        ));
    } else if allocs > frees + 1 {
        // More frees than allocations is fine: objects allocated before the allocation probe
        // was attached are freed under the free probe.
        failures.push(format!(
            "start.dprof: {allocs} dprof_selftest_local allocations but {frees} frees: frees \
             were missed (one object at a time is live)"
        ));
    }
    Ok(())
}

fn check_workload(dir: &Path) -> Result<String> {
    let path = dir.join("workload.dprof");
    let profile = Profile::open(&path).context("opening the guest's profile")?;
    let mut report = String::new();
    check_effective_addresses(&profile, &mut report)?;
    let json = report_json(&path, &[])?;
    let types = json["data_profile"]["types"]
        .as_array()
        .context("no types in the report")?;
    let with_samples: Vec<&str> = types
        .iter()
        .filter(|t| t["samples"].as_u64().unwrap_or(0) > 0 && t["kind"] == "slab")
        .filter_map(|t| t["name"].as_str())
        .collect();
    writeln!(
        report,
        "slab types with samples ({}): {with_samples:?}",
        with_samples.len()
    )?;
    let coverage = &json["coverage"];
    writeln!(report, "coverage: {}", coverage["summary"])?;
    ensure!(
        coverage["total_samples"].as_u64().unwrap_or(0) > 0,
        "coverage reports no samples"
    );
    ensure!(
        with_samples.contains(&"skbuff_head_cache"),
        "skbuff_head_cache has no samples in the data profile"
    );
    ensure!(
        with_samples.len() >= 6,
        "only {} slab types have samples; want skbuff_head_cache and at least 5 others",
        with_samples.len()
    );
    // Field names: from the profile's BTF alone (per-CPU variables only among the
    // variables), then from the kernel's DWARF, which names globals too (issue 20's target).
    let vmlinux = guest_vmlinux()?;
    let with_dwarf = report_json(&path, &["--vmlinux", &vmlinux])?;
    let named_share = |json: &serde_json::Value| -> Result<(u64, u64)> {
        let named = &json["coverage"]["fields_named"];
        Ok((
            named["named_samples"].as_u64().context("no fields_named")?,
            named["typed_samples"].as_u64().context("no fields_named")?,
        ))
    };
    let (btf_named, btf_typed) = named_share(&json)?;
    let (dwarf_named, dwarf_typed) = named_share(&with_dwarf)?;
    writeln!(
        report,
        "fields named: {btf_named} of {btf_typed} samples on data types from the profile's \
         BTF, {dwarf_named} of {dwarf_typed} ({:.1}%, want >= 80%) with the vmlinux's DWARF",
        percent(dwarf_named, dwarf_typed)
    )?;
    ensure!(
        dwarf_named * 5 >= dwarf_typed * 4,
        "fields named for {dwarf_named} of {dwarf_typed} samples on data types, want >= 80%"
    );
    check_typed_share("network and processes", &with_dwarf, &mut report)?;
    // The filesystem workload: the same two targets.
    let fs = dir.join("fs.dprof");
    let fs_json = report_json(&fs, &["--vmlinux", &vmlinux])?;
    writeln!(
        report,
        "filesystem: coverage {}",
        fs_json["coverage"]["summary"]
    )?;
    let (fs_named, fs_typed) = named_share(&fs_json)?;
    writeln!(
        report,
        "filesystem: fields named for {fs_named} of {fs_typed} samples on data types ({:.1}%, \
         want >= 80%)",
        percent(fs_named, fs_typed)
    )?;
    ensure!(
        fs_named * 5 >= fs_typed * 4,
        "filesystem: fields named for {fs_named} of {fs_typed} samples on data types, want >= 80%"
    );
    check_typed_share("filesystem", &fs_json, &mut report)?;
    // Pages from the page allocator are typed by the function that took them: tmpfs's file
    // data by the shmem code that adds them to its page cache.
    let shmem_pages = fs_json["data_profile"]["types"]
        .as_array()
        .context("no types in the filesystem report")?
        .iter()
        .find(|t| t["name"] == "page@shmem_get_folio_gfp")
        .context("the filesystem's tmpfs pages are no page@shmem_get_folio_gfp type")?;
    writeln!(
        report,
        "filesystem: page@shmem_get_folio_gfp: {} allocations, {} samples",
        shmem_pages["allocs"], shmem_pages["samples"]
    )?;
    ensure!(
        shmem_pages["allocs"].as_u64().unwrap_or(0) >= 2560
            && shmem_pages["samples"].as_u64().unwrap_or(0) > 0,
        "page@shmem_get_folio_gfp: {shmem_pages}, want the 10 MiB file's 2560 pages allocated and sampled"
    );
    writeln!(report, "workload-data-profile: all checks passed")?;
    Ok(report)
}

/// Issue 20's target: at least 90% of the samples with a memory operand resolved to a type or
/// a named region. Those samples are the resolved ones and the ones whose address nothing
/// resolved, whose instruction touched more locations than dprof follows, or whose segment it
/// cannot place; `lea` computes an address and touches none.
fn check_typed_share(workload: &str, json: &serde_json::Value, report: &mut String) -> Result<()> {
    let coverage = &json["coverage"];
    let bucket = |name: &str| -> u64 {
        coverage["buckets"]
            .as_array()
            .and_then(|b| b.iter().find(|b| b["bucket"] == name))
            .and_then(|b| b["samples"].as_u64())
            .unwrap_or(0)
    };
    let resolved = coverage["resolved_samples"]
        .as_u64()
        .context("no resolved_samples")?;
    let with_operand = resolved
        + bucket("unknown_address")
        + bucket("multiple_memory_operands")
        + bucket("unsupported_segment");
    writeln!(
        report,
        "{workload}: {resolved} of {with_operand} samples with a memory operand typed ({:.1}%, \
         want >= 90%)",
        percent(resolved, with_operand)
    )?;
    ensure!(
        with_operand > 100,
        "{workload}: only {with_operand} samples with a memory operand"
    );
    ensure!(
        resolved * 10 >= with_operand * 9,
        "{workload}: {resolved} of {with_operand} samples with a memory operand typed, want >= 90%"
    );
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(check), Some(dir)) = (args.get(1), args.get(2)) else {
        bail!(
            "usage: dprof-qemu-check slab-workload|selftest-data-profile|workload-data-profile|\
             selftest-histories|kernel-histories|selftest-misses|selftest-causal|backends-agree|\
             selftest-bulk|selftest-cache-destroy|cpu-hotplug|soak DIR"
        );
    };
    let dir = Path::new(dir);
    let report = match check.as_str() {
        "slab-workload" => check_slab_workload(dir),
        "selftest-data-profile" => check_selftest(dir),
        "workload-data-profile" => check_workload(dir),
        "selftest-histories" => check_histories(dir),
        "kernel-histories" => check_kernel_histories(dir),
        "selftest-misses" => misses::check(dir),
        "selftest-causal" => causal::check(dir),
        "causal-end-to-end" => causal::check_end_to_end(dir),
        "causal-blocking" => causal_blocking::check(dir),
        "causal-arrival" => causal_arrival::check(dir),
        "causal-real-workload" => causal_real::check(dir),
        "backends-agree" => backends::check(dir),
        "selftest-bulk" => bulk::check(dir),
        "selftest-cache-destroy" => ephemeral::check(dir),
        "cpu-hotplug" => hotplug::check(dir),
        "soak" => soak::check(dir),
        other => bail!("unknown check {other:?}"),
    };
    match report {
        Ok(text) => {
            print!("{text}");
            std::fs::write(dir.join("check.txt"), &text)?;
            Ok(())
        }
        Err(e) => {
            std::fs::write(dir.join("check.txt"), format!("{e:#}"))?;
            Err(e)
        }
    }
}

/// One history as its records tell it.
#[derive(Default)]
struct SeenHistory {
    start: Option<(u64, u32, u64)>,
    end: Option<(u64, dprof_abi::HistoryEnd)>,
    /// (time, cpu, trap ip)
    hits: Vec<(u64, u32, u64)>,
    /// (cpu, delay)
    arms: Vec<(u32, u64)>,
}

#[expect(
    clippy::too_many_lines,
    reason = "one linear report; splitting it would only scatter it"
)]
fn check_histories(dir: &Path) -> Result<String> {
    let profile =
        Profile::open(&dir.join("histories.dprof")).context("opening the guest's profile")?;
    let mut report = String::new();
    let bad_plan = std::fs::read_to_string(dir.join("bad-plan.err")).unwrap_or_default();
    writeln!(
        report,
        "a plan naming a missing cache: {}",
        bad_plan.lines().last().unwrap_or("?")
    )?;
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let mut histories: BTreeMap<u64, SeenHistory> = BTreeMap::new();
    for item in profile.records() {
        let (header, record) = item.context("reading the guest's profile")?;
        let (t, cpu) = (header.time_ns, header.cpu);
        match record {
            Record::HistoryStart(s) => {
                let h = histories.entry(s.history).or_default();
                ensure!(h.start.is_none(), "history {} started twice", s.history);
                h.start = Some((t, cpu, s.object));
            }
            Record::HistoryEnd(e) => {
                let h = histories.entry(e.history).or_default();
                ensure!(h.end.is_none(), "history {} ended twice", e.history);
                h.end = Some((t, e));
            }
            Record::HistoryHit(hit) => histories
                .entry(hit.history)
                .or_default()
                .hits
                .push((t, cpu, hit.ip)),
            Record::HistoryArm(a) => histories
                .entry(a.history)
                .or_default()
                .arms
                .push((cpu, a.delay_ns)),
            _ => {}
        }
    }
    ensure!(histories.len() >= 3, "only {} histories", histories.len());
    let function = |ip: u64| {
        kallsyms
            .lookup(ip)
            .map_or_else(|| format!("{ip:#x}"), |l| l.symbol.name.clone())
    };
    let (mut on_path, mut hits, mut late, mut remote_delays) = (0usize, 0usize, 0usize, Vec::new());
    let mut gaps: Vec<u64> = Vec::new();
    for (id, h) in &histories {
        let (start_t, start_cpu, _) = h
            .start
            .with_context(|| format!("history {id} has no start"))?;
        let (end_t, end) = h.end.with_context(|| format!("history {id} has no end"))?;
        ensure!(
            end.reason == dprof_abi::HISTORY_END_FREED,
            "history {id} ended with reason {}, not freed",
            end.reason
        );
        ensure!(
            end.hits as usize == h.hits.len(),
            "history {id}: the end counts {} hits, {} were read",
            end.hits,
            h.hits.len()
        );
        for &(cpu, delay) in &h.arms {
            if cpu != start_cpu {
                remote_delays.push(delay);
            }
        }
        ensure!(
            h.arms.iter().any(|&(cpu, _)| cpu != start_cpu),
            "history {id}: no other CPU armed"
        );
        let mut sorted = h.hits.clone();
        sorted.sort_unstable();
        hits += sorted.len();
        late += sorted
            .iter()
            .filter(|&&(t, _, _)| t < start_t || t > end_t)
            .count();
        for pair in sorted.windows(2) {
            if pair[0].1 == pair[1].1 {
                gaps.push(pair[1].0 - pair[0].0);
            }
        }
        // The known path: producer hits on CPU 0, then consumer hits on CPU 1.
        let labels: Vec<(String, u32)> = sorted
            .iter()
            .map(|&(_, cpu, ip)| (function(ip), cpu))
            .collect();
        let producer = labels
            .iter()
            .position(|(f, _)| f == "dprof_selftest_produce");
        let consumer = labels
            .iter()
            .position(|(f, _)| f == "dprof_selftest_consume");
        let only_known = labels.iter().all(|(f, cpu)| {
            (f == "dprof_selftest_produce" && *cpu == 0)
                || (f == "dprof_selftest_consume" && *cpu == 1)
        });
        if let (Some(p), Some(c)) = (producer, consumer) {
            let produce_before = labels[..c]
                .iter()
                .all(|(f, _)| f == "dprof_selftest_produce");
            if p < c && produce_before && only_known {
                on_path += 1;
            }
        }
        ensure!(
            profile
                .text()
                .bytes_at(sorted.first().map_or(0, |x| x.2), 1)
                .is_some()
                || sorted.is_empty(),
            "history {id}: no kernel code captured for its first trap"
        );
    }
    let share = on_path as f64 / histories.len() as f64;
    writeln!(
        report,
        "histories: {} ({} hits, {:.0} per history); on the known path (produce on CPU 0, then \
         consume on CPU 1): {on_path} ({:.0}%)",
        histories.len(),
        hits,
        hits as f64 / histories.len() as f64,
        share * 100.0
    )?;
    ensure!(
        share >= 0.9,
        "only {:.0}% of histories follow the known path",
        share * 100.0
    );
    ensure!(
        late == 0,
        "{late} hits lie outside their history's start..end"
    );
    remote_delays.sort_unstable();
    gaps.sort_unstable();
    let median = |v: &[u64]| v.get(v.len() / 2).copied().unwrap_or(0);
    writeln!(
        report,
        "other CPUs armed after: median {} us, max {} us; time between traps on one CPU: median {} us",
        median(&remote_delays) / 1000,
        remote_delays.last().copied().unwrap_or(0) / 1000,
        median(&gaps) / 1000
    )?;
    let text = profile.text();
    writeln!(
        report,
        "kernel code captured: {} functions, {} bytes",
        text.len(),
        text.byte_count()
    )?;
    let counters = profile
        .stop()
        .device
        .as_ref()
        .and_then(|d| d.histories)
        .context("the profile has no history counters from after stop")?;
    writeln!(
        report,
        "after stop: {} started, {} stray traps, {} armed slots, {} reserved slots",
        counters.started, counters.stray_hits, counters.armed_slots, counters.reserved_slots
    )?;
    ensure!(
        counters.armed_slots == 0 && counters.reserved_slots == 0,
        "debug registers still armed or reserved after stop"
    );
    ensure!(
        counters.started == histories.len() as u64,
        "the module started {} histories, the profile has {}",
        counters.started,
        histories.len()
    );
    check_data_flow(&dir.join("histories.dprof"), &mut report)?;
    // The second run let dprof choose the offsets from its own first sampling phase.
    let planned = Profile::open(&dir.join("planned.dprof")).context("opening planned.dprof")?;
    let mut planned_ranges = BTreeMap::new();
    for item in planned.records() {
        if let (_, Record::HistoryStart(s)) = item.context("reading planned.dprof")? {
            for r in s.ranges.iter().filter(|r| r.len != 0) {
                *planned_ranges.entry((r.offset, r.len)).or_insert(0u64) += 1;
            }
        }
    }
    writeln!(
        report,
        "planned run: ranges watched (offset, len) -> histories: {planned_ranges:?}"
    )?;
    // The selftest touches `a` (offset 8) and `b` (offset 16): what the samples show.
    ensure!(
        !planned_ranges.is_empty()
            && planned_ranges
                .keys()
                .all(|&(offset, len)| offset < 24 && offset + len > 8),
        "the planner chose ranges outside fields a and b"
    );
    check_data_flow(&dir.join("planned.dprof"), &mut report)?;
    check_whole_object(&dir.join("full.dprof"), &mut report)?;
    Ok(report)
}

/// `full:dprof_selftest_relay`: the six targets over its eight chunks (four each), merged per
/// history set, give
/// exactly the relay workload's path (kmod/selftest/relay.rs): each field access in order,
/// with its function, read or write, and CPU (0: the allocating one), in at least 90% of the
/// sets, and no pair left out of the merge.
fn check_whole_object(profile: &Path, report: &mut String) -> Result<()> {
    const KNOWN: [(&str, u64, &str, u64); 7] = [
        ("dprof_selftest_relay_fill", 0, "write", 0),
        ("dprof_selftest_relay_fill", 48, "write", 0),
        ("dprof_selftest_relay_pass", 0, "read", 1),
        ("dprof_selftest_relay_pass", 16, "write", 1),
        ("dprof_selftest_relay_finish", 16, "read", 0),
        ("dprof_selftest_relay_finish", 32, "write", 0),
        ("dprof_selftest_relay_finish", 48, "read", 0),
    ];
    let flow = report_json(
        profile,
        &["--view", "data-flow", "--type", "dprof_selftest_relay"],
    )?;
    let full = &flow["full"];
    let sets = full["sets"]
        .as_u64()
        .context("no whole-object view (data_flow.full)")?;
    let targets = full["targets"].as_u64().unwrap_or(0);
    let unmerged = full["unmerged_histories"].as_u64().unwrap_or(u64::MAX);
    let top = &full["paths"][0];
    let steps: Vec<(String, u64, String, u64)> = top["steps"]
        .as_array()
        .context("no merged path")?
        .iter()
        .map(|s| {
            (
                s["function"].as_str().unwrap_or("?").to_owned(),
                s["chunk"]["offset"].as_u64().unwrap_or(u64::MAX),
                s["kind"].as_str().unwrap_or("?").to_owned(),
                s["cpu"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect();
    let share = top["share"].as_f64().unwrap_or(0.0);
    writeln!(
        report,
        "whole object: {sets} history sets of {targets} targets, {unmerged} histories left out \
         of the merge; the most frequent merged path ({:.0}% of sets): {}",
        share * 100.0,
        steps
            .iter()
            .map(|(f, o, k, c)| format!("{f}+{o} {k} cpu{c}"))
            .collect::<Vec<_>>()
            .join(" -> ")
    )?;
    ensure!(
        targets == 6,
        "{targets} targets, not the 6 that watch 8 chunks four at a time"
    );
    ensure!(sets >= 10, "only {sets} history sets");
    ensure!(
        unmerged == 0,
        "{unmerged} histories disagree with their chunks' accesses"
    );
    let known: Vec<(String, u64, String, u64)> = KNOWN
        .iter()
        .map(|&(f, o, k, c)| (f.to_owned(), o, k.to_owned(), c))
        .collect();
    ensure!(
        steps == known,
        "the merged path is not the relay's known one"
    );
    ensure!(
        share >= 0.9,
        "the known path in only {:.0}% of sets",
        share * 100.0
    );
    ensure!(
        top["end"]
            .as_str()
            .is_some_and(|f| f.contains("relay_first"))
            && top["end_cpu"] == 0,
        "the relay's objects are freed on CPU 0 by relay_first"
    );
    Ok(())
}

/// `full:skbuff_head_cache` under loopback TCP: complete history sets of every target, the
/// decoded accesses where the debug registers say (unless this machine's registers are
/// inexact: `spurious`), and merged paths that account for every set, with the convergence
/// curve ending at their number.
fn check_whole_skbuff(profile: &Path, spurious: u64, report: &mut String) -> Result<()> {
    let flow = report_json(
        profile,
        &["--view", "data-flow", "--type", "skbuff_head_cache"],
    )?;
    let full = &flow["full"];
    let number = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let sets = full["sets"]
        .as_u64()
        .context("no whole-object view of skbuff_head_cache")?;
    let paths = full["paths"].as_array().cloned().unwrap_or_default();
    let curve = full["distinct_paths_after"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let checks = &flow["checks"];
    let mismatched = number(&checks["mismatched"]);
    let total = &full["total_cost"];
    writeln!(
        report,
        "whole sk_buff ({} bytes, {} targets): {sets} history sets matched from {} rounds ({} \
         incomplete), {} histories left out of the merge, {} distinct merged paths (the last new one at set \
         {}); {} verified accesses, {mismatched} mismatched; cost {} histories and {} hits in \
         all",
        full["object_size"],
        full["targets"],
        full["rounds"],
        full["incomplete_rounds"],
        full["unmerged_histories"],
        paths.len(),
        full["last_new_path_at"],
        number(&checks["verified"]),
        total["histories"],
        total["hits"],
    )?;
    if let Some(top) = paths.first() {
        let steps = top["steps"].as_array().map_or(0, Vec::len);
        let chunks: BTreeSet<u64> = top["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["chunk"]["offset"].as_u64())
            .collect();
        writeln!(
            report,
            "  most frequent merged path: {} sets, {steps} accesses to {} chunks, {} to {}",
            top["sets"],
            chunks.len(),
            top["alloc_function"].as_str().unwrap_or("?"),
            top["end"].as_str().unwrap_or("?"),
        )?;
    }
    ensure!(sets >= 3, "only {sets} complete sets of the whole sk_buff");
    ensure!(
        mismatched == 0 || spurious > 0,
        "decoded addresses disagree with exact debug registers"
    );
    let in_paths: u64 = paths.iter().map(|p| number(&p["sets"])).sum();
    ensure!(
        in_paths == sets,
        "the merged paths hold {in_paths} sets of {sets}"
    );
    ensure!(
        curve.len() as u64 == sets
            && curve.last().map(number) == Some(paths.len() as u64)
            && curve.windows(2).all(|w| number(&w[0]) <= number(&w[1])),
        "the convergence curve does not end at the number of distinct paths"
    );
    ensure!(
        paths
            .iter()
            .all(|p| p["steps"].as_array().is_some_and(|s| !s.is_empty())),
        "a merged path without an access"
    );
    Ok(())
}

/// The data flow view of `dprof_selftest_obj`: at least 90% of histories follow alloc (in
/// the producer thread) -> `dprof_selftest_produce` -> CPU change -> `dprof_selftest_consume` ->
/// free (in the consumer thread), with the CPU change on that edge and nowhere else (those that
/// watch only `b`, which the producer never touches: alloc -> CPU change -> consume -> free);
/// and every access decoded from the trapped instruction hit its watched range.
fn check_data_flow(profile: &Path, report: &mut String) -> Result<()> {
    let flow = report_json(
        profile,
        &["--view", "data-flow", "--type", "dprof_selftest_obj"],
    )?;
    let histories = flow["histories"].as_u64().context("no history count")?;
    let checks = &flow["checks"];
    let count = |k: &str| checks[k].as_u64().unwrap_or(0);
    let no_code: u64 = [
        "no_code_symbol",
        "no_code_bytes",
        "no_code_boundary",
        "no_code_undecodable",
        "no_code_user_mode",
    ]
    .iter()
    .map(|k| count(k))
    .sum();
    let unverifiable = count("unverifiable_clobbered")
        + count("unverifiable_implicit")
        + count("unverifiable_segment");
    writeln!(
        report,
        "{}: data flow of {histories} histories; decoded address vs watched range: {} verified, \
         {} mismatched, {unverifiable} unverifiable, {no_code} without code",
        profile
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        count("verified"),
        count("mismatched"),
    )?;
    ensure!(
        count("mismatched") == 0,
        "decoded addresses disagree with the debug registers"
    );
    ensure!(no_code == 0, "{no_code} hits could not be decoded");
    ensure!(count("verified") > 0, "no hit was verified");
    let mut on_path = 0;
    for path in flow["paths"].as_array().context("no paths")? {
        let elements = path["elements"].as_array().context("no elements")?;
        let mut functions: Vec<(&str, bool)> = Vec::new();
        for e in elements {
            let f = e["function"].as_str().unwrap_or("?");
            let change = e["cpu_change"].as_bool().unwrap_or(false);
            if functions.last().is_none_or(|(last, _)| *last != f) {
                functions.push((f, change));
            } else if change {
                functions.push((f, true)); // a CPU change inside a function: off the path
            }
        }
        // Histories that watch `b` (+16) alone see only the consumer's reads.
        let only_b = elements.iter().all(|e| e["range"]["offset"] == 16);
        let expected: &[(&str, bool)] = if only_b {
            &[("dprof_selftest_consume", true)]
        } else {
            &[
                ("dprof_selftest_produce", false),
                ("dprof_selftest_consume", true),
            ]
        };
        let alloc_ok = path["alloc_function"]
            .as_str()
            .is_some_and(|f| f.contains("handoff_producer"));
        let free_ok = path["end"]
            .as_str()
            .is_some_and(|f| f.contains("handoff_consumer"))
            && path["end_cpu_change"] == false;
        if functions == expected && alloc_ok && free_ok {
            on_path += path["histories"].as_u64().unwrap_or(0);
        }
    }
    let share = on_path as f64 / histories.max(1) as f64;
    writeln!(
        report,
        "  alloc -> produce -(CPU change)-> consume -> free: {on_path} of {histories} ({:.0}%)",
        share * 100.0
    )?;
    ensure!(
        share >= 0.9,
        "only {:.0}% of histories follow the known data flow",
        share * 100.0
    );
    Ok(())
}

/// History counters of a profile's stop section, and its collection time.
fn history_counters(profile: &Profile) -> Result<(dprof_format::HistoryCounters, u64)> {
    let stop = profile.stop();
    let counters = stop
        .device
        .as_ref()
        .and_then(|d| d.histories)
        .context("the profile has no history counters from after stop")?;
    Ok((counters, stop.elapsed_ns))
}

#[expect(
    clippy::too_many_lines,
    reason = "one linear report; splitting it would only scatter it"
)]
fn check_kernel_histories(dir: &Path) -> Result<String> {
    let mut report = String::new();
    let timings = std::fs::read_to_string(dir.join("timings")).context("reading timings")?;
    let ms: Vec<u64> = timings
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("parsing timings")?;
    let [plain, slab, hist] = ms[..] else {
        bail!("timings {timings:?}: expected three numbers");
    };

    // 1. skbuff_head_cache under loopback TCP.
    let skb_path = dir.join("skb.dprof");
    let skb = Profile::open(&skb_path).context("opening skb.dprof")?;
    let (counters, _) = history_counters(&skb)?;
    ensure!(
        counters.armed_slots == 0 && counters.reserved_slots == 0,
        "skb run: registers left armed"
    );
    let flow = report_json(
        &skb_path,
        &["--view", "data-flow", "--type", "skbuff_head_cache"],
    )?;
    let histories = flow["histories"].as_u64().unwrap_or(0);
    let checks = &flow["checks"];
    let count = |k: &str| checks[k].as_u64().unwrap_or(0);
    writeln!(
        report,
        "skbuff_head_cache: {histories} histories ({} complete), {} hits: {} verified, {} \
         mismatched, {} unverifiable (clobbered base {}, implicit {}), {} paths, the last new \
         one at history {}",
        flow["complete"],
        flow["hits"],
        count("verified"),
        count("mismatched"),
        count("unverifiable_clobbered")
            + count("unverifiable_implicit")
            + count("unverifiable_segment"),
        count("unverifiable_clobbered"),
        count("unverifiable_implicit"),
        flow["convergence"]["paths"],
        flow["convergence"]["last_new_path_at"],
    )?;
    ensure!(
        histories >= 5,
        "only {histories} histories of skbuff_head_cache"
    );
    ensure!(count("verified") > 0, "no skbuff access was verified");
    // A mismatch is a decoder error unless this machine's debug registers report traps for
    // accesses that do not touch the watched bytes (dprof-bp-probe: QEMU's TCG does).
    let probe = std::fs::read_to_string(dir.join("bp-probe")).context("reading bp-probe")?;
    let spurious: u64 = probe
        .split_whitespace()
        .find_map(|f| f.strip_prefix("outside="))
        .and_then(|n| n.parse().ok())
        .context("bp-probe printed no outside=N")?;
    writeln!(
        report,
        "  debug-register probe ({}): {spurious} of 2000 unaligned stores outside the watched \
         bytes trapped{}",
        probe.trim(),
        if spurious > 0 {
            ": this machine's breakpoints are inexact, so mismatched traps are the machine's"
        } else {
            ""
        }
    )?;
    ensure!(
        count("mismatched") == 0 || spurious > 0,
        "decoded addresses disagree with exact debug registers"
    );
    if let Some(top) = flow["paths"].as_array().and_then(|p| p.first()) {
        let mut functions: Vec<&str> = Vec::new();
        for e in top["elements"].as_array().into_iter().flatten() {
            let f = e["function"].as_str().unwrap_or("?");
            if functions.last() != Some(&f) {
                functions.push(f);
            }
        }
        writeln!(
            report,
            "  most common path ({} histories): {} -> {} -> {}",
            top["histories"],
            top["alloc_function"].as_str().unwrap_or("?"),
            functions.join(" -> "),
            top["end"].as_str().unwrap_or("?")
        )?;
    }
    // The three runs differ by the histories alone (slab events in both dprof runs); on a
    // shared TCG host the difference can be smaller than the run-to-run noise.
    let per_history_us =
        (hist as i64 - slab as i64) * 1000 / i64::try_from(counters.started.max(1))?;
    writeln!(
        report,
        "  40 wget of 256 KiB over loopback: {plain} ms alone, {slab} ms with slab events, {hist} \
         ms with histories too: {} histories, {per_history_us} us each by difference{}",
        counters.started,
        if per_history_us <= 0 {
            " (below this host's run-to-run noise)"
        } else {
            ""
        }
    )?;

    check_whole_skbuff(&dir.join("skb-full.dprof"), spurious, &mut report)?;

    // 2. Stress.
    let stress = Profile::open(&dir.join("stress.dprof")).context("opening stress.dprof")?;
    let (counters, elapsed_ns) = history_counters(&stress)?;
    let mut reasons: BTreeMap<u32, u64> = BTreeMap::new();
    let mut per_target: BTreeMap<u32, u64> = BTreeMap::new();
    let mut hits = 0u64;
    for item in stress.records() {
        match item.context("reading stress.dprof")?.1 {
            Record::HistoryEnd(e) => *reasons.entry(e.reason).or_default() += 1,
            Record::HistoryStart(s) => *per_target.entry(s.target).or_default() += 1,
            Record::HistoryHit(_) => hits += 1,
            _ => {}
        }
    }
    let secs = elapsed_ns as f64 / 1e9;
    writeln!(
        report,
        "stress: {} histories in {secs:.1} s ({:.0}/s), {hits} hits, per target {per_target:?}, \
         end reasons (1 freed, 2 reallocated, 3 timeout, 4 stopped) {reasons:?}, {} stray traps; \
         after stop {} armed, {} reserved",
        counters.started,
        counters.started as f64 / secs,
        counters.stray_hits,
        counters.armed_slots,
        counters.reserved_slots
    )?;
    ensure!(secs >= 60.0, "the stress run lasted {secs:.1} s, not 60");
    ensure!(
        counters.started >= 100,
        "only {} histories under stress",
        counters.started
    );
    ensure!(
        counters.armed_slots == 0 && counters.reserved_slots == 0,
        "debug registers still armed or reserved after the stress run"
    );
    let ended: u64 = reasons.values().sum();
    ensure!(
        ended == counters.started,
        "{} histories started, {ended} ended",
        counters.started
    );
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debugging_code(kallsyms: &str) -> DebuggingCode {
        DebuggingCode::from_text_symbols(Kallsyms::parse(kallsyms.as_bytes()).text_symbols())
    }

    #[test]
    fn kasan_shadow_is_the_kernel_s_only_on_a_kasan_kernel() {
        let kasan =
            debugging_code("ffffffff81000000 T kasan_check_range\nffffffff81000100 T kfree\n");
        let plain = debugging_code("ffffffff81000000 T kfree\n");
        let shadow = 0xffff_ed10_0698_8089;
        assert_eq!(classify_address(shadow, &kasan), AddressClass::Kernel);
        assert_eq!(classify_address(shadow, &plain), AddressClass::Garbage);
        assert_eq!(
            classify_address(0xffff_8880_0123_4567, &plain),
            AddressClass::Kernel
        );
        assert_eq!(
            classify_address(0x7fff_1234_5678, &kasan),
            AddressClass::User
        );
        assert_eq!(classify_address(0x10, &kasan), AddressClass::Garbage);
    }
}
