//! The cache an object belongs to, read from the kernel's own bookkeeping, for kernels whose
//! `kmem_cache_alloc` tracepoint does not name it (6.12 and Debian 12's 6.1 among them): the object's `struct page` in the vmemmap, its head page (the `struct slab`), the
//! slab's `slab_cache`, and that cache's `name`. Offsets and sizes come from the kernel's BTF;
//! the bases of the direct map and the vmemmap (randomised by KASLR) from the variables
//! kallsyms names. Every step that is missing makes this unavailable, never a guess.

use std::collections::HashMap;

use dprof_analysis::btf::Btf;

use super::memory::KernelMemory;

/// Longest cache name read.
const NAME_MAX: usize = 64;
const PAGE_SHIFT: u32 = 12;

/// Where to find an object's cache on this kernel.
#[derive(Debug)]
pub(crate) struct SlabOwner {
    page_offset_base: u64,
    vmemmap_base: u64,
    page_size: u64,
    compound_head: u64,
    slab_cache: u64,
    cache_name: u64,
    /// Cache address to its name: caches live as long as the kernel, mostly.
    names: HashMap<u64, Vec<u8>>,
}

/// The value of the variable `name` as kallsyms locates it.
fn variable(kallsyms: &[u8], memory: &mut KernelMemory, name: &str) -> Option<u64> {
    let address = crate::system::kallsyms_address(kallsyms, name)?;
    memory.u64_at(address).filter(|&v| v != 0)
}

impl SlabOwner {
    /// The layout from `btf` and the bases from `kallsyms`, or why it cannot work here.
    pub(crate) fn new(
        btf: &[u8],
        kallsyms: &[u8],
        memory: &mut KernelMemory,
    ) -> Result<Self, String> {
        if btf.is_empty() {
            return Err(
                "the kernel has no BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF) to find \
                 it in the object's struct slab"
                    .to_owned(),
            );
        }
        let btf = Btf::parse(btf).map_err(|e| format!("the kernel's BTF does not parse: {e}"))?;
        let member = |s: &str, m: &str| {
            btf.member_offset(s, m)
                .ok_or_else(|| format!("the kernel's BTF has no {s}.{m}"))
        };
        let page_size = btf
            .struct_size("page")
            .ok_or("the kernel's BTF has no struct page")?;
        let base =
            |name: &str| format!("kallsyms does not locate {name} (CONFIG_KALLSYMS_ALL is off)");
        let page_offset_base = variable(kallsyms, memory, "page_offset_base")
            .ok_or_else(|| base("page_offset_base"))?;
        let vmemmap_base =
            variable(kallsyms, memory, "vmemmap_base").ok_or_else(|| base("vmemmap_base"))?;
        Ok(Self {
            page_offset_base,
            vmemmap_base,
            page_size,
            compound_head: member("page", "compound_head")?,
            slab_cache: member("slab", "slab_cache")?,
            cache_name: member("kmem_cache", "name")?,
            names: HashMap::new(),
        })
    }

    /// The name of the cache that object `ptr` (a direct-map address) belongs to now.
    pub(crate) fn cache_of(&mut self, ptr: u64, memory: &mut KernelMemory) -> Option<&[u8]> {
        let pfn = ptr.checked_sub(self.page_offset_base)? >> PAGE_SHIFT;
        let mut page = self
            .vmemmap_base
            .checked_add(pfn.checked_mul(self.page_size)?)?;
        // A tail page of a compound slab points at its head with bit 0 set.
        let head = memory.u64_now(page + self.compound_head)?;
        if head & 1 == 1 {
            page = head - 1;
        }
        let cache = memory.u64_now(page + self.slab_cache)?;
        if cache == 0 {
            return None;
        }
        if !self.names.contains_key(&cache) {
            let name_ptr = memory.u64_at(cache + self.cache_name)?;
            let name = memory.c_string(name_ptr, NAME_MAX)?;
            self.names.insert(cache, name);
        }
        self.names.get(&cache).map(Vec::as_slice)
    }
}
