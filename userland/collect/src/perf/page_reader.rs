//! An owner of a direct-map page, read from the kernel's own bookkeeping: the page's `struct
//! page` in the vmemmap says whether a slab holds it (`virt_to_slab`), whose `slab_cache`
//! names the cache and whose size places the objects, or what else the page is used for
//! (anonymous, page cache, page table, free, the kernel's own). Offsets come from the kernel's
//! BTF, the bases from the [`MemoryLayout`]; memory is read through [`KernelMemory`].

use std::collections::HashMap;

use dprof_analysis::btf::Btf;
use dprof_format::{MemoryLayout, PageUsage, SlabPages};

use super::memory::KernelMemory;

const PAGE_SHIFT: u32 = 12;
/// Longest cache name read.
const NAME_MAX: usize = 64;
/// The direct map spans at most 64 TiB with 4-level paging (`MAX_PHYSMEM_BITS` 46); past it
/// lie the other regions.
const DIRECT_MAP_BYTES: u64 = 1 << 46;
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

/// The caches read so far, by address: caches live as long as the kernel, mostly.
#[derive(Debug, Default)]
pub(crate) struct CachesRead(HashMap<u64, Option<CacheRead>>);

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
    pub(crate) fn new(btf: &Btf, layout: MemoryLayout) -> Result<Self, String> {
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

    /// The direct-map address of frame `pfn`.
    pub(crate) fn page_address(&self, pfn: u64) -> Option<u64> {
        self.layout.page_offset_base.checked_add(pfn << PAGE_SHIFT)
    }

    /// The frame of `addr` when it lies in the direct map.
    pub(crate) fn pfn_of(&self, addr: u64) -> Option<u64> {
        let offset = addr.checked_sub(self.layout.page_offset_base)?;
        (offset < DIRECT_MAP_BYTES).then_some(offset >> PAGE_SHIFT)
    }

    /// The name of the cache whose slab holds an object at direct-map address `ptr` now,
    /// with slots of `slot_size` bytes (0: any).
    ///
    /// `None` when the page is no slab now, or its slab's slots are not where and as large as
    /// the object's: the slab that held it has been freed since, and its page perhaps reused
    /// by another cache, so the slab no longer tells whose the object was.
    pub(crate) fn cache_of(
        &self,
        ptr: u64,
        slot_size: u64,
        memory: &mut KernelMemory,
        caches: &mut CachesRead,
    ) -> Option<String> {
        match self.owner(ptr, memory, caches)? {
            Owner::Slab(slab) if slab_holds(&slab, ptr, slot_size) => Some(slab.cache),
            Owner::Slab(_) | Owner::Page(_) => None,
        }
    }

    /// Who owns the page of direct-map address `addr` now.
    pub(crate) fn owner(
        &self,
        addr: u64,
        memory: &mut KernelMemory,
        caches: &mut CachesRead,
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
            .0
            .entry(cache)
            .or_insert_with(|| self.read_cache(cache, memory))
            .clone()?;
        let base = self.page_address(head_pfn)?;
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

/// Whether `slab` has an object slot at `ptr`, `slot_size` bytes apart (0: any).
fn slab_holds(slab: &SlabPages, ptr: u64, slot_size: u64) -> bool {
    let Some(offset) = ptr.checked_sub(slab.first_object) else {
        return false;
    };
    (slot_size == 0 || slab.stride == slot_size)
        && offset % slab.stride == 0
        && offset / slab.stride < u64::from(slab.objects)
}

#[cfg(test)]
mod tests;
