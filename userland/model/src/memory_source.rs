//! Where sampled data came from: one vocabulary for IBS and PEBS, and counts by source.

use serde::{Deserialize, Serialize};

/// Where the data of a sampled access came from, in one vocabulary for IBS and PEBS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemSource {
    /// The L1 data cache: a hit.
    L1,
    /// An outstanding miss to the same line (Intel's line fill buffer or L2 miss buffer,
    /// AMD's miss address buffer): the access missed, and waited for a fill under way.
    FillBuffer,
    /// The core's L2.
    L2,
    /// The local L3: Intel's shared L3; AMD's CCX, its L3 or another core's L1/L2 in it.
    L3,
    /// Another cache on the same node: another CCX (AMD Zen 4), or any cache (Intel).
    NearCache,
    /// A cache on another node or socket.
    RemoteCache,
    /// DRAM of the local node.
    Dram,
    /// DRAM of another node.
    RemoteDram,
    /// Other memory: L4, memory-side cache, persistent memory, CXL.
    OtherMemory,
    /// MMIO, configuration space, PCI or APIC.
    Io,
    /// Uncached memory.
    Uncached,
    /// The hardware did not say.
    Unknown,
}

impl MemSource {
    /// Every source, nearest first: the order reports list them in.
    pub const ALL: [Self; 12] = [
        Self::L1,
        Self::FillBuffer,
        Self::L2,
        Self::L3,
        Self::NearCache,
        Self::RemoteCache,
        Self::Dram,
        Self::RemoteDram,
        Self::OtherMemory,
        Self::Io,
        Self::Uncached,
        Self::Unknown,
    ];

    /// Index in [`MemSource::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The source at `index` in [`MemSource::ALL`] ([`MemSource::Unknown`] past the end).
    #[must_use]
    pub const fn from_index(index: usize) -> Self {
        if index < Self::ALL.len() {
            Self::ALL[index]
        } else {
            Self::Unknown
        }
    }

    /// A short name, as text reports print it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::L1 => "L1",
            Self::FillBuffer => "LFB",
            Self::L2 => "L2",
            Self::L3 => "L3",
            Self::NearCache => "near cache",
            Self::RemoteCache => "remote cache",
            Self::Dram => "DRAM",
            Self::RemoteDram => "remote DRAM",
            Self::OtherMemory => "other memory",
            Self::Io => "I/O",
            Self::Uncached => "uncached",
            Self::Unknown => "unknown",
        }
    }
}

/// Samples served from one source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCount {
    /// The source.
    pub source: MemSource,
    /// Samples.
    pub samples: u64,
}
