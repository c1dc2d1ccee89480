//! Which kernel code is the page allocator's, for the site of a page allocation (the first
//! caller outside it): the perf backend reads each call chain's frames by name
//! (`perf/pages.rs`), the module tests return addresses against the ranges `IOC_PAGE_SITES`
//! gives it.

use dprof_analysis::symbols::{function_has_prefix, CodeRanges, Kallsyms};

/// The page allocator's own functions, by name prefix (their `_noprof` and compiler-suffixed
/// forms included): the frames a page allocation's site is looked for above. The page
/// fragment allocator counts as the allocator: its users are the sites.
pub(crate) const ALLOCATOR: [&str; 23] = [
    "__alloc_pages",
    "alloc_pages",
    "__alloc_frozen_pages",
    "alloc_frozen_pages",
    "get_page_from_freelist",
    "rmqueue",
    "__rmqueue",
    "prep_new_page",
    "post_alloc_hook",
    "__get_free_pages",
    "get_free_pages",
    "get_zeroed_page",
    "__folio_alloc",
    "folio_alloc",
    "alloc_pages_mpol",
    "folio_alloc_mpol",
    "vma_alloc_folio",
    "alloc_page_interleave",
    "alloc_pages_exact",
    "__page_frag_cache_refill",
    "__page_frag_alloc",
    "page_frag_alloc",
    "page_frag_cache_refill",
];

/// Functions whose pages other events describe: slabs (their objects' allocations) and large
/// kmallocs (the `kmalloc` tracepoint, which gives the caller's site).
pub(crate) const DESCRIBED_ELSEWHERE: [&str; 8] = [
    "allocate_slab",
    "new_slab",
    "alloc_slab_page",
    "___slab_alloc",
    "__kmalloc_large",
    "___kmalloc_large",
    "kmalloc_large",
    "kmalloc_order",
];

/// What a frame of a page allocation's call chain is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The page allocator's own code: the site is above it.
    Allocator,
    /// Code whose pages other events describe: the allocation is not recorded.
    DescribedElsewhere,
    /// Anything else: the site.
    Caller,
}

/// What the function `function` is to a page allocation's call chain.
pub(crate) fn role(function: &str) -> Role {
    if function_has_prefix(function, &DESCRIBED_ELSEWHERE) {
        Role::DescribedElsewhere
    } else if function_has_prefix(function, &ALLOCATOR) {
        Role::Allocator
    } else {
        Role::Caller
    }
}

/// The core kernel's code by [`role`], as the module takes it (`IOC_PAGE_SITES`): the
/// allocator's functions and those described elsewhere, each from its kallsyms address to
/// the next symbol, merged where they touch.
pub(crate) fn module_ranges(symbols: &Kallsyms) -> ModuleRanges {
    let of = |wanted: Role| -> Vec<(u64, u64)> {
        CodeRanges::of_functions(symbols.text_symbols(), |s| {
            s.module.is_none() && role(&s.name) == wanted
        })
        .ranges()
        .iter()
        .map(|r| (r.start, r.end))
        .collect()
    };
    ModuleRanges {
        allocator: of(Role::Allocator),
        elsewhere: of(Role::DescribedElsewhere),
    }
}

/// `[start, end)` code ranges by [`Role`], sorted and merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ModuleRanges {
    pub(crate) allocator: Vec<(u64, u64)>,
    pub(crate) elsewhere: Vec<(u64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_gets_the_allocator_s_and_the_slab_allocator_s_code() {
        let kallsyms = b"ffffffff81100000 T __alloc_frozen_pages_noprof
ffffffff81100400 T get_page_from_freelist
ffffffff81100800 T skb_page_frag_refill
ffffffff81100c00 T allocate_slab
ffffffff81101000 t rmqueue.constprop.0
ffffffff81101400 T tcp_sendmsg_locked
ffffffffa0000000 t alloc_pages_of_a_module\t[some_module]
ffffffffa0000100 t other\t[some_module]
";
        let symbols = Kallsyms::parse(kallsyms);
        let ModuleRanges {
            allocator,
            elsewhere,
        } = module_ranges(&symbols);
        assert_eq!(
            allocator,
            [
                (0xffff_ffff_8110_0000, 0xffff_ffff_8110_0800),
                (0xffff_ffff_8110_1000, 0xffff_ffff_8110_1400)
            ]
        );
        assert_eq!(elsewhere, [(0xffff_ffff_8110_0c00, 0xffff_ffff_8110_1000)]);
        assert_eq!(
            role("__kmalloc_large_node_noprof"),
            Role::DescribedElsewhere
        );
        assert_eq!(role("alloc_pages_mpol"), Role::Allocator);
        assert_eq!(role("filemap_alloc_folio_noprof"), Role::Caller);
    }
}
