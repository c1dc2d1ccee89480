//! The two records of a causal experiment, as the causal analysis takes them.

use dprof_abi::{ExperimentEnd, ExperimentStart, Record};

/// One of the two experiment records, as the analysis takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "two records per experiment, a few thousand per session: boxing saves nothing"
)]
pub enum ExperimentRecord {
    /// An experiment began.
    Start(ExperimentStart),
    /// An experiment ended, with its measurements.
    End(ExperimentEnd),
}

impl ExperimentRecord {
    /// The experiment record `record` is, if it is one.
    #[must_use]
    pub fn of(record: &Record) -> Option<Self> {
        match record {
            Record::ExperimentStart(start) => Some(Self::Start(*start)),
            Record::ExperimentEnd(end) => Some(Self::End(*end)),
            _ => None,
        }
    }
}
