//! What owns the direct-map pages that samples touch, read from the kernel's own bookkeeping
//! while the collector writes the records: a sampled address in the direct map that no
//! traced allocation explains is an object allocated before collection started, or page
//! memory. Its page's `struct page` in the vmemmap says which: the head page of a slab
//! (`virt_to_slab`), whose `slab_cache` names the cache and whose size places the objects;
//! else the page's use (anonymous, page cache, page table, free, the kernel's own).
//!
//! Each page is read once, when a sample first touches it (`/proc/kcore` or BPF, the same
//! reader the perf backend uses for code); a page freed and reused during the run keeps its
//! first owner. Offsets come from the kernel's BTF, the bases from the profile's
//! [`MemoryLayout`].

use std::collections::HashMap;
use std::path::Path;

use dprof_abi::{Record, SAMPLE_USER};
use dprof_analysis::btf::Btf;
use dprof_analysis::decode::Decoder;
use dprof_format::{MemoryLayout, OwnedPage, PageOwners, PageUsage, SlabPages};

use crate::perf::KernelMemory;

const PAGE_SHIFT: u32 = 12;
/// Longest cache name read.
const NAME_MAX: usize = 64;
/// The direct map spans at most 64 TiB with 4-level paging (`MAX_PHYSMEM_BITS` 46); past it
/// lie the other regions.
const DIRECT_MAP_BYTES: u64 = 1 << 46;
/// Distinct pages looked up at most: a bound on the collector's memory and reads.
const MAX_PAGES: usize = 1 << 20;
/// `PAGE_MAPPING_ANON`: the low bit of `page->mapping` of an anonymous page.
const MAPPING_ANON: u64 = 1;

/// How a slab is told from other pages on this kernel.
#[derive(Clone, Copy, Debug)]
enum SlabMark {
    /// 6.10 and later: the head page's `page_type` has this value in its top byte
    /// (`PGTY_slab`), and page tables and free pages theirs.
    PageType {
        offset: u64,
        slab: u32,
        table: Option<u32>,
        buddy: Option<u32>,
    },
    /// Before: the `PG_slab` bit of `page->flags`.
    Flag { bit: u32 },
}

/// Where things are in `struct page`, `struct slab` and `struct kmem_cache` on this kernel.
#[derive(Clone, Debug)]
pub(crate) struct PageReader {
    layout: MemoryLayout,
    compound_head: u64,
    mapping: u64,
    mark: SlabMark,
    slab_cache: u64,
    cache_name: u64,
    cache_size: u64,
    /// `kmem_cache.oo`: the slab order (high half) and objects per slab (low 16 bits).
    cache_oo: u64,
    /// `kmem_cache.red_left_pad`, with `CONFIG_SLUB_DEBUG`.
    cache_red_left_pad: Option<u64>,
}

/// What owns one page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    Slab(SlabPages),
    Page(PageUsage),
}

/// A cache as read once: its name and geometry.
#[derive(Clone, Debug)]
struct CacheRead {
    name: String,
    stride: u64,
    objects: u32,
    red_left_pad: u64,
}

impl PageReader {
    /// The offsets from `btf` (the kernel's), or why this kernel's pages cannot be read.
    pub(crate) fn new(btf: &[u8], layout: MemoryLayout) -> Result<Self, String> {
        let btf = Btf::parse(btf).map_err(|e| format!("the kernel's BTF does not parse: {e}"))?;
        let member = |s: &str, m: &str| {
            btf.member_offset(s, m)
                .ok_or_else(|| format!("the kernel's BTF has no {s}.{m}"))
        };
        let enumerator = |name: &str| btf.enumerator(name);
        let mark = match (member("page", "page_type"), enumerator("PGTY_slab")) {
            (Ok(offset), Some(slab)) => SlabMark::PageType {
                offset,
                slab: u32::try_from(slab).map_err(|_| "PGTY_slab is out of range")?,
                table: enumerator("PGTY_table").and_then(|v| u32::try_from(v).ok()),
                buddy: enumerator("PGTY_buddy").and_then(|v| u32::try_from(v).ok()),
            },
            _ => SlabMark::Flag {
                bit: enumerator("PG_slab")
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|&bit| bit < 64)
                    .ok_or("the kernel's BTF names neither PGTY_slab nor PG_slab")?,
            },
        };
        Ok(Self {
            layout,
            compound_head: member("page", "compound_head")?,
            mapping: member("page", "mapping")?,
            mark,
            slab_cache: member("slab", "slab_cache")?,
            cache_name: member("kmem_cache", "name")?,
            cache_size: member("kmem_cache", "size")?,
            cache_oo: member("kmem_cache", "oo")?,
            cache_red_left_pad: btf.member_offset("kmem_cache", "red_left_pad"),
        })
    }

    /// The frame of `addr` when it lies in the direct map.
    fn pfn_of(&self, addr: u64) -> Option<u64> {
        let offset = addr.checked_sub(self.layout.page_offset_base)?;
        (offset < DIRECT_MAP_BYTES).then_some(offset >> PAGE_SHIFT)
    }

    /// Who owns the page of direct-map address `addr` now.
    fn owner(
        &self,
        addr: u64,
        memory: &mut KernelMemory,
        caches: &mut HashMap<u64, Option<CacheRead>>,
    ) -> Option<Owner> {
        let pfn = self.pfn_of(addr)?;
        let page = self
            .layout
            .vmemmap_base
            .checked_add(pfn.checked_mul(self.layout.struct_page_size)?)?;
        // A tail page of a compound page points at its head with bit 0 set.
        let head_word = memory.u64_now(page + self.compound_head)?;
        let head = if head_word & 1 == 1 {
            head_word - 1
        } else {
            page
        };
        let head_pfn = head.checked_sub(self.layout.vmemmap_base)? / self.layout.struct_page_size;
        let usage = match self.mark {
            SlabMark::PageType {
                offset,
                slab,
                table,
                buddy,
            } => {
                let word = memory.u64_now(head + offset)?;
                let page_type = (word & 0xffff_ffff) as u32 >> 24;
                if page_type == slab {
                    None
                } else if Some(page_type) == table {
                    Some(PageUsage::PageTable)
                } else if Some(page_type) == buddy {
                    Some(PageUsage::Free)
                } else {
                    Some(self.mapped_usage(head, memory)?)
                }
            }
            SlabMark::Flag { bit } => {
                let flags = memory.u64_now(head)?;
                if flags >> bit & 1 == 1 {
                    None
                } else {
                    Some(self.mapped_usage(head, memory)?)
                }
            }
        };
        if let Some(usage) = usage {
            return Some(Owner::Page(usage));
        }
        let cache = memory.u64_now(head + self.slab_cache)?;
        let read = caches
            .entry(cache)
            .or_insert_with(|| self.read_cache(cache, memory))
            .clone()?;
        let base = self
            .layout
            .page_offset_base
            .checked_add(head_pfn << PAGE_SHIFT)?;
        Some(Owner::Slab(SlabPages {
            first_object: base + read.red_left_pad,
            stride: read.stride,
            objects: read.objects,
            cache: read.name,
        }))
    }

    /// An unmarked page's use, from its `mapping`.
    fn mapped_usage(&self, head: u64, memory: &mut KernelMemory) -> Option<PageUsage> {
        let mapping = memory.u64_now(head + self.mapping)?;
        Some(if mapping == 0 {
            PageUsage::Kernel
        } else if mapping & MAPPING_ANON != 0 {
            PageUsage::Anon
        } else {
            PageUsage::PageCache
        })
    }

    fn read_cache(&self, cache: u64, memory: &mut KernelMemory) -> Option<CacheRead> {
        if cache >> 63 == 0 {
            return None;
        }
        let name_ptr = memory.u64_at(cache + self.cache_name)?;
        let name = memory.c_string(name_ptr, NAME_MAX)?;
        let name = String::from_utf8(name)
            .ok()
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic()))?;
        let word = |offset: u64, memory: &mut KernelMemory| {
            let mut bytes = [0u8; 4];
            (memory.read(cache + offset, &mut bytes) == 4).then(|| u32::from_le_bytes(bytes))
        };
        let stride = u64::from(word(self.cache_size, memory)?).max(1);
        let objects = word(self.cache_oo, memory)? & 0xffff;
        let red_left_pad = match self.cache_red_left_pad {
            Some(offset) => u64::from(word(offset, memory)?),
            None => 0,
        };
        Some(CacheRead {
            name,
            stride,
            objects,
            red_left_pad,
        })
    }
}

/// Watches the samples on their way to the file and reads the owner of each direct-map page
/// they touch, once.
pub(crate) struct PageOwnerWatch {
    reader: PageReader,
    memory: KernelMemory,
    decoder: Decoder,
    /// Frame to its owner (`None`: unreadable), in the order first seen.
    pages: HashMap<u64, Option<Owner>>,
    caches: HashMap<u64, Option<CacheRead>>,
    /// Time spent reading pages' owners.
    reading: std::time::Duration,
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
        btf: Option<&[u8]>,
        kcore: &Path,
    ) -> Result<Self, String> {
        let layout = layout.ok_or("the kernel's memory layout is unknown")?;
        let btf = btf
            .filter(|b| !b.is_empty())
            .ok_or("the kernel has no BTF (/sys/kernel/btf/vmlinux)")?;
        let reader = PageReader::new(btf, layout)?;
        let memory = KernelMemory::open(kcore).map_err(|e| e.to_string())?;
        Ok(Self::with(reader, memory))
    }

    fn with(reader: PageReader, memory: KernelMemory) -> Self {
        Self {
            reader,
            memory,
            decoder: Decoder::new(),
            pages: HashMap::new(),
            caches: HashMap::new(),
            reading: std::time::Duration::ZERO,
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
            let started = std::time::Instant::now();
            let owner = self
                .reader
                .owner(access.addr, &mut self.memory, &mut self.caches);
            self.reading += started.elapsed();
            self.pages.insert(pfn, owner);
        }
    }

    /// What was found: each slab once, and the other pages.
    pub(crate) fn owners(&self) -> PageOwners {
        let mut owners = PageOwners::default();
        let mut slabs: Vec<&SlabPages> = Vec::new();
        let mut pages: Vec<(u64, PageUsage)> = Vec::new();
        for (&pfn, owner) in &self.pages {
            match owner {
                Some(Owner::Slab(slab)) => slabs.push(slab),
                Some(Owner::Page(usage)) => pages.push((
                    self.reader.layout.page_offset_base + (pfn << PAGE_SHIFT),
                    *usage,
                )),
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

    /// Wall time spent reading the pages' owners.
    pub(crate) fn reading_time(&self) -> std::time::Duration {
        self.reading
    }
}

#[cfg(test)]
mod tests;
