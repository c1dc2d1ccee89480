//! Why the perf backend cannot collect: one sentence each, saying what to do.

use std::path::PathBuf;

use super::memory::NoKernelMemory;

/// Why the perf backend cannot collect here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// perf events are not available to this user.
    #[error(
        "perf events are not allowed here (kernel.perf_event_paranoid is {level}): run dprof \
         as root, or lower it with `sysctl kernel.perf_event_paranoid=-1`"
    )]
    Paranoid {
        /// The setting.
        level: i32,
    },
    /// The kernel has no perf events.
    #[error("this kernel has no perf events (no /proc/sys/kernel/perf_event_paranoid)")]
    NoPerf {
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// tracefs is neither mounted nor mountable.
    #[error(
        "cannot find or mount tracefs at {} (needs root and CONFIG_TRACING); mount it with \
         `mount -t tracefs nodev /sys/kernel/tracing`", path.display()
    )]
    NoTracefs {
        /// Where it was mounted.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A kmem tracepoint is missing.
    #[error("this kernel has no kmem:{name} tracepoint, which the slab events need")]
    NoTracepoint {
        /// The tracepoint.
        name: &'static str,
    },
    /// A tracepoint's format file does not parse or lacks a field.
    #[error("cannot use {}: {message}", path.display())]
    BadFormat {
        /// The format file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `perf_event_open` or an ioctl on the event failed.
    #[error("cannot open {what} on CPU {cpu}")]
    Open {
        /// The event.
        what: &'static str,
        /// The CPU.
        cpu: u32,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A ring could not be mapped.
    #[error(
        "cannot map the ring of CPU {cpu} (a smaller --ring-size, or a higher \
         kernel.perf_event_mlock_kb, may help)"
    )]
    Ring {
        /// The CPU.
        cpu: u32,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// Events could not be enabled or disabled.
    #[error("cannot start or stop the perf events")]
    Enable {
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// Kernel code cannot be read, so samples cannot be decoded.
    #[error(
        "access samples need the kernel's code bytes, and neither /proc/kcore nor BPF can \
         read them here; collect slab events only with --events slab"
    )]
    NoKernelMemory(#[source] NoKernelMemory),
    /// A sampler this dprof does not know was asked for.
    #[error("unknown sampler: the perf backend samples with cpu-clock, IBS op or PEBS")]
    Sampler,
    /// Something only the module can do.
    #[error(
        "{what} need dprof.ko, which runs code inside the kernel that perf events cannot: load \
         it (README, \"Using it on your machine\") and use --backend module"
    )]
    NeedsModule {
        /// What was asked.
        what: &'static str,
    },
}

/// The `perf record` command line whose perf.data dprof reads: every kmem event (each hit:
/// `-c` would sample them too, so the sampler's period is given on the sampler alone) and
/// cpu-clock samples with the interrupted general-purpose registers.
pub const PERF_RECORD_COMMAND: &str = "perf record -a -m 8M -e cpu-clock/period=100000/ \
     --intr-regs=ax,bx,cx,dx,si,di,bp,sp,r8,r9,r10,r11,r12,r13,r14,r15 \
     -e kmem:kmem_cache_alloc -e kmem:kmem_cache_free -e kmem:kmalloc -e kmem:kfree -- CMD";

/// Why a perf.data cannot be turned into a profile here: one sentence each, saying what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The bytes are not a perf.data at all.
    #[error("not a perf.data file: no PERFILE2 magic at offset 0")]
    NotPerfData,
    /// A perf.data written in perf's pipe format (`perf record -o -`).
    #[error(
        "this perf.data is in perf's pipe format (perf record -o -), which dprof does not read: \
         record to a file with perf record -o FILE"
    )]
    Pipe,
    /// A big-endian perf.data: not from an x86-64 machine.
    #[error(
        "this perf.data was recorded on a big-endian machine: dprof reads x86-64 kernels only"
    )]
    BigEndian,
    /// The file is cut short or damaged.
    #[error("the perf.data is truncated or corrupt: {what}")]
    Corrupt {
        /// What is wrong, and where.
        what: String,
    },
    /// A perf.data compressed by `perf record -z`.
    #[error(
        "this perf.data is compressed (perf record -z), which dprof does not read: record \
         without -z"
    )]
    Compressed,
    /// The perf.data does not say which kernel recorded it.
    #[error(
        "the perf.data does not say which kernel recorded it (it has no OSRELEASE section): the \
         kernel's symbols and code are needed, so it must be analysed on the machine that \
         recorded it"
    )]
    NoRelease,
    /// Recorded on another kernel than the running one.
    #[error(
        "the perf.data was recorded on Linux {recorded} and this machine runs {running}: it \
         must be analysed on the machine that recorded it, because the kernel's symbols and \
         code are needed"
    )]
    OtherKernel {
        /// The perf.data's OSRELEASE.
        recorded: String,
        /// `uname -r` here.
        running: String,
    },
    /// Recorded on another build of the running kernel's release.
    #[error(
        "the perf.data was recorded on another build of Linux {release} (build id {recorded}, \
         this kernel's is {running}): it must be analysed on the machine that recorded it, \
         because the kernel's symbols and code are needed"
    )]
    OtherBuild {
        /// The release, the same on both.
        release: String,
        /// The kernel's build id in the perf.data.
        recorded: String,
        /// The running kernel's.
        running: String,
    },
    /// The kernel was restarted since: its code moved (KASLR).
    #[error(
        "the kernel has restarted since the perf.data was recorded (its text was at {recorded:#x} \
         and is now at {running:#x}): the kernel's symbols and code of that boot are gone, so \
         record again"
    )]
    Restarted {
        /// `_text` when recorded.
        recorded: u64,
        /// `_text` now.
        running: u64,
    },
    /// kallsyms hides the kernel's addresses from this user.
    #[error(
        "/proc/kallsyms shows no addresses to this user: run dprof as root to analyse a perf.data"
    )]
    HiddenSymbols,
    /// No cpu-clock sampler in the perf.data.
    #[error(
        "the perf.data has no cpu-clock samples, which dprof needs to see accesses: record with \
         {PERF_RECORD_COMMAND}"
    )]
    NoSampler,
    /// cpu-clock samples without the interrupted registers.
    #[error(
        "the perf.data's cpu-clock samples lack the interrupted registers, which dprof needs to \
         find the address each sampled instruction touched: record with {PERF_RECORD_COMMAND}"
    )]
    NoIntrRegs,
    /// kmem tracepoints missing.
    #[error(
        "the perf.data lacks {missing}, which dprof needs to type the objects: record with \
         {PERF_RECORD_COMMAND}"
    )]
    NoKmem {
        /// The missing tracepoints, e.g. `kmem:kfree`.
        missing: String,
    },
    /// kmem tracepoints sampled rather than recorded on every hit.
    #[error(
        "the perf.data's kmem:{name} was sampled (one hit in {period}), and dprof needs every \
         allocation and free (-c sets the period of every event: give the sampler's alone, as \
         -e cpu-clock/period=100000/): record with {PERF_RECORD_COMMAND}"
    )]
    SampledTracepoint {
        /// The tracepoint.
        name: &'static str,
        /// Its period (0: a frequency).
        period: u64,
    },
    /// The tracepoints' formats are missing or unusable.
    #[error("the perf.data's format of kmem:{name} is missing or unusable: {message}")]
    TracepointFormat {
        /// The tracepoint.
        name: &'static str,
        /// What is wrong.
        message: String,
    },
    /// kmem tracepoints recorded without their formats.
    #[error(
        "the perf.data's tracing data has no format for {missing}, so their records cannot be \
         read: record again with perf record, which stores the formats"
    )]
    NoTracepointFormat {
        /// The tracepoints, e.g. `kmem:kfree`.
        missing: String,
    },
    /// This machine cannot be described (kallsyms, the kernel release).
    #[error("cannot describe this machine to analyse the perf.data")]
    System(#[source] crate::system::SystemError),
    /// Kernel code cannot be read, so samples cannot be decoded.
    #[error(
        "the samples' instructions are read from the running kernel, and neither /proc/kcore nor \
         BPF can read it here: run dprof as root"
    )]
    NoKernelMemory(#[source] NoKernelMemory),
    /// Writing the profile failed (a bug: it is written to memory).
    #[error("cannot write the converted profile")]
    Write(#[source] dprof_format::WriteError),
}
