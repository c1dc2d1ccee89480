//! A collection session: the record sink, the set of caches already described, the history
//! engine, and the slab tracepoint probes that feed them.

use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::prelude::*;

use crate::abi;
use crate::ffi::{self, KmemCache, Tracepoint};
use crate::history::Histories;
use crate::lookup;
use crate::page_sites::PageSites;
use crate::sink::RecordSink;

/// Slots of the table of caches already described; Linux has a few hundred caches.
const SEEN_SLOTS: usize = 4096;

/// Caches for which a CacheInfo was written: a fixed open-addressing table filled by CAS, so
/// probes in any context can test-and-insert without locks or allocation.
struct SeenCaches {
    slots: KVec<AtomicU64>,
}

impl SeenCaches {
    fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(SEEN_SLOTS, GFP_KERNEL)?;
        for _ in 0..SEEN_SLOTS {
            slots.push(AtomicU64::new(0), GFP_KERNEL)?;
        }
        Ok(Self { slots })
    }

    /// The first slot `cache` may be in.
    fn home(cache: u64) -> usize {
        // Fibonacci hashing of the address without its always-zero low bits.
        ((cache >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize
    }

    /// Inserts `cache`; true when it was not there before (the caller describes it). When the
    /// table is full every further cache counts as new: a duplicate CacheInfo is harmless, a
    /// missing one is not.
    fn insert(&self, cache: u64) -> bool {
        let mut slot = Self::home(cache);
        for _ in 0..SEEN_SLOTS {
            let entry = &self.slots[slot % SEEN_SLOTS];
            match entry.compare_exchange(0, cache, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(existing) if existing == cache => return false,
                Err(_) => slot = slot.wrapping_add(1),
            }
        }
        true
    }

    /// Forgets `cache` (destroyed): its slot becomes a tombstone that lookups step over and
    /// inserts do not reuse, so that a cache created later at its address is new.
    fn forget(&self, cache: u64) {
        let mut slot = Self::home(cache);
        for _ in 0..SEEN_SLOTS {
            let entry = &self.slots[slot % SEEN_SLOTS];
            match entry.compare_exchange(cache, FORGOTTEN, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) | Err(0) => return,
                Err(_) => slot = slot.wrapping_add(1),
            }
        }
    }
}

/// A [`SeenCaches`] slot whose cache was destroyed (no kmem_cache lives at address 1).
const FORGOTTEN: u64 = 1;

/// Everything the probes write to. Lives in a KBox whose address is the probes' `data`.
pub(crate) struct Session {
    sink: RecordSink,
    seen: SeenCaches,
    /// The history engine, if planned. It writes to the sink from breakpoints and IPIs, so
    /// `Session`'s Drop shuts it down before the sink goes.
    histories: Option<KBox<Histories>>,
    /// Where the page allocator's code lies, when its allocations are recorded.
    page_sites: Option<KBox<PageSites>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // The engine's breakpoints and IPIs write to the sink: stop them first.
        self.histories = None;
    }
}

impl Session {
    /// A session whose sink has rings of `ring_bytes` for every possible CPU.
    pub(crate) fn new(ring_bytes: u32) -> Result<KBox<Self>> {
        Ok(KBox::new(
            Self {
                sink: RecordSink::new(ring_bytes)?,
                seen: SeenCaches::new()?,
                histories: None,
                page_sites: None,
            },
            GFP_KERNEL,
        )?)
    }

    /// Where this session's records go. It lives as long as the session, at a stable address
    /// (the session is boxed).
    pub(crate) fn sink(&self) -> &RecordSink {
        &self.sink
    }

    /// The history engine, when the session has a history plan.
    pub(crate) fn histories(&self) -> Option<&Histories> {
        self.histories.as_deref()
    }

    /// Installs the history engine for `plan` (replacing any earlier one). Only while no
    /// probe can see the session (configured, not started).
    pub(crate) fn set_history_plan(
        &mut self,
        plan: &abi::HistoryPlan,
        targets: &[abi::HistoryTarget],
    ) -> Result {
        self.histories = None;
        self.histories = Some(Histories::new(&self.sink, plan, targets)?);
        Ok(())
    }

    /// Where the page allocator's code lies, when set.
    pub(crate) fn page_sites(&self) -> Option<&PageSites> {
        self.page_sites.as_deref()
    }

    /// Records the page allocator's allocations and frees from the next start on, their
    /// sites found with `sites` (replacing any earlier ones). Only while no probe can see
    /// the session (configured, not started).
    pub(crate) fn set_page_sites(&mut self, sites: KBox<PageSites>) {
        self.page_sites = Some(sites);
    }

    /// Writes an Alloc record. Preemption must be off.
    pub(crate) fn emit_alloc(&self, alloc: &abi::Alloc) {
        let mut payload = [0u8; abi::Alloc::SIZE];
        alloc.encode(&mut payload);
        self.sink.emit(abi::RecordKind::Alloc, &payload);
        if let Some(histories) = self.histories() {
            histories.on_alloc(alloc.ptr, alloc.cache, alloc.call_site);
        }
    }

    /// Writes a Free record. Preemption must be off.
    pub(crate) fn emit_free(&self, free: &abi::Free) {
        let mut payload = [0u8; abi::Free::SIZE];
        free.encode(&mut payload);
        self.sink.emit(abi::RecordKind::Free, &payload);
        if let Some(histories) = self.histories() {
            histories.on_free(free.ptr, free.call_site);
        }
    }

    /// Writes a CacheInfo for `cache` unless one was written already.
    fn describe_cache(&self, cache: *const KmemCache, origin: u16) {
        if cache.is_null() || !self.seen.insert(cache as u64) {
            return;
        }
        // SAFETY: `cache` is a live kmem_cache: it is the cache of an object being allocated or
        // freed, or comes from the cache list walked under slab_mutex.
        let fields = unsafe { ffi::cache_fields(cache) };
        let info = abi::CacheInfo {
            cache: cache as u64,
            object_size: fields.object_size,
            size: fields.size,
            align: fields.align,
            slab_flags: fields.flags,
            name_len: 0,
            origin,
            name: [0; abi::CACHE_NAME_BYTES],
        };
        // SAFETY: a cache's name is a NUL-terminated string that lives as long as the cache.
        let name = unsafe { lookup::kernel_name(fields.name) };
        let mut payload = [0u8; abi::CacheInfo::SIZE];
        info.with_name(name).encode(&mut payload);
        self.sink.emit(abi::RecordKind::CacheInfo, &payload);
    }

    /// Describes every cache that exists now. Process context; returns how many were walked.
    pub(crate) fn describe_existing_caches(&self) -> Result<u32> {
        let data = core::ptr::from_ref(self).cast_mut().cast::<c_void>();
        // SAFETY: the callback gets `self` back as `data`, which outlives the call.
        let n = unsafe { ffi::dprof_shim_walk_caches(walk_cache, data) };
        if n < 0 {
            Err(Error::from_errno(n))
        } else {
            Ok(n as u32)
        }
    }
}

/// The cache walk's callback of `describe_existing_caches`.
///
/// # Safety
/// `data` must be a live [`Session`]; `cache` a live cache.
unsafe extern "C" fn walk_cache(cache: *const KmemCache, data: *mut c_void) {
    // SAFETY: `data` is the Session passed by describe_existing_caches.
    let session = unsafe { &*data.cast::<Session>() };
    session.describe_cache(cache, abi::CACHE_ORIGIN_WALK);
}

/// Names of the kmem tracepoints, in the order of `SlabTracepoints::points`: the frees
/// first, which [`SlabTracepoints::register`] attaches before the allocations.
const TRACEPOINT_NAMES: [&[u8]; 4] = [
    b"kfree",
    b"kmem_cache_free",
    b"kmem_cache_alloc",
    b"kmalloc",
];

/// How many of [`TRACEPOINT_NAMES`], from the first, are frees.
const FREE_TRACEPOINTS: usize = 2;

/// The four kmem tracepoints, found once at module load, and the probes of the bulk
/// allocation and free functions, which fire none.
pub(crate) struct SlabTracepoints {
    points: [*mut Tracepoint; 4],
    /// The bulk probes while registered (null otherwise, or when the kernel has no bulk
    /// functions to probe).
    bulk: AtomicPtr<c_void>,
    /// The `kmem_cache_destroy` probe while registered (null otherwise).
    destroy: AtomicPtr<c_void>,
}

// SAFETY: tracepoints are static kernel objects; the pointers are only passed back to the
// tracepoint API.
unsafe impl Send for SlabTracepoints {}

impl SlabTracepoints {
    /// Looks the tracepoints up among the kernel's; None unless all four exist.
    pub(crate) fn find() -> Option<Self> {
        let mut points = [core::ptr::null_mut(); 4];
        for (point, name) in points.iter_mut().zip(TRACEPOINT_NAMES) {
            *point = lookup::find_tracepoint(name)?;
        }
        Some(Self {
            points,
            bulk: AtomicPtr::new(core::ptr::null_mut()),
            destroy: AtomicPtr::new(core::ptr::null_mut()),
        })
    }

    fn probes() -> [*mut c_void; 4] {
        [
            probe_kfree as *mut c_void,
            probe_kmem_cache_free as *mut c_void,
            probe_kmem_cache_alloc as *mut c_void,
            probe_kmalloc as *mut c_void,
        ]
    }

    /// Attaches the probes with `session` as their data. On failure, nothing stays attached.
    ///
    /// The free probes are attached, and every CPU is past any tracepoint call that began
    /// before, ahead of the allocation probes: an object whose allocation is recorded then
    /// always has its free recorded too. The other order loses the frees of objects allocated
    /// in between, which then look live forever.
    ///
    /// # Safety
    /// `session` must stay valid until `unregister` with the same pointer has returned.
    pub(crate) unsafe fn register(&self, session: *const Session) -> Result {
        let data = session.cast_mut().cast::<c_void>();
        // SAFETY: process context; `data` outlives the probe (see above).
        let destroy = unsafe { ffi::dprof_shim_destroy_register(data) };
        if (destroy as usize) >= (-4095isize) as usize || destroy.is_null() {
            pr_info!("no probe on kmem_cache_destroy: a cache created at a destroyed one's address keeps its name\n");
        } else {
            self.destroy.store(destroy, Ordering::Relaxed);
        }
        for (i, (&tp, probe)) in self.points.iter().zip(Self::probes()).enumerate() {
            if i == FREE_TRACEPOINTS {
                // Process context; `data` outlives the probes (see above).
                self.register_bulk_free(data);
                // SAFETY: process context.
                unsafe { ffi::dprof_shim_tracepoint_sync() };
            }
            // SAFETY: `tp` is a kernel tracepoint; `probe` has the tracepoint's prototype with
            // `void *data` first.
            let ret = unsafe { ffi::tracepoint_probe_register(tp, probe, data) };
            if ret != 0 {
                for (&tp, probe) in self.points.iter().zip(Self::probes()).take(i) {
                    // SAFETY: registered just above with the same arguments.
                    unsafe { ffi::tracepoint_probe_unregister(tp, probe, data) };
                }
                self.unregister_bulk(false);
                self.unregister_destroy();
                // SAFETY: process context.
                unsafe { ffi::dprof_shim_tracepoint_sync() };
                return Err(Error::from_errno(ret));
            }
        }
        let bulk = self.bulk.load(Ordering::Relaxed);
        if !bulk.is_null() {
            // SAFETY: process context; `bulk` came from dprof_shim_bulk_free_register.
            let ret = unsafe { ffi::dprof_shim_bulk_alloc_register(bulk) };
            if ret != 0 {
                pr_info!("no probe on kmem_cache_alloc_bulk ({ret}): bulk allocations are not recorded\n");
                self.unregister_bulk(false);
            }
        }
        Ok(())
    }

    /// Attaches the bulk free probe; without it (no such function, kprobes refused), bulk
    /// objects are left out, as before, and the kernel log says so.
    fn register_bulk_free(&self, data: *mut c_void) {
        // SAFETY: process context; the caller keeps `data` alive until `unregister`.
        let bulk = unsafe { ffi::dprof_shim_bulk_free_register(data) };
        if (bulk as usize) >= (-4095isize) as usize || bulk.is_null() {
            pr_info!("no probe on kmem_cache_free_bulk: bulk frees are not recorded\n");
            return;
        }
        self.bulk.store(bulk, Ordering::Relaxed);
    }

    /// Detaches the `kmem_cache_destroy` probe, if attached.
    fn unregister_destroy(&self) {
        let destroy = self.destroy.swap(core::ptr::null_mut(), Ordering::Relaxed);
        if !destroy.is_null() {
            // SAFETY: registered by `register`; waits for running handlers.
            unsafe { ffi::dprof_shim_destroy_unregister(destroy) };
        }
    }

    /// Detaches the bulk probes: the allocation's first when `with_alloc`, then the free's.
    fn unregister_bulk(&self, with_alloc: bool) {
        let bulk = self.bulk.swap(core::ptr::null_mut(), Ordering::Relaxed);
        if bulk.is_null() {
            return;
        }
        if with_alloc {
            // SAFETY: registered by `register` on these probes.
            unsafe { ffi::dprof_shim_bulk_alloc_unregister(bulk) };
        }
        // SAFETY: registered by `register_bulk_free`; waits for running handlers.
        unsafe { ffi::dprof_shim_bulk_free_unregister(bulk) };
    }

    /// Detaches the probes and waits until none can still be running, so `session` may be
    /// freed afterwards. The allocation probes go first, and are past, before the free
    /// probes: the mirror of [`SlabTracepoints::register`].
    ///
    /// # Safety
    /// The probes must have been registered with `session`.
    pub(crate) unsafe fn unregister(&self, session: *const Session) {
        let data = session.cast_mut().cast::<c_void>();
        let bulk = self.bulk.load(Ordering::Relaxed);
        if !bulk.is_null() {
            // SAFETY: registered by `register` (which cleared `bulk` had this failed).
            unsafe { ffi::dprof_shim_bulk_alloc_unregister(bulk) };
        }
        for (i, (&tp, probe)) in self.points.iter().zip(Self::probes()).enumerate().rev() {
            // SAFETY: registered by `register` with the same arguments.
            unsafe { ffi::tracepoint_probe_unregister(tp, probe, data) };
            if i == FREE_TRACEPOINTS {
                // SAFETY: process context.
                unsafe { ffi::dprof_shim_tracepoint_sync() };
                self.unregister_bulk(false);
            }
        }
        self.unregister_destroy();
        // SAFETY: process context; waits for probes in flight on every CPU.
        unsafe { ffi::dprof_shim_tracepoint_sync() };
    }
}

// The probes below run inside the kmem tracepoints: any context, preemption off, and they must
// not allocate (that would recurse into the tracepoints). `data` is the registered Session.

/// ZERO_SIZE_PTR is 16: kfree() traces NULL and ZERO_SIZE_PTR before it ignores them.
fn is_zero_or_null(ptr: *const c_void) -> bool {
    (ptr as usize) <= 16
}

/// The `kmem_cache_alloc` tracepoint's probe.
///
/// # Safety
/// `data` must be the live [`Session`] the probe was registered with; `cache` the live cache
/// of `ptr`.
unsafe extern "C" fn probe_kmem_cache_alloc(
    data: *mut c_void,
    call_site: c_ulong,
    ptr: *const c_void,
    cache: *const KmemCache,
    gfp: u32,
    node: c_int,
) {
    if ptr.is_null() {
        return; // a failed allocation
    }
    // SAFETY: `data` is the Session registered with this probe (see SlabTracepoints::register).
    let session = unsafe { &*data.cast::<Session>() };
    session.describe_cache(cache, abi::CACHE_ORIGIN_SEEN);
    // SAFETY: `cache` is the live cache the object was just allocated from.
    let fields = unsafe { ffi::cache_fields(cache) };
    session.emit_alloc(&abi::Alloc {
        ptr: ptr as u64,
        call_site: call_site as u64,
        cache: cache as u64,
        bytes_req: fields.object_size,
        bytes_alloc: fields.size,
        gfp,
        node,
        flags: 0,
    });
}

/// The `kmalloc` tracepoint's probe.
///
/// # Safety
/// `data` must be the live [`Session`] the probe was registered with; `ptr` a live object.
unsafe extern "C" fn probe_kmalloc(
    data: *mut c_void,
    call_site: c_ulong,
    ptr: *const c_void,
    bytes_req: usize,
    bytes_alloc: usize,
    gfp: u32,
    node: c_int,
) {
    if is_zero_or_null(ptr) {
        return; // failed, or a zero-size request
    }
    // SAFETY: `data` is the registered Session.
    let session = unsafe { &*data.cast::<Session>() };
    // SAFETY: `ptr` is a live allocation (the tracepoint fires after it is handed out).
    let cache = unsafe { ffi::dprof_shim_cache_of(ptr) };
    session.describe_cache(cache, abi::CACHE_ORIGIN_SEEN);
    session.emit_alloc(&abi::Alloc {
        ptr: ptr as u64,
        call_site: call_site as u64,
        cache: cache as u64,
        bytes_req: u32::try_from(bytes_req).unwrap_or(u32::MAX),
        bytes_alloc: u32::try_from(bytes_alloc).unwrap_or(u32::MAX),
        gfp,
        node,
        flags: abi::ALLOC_KMALLOC,
    });
}

/// The `kfree` tracepoint's probe.
///
/// # Safety
/// `data` must be the live [`Session`] the probe was registered with; `ptr` an object not
/// yet freed.
unsafe extern "C" fn probe_kfree(data: *mut c_void, call_site: c_ulong, ptr: *const c_void) {
    if is_zero_or_null(ptr) {
        return;
    }
    // SAFETY: `data` is the registered Session.
    let session = unsafe { &*data.cast::<Session>() };
    // SAFETY: kfree's tracepoint fires before the object is released, so it is still live.
    let cache = unsafe { ffi::dprof_shim_cache_of(ptr) };
    session.describe_cache(cache, abi::CACHE_ORIGIN_SEEN);
    session.emit_free(&abi::Free {
        ptr: ptr as u64,
        call_site: call_site as u64,
        cache: cache as u64,
        flags: abi::FREE_KFREE,
    });
}

/// Objects of a bulk allocation (`kmem_cache_alloc_bulk`): the kretprobe's return handler,
/// preemption off. `cache` is the cache asked for; `ptrs` holds `n` objects.
///
/// # Safety
/// `data` must be the live [`Session`] the probes were registered with; `ptrs` the caller's
/// array of `n` objects just allocated from `cache`.
#[no_mangle]
unsafe extern "C" fn dprof_rs_bulk_alloc(
    data: *mut c_void,
    cache: *const KmemCache,
    ptrs: *const *const c_void,
    n: usize,
    call_site: c_ulong,
    gfp: u32,
) {
    // SAFETY: `data` is the registered Session.
    let session = unsafe { &*data.cast::<Session>() };
    session.describe_cache(cache, abi::CACHE_ORIGIN_SEEN);
    // SAFETY: `cache` is the live cache the objects were just allocated from.
    let fields = unsafe { ffi::cache_fields(cache) };
    for i in 0..n {
        // SAFETY: the allocation filled `n` entries of the caller's array.
        let ptr = unsafe { *ptrs.add(i) };
        if ptr.is_null() {
            continue;
        }
        session.emit_alloc(&abi::Alloc {
            ptr: ptr as u64,
            call_site: call_site as u64,
            cache: cache as u64,
            bytes_req: fields.object_size,
            bytes_alloc: fields.size,
            gfp,
            node: -1,
            flags: abi::ALLOC_BULK,
        });
    }
}

/// Objects of a bulk free (`kmem_cache_free_bulk`; `kfree_bulk` passes no cache): the
/// kprobe's handler at the function's entry, while every object is live. Preemption off.
///
/// # Safety
/// `data` must be the live [`Session`] the probes were registered with; `ptrs` the caller's
/// array of `n` objects about to be freed (NULL entries are skipped).
#[no_mangle]
unsafe extern "C" fn dprof_rs_bulk_free(
    data: *mut c_void,
    cache: *const KmemCache,
    ptrs: *const *const c_void,
    n: usize,
    call_site: c_ulong,
) {
    // SAFETY: `data` is the registered Session.
    let session = unsafe { &*data.cast::<Session>() };
    for i in 0..n {
        // SAFETY: the caller's array holds `n` entries.
        let ptr = unsafe { *ptrs.add(i) };
        if is_zero_or_null(ptr) {
            continue;
        }
        let owner = if cache.is_null() {
            // SAFETY: the object is live until the free proceeds past this probe.
            unsafe { ffi::dprof_shim_cache_of(ptr) }
        } else {
            cache
        };
        session.describe_cache(owner, abi::CACHE_ORIGIN_SEEN);
        session.emit_free(&abi::Free {
            ptr: ptr as u64,
            call_site: call_site as u64,
            cache: owner as u64,
            flags: abi::FREE_BULK,
        });
    }
}

/// The `kmem_cache_free` tracepoint's probe.
///
/// # Safety
/// `data` must be the live [`Session`] the probe was registered with; `cache` the live cache
/// of `ptr`.
unsafe extern "C" fn probe_kmem_cache_free(
    data: *mut c_void,
    call_site: c_ulong,
    ptr: *const c_void,
    cache: *const KmemCache,
) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: `data` is the registered Session.
    let session = unsafe { &*data.cast::<Session>() };
    session.describe_cache(cache, abi::CACHE_ORIGIN_SEEN);
    session.emit_free(&abi::Free {
        ptr: ptr as u64,
        call_site: call_site as u64,
        cache: cache as u64,
        flags: 0,
    });
}

/// The `kmem_cache_destroy` probe: the cache is forgotten, so that a cache created later at
/// its address gets its own CacheInfo and is no history target of the plan. Process context
/// (the function may sleep).
///
/// # Safety
/// `data` must be the live [`Session`] the probe was registered with.
#[no_mangle]
unsafe extern "C" fn dprof_rs_cache_destroy(data: *mut c_void, cache: *const KmemCache) {
    // SAFETY: `data` is the registered Session.
    let session = unsafe { &*data.cast::<Session>() };
    if !cache.is_null() {
        session.seen.forget(cache as u64);
        if let Some(histories) = session.histories() {
            histories.forget_cache(cache as u64);
        }
    }
}
