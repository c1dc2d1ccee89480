//! What owns the direct-map pages that samples touch, read while the collector writes the
//! records: a sampled address in the direct map that no traced allocation explains is an
//! object allocated before collection started, or page memory; its page's owner
//! ([`crate::perf::PageReader`]) says which.
//!
//! Each page is read once, when a sample first touches it (`/proc/kcore` or BPF, the same
//! reader the perf backend uses for code); a page freed and reused during the run keeps its
//! first owner.

use std::collections::HashMap;
use std::path::Path;

use dprof_abi::{Record, SAMPLE_USER};
use dprof_analysis::decode::Decoder;
use dprof_format::{MemoryLayout, OwnedPage, PageOwners, PageUsage, SlabPages};

use crate::kernel_btf::KernelBtf;
use crate::perf::{CachesRead, KernelMemory, Owner, PageReader};

/// Distinct pages looked up at most: a bound on the collector's memory and reads.
const MAX_PAGES: usize = 1 << 20;

/// Watches the samples on their way to the file and reads the owner of each direct-map page
/// they touch, once.
pub(crate) struct PageOwnerWatch {
    reader: PageReader,
    memory: KernelMemory,
    decoder: Decoder,
    /// Frame to its owner (`None`: unreadable).
    pages: HashMap<u64, Option<Owner>>,
    caches: CachesRead,
    /// Time spent on the samples: decoding their addresses and reading their pages' owners.
    spent: std::time::Duration,
}

impl std::fmt::Debug for PageOwnerWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageOwnerWatch")
            .field("pages", &self.pages.len())
            .finish_non_exhaustive()
    }
}

impl PageOwnerWatch {
    /// A watch for a kernel with `layout` and `btf`, reading memory through `kcore` (or BPF),
    /// or why there can be none.
    pub(crate) fn new(
        layout: Option<MemoryLayout>,
        btf: &KernelBtf,
        kcore: &Path,
    ) -> Result<Self, String> {
        let layout = layout.ok_or("the kernel's memory layout is unknown")?;
        let reader = PageReader::new(btf.types()?, layout)?;
        let memory = KernelMemory::open(kcore).map_err(|e| e.to_string())?;
        Ok(Self::with(reader, memory))
    }

    fn with(reader: PageReader, memory: KernelMemory) -> Self {
        Self {
            reader,
            memory,
            decoder: Decoder::new(),
            pages: HashMap::new(),
            caches: CachesRead::default(),
            spent: std::time::Duration::ZERO,
        }
    }

    /// Looks at one record: a kernel-mode sample's direct-map addresses.
    pub(crate) fn see(&mut self, record: &Record) {
        let Record::AccessSample(sample) = record else {
            return;
        };
        if sample.flags & SAMPLE_USER != 0 {
            return;
        }
        let started = std::time::Instant::now();
        let outcome = self.decoder.access(sample);
        for access in outcome.accesses() {
            if access.gs_relative {
                continue;
            }
            let Some(pfn) = self.reader.pfn_of(access.addr) else {
                continue;
            };
            if self.pages.len() >= MAX_PAGES || self.pages.contains_key(&pfn) {
                continue;
            }
            let owner = self
                .reader
                .owner(access.addr, &mut self.memory, &mut self.caches);
            self.pages.insert(pfn, owner);
        }
        self.spent += started.elapsed();
    }

    /// What was found: each slab once, and the other pages.
    pub(crate) fn owners(&self) -> PageOwners {
        let mut owners = PageOwners::default();
        let mut slabs: Vec<&SlabPages> = Vec::new();
        let mut pages: Vec<(u64, PageUsage)> = Vec::new();
        for (&pfn, owner) in &self.pages {
            match owner {
                Some(Owner::Slab(slab)) => slabs.push(slab),
                Some(Owner::Page(usage)) => {
                    pages.extend(self.reader.page_address(pfn).map(|page| (page, *usage)));
                }
                None => {}
            }
        }
        slabs.sort_by_key(|s| s.first_object);
        slabs.dedup_by_key(|s| s.first_object);
        pages.sort_unstable_by_key(|&(page, _)| page);
        owners.slabs = slabs.into_iter().cloned().collect();
        owners.pages = pages
            .into_iter()
            .map(|(page, usage)| OwnedPage { page, usage })
            .collect();
        owners
    }

    /// Pages looked up, and how many of them could not be read.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let unreadable = self.pages.values().filter(|o| o.is_none()).count();
        (self.pages.len(), unreadable)
    }

    /// Wall time spent on the samples: decoding their addresses and reading the owners.
    pub(crate) fn time_spent(&self) -> std::time::Duration {
        self.spent
    }
}

#[cfg(test)]
mod tests;
