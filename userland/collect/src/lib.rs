//! dprof's collectors: what runs on the profiled machine. The `/dev/dprof` client
//! ([`device`]), the module-free perf events collector for stock kernels ([`perf`]), the
//! system snapshot for the profile header ([`system`]), the choice of sampler ([`samplers`],
//! [`sampling`]), live kernel code from `/proc/kcore` ([`kcore`]), the history planner
//! ([`plan`]) with the `--histories` specs it plans from ([`histories`]), and which registers
//! of a history hit the profile keeps ([`hit_registers`]). The drivers, [`record`] (`dprof
//! collect`) and [`causal`] (`dprof causal`), take plain [`options`], reach the collector
//! through [`backend::Backend`], and tell the person what happens through an
//! [`observer::Observer`]; they fail with a [`error::CollectError`]. Everything here writes
//! the profile format; it runs the analysis live only to plan histories and pick causal types,
//! and the analysis never depends on it.

pub mod backend;
pub mod causal;
pub mod device;
pub mod error;
pub mod histories;
pub mod hit_registers;
pub mod kcore;
pub mod kernel_btf;
mod memory_layout;
pub mod observer;
pub mod options;
mod page_owner;
mod page_sites;
mod percpu_section;
pub mod perf;
pub mod plan;
mod reading;
pub mod record;
pub mod samplers;
pub mod sampling;
pub mod scope;
pub mod system;
mod tap;
pub mod workload;

/// Version of dprof, written into every profile.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
