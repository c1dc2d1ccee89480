//! The profile file: a self-contained, versioned, streamable record of one collection.
//!
//! # Layout (format version 2)
//! All integers are little-endian.
//! ```text
//! file header   8 bytes magic "DPROF\0\r\n", u32 format version (2), u32 reserved (0)
//! section*      u32 kind, u32 CRC-32 of the payload, u64 payload length, payload
//! ```
//! Sections come in this order, and only this order:
//!
//! | kind | name | payload | count |
//! |---|---|---|---|
//! | 1 | Header | JSON [`ProfileHeader`] | exactly one, first |
//! | 2 | Kallsyms | text of `/proc/kallsyms` when collection started | exactly one |
//! | 3 | Modules | text of `/proc/modules` when collection started | exactly one |
//! | 8 | Btf | the raw bytes of `/sys/kernel/btf/vmlinux` when collection started | at most one, right after Modules |
//! | 9 | Code | new entries of the code table: each distinct sampled instruction's address and bytes (`code` module) | any number, each before the first Block that uses its entries |
//! | 10 | Block | one CPU's records, coded: u32 cpu, u32 records, u64 first time, then the records (`codec` module), at most [`MAX_BLOCK`] bytes | any number |
//! | 11 | `PageOwners` | JSON [`PageOwners`]: what owned the direct-map pages the samples touched (a slab and its cache, or the page's use), read when a sample first touched each | at most one, after the records |
//! | 7 | Text | kernel code bytes the records point at ([`KernelText`]) | at most one |
//! | 6 | Stop | JSON [`StopInfo`]: why and when collection stopped, the module's counters | exactly one |
//! | 5 | End | u64 records, u64 bytes of Block sections, u64 Block sections | exactly one, last |
//!
//! Code and Block sections interleave as the writer fills each CPU's block
//! ([`WRITTEN_BLOCK`] bytes) and writes it; the last blocks go out when the collection ends.
//! A block's records are coded against the records before them in the same block (times as
//! deltas, each payload word as a delta or one of its recent values, varints; see the `codec`
//! module), so a sample takes 10-20 bytes where its ABI record takes 224, and every block
//! decodes on its own. Samples name their instruction by its number in the code table, so its
//! bytes are stored once; the collector keeps only the registers the analysis reads
//! ([`SampleRegisters::Address`]; for history hits, [`HistoryRegisters::Address`]).
//!
//! The stop reason is only known at the end, so it has its own section (kind 6) just before
//! End, rather than living in the Header, which is written before collection starts so that a
//! reader streaming the file knows the configuration before the first record.
//!
//! The magic's `\0\r\n` catches text-mode transfers (as PNG's does). A file that a collector
//! did not finish has no End section, and the End section's counts must match what precedes
//! it (and, in version 2, the records the Block headers count), so a cut file never reads as
//! complete, even if someone renames it.
//!
//! # Version 1
//! Version 1 files still read. They hold whole ABI records as the device returned them, in
//! Records sections (kind 4, at most [`MAX_RECORDS_CHUNK`] bytes) in place of Code and Block
//! sections, and their End section counts Records sections. A Btf section without a version
//! change came late in version 1: files without one read with [`Profile::btf`] `None`.
//!
//! # Reading
//! [`Profile`] streams: opening a profile checks its structure from the section headers (and
//! each Block's header, which builds the index of blocks per CPU) and reads only the small
//! sections; the records are read a block per CPU (a chunk in version 1) at a time, and
//! checked (CRC, each record, the counts) as [`Profile::records`] yields them. So memory does
//! not grow with the file. Version 2 records come in time order across CPUs (the reader keeps
//! one block per CPU open and merges them; see the `blocks` module); version 1 records in
//! file order.

mod blocks;
mod code;
mod codec;
mod error;
mod experiment;
mod header;
mod layout;
mod legacy;
mod page_owners;
mod reader;
mod record_check;
mod sections;
mod text;
mod writer;

pub use code::{HitRegisterFilter, RegisterFilter, ALL_REGISTERS};
pub use codec::{BlockProblem, BLOCK_HEADER_SIZE, MAX_BLOCK, WRITTEN_BLOCK};
pub use error::{ProfileError, RecordProblem, WriteError};
pub use experiment::ExperimentRecord;
pub use header::{
    CacheGeometry, CausalCollectConfig, CausalTypeSpec, CausalUnit, CollectConfig, CpuCounters,
    CpuId, DelayAccounting, DeviceCounters, FullCoveragePlan, HistoryCollectConfig,
    HistoryCounters, HistoryRegisters, ImageSection, ImageSectionKind, MemoryLayout, MergedCache,
    ModuleInfo, PercpuSection, PeriodEvents, PmuEvent, ProfileHeader, ProgressPointSpec,
    SampleRegisters, SamplingConfig, StopInfo, StopReason, Target, END_TO_END_POINT,
};
pub use page_owners::{OwnedPage, PageOwners, PageUsage, SlabPages};
pub use reader::{Profile, Records};
pub use sections::{
    SectionKind, END_SIZE, FILE_HEADER_SIZE, FORMAT_VERSION, MAGIC, MAX_RECORDS_CHUNK,
    READABLE_VERSIONS, SECTION_HEADER_SIZE, WRITTEN_RECORDS_CHUNK,
};
pub use text::KernelText;
pub use writer::{partial_path, ProfileEncoder, ProfileWriter};
