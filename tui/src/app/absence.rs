//! Views the report has no data for, and why.
//!
//! The report model holds the data profile, and the histories behind the data flow when the
//! profile was collected with them (an `Option`: absent without `--histories`). Miss
//! classification, the working set and causal ranking are sections the analysis does not fill
//! in yet; each will join the model as an `Option` too. A view renders its section when
//! present and, when not, the reason returned here, which is where a reason that depends on
//! the profile goes. Nothing is ever made up to fill a view.

use dprof::report::{Metric, Report};

use super::View;

/// A view with nothing to show for this report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Absence {
    /// What is missing, as in "no miss classification in this profile".
    pub what: &'static str,
    /// Why, and what would produce it.
    pub why: String,
    /// Where the report has something related, if anywhere.
    pub instead: Option<String>,
}

impl Absence {
    /// The first line: `no <what> in this profile`.
    #[must_use]
    pub fn headline(&self) -> String {
        format!("no {} in this profile", self.what)
    }
}

/// Why `view` has nothing to show for `report`, or `None` when it has something.
pub(crate) fn absence(view: View, report: &Report) -> Option<Absence> {
    let dp = &report.data_profile;
    match view {
        View::DataProfile | View::TypeDetail if dp.types.is_empty() => Some(Absence {
            what: "data types",
            why: "no sample resolved to a type and no slab object was allocated".to_owned(),
            instead: Some(format!("coverage: {}", report.coverage.summary)),
        }),
        View::DataProfile | View::TypeDetail => None,
        View::MissClassification => Some(Absence {
            what: "miss classification",
            why: "the analysis does not classify misses yet (invalidation by true or false \
                  sharing, conflict, capacity, each with its evidence)"
                .to_owned(),
            instead: Some(match &dp.hardware {
                Some(hw) => format!(
                    "{} samples give misses, miss rates, HITM and data sources per type: see \
                     the Data profile and Type views",
                    hw.samplers.join("+").to_ascii_uppercase()
                ),
                None => "this profile has no hardware miss data either: collect with \
                         --sampler ibs or pebs on a machine that has one"
                    .to_owned(),
            }),
        }),
        View::WorkingSet => Some(Absence {
            what: "working set",
            why: "the analysis does not compute live objects over time or the \
                  associativity-set histogram yet"
                .to_owned(),
            instead: Some(if report.address_set.allocs > 0 {
                format!(
                    "peak live objects and bytes per type are in the Data profile and Type \
                     views ({} allocations replayed)",
                    report.address_set.allocs
                )
            } else {
                "this profile has no allocations either: collect with --events slab".to_owned()
            }),
        }),
        View::DataFlow if report.histories.is_some() => None,
        View::DataFlow => Some(Absence {
            what: "data flow",
            why: "no object histories collected: the path of an object from allocation to \
                  free comes from debug-register histories; run dprof collect --histories \
                  auto (after a profile that shows which types to watch) to record them"
                .to_owned(),
            instead: Some(
                "the functions and CPUs that touched the type are in the Type view".to_owned(),
            ),
        }),
        View::Causal => Some(Absence {
            what: "causal ranking",
            why: "no causal experiments were run: dprof collect does not run them yet".to_owned(),
            instead: Some(format!(
                "types are ranked by {} in the Data profile",
                match dp.metric {
                    Metric::Samples => "samples",
                    Metric::Misses => "misses",
                }
            )),
        }),
    }
}
