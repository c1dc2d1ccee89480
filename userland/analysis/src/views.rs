//! The miss classification (paper section 3.3) and working-set (3.2) views.
//!
//! ```text
//! main pass (analysis) ── with views on, also records ──▶ object lifetimes (address set)
//!                                                         slab samples (object, offset, ip)
//! histories (second pass) ─────────────────────────────▶ history accesses in time order
//!   ──▶ layout: each type's lines (object bases + the offsets its samples and histories touch)
//!        per set and level, at the type's peak ──▶ conflict flags, capacity, histograms
//!   ──▶ working set: live objects over time (exact), cache simulation (resident lines),
//!        the types and allocation sites each set holds at the level's peak
//!   ──▶ misses: history accesses classified (true / false sharing, cannot tell), then each
//!        sample: sharing, else conflict, else capacity, else unclassified
//! ```
//!
//! The views are computed only when asked for ([`crate::pipeline::analyze_views`]): the data
//! profile's main pass then also records lifetimes and slab samples (memory grows with
//! allocations and samples, which the data profile alone avoids); without views it pays one
//! untaken branch per event.
//!
//! Every number is reproducible: the simulation draws its objects and paths from a seeded
//! generator ([`ViewOptions::seed`]).

mod by_set;
mod layout;
mod live;
mod misses;
mod notes;
mod recorded;
mod simulate;
mod working_set;

#[cfg(test)]
mod tests;

use crate::cache::CacheModel;
use crate::histories::Histories;
use crate::resolve::SymbolSource;
use dprof_format::ProfileHeader;
use dprof_model::{Report, Warning, WarningCode};

pub use live::LiveIndex;
pub use misses::CAPACITY_COVERAGE;
pub use recorded::{
    Lifetime, MissBit, ObjectSample, Recorded, ViewOptions, ASSUMED_LINE_BYTES,
    DEFAULT_SIM_OBJECTS, DEFAULT_TIME_POINTS,
};

/// Fills [`Report::misses`] and [`Report::working_set`] from what the main pass recorded and
/// the profile's histories; a warning says when the profile gives no usable cache geometry
/// (the cache-dependent parts are then empty).
pub fn compute(
    report: &mut Report,
    recorded: &Recorded,
    histories: Option<&Histories>,
    header: &ProfileHeader,
    symbols: &dyn SymbolSource,
    options: &ViewOptions,
) {
    let model = CacheModel::from_header(&header.caches)
        .with_overrides(&options.overrides, header.online_cpus);
    if model.levels.is_empty() {
        report.warnings.push(Warning {
            code: WarningCode::NoCacheGeometry,
            message: "the profile gives no usable cache geometry (sysfs listed no complete data \
                      cache): conflict, capacity, set histograms and the cache simulation are \
                      empty; --cache L1d=SIZE/WAYS/LINE,L2=... supplies one"
                .to_owned(),
        });
    }
    let layout = layout::Layout::new(report, recorded, histories, &model, options.time_points);
    report.working_set = Some(working_set::report(
        report, recorded, &layout, &model, options, symbols,
    ));
    report.misses = Some(misses::report(
        report,
        recorded,
        histories,
        &layout,
        &model,
        header.online_cpus,
        symbols,
    ));
}
