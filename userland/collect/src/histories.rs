//! Object access histories (`dprof collect --histories`): what to watch with the debug
//! registers, turned into the module's [`HistoryPlan`], and the kernel code the traps land
//! in, captured at the end.

use std::collections::BTreeSet;
use std::path::Path;

use dprof_abi::{HistoryPlan, HistoryTarget, Record, WatchRange, MAX_HISTORY_TARGETS};
use dprof_analysis::resolve::{is_site_symbol, site_function};
use dprof_analysis::symbols::Kallsyms;
use dprof_format::{FullCoveragePlan, KernelText};

use crate::kcore::{self, Kcore};
use crate::plan::{plan_detailed, PlanBudget};

/// Why no history plan could be made: one sentence for the person.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HistoryPlanError(String);

/// What `--histories` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistorySpec {
    /// Types and offsets chosen from a first sampling phase.
    Auto,
    /// These types; each with its ranges, or planned from the sampling phase when it has none.
    Types(Vec<TypeSpec>),
}

/// Types one `--histories` names at most.
pub const MAX_TYPES: usize = 8;

/// One `--histories` type: `CACHE[@FUNCTION][:OFFSET+LEN...]` (up to four ranges), or
/// `full:CACHE[@FUNCTION]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeSpec {
    /// The slab cache's name.
    pub cache: String,
    /// Only allocations from this function (a `kmalloc-N@FUNCTION` type).
    pub site: Option<String>,
    /// One to four ranges; none: planned from the samples, or the whole object.
    pub ranges: Vec<WatchRange>,
    /// The whole object, every pair of its chunks ordered (`full:`).
    pub whole: bool,
}

impl TypeSpec {
    /// The type's name as reports show it.
    #[must_use]
    pub fn type_name(&self) -> String {
        match &self.site {
            Some(site) => format!("{}@{site}", self.cache),
            None => self.cache.clone(),
        }
    }
}

impl std::fmt::Display for TypeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.whole {
            f.write_str(FULL_PREFIX)?;
        }
        f.write_str(&self.type_name())?;
        for r in &self.ranges {
            write!(f, ":{}+{}", r.offset, r.len)?;
        }
        Ok(())
    }
}

impl std::fmt::Display for HistorySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Types(types) => {
                let all: Vec<String> = types.iter().map(TypeSpec::to_string).collect();
                f.write_str(&all.join(","))
            }
        }
    }
}

impl HistorySpec {
    /// True when a sampling phase must choose what to watch.
    #[must_use]
    pub fn needs_planning(&self) -> bool {
        match self {
            Self::Auto => true,
            Self::Types(types) => types.iter().any(|t| t.ranges.is_empty() && !t.whole),
        }
    }

    /// The types to watch whole (`full:`).
    #[must_use]
    pub fn whole_types(&self) -> Vec<&TypeSpec> {
        match self {
            Self::Auto => Vec::new(),
            Self::Types(types) => types.iter().filter(|t| t.whole).collect(),
        }
    }
}

/// The prefix of a type watched whole.
const FULL_PREFIX: &str = "full:";

/// Parses `--histories`: `auto`, or comma-separated types (see [`TypeSpec`]).
///
/// # Errors
/// A sentence saying what is wrong with `s`.
pub fn parse_history_spec(s: &str) -> Result<HistorySpec, String> {
    let s = s.trim();
    if s == "auto" {
        return Ok(HistorySpec::Auto);
    }
    let mut types = Vec::new();
    for item in split_types(s).into_iter().map(str::trim) {
        types.push(parse_type_spec(item)?);
    }
    if types.len() > MAX_TYPES {
        return Err(format!(
            "{} types given; dprof watches at most {MAX_TYPES} per collection",
            types.len(),
        ));
    }
    Ok(HistorySpec::Types(types))
}

fn parse_type_spec(item: &str) -> Result<TypeSpec, String> {
    if let Some(whole) = item.strip_prefix(FULL_PREFIX) {
        let spec = parse_type_spec(whole.trim())?;
        if !spec.ranges.is_empty() || spec.whole {
            return Err(format!(
                "{item:?}: a type watched whole takes no ranges: full:CACHE[@FUNCTION]"
            ));
        }
        return Ok(TypeSpec {
            whole: true,
            ..spec
        });
    }
    let mut parts = split_ranges(item).into_iter();
    let name = parts.next().unwrap_or_default();
    let (cache, site) = match name.split_once('@') {
        // A Rust type split by size is watched as its allocator's: the module knows sites only.
        Some((cache, site)) => (cache, Some(site_function(site).to_owned())),
        None => (name, None),
    };
    if cache.is_empty() || site.as_deref() == Some("") {
        return Err(format!(
            "{item:?}: expected CACHE[@FUNCTION][:OFFSET+LEN...] or \
             full:CACHE[@FUNCTION], e.g. skbuff_head_cache:0+8, kmalloc-1k@__alloc_skb or \
             full:skbuff_head_cache"
        ));
    }
    if cache.len() >= dprof_abi::CACHE_NAME_BYTES {
        return Err(format!(
            "{cache:?} is longer than the {} bytes a cache name may have",
            dprof_abi::CACHE_NAME_BYTES - 1
        ));
    }
    let mut ranges = Vec::new();
    for range in parts {
        ranges.push(parse_range(item, range)?);
    }
    if ranges.len() > dprof_abi::HISTORY_RANGES {
        return Err(format!(
            "{item:?}: at most {} ranges per type (one per debug register)",
            dprof_abi::HISTORY_RANGES
        ));
    }
    for (i, a) in ranges.iter().enumerate() {
        if let Some(b) = ranges[i + 1..].iter().find(|b| a.overlaps(**b)) {
            return Err(format!(
                "{item:?}: the ranges +{}/{} and +{}/{} overlap",
                a.offset, a.len, b.offset, b.len
            ));
        }
    }
    Ok(TypeSpec {
        cache: cache.to_owned(),
        site,
        ranges,
        whole: false,
    })
}

/// `s` cut at each `,` outside `<...>`: a demangled Rust site keeps its generic arguments
/// (`Box<T, A>`).
fn split_types(s: &str) -> Vec<&str> {
    let mut depth = 0i32;
    let mut cuts = Vec::new();
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b',' if depth <= 0 => cuts.push(i),
            _ => {}
        }
    }
    let starts = std::iter::once(0).chain(cuts.iter().map(|&i| i + 1));
    let ends = cuts.iter().copied().chain(std::iter::once(s.len()));
    starts.zip(ends).map(|(a, b)| &s[a..b]).collect()
}

/// `item` cut at each lone `:`: a demangled Rust site (`kmalloc-64@<kernel::alloc::allocator::
/// ReallocFunc>::call`) keeps its `::`.
fn split_ranges(item: &str) -> Vec<&str> {
    let bytes = item.as_bytes();
    let lone = |i: usize| {
        bytes[i] == b':'
            && (i == 0 || bytes[i - 1] != b':')
            && bytes.get(i + 1).is_none_or(|&b| b != b':')
    };
    let cuts: Vec<usize> = (0..bytes.len()).filter(|&i| lone(i)).collect();
    let starts = std::iter::once(0).chain(cuts.iter().map(|&i| i + 1));
    let ends = cuts.iter().copied().chain(std::iter::once(item.len()));
    starts.zip(ends).map(|(a, b)| &item[a..b]).collect()
}

fn parse_range(item: &str, range: &str) -> Result<WatchRange, String> {
    let bad = || {
        format!(
            "{item:?}: range {range:?} is not OFFSET+LEN (e.g. 16+8; hex with 0x; LEN 1, 2, 4 or 8)"
        )
    };
    let (offset, len) = range.split_once('+').ok_or_else(bad)?;
    let number = |t: &str| match t.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    };
    let (offset, len) = (
        number(offset).ok_or_else(bad)?,
        number(len).ok_or_else(bad)?,
    );
    let range = WatchRange { offset, len };
    if !range.is_watchable() {
        return Err(format!(
            "{item:?}: a debug register watches 1, 2, 4 or 8 bytes at an offset that is a \
             multiple of the length; {offset}+{len} is not that"
        ));
    }
    Ok(range)
}

/// Rate, timeout and hit limits of the plan.
#[derive(Clone, Copy, Debug)]
pub struct PlanLimits {
    pub max_per_sec: u32,
    pub timeout_ms: u32,
    pub max_hits: u32,
}

/// What the module is handed: the plan's limits, and its targets in the order
/// `HistoryStart.target` counts them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModulePlan {
    /// Limits; `target_count` is set, `targets_ptr` is the device's to fill.
    pub limits: HistoryPlan,
    /// The targets: those of the types watched whole first.
    pub targets: Vec<HistoryTarget>,
}

/// The byte ranges that cover an object of `size` bytes: aligned 8-byte chunks, the tail cut
/// into the aligned 4-, 2- and 1-byte pieces a debug register can watch.
#[must_use]
pub fn object_chunks(size: u32) -> Vec<WatchRange> {
    let mut chunks = Vec::new();
    let mut offset = 0;
    for len in [8, 4, 2, 1] {
        while size - offset >= len {
            chunks.push(WatchRange { offset, len });
            offset += len;
        }
    }
    chunks
}

/// Chunks one whole-object target watches: two pairs of neighbouring chunks, one per debug
/// register.
const CHUNKS_PER_TARGET: usize = dprof_abi::HISTORY_RANGES;

/// Targets that together watch every pair of `chunks` in one history, so that the histories
/// of one set order every pair of accesses: the chunks in pairs of neighbours (the last may be
/// alone), and a target for every two such pairs, lower offsets first: (0,1),(2,3), then
/// (0,1),(4,5), ..., (2,3),(4,5), ... Up to four chunks make a single target. `g` pairs make
/// `g (g - 1) / 2` targets: about a quarter of the `n (n - 1) / 2` that chunk pairs would
/// take, the paper's pairwise profiling (section 4.3) with four registers instead of two.
fn chunk_cover(chunks: &[WatchRange]) -> Vec<Vec<WatchRange>> {
    if chunks.len() <= CHUNKS_PER_TARGET {
        return vec![chunks.to_vec()];
    }
    let neighbours: Vec<&[WatchRange]> = chunks.chunks(CHUNKS_PER_TARGET / 2).collect();
    let mut targets = Vec::new();
    for (i, a) in neighbours.iter().enumerate() {
        for b in &neighbours[i + 1..] {
            targets.push([*a, *b].concat());
        }
    }
    targets
}

/// Targets [`chunk_cover`] makes for `chunks` chunks.
const fn cover_targets(chunks: usize) -> usize {
    if chunks <= CHUNKS_PER_TARGET {
        return 1;
    }
    let pairs = chunks.div_ceil(CHUNKS_PER_TARGET / 2);
    pairs * (pairs - 1) / 2
}

/// The largest object watched whole: its chunks' cover fills a plan.
fn largest_whole_object() -> u32 {
    let mut chunks: usize = 1;
    while cover_targets(chunks + 1) <= MAX_HISTORY_TARGETS {
        chunks += 1;
    }
    u32::try_from(chunks * 8).unwrap_or(u32::MAX)
}

/// The types of `spec` watched whole (`full:`), each with its object size (`object_size`
/// finds it by cache name) and the plan indices of its targets ([`chunk_cover`]), which come
/// first in the plan.
///
/// # Errors
/// [`HistoryPlanError`] when a size is unknown, or the targets do not fit a plan.
pub fn full_coverage(
    spec: &HistorySpec,
    object_size: &dyn Fn(&str) -> Option<u32>,
) -> Result<Vec<FullCoveragePlan>, HistoryPlanError> {
    let mut plans = Vec::new();
    let mut next = 0usize;
    for t in spec.whole_types() {
        let size = object_size(&t.cache).ok_or_else(|| {
            HistoryPlanError(format!(
                "full:{}: the size of the cache's objects is not in /sys/kernel/slab/{}/\
                 object_size; name the ranges to watch instead",
                t.type_name(),
                t.cache
            ))
        })?;
        let count = cover_targets(object_chunks(size).len());
        if next + count > MAX_HISTORY_TARGETS {
            return Err(HistoryPlanError(format!(
                "full:{}: its objects are {size} bytes, {count} targets of four chunks to \
                 watch, and a plan holds {MAX_HISTORY_TARGETS} targets ({} bytes watched whole \
                 at most, all such types together); name the ranges to watch instead",
                t.type_name(),
                largest_whole_object()
            )));
        }
        plans.push(FullCoveragePlan {
            type_name: t.type_name(),
            object_size: size,
            targets: (next..next + count)
                .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
                .collect(),
        });
        next += count;
    }
    Ok(plans)
}

/// The module's plan for `types`: those watched whole (`whole`, sized by `object_size`)
/// first, each as targets that watch every pair of its chunks ([`chunk_cover`]), then the
/// others with their ranges. `@FUNCTION`
/// becomes the function's address range from kallsyms.
///
/// # Errors
/// [`HistoryPlanError`] when there are no types or too many targets, a type has no range, a
/// whole type's size is unknown, or a `@FUNCTION` is not in kallsyms.
pub fn module_plan(
    types: &[TypeSpec],
    kallsyms: &Kallsyms,
    limits: PlanLimits,
    object_size: &dyn Fn(&str) -> Option<u32>,
) -> Result<ModulePlan, HistoryPlanError> {
    let (whole, ranged): (Vec<&TypeSpec>, Vec<&TypeSpec>) = types.iter().partition(|t| t.whole);
    let full = full_coverage(
        &HistorySpec::Types(whole.iter().map(|&t| t.clone()).collect()),
        object_size,
    )?;
    let mut targets = Vec::new();
    for (t, plan) in whole.iter().zip(&full) {
        let base = site_target(t, kallsyms)?;
        for chunks in chunk_cover(&object_chunks(plan.object_size)) {
            targets.push(HistoryTarget {
                ranges: dprof_abi::history_ranges(&chunks),
                ..base
            });
        }
    }
    for t in ranged {
        let mut target = site_target(t, kallsyms)?;
        for (r, range) in target.ranges.iter_mut().zip(&t.ranges) {
            *r = *range;
        }
        if target.ranges[0].len == 0 {
            return Err(HistoryPlanError(format!(
                "{}: no range to watch",
                t.type_name()
            )));
        }
        targets.push(target);
    }
    if targets.is_empty() || targets.len() > MAX_HISTORY_TARGETS {
        return Err(HistoryPlanError(format!(
            "a history plan needs 1 to {MAX_HISTORY_TARGETS} targets, not {}",
            targets.len()
        )));
    }
    Ok(ModulePlan {
        limits: HistoryPlan {
            struct_size: HistoryPlan::SIZE as u32,
            target_count: u32::try_from(targets.len()).unwrap_or(u32::MAX),
            max_per_sec: limits.max_per_sec,
            timeout_ms: limits.timeout_ms,
            max_hits: limits.max_hits,
            ..HistoryPlan::default()
        },
        targets,
    })
}

/// A target for `t`'s cache, with its call sites when it names a function; no ranges yet.
fn site_target(t: &TypeSpec, kallsyms: &Kallsyms) -> Result<HistoryTarget, HistoryPlanError> {
    let mut target = HistoryTarget::default().with_name(t.cache.as_bytes());
    if let Some(site) = &t.site {
        let symbol = kallsyms
            .text_symbols()
            .iter()
            .find(|s| is_site_symbol(&s.name, site))
            .ok_or_else(|| {
                HistoryPlanError(format!(
                    "{}: no function {site} in /proc/kallsyms to take allocations from",
                    t.type_name()
                ))
            })?;
        target.site_start = symbol.address;
        target.site_end = symbol.address + symbol.size.max(1);
    }
    Ok(target)
}

/// The types and ranges to watch, chosen from the planning phase's data profile: `auto`
/// takes the types with most samples; types without ranges get the offsets their samples use
/// (the planner watches the most-used offsets singly and in consecutive pairs, the paper's
/// way to order fields without watching every pair). Types that could not be planned are
/// said on stderr.
///
/// # Errors
/// [`HistoryPlanError`] when a named type has no samples, or nothing could be planned.
pub fn choose_types(
    spec: &HistorySpec,
    report: &dprof_model::Report,
    kallsyms: &Kallsyms,
) -> Result<Vec<TypeSpec>, HistoryPlanError> {
    let (given, wanted): (Vec<TypeSpec>, Option<Vec<String>>) = match spec {
        HistorySpec::Auto => (Vec::new(), None),
        HistorySpec::Types(types) => (
            types
                .iter()
                .filter(|t| !t.ranges.is_empty() || t.whole)
                .cloned()
                .collect(),
            Some(
                types
                    .iter()
                    .filter(|t| t.ranges.is_empty() && !t.whole)
                    .map(TypeSpec::type_name)
                    .collect(),
            ),
        ),
    };
    let mut budget = PlanBudget {
        max_targets: PlanBudget::default()
            .max_targets
            .saturating_sub(given.iter().filter(|t| !t.whole).count())
            .max(1),
        ..PlanBudget::default()
    };
    let mut restricted;
    let from = match &wanted {
        None => report,
        Some(names) => {
            // Only the named types, whatever their share.
            restricted = report.clone();
            restricted
                .data_profile
                .types
                .retain(|t| names.contains(&t.name));
            for name in names {
                if !restricted
                    .data_profile
                    .types
                    .iter()
                    .any(|t| t.name == *name)
                {
                    return Err(HistoryPlanError(format!(
                        "--histories {name}: no access sample touched this type in the first \
                         sampling phase, so there are no offsets to choose from; give its \
                         ranges (e.g. {name}:0+8) or a longer --plan-time"
                    )));
                }
            }
            budget.max_types = names.len();
            budget.min_share = 0.0;
            &restricted
        }
    };
    let plan = plan_detailed(from, kallsyms, budget);
    for skipped in &plan.skipped {
        eprintln!(
            "dprof: histories: not watching {}: {}",
            skipped.type_name, skipped.reason
        );
    }
    let mut types = given;
    types.extend(plan.targets.iter().map(|t| {
        TypeSpec {
            cache: t.cache.clone(),
            site: t.site.as_ref().map(|s| s.function.clone()),
            ranges: t
                .ranges
                .iter()
                .map(|r| WatchRange {
                    offset: r.offset,
                    len: r.len,
                })
                .collect(),
            whole: false,
        }
    }));
    if types.is_empty() {
        return Err(HistoryPlanError(format!(
            "--histories {spec}: no slab type had enough samples in the sampling phase to \
             plan histories; sample longer (--plan-time) or name the types and their ranges"
        )));
    }
    Ok(types)
}

/// Trap ips seen in `HistoryHit` records: the functions whose code the profile needs.
#[derive(Debug, Default)]
pub struct TrapIps(BTreeSet<u64>);

impl TrapIps {
    /// Notes the trap ip of a `HistoryHit`; other records are ignored.
    pub fn note(&mut self, record: &Record) {
        if let Record::HistoryHit(hit) = record {
            self.0.insert(hit.ip);
        }
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Longest function copied: anything longer is not one function.
const MAX_FUNCTION_BYTES: u64 = 256 << 10;

/// The code copied for a trap at `ip` (start, end): its function, and at least 16 bytes past
/// `ip`; `None` when kallsyms knows no function there.
#[must_use]
pub fn function_range(kallsyms: &Kallsyms, ip: u64) -> Option<(u64, u64)> {
    let loc = kallsyms.lookup(ip)?;
    let start = loc.symbol.address;
    // The trap ip is after the access: the code up to it is what is decoded.
    let size = loc.symbol.size.max(loc.offset + 16).min(MAX_FUNCTION_BYTES);
    Some((start, start + size))
}

/// The code of the functions the traps landed in, read from `kcore`; with a sentence for
/// what could not be read.
#[must_use]
pub fn capture_text(
    traps: &TrapIps,
    kallsyms: &Kallsyms,
    kcore_path: &Path,
) -> (KernelText, Option<String>) {
    let mut functions: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut unknown = 0usize;
    for &ip in &traps.0 {
        match function_range(kallsyms, ip) {
            Some(range) => {
                functions.insert(range);
            }
            None => unknown += 1,
        }
    }
    let kcore = match Kcore::open(kcore_path) {
        Ok(kcore) => kcore,
        Err(e) => {
            return (
                KernelText::new(),
                Some(format!(
                    "cannot capture kernel code for the history analysis: {e}"
                )),
            )
        }
    };
    let ranges: Vec<(u64, u64)> = functions.into_iter().collect();
    let (text, unreadable) = kcore::read_text(&kcore, &ranges);
    let note = (unknown + unreadable > 0).then(|| {
        format!(
            "kernel code: {unreadable} of {} functions unreadable in {}, {unknown} trap \
             addresses in no known function; their accesses stay undecoded",
            ranges.len(),
            kcore.path().display()
        )
    });
    (text, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_sites_and_ranges() {
        assert_eq!(parse_history_spec("auto"), Ok(HistorySpec::Auto));
        let spec = parse_history_spec("dprof_selftest_obj:8+8:16+8, kmalloc-1k@__alloc_skb")
            .expect("parses");
        let HistorySpec::Types(types) = &spec else {
            panic!("{spec:?}");
        };
        assert_eq!(types[0].cache, "dprof_selftest_obj");
        assert_eq!(
            types[0].ranges,
            [
                WatchRange { offset: 8, len: 8 },
                WatchRange { offset: 16, len: 8 }
            ]
        );
        assert_eq!(types[1].type_name(), "kmalloc-1k@__alloc_skb");
        assert!(types[1].ranges.is_empty());
        assert!(spec.needs_planning());
        let explicit = parse_history_spec("filp:0x10+4").expect("hex offset");
        assert!(!explicit.needs_planning());
    }

    #[test]
    fn specs_keep_demangled_rust_sites_whole() {
        let spec = parse_history_spec(
            "kmalloc-64@<kernel::alloc::allocator::ReallocFunc>::call:8+8, \
             kmalloc-96@<a::B<u8, u16>>::new",
        )
        .expect("parses");
        let HistorySpec::Types(types) = &spec else {
            panic!("{spec:?}");
        };
        assert_eq!(types.len(), 2, "{types:?}");
        assert_eq!(
            types[0].site.as_deref(),
            Some("<kernel::alloc::allocator::ReallocFunc>::call")
        );
        assert_eq!(types[0].ranges, [WatchRange { offset: 8, len: 8 }]);
        assert_eq!(types[1].type_name(), "kmalloc-96@<a::B<u8, u16>>::new");
        let sized =
            parse_history_spec("kmalloc-64@<kernel::alloc::allocator::ReallocFunc>::call[48B]")
                .expect("parses");
        assert_eq!(
            sized,
            parse_history_spec("kmalloc-64@<kernel::alloc::allocator::ReallocFunc>::call")
                .expect("parses"),
            "a type split by size is watched as its allocator's"
        );
        // The site is found by its mangled name in kallsyms.
        let kallsyms = Kallsyms::parse(
            b"ffffffff81000000 T _RNvMNtNtCs1234_6kernel5alloc9allocatorNtB2_11ReallocFunc4call\n\
              ffffffff81000200 T kfree\n",
        );
        let limits = PlanLimits {
            max_per_sec: 10,
            timeout_ms: 500,
            max_hits: 100,
        };
        let plan = module_plan(&types[..1], &kallsyms, limits, &no_sizes).expect("plans");
        assert_eq!(plan.targets[0].site_start, 0xffff_ffff_8100_0000);
        assert_eq!(plan.targets[0].site_end, 0xffff_ffff_8100_0200);
    }

    fn no_sizes(_: &str) -> Option<u32> {
        None
    }

    /// Asserts that the module's decoder takes `plan`'s limits and every target.
    fn assert_module_accepts(plan: &ModulePlan) {
        let limits = HistoryPlan {
            targets_ptr: 0x7fff_0000_0000,
            ..plan.limits
        };
        let mut buf = [0u8; HistoryPlan::SIZE];
        limits.encode(&mut buf);
        assert_eq!(HistoryPlan::decode(&buf), Ok(limits));
        assert_eq!(plan.limits.target_count as usize, plan.targets.len());
        for t in &plan.targets {
            let mut buf = [0u8; HistoryTarget::SIZE];
            t.encode(&mut buf);
            assert_eq!(HistoryTarget::decode(&buf), Ok(*t));
        }
    }

    #[test]
    fn an_object_is_cut_into_the_chunks_a_debug_register_watches() {
        let spans = |size| {
            object_chunks(size)
                .iter()
                .map(|r| (r.offset, r.len))
                .collect::<Vec<_>>()
        };
        assert_eq!(spans(16), [(0, 8), (8, 8)]);
        assert_eq!(spans(23), [(0, 8), (8, 8), (16, 4), (20, 2), (22, 1)]);
        assert_eq!(spans(3), [(0, 2), (2, 1)]);
        assert!(object_chunks(232).iter().all(|r| r.is_watchable()));
        assert_eq!(object_chunks(232).len(), 29);
    }

    #[test]
    fn a_type_watched_whole_covers_every_pair_of_chunks_first_in_the_plan() {
        let spec = parse_history_spec("filp:0+8,full:dprof_selftest_relay").expect("parses");
        assert_eq!(spec.to_string(), "filp:0+8,full:dprof_selftest_relay");
        assert!(!spec.needs_planning(), "a whole type needs no samples");
        let HistorySpec::Types(types) = &spec else {
            panic!("types");
        };
        let sizes = |name: &str| (name == "dprof_selftest_relay").then_some(64);
        let full = full_coverage(&spec, &sizes).expect("sized");
        assert_eq!(full.len(), 1);
        assert_eq!(full[0].type_name, "dprof_selftest_relay");
        assert_eq!(full[0].object_size, 64);
        // Eight chunks in four neighbouring pairs; every two pairs a target: the plan's first
        // six targets.
        assert_eq!(full[0].targets, [0, 1, 2, 3, 4, 5]);
        let limits = PlanLimits {
            max_per_sec: 10,
            timeout_ms: 500,
            max_hits: 100,
        };
        let plan = module_plan(types, &Kallsyms::parse(b""), limits, &sizes).expect("plans");
        assert_module_accepts(&plan);
        assert_eq!(plan.targets.len(), 7);
        let offsets: Vec<[u32; 4]> = plan.targets[..6]
            .iter()
            .map(|t| t.ranges.map(|r| r.offset))
            .collect();
        assert_eq!(
            offsets,
            [
                [0, 8, 16, 24],
                [0, 8, 32, 40],
                [0, 8, 48, 56],
                [16, 24, 32, 40],
                [16, 24, 48, 56],
                [32, 40, 48, 56]
            ]
        );
        assert!(plan.targets.iter().all(|t| t.ranges[0].len == 8));
        // Every pair of chunks is in some target.
        let chunks = object_chunks(64);
        for (i, a) in chunks.iter().enumerate() {
            for b in &chunks[i + 1..] {
                assert!(plan.targets[..6]
                    .iter()
                    .any(|t| t.ranges.contains(a) && t.ranges.contains(b)));
            }
        }
        assert!(plan.targets[..6]
            .iter()
            .all(|t| t.name_bytes() == b"dprof_selftest_relay"));
        assert_eq!(plan.targets[6].name_bytes(), b"filp");
    }

    #[test]
    fn the_cover_puts_every_pair_of_chunks_in_one_target_of_at_most_four() {
        for size in 1..=200 {
            let chunks = object_chunks(size);
            let cover = chunk_cover(&chunks);
            assert_eq!(cover.len(), cover_targets(chunks.len()), "{size} bytes");
            assert!(cover.iter().all(|t| !t.is_empty() && t.len() <= 4));
            for (i, a) in chunks.iter().enumerate() {
                for b in &chunks[i + 1..] {
                    assert!(
                        cover.iter().any(|t| t.contains(a) && t.contains(b)),
                        "{size} bytes: {a:?} and {b:?} never watched together"
                    );
                }
            }
        }
        // Five chunks: (0,1),(2,3),(4) make three targets, the last of three chunks.
        let five = chunk_cover(&object_chunks(40));
        let offsets: Vec<Vec<u32>> = five
            .iter()
            .map(|t| t.iter().map(|r| r.offset).collect())
            .collect();
        assert_eq!(
            offsets,
            [vec![0, 8, 16, 24], vec![0, 8, 32], vec![16, 24, 32]]
        );
        assert_eq!(largest_whole_object(), 1456);
    }

    #[test]
    fn a_type_too_big_or_unsized_to_watch_whole_is_refused_with_the_reason() {
        let spec = parse_history_spec("full:kmalloc-1k").expect("parses");
        let err = full_coverage(&spec, &|_| Some(2048)).expect_err("too many targets");
        assert!(err.to_string().contains("8128 targets"), "{err}");
        assert!(err.to_string().contains("1456 bytes"), "{err}");
        let err = full_coverage(&spec, &no_sizes).expect_err("no size");
        assert!(err.to_string().contains("object_size"), "{err}");
        let err = parse_history_spec("full:filp:0+8").expect_err("ranges");
        assert!(err.contains("takes no ranges"), "{err}");
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, words) in [
            ("", "expected CACHE"),
            ("filp@", "expected CACHE"),
            ("filp:3+4", "multiple of the length"),
            ("filp:0+16", "1, 2, 4 or 8"),
            ("filp:0+8:4+4", "overlap"),
            ("filp:0+1:1+1:2+1:3+1:4+1", "at most 4 ranges"),
            ("filp:0+8:16+8:20+2", "+16/8 and +20/2 overlap"),
            ("filp:8", "OFFSET+LEN"),
            ("a,b,c,d,e,f,g,h,i", "at most 8"),
        ] {
            let err = parse_history_spec(spec).expect_err(spec);
            assert!(err.contains(words), "{spec}: {err}");
        }
    }

    fn example_report() -> (dprof_model::Report, Kallsyms) {
        let profile = dprof_format::Profile::from_vec(dprof_fixtures::data_profile::profile())
            .expect("example profile");
        let report = dprof_analysis::pipeline::analyze(
            &profile,
            &dprof_analysis::pipeline::Options::default(),
        )
        .expect("ok");
        (report, Kallsyms::parse(profile.kallsyms()))
    }

    #[test]
    fn auto_plans_the_sampled_slab_types_and_keeps_given_ranges() {
        let (report, kallsyms) = example_report();
        let auto = choose_types(&HistorySpec::Auto, &report, &kallsyms).expect("plans");
        assert!(!auto.is_empty() && auto.len() <= dprof_abi::MAX_HISTORY_TARGETS);
        // Every choice is something the module accepts.
        let limits = PlanLimits {
            max_per_sec: 10,
            timeout_ms: 500,
            max_hits: 100,
        };
        let plan = module_plan(&auto, &kallsyms, limits, &no_sizes).expect("module plan");
        assert_module_accepts(&plan);
        // The type with most samples comes first.
        let top = &report.data_profile.types[0];
        assert_eq!(auto[0].type_name(), top.name);

        // A named type without ranges gets planned offsets; one with ranges keeps them.
        let spec = parse_history_spec(&format!("{},filp:0+8", top.name)).expect("spec");
        let chosen = choose_types(&spec, &report, &kallsyms).expect("plans");
        assert_eq!(chosen[0].to_string(), "filp:0+8");
        assert!(chosen[1..]
            .iter()
            .all(|t| t.type_name() == top.name && !t.ranges.is_empty()));
    }

    #[test]
    fn a_named_type_without_samples_cannot_be_planned() {
        let (report, kallsyms) = example_report();
        let spec = parse_history_spec("no_such_cache").expect("spec");
        let err = choose_types(&spec, &report, &kallsyms).expect_err("nothing to plan from");
        assert!(
            err.to_string()
                .contains("no access sample touched this type"),
            "{err}"
        );
    }

    #[test]
    fn plans_resolve_sites_from_kallsyms() {
        let kallsyms =
            Kallsyms::parse(b"ffffffff81000000 T __alloc_skb\nffffffff81000200 T kfree_skb\n");
        let HistorySpec::Types(types) =
            parse_history_spec("kmalloc-1k@__alloc_skb:0+8,filp:8+8:16+4").expect("parses")
        else {
            panic!("types");
        };
        let limits = PlanLimits {
            max_per_sec: 10,
            timeout_ms: 500,
            max_hits: 100,
        };
        let plan = module_plan(&types, &kallsyms, limits, &no_sizes).expect("plans");
        assert_module_accepts(&plan);
        assert_eq!(plan.targets[0].site_start, 0xffff_ffff_8100_0000);
        assert_eq!(plan.targets[0].site_end, 0xffff_ffff_8100_0200);
        assert_eq!(plan.targets[1].name_bytes(), b"filp");
        let HistorySpec::Types(missing) =
            parse_history_spec("kmalloc-64@nosuch:0+8").expect("parses")
        else {
            panic!("types");
        };
        let err =
            module_plan(&missing, &kallsyms, limits, &no_sizes).expect_err("no such function");
        assert!(err.to_string().contains("no function nosuch"), "{err}");
    }
}
