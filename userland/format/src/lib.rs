//! The profile file: a self-contained, versioned, streamable record of one collection.
//!
//! # Layout (format version 1)
//! All integers are little-endian.
//! ```text
//! file header   8 bytes magic "DPROF\0\r\n", u32 format version (1), u32 reserved (0)
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
//! | 4 | Records | whole ABI records as read from `/dev/dprof`, at most [`MAX_RECORDS_CHUNK`] bytes | any number |
//! | 7 | Text | kernel code bytes the records point at ([`KernelText`]) | at most one |
//! | 6 | Stop | JSON [`StopInfo`]: why and when collection stopped, the module's counters | exactly one |
//! | 5 | End | u64 records, u64 record bytes, u64 Records sections | exactly one, last |
//!
//! The stop reason is only known at the end, so it has its own section (kind 6) just before
//! End, rather than living in the Header, which is written before collection starts so that a
//! reader streaming the file knows the configuration before the first record.
//!
//! The Btf section came later than the others: a file without one still reads (its
//! [`Profile::btf`] is `None`), so the format version stayed 1. It names struct fields when
//! no vmlinux with DWARF is at hand, and stock kernels ship BTF but rarely DWARF.
//!
//! The magic's `\0\r\n` catches text-mode transfers (as PNG's does). A file that a collector
//! did not finish has no End section, and the End section's counts must match what precedes
//! it, so a cut file never reads as complete, even if someone renames it.
//!
//! # Reading
//! [`Profile`] streams: opening a profile checks its structure from the section headers and
//! reads only the small sections; the records are read a chunk at a time, and checked (chunk
//! CRC, each record, the End section's record count) as [`Profile::records`] yields them. So
//! memory does not grow with the file, and each record is decoded once.

mod error;
mod experiment;
mod header;
mod reader;
mod record_check;
mod sections;
mod text;
mod writer;

pub use error::{ProfileError, RecordProblem, WriteError};
pub use experiment::ExperimentRecord;
pub use header::{
    CacheGeometry, CausalCollectConfig, CausalTypeSpec, CollectConfig, CpuCounters, CpuId,
    DeviceCounters, HistoryCollectConfig, HistoryCounters, MergedCache, ModuleInfo, PeriodEvents,
    PmuEvent, ProfileHeader, ProgressPointSpec, SamplingConfig, StopInfo, StopReason, Target,
};
pub use reader::{Profile, Records};
pub use sections::{
    SectionKind, END_SIZE, FILE_HEADER_SIZE, FORMAT_VERSION, MAGIC, MAX_RECORDS_CHUNK,
    SECTION_HEADER_SIZE, WRITTEN_RECORDS_CHUNK,
};
pub use text::KernelText;
pub use writer::{partial_path, ProfileEncoder, ProfileWriter};
