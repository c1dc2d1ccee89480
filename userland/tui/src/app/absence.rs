//! Views the report has no data for, and why.
//!
//! The report model holds the data profile, and as `Option`s the histories behind the data
//! flow (absent without `--histories`), the miss classification and working set (absent in a
//! report saved without them) and the causal ranking (absent without causal experiments). A view renders its section when
//! present and, when not, the reason returned here, which is where a reason that depends on
//! the profile goes. Nothing is ever made up to fill a view.

use dprof_model::{Metric, Report};

use super::view::View;

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

/// Why the miss classification and working-set sections are missing from a report.
const NO_VIEWS: &str = "this report was made without the miss classification and working-set \
     views (a report saved by an older dprof): open the profile itself with dprof tui, or save \
     the report again with dprof report --json";

/// Why `view` has nothing to show for `report`, or `None` when it has something.
pub(crate) fn absence(view: View, report: &Report) -> Option<Absence> {
    let dp = &report.data_profile;
    match view {
        View::DataProfile | View::TypeDetail if dp.types.is_empty() => Some(Absence {
            what: "data types",
            why: match dp.unsampled_types {
                0 => "no sample resolved to a type".to_owned(),
                n => format!(
                    "no sample resolved to a type ({n} types were only allocated: their objects \
                     are in the Working set view)"
                ),
            },
            instead: Some(format!("coverage: {}", report.coverage.summary)),
        }),
        View::DataProfile | View::TypeDetail => None,
        View::MissClassification => match &report.misses {
            Some(m) if !m.types.is_empty() => None,
            Some(_) => Some(Absence {
                what: "miss classification",
                why: "no slab type had samples or history accesses to classify: only objects \
                      of the address set (slab allocations seen during collection) are \
                      classified"
                    .to_owned(),
                instead: Some(format!("coverage: {}", report.coverage.summary)),
            }),
            None => Some(Absence {
                what: "miss classification",
                why: NO_VIEWS.to_owned(),
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
        },
        View::WorkingSet => match &report.working_set {
            Some(w) if !w.types.is_empty() => None,
            Some(_) => Some(Absence {
                what: "working set",
                why: "no slab object was allocated during collection: live objects come from \
                      the address set"
                    .to_owned(),
                instead: Some("collect with --events slab".to_owned()),
            }),
            None => Some(Absence {
                what: "working set",
                why: NO_VIEWS.to_owned(),
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
        },
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
        View::Causal if report.causal.is_some() => None,
        View::Causal => Some(Absence {
            what: "causal ranking",
            why: "the profile has no causal experiments: dprof causal runs them, virtually \
                  speeding up one type's accesses at a time and measuring the program's \
                  progress, to rank types by what speeding them up would gain"
                .to_owned(),
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
