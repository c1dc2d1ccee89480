//! Reading profiles. [`Profile::from_bytes`] is the whole validator and works on a byte slice
//! (no I/O), so it can be tested with byte vectors and fuzzed; [`Profile::open`] only reads
//! the file into memory first.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use dprof_abi::{CacheInfo, Record, RecordHeader};

use super::{
    check_record, ProfileError, ProfileHeader, SectionKind, StopInfo, END_SIZE, FILE_HEADER_SIZE,
    FORMAT_VERSION, MAGIC, MAX_RECORDS_CHUNK, SECTION_HEADER_SIZE,
};

/// A complete, validated profile held in memory.
#[derive(Clone, Debug)]
pub struct Profile {
    bytes: Vec<u8>,
    layout: Layout,
}

/// Where things are in the bytes, found by [`parse`].
#[derive(Clone, Debug)]
struct Layout {
    header: ProfileHeader,
    stop: StopInfo,
    kallsyms: Range<usize>,
    modules: Range<usize>,
    chunks: Vec<Range<usize>>,
    records: u64,
    record_bytes: u64,
}

impl Profile {
    /// Reads and validates the profile at `path`.
    ///
    /// # Errors
    /// [`ProfileError::Io`] when the file cannot be read, else whatever
    /// [`Profile::from_bytes`] finds.
    pub fn open(path: &Path) -> Result<Self, ProfileError> {
        let bytes = std::fs::read(path).map_err(|source| ProfileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_vec(bytes)
    }

    /// Validates a profile held in `bytes` (copied).
    ///
    /// # Errors
    /// A [`ProfileError`] naming the first problem and its offset.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ProfileError> {
        let layout = parse(bytes)?;
        Ok(Self {
            bytes: bytes.to_vec(),
            layout,
        })
    }

    /// Validates a profile held in `bytes` (taken over).
    ///
    /// # Errors
    /// A [`ProfileError`] naming the first problem and its offset.
    pub fn from_vec(bytes: Vec<u8>) -> Result<Self, ProfileError> {
        let layout = parse(&bytes)?;
        Ok(Self { bytes, layout })
    }

    /// The Header section.
    #[must_use]
    pub fn header(&self) -> &ProfileHeader {
        &self.layout.header
    }

    /// The Stop section.
    #[must_use]
    pub fn stop(&self) -> &StopInfo {
        &self.layout.stop
    }

    /// The `/proc/kallsyms` snapshot.
    #[must_use]
    pub fn kallsyms(&self) -> &[u8] {
        self.bytes.get(self.layout.kallsyms.clone()).unwrap_or(&[])
    }

    /// The `/proc/modules` snapshot.
    #[must_use]
    pub fn modules(&self) -> &[u8] {
        self.bytes.get(self.layout.modules.clone()).unwrap_or(&[])
    }

    /// Number of records.
    #[must_use]
    pub fn record_count(&self) -> u64 {
        self.layout.records
    }

    /// Bytes of records.
    #[must_use]
    pub fn record_bytes(&self) -> u64 {
        self.layout.record_bytes
    }

    /// Number of Records sections.
    #[must_use]
    pub fn chunk_count(&self) -> usize {
        self.layout.chunks.len()
    }

    /// Size of the whole file.
    #[must_use]
    pub fn file_size(&self) -> usize {
        self.bytes.len()
    }

    /// Every record, in file order.
    #[must_use]
    pub fn records(&self) -> Records<'_> {
        Records {
            bytes: &self.bytes,
            chunks: self.layout.chunks.iter(),
            current: &[],
        }
    }

    /// The first [`CacheInfo`] of each cache, by cache identifier (`struct kmem_cache`
    /// address, as in `Alloc::cache` and `Free::cache`).
    #[must_use]
    pub fn cache_infos(&self) -> BTreeMap<u64, CacheInfo> {
        let mut map = BTreeMap::new();
        for (_, record) in self.records() {
            if let Record::CacheInfo(info) = record {
                map.entry(info.cache).or_insert(info);
            }
        }
        map
    }
}

/// Iterator over the records of a [`Profile`], in file order.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    bytes: &'a [u8],
    chunks: std::slice::Iter<'a, Range<usize>>,
    current: &'a [u8],
}

impl Iterator for Records<'_> {
    type Item = (RecordHeader, Record);

    fn next(&mut self) -> Option<Self::Item> {
        while self.current.is_empty() {
            self.current = self.bytes.get(self.chunks.next()?.clone())?;
        }
        // Every record was checked when the profile was opened, so this cannot fail; should
        // it, iteration ends rather than panicking.
        let (header, record) = Record::decode(self.current).ok()?;
        self.current = self.current.get(usize::from(header.size)..)?;
        Some((header, record))
    }
}

/// The JSON of a Header or Stop section; an error names the section and its offset.
fn parse_json<T: serde::de::DeserializeOwned>(
    payload: &[u8],
    offset: u64,
    kind: SectionKind,
) -> Result<T, ProfileError> {
    serde_json::from_slice(payload).map_err(|e| ProfileError::BadJson {
        offset,
        kind,
        message: e.to_string(),
    })
}

fn u32_at(bytes: &[u8], pos: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(pos..pos.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

fn u64_at(bytes: &[u8], pos: usize) -> Option<u64> {
    let b: [u8; 8] = bytes.get(pos..pos.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// Where the parser is in the fixed section order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Header,
    Kallsyms,
    Modules,
    /// Records sections or the Stop section.
    Body,
    End,
}

/// Validates the whole profile and finds its sections.
#[allow(
    clippy::too_many_lines,
    reason = "one match over (expected, found) section is the format's grammar in one place"
)]
fn parse(bytes: &[u8]) -> Result<Layout, ProfileError> {
    let len = bytes.len();
    let magic_len = len.min(MAGIC.len());
    if bytes.get(..magic_len) != MAGIC.get(..magic_len) {
        return Err(ProfileError::BadMagic { offset: 0 });
    }
    if len < FILE_HEADER_SIZE {
        return Err(ProfileError::TruncatedFileHeader { offset: len as u64 });
    }
    let version = u32_at(bytes, 8).unwrap_or(0);
    if version != FORMAT_VERSION {
        return Err(ProfileError::UnsupportedVersion {
            offset: 8,
            version,
            supported: FORMAT_VERSION,
        });
    }
    let reserved = u32_at(bytes, 12).unwrap_or(0);
    if reserved != 0 {
        return Err(ProfileError::NonZeroReserved {
            offset: 12,
            value: reserved,
        });
    }

    let mut expect = Expect::Header;
    let mut header: Option<ProfileHeader> = None;
    let mut stop: Option<StopInfo> = None;
    let mut kallsyms = 0..0;
    let mut modules = 0..0;
    let mut chunks = Vec::new();
    let mut records = 0u64;
    let mut record_bytes = 0u64;
    let mut pos = FILE_HEADER_SIZE;

    loop {
        let section = read_section(bytes, pos)?;
        let Section {
            kind,
            payload,
            range,
        } = section;
        let offset = pos as u64;
        let payload_offset = range.start as u64;
        let misplaced = |expected| {
            Err(ProfileError::MisplacedSection {
                offset,
                kind,
                expected,
            })
        };
        match (expect, kind) {
            (Expect::Header, SectionKind::Header) => {
                header = Some(parse_json(payload, payload_offset, kind)?);
                expect = Expect::Kallsyms;
            }
            (Expect::Header, _) => return misplaced("a profile starts with its Header section"),
            (Expect::Kallsyms, SectionKind::Kallsyms) => {
                kallsyms = range.clone();
                expect = Expect::Modules;
            }
            (Expect::Kallsyms, _) => {
                return misplaced("the Header section must be followed by the Kallsyms section")
            }
            (Expect::Modules, SectionKind::Modules) => {
                modules = range.clone();
                expect = Expect::Body;
            }
            (Expect::Modules, _) => {
                return misplaced("the Kallsyms section must be followed by the Modules section")
            }
            (Expect::Body, SectionKind::Records) => {
                let nr_cpu_ids = header.as_ref().map_or(0, |h| h.module.nr_cpu_ids);
                records += check_chunk(payload, range.start, nr_cpu_ids)?;
                record_bytes += payload.len() as u64;
                chunks.push(range.clone());
            }
            (Expect::Body, SectionKind::Stop) => {
                stop = Some(parse_json(payload, payload_offset, kind)?);
                expect = Expect::End;
            }
            (Expect::Body, SectionKind::End) => {
                return misplaced("the Stop section must come before the End section")
            }
            (Expect::Body, _) => return misplaced("the file already has one"),
            (Expect::End, SectionKind::End) => {
                check_end(
                    payload,
                    offset,
                    payload_offset,
                    [records, record_bytes, chunks.len() as u64],
                )?;
                if range.end != len {
                    return Err(ProfileError::TrailingData {
                        offset: range.end as u64,
                        extra: (len - range.end) as u64,
                    });
                }
                // Both are set: the order above admits End only after Header and Stop.
                let (Some(header), Some(stop)) = (header, stop) else {
                    return misplaced("a profile needs a Header and a Stop section");
                };
                return Ok(Layout {
                    header,
                    stop,
                    kallsyms,
                    modules,
                    chunks,
                    records,
                    record_bytes,
                });
            }
            (Expect::End, _) => {
                return misplaced("only the End section may follow the Stop section")
            }
        }
        pos = range.end;
    }
}

struct Section<'a> {
    kind: SectionKind,
    payload: &'a [u8],
    range: Range<usize>,
}

/// Reads and checks the section whose header is at `pos`: known kind, whole, CRC right.
fn read_section(bytes: &[u8], pos: usize) -> Result<Section<'_>, ProfileError> {
    let len = bytes.len();
    let available = len.saturating_sub(pos);
    if available == 0 {
        return Err(ProfileError::MissingEnd { offset: len as u64 });
    }
    let offset = pos as u64;
    let (Some(raw_kind), Some(stored), Some(declared)) = (
        u32_at(bytes, pos),
        u32_at(bytes, pos + 4),
        u64_at(bytes, pos + 8),
    ) else {
        return Err(ProfileError::TruncatedSectionHeader {
            offset: len as u64,
            available: available as u64,
        });
    };
    let Some(kind) = SectionKind::from_u32(raw_kind) else {
        return Err(ProfileError::UnknownSection {
            offset,
            kind: raw_kind,
        });
    };
    if kind == SectionKind::Records && declared > MAX_RECORDS_CHUNK as u64 {
        return Err(ProfileError::ChunkTooLarge {
            offset,
            len: declared,
            max: MAX_RECORDS_CHUNK as u64,
        });
    }
    let start = pos + SECTION_HEADER_SIZE;
    // Compared in u64 before any conversion, so a huge declared length is caught here.
    let end = match usize::try_from(declared) {
        Ok(d) if declared <= (len - start) as u64 => start + d,
        _ => {
            return Err(ProfileError::TruncatedSection {
                offset: len as u64,
                kind,
                declared,
            })
        }
    };
    let payload = bytes.get(start..end).unwrap_or(&[]);
    let computed = crc32fast::hash(payload);
    if computed != stored {
        return Err(ProfileError::Checksum {
            offset,
            kind,
            stored,
            computed,
        });
    }
    Ok(Section {
        kind,
        payload,
        range: start..end,
    })
}

/// Checks every record of a Records section whose payload starts at file offset `base`;
/// returns how many there are.
fn check_chunk(payload: &[u8], base: usize, nr_cpu_ids: u32) -> Result<u64, ProfileError> {
    let mut count = 0;
    let mut pos = 0;
    while let Some(rest) = payload.get(pos..).filter(|r| !r.is_empty()) {
        let (_, _, size) =
            check_record(rest, nr_cpu_ids).map_err(|problem| ProfileError::BadRecord {
                offset: (base + pos) as u64,
                problem,
            })?;
        pos += size;
        count += 1;
    }
    Ok(count)
}

/// Checks the End section's counts against `found` (records, record bytes, chunks).
fn check_end(
    payload: &[u8],
    offset: u64,
    payload_offset: u64,
    found: [u64; 3],
) -> Result<(), ProfileError> {
    if payload.len() != END_SIZE {
        return Err(ProfileError::BadEndSize {
            offset,
            len: payload.len() as u64,
            expected: END_SIZE as u64,
        });
    }
    let what = ["records", "bytes of records", "Records sections"];
    for (i, (what, found)) in what.into_iter().zip(found).enumerate() {
        let declared = u64_at(payload, i * 8).unwrap_or(u64::MAX);
        if declared != found {
            return Err(ProfileError::EndMismatch {
                offset: payload_offset + (i * 8) as u64,
                what,
                declared,
                found,
            });
        }
    }
    Ok(())
}
