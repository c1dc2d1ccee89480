//! Live kernel memory for the perf backend: the instruction bytes at each sampled ip (what the
//! module copies in its handler) and the per-CPU offsets. From `/proc/kcore` where the kernel
//! has it, else through BPF ([`super::bpf`]). Pages are read once and kept: the samples of a
//! run land on a few thousand distinct code pages.

use std::collections::HashMap;
use std::path::Path;

use dprof_abi::SAMPLE_INSN_BYTES;

use super::bpf::{BpfError, BpfReader, CHUNK};
use crate::kcore::{Kcore, KcoreError};

/// Where kernel memory is read from.
#[derive(Debug)]
enum Source {
    Kcore(Kcore),
    Bpf(BpfReader),
}

/// Kernel memory, read a page at a time and cached.
#[derive(Debug)]
pub(crate) struct KernelMemory {
    source: Source,
    pages: HashMap<u64, Option<Box<[u8; CHUNK]>>>,
}

/// Why kernel memory cannot be read at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot read kernel memory: {kcore}; and through BPF: {bpf}")]
pub struct NoKernelMemory {
    kcore: KcoreError,
    #[source]
    bpf: BpfError,
}

impl KernelMemory {
    /// `kcore` when it opens, else the BPF reader.
    pub(crate) fn open(kcore: &Path) -> Result<Self, NoKernelMemory> {
        let source = match Kcore::open(kcore) {
            Ok(k) => Source::Kcore(k),
            Err(kcore) => {
                Source::Bpf(BpfReader::load().map_err(|bpf| NoKernelMemory { kcore, bpf })?)
            }
        };
        Ok(Self {
            source,
            pages: HashMap::new(),
        })
    }

    /// What it reads from, for the person.
    pub(crate) fn describe(&self) -> String {
        match &self.source {
            Source::Kcore(k) => k.path().display().to_string(),
            Source::Bpf(_) => {
                "BPF (bpf_probe_read_kernel; this kernel has no /proc/kcore)".to_owned()
            }
        }
    }

    fn page(&mut self, page: u64) -> Option<&[u8; CHUNK]> {
        let source = &mut self.source;
        self.pages
            .entry(page)
            .or_insert_with(|| match source {
                Source::Kcore(k) => k
                    .read(page, CHUNK)
                    .and_then(|v| <Box<[u8; CHUNK]>>::try_from(v.into_boxed_slice()).ok()),
                Source::Bpf(b) => b.read_chunk(page).map(|p| Box::new(*p)),
            })
            .as_deref()
    }

    /// Up to `out.len()` bytes from `address`, stopping at the first page that cannot be
    /// read; returns how many were copied.
    pub(crate) fn read(&mut self, address: u64, out: &mut [u8]) -> usize {
        let mut done = 0;
        while done < out.len() {
            let at = address.wrapping_add(done as u64);
            let page = at & !(CHUNK as u64 - 1);
            let Some(bytes) = self.page(page) else { break };
            let from = (at - page) as usize;
            let n = (CHUNK - from).min(out.len() - done);
            out[done..done + n].copy_from_slice(&bytes[from..from + n]);
            done += n;
        }
        done
    }

    /// The instruction bytes at `ip` as an access sample keeps them, and how many are valid.
    pub(crate) fn insn(&mut self, ip: u64) -> ([u8; SAMPLE_INSN_BYTES], u8) {
        let mut insn = [0u8; SAMPLE_INSN_BYTES];
        let n = self.read(ip, &mut insn);
        (insn, n as u8)
    }

    /// The u64 at `address`, from the page cache: for what does not change during a run.
    pub(crate) fn u64_at(&mut self, address: u64) -> Option<u64> {
        let mut buf = [0u8; 8];
        (self.read(address, &mut buf) == 8).then(|| u64::from_le_bytes(buf))
    }

    /// The u64 at `address` as it is now, bypassing the page cache: for data the kernel
    /// changes (a `struct page` whose slab is freed and reused).
    pub(crate) fn u64_now(&mut self, address: u64) -> Option<u64> {
        let bytes = match &mut self.source {
            Source::Kcore(k) => k.read(address, 8)?,
            Source::Bpf(b) => {
                let page = address & !(CHUNK as u64 - 1);
                let from = (address - page) as usize;
                b.read_chunk(page)?.get(from..from + 8)?.to_vec()
            }
        };
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// The NUL-terminated string at `address`, at most `max` bytes, from the page cache.
    pub(crate) fn c_string(&mut self, address: u64, max: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; max];
        let n = self.read(address, &mut buf);
        let end = buf[..n].iter().position(|&b| b == 0)?;
        buf.truncate(end);
        Some(buf)
    }
}
