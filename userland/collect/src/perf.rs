//! The perf backend: collection on a stock kernel, with no module. perf events opened per CPU
//! (the cpu-clock sampler with the interrupted registers, and the kmem tracepoints found
//! through tracefs) and live kernel code read from `/proc/kcore` or through BPF, translated
//! into the module's records so that the profile and its analysis do not change. What needs
//! code inside the kernel (object access histories, causal experiments) is refused in a
//! sentence that names the module. A perf.data that `perf record` wrote is turned into a
//! profile the same way ([`import_perf_data`]), on the machine that recorded it.

mod bpf;
mod collector;
mod data_file;
mod error;
mod events;
mod gs_bases;
mod hw_sample;
mod import;
mod layout_probe;
mod memory;
mod page_reader;
mod pages;
mod tracefs;
mod tracing_data;
mod translate;

pub use collector::PerfCollector;
pub use data_file::MAGIC as PERF_DATA_MAGIC;
pub use error::{ImportError, PerfError, PERF_RECORD_COMMAND};
pub use import::{import_perf_data, Imported};
pub(crate) use layout_probe::{watch as watch_layout_sightings, Sighting};
pub(crate) use memory::KernelMemory;
pub use memory::NoKernelMemory;
pub(crate) use page_reader::{CachesRead, Owner, PageReader};
