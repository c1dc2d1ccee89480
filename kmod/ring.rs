//! Per-CPU record rings.
//!
//! One ring per CPU, written only on its own CPU but from any context: process, softirq,
//! hardirq and NMI may nest on top of each other. There are no locks: a writer reserves space
//! by compare-and-swap on `head`, fills it, and the outermost writer on the CPU publishes
//! `committed` once every nested writer has finished (the scheme of perf's ring buffer,
//! kernel/events/ring_buffer.c: perf_output_put_handle). The reader, in process context on any
//! CPU, copies whole records between `tail` and `committed` and then advances `tail`.
//!
//! A record that does not fit is dropped and counted in `lost`; the reader turns the count into
//! a `Lost` record. Nothing is ever half-written into the readable part of the ring. Positions
//! are free-running byte counters; a record may wrap around the end of the buffer.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kernel::ffi::{c_ulong, c_void};
use kernel::prelude::*;
use kernel::uaccess::UserSliceWriter;

use crate::abi;
use crate::ffi;

/// One CPU's ring. Aligned to a cache line so that rings of different CPUs never share one.
#[repr(align(64))]
pub(crate) struct Ring {
    buf: *mut u8,
    capacity: u64,
    /// Reserved up to here (writers on this CPU).
    head: AtomicU64,
    /// Writers on this CPU currently between reserve and publish.
    nest: AtomicU32,
    /// Readable up to here.
    committed: AtomicU64,
    /// Read up to here (the reader).
    tail: AtomicU64,
    written: AtomicU64,
    lost: AtomicU64,
    /// Part of `lost` already reported in a Lost record (the reader).
    lost_reported: AtomicU64,
}

// SAFETY: `buf` is owned by the ring (vfree on drop). Writers touch only the reserved bytes
// between `head` values they won by CAS on the ring's own CPU; the reader touches only bytes
// between `tail` and `committed`, which no writer may reuse until `tail` moves past them.
unsafe impl Send for Ring {}
// SAFETY: see `Send`; all shared state is atomic or partitioned as described.
unsafe impl Sync for Ring {}

impl Ring {
    /// A zeroed ring of `capacity` bytes (a power of two, validated by the caller).
    pub(crate) fn new(capacity: u32) -> Result<Self> {
        // SAFETY: vzalloc_noprof may sleep; we are in process context (ioctl).
        let buf = unsafe { ffi::vzalloc_noprof(capacity as c_ulong) }.cast::<u8>();
        if buf.is_null() {
            return Err(ENOMEM);
        }
        Ok(Self {
            buf,
            capacity: u64::from(capacity),
            head: AtomicU64::new(0),
            nest: AtomicU32::new(0),
            committed: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            written: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            lost_reported: AtomicU64::new(0),
        })
    }

    /// Records written so far.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Records dropped so far.
    pub(crate) fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Bytes written and not yet read.
    pub(crate) fn pending(&self) -> u64 {
        let committed = self.committed.load(Ordering::Acquire);
        committed.wrapping_sub(self.tail.load(Ordering::Acquire))
    }

    /// Appends one record (header built here, `payload` after it). Must run on the CPU that
    /// owns this ring, with preemption disabled; safe from NMI. Returns false when the record
    /// was dropped for lack of space.
    pub(crate) fn write(&self, cpu: u32, kind: abi::RecordKind, payload: &[u8]) -> bool {
        let size = (abi::RECORD_HEADER_SIZE + payload.len()) as u64;
        let time_ns = ffi::now_ns();
        self.nest.fetch_add(1, Ordering::SeqCst);
        let mut head = self.head.load(Ordering::SeqCst);
        let reserved = loop {
            let tail = self.tail.load(Ordering::Acquire);
            if head.wrapping_sub(tail).wrapping_add(size) > self.capacity {
                break false;
            }
            match self.head.compare_exchange(
                head,
                head.wrapping_add(size),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break true,
                // Only a nested writer on this CPU can have moved head: retry after it.
                Err(now) => head = now,
            }
        };
        if reserved {
            let mut header = [0u8; abi::RECORD_HEADER_SIZE];
            abi::RecordHeader {
                kind: kind as u16,
                size: size as u16,
                cpu,
                time_ns,
            }
            .encode(&mut header);
            self.copy_in(head, &header);
            self.copy_in(head.wrapping_add(abi::RECORD_HEADER_SIZE as u64), payload);
            self.written.fetch_add(1, Ordering::Relaxed);
        } else {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        self.publish();
        reserved
    }

    /// Ends a write: only the outermost writer on the CPU moves `committed`, and it re-checks
    /// `head` afterwards in case a nested writer reserved space in between.
    fn publish(&self) {
        loop {
            let head = self.head.load(Ordering::SeqCst);
            if self.nest.load(Ordering::SeqCst) > 1 {
                self.nest.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            // Release: the record bytes are visible before the position that exposes them.
            self.committed.store(head, Ordering::Release);
            self.nest.fetch_sub(1, Ordering::SeqCst);
            if self.head.load(Ordering::SeqCst) == head {
                return;
            }
            self.nest.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn index(&self, pos: u64) -> usize {
        (pos & (self.capacity - 1)) as usize
    }

    /// Copies `bytes` into the ring at `pos`, wrapping at the end.
    fn copy_in(&self, pos: u64, bytes: &[u8]) {
        let start = self.index(pos);
        let first = bytes.len().min(self.capacity as usize - start);
        // SAFETY: [start, start + first) and [0, len - first) lie inside the buffer of
        // `capacity` bytes, and belong to a reservation this writer holds.
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf.add(start), first);
            core::ptr::copy_nonoverlapping(
                bytes.as_ptr().add(first),
                self.buf,
                bytes.len() - first,
            );
        }
    }

    /// The two pieces of the ring holding `len` bytes at `pos`.
    ///
    /// # Safety
    /// The bytes must be committed and not yet released by the reader (between `tail` and
    /// `committed`), so that no writer modifies them while the slices live.
    unsafe fn committed_slices(&self, pos: u64, len: usize) -> (&[u8], &[u8]) {
        let start = self.index(pos);
        let first = len.min(self.capacity as usize - start);
        // SAFETY: in bounds as in `copy_in`; not written concurrently per the contract.
        unsafe {
            (
                core::slice::from_raw_parts(self.buf.add(start), first),
                core::slice::from_raw_parts(self.buf, len - first),
            )
        }
    }

    /// Copies whole records to `out` until the ring is empty or the next record does not fit in
    /// `out`'s remaining length. Reader only (callers serialise readers). Returns bytes copied;
    /// an error only when nothing at all could be copied.
    pub(crate) fn drain(&self, out: &mut UserSliceWriter) -> Result<usize> {
        let committed = self.committed.load(Ordering::Acquire);
        let mut tail = self.tail.load(Ordering::Relaxed);
        let mut copied = 0usize;
        while tail != committed {
            let available = committed.wrapping_sub(tail);
            let mut header_bytes = [0u8; abi::RECORD_HEADER_SIZE];
            // SAFETY: a committed record starts at `tail` and has at least a header.
            let (a, b) = unsafe { self.committed_slices(tail, abi::RECORD_HEADER_SIZE) };
            header_bytes[..a.len()].copy_from_slice(a);
            header_bytes[a.len()..].copy_from_slice(b);
            let size = match abi::RecordHeader::decode(&header_bytes) {
                Ok(h) => u64::from(h.size),
                Err(_) => 0,
            };
            if size < abi::RECORD_HEADER_SIZE as u64 || size > available {
                // Cannot happen unless memory was corrupted; drop the rest rather than hand
                // out garbage, and count it.
                pr_err!(
                    "corrupt ring position {}, dropping {} bytes\n",
                    tail,
                    available
                );
                self.lost.fetch_add(1, Ordering::Relaxed);
                tail = committed;
                break;
            }
            if size as usize > out.len() {
                break;
            }
            // SAFETY: the whole record is committed and not yet released.
            let (a, b) = unsafe { self.committed_slices(tail, size as usize) };
            let result = out.write_slice(a).and_then(|()| out.write_slice(b));
            if let Err(e) = result {
                if copied == 0 {
                    return Err(e);
                }
                break;
            }
            tail = tail.wrapping_add(size);
            copied += size as usize;
        }
        // Release: our reads of the bytes happen before writers may reuse them.
        self.tail.store(tail, Ordering::Release);
        Ok(copied)
    }

    /// Writes a Lost record to `out` for drops not reported yet, if any and if it fits.
    pub(crate) fn report_lost(&self, cpu: u32, out: &mut UserSliceWriter) -> Result<usize> {
        let lost = self.lost.load(Ordering::Acquire);
        let reported = self.lost_reported.load(Ordering::Relaxed);
        let size = abi::RecordKind::Lost.record_size();
        if lost == reported || out.len() < size {
            return Ok(0);
        }
        let mut record = [0u8; abi::RecordKind::Lost.record_size()];
        let mut header = [0u8; abi::RECORD_HEADER_SIZE];
        abi::RecordHeader {
            kind: abi::RecordKind::Lost as u16,
            size: size as u16,
            cpu,
            time_ns: ffi::now_ns(),
        }
        .encode(&mut header);
        let mut payload = [0u8; abi::Lost::SIZE];
        abi::Lost {
            count: lost.wrapping_sub(reported),
        }
        .encode(&mut payload);
        record[..abi::RECORD_HEADER_SIZE].copy_from_slice(&header);
        record[abi::RECORD_HEADER_SIZE..].copy_from_slice(&payload);
        out.write_slice(&record)?;
        self.lost_reported.store(lost, Ordering::Relaxed);
        Ok(size)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `buf` came from vzalloc and nobody references it any more: rings are dropped
        // only after the probes that write them are unregistered and synchronised.
        unsafe { ffi::vfree(self.buf.cast::<c_void>()) };
    }
}
