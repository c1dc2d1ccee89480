//! dprof's collectors: what runs on the profiled machine. The `/dev/dprof` client
//! ([`device`]), the system snapshot for the profile header ([`system`]), the choice of
//! sampler ([`samplers`]), live kernel code from `/proc/kcore` ([`kcore`]) and the history
//! planner ([`plan`]) with the `--histories` specs it plans from ([`histories`]). The
//! drivers reach the collector through [`backend::Backend`]. Everything here writes the profile format; it runs the analysis live
//! only to plan histories and pick causal types, and the analysis never depends on it.

pub mod backend;
pub mod device;
pub mod histories;
pub mod kcore;
pub mod plan;
pub mod samplers;
pub mod system;

/// Version of dprof, written into every profile.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
