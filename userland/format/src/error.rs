//! Errors of the profile reader and writer: one sentence each, naming the byte offset.

use std::io;
use std::path::PathBuf;

use crate::sections::SectionKind;

/// Why a profile could not be read. Every variant about the bytes names the offset in the
/// file where the problem is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The file could not be read at all.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The first bytes are not [`MAGIC`](crate::MAGIC).
    #[error("not a dprof profile: bad magic at offset {offset}")]
    BadMagic {
        /// Always 0.
        offset: u64,
    },
    /// The file ends inside the 16-byte file header.
    #[error(
        "file ends at offset {offset} inside the 16-byte file header: the profile is truncated"
    )]
    TruncatedFileHeader {
        /// Length of the file.
        offset: u64,
    },
    /// Another format version.
    #[error(
        "format version {version} at offset {offset} is not supported: this dprof reads \
         versions 1 to {supported} (was the profile written by a newer dprof?)"
    )]
    UnsupportedVersion {
        /// Offset of the version field.
        offset: u64,
        /// The version in the file.
        version: u32,
        /// The version this library reads.
        supported: u32,
    },
    /// A reserved field is not zero.
    #[error("reserved field at offset {offset} is {value:#x}, not 0: the file is corrupt or from a newer dprof")]
    NonZeroReserved {
        /// Offset of the field.
        offset: u64,
        /// Its value.
        value: u32,
    },
    /// The file ends inside a section header.
    #[error(
        "file ends at offset {offset} inside a section header ({available} of 16 bytes): the \
         profile is truncated (the collector did not finish)"
    )]
    TruncatedSectionHeader {
        /// Length of the file.
        offset: u64,
        /// Bytes of the section header present.
        available: u64,
    },
    /// The file ends inside a section's payload.
    #[error(
        "file ends at offset {offset} inside a {kind} section that declares {declared} bytes: \
         the profile is truncated (the collector did not finish)"
    )]
    TruncatedSection {
        /// Length of the file.
        offset: u64,
        /// The section's kind.
        kind: SectionKind,
        /// Payload length the section header declares.
        declared: u64,
    },
    /// A section kind this version does not know.
    #[error(
        "section at offset {offset} has unknown kind {kind}: the file was written by a newer \
         dprof or is not a dprof profile"
    )]
    UnknownSection {
        /// Offset of the section header.
        offset: u64,
        /// The kind in the file.
        kind: u32,
    },
    /// The payload does not match its CRC-32.
    #[error(
        "{kind} section at offset {offset} is corrupt: its header says CRC-32 {stored:#010x} \
         but the payload has {computed:#010x}"
    )]
    Checksum {
        /// Offset of the section header.
        offset: u64,
        /// The section's kind.
        kind: SectionKind,
        /// CRC-32 in the section header.
        stored: u32,
        /// CRC-32 of the payload.
        computed: u32,
    },
    /// A section where the format does not allow one.
    #[error("{kind} section at offset {offset} is out of place: {expected}")]
    MisplacedSection {
        /// Offset of the section header.
        offset: u64,
        /// The section's kind.
        kind: SectionKind,
        /// What the format expects there.
        expected: &'static str,
    },
    /// The file has no End section.
    #[error(
        "no End section: the profile is incomplete (was the collector interrupted?); the file \
         ends at offset {offset}"
    )]
    MissingEnd {
        /// Length of the file.
        offset: u64,
    },
    /// Bytes after the End section.
    #[error(
        "{extra} bytes follow the End section at offset {offset}: the file is not one profile"
    )]
    TrailingData {
        /// Offset just past the End section.
        offset: u64,
        /// Bytes after it.
        extra: u64,
    },
    /// A JSON section that does not parse.
    #[error("{kind} section at offset {offset} is not valid for this dprof: {message}")]
    BadJson {
        /// Offset of the payload.
        offset: u64,
        /// The section's kind.
        kind: SectionKind,
        /// What serde said.
        message: String,
    },
    /// A Records section longer than [`MAX_RECORDS_CHUNK`](crate::MAX_RECORDS_CHUNK).
    #[error(
        "Records section at offset {offset} declares {len} bytes, more than the {max} a chunk \
         may hold"
    )]
    ChunkTooLarge {
        /// Offset of the section header.
        offset: u64,
        /// Its declared length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A record that does not check out.
    #[error("record at offset {offset}: {problem}")]
    BadRecord {
        /// Offset of the record.
        offset: u64,
        /// What is wrong with it.
        problem: RecordProblem,
    },
    /// A Block section whose header or coded records do not check out.
    #[error("Block section: at offset {offset}: {problem}")]
    BadBlock {
        /// Offset of the problem.
        offset: u64,
        /// What is wrong.
        problem: crate::codec::BlockProblem,
    },
    /// A Code section whose entries do not parse.
    #[error("Code section: at offset {offset}: {reason}")]
    BadCode {
        /// Offset of the problem.
        offset: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// An End section of the wrong size.
    #[error("End section at offset {offset} has {len} bytes of payload, expected {expected}")]
    BadEndSize {
        /// Offset of the section header.
        offset: u64,
        /// Its length.
        len: u64,
        /// [`END_SIZE`](crate::END_SIZE).
        expected: u64,
    },
    /// A Text section whose blocks do not parse.
    #[error("Text section: bad block at offset {offset}: {reason}")]
    BadText {
        /// Offset of the block.
        offset: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// End section counts that do not match the file.
    #[error(
        "End section at offset {offset} declares {declared} {what} but the file holds \
         {found}: the profile is inconsistent"
    )]
    EndMismatch {
        /// Offset of the End payload.
        offset: u64,
        /// Which count.
        what: &'static str,
        /// The count in the End section.
        declared: u64,
        /// The count found.
        found: u64,
    },
}

impl ProfileError {
    /// The byte offset the error is about, when it is about the bytes.
    #[must_use]
    pub fn offset(&self) -> Option<u64> {
        match *self {
            Self::Io { .. } => None,
            Self::BadMagic { offset }
            | Self::TruncatedFileHeader { offset }
            | Self::UnsupportedVersion { offset, .. }
            | Self::NonZeroReserved { offset, .. }
            | Self::TruncatedSectionHeader { offset, .. }
            | Self::TruncatedSection { offset, .. }
            | Self::UnknownSection { offset, .. }
            | Self::Checksum { offset, .. }
            | Self::MisplacedSection { offset, .. }
            | Self::MissingEnd { offset }
            | Self::TrailingData { offset, .. }
            | Self::BadJson { offset, .. }
            | Self::ChunkTooLarge { offset, .. }
            | Self::BadRecord { offset, .. }
            | Self::BadEndSize { offset, .. }
            | Self::BadText { offset, .. }
            | Self::BadBlock { offset, .. }
            | Self::BadCode { offset, .. }
            | Self::EndMismatch { offset, .. } => Some(offset),
        }
    }
}

/// What is wrong with one record (shared by the reader and the writer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordProblem {
    /// The ABI decoder refused it (unknown kind, wrong size, non-zero padding, ...).
    #[error("{0}")]
    Abi(dprof_abi::AbiError),
    /// The record runs past the end of its chunk.
    #[error(
        "it needs {needed} bytes but only {available} remain in its chunk (records must not \
         straddle chunks)"
    )]
    Straddles {
        /// Bytes the record needs (16 when even the header is cut).
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// The CPU number is not one the module has.
    #[error("cpu {cpu} is not below the module's nr_cpu_ids {nr_cpu_ids}")]
    Cpu {
        /// CPU in the record.
        cpu: u32,
        /// `nr_cpu_ids` from the header.
        nr_cpu_ids: u32,
    },
}

/// Why a profile could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Creating, writing, syncing or renaming a file failed.
    #[error("cannot {action} {}", path.display())]
    File {
        /// What was being done ("create", "write", "sync", "rename to the final name").
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// Writing to the output failed.
    #[error("cannot write the profile")]
    Io(#[from] io::Error),
    /// The header could not be serialized (not expected to happen).
    #[error("cannot encode the {kind} section as JSON: {message}")]
    Json {
        /// Which section.
        kind: SectionKind,
        /// What serde said.
        message: String,
    },
    /// A section the format does not allow where the writer is: a second Btf section, or one
    /// after records were written.
    #[error("cannot write a {kind} section now: {expected}")]
    MisplacedSection {
        /// The section's kind.
        kind: SectionKind,
        /// What the format allows.
        expected: &'static str,
    },
    /// Bytes handed to [`ProfileEncoder::records`](crate::ProfileEncoder::records) that are not whole, valid records.
    #[error(
        "the device returned a bad record at byte {offset} of a {len}-byte read: {problem} \
         (do the module and dprof agree on the ABI?)"
    )]
    BadRecord {
        /// Offset of the record in the bytes handed in.
        offset: usize,
        /// Length of the bytes handed in.
        len: usize,
        /// What is wrong with it.
        problem: RecordProblem,
    },
}
