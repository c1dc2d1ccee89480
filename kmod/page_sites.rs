//! Where the page allocator's code lies (`IOC_PAGE_SITES`), and the site of a page
//! allocation found from it: what the session keeps and the page probes (`pages.rs`) read.
//! Also the reader of user-given code ranges, which the causal scope shares.

use kernel::prelude::*;
use kernel::uaccess::UserSlice;

use crate::abi;
use crate::ffi;

/// `[start, end)` code ranges, sorted and disjoint ([`abi::scope_ranges_valid`]).
pub(crate) type CodeRanges = KVVec<(u64, u64)>;

/// Reads `count` ranges of 16 bytes from user pointer `ptr`, and checks them. Process
/// context.
pub(crate) fn read_user_ranges(ptr: u64, count: u32) -> Result<CodeRanges> {
    let count = count as usize;
    // Up to MAX_SCOPE_RANGES x 16 = 1 MiB: kvmalloc.
    let mut bytes = KVVec::from_elem(0u8, count * 16, GFP_KERNEL)?;
    UserSlice::new(ptr as usize, count * 16)
        .reader()
        .read_slice(&mut bytes)?;
    let mut ranges = CodeRanges::with_capacity(count, GFP_KERNEL)?;
    for pair in bytes.chunks_exact(16) {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&pair[i..i + 8]);
            u64::from_le_bytes(b)
        };
        ranges.push((word(0), word(8)), GFP_KERNEL)?;
    }
    if !abi::scope_ranges_valid(&ranges) {
        return Err(EINVAL);
    }
    Ok(ranges)
}

/// Where the page allocator's code and the code whose pages other events describe lie.
pub(crate) struct PageSites {
    allocator: CodeRanges,
    elsewhere: CodeRanges,
}

impl PageSites {
    /// The ranges `sites` points to, read from user memory. EINVAL for ranges out of order,
    /// EFAULT for unreadable ones.
    pub(crate) fn from_user(sites: &abi::PageSites) -> Result<KBox<Self>> {
        let allocator = read_user_ranges(sites.allocator_ptr, sites.allocator_count)?;
        let elsewhere = if sites.elsewhere_count == 0 {
            CodeRanges::new()
        } else {
            read_user_ranges(sites.elsewhere_ptr, sites.elsewhere_count)?
        };
        Ok(KBox::new(
            Self {
                allocator,
                elsewhere,
            },
            GFP_KERNEL,
        )?)
    }

    /// The site of the allocation whose probe runs now, or None for pages left to other
    /// events.
    pub(crate) fn site_of_current(&self) -> Option<u64> {
        let mut chain = [0u64; abi::MAX_PAGE_CHAIN_FRAMES];
        // SAFETY: `chain` holds MAX_PAGE_CHAIN_FRAMES entries.
        let n = unsafe {
            ffi::dprof_shim_stack_trace(chain.as_mut_ptr(), abi::MAX_PAGE_CHAIN_FRAMES as u32)
        };
        let chain = chain.get(..n as usize).unwrap_or(&[]);
        abi::page_site(chain, &self.allocator, &self.elsewhere)
    }
}
