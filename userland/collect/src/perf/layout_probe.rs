//! What the kernel's own tracepoints show of its memory layout, for kernels whose kallsyms
//! does not locate `page_offset_base` and its siblings (`CONFIG_KALLSYMS_ALL` off, as on
//! most distribution kernels). The collector watches four tracepoints on its own thread while
//! it makes the kernel do three things that fire them, each record pairing an address the
//! layout randomises with a physical page frame or a range:
//! - a 64 KiB `getxattr` buffer: `kvzalloc` takes whole pages from the page allocator
//!   (`kmem:mm_page_alloc`, the frame) and hands back their direct-map address
//!   (`kmem:kmalloc`);
//! - faults on fresh anonymous pages: each folio put on an LRU list
//!   (`pagemap:mm_lru_insertion`) carries its `struct page` address and its frame;
//! - threads alive at once: their stacks come from vmalloc (`vmalloc:alloc_vmap_area`, with
//!   the range searched, whose start is `VMALLOC_START`).

use std::path::Path;
use std::sync::{Arc, RwLock};

use linux_perf_event_reader::{EventRecord, RawData, RawEventRecord, RecordType};

use super::events::{self, Ring};
use super::tracefs::{self, Field, RawRecord};

/// One tracepoint record that says something about the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sighting {
    /// `kmem:mm_page_alloc`: 2^`order` pages from frame `pfn`.
    PagesAllocated { pfn: u64, order: u32 },
    /// `kmem:kmalloc`: `bytes` at `ptr`; a large allocation is whole pages of the direct map.
    Kmalloc { ptr: u64, bytes: u64 },
    /// `pagemap:mm_lru_insertion`: the `struct page` of a folio and its frame.
    LruInsertion { folio: u64, pfn: u64 },
    /// `vmalloc:alloc_vmap_area`: the range a vmap area was looked for in.
    VmapArea { vstart: u64, vend: u64 },
}

/// Bytes of the `getxattr` buffer: above `KMALLOC_MAX_CACHE_SIZE`, so whole pages.
const LARGE_BUFFER: usize = 64 << 10;
/// Anonymous pages faulted in: several times a per-CPU LRU batch (31 folios), so that batches
/// drain on this thread.
const ANON_PAGES: usize = 256;
/// Threads alive at once: more than the per-CPU cache of freed stacks holds (two).
const THREADS: usize = 6;

/// The sightings, in time order, from the tracepoints under `root`'s tracefs.
///
/// # Errors
/// Why the tracepoints cannot be watched: no tracefs, a missing event, perf refused.
pub(crate) fn watch(root: &Path) -> Result<Vec<Sighting>, String> {
    let (tracefs, mounted) = tracefs::locate(root).map_err(|e| e.to_string())?;
    let watched = watch_under(&tracefs);
    if mounted {
        // Leave the machine as it was found.
        let _ = nix::mount::umount(&tracefs);
    }
    watched
}

/// What each tracepoint's record holds.
enum Kind {
    PagesAllocated { pfn: Field, order: Field },
    Kmalloc { ptr: Field, bytes: Field },
    LruInsertion { folio: Field, pfn: Field },
    VmapArea { vstart: Field, vend: Field },
}

impl Kind {
    fn sighting(&self, raw: &RawRecord<'_>) -> Option<Sighting> {
        Some(match self {
            Kind::PagesAllocated { pfn, order } => Sighting::PagesAllocated {
                pfn: raw.unsigned(pfn)?,
                order: u32::try_from(raw.unsigned(order)?).ok()?,
            },
            Kind::Kmalloc { ptr, bytes } => Sighting::Kmalloc {
                ptr: raw.unsigned(ptr)?,
                bytes: raw.unsigned(bytes)?,
            },
            Kind::LruInsertion { folio, pfn } => Sighting::LruInsertion {
                folio: raw.unsigned(folio)?,
                pfn: raw.unsigned(pfn)?,
            },
            Kind::VmapArea { vstart, vend } => Sighting::VmapArea {
                vstart: raw.unsigned(vstart)?,
                vend: raw.unsigned(vend)?,
            },
        })
    }
}

fn watch_under(tracefs: &Path) -> Result<Vec<Sighting>, String> {
    let event = |system: &str, name: &str, a: &str, b: &str| {
        let format = tracefs::format(tracefs, system, name)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("this kernel has no {system}:{name} tracepoint"))?;
        let field = |f: &str| {
            format
                .field(f)
                .cloned()
                .ok_or_else(|| format!("{system}:{name} has no field {f}"))
        };
        Ok::<_, String>((format.id, field(a)?, field(b)?))
    };
    let mut kinds = Vec::new();
    let (id, pfn, order) = event("kmem", "mm_page_alloc", "pfn", "order")?;
    kinds.push((id, Kind::PagesAllocated { pfn, order }));
    let (id, ptr, bytes) = event("kmem", "kmalloc", "ptr", "bytes_alloc")?;
    kinds.push((id, Kind::Kmalloc { ptr, bytes }));
    let (id, folio, pfn) = event("pagemap", "mm_lru_insertion", "folio", "pfn")?;
    kinds.push((id, Kind::LruInsertion { folio, pfn }));
    let (id, vstart, vend) = event("vmalloc", "alloc_vmap_area", "vstart", "vend")?;
    kinds.push((id, Kind::VmapArea { vstart, vend }));

    let refused = |what: &str, e: std::io::Error| format!("perf refused {what}: {e}");
    let mut fds = Vec::new();
    let mut by_id = Vec::new();
    let mut ring = None;
    for (tracepoint, kind) in kinds {
        let attr = events::tracepoint(tracepoint);
        let info = events::parse_info(&attr).map_err(|e| refused("an attribute", e))?;
        let fd = events::open_for_this_thread(&attr).map_err(|e| refused("a tracepoint", e))?;
        let id = events::id(&fd).map_err(|e| refused("an event id", e))?;
        match &ring {
            None => ring = Some(Ring::map(&fd, 1 << 20).map_err(|e| refused("a ring", e))?),
            Some(_) => events::redirect(&fd, &fds[0]).map_err(|e| refused("a ring", e))?,
        }
        fds.push(fd);
        by_id.push((id, kind, info));
    }
    let mut ring = ring.ok_or("no tracepoint to watch")?;
    for fd in &fds {
        events::enable(fd, true).map_err(|e| refused("to start", e))?;
    }
    provoke();
    for fd in &fds {
        events::enable(fd, false).map_err(|e| refused("to stop", e))?;
    }
    let mut seen: Vec<(u64, Sighting)> = Vec::new();
    ring.drain(|record| {
        if RecordType(record.kind) != RecordType::SAMPLE {
            return;
        }
        let Some(id) = record
            .body
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
        else {
            return;
        };
        let Some((_, kind, info)) = by_id.iter().find(|(i, _, _)| *i == id) else {
            return;
        };
        let raw = RawEventRecord::new(
            RecordType(record.kind),
            record.misc,
            RawData::from(record.body),
            *info,
        );
        if let Ok(EventRecord::Sample(s)) = raw.parse() {
            let bytes = s.raw.map(|r| r.as_slice().into_owned()).unwrap_or_default();
            if let Some(sighting) = kind.sighting(&RawRecord(&bytes)) {
                seen.push((s.timestamp.unwrap_or(0), sighting));
            }
        }
    });
    // One ring, one thread: already in time order; sorting keeps that a fact.
    seen.sort_by_key(|(time, _)| *time);
    Ok(seen.into_iter().map(|(_, s)| s).collect())
}

/// Makes the kernel fire the watched tracepoints on this thread.
fn provoke() {
    let mut buffer = vec![0u8; LARGE_BUFFER];
    for _ in 0..3 {
        // SAFETY: NUL-terminated strings and a buffer of the length given. The attribute does
        // not exist; the kernel allocates the buffer before it looks.
        unsafe {
            libc::getxattr(
                c"/".as_ptr(),
                c"user.dprof-layout".as_ptr(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
            );
        }
    }
    fault_anonymous_pages();
    // The threads block on the lock this thread holds, so that all of them are alive at once.
    let gate = Arc::new(RwLock::new(()));
    let held = gate.write().ok();
    let threads: Vec<_> = (0..THREADS)
        .filter_map(|_| {
            let gate = Arc::clone(&gate);
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || drop(gate.read()))
                .ok()
        })
        .collect();
    drop(held);
    for thread in threads {
        let _ = thread.join();
    }
}

/// Faults in fresh anonymous pages, small ones, and gives them back.
fn fault_anonymous_pages() {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let len = page * ANON_PAGES;
    // SAFETY: a fresh private anonymous mapping, touched only within its length and unmapped
    // before return.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return;
        }
        // Small folios: one LRU insertion per page.
        libc::madvise(base, len, libc::MADV_NOHUGEPAGE);
        for i in 0..ANON_PAGES {
            std::ptr::write_volatile(base.cast::<u8>().add(i * page), 1);
        }
        libc::munmap(base, len);
    }
}
