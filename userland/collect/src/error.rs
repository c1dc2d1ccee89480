//! Why a collection or a causal run failed: one sentence each, with the cause as its source.

use std::path::PathBuf;

use dprof_format::{StopReason, WriteError};

use crate::device::DeviceError;
use crate::histories::HistoryPlanError;
use crate::system::SystemError;

/// Why `dprof collect` or `dprof causal` could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectError {
    /// The options contradict each other or leave something out; a front end reports it as
    /// a usage error.
    #[error("{0}")]
    Usage(String),
    /// The sampler asked for cannot be used here, or its period does not suit it.
    #[error("{0}")]
    Sampler(String),
    /// The device could not be opened or asked.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A request to the collector failed.
    #[error(transparent)]
    Backend(BackendError),
    /// A file about this system could not be read.
    #[error(transparent)]
    System(#[from] SystemError),
    /// The profile could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The histories could not be planned.
    #[error(transparent)]
    HistoryPlan(#[from] HistoryPlanError),
    /// `--ring-size` is outside what the module accepts.
    #[error("--ring-size {given} is outside what the module accepts ({min}..={max})")]
    RingSize {
        /// The size asked for, as a person reads it.
        given: String,
        /// The smallest size the module takes.
        min: String,
        /// The largest size the module takes.
        max: String,
    },
    /// Histories were asked for and the module cannot collect them.
    #[error(
        "the module cannot collect object access histories here (it needs the kmem \
         tracepoints and the list of slab caches; see its messages in dmesg)"
    )]
    NoHistories,
    /// The profile header could not be filled in.
    #[error("cannot describe this system in the profile header")]
    Header(#[source] SystemError),
    /// The command to profile could not be started.
    #[error("cannot run {program}")]
    Spawn {
        /// The program, as given.
        program: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The command's state could not be asked.
    #[error("cannot wait for the command")]
    Wait(#[source] std::io::Error),
    /// The complete profile could not be written out.
    #[error("cannot finish the profile ({} is incomplete)", partial.display())]
    Finish {
        /// The incomplete file left behind.
        partial: PathBuf,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// Collection failed after the file was created.
    #[error("collection failed ({note})")]
    CollectionFailed {
        /// What became of the partial file.
        note: String,
        /// Why.
        #[source]
        source: Box<CollectError>,
    },
    /// The module has no causal experiments.
    #[error("this dprof.ko cannot run causal experiments (no FEATURE_CAUSAL): load a newer one")]
    NoCausal,
    /// The module has no arrival points.
    #[error(
        "this dprof.ko has no arrival points (no FEATURE_ARRIVALS), which --arrival needs: load \
         a newer one"
    )]
    NoArrivals,
    /// The module cannot count samples outside a scope for their callers.
    #[error(
        "this dprof.ko cannot count a helper's samples for its caller in --scope (no \
         FEATURE_CAUSAL_SCOPE): load a newer one"
    )]
    NoCausalScope,
    /// Causal experiments without a sampler.
    #[error("causal experiments need access samples, and the module offers no sampler here")]
    CausalNeedsSamples,
    /// The causal profiling phase outgrew memory.
    #[error(
        "the profiling phase recorded more than {mib} MiB: make --plan-time shorter or \
         --period longer"
    )]
    PlanTooLarge {
        /// The limit, in MiB.
        mib: usize,
    },
    /// The run ended during the causal profiling phase.
    #[error(
        "the profiling phase did not finish ({reason}) within --plan-time {plan_time}: there \
         is nothing to experiment on (run the workload longer, or shorten --plan-time)"
    )]
    PlanUnfinished {
        /// What ended the run.
        reason: StopReason,
        /// `--plan-time`, as a person reads it.
        plan_time: String,
    },
    /// End-to-end: the command's profiling run did not succeed.
    #[error(
        "the command's profiling run failed ({reason}): end-to-end experiments time whole \
         runs, so the command must run to success each time"
    )]
    ProfilingRunFailed {
        /// How the run ended.
        reason: StopReason,
    },
    /// A record from the module did not decode.
    #[error("the module returned a record that does not decode")]
    BadRecord(#[source] dprof_abi::AbiError),
    /// No type could be chosen for the causal experiments.
    #[error("{0}")]
    CausalTypes(String),
    /// The experiments failed after the file was created.
    #[error("the experiments failed ({note})")]
    ExperimentsFailed {
        /// What became of the partial file.
        note: String,
        /// Why.
        #[source]
        source: Box<CollectError>,
    },
}

/// A [`crate::backend::Backend`]'s error, as it said it: its message and its causes.
#[derive(Debug)]
pub struct BackendError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// A backend's error as a [`CollectError`].
pub(crate) fn backend<E: std::error::Error + Send + Sync + 'static>(e: E) -> CollectError {
    CollectError::Backend(BackendError(Box::new(e)))
}
