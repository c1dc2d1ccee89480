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
//! | 4 | Records | whole ABI records as read from `/dev/dprof`, at most [`MAX_RECORDS_CHUNK`] bytes | any number |
//! | 7 | Text | kernel code bytes the records point at ([`KernelText`]) | at most one |
//! | 6 | Stop | JSON [`StopInfo`]: why and when collection stopped, the module's counters | exactly one |
//! | 5 | End | u64 records, u64 record bytes, u64 Records sections | exactly one, last |
//!
//! The stop reason is only known at the end, so it has its own section (kind 6) just before
//! End, rather than living in the Header, which is written before collection starts so that a
//! reader streaming the file knows the configuration before the first record.
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
mod text;
mod writer;

pub use error::{ProfileError, RecordProblem, WriteError};
pub use experiment::ExperimentRecord;
pub use header::{
    CacheGeometry, CausalCollectConfig, CausalTypeSpec, CollectConfig, CpuCounters, CpuId,
    DeviceCounters, HistoryCollectConfig, HistoryCounters, ModuleInfo, PeriodEvents, PmuEvent,
    ProfileHeader, ProgressPointSpec, SamplingConfig, StopInfo, StopReason, Target,
};
pub use reader::{Profile, Records};
pub use text::KernelText;
pub use writer::{partial_path, ProfileEncoder, ProfileWriter};

/// The first 8 bytes of every profile.
pub const MAGIC: [u8; 8] = *b"DPROF\0\r\n";
/// The format version this library writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Size of the file header (magic, version, reserved).
pub const FILE_HEADER_SIZE: usize = 16;
/// Size of a section header (kind, CRC-32, length).
pub const SECTION_HEADER_SIZE: usize = 16;
/// Largest payload of one Records section a reader accepts.
pub const MAX_RECORDS_CHUNK: usize = 4 * 1024 * 1024;
/// Payload size at which the writer starts a new Records section. A reader checks a chunk's
/// CRC before decoding its records, so it walks each chunk twice: a chunk that fits in a
/// core's L2 cache is read from memory once rather than twice.
pub const WRITTEN_RECORDS_CHUNK: usize = 256 * 1024;
/// Size of the End section's payload.
pub const END_SIZE: usize = 24;

/// Kinds of sections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SectionKind {
    /// JSON [`ProfileHeader`].
    Header = 1,
    /// Text of `/proc/kallsyms`.
    Kallsyms = 2,
    /// Text of `/proc/modules`.
    Modules = 3,
    /// Whole ABI records.
    Records = 4,
    /// Counts of what precedes; the last section.
    End = 5,
    /// JSON [`StopInfo`].
    Stop = 6,
    /// Kernel code bytes ([`KernelText`]).
    Text = 7,
}

impl SectionKind {
    /// The kind with this number, if format version 1 defines one.
    #[must_use]
    pub const fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Header),
            2 => Some(Self::Kallsyms),
            3 => Some(Self::Modules),
            4 => Some(Self::Records),
            5 => Some(Self::End),
            6 => Some(Self::Stop),
            7 => Some(Self::Text),
            _ => None,
        }
    }

    /// The name used in messages and `dprof dump`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Header => "Header",
            Self::Kallsyms => "Kallsyms",
            Self::Modules => "Modules",
            Self::Records => "Records",
            Self::End => "End",
            Self::Stop => "Stop",
            Self::Text => "Text",
        }
    }
}

impl std::fmt::Display for SectionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks one record at the start of `buf` the way both the writer and the reader do: a known
/// kind with its exact size, a well-formed payload, whole within `buf`, and a CPU number below
/// the module's `nr_cpu_ids`. Returns the record and its size.
pub(crate) fn check_record(
    buf: &[u8],
    nr_cpu_ids: u32,
) -> Result<(dprof_abi::RecordHeader, dprof_abi::Record, usize), RecordProblem> {
    let mut record = dprof_abi::Record::Lost(dprof_abi::Lost { count: 0 });
    let (header, size) = check_record_into(buf, nr_cpu_ids, &mut record)?;
    Ok((header, record, size))
}

/// [`check_record_into`] with access samples read in place (see
/// [`dprof_abi::Record::decode_view`]).
pub(crate) fn check_record_view<'a>(
    buf: &'a [u8],
    nr_cpu_ids: u32,
    out: &'a mut dprof_abi::Record,
) -> Result<(dprof_abi::RecordHeader, dprof_abi::RecordView<'a>), RecordProblem> {
    let (header, view) = match dprof_abi::Record::decode_view(buf, out) {
        Ok(found) => found,
        Err(dprof_abi::AbiError::Truncated { needed, available }) => {
            return Err(RecordProblem::Straddles { needed, available })
        }
        Err(other) => return Err(RecordProblem::Abi(other)),
    };
    if header.cpu >= nr_cpu_ids {
        return Err(RecordProblem::Cpu {
            cpu: header.cpu,
            nr_cpu_ids,
        });
    }
    Ok((header, view))
}

/// [`check_record`] decoding into `out` (left alone on error), for readers that decode
/// millions of records into one place.
pub(crate) fn check_record_into(
    buf: &[u8],
    nr_cpu_ids: u32,
    out: &mut dprof_abi::Record,
) -> Result<(dprof_abi::RecordHeader, usize), RecordProblem> {
    let header = match dprof_abi::Record::decode_into(buf, out) {
        Ok(header) => header,
        // The only way to be short here is a record cut by the end of its chunk.
        Err(dprof_abi::AbiError::Truncated { needed, available }) => {
            return Err(RecordProblem::Straddles { needed, available })
        }
        Err(other) => return Err(RecordProblem::Abi(other)),
    };
    if header.cpu >= nr_cpu_ids {
        return Err(RecordProblem::Cpu {
            cpu: header.cpu,
            nr_cpu_ids,
        });
    }
    Ok((header, usize::from(header.size)))
}
