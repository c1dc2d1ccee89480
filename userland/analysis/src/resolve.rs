//! Address resolution: from a data address at a point in time to what lives there.
//!
//! The [`Resolver`] replays the address set (paper section 4) in time order: an allocation
//! inserts `[ptr, ptr + bytes_alloc)` with its type, a free removes it, so that any address at
//! any replay time resolves to (type, object, offset). Addresses outside the address set
//! resolve, in this order, to per-CPU data (`%gs`-relative operands, or an address inside a
//! known CPU's static per-CPU area), the kernel stack of the sampled task (the `THREAD_SIZE`
//! region holding the sample's `%rsp`), a global data symbol, or [`Resolution::Unknown`].
//!
//! # Types
//! - A dedicated slab cache names its type: `task_struct`, `skbuff_head_cache`, `TCP`.
//! - Generic kmalloc caches (`kmalloc-*`, `kmalloc-cg-*`, `kmalloc-rcl-*`, `dma-kmalloc-*`)
//!   are split by allocation site function: `kmalloc-1k@__alloc_skb`; allocations with no
//!   cache (large kmalloc) are `kmalloc-large@SITE`. Without symbols the site is an address.
//! - So are caches the kernel merged with others ([`Resolver::set_merged_caches`]): a merged
//!   pool carries its first creator's name but holds the objects of every cache merged into
//!   it, so one type per pool would mix C types: `rtable@ip_route_output_key_hash`.
//! - Pages from the page allocator (`ALLOC_PAGES`) are split by site as well:
//!   `page@skb_page_frag_refill`, `page@filemap_alloc_folio`.
//! - Globals are `global:SYMBOL`, per-CPU variables `percpu:SYMBOL` (`percpu:(static)` for
//!   an offset inside the static per-CPU area with no symbol, `percpu:(dynamic)` beyond it),
//!   kernel stacks `stack`.
//! - User memory a kernel instruction touched (`copy_to_user`, `get_user`, futexes) is the
//!   region `user memory`, one instance per page.
//! - With the kernel's memory layout in the profile's header ([`Resolver::set_memory_layout`]):
//!   the `struct page` array is the region `struct page`, one instance per page frame, its
//!   offsets those of the C `struct page`; the vmalloc space that is not the sample's own
//!   stack is the region `vmalloc`, one instance per page.
//! - With the kernel image's sections in the header ([`Resolver::set_kernel_image`]): an
//!   address in the image that no symbol names (kallsyms lists no variables without
//!   `CONFIG_KALLSYMS_ALL`, and no vmlinux was given) is the region of its section, `kernel
//!   data`, `kernel bss`, `kernel rodata` or `kernel code`, one instance per page.
//!
//! Objects whose allocation was not traced (allocated before collection started, or free and
//! touched by the allocator) are not in the address set. With the owners of the direct-map
//! pages the samples touched in the profile ([`Resolver::set_page_owners`]), an address in a
//! slab resolves to its object ([`Resolution::UntracedObject`]): the cache's type
//! (`CACHE@(untraced)` for caches split by site, whose site is unknown), the object's index
//! from the slab's geometry. A page that no slab held is a region by its use:
//! `anon page`, `page cache page`, `page table`, `free page`, `kernel page`. Without them such
//! accesses resolve to [`Resolution::Unknown`]; frees of such objects are counted, not errors.
//!
//! Symbols come through the [`SymbolSource`] trait so that resolution does no I/O and can be
//! tested with tables.

mod address_set;
mod types;

#[cfg(test)]
mod tests;

use std::ops::Range;

use dprof_abi::{Alloc, CacheInfo, ALLOC_KMALLOC, ALLOC_PAGES, CACHE_NAME_BYTES};
use dprof_format::{
    ImageSection, ImageSectionKind, MemoryLayout, MergedCache, PageOwners, PageUsage,
};

pub use address_set::{
    AddressSet, Hit, LiveObject, NewObject, Removed, Slot, Touch, MAX_PAGED_BYTES,
};
use dprof_model::TypeKind;
use rustc_hash::FxHashMap;

use crate::kernel_debugging::DebuggingCode;
use crate::profiler_code::ProfilerCode;
pub use types::{
    demangled_site, demangled_site_with_hash, is_generic_kmalloc, is_rust_allocator,
    is_site_symbol, kmalloc_type_name, rust_allocation_site, site_function, TypeId, TypeInfo,
    TypeTable, KMALLOC_LARGE, PAGE_ALLOCATION,
};

/// The key of page allocations among the sites' caches, which no cache identifier takes
/// (the module's are kernel addresses, the perf backend's small numbers).
const PAGES_KEY: u64 = u64::MAX;

/// Name of the type of kernel stacks.
pub const STACK_TYPE: &str = "stack";
/// Name of the region of user memory (addresses below [`USER_END`]).
pub const USER_MEMORY_TYPE: &str = "user memory";
/// End of the user half of the x86-64 address space (4-level and 5-level paging alike: user
/// addresses are below it, kernel addresses at or above `0xff00_0000_0000_0000`).
pub const USER_END: u64 = 1 << 56;
/// Name of the region of the `struct page` array (the vmemmap).
pub const STRUCT_PAGE_TYPE: &str = "struct page";
/// The C struct of [`STRUCT_PAGE_TYPE`], for field names.
pub const STRUCT_PAGE_C_STRUCT: &str = "page";
/// The site part of the type of an object whose allocation was not traced, from a cache split by
/// site: `kmalloc-256@(untraced)`.
pub const UNTRACED_SITE: &str = "(untraced)";

/// The region named for what a page that no slab held was used for.
#[must_use]
pub const fn page_region(usage: PageUsage) -> &'static str {
    match usage {
        PageUsage::Anon => "anon page",
        PageUsage::PageCache => "page cache page",
        PageUsage::PageTable => "page table",
        PageUsage::Free => "free page",
        PageUsage::Kernel => "kernel page",
    }
}

/// The region named for a section of the kernel image, where an address in it has no symbol
/// (kernels without `CONFIG_KALLSYMS_ALL` list no variables).
#[must_use]
pub const fn image_region(kind: ImageSectionKind) -> &'static str {
    match kind {
        ImageSectionKind::Code => "kernel code",
        ImageSectionKind::Rodata => "kernel rodata",
        ImageSectionKind::Data => "kernel data",
        ImageSectionKind::Bss => "kernel bss",
    }
}

/// Name of the region of KASAN's shadow memory, which instrumented code reads before the
/// accesses it checks.
pub const KASAN_SHADOW_TYPE: &str = "KASAN shadow";
/// Name of the region of the vmalloc space.
pub const VMALLOC_TYPE: &str = "vmalloc";
/// Bytes of the vmemmap and of the vmalloc space the resolver names, at most (x86-64 with
/// 4-level paging: 1 TiB and 32 TiB; 5-level kernels have more, rarely used).
const VMEMMAP_BYTES: u64 = 1 << 40;
const VMALLOC_BYTES: u64 = 32 << 40;
/// Bytes of a page, the instances of a region.
const PAGE_SIZE: u64 = 4096;
/// Name of the type of `%gs`-relative accesses inside the static per-CPU area that no symbol
/// covers.
pub const PERCPU_STATIC_TYPE: &str = "percpu:(static)";
/// Name of the type of `%gs`-relative accesses beyond the static per-CPU area (dynamic
/// per-CPU allocations), or of all of them when the per-CPU layout is unknown.
pub const PERCPU_DYNAMIC_TYPE: &str = "percpu:(dynamic)";

/// Per-CPU and global symbols that hold the stack protector's canary (`fixed_percpu_data`
/// up to 6.14 on x86-64, its only other field the `%gs` base's padding; `__stack_chk_guard`
/// since), which every protected function reads on entry and exit.
const STACK_CANARY_SYMBOLS: [&str; 2] = ["fixed_percpu_data", "__stack_chk_guard"];

/// The symbol a global or per-CPU type is named after (`runqueues` for `percpu:runqueues`).
#[must_use]
pub fn variable_name(type_name: &str) -> Option<&str> {
    type_name
        .strip_prefix("percpu:")
        .or_else(|| type_name.strip_prefix("global:"))
}

/// What a pseudo-type is, in a few words, or `None` for a data type: a type whose accesses a
/// program can make faster by changing the type (slab objects, globals and per-CPU variables
/// that a symbol names). The others are memory that is no one C type (the kernel stacks, the
/// named regions, pages from the page allocator, per-CPU memory no symbol covers) or that
/// the compiler's code reads on its own (the stack protector's canary). `dprof causal --types auto` skips them; they can
/// still be named.
#[must_use]
pub fn pseudo_type(kind: TypeKind, name: &str) -> Option<&'static str> {
    let symbol = variable_name(name);
    match kind {
        TypeKind::Stack => Some("the kernel stacks"),
        TypeKind::Region => Some("a region of memory, not one data type"),
        TypeKind::Slab if is_page_allocation(name) => {
            Some("pages from the page allocator, not one data type")
        }
        TypeKind::Percpu if name == PERCPU_STATIC_TYPE || name == PERCPU_DYNAMIC_TYPE => {
            Some("per-CPU memory that no symbol names")
        }
        TypeKind::Percpu | TypeKind::Global
            if symbol.is_some_and(|s| STACK_CANARY_SYMBOLS.contains(&s)) =>
        {
            Some("the stack protector's canary")
        }
        TypeKind::Slab | TypeKind::Global | TypeKind::Percpu => None,
    }
}

/// Whether `type_name` is of pages from the page allocator (`page@SITE`).
#[must_use]
pub fn is_page_allocation(type_name: &str) -> bool {
    type_name
        .strip_prefix(PAGE_ALLOCATION)
        .is_some_and(|rest| rest.starts_with('@'))
}

/// What resolution needs to know about kernel symbols. Implementations do no I/O.
pub trait SymbolSource {
    /// The function containing `ip` and the offset of `ip` in it.
    fn function(&self, ip: u64) -> Option<(&str, u64)>;

    /// The global data symbol (kernel image or module data, bss, rodata) containing `addr` and
    /// the offset in it. Must not answer for addresses outside kernel data (the heap, the
    /// direct map), nor for per-CPU symbols.
    fn data_symbol(&self, addr: u64) -> Option<(&str, u64)>;

    /// The static per-CPU area as symbol addresses (`__per_cpu_start..__per_cpu_end`): a
    /// CPU's copy of a per-CPU symbol at `s` lives at `gs_base + s`.
    fn percpu_range(&self) -> Option<Range<u64>>;

    /// The per-CPU symbol containing symbol address `addr` (inside [`Self::percpu_range`]) and
    /// the offset in it.
    fn percpu_symbol(&self, addr: u64) -> Option<(&str, u64)>;

    /// Number of function symbols (0: functions can only be shown as addresses).
    fn function_count(&self) -> usize;

    /// The profiler's code: dprof.ko's, when it was loaded, and the kernel's perf events
    /// code (see [`crate::profiler_code`]); none when the symbols are unknown.
    fn profiler_code(&self) -> ProfilerCode {
        ProfilerCode::default()
    }

    /// The kernel's debugging code (sanitizers, lockdep, ...): see
    /// [`crate::kernel_debugging`]; none when the symbols are unknown.
    fn debugging_code(&self) -> DebuggingCode {
        DebuggingCode::default()
    }

    /// Whether [`Self::pointer_target`] can answer (debug info with DWARF was given).
    fn types_instructions(&self) -> bool {
        false
    }

    /// The struct the memory operand `displacement(register)` of the instruction at `ip`
    /// points into (`register` in DWARF's numbering), from the variable DWARF locates in the
    /// register there: see [`crate::debuginfo::DebugInfo::pointer_target`].
    fn pointer_target(
        &self,
        _ip: u64,
        _register: u16,
        _displacement: i64,
    ) -> Option<crate::debuginfo::PointerTarget> {
        None
    }
}

impl SymbolSource for crate::symbols::Kallsyms {
    fn function(&self, ip: u64) -> Option<(&str, u64)> {
        self.lookup(ip).map(|l| (l.symbol.name.as_str(), l.offset))
    }
    fn data_symbol(&self, addr: u64) -> Option<(&str, u64)> {
        self.lookup_data(addr)
            .map(|l| (l.symbol.name.as_str(), l.offset))
    }
    fn percpu_range(&self) -> Option<Range<u64>> {
        Self::percpu_range(self)
    }
    fn percpu_symbol(&self, addr: u64) -> Option<(&str, u64)> {
        self.lookup_percpu(addr)
            .map(|l| (l.symbol.name.as_str(), l.offset))
    }
    fn function_count(&self) -> usize {
        self.len()
    }
    fn profiler_code(&self) -> ProfilerCode {
        ProfilerCode::new(
            self.module_text(crate::symbols::PROFILER_MODULE),
            self.text_symbols(),
        )
    }
    fn debugging_code(&self) -> DebuggingCode {
        DebuggingCode::from_text_symbols(self.text_symbols())
    }
}

/// Kallsyms for functions and the per-CPU layout, a vmlinux's symbol table (exact sizes) first
/// for data and per-CPU symbols.
#[derive(Clone, Copy)]
pub struct WithDebugInfo<'a> {
    kallsyms: &'a crate::symbols::Kallsyms,
    debug: &'a crate::debuginfo::DebugInfo,
}

impl<'a> WithDebugInfo<'a> {
    /// Symbols from both; `debug` must already be placed with
    /// [`crate::debuginfo::DebugInfo::use_kallsyms`].
    #[must_use]
    pub fn new(
        kallsyms: &'a crate::symbols::Kallsyms,
        debug: &'a crate::debuginfo::DebugInfo,
    ) -> Self {
        Self { kallsyms, debug }
    }
}

impl std::fmt::Debug for WithDebugInfo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithDebugInfo").finish_non_exhaustive()
    }
}

impl SymbolSource for WithDebugInfo<'_> {
    fn function(&self, ip: u64) -> Option<(&str, u64)> {
        self.kallsyms.function(ip)
    }
    fn data_symbol(&self, addr: u64) -> Option<(&str, u64)> {
        match self.debug.data_symbol(addr) {
            Some(s) => Some((s.name, s.offset)),
            None => self.kallsyms.data_symbol(addr),
        }
    }
    fn percpu_range(&self) -> Option<Range<u64>> {
        SymbolSource::percpu_range(self.kallsyms)
    }
    fn percpu_symbol(&self, addr: u64) -> Option<(&str, u64)> {
        match self.debug.percpu_symbol(addr) {
            Some(s) => Some((s.name, s.offset)),
            None => self.kallsyms.percpu_symbol(addr),
        }
    }
    fn function_count(&self) -> usize {
        self.kallsyms.function_count()
    }
    fn profiler_code(&self) -> ProfilerCode {
        self.kallsyms.profiler_code()
    }
    fn debugging_code(&self) -> DebuggingCode {
        self.kallsyms.debugging_code()
    }
    fn types_instructions(&self) -> bool {
        true
    }
    fn pointer_target(
        &self,
        ip: u64,
        register: u16,
        displacement: i64,
    ) -> Option<crate::debuginfo::PointerTarget> {
        self.debug.pointer_target(ip, register, displacement)
    }
}

/// A [`SymbolSource`] that knows nothing: every type falls back to addresses.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSymbols;

impl SymbolSource for NoSymbols {
    fn function(&self, _ip: u64) -> Option<(&str, u64)> {
        None
    }
    fn data_symbol(&self, _addr: u64) -> Option<(&str, u64)> {
        None
    }
    fn percpu_range(&self) -> Option<Range<u64>> {
        None
    }
    fn percpu_symbol(&self, _addr: u64) -> Option<(&str, u64)> {
        None
    }
    fn function_count(&self) -> usize {
        0
    }
}

/// Where an address resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// A live object of the address set.
    Slab {
        /// Its slot in the [`AddressSet`].
        slot: Slot,
        /// Its type.
        type_id: TypeId,
        /// Offset of the address in the object.
        offset: u64,
    },
    /// A global variable.
    Global {
        /// `global:SYMBOL`.
        type_id: TypeId,
        /// The symbol's address (identifies the instance).
        symbol: u64,
        /// Offset in the symbol.
        offset: u64,
    },
    /// A per-CPU variable.
    Percpu {
        /// `percpu:SYMBOL`.
        type_id: TypeId,
        /// The CPU whose copy it is.
        owner_cpu: u32,
        /// Offset in the symbol (in the per-CPU area for the `(static)`/`(dynamic)` types).
        offset: u64,
    },
    /// A kernel stack.
    Stack {
        /// The [`STACK_TYPE`] type.
        type_id: TypeId,
        /// Base of the `THREAD_SIZE` region (identifies the stack).
        base: u64,
        /// Offset in the region.
        offset: u64,
    },
    /// An object of a slab cache whose allocation was not traced (allocated before collection
    /// started, or free and touched by the allocator), found through the owner of its page.
    UntracedObject {
        /// Its cache's type.
        type_id: TypeId,
        /// Its address (identifies the instance).
        base: u64,
        /// Offset of the address in the object.
        offset: u64,
    },
    /// A named region that is not one C type ([`TypeKind::Region`]).
    Region {
        /// The region's type ([`USER_MEMORY_TYPE`], [`STRUCT_PAGE_TYPE`], [`VMALLOC_TYPE`]).
        type_id: TypeId,
        /// Base of the instance (the page).
        base: u64,
        /// Offset in the instance.
        offset: u64,
    },
    /// None of the above.
    Unknown,
}

/// What the sampled CPU's state says about where things are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleContext {
    /// CPU that took the sample.
    pub cpu: u32,
    /// Its `%gs` base (its per-CPU area offset in kernel mode).
    pub gs_base: u64,
    /// `%rsp` at the sample.
    pub rsp: u64,
}

/// Counters of the address set replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    /// Allocations inserted.
    pub allocs: u64,
    /// Allocations ignored: a NULL or `ZERO_SIZE_PTR` pointer.
    pub null_allocs: u64,
    /// Frees that removed a live object.
    pub frees: u64,
    /// Frees of NULL or `ZERO_SIZE_PTR` (the kfree tracepoint fires before the NULL check).
    pub null_frees: u64,
    /// Frees of addresses no live object starts at: allocated before collection, or the
    /// allocation was lost.
    pub unknown_frees: u64,
    /// Live objects replaced by an allocation over them: their free was missed.
    pub missed_frees: u64,
    /// Allocations from caches with no `CacheInfo`.
    pub unknown_cache_allocs: u64,
}

/// Per-cache state: its name, and its type when it is not split by site.
#[derive(Clone, Debug)]
struct CacheEntry {
    name: String,
    object_size: u32,
    /// A generic kmalloc cache or a merged pool: one type per allocation site.
    by_site: bool,
    type_id: Option<TypeId>,
}

/// Addresses no larger than this are NULL or `ZERO_SIZE_PTR` (16), never objects.
const MAX_NULL_PTR: u64 = 16;

/// The address set replay plus symbol-based resolution.
pub struct Resolver<'s> {
    symbols: &'s dyn SymbolSource,
    percpu: Option<Range<u64>>,
    types: TypeTable,
    objects: AddressSet,
    caches: FxHashMap<u64, CacheEntry>,
    /// Pools that several caches share (two aliases or more), and each alias's index there.
    merged: Vec<MergedCache>,
    merged_by_alias: FxHashMap<String, usize>,
    /// Index in `merged` of each cache name met that is a merged pool, by display name.
    merged_names: FxHashMap<String, usize>,
    /// Type of (cache, call site) for allocations split by site.
    sites: FxHashMap<(u64, u64), TypeId>,
    /// Type of (cache, call site, bytes asked for) for allocations through Rust's allocator
    /// (split by size: see [`is_rust_allocator`]).
    sized_sites: FxHashMap<(u64, u64, u32), TypeId>,
    /// Start of the function each demangled site name was given to: a second function of
    /// the same name keeps its hash.
    site_functions: FxHashMap<String, u64>,
    /// `global:`/`percpu:` type of each symbol, by symbol address.
    symbol_types: FxHashMap<(bool, u64), TypeId>,
    /// Per-CPU areas learnt from samples' gs bases: (start, end, cpu), sorted by start.
    areas: Vec<(u64, u64, u32)>,
    /// gs base of each CPU seen, indexed by CPU (0 = not seen).
    gs_bases: Vec<u64>,
    stack_type: Option<TypeId>,
    /// The region types met, by name.
    region_types: Vec<(&'static str, TypeId)>,
    layout: Option<MemoryLayout>,
    /// The kernel image's sections, sorted by start.
    image: Vec<ImageSection>,
    /// The kernel's debugging code; here for its KASAN shadow and stack size.
    debugging: DebuggingCode,
    /// Slabs whose pages samples touched, by first object.
    untraced_slabs: Vec<UntracedSlab>,
    /// Pages no slab held, by direct-map address, and their use.
    owned_pages: FxHashMap<u64, PageUsage>,
    counts: ReplayCounts,
}

/// A slab from the profile's page owners.
#[derive(Clone, Debug)]
struct UntracedSlab {
    first_object: u64,
    end: u64,
    stride: u64,
    cache: String,
    /// Its objects' type, once met.
    type_id: Option<TypeId>,
}

impl std::fmt::Debug for Resolver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("types", &self.types.len())
            .field("live_objects", &self.objects.len())
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl<'s> Resolver<'s> {
    /// A resolver with an empty address set.
    #[must_use]
    pub fn new(symbols: &'s dyn SymbolSource) -> Self {
        Self {
            symbols,
            percpu: symbols.percpu_range().filter(|r| r.start < r.end),
            types: TypeTable::new(),
            objects: AddressSet::new(),
            caches: FxHashMap::default(),
            merged: Vec::new(),
            merged_by_alias: FxHashMap::default(),
            merged_names: FxHashMap::default(),
            sites: FxHashMap::default(),
            sized_sites: FxHashMap::default(),
            site_functions: FxHashMap::default(),
            symbol_types: FxHashMap::default(),
            areas: Vec::new(),
            gs_bases: Vec::new(),
            stack_type: None,
            region_types: Vec::new(),
            layout: None,
            image: Vec::new(),
            debugging: symbols.debugging_code(),
            untraced_slabs: Vec::new(),
            owned_pages: FxHashMap::default(),
            counts: ReplayCounts::default(),
        }
    }

    /// The kernel's debugging code, as the symbols told at [`Resolver::new`].
    #[must_use]
    pub fn debugging_code(&self) -> &DebuggingCode {
        &self.debugging
    }

    /// Says where the kernel put its `struct page` array and vmalloc space (the profile
    /// header's `memory_layout`), so that addresses there resolve to regions.
    pub fn set_memory_layout(&mut self, layout: Option<MemoryLayout>) {
        self.layout = layout.filter(|l| l.struct_page_size > 0);
    }

    /// Says where the kernel image's sections lie (the profile header's `kernel_image`), so
    /// that addresses in them that no symbol names resolve to their section's region.
    pub fn set_kernel_image(&mut self, sections: &[ImageSection]) {
        self.image = sections
            .iter()
            .filter(|s| s.start < s.end)
            .copied()
            .collect();
        self.image.sort_by_key(|s| s.start);
    }

    /// Says which slab pools several caches share (the profile header's
    /// `merged_caches`): a cache whose name is an alias of a pool with two aliases or more is
    /// split by allocation site, like a generic kmalloc cache. Call it before the first
    /// [`Resolver::cache_info`]: caches already recorded keep their types.
    pub fn set_merged_caches(&mut self, pools: &[MergedCache]) {
        self.merged = pools
            .iter()
            .filter(|p| p.aliases.len() > 1)
            .cloned()
            .collect();
        self.merged_by_alias = self
            .merged
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.aliases.iter().map(move |a| (a.clone(), i)))
            .collect();
    }

    /// The owners of the direct-map pages the samples touched (the profile's `PageOwners`
    /// section): addresses outside the address set then resolve through them.
    pub fn set_page_owners(&mut self, owners: &PageOwners) {
        self.untraced_slabs = owners
            .slabs
            .iter()
            .filter(|s| s.stride > 0 && s.objects > 0)
            .map(|s| UntracedSlab {
                first_object: s.first_object,
                end: s
                    .first_object
                    .saturating_add(s.stride.saturating_mul(u64::from(s.objects))),
                stride: s.stride,
                cache: s.cache.clone(),
                type_id: None,
            })
            .collect();
        self.untraced_slabs.sort_by_key(|s| s.first_object);
        self.owned_pages = owners.pages.iter().map(|p| (p.page, p.usage)).collect();
    }

    /// The merged pool a cache of the profile belongs to, by the name its types carry
    /// ([`TypeInfo::cache`]); `None` for caches not merged with others.
    #[must_use]
    pub fn merged_pool(&self, cache: &str) -> Option<&MergedCache> {
        self.merged.get(*self.merged_names.get(cache)?)
    }

    /// Index in `merged` of the pool a cache info names.
    fn pool_of(&self, info: &CacheInfo) -> Option<usize> {
        let bytes = info.name_bytes();
        if usize::from(info.name_len) < CACHE_NAME_BYTES {
            return std::str::from_utf8(bytes)
                .ok()
                .and_then(|name| self.merged_by_alias.get(name))
                .copied();
        }
        // The record keeps only the first bytes of a long name.
        if bytes.is_empty() {
            return None;
        }
        self.merged
            .iter()
            .position(|p| p.aliases.iter().any(|a| a.as_bytes().starts_with(bytes)))
    }

    /// Records a cache's name and geometry. A later info with another name for the same
    /// identifier (a cache destroyed and another created at its address) names the objects
    /// allocated from then on; live objects keep their type.
    pub fn cache_info(&mut self, info: &CacheInfo) {
        let name = crate::summary::cache_name(info);
        if self.caches.get(&info.cache).is_some_and(|e| e.name == name) {
            return;
        }
        self.sites.retain(|&(cache, _), _| cache != info.cache);
        let pool = self.pool_of(info);
        if let Some(pool) = pool {
            self.merged_names.insert(name.clone(), pool);
        }
        self.caches.insert(
            info.cache,
            CacheEntry {
                by_site: pool.is_some() || is_generic_kmalloc(&name),
                name,
                object_size: info.object_size,
                type_id: None,
            },
        );
    }

    /// The type of an allocation, creating it on first use.
    pub fn alloc_type(&mut self, alloc: &Alloc) -> TypeId {
        if alloc.flags & ALLOC_PAGES != 0 {
            return self.site_type(PAGES_KEY, alloc, PAGE_ALLOCATION, None);
        }
        if alloc.cache == 0 {
            return self.site_type(0, alloc, KMALLOC_LARGE, None);
        }
        let Some(entry) = self.caches.get(&alloc.cache) else {
            self.counts.unknown_cache_allocs += 1;
            let name = format!("cache@{:#x}", alloc.cache);
            if alloc.flags & ALLOC_KMALLOC != 0 {
                return self.site_type(alloc.cache, alloc, &name, None);
            }
            return self.types.intern(TypeInfo {
                name: name.clone(),
                kind: TypeKind::Slab,
                cache: Some(name),
                site: None,
                object_size: None,
            });
        };
        if entry.by_site {
            if let Some(&id) = self.sites.get(&(alloc.cache, alloc.call_site)) {
                return id;
            }
            let (name, size) = (entry.name.clone(), entry.object_size);
            return self.site_type(alloc.cache, alloc, &name, Some(size));
        }
        if let Some(id) = entry.type_id {
            return id;
        }
        let info = TypeInfo {
            name: entry.name.clone(),
            kind: TypeKind::Slab,
            cache: Some(entry.name.clone()),
            site: None,
            object_size: Some(entry.object_size),
        };
        let id = self.types.intern(info);
        if let Some(entry) = self.caches.get_mut(&alloc.cache) {
            entry.type_id = Some(id);
        }
        id
    }

    /// The type of an allocation from a cache split by site: one per allocation site
    /// function; for Rust's allocator, whose call site every Rust allocation shares, one per
    /// size asked for.
    fn site_type(
        &mut self,
        cache: u64,
        alloc: &Alloc,
        cache_name: &str,
        object_size: Option<u32>,
    ) -> TypeId {
        let (call_site, bytes_req) = (alloc.call_site, alloc.bytes_req);
        if let Some(&id) = self.sites.get(&(cache, call_site)) {
            return id;
        }
        if let Some(&id) = self.sized_sites.get(&(cache, call_site, bytes_req)) {
            return id;
        }
        let site = self.site_name(call_site);
        // Histories do not know the size (0): their objects are the allocator's, unsplit.
        let sized = is_rust_allocator(&site);
        let name = if sized && bytes_req > 0 {
            kmalloc_type_name(cache_name, &rust_allocation_site(&site, bytes_req))
        } else {
            kmalloc_type_name(cache_name, &site)
        };
        let id = self.types.intern(TypeInfo {
            name,
            kind: TypeKind::Slab,
            cache: (cache != 0 && cache != PAGES_KEY).then(|| cache_name.to_owned()),
            site: Some(site),
            object_size,
        });
        if sized {
            self.sized_sites.insert((cache, call_site, bytes_req), id);
        } else {
            self.sites.insert((cache, call_site), id);
        }
        id
    }

    /// The name of the function holding `call_site`, Rust symbols demangled: without their
    /// hash, unless another function already has that name (legacy mangling gives every
    /// instance of a generic function one path).
    fn site_name(&mut self, call_site: u64) -> String {
        let symbols = self.symbols;
        let Some((symbol, offset)) = symbols.function(call_site) else {
            return format!("{call_site:#x}");
        };
        let Some(short) = demangled_site(symbol) else {
            return symbol.to_owned();
        };
        let start = call_site.wrapping_sub(offset);
        match self.site_functions.get(&short) {
            Some(&other) if other != start => {
                demangled_site_with_hash(symbol).unwrap_or_else(|| symbol.to_owned())
            }
            Some(_) => short,
            None => {
                self.site_functions.insert(short.clone(), start);
                short
            }
        }
    }

    /// Replays an allocation at `time_ns` on `cpu`. Objects it replaces are handed to
    /// `replaced` (their free was missed). Returns the new object's slot, or `None` for a NULL
    /// pointer.
    pub fn alloc(
        &mut self,
        alloc: &Alloc,
        time_ns: u64,
        cpu: u32,
        mut replaced: impl FnMut(&LiveObject),
    ) -> Option<(Slot, TypeId)> {
        if alloc.ptr <= MAX_NULL_PTR {
            self.counts.null_allocs += 1;
            return None;
        }
        let type_id = self.alloc_type(alloc);
        self.counts.allocs += 1;
        let counts = &mut self.counts;
        let slot = self.objects.insert(
            NewObject {
                base: alloc.ptr,
                size: alloc.bytes_alloc,
                type_id,
                time_ns,
                cpu,
            },
            |old| {
                counts.missed_frees += 1;
                replaced(&old);
            },
        );
        Some((slot, type_id))
    }

    /// Replays a free of `ptr`, returning the object it ends.
    pub fn free(&mut self, ptr: u64) -> Option<LiveObject> {
        let removed = self.free_entry(ptr)?;
        self.objects.get(removed.slot).copied()
    }

    /// [`Resolver::free`] that returns what the address set's index knows of the object (see
    /// [`AddressSet::remove_entry`]): the replay's common case.
    #[inline]
    pub fn free_entry(&mut self, ptr: u64) -> Option<Removed> {
        if ptr <= MAX_NULL_PTR {
            self.counts.null_frees += 1;
            return None;
        }
        let removed = self.objects.remove_entry(ptr);
        if removed.is_some() {
            self.counts.frees += 1;
        } else {
            self.counts.unknown_frees += 1;
        }
        removed
    }

    /// [`Resolver::free_entry`] for pages given back to the page allocator (`FREE_PAGES`):
    /// pages whose allocation was not recorded (slabs, large kmallocs, pages older than the
    /// collection) end nothing and are not counted as unknown frees.
    #[inline]
    pub fn free_pages_entry(&mut self, ptr: u64) -> Option<Removed> {
        let removed = self.objects.remove_entry(ptr);
        if removed.is_some() {
            self.counts.frees += 1;
        }
        removed
    }

    /// Prefetches for a lookup of `addr` some records from now: [`AddressSet::prefetch_page`]
    /// when `near` is false, [`AddressSet::prefetch_entry`] when true.
    #[inline]
    pub fn prefetch(&self, addr: u64, near: bool) {
        if near {
            self.objects.prefetch_entry(addr);
        } else {
            self.objects.prefetch_page(addr);
        }
    }

    /// Learns a CPU's gs base from one of its kernel-mode samples, so that later addresses
    /// inside its per-CPU area resolve.
    #[inline]
    pub fn learn_gs_base(&mut self, cpu: u32, gs_base: u64) {
        // Every kernel sample comes here, and almost always with the base already known.
        if gs_base == 0 || self.gs_bases.get(cpu as usize) == Some(&gs_base) {
            return;
        }
        self.learn_new_gs_base(cpu, gs_base);
    }

    #[cold]
    fn learn_new_gs_base(&mut self, cpu: u32, gs_base: u64) {
        let Some(range) = self.percpu.clone() else {
            return;
        };
        let i = cpu as usize;
        // CPU numbers are below the module's nr_cpu_ids, checked by the profile reader; a
        // cap keeps a hostile value from allocating much.
        if i >= self.gs_bases.len() {
            if i >= 1 << 16 {
                return;
            }
            self.gs_bases.resize(i + 1, 0);
        }
        if let Some(slot) = self.gs_bases.get_mut(i) {
            *slot = gs_base;
        }
        self.areas.retain(|&(_, _, c)| c != cpu);
        let start = gs_base.wrapping_add(range.start);
        let end = start.wrapping_add(range.end - range.start);
        if start < end {
            let at = self.areas.partition_point(|&(s, _, _)| s < start);
            self.areas.insert(at, (start, end, cpu));
        }
    }

    /// Resolves a data address accessed by a sample.
    #[inline]
    pub fn resolve(&mut self, addr: u64, gs_relative: bool, ctx: &SampleContext) -> Resolution {
        self.resolve_touch(addr, gs_relative, ctx).0
    }

    /// Resolves a data address accessed by a sample, and for a slab object records that
    /// `ctx.cpu` touched it (see [`AddressSet::find_touch`]).
    #[inline]
    pub fn resolve_touch(
        &mut self,
        addr: u64,
        gs_relative: bool,
        ctx: &SampleContext,
    ) -> (Resolution, Option<Touch>) {
        if gs_relative {
            return (
                self.percpu_at(addr.wrapping_sub(ctx.gs_base), ctx.cpu),
                None,
            );
        }
        if let Some((hit, touch)) = self.objects.find_touch(addr, ctx.cpu) {
            let slab = Resolution::Slab {
                slot: hit.slot,
                type_id: hit.type_id,
                offset: hit.offset,
            };
            return (slab, Some(touch));
        }
        (self.resolve_rest(addr, ctx), None)
    }

    /// Resolution of an address outside the address set.
    fn resolve_rest(&mut self, addr: u64, ctx: &SampleContext) -> Resolution {
        let stack_mask = !(self.debugging.thread_size() - 1);
        if ctx.rsp != 0 && addr & stack_mask == ctx.rsp & stack_mask {
            let base = addr & stack_mask;
            let type_id = self.stack_type();
            return Resolution::Stack {
                type_id,
                base,
                offset: addr - base,
            };
        }
        if let Some(&(start, end, cpu)) = self.areas.get(
            self.areas
                .partition_point(|&(s, _, _)| s <= addr)
                .wrapping_sub(1),
        ) {
            if (start..end).contains(&addr) {
                let symbol_addr = self
                    .percpu
                    .as_ref()
                    .map_or(0, |r| r.start.wrapping_add(addr - start));
                return self.percpu_at(symbol_addr, cpu);
            }
        }
        if addr < USER_END {
            return self.region_page(USER_MEMORY_TYPE, addr);
        }
        if let Some(layout) = self.layout {
            let in_vmemmap = addr.wrapping_sub(layout.vmemmap_base);
            if in_vmemmap < VMEMMAP_BYTES {
                let offset = in_vmemmap % layout.struct_page_size;
                return Resolution::Region {
                    type_id: self.region_type(STRUCT_PAGE_TYPE),
                    base: addr - offset,
                    offset,
                };
            }
            let in_vmalloc = addr.wrapping_sub(layout.vmalloc_base);
            if in_vmalloc < VMALLOC_BYTES && addr < layout.vmemmap_base {
                return self.region_page(VMALLOC_TYPE, addr);
            }
        }
        if self.debugging.is_kasan_shadow(addr) {
            return self.region_page(KASAN_SHADOW_TYPE, addr);
        }
        if let Some(owned) = self.page_owner_at(addr) {
            return owned;
        }
        if let Some((name, offset)) = self.symbols.data_symbol(addr) {
            let symbol = addr.wrapping_sub(offset);
            let type_id = if let Some(&id) = self.symbol_types.get(&(false, symbol)) {
                id
            } else {
                let id = self.types.intern(TypeInfo {
                    name: format!("global:{name}"),
                    kind: TypeKind::Global,
                    cache: None,
                    site: None,
                    object_size: None,
                });
                self.symbol_types.insert((false, symbol), id);
                id
            };
            return Resolution::Global {
                type_id,
                symbol,
                offset,
            };
        }
        let section = self
            .image
            .partition_point(|s| s.start <= addr)
            .checked_sub(1)
            .and_then(|i| self.image.get(i))
            .filter(|s| addr < s.end);
        if let Some(section) = section {
            return self.region_page(image_region(section.kind), addr);
        }
        Resolution::Unknown
    }

    /// A per-CPU access at symbol address `symbol_addr` (the offset from the gs base) in
    /// `owner_cpu`'s copy.
    fn percpu_at(&mut self, symbol_addr: u64, owner_cpu: u32) -> Resolution {
        let in_static = self
            .percpu
            .as_ref()
            .is_some_and(|r| r.contains(&symbol_addr));
        let (key, name, offset) = if in_static {
            match self.symbols.percpu_symbol(symbol_addr) {
                Some((name, offset)) => (symbol_addr.wrapping_sub(offset), Some(name), offset),
                None => (u64::MAX - 1, None, symbol_addr),
            }
        } else {
            // Kernels whose per-CPU section is not linked at 0 (x86-64 since 6.15) keep
            // per-CPU variables among ordinary data symbols, at `addr - gs_base`.
            match self.symbols.data_symbol(symbol_addr) {
                Some((name, offset)) if self.percpu.is_none() => {
                    (symbol_addr.wrapping_sub(offset), Some(name), offset)
                }
                _ => (u64::MAX, None, symbol_addr),
            }
        };
        let type_id = if let Some(&id) = self.symbol_types.get(&(true, key)) {
            id
        } else {
            let name = match name {
                Some(n) => format!("percpu:{n}"),
                None if in_static => PERCPU_STATIC_TYPE.to_owned(),
                None => PERCPU_DYNAMIC_TYPE.to_owned(),
            };
            let id = self.types.intern(TypeInfo {
                name,
                kind: TypeKind::Percpu,
                cache: None,
                site: None,
                object_size: None,
            });
            self.symbol_types.insert((true, key), id);
            id
        };
        Resolution::Percpu {
            type_id,
            owner_cpu,
            offset,
        }
    }

    /// `addr` through the owner of its page: an object of a slab, or a page by its use.
    fn page_owner_at(&mut self, addr: u64) -> Option<Resolution> {
        let at = self
            .untraced_slabs
            .partition_point(|s| s.first_object <= addr)
            .checked_sub(1);
        if let Some(slab) = at.and_then(|i| self.untraced_slabs.get(i)) {
            if addr < slab.end {
                let offset = (addr - slab.first_object) % slab.stride;
                let type_id = match slab.type_id {
                    Some(id) => id,
                    None => self.untraced_type(at?),
                };
                return Some(Resolution::UntracedObject {
                    type_id,
                    base: addr - offset,
                    offset,
                });
            }
        }
        let page = addr & !(PAGE_SIZE - 1);
        let usage = *self.owned_pages.get(&page)?;
        Some(self.region_page(page_region(usage), addr))
    }

    /// The type of the objects of owned slab `index`: the cache's, or for a cache split by
    /// site, the cache's at an unknown site.
    fn untraced_type(&mut self, index: usize) -> TypeId {
        let cache = self.untraced_slabs[index].cache.clone();
        let by_site = is_generic_kmalloc(&cache)
            || self.merged_by_alias.contains_key(&cache)
            || self.merged_names.contains_key(&cache);
        let info = if by_site {
            TypeInfo {
                name: format!("{cache}@{UNTRACED_SITE}"),
                kind: TypeKind::Slab,
                cache: Some(cache.clone()),
                site: Some(UNTRACED_SITE.to_owned()),
                object_size: None,
            }
        } else {
            TypeInfo {
                name: cache.clone(),
                kind: TypeKind::Slab,
                cache: Some(cache.clone()),
                site: None,
                object_size: None,
            }
        };
        let id = self.types.intern(info);
        // Every slab of the cache shares the type.
        for slab in &mut self.untraced_slabs {
            if slab.cache == cache {
                slab.type_id = Some(id);
            }
        }
        id
    }

    fn stack_type(&mut self) -> TypeId {
        if let Some(id) = self.stack_type {
            return id;
        }
        let id = self.types.intern(TypeInfo {
            name: STACK_TYPE.to_owned(),
            kind: TypeKind::Stack,
            cache: None,
            site: None,
            object_size: None,
        });
        self.stack_type = Some(id);
        id
    }

    /// `addr` in region `name`, whose instances are pages.
    fn region_page(&mut self, name: &'static str, addr: u64) -> Resolution {
        let base = addr & !(PAGE_SIZE - 1);
        Resolution::Region {
            type_id: self.region_type(name),
            base,
            offset: addr - base,
        }
    }

    fn region_type(&mut self, name: &'static str) -> TypeId {
        if let Some(&(_, id)) = self.region_types.iter().find(|(n, _)| *n == name) {
            return id;
        }
        let id = self.types.intern(TypeInfo {
            name: name.to_owned(),
            kind: TypeKind::Region,
            cache: None,
            site: None,
            object_size: None,
        });
        self.region_types.push((name, id));
        id
    }

    /// The types met so far.
    #[must_use]
    pub fn types(&self) -> &TypeTable {
        &self.types
    }

    /// The live objects.
    #[must_use]
    pub fn objects(&self) -> &AddressSet {
        &self.objects
    }

    /// The live objects, to update their access state.
    pub fn objects_mut(&mut self) -> &mut AddressSet {
        &mut self.objects
    }

    /// Replay counters.
    #[must_use]
    pub fn counts(&self) -> ReplayCounts {
        self.counts
    }

    /// The symbols used.
    #[must_use]
    pub fn symbols(&self) -> &'s dyn SymbolSource {
        self.symbols
    }
}

/// Function name of `ip` (Rust symbols demangled), or the address, and the offset in it.
pub fn function_of(symbols: &dyn SymbolSource, ip: u64) -> (String, u64) {
    symbols.function(ip).map_or_else(
        || (format!("{ip:#x}"), 0),
        |(name, offset)| (format!("{:#}", rustc_demangle::demangle(name)), offset),
    )
}
