//! The page allocator's tracepoints as allocations and frees: `kmem:mm_page_alloc` becomes an
//! [`Alloc`] with [`ALLOC_PAGES`] of the pages' direct-map address, named by its site, and
//! `kmem:mm_page_free`/`kmem:mm_page_free_batched` the [`Free`] of pages so recorded. The
//! analysis then types the pages as `page@SITE`, where before it knew only their use.
//!
//! The tracepoint names no call site, so its events carry their kernel call chain, and the
//! site is the first caller outside the page allocator. Pages that become slabs or large
//! kmallocs are left out: their objects' own events name them better, and a page object
//! under a slab's objects would be replaced by the first of them.

use std::collections::HashMap;

use dprof_abi::{Alloc, Free, ALLOC_PAGES, FREE_PAGES};
use dprof_analysis::resolve::SymbolSource;
use dprof_analysis::symbols::Kallsyms;

use crate::page_sites::{role, Role};

use super::tracefs::{Field, Format, RawRecord};

/// Which page allocator tracepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageEvent {
    /// `kmem:mm_page_alloc`: `pfn`, `order`, `gfp_flags`.
    Alloc,
    /// `kmem:mm_page_free`: `pfn`, `order`.
    Free,
    /// `kmem:mm_page_free_batched`: `pfn`, one page.
    FreeBatched,
}

impl PageEvent {
    /// Every one, with its tracefs name.
    pub(crate) const ALL: [(Self, &'static str); 3] = [
        (Self::Alloc, "mm_page_alloc"),
        (Self::Free, "mm_page_free"),
        (Self::FreeBatched, "mm_page_free_batched"),
    ];
}

/// Where a page tracepoint's fields are, on this kernel.
#[derive(Clone, Debug)]
pub(crate) struct PageFields {
    pub(crate) kind: PageEvent,
    pfn: Field,
    order: Option<Field>,
    gfp_flags: Option<Field>,
}

impl PageFields {
    /// The fields of `format`, or why the event cannot be used.
    pub(crate) fn new(kind: PageEvent, format: &Format) -> Result<Self, String> {
        let pfn = format
            .field("pfn")
            .cloned()
            .ok_or_else(|| format!("kmem:{} has no pfn field", format.name))?;
        let order = format.field("order").cloned();
        if kind != PageEvent::FreeBatched && order.is_none() {
            return Err(format!("kmem:{} has no order field", format.name));
        }
        Ok(Self {
            kind,
            pfn,
            order,
            gfp_flags: format.field("gfp_flags").cloned(),
        })
    }
}

/// perf's call chain markers (`PERF_CONTEXT_KERNEL` and the others) are the top 4095 values.
const PERF_CONTEXT_MAX: u64 = u64::MAX - 4094;
/// The page's bytes at order 0.
const PAGE_SHIFT: u32 = 12;
/// Orders above this are refused as corrupt (x86-64's largest is a 1 GiB gigantic page).
const MAX_ORDER: u64 = 18;

/// The page allocations recorded and not yet freed, and what a frame is, remembered.
#[derive(Debug)]
pub(crate) struct PageTracker {
    /// `page_offset_base`: a frame's direct-map address is this plus its physical address.
    direct_map: u64,
    symbols: Kallsyms,
    roles: HashMap<u64, Role>,
    /// Recorded pages, by first frame, and their order.
    live: HashMap<u64, u32>,
    /// Page allocations recorded.
    pub(crate) recorded: u64,
    /// Page allocations left to the slab and kmalloc events.
    pub(crate) described_elsewhere: u64,
}

impl PageTracker {
    /// A tracker for a kernel whose direct map starts at `direct_map`, its call chains read
    /// with the symbols of the kallsyms text `kallsyms`.
    pub(crate) fn new(direct_map: u64, kallsyms: &[u8]) -> Self {
        Self {
            direct_map,
            symbols: Kallsyms::parse(kallsyms),
            roles: HashMap::new(),
            live: HashMap::new(),
            recorded: 0,
            described_elsewhere: 0,
        }
    }

    fn role_of(&mut self, ip: u64) -> Role {
        if let Some(&role) = self.roles.get(&ip) {
            return role;
        }
        let role = self
            .symbols
            .function(ip)
            .map_or(Role::Caller, |(name, _)| role(name));
        self.roles.insert(ip, role);
        role
    }

    /// The site of a page allocation from its kernel call chain (innermost first, perf's
    /// context markers among it): the first frame outside the allocator, else the outermost
    /// frame; `None` when the pages are described elsewhere.
    fn site(&mut self, chain: &[u64]) -> Option<u64> {
        let mut last = 0;
        for &ip in chain.iter().filter(|&&ip| ip < PERF_CONTEXT_MAX) {
            match self.role_of(ip) {
                Role::DescribedElsewhere => return None,
                Role::Caller => return Some(ip),
                Role::Allocator => last = ip,
            }
        }
        Some(last)
    }

    /// One page tracepoint hit: the record it becomes, if any.
    pub(crate) fn event(
        &mut self,
        fields: &PageFields,
        raw: &[u8],
        chain: &[u64],
    ) -> Option<PageRecord> {
        let raw = RawRecord(raw);
        let pfn = raw.unsigned(&fields.pfn)?;
        // A failed allocation reports pfn -1.
        if pfn == u64::MAX || pfn >= 1 << (64 - PAGE_SHIFT) {
            return None;
        }
        let order = match (fields.kind, &fields.order) {
            (PageEvent::FreeBatched, _) | (_, None) => 0,
            (_, Some(f)) => raw.unsigned(f)?,
        };
        if order > MAX_ORDER {
            return None;
        }
        let ptr = self.direct_map.wrapping_add(pfn << PAGE_SHIFT);
        match fields.kind {
            PageEvent::Alloc => {
                let Some(call_site) = self.site(chain) else {
                    self.described_elsewhere += 1;
                    return None;
                };
                let bytes = u32::try_from(1u64 << (PAGE_SHIFT + order as u32)).unwrap_or(u32::MAX);
                let gfp = fields
                    .gfp_flags
                    .as_ref()
                    .and_then(|f| raw.unsigned(f))
                    .unwrap_or(0);
                self.live.insert(pfn, order as u32);
                self.recorded += 1;
                Some(PageRecord::Alloc(Alloc {
                    ptr,
                    call_site,
                    cache: 0,
                    bytes_req: bytes,
                    bytes_alloc: bytes,
                    gfp: gfp as u32,
                    node: -1,
                    flags: ALLOC_PAGES,
                }))
            }
            PageEvent::Free | PageEvent::FreeBatched => {
                self.live.remove(&pfn)?;
                Some(PageRecord::Free(Free {
                    ptr,
                    call_site: 0,
                    cache: 0,
                    flags: FREE_PAGES,
                }))
            }
        }
    }
}

/// What a page tracepoint hit becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageRecord {
    Alloc(Alloc),
    Free(Free),
}

#[cfg(test)]
mod tests;
