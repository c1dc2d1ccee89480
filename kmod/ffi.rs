//! C functions dprof.ko calls: exported kernel symbols that 6.12's generated bindings do not
//! cover, and the shim (dprof_shim.c, dprof_shim.h), with the structs it shares with Rust.
//! Declared by hand because an out-of-tree module cannot add headers to the bindings.

use kernel::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

use crate::abi;

/// Opaque `struct tracepoint`.
#[repr(C)]
pub(crate) struct Tracepoint {
    _private: [u8; 0],
}

/// Opaque `struct kmem_cache`.
#[repr(C)]
pub(crate) struct KmemCache {
    _private: [u8; 0],
}

/// Opaque `struct perf_event`.
#[repr(C)]
pub(crate) struct PerfEvent {
    _private: [u8; 0],
}

// The structs the shim and Rust exchange. Each mirrors a struct of dprof_shim.h, and both
// sides assert the same size and field offsets, so that a change on one side alone fails the
// build instead of misreading memory.

/// Mirrors `struct dprof_cache_fields` (dprof_shim.h).
#[repr(C)]
pub(crate) struct CacheFields {
    pub(crate) name: *const c_char,
    pub(crate) object_size: c_uint,
    pub(crate) size: c_uint,
    pub(crate) align: c_uint,
    pub(crate) flags: c_uint,
}

assert_c_layout!(CacheFields, size 24, {
    name: 0,
    object_size: 8,
    size: 12,
    align: 16,
    flags: 20,
});

/// Mirrors `struct dprof_sample_regs` (dprof_shim.h): what the shim's perf overflow handler
/// copies out of a sample for sampler.rs.
#[repr(C)]
pub(crate) struct SampleRegs {
    pub(crate) ip: u64,
    /// General-purpose registers in hardware register-number order.
    pub(crate) regs: [u64; abi::SAMPLE_REGS],
    pub(crate) gs_base: u64,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) insn: [u8; abi::SAMPLE_INSN_BYTES],
    pub(crate) insn_len: u32,
    pub(crate) user: u32,
    /// Hardware samplers only: `abi::HW_*` bits of the fields below that perf filled in.
    pub(crate) hw_valid: u32,
    pub(crate) latency: u32,
    pub(crate) data_addr: u64,
    pub(crate) phys_addr: u64,
    pub(crate) data_src: u64,
    /// Bytes of `raw` used (PERF_SAMPLE_RAW: IBS's caps and registers).
    pub(crate) raw_len: u32,
    pub(crate) raw: [u8; abi::PERF_RAW_MAX],
}

assert_c_layout!(SampleRegs, size 288, {
    ip: 0,
    regs: 8,
    gs_base: 136,
    pid: 144,
    tid: 148,
    insn: 152,
    insn_len: 168,
    user: 172,
    hw_valid: 176,
    latency: 180,
    data_addr: 184,
    phys_addr: 192,
    data_src: 200,
    raw_len: 208,
    raw: 212,
});

/// Mirrors `struct dprof_hit_regs` (dprof_shim.h): what the shim's breakpoint handler copies
/// out of a trap for history.rs.
#[repr(C)]
pub(crate) struct HitRegs {
    /// The trap ip: the instruction after the access.
    pub(crate) ip: u64,
    /// General-purpose registers in hardware register-number order.
    pub(crate) regs: [u64; abi::SAMPLE_REGS],
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) user: u32,
}

assert_c_layout!(HitRegs, size 152, {
    ip: 0,
    regs: 8,
    pid: 136,
    tid: 140,
    user: 144,
});

extern "C" {
    // Exported by the kernel (GPL).
    pub(crate) fn ktime_get_mono_fast_ns() -> u64;
    pub(crate) fn vzalloc_noprof(size: c_ulong) -> *mut c_void;
    pub(crate) fn vfree(addr: *const c_void);
    pub(crate) fn for_each_kernel_tracepoint(
        fct: unsafe extern "C" fn(tp: *mut Tracepoint, data: *mut c_void),
        data: *mut c_void,
    );
    pub(crate) fn tracepoint_probe_register(
        tp: *mut Tracepoint,
        probe: *mut c_void,
        data: *mut c_void,
    ) -> c_int;
    pub(crate) fn tracepoint_probe_unregister(
        tp: *mut Tracepoint,
        probe: *mut c_void,
        data: *mut c_void,
    ) -> c_int;
    pub(crate) fn synchronize_rcu();
    pub(crate) fn synchronize_rcu_expedited();

    // dprof_shim.c.
    pub(crate) fn dprof_shim_register_device() -> c_int;
    pub(crate) fn dprof_shim_deregister_device();
    pub(crate) fn dprof_shim_cache_fields(s: *const KmemCache, out: *mut CacheFields);
    pub(crate) fn dprof_shim_cache_of(ptr: *const c_void) -> *const KmemCache;
    pub(crate) fn dprof_shim_page_address(page: *mut c_void) -> *mut c_void;
    pub(crate) fn dprof_shim_this_cpu() -> c_int;
    pub(crate) fn dprof_shim_current(tgid: *mut u32) -> *mut c_void;
    pub(crate) fn dprof_shim_waker(tgid: *mut u32) -> *mut c_void;
    pub(crate) fn dprof_shim_task_tgid(task: *const c_void, tgid: *mut u32) -> bool;
    pub(crate) fn dprof_shim_nr_cpu_ids() -> c_uint;
    pub(crate) fn dprof_shim_online_cpus() -> c_uint;
    pub(crate) fn dprof_shim_tracepoint_name(tp: *const Tracepoint) -> *const c_char;
    pub(crate) fn dprof_shim_tracepoint_sync();
    pub(crate) fn dprof_shim_init_cache_walk() -> bool;
    pub(crate) fn dprof_shim_init_debugreg_copy() -> bool;
    pub(crate) fn dprof_shim_init_tcg_rewrite() -> c_int;
    pub(crate) fn dprof_shim_cpu_online(cpu: c_uint) -> bool;
    pub(crate) fn dprof_shim_sampler_create(
        cpu: c_int,
        period_ns: u64,
        user: bool,
        idle: bool,
        ctx: *mut c_void,
    ) -> *mut PerfEvent;
    pub(crate) fn dprof_shim_hw_sampler_create(
        cpu: c_int,
        pmu_type: u32,
        config: u64,
        config1: u64,
        period: u64,
        pebs: bool,
        user: bool,
        ctx: *mut c_void,
    ) -> *mut PerfEvent;
    pub(crate) fn dprof_shim_sampler_release(event: *mut PerfEvent);
    pub(crate) fn dprof_shim_cpus_read_lock();
    pub(crate) fn dprof_shim_cpus_read_unlock();
    pub(crate) fn dprof_shim_cpuhp_register() -> c_int;
    pub(crate) fn dprof_shim_cpuhp_unregister();
    pub(crate) fn dprof_shim_bp_register(dummy: c_ulong, ctx: *mut c_void) -> *mut c_void;
    pub(crate) fn dprof_shim_bp_unregister(events: *mut c_void);
    pub(crate) fn dprof_shim_bp_remake(
        events: *mut c_void,
        cpu: c_int,
        dummy: c_ulong,
        ctx: *mut c_void,
    ) -> c_int;
    pub(crate) fn dprof_shim_bp_slot(events: *mut c_void) -> c_int;
    pub(crate) fn dprof_shim_dr7_shadow() -> c_ulong;
    pub(crate) fn dprof_shim_bp_point(
        events: *mut c_void,
        slot: c_int,
        addr: c_ulong,
        len: c_uint,
        dr7: c_ulong,
    );
    pub(crate) fn dprof_shim_csd_alloc(
        f: unsafe extern "C" fn(info: *mut c_void),
        info: *mut c_void,
    ) -> *mut c_void;
    pub(crate) fn dprof_shim_csd_kick(csd: *mut c_void, cpu: c_int) -> c_int;
    pub(crate) fn dprof_shim_csd_drain(csd: *mut c_void);
    pub(crate) fn dprof_shim_csd_free(csd: *mut c_void);
    pub(crate) fn dprof_shim_on_each_cpu(
        f: unsafe extern "C" fn(info: *mut c_void),
        info: *mut c_void,
    );
    pub(crate) fn dprof_shim_preempt_off(
        f: unsafe extern "C" fn(info: *mut c_void),
        info: *mut c_void,
    );
    pub(crate) fn dprof_shim_file_write_only(file: *const c_void) -> bool;
    pub(crate) fn dprof_shim_kprobe_register(name: *const c_char, data: *mut c_void)
        -> *mut c_void;
    pub(crate) fn dprof_shim_kprobe_unregister(kprobe: *mut c_void);
    pub(crate) fn dprof_shim_bulk_free_register(data: *mut c_void) -> *mut c_void;
    pub(crate) fn dprof_shim_destroy_register(data: *mut c_void) -> *mut c_void;
    pub(crate) fn dprof_shim_destroy_unregister(probe: *mut c_void);
    pub(crate) fn dprof_shim_bulk_alloc_register(probes: *mut c_void) -> c_int;
    pub(crate) fn dprof_shim_bulk_alloc_unregister(probes: *mut c_void);
    pub(crate) fn dprof_shim_bulk_free_unregister(probes: *mut c_void);
    pub(crate) fn dprof_shim_irq_work_alloc(
        f: unsafe extern "C" fn(info: *mut c_void),
        info: *mut c_void,
    ) -> *mut c_void;
    pub(crate) fn dprof_shim_irq_work_queue(works: *mut c_void);
    pub(crate) fn dprof_shim_stack_trace(entries: *mut u64, max: u32) -> u32;
    pub(crate) fn dprof_shim_irq_work_sync(works: *mut c_void);
    pub(crate) fn dprof_shim_irq_work_free(works: *mut c_void);
    pub(crate) fn dprof_shim_rcu_read_lock();
    pub(crate) fn dprof_shim_rcu_read_unlock();
    pub(crate) fn dprof_shim_walk_caches(
        f: unsafe extern "C" fn(s: *const KmemCache, data: *mut c_void),
        data: *mut c_void,
    ) -> c_int;
}

/// Name, sizes and flags of a cache (private `struct kmem_cache` fields, read by the shim).
///
/// # Safety
/// `cache` must be a live `struct kmem_cache`.
pub(crate) unsafe fn cache_fields(cache: *const KmemCache) -> CacheFields {
    let mut fields = CacheFields {
        name: core::ptr::null(),
        object_size: 0,
        size: 0,
        align: 0,
        flags: 0,
    };
    // SAFETY: `cache` is live per the contract; `fields` is a valid out pointer.
    unsafe { dprof_shim_cache_fields(cache, &mut fields) };
    fields
}

/// Nanoseconds on the NMI-safe monotonic clock shared by all CPUs.
#[inline]
pub(crate) fn now_ns() -> u64 {
    // SAFETY: ktime_get_mono_fast_ns has no preconditions and is safe in any context, NMI included.
    unsafe { ktime_get_mono_fast_ns() }
}

/// The CPU this code runs on. Callers have preemption disabled (tracepoint probes, interrupt
/// handlers, or an explicit preempt_disable), so the answer stays true while they use it.
#[inline]
pub(crate) fn this_cpu() -> usize {
    // SAFETY: reads a per-CPU variable; no preconditions.
    unsafe { dprof_shim_this_cpu() as usize }
}

/// The running task (the interrupted one in an interrupt) and its thread group id.
#[inline]
pub(crate) fn current_task() -> (usize, u32) {
    let mut tgid = 0;
    // SAFETY: reads `current`, valid in any context; `tgid` is a local.
    let task = unsafe { dprof_shim_current(&mut tgid) };
    (task as usize, tgid)
}

/// The task doing a wake-up and its thread group id, or None when an interrupt (a timer, an
/// I/O completion) or the idle task does it.
#[inline]
pub(crate) fn waker_task() -> Option<(usize, u32)> {
    let mut tgid = 0;
    // SAFETY: reads `current` and the preempt count; `tgid` is a local.
    let task = unsafe { dprof_shim_waker(&mut tgid) };
    (!task.is_null()).then_some((task as usize, tgid))
}

/// The thread group id of `task`, a task the scheduler is switching in; None for an idle task.
#[inline]
pub(crate) fn task_tgid(task: usize) -> Option<u32> {
    let mut tgid = 0;
    // SAFETY: `task` is a live task_struct (the caller is its sched_switch probe); `tgid` is a
    // local.
    unsafe { dprof_shim_task_tgid(task as *const c_void, &mut tgid) }.then_some(tgid)
}

/// `nr_cpu_ids`: every CPU number is below it.
pub(crate) fn nr_cpu_ids() -> usize {
    // SAFETY: reads a global set at boot.
    unsafe { dprof_shim_nr_cpu_ids() as usize }
}

/// CPUs online now.
pub(crate) fn online_cpus() -> u32 {
    // SAFETY: reads the online mask weight; no preconditions.
    unsafe { dprof_shim_online_cpus() }
}

/// ERR_PTR values are the last page of the address space: the errno of one, if it is one.
pub(crate) fn err_ptr(ptr: *const c_void) -> Option<c_int> {
    let addr = ptr as usize;
    (addr >= (-4095isize) as usize).then_some(addr as isize as c_int)
}
