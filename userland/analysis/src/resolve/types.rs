//! Data types: what a resolved address is an instance of, and how slab allocations are named.

use dprof_model::TypeKind;
use rustc_hash::FxHashMap;

/// Index of a type in a [`TypeTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeId(pub u32);

/// One type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// Unique name: `task_struct`, `kmalloc-1k@__alloc_skb`, `global:jiffies`,
    /// `percpu:runqueues`, `stack`.
    pub name: String,
    /// What kind of memory.
    pub kind: TypeKind,
    /// Slab cache name (slab types).
    pub cache: Option<String>,
    /// Allocation site function (types split by site: generic kmalloc caches, merged pools),
    /// Rust symbols demangled (see [`site_name`]).
    pub site: Option<String>,
    /// The cache's object size (slab types with a `CacheInfo`).
    pub object_size: Option<u32>,
}

/// Every type met during one analysis, each with a small id.
#[derive(Clone, Debug, Default)]
pub struct TypeTable {
    types: Vec<TypeInfo>,
    by_name: FxHashMap<String, TypeId>,
}

impl TypeTable {
    /// An empty table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of the type named `info.name`, adding it if new (the first info of a name wins).
    pub fn intern(&mut self, info: TypeInfo) -> TypeId {
        if let Some(&id) = self.by_name.get(&info.name) {
            return id;
        }
        let id = TypeId(u32::try_from(self.types.len()).unwrap_or(u32::MAX));
        self.by_name.insert(info.name.clone(), id);
        self.types.push(info);
        id
    }

    /// The type with this id.
    #[must_use]
    pub fn get(&self, id: TypeId) -> Option<&TypeInfo> {
        self.types.get(id.0 as usize)
    }

    /// The id of the type with this name.
    #[must_use]
    pub fn id_of(&self, name: &str) -> Option<TypeId> {
        self.by_name.get(name).copied()
    }

    /// Number of types.
    #[must_use]
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// Every type with its id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (TypeId, &TypeInfo)> + '_ {
        self.types
            .iter()
            .enumerate()
            .map(|(i, t)| (TypeId(u32::try_from(i).unwrap_or(u32::MAX)), t))
    }
}

/// Whether a cache is one of the kernel's generic kmalloc caches, whose objects have no single
/// type: `kmalloc-N`, `kmalloc-cg-N`, `kmalloc-rcl-N`, `kmalloc-rnd-NN-N`, `dma-kmalloc-N`.
#[must_use]
pub fn is_generic_kmalloc(cache_name: &str) -> bool {
    cache_name.starts_with("kmalloc-") || cache_name.starts_with("dma-kmalloc-")
}

/// Name of the type of large kmallocs (straight from the page allocator, no cache).
pub const KMALLOC_LARGE: &str = "kmalloc-large";
/// The cache part of the type of pages from the page allocator, split by site like a
/// generic kmalloc cache: `page@skb_page_frag_refill`.
pub const PAGE_ALLOCATION: &str = "page";

/// The type name of an allocation from a cache split by site (generic kmalloc, merged pool):
/// `cache@site`.
#[must_use]
pub fn kmalloc_type_name(cache_name: &str, site: &str) -> String {
    format!("{cache_name}@{site}")
}

/// The name of an allocation site's function: a Rust symbol (`_R...` v0, `_ZN...E` legacy)
/// demangled without its hash (`<kernel::alloc::kbox::Box<dprof::Session>>::new`), any other
/// as it is. `None` for a name that is not a Rust symbol.
#[must_use]
pub fn demangled_site(symbol: &str) -> Option<String> {
    rustc_demangle::try_demangle(symbol)
        .ok()
        .map(|d| format!("{d:#}"))
}

/// The name of an allocation site's function, Rust symbols demangled with their hash (legacy)
/// or crate disambiguators (v0): what tells two functions apart whose [`demangled_site`] is
/// the same (two instances of a generic function under legacy mangling).
#[must_use]
pub fn demangled_site_with_hash(symbol: &str) -> Option<String> {
    rustc_demangle::try_demangle(symbol)
        .ok()
        .map(|d| d.to_string())
}

/// Whether `symbol` (a kallsyms name) is the function that the site name `site` (in a type's
/// name or [`TypeInfo::site`]) stands for: the same name, or the name demangled.
#[must_use]
pub fn is_site_symbol(symbol: &str, site: &str) -> bool {
    symbol == site
        || rustc_demangle::try_demangle(symbol)
            .is_ok_and(|d| format!("{d:#}") == site || d.to_string() == site)
}

/// Whether a (demangled) function is the Rust kernel crate's allocator
/// (`<kernel::alloc::allocator::ReallocFunc>::call` in 6.12): `KBox`, `KVec` and every other
/// Rust allocation reach `krealloc` through it, so it is the call site of them all.
#[must_use]
pub fn is_rust_allocator(site: &str) -> bool {
    site.starts_with("kernel::alloc::") || site.starts_with("<kernel::alloc::")
}

/// The site part of the type name of Rust allocations through [`is_rust_allocator`]: the
/// allocator and the bytes asked for (`<kernel::alloc::allocator::ReallocFunc>::call[48B]`),
/// which tell Rust types of different sizes apart.
#[must_use]
pub fn rust_allocation_site(allocator: &str, bytes_req: u32) -> String {
    format!("{allocator}[{bytes_req}B]")
}

/// The function of a site part of a type name: [`rust_allocation_site`]'s allocator without
/// the size, any other as it is.
#[must_use]
pub fn site_function(site: &str) -> &str {
    site.strip_suffix("B]")
        .and_then(|s| s.rsplit_once('['))
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or(site, |(function, _)| function)
}
