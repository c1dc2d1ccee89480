//! The page allocator's allocations and frees, from its tracepoints (`mm_page_alloc`,
//! `mm_page_free`, `mm_page_free_batched`), as Alloc and Free records flagged
//! `ALLOC_PAGES`/`FREE_PAGES`. The tracepoint names no call site: the probe walks its call
//! chain and takes the first return address past the allocator's code, whose ranges userland
//! sets with IOC_PAGE_SITES ([`abi::page_site`]). Pages that the slab allocator or a large
//! kmalloc takes are left to those events. Every page free is recorded; the analysis ends an
//! object only where one was recorded.

use kernel::ffi::{c_int, c_uint, c_void};
use kernel::prelude::*;

use crate::abi;
use crate::ffi::{self, Tracepoint};
use crate::lookup;
use crate::session::Session;

/// Names of the page allocator's tracepoints, in the order of [`PageTracepoints::probes`].
const TRACEPOINT_NAMES: [&[u8]; 3] = [b"mm_page_free", b"mm_page_free_batched", b"mm_page_alloc"];

/// The page allocator's tracepoints, found once at module load.
pub(crate) struct PageTracepoints {
    points: [*mut Tracepoint; 3],
}

// SAFETY: tracepoints are static kernel objects; the pointers are only passed back to the
// tracepoint API.
unsafe impl Send for PageTracepoints {}

impl PageTracepoints {
    /// Looks the tracepoints up; None unless all three exist.
    pub(crate) fn find() -> Option<Self> {
        let mut points = [core::ptr::null_mut(); 3];
        for (point, name) in points.iter_mut().zip(TRACEPOINT_NAMES) {
            *point = lookup::find_tracepoint(name)?;
        }
        Some(Self { points })
    }

    fn probes() -> [*mut c_void; 3] {
        [
            probe_mm_page_free as *mut c_void,
            probe_mm_page_free_batched as *mut c_void,
            probe_mm_page_alloc as *mut c_void,
        ]
    }

    /// Attaches the probes, frees first, with `session` as their data. On failure nothing
    /// stays attached.
    ///
    /// # Safety
    /// `session` must have page sites and stay valid until `unregister` with the same
    /// pointer has returned. Process context.
    pub(crate) unsafe fn register(&self, session: *const Session) -> Result {
        let data = session.cast_mut().cast::<c_void>();
        for (i, (&tp, probe)) in self.points.iter().zip(Self::probes()).enumerate() {
            // SAFETY: `tp` is a kernel tracepoint; `probe` has its prototype with `void *data`
            // first.
            let ret = unsafe { ffi::tracepoint_probe_register(tp, probe, data) };
            if ret != 0 {
                for (&tp, probe) in self.points.iter().zip(Self::probes()).take(i) {
                    // SAFETY: registered just above with the same arguments.
                    unsafe { ffi::tracepoint_probe_unregister(tp, probe, data) };
                }
                // SAFETY: process context.
                unsafe { ffi::dprof_shim_tracepoint_sync() };
                return Err(Error::from_errno(ret));
            }
        }
        Ok(())
    }

    /// Detaches the probes and waits until none can still be running.
    ///
    /// # Safety
    /// The probes must have been registered with `session`. Process context.
    pub(crate) unsafe fn unregister(&self, session: *const Session) {
        let data = session.cast_mut().cast::<c_void>();
        for (&tp, probe) in self.points.iter().zip(Self::probes()).rev() {
            // SAFETY: registered by `register` with the same arguments.
            unsafe { ffi::tracepoint_probe_unregister(tp, probe, data) };
        }
        // SAFETY: process context; waits for probes in flight on every CPU.
        unsafe { ffi::dprof_shim_tracepoint_sync() };
    }
}

// The probes run inside the page allocator: any context but NMI, and they must not allocate.

/// Bytes of a page.
const PAGE_SIZE: u64 = 4096;
/// Orders above this are not recorded (x86-64's largest allocation is 1 GiB, order 18).
const MAX_ORDER: c_uint = 18;

/// The `mm_page_alloc` tracepoint's probe.
///
/// # Safety
/// `data` must be the live [`Session`] the probe was registered with, which has page sites;
/// `page` a page just allocated, or null.
unsafe extern "C" fn probe_mm_page_alloc(
    data: *mut c_void,
    page: *mut c_void,
    order: c_uint,
    gfp: c_uint,
    _migratetype: c_int,
) {
    if page.is_null() || order > MAX_ORDER {
        return;
    }
    // SAFETY: `data` is the Session registered with this probe (see PageTracepoints::register).
    let session = unsafe { &*data.cast::<Session>() };
    let Some(sites) = session.page_sites() else {
        return;
    };
    let Some(call_site) = sites.site_of_current() else {
        return;
    };
    // SAFETY: `page` is a page the allocator just handed out.
    let ptr = unsafe { ffi::dprof_shim_page_address(page) } as u64;
    if ptr == 0 {
        return;
    }
    let bytes = u32::try_from(PAGE_SIZE << order).unwrap_or(u32::MAX);
    session.emit_alloc(&abi::Alloc {
        ptr,
        call_site,
        cache: 0,
        bytes_req: bytes,
        bytes_alloc: bytes,
        gfp,
        node: -1,
        flags: abi::ALLOC_PAGES,
    });
}

/// A page free, of either free tracepoint.
fn page_freed(data: *mut c_void, page: *mut c_void) {
    if page.is_null() {
        return;
    }
    // SAFETY: `data` is the Session registered with the probe (see PageTracepoints::register).
    let session = unsafe { &*data.cast::<Session>() };
    // SAFETY: `page` is a page being given back, still mapped.
    let ptr = unsafe { ffi::dprof_shim_page_address(page) } as u64;
    if ptr == 0 {
        return;
    }
    session.emit_free(&abi::Free {
        ptr,
        call_site: 0,
        cache: 0,
        flags: abi::FREE_PAGES,
    });
}

/// The `mm_page_free` tracepoint's probe.
///
/// # Safety
/// `data` must be the live [`Session`] the probe was registered with; `page` a page being
/// freed.
unsafe extern "C" fn probe_mm_page_free(data: *mut c_void, page: *mut c_void, _order: c_uint) {
    page_freed(data, page);
}

/// The `mm_page_free_batched` tracepoint's probe.
///
/// # Safety
/// As [`probe_mm_page_free`].
unsafe extern "C" fn probe_mm_page_free_batched(data: *mut c_void, page: *mut c_void) {
    page_freed(data, page);
}
