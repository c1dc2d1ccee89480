//! The history planner: which objects and offsets to watch, from a data profile.
//!
//! Debug registers watch at most 8 aligned bytes each, so a whole object takes many
//! histories, and ordering every pair of fields takes quadratically many (paper section 5.4).
//! Like the paper, the planner watches only the fields the access samples show in use: for
//! each of the most sampled types (by share), its most sampled offsets one at a time, plus
//! pairs of consecutive most-used offsets so that their order along a path is known:
//! `s1, p12, s2, p23, s3, ...`. Targets are shared among types by share of samples (every
//! chosen type gets one, the rest go by the D'Hondt rule), within
//! [`PLANNED_TARGETS`].

use dprof_abi::{HistoryTarget, WatchRange};
use serde::{Deserialize, Serialize};

use dprof_analysis::resolve::is_site_symbol;
use dprof_analysis::symbols::Kallsyms;
use dprof_model::histories::Span;
use dprof_model::{Report, TypeKind, TypeProfile};

/// Targets a plan from samples has at most. Each target gets its share of the history rate
/// (the module takes them in turn), so more targets would give each fewer histories; a plan
/// may hold many more (`--histories full:TYPE` pairs every chunk of an object).
pub const PLANNED_TARGETS: usize = 8;

/// How much to plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanBudget {
    /// Targets at most (capped at [`PLANNED_TARGETS`]).
    pub max_targets: usize,
    /// Types at most.
    pub max_types: usize,
    /// Types with a smaller share of samples (or misses) are left out.
    pub min_share: f64,
    /// Offsets watched per type at most.
    pub max_offsets: usize,
}

impl Default for PlanBudget {
    fn default() -> Self {
        Self {
            max_targets: PLANNED_TARGETS,
            max_types: 4,
            min_share: 0.01,
            max_offsets: 4,
        }
    }
}

/// The allocation sites a target accepts: one function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteRange {
    /// Its name.
    pub function: String,
    /// First address.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
}

/// One planned target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedTarget {
    /// The type, as the data profile names it.
    pub type_name: String,
    /// Its slab cache.
    pub cache: String,
    /// For generic kmalloc types: the allocating function.
    pub site: Option<SiteRange>,
    /// One range, or a pair (disjoint, lower offset first).
    pub ranges: Vec<Span>,
    /// The field names of the ranges' sampled offsets, when known.
    pub fields: Vec<Option<String>>,
    /// The type's share of samples (or misses).
    pub share: f64,
}

impl PlannedTarget {
    /// The target as the module takes it.
    #[must_use]
    pub fn to_abi(&self) -> HistoryTarget {
        let range = |i: usize| {
            self.ranges
                .get(i)
                .map_or_else(WatchRange::default, |s| WatchRange {
                    offset: s.offset,
                    len: s.len,
                })
        };
        HistoryTarget {
            site_start: self.site.as_ref().map_or(0, |s| s.start),
            site_end: self.site.as_ref().map_or(0, |s| s.end),
            ranges: std::array::from_fn(range),
            ..HistoryTarget::default()
        }
        .with_name(self.cache.as_bytes())
    }
}

/// A type the planner would have watched but could not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedType {
    /// The type.
    pub type_name: String,
    /// Why, in a sentence.
    pub reason: String,
}

/// A plan with the types it had to leave out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Targets, by type rank, then most used offsets first.
    pub targets: Vec<PlannedTarget>,
    /// Types among the top ones that cannot be targeted.
    pub skipped: Vec<SkippedType>,
}

/// The targets for the most sampled types of `report` (see the module doc).
#[must_use]
pub fn plan(report: &Report, kallsyms: &Kallsyms, budget: PlanBudget) -> Vec<PlannedTarget> {
    plan_detailed(report, kallsyms, budget).targets
}

/// [`plan`], saying which top types could not be targeted and why.
#[must_use]
pub fn plan_detailed(report: &Report, kallsyms: &Kallsyms, budget: PlanBudget) -> Plan {
    let max_targets = budget.max_targets.min(PLANNED_TARGETS);
    let mut out = Plan::default();
    // Per chosen type: its candidate targets in priority order.
    let mut chosen: Vec<(f64, Vec<PlannedTarget>)> = Vec::new();
    for t in &report.data_profile.types {
        if chosen.len() >= budget.max_types.min(max_targets) {
            break;
        }
        if t.kind != TypeKind::Slab || t.share < budget.min_share {
            continue;
        }
        match candidates(t, kallsyms, budget.max_offsets) {
            Ok(list) => chosen.push((t.share, list)),
            Err(reason) => out.skipped.push(SkippedType {
                type_name: t.name.clone(),
                reason,
            }),
        }
    }
    // One target for each chosen type first (they are at most `max_targets`), then D'Hondt:
    // the next target goes to the type with the highest share / (targets + 1).
    let mut given = vec![1usize; chosen.len()];
    for _ in chosen.len()..max_targets {
        let next = chosen
            .iter()
            .enumerate()
            .filter(|(i, (_, list))| given[*i] < list.len())
            .max_by(|(i, (a, _)), (j, (b, _))| {
                let qa = a / (given[*i] + 1) as f64;
                let qb = b / (given[*j] + 1) as f64;
                // Ties go to the higher ranked type (the smaller index).
                qa.total_cmp(&qb).then(j.cmp(i))
            })
            .map(|(i, _)| i);
        let Some(i) = next else { break };
        given[i] += 1;
    }
    for ((_, list), n) in chosen.into_iter().zip(given) {
        out.targets.extend(list.into_iter().take(n));
    }
    out
}

/// The candidate targets of one type, best first, or why it has none.
fn candidates(
    t: &TypeProfile,
    kallsyms: &Kallsyms,
    max_offsets: usize,
) -> Result<Vec<PlannedTarget>, String> {
    let Some(cache) = &t.cache else {
        return Err("it has no slab cache (a large kmalloc from the page allocator)".to_owned());
    };
    if cache.starts_with("cache@") {
        return Err("its cache has no name in the profile".to_owned());
    }
    // Names the ABI cut are shown with "..."; the module compares the bytes it keeps.
    let cache = cache.trim_end_matches("...").to_owned();
    // Types split by allocation site (generic kmalloc caches, merged slab pools) take their
    // objects from that site only.
    let site = match &t.site {
        Some(site) => Some(site_range(site, kallsyms)?),
        None => None,
    };
    let mut spans: Vec<(Span, Option<String>)> = Vec::new();
    for f in &t.fields {
        if spans.len() >= max_offsets {
            break;
        }
        let Some(span) = watch_span(f.offset, f.size) else {
            continue;
        };
        if t.object_size.is_some_and(|size| span.offset >= size) {
            continue;
        }
        if spans.iter().any(|(s, _)| overlaps(*s, span)) {
            continue;
        }
        spans.push((span, f.field.clone()));
    }
    if spans.is_empty() {
        return Err("no sampled offset inside its objects".to_owned());
    }
    let target = |picked: &[&(Span, Option<String>)]| {
        let mut picked = picked.to_vec();
        picked.sort_by_key(|(s, _)| s.offset);
        PlannedTarget {
            type_name: t.name.clone(),
            cache: cache.clone(),
            site: site.clone(),
            ranges: picked.iter().map(|(s, _)| *s).collect(),
            fields: picked.iter().map(|(_, f)| f.clone()).collect(),
            share: t.share,
        }
    };
    let mut list = Vec::new();
    for (i, single) in spans.iter().enumerate() {
        list.push(target(&[single]));
        if let Some(next) = spans.get(i + 1) {
            list.push(target(&[single, next]));
        }
    }
    Ok(list)
}

/// The function an allocation-site name stands for, as a range of call sites.
fn site_range(site: &str, kallsyms: &Kallsyms) -> Result<SiteRange, String> {
    if let Some(hex) = site.strip_prefix("0x") {
        // No symbol covered the call site: watch that one address.
        let start = u64::from_str_radix(hex, 16)
            .map_err(|_| format!("its allocation site {site:?} is not an address"))?;
        return Ok(SiteRange {
            function: site.to_owned(),
            start,
            end: start.saturating_add(1),
        });
    }
    let mut found = kallsyms
        .text_symbols()
        .iter()
        .filter(|s| is_site_symbol(&s.name, site));
    match (found.next(), found.next()) {
        (Some(s), None) if s.size > 0 => Ok(SiteRange {
            function: site.to_owned(),
            start: s.address,
            end: s.address.saturating_add(s.size),
        }),
        (Some(_), None) => Err(format!(
            "the size of its allocation site {site} is unknown (the last symbol)"
        )),
        (Some(_), Some(_)) => Err(format!(
            "several functions are named {site}: its allocation site is ambiguous"
        )),
        (None, _) => Err(format!("no function {site} in the kallsyms snapshot")),
    }
}

/// The smallest range a debug register can watch (1, 2, 4 or 8 bytes, aligned to its length)
/// that covers an access of `size` bytes at `offset` (8 at most; 4 when unknown), or the
/// aligned 8 bytes holding `offset` when none covers it all.
fn watch_span(offset: u64, size: u32) -> Option<Span> {
    let offset = u32::try_from(offset).ok()?;
    let want = match size {
        0 => 4,
        s => s.min(8),
    };
    let end = offset.checked_add(want)?;
    for len in [1u32, 2, 4, 8] {
        let start = offset & !(len - 1);
        if len >= want && start + len >= end {
            return Some(Span { offset: start, len });
        }
    }
    Some(Span {
        offset: offset & !7,
        len: 8,
    })
}

fn overlaps(a: Span, b: Span) -> bool {
    a.offset < b.offset + b.len && b.offset < a.offset + a.len
}

#[cfg(test)]
mod tests;
