//! Finding kernel objects by name: slab caches (through the shim's walk of the cache list) and
//! tracepoints (`for_each_kernel_tracepoint`), and reading those objects' names.
//!
//! Every name is read through [`kernel_name`], with one limit, [`KERNEL_NAME_MAX`]: the
//! CacheInfo records and the lookups see the same bytes.

use kernel::ffi::{c_char, c_void};
use kernel::prelude::*;

use crate::ffi::{self, KmemCache, Tracepoint};

/// Longest kernel object name read, in bytes. Slab cache names and tracepoint names are far
/// shorter; a longer one is cut here, and no name looked up (at most
/// `abi::CACHE_NAME_BYTES` or `abi::PROGRESS_NAME_BYTES` bytes) can match a cut one.
pub(crate) const KERNEL_NAME_MAX: usize = 255;

/// The bytes of a kernel object's NUL-terminated name, at most [`KERNEL_NAME_MAX`] of them.
///
/// # Safety
/// `name` is null or points to a NUL-terminated string that outlives the returned slice.
pub(crate) unsafe fn kernel_name<'a>(name: *const c_char) -> &'a [u8] {
    if name.is_null() {
        return &[];
    }
    let mut len = 0;
    // SAFETY: reads up to the NUL of a valid string, bounded by KERNEL_NAME_MAX.
    while len < KERNEL_NAME_MAX && unsafe { *name.add(len) } != 0 {
        len += 1;
    }
    // SAFETY: the `len` bytes just read are part of the string.
    unsafe { core::slice::from_raw_parts(name.cast::<u8>(), len) }
}

/// A slab cache found by name.
pub(crate) struct FoundCache {
    pub(crate) cache: *const KmemCache,
    pub(crate) object_size: u32,
}

struct CacheSearch<'a> {
    name: &'a [u8],
    found: Option<FoundCache>,
}

/// # Safety
/// `data` must point to a live [`CacheSearch`]; `cache` must be a live cache.
unsafe extern "C" fn match_cache(cache: *const KmemCache, data: *mut c_void) {
    // SAFETY: `data` is the CacheSearch of `find_cache`, live during the walk.
    let search = unsafe { &mut *data.cast::<CacheSearch<'_>>() };
    if search.found.is_some() {
        return;
    }
    // SAFETY: the walk hands out live caches (it holds slab_mutex).
    let fields = unsafe { ffi::cache_fields(cache) };
    // SAFETY: a cache's name lives as long as the cache.
    if unsafe { kernel_name(fields.name) } == search.name {
        search.found = Some(FoundCache {
            cache,
            object_size: fields.object_size,
        });
    }
}

/// The slab cache named `name`, the first one when several are (process context: the walk
/// takes slab_mutex). ENOTSUPP when caches cannot be listed, ENOENT when none has that name.
pub(crate) fn find_cache(name: &[u8]) -> Result<FoundCache> {
    let mut search = CacheSearch { name, found: None };
    // SAFETY: the callback only writes into `search`, which outlives the walk.
    let walked = unsafe {
        ffi::dprof_shim_walk_caches(
            match_cache,
            core::ptr::from_mut(&mut search).cast::<c_void>(),
        )
    };
    if walked < 0 {
        return Err(ENOTSUPP);
    }
    search.found.ok_or(ENOENT)
}

struct TracepointSearch<'a> {
    name: &'a [u8],
    found: *mut Tracepoint,
}

/// # Safety
/// `data` must point to a live [`TracepointSearch`]; `tp` must be a live tracepoint.
unsafe extern "C" fn match_tracepoint(tp: *mut Tracepoint, data: *mut c_void) {
    // SAFETY: `data` is the TracepointSearch of `find_tracepoint`, live during the walk.
    let search = unsafe { &mut *data.cast::<TracepointSearch<'_>>() };
    // SAFETY: `tp` is a live kernel tracepoint with a NUL-terminated static name.
    if unsafe { kernel_name(ffi::dprof_shim_tracepoint_name(tp)) } == search.name {
        search.found = tp;
    }
}

/// The kernel's (built-in) tracepoint named `name`, if there is one.
pub(crate) fn find_tracepoint(name: &[u8]) -> Option<*mut Tracepoint> {
    let mut search = TracepointSearch {
        name,
        found: core::ptr::null_mut(),
    };
    // SAFETY: the callback only writes into `search`, which outlives the call.
    unsafe {
        ffi::for_each_kernel_tracepoint(
            match_tracepoint,
            core::ptr::from_mut(&mut search).cast::<c_void>(),
        );
    }
    (!search.found.is_null()).then_some(search.found)
}
