//! What owned the direct-map pages that samples touched, as the collector read it from the
//! kernel's `struct page` array when a sample first touched each page: the slab that holds
//! the page and its cache (so an object allocated before collection gets its cache's type),
//! or what else the page was used for. Stored as JSON in the `PageOwners` section.

use serde::{Deserialize, Serialize};

/// The owners of the sampled direct-map pages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageOwners {
    /// Slabs, each once, whatever number of its pages were touched.
    pub slabs: Vec<SlabPages>,
    /// Pages that belonged to no slab.
    pub pages: Vec<OwnedPage>,
}

impl PageOwners {
    /// Whether nothing was found.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slabs.is_empty() && self.pages.is_empty()
    }
}

/// One slab: its objects' addresses in the direct map, and its cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlabPages {
    /// Address of the first object.
    pub first_object: u64,
    /// Distance between objects (the cache's `size`, metadata included).
    pub stride: u64,
    /// Objects in the slab.
    pub objects: u32,
    /// The cache's name.
    pub cache: String,
}

/// A page of the direct map that no slab held, and what it was used for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedPage {
    /// The page's direct-map address.
    pub page: u64,
    /// What it was used for.
    pub usage: PageUsage,
}

/// What a page that is not a slab's was used for, as its `struct page` said.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageUsage {
    /// Mapped anonymously into a process (`mapping` with `PAGE_MAPPING_ANON`).
    Anon,
    /// In a file's page cache (another `mapping`).
    PageCache,
    /// A page table.
    PageTable,
    /// Free, in the buddy allocator.
    Free,
    /// Allocated for the kernel's own use, with no mapping (buffers, network fragments).
    Kernel,
}
