//! What the collect, histories and causal drivers ask of a collector: the operations they
//! call, implemented by the `/dev/dprof` client ([`crate::device::Device`]) and by perf
//! events on a stock kernel ([`crate::perf::PerfCollector`]). [`Collector`] is whichever of
//! the two `--backend` chose.

use dprof_abi::{CausalPlan, Config, CpuStatus, ExperimentControl, Status, VersionInfo};

use crate::device::{Device, DeviceError, ReadOutcome};
use crate::histories::ModulePlan;
use crate::perf::{PerfCollector, PerfError};

/// A collector the drivers run: configured, started, read and stopped, with the history and
/// causal requests of `--histories` and `dprof causal`.
pub trait Backend {
    /// Why a request failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// What the collector is and can do, failing unless this dprof can talk to it.
    ///
    /// # Errors
    /// When it cannot be asked, or speaks another ABI.
    fn checked_version(&self) -> Result<VersionInfo, Self::Error>;

    /// Configures the next collection.
    ///
    /// # Errors
    /// When the collector refuses the configuration.
    fn configure(&mut self, config: &Config) -> Result<(), Self::Error>;

    /// Sets the history plan, after a configuration with `EVENT_HISTORIES`.
    ///
    /// # Errors
    /// When the collector refuses the plan.
    fn history_plan(&mut self, plan: &ModulePlan) -> Result<(), Self::Error>;

    /// Sets the causal session's progress points (`labels` name them, for errors).
    ///
    /// # Errors
    /// When the collector refuses the points.
    fn causal_plan(&mut self, plan: &CausalPlan, labels: &[String]) -> Result<(), Self::Error>;

    /// Sets entry `index` of the causal type table.
    ///
    /// # Errors
    /// When the collector refuses the entry.
    fn causal_type(
        &mut self,
        index: u32,
        type_name: &str,
        cache: &str,
        ips: &[u64],
    ) -> Result<(), Self::Error>;

    /// Records the page allocator's allocations and frees in the configured session, their
    /// sites found past the `allocator`'s code (`[start, end)` ranges, sorted and disjoint)
    /// and left out when `elsewhere`'s; before [`Backend::start`]. Only the module takes
    /// them (`FEATURE_PAGE_SITES`); by default nothing is done.
    ///
    /// # Errors
    /// When the collector refuses the ranges.
    fn page_sites(
        &mut self,
        _allocator: &[(u64, u64)],
        _elsewhere: &[(u64, u64)],
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Sets the causal session's scope: `[start, end)` code ranges, sorted and disjoint,
    /// outside which a kernel sample counts for its first caller inside them. Before
    /// [`Backend::start`].
    ///
    /// # Errors
    /// When the collector refuses the scope.
    fn causal_scope(&mut self, ranges: &[(u64, u64)]) -> Result<(), Self::Error>;

    /// Starts an experiment.
    ///
    /// # Errors
    /// When the collector refuses it.
    fn experiment_start(&mut self, control: &ExperimentControl) -> Result<(), Self::Error>;

    /// Ends the running experiment; its record follows in the data.
    ///
    /// # Errors
    /// When the collector refuses it.
    fn experiment_end(&mut self) -> Result<(), Self::Error>;

    /// Starts collecting.
    ///
    /// # Errors
    /// When the collector cannot start.
    fn start(&mut self) -> Result<(), Self::Error>;

    /// Stops collecting; what was collected can still be read.
    ///
    /// # Errors
    /// When the collector cannot stop.
    fn stop(&mut self) -> Result<(), Self::Error>;

    /// The counters, with up to `capacity` per-CPU entries.
    ///
    /// # Errors
    /// When they cannot be read.
    fn status(&mut self, capacity: usize) -> Result<(Status, Vec<CpuStatus>), Self::Error>;

    /// Reads whole records into `buf`.
    ///
    /// # Errors
    /// When reading fails (not for "nothing yet", which is [`ReadOutcome::Empty`]).
    fn read(&mut self, buf: &mut [u8]) -> Result<ReadOutcome, Self::Error>;

    /// What the collector has to say about the collection, each note once (after the last
    /// read: how the perf backend named allocations whose slabs it read too late).
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// `impl Backend` for a collector whose inherent methods have the trait's names and
/// signatures: the trait's documentation is theirs.
macro_rules! backend_by_inherent_methods {
    ($collector:ty, $error:ty) => {
        impl Backend for $collector {
            type Error = $error;

            fn checked_version(&self) -> Result<VersionInfo, $error> {
                Self::checked_version(self)
            }

            fn configure(&mut self, config: &Config) -> Result<(), $error> {
                Self::configure(self, config)
            }

            fn history_plan(&mut self, plan: &ModulePlan) -> Result<(), $error> {
                Self::history_plan(self, plan)
            }

            fn causal_plan(&mut self, plan: &CausalPlan, labels: &[String]) -> Result<(), $error> {
                Self::causal_plan(self, plan, labels)
            }

            fn causal_type(
                &mut self,
                index: u32,
                type_name: &str,
                cache: &str,
                ips: &[u64],
            ) -> Result<(), $error> {
                Self::causal_type(self, index, type_name, cache, ips)
            }

            fn causal_scope(&mut self, ranges: &[(u64, u64)]) -> Result<(), $error> {
                Self::causal_scope(self, ranges)
            }

            fn experiment_start(&mut self, control: &ExperimentControl) -> Result<(), $error> {
                Self::experiment_start(self, control)
            }

            fn experiment_end(&mut self) -> Result<(), $error> {
                Self::experiment_end(self)
            }

            fn start(&mut self) -> Result<(), $error> {
                Self::start(self)
            }

            fn stop(&mut self) -> Result<(), $error> {
                Self::stop(self)
            }

            fn status(&mut self, capacity: usize) -> Result<(Status, Vec<CpuStatus>), $error> {
                Self::status(self, capacity)
            }

            fn read(&mut self, buf: &mut [u8]) -> Result<ReadOutcome, $error> {
                Self::read(self, buf)
            }
        }
    };
}

backend_by_inherent_methods!(Device, DeviceError);
backend_by_inherent_methods!(PerfCollector, PerfError);

/// The collector `--backend` chose.
#[derive(Debug)]
pub enum Collector {
    /// `dprof.ko` through `/dev/dprof`.
    Module(Device),
    /// perf events, on a kernel without the module.
    Perf(Box<PerfCollector>),
}

/// A [`Collector`]'s error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectorError {
    /// From the module.
    #[error(transparent)]
    Module(#[from] DeviceError),
    /// From perf events.
    #[error(transparent)]
    Perf(#[from] PerfError),
}

/// Calls the same method on whichever collector it is.
macro_rules! both {
    ($self:ident, $c:ident => $call:expr) => {
        match $self {
            Collector::Module($c) => Ok($call?),
            Collector::Perf($c) => Ok($call?),
        }
    };
}

impl Backend for Collector {
    type Error = CollectorError;

    fn checked_version(&self) -> Result<VersionInfo, CollectorError> {
        both!(self, c => c.checked_version())
    }

    fn configure(&mut self, config: &Config) -> Result<(), CollectorError> {
        both!(self, c => c.configure(config))
    }

    fn history_plan(&mut self, plan: &ModulePlan) -> Result<(), CollectorError> {
        both!(self, c => c.history_plan(plan))
    }

    fn causal_plan(&mut self, plan: &CausalPlan, labels: &[String]) -> Result<(), CollectorError> {
        both!(self, c => c.causal_plan(plan, labels))
    }

    fn causal_type(
        &mut self,
        index: u32,
        type_name: &str,
        cache: &str,
        ips: &[u64],
    ) -> Result<(), CollectorError> {
        both!(self, c => c.causal_type(index, type_name, cache, ips))
    }

    fn causal_scope(&mut self, ranges: &[(u64, u64)]) -> Result<(), CollectorError> {
        both!(self, c => c.causal_scope(ranges))
    }

    fn page_sites(
        &mut self,
        allocator: &[(u64, u64)],
        elsewhere: &[(u64, u64)],
    ) -> Result<(), CollectorError> {
        match self {
            // By path: method syntax on `&mut Device` would find this trait's default first.
            Self::Module(device) => Ok(Device::page_sites(device, allocator, elsewhere)?),
            // The perf backend reads each page allocation's call chain itself.
            Self::Perf(_) => Ok(()),
        }
    }

    fn experiment_start(&mut self, control: &ExperimentControl) -> Result<(), CollectorError> {
        both!(self, c => c.experiment_start(control))
    }

    fn experiment_end(&mut self) -> Result<(), CollectorError> {
        both!(self, c => c.experiment_end())
    }

    fn start(&mut self) -> Result<(), CollectorError> {
        both!(self, c => c.start())
    }

    fn stop(&mut self) -> Result<(), CollectorError> {
        both!(self, c => c.stop())
    }

    fn status(&mut self, capacity: usize) -> Result<(Status, Vec<CpuStatus>), CollectorError> {
        both!(self, c => c.status(capacity))
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<ReadOutcome, CollectorError> {
        both!(self, c => c.read(buf))
    }

    fn take_notes(&mut self) -> Vec<String> {
        match self {
            Collector::Module(_) => Vec::new(),
            Collector::Perf(perf) => perf.take_notes(),
        }
    }
}
