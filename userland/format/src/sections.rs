//! The file's framing: its magic, version and sizes, and the kinds of sections.

/// The first 8 bytes of every profile.
pub const MAGIC: [u8; 8] = *b"DPROF\0\r\n";
/// The format version this library writes. Version 2 coded the records in per-CPU blocks;
/// version 3 is version 2 with four watched ranges in `HistoryStart` (ABI 7) instead of two,
/// so that a reader that knows only two refuses the file by its version; version 4 is version
/// 3 with three more words in `ExperimentEnd` (ABI 9: the latency pair's in-flight weighing,
/// the capped pauses), for the same reason.
pub const FORMAT_VERSION: u32 = 4;
/// The format versions this library reads (older `HistoryStart`s and `ExperimentEnd`s are
/// widened as they are read: see `legacy.rs`).
pub const READABLE_VERSIONS: [u32; 4] = [1, 2, 3, FORMAT_VERSION];
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
    /// JSON [`ProfileHeader`](crate::ProfileHeader).
    Header = 1,
    /// Text of `/proc/kallsyms`.
    Kallsyms = 2,
    /// Text of `/proc/modules`.
    Modules = 3,
    /// Whole ABI records (version 1).
    Records = 4,
    /// Counts of what precedes; the last section.
    End = 5,
    /// JSON [`StopInfo`](crate::StopInfo).
    Stop = 6,
    /// Kernel code bytes ([`KernelText`](crate::KernelText)).
    Text = 7,
    /// The raw bytes of `/sys/kernel/btf/vmlinux` (the kernel's type information).
    Btf = 8,
    /// New entries of the code table (version 2).
    Code = 9,
    /// One CPU's records, coded (version 2).
    Block = 10,
    /// JSON [`PageOwners`](crate::PageOwners): what owned the direct-map pages samples
    /// touched.
    PageOwners = 11,
}

impl SectionKind {
    /// The kind with this number, if a format version defines one.
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
            8 => Some(Self::Btf),
            9 => Some(Self::Code),
            10 => Some(Self::Block),
            11 => Some(Self::PageOwners),
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
            Self::Btf => "Btf",
            Self::Code => "Code",
            Self::Block => "Block",
            Self::PageOwners => "PageOwners",
        }
    }
}

impl std::fmt::Display for SectionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
