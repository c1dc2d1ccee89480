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
//! - Lost when a ring was full.
//!
//! The ioctl and record ABI is documented in `abi/src/wire.rs` (crate `dprof-abi`), with a
//! user-space example of a whole session.
//!
//! read() never blocks: it returns whole records only (the buffer must hold at least
//! `MAX_RECORD_SIZE` bytes, else EINVAL), EAGAIN while collecting with nothing to read, and 0
//! once collection is stopped and the rings are empty.

use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::Mutex;
use kernel::uaccess::UserSlice;

// The ABI is shared with userland, which uses all of it; the module needs only part, and its
// `pub` items are the crate API of dprof-abi, not of this module.
#[allow(dead_code, unreachable_pub)]
#[path = "abi/src/wire.rs"]
mod abi;
// The debugreg crate's one file: DR7 encoding for re-pointing breakpoints.
#[allow(dead_code, unreachable_pub)]
#[path = "../debugreg/src/dr.rs"]
mod debugreg;
mod ffi;
mod history;
mod ring;
mod sampler;
mod session;

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
    /// The sampler's counters while collecting samples; dropped (released) before `session`.
    sampler: Option<sampler::Sampler>,
    tracepoints: Option<SlabTracepoints>,
    cache_walk: bool,
    bytes_read: u64,
    /// First CPU the next read() drains, so that no CPU's ring starves the others.
    next_cpu: usize,
}

/// The device state for the file operations, published between module init and exit.
static DEVICE: AtomicPtr<Mutex<DeviceState>> = AtomicPtr::new(core::ptr::null_mut());

struct Dprof {
    device: Pin<KBox<Mutex<DeviceState>>>,
}

impl kernel::Module for Dprof {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let tracepoints = SlabTracepoints::find();
        if tracepoints.is_none() {
            pr_warn!("dprof: kmem tracepoints not found: slab events unavailable\n");
        }
        // SAFETY: process context (module init).
        let cache_walk = unsafe { ffi::dprof_shim_init_cache_walk() };
        if !cache_walk {
            pr_warn!("dprof: cannot list existing slab caches; only caches seen in use get named\n");
        }
        // SAFETY: process context (module init).
        if !unsafe { ffi::dprof_shim_init_debugreg_copy() } {
            pr_warn!(
                "dprof: cpu_debugreg not found: a text poke (static key, kprobe) during a history \
                 puts that CPU's debug registers back on the dummy address until the next one\n"
            );
        }
        let device = KBox::pin_init(
            kernel::new_mutex!(
                DeviceState {
                    open: false,
                    state: abi::STATE_IDLE,
                    config: abi::Config::default(),
                    session: None,
                    sampler: None,
                    tracepoints,
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
        // SAFETY: process context; the file operations it installs find DEVICE set.
        let ret = unsafe { ffi::dprof_shim_register_device() };
        if ret != 0 {
            DEVICE.store(core::ptr::null_mut(), Ordering::Release);
            return Err(Error::from_errno(ret));
        }
        pr_info!(
            "dprof: /dev/dprof ready (ABI {}, {} CPUs)\n",
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
        // Defensive: release() always ends a session, so this finds none.
        stop_session(&mut self.device.lock());
        pr_info!("dprof: unloaded\n");
    }
}

fn device() -> Result<&'static Mutex<DeviceState>> {
    let ptr = DEVICE.load(Ordering::Acquire);
    // SAFETY: DEVICE points into the module's pinned box while the device is registered, and
    // file operations only run while it is (open files pin the module).
    unsafe { ptr.as_ref() }.ok_or(ENODEV)
}

/// Stops the sampler and detaches the probes if collecting. The rings stay so that they can
/// be drained.
fn stop_session(dev: &mut DeviceState) {
    if dev.state != abi::STATE_RUNNING {
        return;
    }
    // Releasing the counters waits for their handlers.
    dev.sampler = None;
    if dev.config.events & abi::EVENT_SLAB == 0 {
        dev.state = abi::STATE_STOPPED;
        return;
    }
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

#[no_mangle]
extern "C" fn dprof_rs_open(_inode: *mut c_void, _file: *mut c_void) -> c_int {
    let result = (|| -> Result {
        let mut dev = device()?.lock();
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
extern "C" fn dprof_rs_release(_inode: *mut c_void, _file: *mut c_void) -> c_int {
    if let Ok(device) = device() {
        let mut dev = device.lock();
        stop_session(&mut dev);
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
        let rings = session.rings();
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

#[no_mangle]
extern "C" fn dprof_rs_ioctl(_file: *mut c_void, cmd: c_uint, arg: c_ulong) -> c_long {
    errno((|| -> Result<c_long> {
        let mut dev = device()?.lock();
        ioctl(&mut dev, cmd, arg as usize)
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
    UserSlice::new(arg, bytes.len()).writer().write_slice(&bytes)?;
    Ok(0)
}

fn ioctl_configure(dev: &mut DeviceState, arg: usize) -> Result<c_long> {
    if dev.state == abi::STATE_RUNNING {
        return Err(EBUSY);
    }
    let mut bytes = [0u8; abi::Config::SIZE];
    UserSlice::new(arg, bytes.len()).reader().read_slice(&mut bytes)?;
    let config = abi::Config::decode(&bytes).map_err(|_| EINVAL)?;
    if config.events & abi::EVENT_SLAB != 0 && dev.tracepoints.is_none() {
        return Err(EINVAL);
    }
    // Free the previous rings before allocating new ones: memory may not hold both.
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
    UserSlice::new(arg, bytes.len()).reader().read_slice(&mut bytes)?;
    let plan = abi::HistoryPlan::decode(&bytes).map_err(|_| EINVAL)?;
    let Some(session) = dev.session.as_deref_mut() else {
        return Err(EINVAL);
    };
    session.set_history_plan(&plan)?;
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
        // Caches seen by the probes in the meantime are not described twice.
        if dev.cache_walk {
            if let Err(e) = session.describe_existing_caches() {
                pr_warn!("dprof: listing existing caches failed: {:?}\n", e);
            }
        }
    }
    if dev.config.events & abi::EVENT_SAMPLES != 0 {
        // SAFETY: the sampler is dropped (stop_session) before the session.
        match unsafe {
            sampler::Sampler::start(session, &dev.config)
        } {
            Ok(s) => dev.sampler = Some(s),
            Err(e) => {
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
    dev.state = abi::STATE_RUNNING;
    Ok(0)
}

fn ioctl_status(dev: &DeviceState, arg: usize) -> Result<c_long> {
    let mut bytes = [0u8; abi::Status::SIZE];
    let (mut reader, mut writer) = UserSlice::new(arg, bytes.len()).reader_writer();
    reader.read_slice(&mut bytes)?;
    let request = abi::Status::decode(&bytes).map_err(|_| EINVAL)?;
    let rings = dev.session.as_deref().map_or(&[][..], Session::rings);
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
    let mut cpus_out = UserSlice::new(
        request.cpus_ptr as usize,
        wanted * abi::CpuStatus::SIZE,
    )
    .writer();
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
