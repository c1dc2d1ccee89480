//! The histories section of the report: per type, how its histories ended, their hits'
//! cross-check, path traces and data flow.

use super::assemble::{assemble, Histories, History};
use rustc_hash::FxHashMap;

use crate::resolve::SymbolSource;
use crate::sampled::SampledAccesses;
use dprof_format::{FullCoveragePlan, Profile, ProfileError};

use dprof_model::histories::{EndReason, EndReasons, HistoryReport, HitChecks, TypeHistories};

/// Assembles the histories of `profile` and builds its path traces and data flow, joining
/// sampled accesses when given. `None` when the profile has no history.
///
/// # Errors
/// The first problem found while reading the records.
pub fn analyze(
    profile: &Profile,
    symbols: &dyn SymbolSource,
    sampled: Option<&SampledAccesses>,
) -> Result<Option<HistoryReport>, ProfileError> {
    let histories = assemble(profile, symbols)?;
    if histories.histories.is_empty() {
        return Ok(None);
    }
    Ok(Some(report(&histories, symbols, sampled)))
}

/// The report section of assembled histories.
#[must_use]
pub fn report(
    histories: &Histories,
    symbols: &dyn SymbolSource,
    sampled: Option<&SampledAccesses>,
) -> HistoryReport {
    let mut by_type: FxHashMap<&str, Vec<&History>> = FxHashMap::default();
    for h in &histories.histories {
        by_type.entry(h.type_name.as_str()).or_default().push(h);
    }
    let mut types: Vec<TypeHistories> = by_type
        .into_iter()
        .map(|(name, list)| {
            let plan = histories.full_plans.iter().find(|p| p.type_name == name);
            type_histories(name, &list, symbols, sampled, plan)
        })
        .collect();
    types.sort_by(|a, b| {
        b.histories
            .cmp(&a.histories)
            .then_with(|| a.name.cmp(&b.name))
    });
    let all = &histories.histories;
    HistoryReport {
        histories: all.len() as u64,
        complete: all.iter().filter(|h| h.is_complete()).count() as u64,
        hits: all.iter().map(|h| h.hits.len() as u64).sum(),
        orphan_hits: histories.orphan_hits,
        late_hits: all.iter().map(|h| h.late_hits).sum(),
        checks: histories.checks,
        types,
    }
}

fn type_histories(
    name: &str,
    list: &[&History],
    symbols: &dyn SymbolSource,
    sampled: Option<&SampledAccesses>,
    full_plan: Option<&FullCoveragePlan>,
) -> TypeHistories {
    let mut reasons = EndReasons::default();
    let mut checks = HitChecks::default();
    for h in list {
        match h.end.map(|e| e.reason) {
            Some(EndReason::Freed) => reasons.freed += 1,
            Some(EndReason::Reallocated) => reasons.reallocated += 1,
            Some(EndReason::Timeout) => reasons.timeout += 1,
            Some(EndReason::Stopped) => reasons.stopped += 1,
            None => reasons.unfinished += 1,
        }
        for hit in &h.hits {
            checks.add(hit.check);
        }
    }
    // Paths and the data flow follow accesses to the watched bytes only; mismatched traps
    // stay in the counts above.
    let complete_accesses: Vec<History> = list
        .iter()
        .filter(|h| h.is_complete())
        .map(|h| h.without_mismatches())
        .collect();
    let complete: Vec<&History> = complete_accesses.iter().collect();
    let lifetimes: Vec<u64> = complete
        .iter()
        .filter_map(|h| h.end.map(|e| e.lifetime_ns))
        .collect();
    let traces = super::paths::path_traces(name, &complete, symbols, sampled);
    let data_flow = super::flow::data_flow(name, &complete, &reasons, symbols, sampled);
    TypeHistories {
        name: name.to_owned(),
        histories: list.len() as u64,
        complete: complete.len() as u64,
        end_reasons: reasons,
        hits: list.iter().map(|h| h.hits.len() as u64).sum(),
        dropped_hits: list
            .iter()
            .filter_map(|h| h.end.map(|e| u64::from(e.dropped_hits)))
            .sum(),
        late_hits: list.iter().map(|h| h.late_hits).sum(),
        mean_lifetime_ns: (!lifetimes.is_empty())
            .then(|| lifetimes.iter().sum::<u64>() / lifetimes.len() as u64),
        max_arm_delay_ns: list
            .iter()
            .flat_map(|h| h.arms.iter().map(|&(_, d)| d))
            .max()
            .unwrap_or(0),
        checks,
        convergence: traces.convergence,
        paths: traces.paths,
        field_orders: traces.field_orders,
        data_flow,
        full: full_plan.map(|plan| super::full::full_coverage(plan, list, symbols, sampled)),
    }
}
