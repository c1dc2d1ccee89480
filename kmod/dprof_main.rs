// SPDX-License-Identifier: GPL-2.0

//! dprof.ko: the kernel side of dprof, a data-centric cache-miss profiler.
//!
//! Mechanism, not policy: the module records, userland analyses. It creates `/dev/dprof`
//! (root only, one collector at a time) and, while collecting, writes records to lock-free
//! per-CPU rings that the collector drains with read():
//!
//! - Alloc/Free from the kmem tracepoints (`kmem_cache_alloc`, `kmalloc`, `kfree`,
//!   `kmem_cache_free`), found with `for_each_kernel_tracepoint`;
//! - CacheInfo for every cache that exists at start and for each cache the first time it is
//!   seen;
//! - AccessSample from the software sampler (a cpu-clock perf counter per CPU): ip,
//!   registers, %gs base and instruction bytes; IbsSample from AMD IBS;
//! - HistoryStart/Arm/Hit/End: object access histories from the debug registers
//!   (history.rs), following a plan set with IOC_HISTORY_PLAN;
//! - ExperimentStart/End: causal experiments (causal.rs), following a plan set with
//!   IOC_CAUSAL_PLAN, with progress points counted by kprobes, tracepoints and user programs;
//! - Lost when a ring was full.
//!
//! Besides the one collector, any number of write-only opens may exist: user programs that
//! count visits of a causal session's user progress points with write() (see `dprof_rs_write`).
//! They cannot read, their ioctls fail with EBADF, and closing them leaves the session alone.
//!
//! Modules: `session` owns a collection (its record sink, the slab probes and the history
//! engine); `sink` is where every producer writes records (per-CPU rings, `ring`); `history`,
//! `sampler` and `causal` produce records into a sink and never reach back into `session`;
//! `lookup` finds slab caches and tracepoints by name; `ffi` declares the shim and the structs
//! it shares with C.
//!
//! The ioctl and record ABI is documented in `abi/src/wire.rs` (crate `dprof-abi`), with a
//! user-space example of a whole session.
//!
//! read() never blocks: it returns whole records only (the buffer must hold at least
//! `MAX_RECORD_SIZE` bytes, else EINVAL), EAGAIN while collecting with nothing to read, and 0
//! once collection is stopped and the rings are empty.

use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::alloc::KVVec;
use kernel::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::Mutex;
use kernel::uaccess::UserSlice;

// First: its macro serves the modules declared after it.
#[macro_use]
mod layout;

// The ABI is shared with userland, which uses all of it; the module needs only part, and its
// `pub` items are the crate API of dprof-abi, not of this module.
#[expect(
    dead_code,
    unreachable_pub,
    reason = "dprof-abi's public API, of which the module uses only part"
)]
// Userland's clippy leaves the names of a crate's exported API alone
// (avoid-breaking-exported-api); here that API is private, so the kernel's clippy does not.
#[expect(
    clippy::wrong_self_convention,
    reason = "dprof-abi's exported method names, kept for userland"
)]
// The kernel's clippy checks against 6.12's minimum rustc (1.78); dprof-abi uses
// `is_multiple_of`, stable (also in const) since 1.87, so dprof.ko needs a kernel built with
// rustc 1.87 or later.
#[expect(
    clippy::incompatible_msrv,
    reason = "dprof-abi needs Rust 1.87, above the kernel's minimum"
)]
#[path = "abi/src/wire.rs"]
mod abi;
// The debugreg crate's one file: DR7 encoding for re-pointing breakpoints.
#[expect(
    dead_code,
    unreachable_pub,
    reason = "the debugreg crate's public API, of which the module uses only part"
)]
#[path = "../debugreg/src/dr.rs"]
mod debugreg;

mod causal;
mod ffi;
mod history;
mod hotplug;
mod lookup;
mod page_sites;
mod pages;
mod ring;
mod sampler;
mod session;
mod sink;
mod tasks;

use causal::{Causal, CausalSession};
use page_sites::PageSites;
use pages::PageTracepoints;
use session::{Session, SlabTracepoints};

module! {
    type: Dprof,
    name: "dprof",
    author: "dprof developers",
    description: "dprof: data-centric cache-miss profiler (records slab events for /dev/dprof)",
    license: "GPL",
}

/// What /dev/dprof's file operations act on. One collector at a time, so one of these.
struct DeviceState {
    open: bool,
    state: u32,
    config: abi::Config,
    session: Option<KBox<Session>>,
    /// The sampler's counters while collecting samples; dropped (released) before `session`
    /// and `causal`.
    sampler: Option<sampler::Sampler>,
    /// The causal plan, its probes and experiments (IOC_CAUSAL_PLAN until stop or close).
    causal: Option<KBox<CausalSession>>,
    tracepoints: Option<SlabTracepoints>,
    /// The page allocator's tracepoints, when the kernel has them all.
    page_tracepoints: Option<PageTracepoints>,
    /// The page probes are attached to the running session.
    pages_registered: bool,
    cache_walk: bool,
    bytes_read: u64,
    /// First CPU the next read() drains, so that no CPU's ring starves the others.
    next_cpu: usize,
}

/// The device state for the file operations, published between module init and exit.
static DEVICE: AtomicPtr<Mutex<DeviceState>> = AtomicPtr::new(core::ptr::null_mut());

/// The running causal session's shared state, for write() on user progress points: set while
/// collecting with a causal plan, null otherwise. RCU rather than the device mutex: writers
/// may be many threads of a program under study, and serializing them on the collector's
/// mutex (held across read() copies and synchronize_rcu() in the ioctls) would itself change
/// the program's timing. Writers read it inside rcu_read_lock(); teardown clears it and waits
/// with synchronize_rcu() before the session is freed.
static USER_POINTS: AtomicPtr<Causal> = AtomicPtr::new(core::ptr::null_mut());

struct Dprof {
    device: Pin<KBox<Mutex<DeviceState>>>,
}

impl kernel::Module for Dprof {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let tracepoints = SlabTracepoints::find();
        if tracepoints.is_none() {
            pr_warn!("kmem tracepoints not found: slab events unavailable\n");
        }
        // SAFETY: process context (module init).
        let cache_walk = unsafe { ffi::dprof_shim_init_cache_walk() };
        if !cache_walk {
            pr_warn!("cannot list existing slab caches; only caches seen in use get named\n");
        }
        // SAFETY: process context (module init).
        if !unsafe { ffi::dprof_shim_init_debugreg_copy() } {
            pr_warn!(
                "cpu_debugreg not found: a text poke (static key, kprobe) during a history \
                 puts that CPU's debug registers back on the dummy address until the next one\n"
            );
        }
        // SAFETY: process context (module init).
        match unsafe { ffi::dprof_shim_init_tcg_rewrite() } {
            0 => {}
            1 => pr_info!(
                "running under QEMU TCG: each kprobe's bytes are written again before it is \
                 removed, so that no vCPU keeps a stale int3 (see dprof_shim.c)\n"
            ),
            _ => pr_warn!(
                "running under QEMU TCG, and text_poke was not found: removing a kprobe can \
                 leave a stale int3 in another vCPU's translations (Oops: int3)\n"
            ),
        }
        let device = KBox::pin_init(
            kernel::new_mutex!(
                DeviceState {
                    open: false,
                    state: abi::STATE_IDLE,
                    config: abi::Config::default(),
                    session: None,
                    sampler: None,
                    causal: None,
                    tracepoints,
                    page_tracepoints: PageTracepoints::find(),
                    pages_registered: false,
                    cache_walk,
                    bytes_read: 0,
                    next_cpu: 0,
                },
                "dprof_device"
            ),
            GFP_KERNEL,
        )?;
        DEVICE.store(
            core::ptr::from_ref::<Mutex<DeviceState>>(&device).cast_mut(),
            Ordering::Release,
        );
        // SAFETY: process context (module init); the callbacks find no sampler until one
        // starts.
        let ret = unsafe { ffi::dprof_shim_cpuhp_register() };
        if ret != 0 {
            pr_warn!("no CPU hotplug callback ({ret}): a CPU that goes offline and comes back is not sampled again\n");
        }
        // SAFETY: process context; the file operations it installs find DEVICE set.
        let ret = unsafe { ffi::dprof_shim_register_device() };
        if ret != 0 {
            DEVICE.store(core::ptr::null_mut(), Ordering::Release);
            // SAFETY: process context; no-op when the registration above failed.
            unsafe { ffi::dprof_shim_cpuhp_unregister() };
            return Err(Error::from_errno(ret));
        }
        pr_info!(
            "/dev/dprof ready (ABI {}, {} CPUs)\n",
            abi::ABI_VERSION,
            ffi::nr_cpu_ids()
        );
        Ok(Self { device })
    }
}

impl Drop for Dprof {
    fn drop(&mut self) {
        // SAFETY: registered in init. No file can be open: an open file holds a module reference.
        unsafe { ffi::dprof_shim_deregister_device() };
        DEVICE.store(core::ptr::null_mut(), Ordering::Release);
        // Defensive: release() always ends a session and its causal plan, so this finds none.
        let mut dev = self.device.lock();
        stop_session(&mut dev);
        drop_causal(&mut dev);
        drop(dev);
        // SAFETY: process context; no sampler is left for the callbacks.
        unsafe { ffi::dprof_shim_cpuhp_unregister() };
        pr_info!("unloaded\n");
    }
}

fn device() -> Result<&'static Mutex<DeviceState>> {
    let ptr = DEVICE.load(Ordering::Acquire);
    // SAFETY: DEVICE points into the module's pinned box while the device is registered, and
    // file operations only run while it is (open files pin the module).
    unsafe { ptr.as_ref() }.ok_or(ENODEV)
}

/// Ends the causal plan: a running experiment ends cut short (its ExperimentEnd is written),
/// writers can no longer find the user points, and the probes and tables go. The sampler must
/// already be released.
fn drop_causal(dev: &mut DeviceState) {
    let Some(mut causal) = dev.causal.take() else {
        return;
    };
    if causal.experiment_running() {
        if let Some(session) = dev.session.as_deref() {
            // Cannot fail: an experiment runs.
            let _ = causal.end_experiment(session.sink(), true);
        }
    }
    if !USER_POINTS.load(Ordering::Acquire).is_null() {
        USER_POINTS.store(core::ptr::null_mut(), Ordering::Release);
        // SAFETY: process context; waits for writers that found the points.
        unsafe { ffi::synchronize_rcu() };
    }
    // Dropping unregisters the kprobes and tracepoint probes, waiting for them.
    drop(causal);
}

/// Stops the sampler and detaches the probes if collecting. The rings stay so that they can
/// be drained.
fn stop_session(dev: &mut DeviceState) {
    if dev.state != abi::STATE_RUNNING {
        return;
    }
    // Releasing the counters waits for their handlers.
    dev.sampler = None;
    drop_causal(dev);
    if dev.config.events & abi::EVENT_SLAB == 0 {
        dev.state = abi::STATE_STOPPED;
        return;
    }
    if let (Some(pages), Some(session), true) =
        (&dev.page_tracepoints, &dev.session, dev.pages_registered)
    {
        // SAFETY: registered with this session in start().
        unsafe { pages.unregister(&**session) };
    }
    dev.pages_registered = false;
    if let (Some(tracepoints), Some(session)) = (&dev.tracepoints, &dev.session) {
        // SAFETY: registered with this session in start().
        unsafe { tracepoints.unregister(&**session) };
    }
    // With the probes gone no history can start: end the running one, re-point every CPU and
    // give the debug registers back.
    if let Some(histories) = dev.session.as_deref().and_then(Session::histories) {
        histories.shutdown();
    }
    dev.state = abi::STATE_STOPPED;
}

fn errno(result: Result<c_long>) -> c_long {
    match result {
        Ok(v) => v,
        Err(e) => e.to_errno() as c_long,
    }
}

/// Whether `file` is a user-point writer's (opened O_WRONLY).
fn write_only(file: *mut c_void) -> bool {
    // SAFETY: `file` is the struct file the VFS passes to our file operations.
    unsafe { ffi::dprof_shim_file_write_only(file) }
}

#[no_mangle]
extern "C" fn dprof_rs_open(_inode: *mut c_void, file: *mut c_void) -> c_int {
    let result = (|| -> Result {
        let device = device()?;
        if write_only(file) {
            // A user-point writer: beside the collector, never in its slot.
            return Ok(());
        }
        let mut dev = device.lock();
        if dev.open {
            return Err(EBUSY);
        }
        dev.open = true;
        dev.state = abi::STATE_IDLE;
        dev.bytes_read = 0;
        Ok(())
    })();
    match result {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

#[no_mangle]
extern "C" fn dprof_rs_release(_inode: *mut c_void, file: *mut c_void) -> c_int {
    if write_only(file) {
        return 0;
    }
    if let Ok(device) = device() {
        let mut dev = device.lock();
        stop_session(&mut dev);
        drop_causal(&mut dev);
        dev.session = None;
        dev.state = abi::STATE_IDLE;
        dev.open = false;
    }
    0
}

#[no_mangle]
extern "C" fn dprof_rs_read(
    _file: *mut c_void,
    buf: *mut u8,
    len: usize,
    _ppos: *mut i64,
) -> isize {
    errno((|| -> Result<c_long> {
        let mut dev = device()?.lock();
        if len < abi::MAX_RECORD_SIZE {
            return Err(EINVAL);
        }
        let dev = &mut *dev;
        let Some(session) = dev.session.as_deref() else {
            return Err(EINVAL); // not configured
        };
        let mut out = UserSlice::new(buf as usize, len).writer();
        if dev.state == abi::STATE_RUNNING {
            if let Some(histories) = session.histories() {
                let h = core::ptr::from_ref(histories).cast_mut().cast::<c_void>();
                // SAFETY: `h` lives during the call (the device lock is held).
                unsafe { ffi::dprof_shim_preempt_off(history::check_timeout_now, h) };
            }
        }
        let rings = session.sink().rings();
        let mut copied = 0usize;
        for i in 0..rings.len() {
            let cpu = (dev.next_cpu + i) % rings.len();
            let ring = &rings[cpu];
            match ring.drain(&mut out) {
                Ok(n) => copied += n,
                Err(e) if copied == 0 => return Err(e),
                Err(_) => break,
            }
            match ring.report_lost(cpu as u32, &mut out) {
                Ok(n) => copied += n,
                Err(e) if copied == 0 => return Err(e),
                Err(_) => break,
            }
        }
        dev.next_cpu = (dev.next_cpu + 1) % rings.len().max(1);
        dev.bytes_read += copied as u64;
        if copied == 0 && dev.state == abi::STATE_RUNNING {
            return Err(EAGAIN);
        }
        Ok(copied as c_long)
    })()) as isize
}

/// write(): a visit of the running causal session's user progress point named by the bytes
/// written (a trailing newline allowed, so `echo name > /dev/dprof` works). Returns `len`;
/// ENOENT when no causal session is collecting or it has no user point of that name, EINVAL
/// for an empty name or one longer than a point name can be, EFAULT for a bad buffer.
#[no_mangle]
extern "C" fn dprof_rs_write(
    _file: *mut c_void,
    buf: *const u8,
    len: usize,
    _ppos: *mut i64,
) -> isize {
    errno((|| -> Result<c_long> {
        // A name of up to PROGRESS_NAME_BYTES - 1 bytes, plus a newline.
        if len == 0 || len > abi::PROGRESS_NAME_BYTES {
            return Err(EINVAL);
        }
        let mut name = [0u8; abi::PROGRESS_NAME_BYTES];
        // Copied before entering the RCU read section: copying from user memory may fault
        // and sleep.
        UserSlice::new(buf as usize, len)
            .reader()
            .read_slice(&mut name[..len])?;
        let mut n = len;
        if name[n - 1] == b'\n' {
            n -= 1;
        }
        if n == 0 || n >= abi::PROGRESS_NAME_BYTES {
            return Err(EINVAL);
        }
        // SAFETY: paired with the unlock below; nothing in between sleeps.
        unsafe { ffi::dprof_shim_rcu_read_lock() };
        let ptr = USER_POINTS.load(Ordering::Acquire);
        // SAFETY: a published Causal is freed only after USER_POINTS was cleared and
        // synchronize_rcu() waited for this read section (drop_causal).
        let found = unsafe { ptr.as_ref() }.is_some_and(|causal| causal.visit_user(&name[..n]));
        // SAFETY: locked above.
        unsafe { ffi::dprof_shim_rcu_read_unlock() };
        if found {
            Ok(len as c_long)
        } else {
            Err(ENOENT)
        }
    })()) as isize
}

#[no_mangle]
extern "C" fn dprof_rs_ioctl(file: *mut c_void, cmd: c_uint, arg: c_ulong) -> c_long {
    errno((|| -> Result<c_long> {
        if write_only(file) {
            // A user-point writer must not drive the collector's session.
            return Err(EBADF);
        }
        let mut dev = device()?.lock();
        ioctl(&mut dev, cmd, arg)
    })())
}

fn ioctl(dev: &mut DeviceState, cmd: u32, arg: usize) -> Result<c_long> {
    match cmd {
        abi::IOC_VERSION => ioctl_version(dev, arg),
        abi::IOC_CONFIGURE => ioctl_configure(dev, arg),
        abi::IOC_START => ioctl_start(dev),
        abi::IOC_STOP => {
            if dev.state != abi::STATE_RUNNING {
                return Err(EINVAL);
            }
            stop_session(dev);
            Ok(0)
        }
        abi::IOC_STATUS => ioctl_status(dev, arg),
        abi::IOC_HISTORY_PLAN => ioctl_history_plan(dev, arg),
        abi::IOC_CAUSAL_PLAN => ioctl_causal_plan(dev, arg),
        abi::IOC_CAUSAL_TYPE => ioctl_causal_type(dev, arg),
        abi::IOC_CAUSAL_SCOPE => ioctl_causal_scope(dev, arg),
        abi::IOC_PAGE_SITES => ioctl_page_sites(dev, arg),
        abi::IOC_EXPERIMENT_START => ioctl_experiment_start(dev, arg),
        abi::IOC_EXPERIMENT_END => {
            let (Some(causal), Some(session)) = (dev.causal.as_deref_mut(), dev.session.as_deref())
            else {
                return Err(EINVAL);
            };
            causal.end_experiment(session.sink(), false)?;
            Ok(0)
        }
        _ => {
            // Our type and a known number with another size or direction: the caller was built
            // against another layout. Anything else is not ours.
            let known = [
                abi::IOC_VERSION,
                abi::IOC_CONFIGURE,
                abi::IOC_START,
                abi::IOC_STOP,
                abi::IOC_STATUS,
                abi::IOC_HISTORY_PLAN,
                abi::IOC_CAUSAL_PLAN,
                abi::IOC_CAUSAL_TYPE,
                abi::IOC_EXPERIMENT_START,
                abi::IOC_EXPERIMENT_END,
                abi::IOC_CAUSAL_SCOPE,
                abi::IOC_PAGE_SITES,
            ];
            if known.iter().any(|&k| k & 0xFFFF == cmd & 0xFFFF) {
                Err(EINVAL)
            } else {
                Err(ENOTTY)
            }
        }
    }
}

fn ioctl_version(dev: &DeviceState, arg: usize) -> Result<c_long> {
    let mut features = 0;
    if dev.tracepoints.is_some() {
        features |= abi::FEATURE_SLAB_EVENTS;
    }
    if dev.cache_walk {
        features |= abi::FEATURE_CACHE_WALK;
    }
    // Histories need the slab probes to start and end them and the cache list to find the
    // planned caches; x86 always has debug registers.
    if dev.tracepoints.is_some() && dev.cache_walk {
        features |= abi::FEATURE_HISTORIES;
    }
    // Kprobes, tracepoint lookup and the sampler are always there (the cache walk only
    // matters for types named by cache).
    features |= abi::FEATURE_CAUSAL | abi::FEATURE_ARRIVALS | abi::FEATURE_CAUSAL_SCOPE;
    if dev.tracepoints.is_some() && dev.page_tracepoints.is_some() {
        features |= abi::FEATURE_PAGE_SITES;
    }
    let info = abi::VersionInfo {
        abi_version: abi::ABI_VERSION,
        nr_cpu_ids: ffi::nr_cpu_ids() as u32,
        online_cpus: ffi::online_cpus(),
        // What this module can drive; whether the CPU has IBS or PEBS is for userland to
        // read from sysfs (the PMU types it must pass in live there).
        samplers: abi::SAMPLER_SOFTWARE | abi::SAMPLER_IBS | abi::SAMPLER_PEBS,
        features,
        min_ring_bytes: abi::MIN_RING_BYTES,
        max_ring_bytes: abi::MAX_RING_BYTES,
        max_record_size: abi::MAX_RECORD_SIZE as u32,
    };
    let mut bytes = [0u8; abi::VersionInfo::SIZE];
    info.encode(&mut bytes);
    UserSlice::new(arg, bytes.len())
        .writer()
        .write_slice(&bytes)?;
    Ok(0)
}

fn ioctl_configure(dev: &mut DeviceState, arg: usize) -> Result<c_long> {
    if dev.state == abi::STATE_RUNNING {
        return Err(EBUSY);
    }
    let mut bytes = [0u8; abi::Config::SIZE];
    UserSlice::new(arg, bytes.len())
        .reader()
        .read_slice(&mut bytes)?;
    let config = abi::Config::decode(&bytes).map_err(|_| EINVAL)?;
    if config.events & abi::EVENT_SLAB != 0 && dev.tracepoints.is_none() {
        return Err(EINVAL);
    }
    // Free the previous plan and rings before allocating new ones: memory may not hold both.
    drop_causal(dev);
    dev.session = None;
    dev.state = abi::STATE_IDLE;
    dev.session = Some(Session::new(config.ring_bytes)?);
    dev.config = config;
    dev.state = abi::STATE_CONFIGURED;
    Ok(0)
}

fn ioctl_history_plan(dev: &mut DeviceState, arg: usize) -> Result<c_long> {
    if dev.state != abi::STATE_CONFIGURED || dev.config.events & abi::EVENT_HISTORIES == 0 {
        return Err(EINVAL);
    }
    let mut bytes = [0u8; abi::HistoryPlan::SIZE];
    UserSlice::new(arg, bytes.len())
        .reader()
        .read_slice(&mut bytes)?;
    let plan = abi::HistoryPlan::decode(&bytes).map_err(|_| EINVAL)?;
    let count = plan.target_count as usize;
    // Up to MAX_HISTORY_TARGETS x 80 = 80 KiB: kvmalloc rather than one high-order page.
    let mut raw = KVVec::from_elem(0u8, count * abi::HistoryTarget::SIZE, GFP_KERNEL)?;
    UserSlice::new(plan.targets_ptr as usize, raw.len())
        .reader()
        .read_slice(&mut raw)?;
    let mut targets = KVVec::with_capacity(count, GFP_KERNEL)?;
    for chunk in raw.chunks_exact(abi::HistoryTarget::SIZE) {
        targets.push(
            abi::HistoryTarget::decode(chunk).map_err(|_| EINVAL)?,
            GFP_KERNEL,
        )?;
    }
    let Some(session) = dev.session.as_deref_mut() else {
        return Err(EINVAL);
    };
    session.set_history_plan(&plan, &targets)?;
    Ok(0)
}

/// IOC_CAUSAL_PLAN: after IOC_CONFIGURE with EVENT_SAMPLES, before IOC_START (EINVAL
/// otherwise), once (EBUSY). Registers the kernel progress points now, so that an unknown
/// function or tracepoint (ENOENT) or an unprobeable function (EINVAL) is reported here, as
/// is a kernel without the scheduler tracepoints that per-task delay accounting attaches to
/// (ENOTSUPP); nothing stays registered on failure.
fn ioctl_causal_plan(dev: &mut DeviceState, arg: usize) -> Result<c_long> {
    if dev.state != abi::STATE_CONFIGURED || dev.config.events & abi::EVENT_SAMPLES == 0 {
        return Err(EINVAL);
    }
    if dev.causal.is_some() {
        return Err(EBUSY);
    }
    let mut bytes = [0u8; abi::CausalPlan::SIZE];
    UserSlice::new(arg, bytes.len())
        .reader()
        .read_slice(&mut bytes)?;
    let plan = abi::CausalPlan::decode(&bytes).map_err(|_| EINVAL)?;
    let software = dev.config.sampler == u32::from(abi::SAMPLER_KIND_SOFTWARE);
    // The weight cap's unit: a hardware sampler's period counts events, not time, so its
    // samples are weighed against 1 ms.
    let period_ns = if software {
        u64::from(dev.config.sample_period_ns)
    } else {
        1_000_000
    };
    dev.causal = Some(CausalSession::new(&plan, period_ns, !software)?);
    Ok(0)
}

/// IOC_CAUSAL_TYPE: after IOC_CAUSAL_PLAN, until stop (EINVAL), while no experiment runs
/// (EBUSY).
fn ioctl_causal_type(dev: &mut DeviceState, arg: usize) -> Result<c_long> {
    let Some(causal) = dev.causal.as_deref_mut() else {
        return Err(EINVAL);
    };
    let mut bytes = [0u8; abi::CausalType::SIZE];
    UserSlice::new(arg, bytes.len())
        .reader()
        .read_slice(&mut bytes)?;
    let entry = abi::CausalType::decode(&bytes).map_err(|_| EINVAL)?;
    if !entry.name_bytes().is_empty() && !dev.cache_walk {
        return Err(ENOENT); // no cache can be found by name
    }
    causal.set_type(&entry)?;
    Ok(0)
}

/// IOC_CAUSAL_SCOPE: after IOC_CAUSAL_PLAN, before IOC_START (EINVAL otherwise): the sampler,
/// which reads the scope, is not running yet.
fn ioctl_causal_scope(dev: &mut DeviceState, arg: usize) -> Result<c_long> {
    let mut bytes = [0u8; abi::CausalScope::SIZE];
    UserSlice::new(arg, bytes.len())
        .reader()
        .read_slice(&mut bytes)?;
    let scope = abi::CausalScope::decode(&bytes).map_err(|_| EINVAL)?;
    if dev.state != abi::STATE_CONFIGURED {
        return Err(EINVAL);
    }
    let Some(causal) = dev.causal.as_deref_mut() else {
        return Err(EINVAL);
    };
    causal.set_scope(&scope)?;
    Ok(0)
}

/// IOC_PAGE_SITES: after IOC_CONFIGURE with EVENT_SLAB, before IOC_START (EINVAL
/// otherwise), on a kernel with the page allocator's tracepoints (ENOTSUPP): the probes,
/// which read the sites, are not attached yet.
fn ioctl_page_sites(dev: &mut DeviceState, arg: usize) -> Result<c_long> {
    let mut bytes = [0u8; abi::PageSites::SIZE];
    UserSlice::new(arg, bytes.len())
        .reader()
        .read_slice(&mut bytes)?;
    let sites = abi::PageSites::decode(&bytes).map_err(|_| EINVAL)?;
    if dev.state != abi::STATE_CONFIGURED || dev.config.events & abi::EVENT_SLAB == 0 {
        return Err(EINVAL);
    }
    if dev.page_tracepoints.is_none() || dev.tracepoints.is_none() {
        return Err(ENOTSUPP);
    }
    let sites = PageSites::from_user(&sites)?;
    let Some(session) = dev.session.as_deref_mut() else {
        return Err(EINVAL);
    };
    session.set_page_sites(sites);
    Ok(0)
}

/// IOC_EXPERIMENT_START: while collecting with a causal plan, no experiment running, the
/// type set (EINVAL otherwise). Writes ExperimentStart.
fn ioctl_experiment_start(dev: &mut DeviceState, arg: usize) -> Result<c_long> {
    let mut bytes = [0u8; abi::ExperimentControl::SIZE];
    UserSlice::new(arg, bytes.len())
        .reader()
        .read_slice(&mut bytes)?;
    let control = abi::ExperimentControl::decode(&bytes).map_err(|_| EINVAL)?;
    if dev.state != abi::STATE_RUNNING {
        return Err(EINVAL);
    }
    let (Some(causal), Some(session)) = (dev.causal.as_deref_mut(), dev.session.as_deref()) else {
        return Err(EINVAL);
    };
    causal.start_experiment(&control, session.sink())?;
    Ok(0)
}

fn ioctl_start(dev: &mut DeviceState) -> Result<c_long> {
    if dev.state != abi::STATE_CONFIGURED {
        return Err(EINVAL);
    }
    let Some(session) = dev.session.as_deref() else {
        return Err(EINVAL);
    };
    if dev.config.events & abi::EVENT_HISTORIES != 0 {
        // A plan is needed; the debug registers are reserved before the probes can start a
        // history.
        session.histories().ok_or(EINVAL)?.start()?;
    }
    if dev.config.events & abi::EVENT_SLAB != 0 {
        let Some(tracepoints) = dev.tracepoints.as_ref() else {
            return Err(EINVAL);
        };
        // SAFETY: the session outlives the registration: stop_session() unregisters before
        // the session is dropped (release, reconfigure, module exit).
        if let Err(e) = unsafe { tracepoints.register(session) } {
            if let Some(histories) = session.histories() {
                histories.shutdown();
            }
            return Err(e);
        }
        if let (Some(pages), true) = (&dev.page_tracepoints, session.page_sites().is_some()) {
            // SAFETY: as above; the session has page sites.
            if let Err(e) = unsafe { pages.register(session) } {
                // SAFETY: registered just above with this session.
                unsafe { tracepoints.unregister(session) };
                if let Some(histories) = session.histories() {
                    histories.shutdown();
                }
                return Err(e);
            }
            dev.pages_registered = true;
        }
        // Caches seen by the probes in the meantime are not described twice.
        if dev.cache_walk {
            if let Err(e) = session.describe_existing_caches() {
                pr_warn!("listing existing caches failed: {:?}\n", e);
            }
        }
    }
    if dev.config.events & abi::EVENT_SAMPLES != 0 {
        // SAFETY: the sampler is dropped (stop_session) before the session and the causal
        // plan.
        match unsafe {
            sampler::Sampler::start(
                session.sink(),
                &dev.config,
                dev.causal.as_deref().map(CausalSession::shared),
            )
        } {
            Ok(s) => dev.sampler = Some(s),
            Err(e) => {
                if let (Some(pages), true) = (&dev.page_tracepoints, dev.pages_registered) {
                    // SAFETY: registered with this session just above.
                    unsafe { pages.unregister(session) };
                    dev.pages_registered = false;
                }
                if dev.config.events & abi::EVENT_SLAB != 0 {
                    if let Some(tracepoints) = dev.tracepoints.as_ref() {
                        // SAFETY: registered with this session just above.
                        unsafe { tracepoints.unregister(session) };
                    }
                }
                if let Some(histories) = session.histories() {
                    histories.shutdown();
                }
                return Err(e);
            }
        }
    }
    if let Some(causal) = dev.causal.as_deref_mut() {
        causal.on_start();
        USER_POINTS.store(
            core::ptr::from_ref::<Causal>(causal.shared()).cast_mut(),
            Ordering::Release,
        );
    }
    dev.state = abi::STATE_RUNNING;
    Ok(0)
}

fn ioctl_status(dev: &DeviceState, arg: usize) -> Result<c_long> {
    let mut bytes = [0u8; abi::Status::SIZE];
    let (mut reader, mut writer) = UserSlice::new(arg, bytes.len()).reader_writer();
    reader.read_slice(&mut bytes)?;
    let request = abi::Status::decode(&bytes).map_err(|_| EINVAL)?;
    let rings = dev
        .session
        .as_deref()
        .map_or(&[][..], |session| session.sink().rings());
    let mut status = abi::Status {
        cpus_ptr: request.cpus_ptr,
        cpus_len: request.cpus_len,
        nr_cpus: ffi::nr_cpu_ids() as u32,
        state: dev.state,
        records_written: 0,
        records_lost: 0,
        bytes_read: dev.bytes_read,
        histories_started: 0,
        stray_hits: 0,
        armed_slots: 0,
        reserved_slots: 0,
    };
    if let Some(histories) = dev.session.as_deref().and_then(Session::histories) {
        status.histories_started = histories.started();
        status.stray_hits = histories.stray_hits();
        status.armed_slots = histories.armed_slots();
        status.reserved_slots = histories.reserved_slots();
    }
    let wanted = (request.cpus_len as usize).min(rings.len());
    let mut cpus_out =
        UserSlice::new(request.cpus_ptr as usize, wanted * abi::CpuStatus::SIZE).writer();
    for (cpu, ring) in rings.iter().enumerate() {
        let cpu_status = abi::CpuStatus {
            records_written: ring.written(),
            records_lost: ring.lost(),
            bytes_pending: ring.pending(),
        };
        status.records_written += cpu_status.records_written;
        status.records_lost += cpu_status.records_lost;
        if cpu < wanted {
            let mut entry = [0u8; abi::CpuStatus::SIZE];
            cpu_status.encode(&mut entry);
            cpus_out.write_slice(&entry)?;
        }
    }
    status.encode(&mut bytes);
    writer.write_slice(&bytes)?;
    Ok(0)
}
