//! What the collect, histories and causal drivers ask of a collector: the operations they
//! call, so that something other than `/dev/dprof` (a `perf_event_open` collector for stock
//! kernels) can stand in for it. [`crate::device::Device`] is the one implementation today.

use dprof_abi::{
    CausalPlan, Config, CpuStatus, ExperimentControl, HistoryPlan, Status, VersionInfo,
};

use crate::device::{Device, DeviceError, ReadOutcome};

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
    fn configure(&self, config: &Config) -> Result<(), Self::Error>;

    /// Sets the history plan, after a configuration with `EVENT_HISTORIES`.
    ///
    /// # Errors
    /// When the collector refuses the plan.
    fn history_plan(&self, plan: &HistoryPlan) -> Result<(), Self::Error>;

    /// Sets the causal session's progress points (`labels` name them, for errors).
    ///
    /// # Errors
    /// When the collector refuses the points.
    fn causal_plan(&self, plan: &CausalPlan, labels: &[String]) -> Result<(), Self::Error>;

    /// Sets entry `index` of the causal type table.
    ///
    /// # Errors
    /// When the collector refuses the entry.
    fn causal_type(
        &self,
        index: u32,
        type_name: &str,
        cache: &str,
        ips: &[u64],
    ) -> Result<(), Self::Error>;

    /// Starts an experiment.
    ///
    /// # Errors
    /// When the collector refuses it.
    fn experiment_start(&self, control: &ExperimentControl) -> Result<(), Self::Error>;

    /// Ends the running experiment; its record follows in the data.
    ///
    /// # Errors
    /// When the collector refuses it.
    fn experiment_end(&self) -> Result<(), Self::Error>;

    /// Starts collecting.
    ///
    /// # Errors
    /// When the collector cannot start.
    fn start(&self) -> Result<(), Self::Error>;

    /// Stops collecting; what was collected can still be read.
    ///
    /// # Errors
    /// When the collector cannot stop.
    fn stop(&self) -> Result<(), Self::Error>;

    /// The counters, with up to `capacity` per-CPU entries.
    ///
    /// # Errors
    /// When they cannot be read.
    fn status(&self, capacity: usize) -> Result<(Status, Vec<CpuStatus>), Self::Error>;

    /// Reads whole records into `buf`.
    ///
    /// # Errors
    /// When reading fails (not for "nothing yet", which is [`ReadOutcome::Empty`]).
    fn read(&mut self, buf: &mut [u8]) -> Result<ReadOutcome, Self::Error>;
}

impl Backend for Device {
    type Error = DeviceError;

    fn checked_version(&self) -> Result<VersionInfo, DeviceError> {
        Self::checked_version(self)
    }

    fn configure(&self, config: &Config) -> Result<(), DeviceError> {
        Self::configure(self, config)
    }

    fn history_plan(&self, plan: &HistoryPlan) -> Result<(), DeviceError> {
        Self::history_plan(self, plan)
    }

    fn causal_plan(&self, plan: &CausalPlan, labels: &[String]) -> Result<(), DeviceError> {
        Self::causal_plan(self, plan, labels)
    }

    fn causal_type(
        &self,
        index: u32,
        type_name: &str,
        cache: &str,
        ips: &[u64],
    ) -> Result<(), DeviceError> {
        Self::causal_type(self, index, type_name, cache, ips)
    }

    fn experiment_start(&self, control: &ExperimentControl) -> Result<(), DeviceError> {
        Self::experiment_start(self, control)
    }

    fn experiment_end(&self) -> Result<(), DeviceError> {
        Self::experiment_end(self)
    }

    fn start(&self) -> Result<(), DeviceError> {
        Self::start(self)
    }

    fn stop(&self) -> Result<(), DeviceError> {
        Self::stop(self)
    }

    fn status(&self, capacity: usize) -> Result<(Status, Vec<CpuStatus>), DeviceError> {
        Self::status(self, capacity)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<ReadOutcome, DeviceError> {
        Self::read(self, buf)
    }
}
