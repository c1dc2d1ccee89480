//! Reading profiles, streamed: the reader never holds the records in memory.
//!
//! [`Profile::open`] walks the section headers: it reads and CRC-checks the small sections
//! (Header, Kallsyms, Modules, Btf, Stop, End) and seeks over the Records payloads, checking the
//! section order, the chunk size limit, the End section's byte and chunk counts and that nothing
//! follows End. A cut or unfinished file therefore fails at open, before any record is read.
//!
//! [`Profile::records`] then reads one Records chunk at a time into a reused buffer, checks its
//! CRC, checks and decodes each record once, and at the end compares the number of records
//! with the End section: those checks need the payloads, so they happen while iterating and
//! an error can come after records were already yielded.
//!
//! One parser and one iterator serve files and byte vectors ([`Profile::from_bytes`], for tests
//! and the fuzzer): both read through [`Source::read_at`].

use std::fs::File;
use std::iter::FusedIterator;
use std::path::Path;

use dprof_abi::{Record, RecordHeader, RecordView};

use crate::blocks::BlockMerge;
use crate::codec::{BlockHeader, BlockInfo, BlockProblem, BLOCK_HEADER_SIZE, MAX_BLOCK};
use crate::error::ProfileError;
use crate::header::{ProfileHeader, StopInfo};
use crate::layout::{changed, Layout, Source};
use crate::page_owners::PageOwners;
use crate::record_check::{check_record_into, check_record_view};
use crate::sections::{
    SectionKind, END_SIZE, FILE_HEADER_SIZE, FORMAT_VERSION, MAGIC, MAX_RECORDS_CHUNK,
    READABLE_VERSIONS, SECTION_HEADER_SIZE,
};
use crate::text::KernelText;

/// A profile whose structure has been checked: the small sections are in memory, the records
/// stay in the file (or byte vector) until [`Profile::records`] reads them.
#[derive(Debug)]
pub struct Profile {
    pub(crate) source: Source,
    pub(crate) layout: Layout,
}

impl Profile {
    /// Opens the profile at `path` and checks its structure (see the module docs); the records
    /// are read, and checked, by [`Profile::records`].
    ///
    /// # Errors
    /// [`ProfileError::Io`] when the file cannot be read, else the first structural problem
    /// with its offset.
    pub fn open(path: &Path) -> Result<Self, ProfileError> {
        let io_error = |source| ProfileError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io_error)?;
        let len = file.metadata().map_err(io_error)?.len();
        let source = Source::File {
            file,
            path: path.to_path_buf(),
        };
        let layout = parse(&source, len)?;
        Ok(Self { source, layout })
    }

    /// A profile held in `bytes` (copied); checked like [`Profile::open`].
    ///
    /// # Errors
    /// A [`ProfileError`] naming the first structural problem and its offset.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ProfileError> {
        Self::from_vec(bytes.to_vec())
    }

    /// A profile held in `bytes` (taken over); checked like [`Profile::open`].
    ///
    /// # Errors
    /// A [`ProfileError`] naming the first structural problem and its offset.
    pub fn from_vec(bytes: Vec<u8>) -> Result<Self, ProfileError> {
        let len = bytes.len() as u64;
        let source = Source::Memory(bytes);
        let layout = parse(&source, len)?;
        Ok(Self { source, layout })
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
        &self.layout.kallsyms
    }

    /// The `/proc/modules` snapshot.
    #[must_use]
    pub fn modules(&self) -> &[u8] {
        &self.layout.modules
    }

    /// The kernel's BTF (`/sys/kernel/btf/vmlinux`) as collection found it; `None` when the
    /// profile has no Btf section (older profiles, or a kernel without BTF).
    #[must_use]
    pub fn btf(&self) -> Option<&[u8]> {
        self.layout.btf.as_deref()
    }

    /// Kernel code captured at the end of collection (empty when none was).
    #[must_use]
    pub fn text(&self) -> &KernelText {
        &self.layout.text
    }

    /// What owned the direct-map pages the samples touched (empty when the profile has no
    /// `PageOwners` section).
    #[must_use]
    pub fn page_owners(&self) -> &PageOwners {
        &self.layout.page_owners
    }

    /// Number of records the End section declares. Checked against the records when
    /// [`Profile::records`] reaches the end (or by [`Profile::validate`]), not at open.
    #[must_use]
    pub fn record_count(&self) -> u64 {
        self.layout.end[0]
    }

    /// Bytes of records (checked against the Records sections at open).
    #[must_use]
    pub fn record_bytes(&self) -> u64 {
        self.layout.end[1]
    }

    /// Number of Records sections (checked at open).
    #[must_use]
    pub fn chunk_count(&self) -> u64 {
        self.layout.end[2]
    }

    /// Size of the whole file.
    #[must_use]
    pub fn file_size(&self) -> u64 {
        self.layout.file_size
    }

    /// Every record, read one chunk (version 1) or one block per CPU (version 2) at a time.
    /// Version 1 yields them in file order; version 2 in time order across CPUs (see
    /// [`crate::blocks`]). Each chunk's or block's CRC and each record are checked as they are
    /// read, and the number of records against the End section at the end; the first problem
    /// is yielded as an error and ends the iteration.
    #[must_use]
    pub fn records(&self) -> Records<'_> {
        let inner = if self.layout.version == 1 {
            Inner::Chunks(ChunkReader {
                buf: Vec::new(),
                chunk_len: 0,
                pos: 0,
                payload_offset: 0,
                next_section: self.layout.records_start,
                next_header: None,
                chunks_left: self.layout.end[2],
            })
        } else {
            Inner::Blocks(Box::new(BlockMerge::new(&self.layout)))
        };
        Records {
            profile: self,
            inner,
            yielded: 0,
            nr_cpu_ids: self.layout.header.module.nr_cpu_ids,
            done: false,
            record: Record::Lost(dprof_abi::Lost { count: 0 }),
            last_size: 0,
        }
    }

    /// Reads and checks every record, for callers that want the whole file checked before
    /// they use it. Returns the number of records.
    ///
    /// # Errors
    /// The first problem [`Profile::records`] finds.
    pub fn validate(&self) -> Result<u64, ProfileError> {
        let mut n = 0;
        for item in self.records() {
            item?;
            n += 1;
        }
        Ok(n)
    }

    /// The file's format version (1 or 2).
    #[must_use]
    pub fn version(&self) -> u32 {
        self.layout.version
    }

    /// Distinct sampled instructions in the code table (0 for version 1, which has none).
    #[must_use]
    pub fn code_entries(&self) -> usize {
        self.layout.code.len()
    }
}

/// Iterator over the records of a [`Profile`]: `Ok` records until the end or the first
/// error, which is yielded once and ends the iteration.
pub struct Records<'a> {
    profile: &'a Profile,
    inner: Inner,
    /// Records yielded so far.
    yielded: u64,
    nr_cpu_ids: u32,
    done: bool,
    /// Where each record is decoded (see [`Records::next_with`]).
    record: Record,
    /// Bytes the last record took in the file.
    last_size: usize,
}

/// Where the records come from.
enum Inner {
    /// Version 1: Records sections, in file order.
    Chunks(ChunkReader),
    /// Version 2: Block sections, merged in time order.
    Blocks(Box<BlockMerge>),
}

/// Version 1's Records sections, one at a time.
struct ChunkReader {
    /// The current chunk's payload, then the header of the section after it (read together,
    /// one read per chunk). Reused: at most [`MAX_RECORDS_CHUNK`] + a section header.
    buf: Vec<u8>,
    /// Bytes of payload in `buf`.
    chunk_len: usize,
    /// Position of the next record in `buf`.
    pos: usize,
    /// File offset of the current chunk's payload.
    payload_offset: u64,
    /// File offset of the next section header.
    next_section: u64,
    /// That header, when it came with the previous chunk.
    next_header: Option<[u8; SECTION_HEADER_SIZE]>,
    chunks_left: u64,
}

impl std::fmt::Debug for Records<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records")
            .field("yielded", &self.yielded)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// The next record's wire bytes, before they are checked.
struct Wire<'b> {
    bytes: &'b [u8],
    /// File offset of the record (of its coded bytes in version 2).
    offset: u64,
    /// Bytes it takes in the file; 0 for version 1, where its header says.
    coded: usize,
}

impl ChunkReader {
    /// Reads the next Records section into `buf` and checks its CRC.
    fn load_chunk(&mut self, profile: &Profile) -> Result<(), ProfileError> {
        let source = &profile.source;
        let offset = self.next_section;
        let header = if let Some(h) = self.next_header.take() {
            h
        } else {
            let mut h = [0; SECTION_HEADER_SIZE];
            source.read_at(offset, &mut h)?;
            h
        };
        let (kind, stored, declared) = section_header(&header);
        let payload_offset = offset + SECTION_HEADER_SIZE as u64;
        // Open found a Records section here that ends before the Stop section; anything else
        // means the file changed since.
        let room = profile.layout.records_end.saturating_sub(payload_offset);
        let len = match usize::try_from(declared) {
            Ok(len)
                if kind == SectionKind::Records as u32
                    && len <= MAX_RECORDS_CHUNK
                    && declared <= room =>
            {
                len
            }
            _ => return Err(changed(source, offset)),
        };
        // The payload and the header of the next section (at worst the Stop section's).
        let total = len + SECTION_HEADER_SIZE;
        if self.buf.len() < total {
            self.buf.resize(total, 0);
        }
        let buf = &mut self.buf[..total];
        source.read_at(payload_offset, buf)?;
        let (payload, next) = buf.split_at(len);
        let computed = crc32fast::hash(payload);
        if computed != stored {
            return Err(ProfileError::Checksum {
                offset,
                kind: SectionKind::Records,
                stored,
                computed,
            });
        }
        self.next_header = next.try_into().ok();
        let len = match crate::legacy::widen_old_records(payload) {
            Some(wide) => {
                let len = wide.len();
                self.buf.clear();
                self.buf.extend_from_slice(&wide);
                len
            }
            None => len,
        };
        self.chunk_len = len;
        self.pos = 0;
        self.payload_offset = payload_offset;
        self.next_section = payload_offset + declared;
        self.chunks_left -= 1;
        Ok(())
    }

    /// The bytes from the next record to the end of its chunk, loading chunks as needed.
    fn next(&mut self, profile: &Profile) -> Result<Option<Wire<'_>>, ProfileError> {
        while self.pos >= self.chunk_len {
            if self.chunks_left == 0 {
                if self.next_section != profile.layout.records_end {
                    return Err(changed(&profile.source, self.next_section));
                }
                return Ok(None);
            }
            self.load_chunk(profile)?;
        }
        Ok(Some(Wire {
            bytes: &self.buf[self.pos..self.chunk_len],
            offset: self.payload_offset + self.pos as u64,
            coded: 0,
        }))
    }
}

impl Inner {
    fn next<'b>(&'b mut self, profile: &Profile) -> Result<Option<Wire<'b>>, ProfileError> {
        match self {
            Self::Chunks(chunks) => chunks.next(profile),
            Self::Blocks(merge) => {
                Ok(merge.next(&profile.source, &profile.layout)?.map(|d| Wire {
                    bytes: d.wire,
                    offset: d.offset,
                    coded: d.coded,
                }))
            }
        }
    }

    /// After the record just checked, of `size` wire bytes.
    fn consumed(&mut self, size: usize) {
        if let Self::Chunks(chunks) = self {
            chunks.pos += size;
        }
    }
}

impl Records<'_> {
    /// Bytes the iterator's buffers hold: one chunk and a section header at most (version
    /// 1), one block per CPU (version 2). The tests check that memory does not grow with the
    /// file.
    #[must_use]
    pub fn buffer_capacity(&self) -> usize {
        match &self.inner {
            Inner::Chunks(chunks) => chunks.buf.capacity(),
            Inner::Blocks(merge) => merge.buffer_capacity(),
        }
    }

    /// Bytes the last record yielded takes in the file: its size in version 1, its coded
    /// size in version 2 (block and section headers and the code table not counted).
    #[must_use]
    pub fn last_record_file_bytes(&self) -> usize {
        self.last_size
    }

    /// After the last record: the records must be those the End section counts.
    fn finish(&self) -> Result<(), ProfileError> {
        let layout = &self.profile.layout;
        let declared = layout.end[0];
        if self.yielded != declared {
            return Err(ProfileError::EndMismatch {
                offset: layout.end_payload,
                what: END_COUNTS[0],
                declared,
                found: self.yielded,
            });
        }
        Ok(())
    }

    /// Ends the iteration with `e`.
    fn fail<R>(&mut self, e: ProfileError) -> Result<R, ProfileError> {
        self.done = true;
        Err(e)
    }

    /// Reads the next record and hands it to `f` by reference: what the iterator does, without
    /// moving the record through `Option<Result<..>>` (a sample is a few hundred bytes, and the
    /// analysis reads millions of them).
    ///
    /// # Errors
    /// As [`Iterator::next`]: the first problem found, once.
    pub fn next_with<R>(
        &mut self,
        f: impl FnOnce(&RecordHeader, &Record) -> R,
    ) -> Option<Result<R, ProfileError>> {
        if self.done {
            return None;
        }
        let profile = self.profile;
        let wire = match self.inner.next(profile) {
            Ok(Some(wire)) => wire,
            Ok(None) => {
                self.done = true;
                return self.finish().err().map(Err);
            }
            Err(e) => return Some(self.fail(e)),
        };
        match check_record_into(wire.bytes, self.nr_cpu_ids, &mut self.record) {
            Ok((header, size)) => {
                self.last_size = if wire.coded == 0 { size } else { wire.coded };
                self.inner.consumed(size);
                self.yielded += 1;
                Some(Ok(f(&header, &self.record)))
            }
            Err(problem) => {
                let offset = wire.offset;
                Some(self.fail(ProfileError::BadRecord { offset, problem }))
            }
        }
    }

    /// The bytes of the records still to come in the current chunk (its CRC checked, each
    /// record not yet): for read-ahead hints, such as prefetching what the next record will
    /// need, never for results. Empty for version 2, whose records are coded.
    #[must_use]
    pub fn upcoming(&self) -> &[u8] {
        match &self.inner {
            Inner::Chunks(c) => c.buf.get(c.pos..c.chunk_len).unwrap_or_default(),
            Inner::Blocks(_) => &[],
        }
    }

    /// [`Records::next_with`], handing access samples over in place ([`RecordView`]): a
    /// reader that needs a few fields of each sample does not copy the whole sample.
    ///
    /// # Errors
    /// As [`Iterator::next`]: the first problem found, once.
    pub fn next_view_with<R>(
        &mut self,
        f: impl FnOnce(&RecordHeader, RecordView<'_>) -> R,
    ) -> Option<Result<R, ProfileError>> {
        if self.done {
            return None;
        }
        let profile = self.profile;
        let Self {
            inner,
            record,
            nr_cpu_ids,
            ..
        } = self;
        let wire = match inner.next(profile) {
            Ok(Some(wire)) => wire,
            Ok(None) => {
                self.done = true;
                return self.finish().err().map(Err);
            }
            Err(e) => return Some(self.fail(e)),
        };
        let (offset, coded) = (wire.offset, wire.coded);
        match check_record_view(wire.bytes, *nr_cpu_ids, record) {
            Ok((header, view)) => {
                let size = usize::from(header.size);
                let result = f(&header, view);
                self.last_size = if coded == 0 { size } else { coded };
                self.inner.consumed(size);
                self.yielded += 1;
                Some(Ok(result))
            }
            Err(problem) => Some(self.fail(ProfileError::BadRecord { offset, problem })),
        }
    }
}

impl Iterator for Records<'_> {
    type Item = Result<(RecordHeader, Record), ProfileError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(|header, record| (*header, *record))
    }
}

impl FusedIterator for Records<'_> {}

/// Kind, CRC-32 and payload length of a section header.
fn section_header(h: &[u8; SECTION_HEADER_SIZE]) -> (u32, u32, u64) {
    let [k0, k1, k2, k3, c0, c1, c2, c3, l0, l1, l2, l3, l4, l5, l6, l7] = *h;
    (
        u32::from_le_bytes([k0, k1, k2, k3]),
        u32::from_le_bytes([c0, c1, c2, c3]),
        u64::from_le_bytes([l0, l1, l2, l3, l4, l5, l6, l7]),
    )
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
    /// The Btf section, or what may come in the body.
    Btf,
    /// Records sections, the `PageOwners`, Text or Stop section.
    Body,
    /// The Text or Stop section (after `PageOwners`).
    Text,
    /// The Stop section (after Text).
    Stop,
    End,
}

/// Checks the file header and the sections' order, sizes and (except Records) CRCs of a
/// source of `len` bytes, and reads the small sections.
#[expect(
    clippy::too_many_lines,
    reason = "one match over (expected, found) section is the format's grammar in one place"
)]
fn parse(source: &Source, len: u64) -> Result<Layout, ProfileError> {
    let mut file_header = [0u8; FILE_HEADER_SIZE];
    let have = len.min(FILE_HEADER_SIZE as u64) as usize;
    source.read_at(0, &mut file_header[..have])?;
    let magic_len = have.min(MAGIC.len());
    if file_header.get(..magic_len) != MAGIC.get(..magic_len) {
        return Err(ProfileError::BadMagic { offset: 0 });
    }
    if have < FILE_HEADER_SIZE {
        return Err(ProfileError::TruncatedFileHeader { offset: len });
    }
    let [_, _, _, _, _, _, _, _, v0, v1, v2, v3, r0, r1, r2, r3] = file_header;
    let version = u32::from_le_bytes([v0, v1, v2, v3]);
    if !READABLE_VERSIONS.contains(&version) {
        return Err(ProfileError::UnsupportedVersion {
            offset: 8,
            version,
            supported: FORMAT_VERSION,
        });
    }
    let reserved = u32::from_le_bytes([r0, r1, r2, r3]);
    if reserved != 0 {
        return Err(ProfileError::NonZeroReserved {
            offset: 12,
            value: reserved,
        });
    }

    let mut expect = Expect::Header;
    let mut header: Option<ProfileHeader> = None;
    let mut stop: Option<StopInfo> = None;
    let mut kallsyms = Vec::new();
    let mut modules = Vec::new();
    let mut btf = None;
    let mut text = KernelText::new();
    let mut page_owners = PageOwners::default();
    let mut code = Vec::new();
    let mut blocks = Vec::new();
    let mut block_records = 0u64;
    let nr_cpu_ids =
        |header: &Option<ProfileHeader>| header.as_ref().map_or(0, |h| h.module.nr_cpu_ids);
    let mut chunks = 0u64;
    let mut record_bytes = 0u64;
    let mut records_start = 0;
    let mut records_end = 0;
    let mut pos = FILE_HEADER_SIZE as u64;

    loop {
        let Section {
            kind,
            payload,
            end: section_end,
        } = read_section(source, len, pos, version)?;
        let offset = pos;
        let payload_offset = pos + SECTION_HEADER_SIZE as u64;
        let misplaced = |expected| {
            Err(ProfileError::MisplacedSection {
                offset,
                kind,
                expected,
            })
        };
        match (expect, kind) {
            (Expect::Header, SectionKind::Header) => {
                header = Some(parse_json(&payload, payload_offset, kind)?);
                expect = Expect::Kallsyms;
            }
            (Expect::Header, _) => return misplaced("a profile starts with its Header section"),
            (Expect::Kallsyms, SectionKind::Kallsyms) => {
                kallsyms = payload;
                expect = Expect::Modules;
            }
            (Expect::Kallsyms, _) => {
                return misplaced("the Header section must be followed by the Kallsyms section")
            }
            (Expect::Modules, SectionKind::Modules) => {
                modules = payload;
                records_start = section_end;
                expect = Expect::Btf;
            }
            (Expect::Modules, _) => {
                return misplaced("the Kallsyms section must be followed by the Modules section")
            }
            (Expect::Btf, SectionKind::Btf) => {
                btf = Some(payload);
                records_start = section_end;
                expect = Expect::Body;
            }
            (Expect::Body | Expect::Text | Expect::Stop | Expect::End, SectionKind::Btf) => {
                return misplaced(
                    "a profile has at most one Btf section, right after the Modules section",
                )
            }
            (Expect::Btf | Expect::Body, SectionKind::Records) if version == 1 => {
                // Its CRC and records are checked when the records are read.
                record_bytes += section_end - payload_offset;
                chunks += 1;
                // No Btf section after records.
                expect = Expect::Body;
            }
            (Expect::Btf | Expect::Body, SectionKind::Code) if version >= 2 => {
                crate::code::decode_section(&payload, &mut code).map_err(|(at, reason)| {
                    ProfileError::BadCode {
                        offset: payload_offset + at as u64,
                        reason,
                    }
                })?;
                expect = Expect::Body;
            }
            (Expect::Btf | Expect::Body, SectionKind::Block) if version >= 2 => {
                // `payload` is the block header; the CRC and records are checked when the
                // records are read.
                let block =
                    BlockHeader::decode(&payload).map_err(|problem| ProfileError::BadBlock {
                        offset: payload_offset,
                        problem,
                    })?;
                let cpus = nr_cpu_ids(&header);
                if block.cpu >= cpus {
                    return Err(ProfileError::BadBlock {
                        offset: payload_offset,
                        problem: BlockProblem::Cpu {
                            cpu: block.cpu,
                            nr_cpu_ids: cpus,
                        },
                    });
                }
                block_records += u64::from(block.records);
                blocks.push(BlockInfo {
                    offset,
                    len: section_end - payload_offset,
                    header: block,
                });
                record_bytes += section_end - payload_offset;
                chunks += 1;
                expect = Expect::Body;
            }
            (
                Expect::Btf | Expect::Body,
                SectionKind::Records | SectionKind::Code | SectionKind::Block,
            ) => {
                return misplaced(if version == 1 {
                    "a version 1 profile holds its records in Records sections, after the \
                     Modules or Btf section"
                } else {
                    "a version 2 profile holds its records in Code and Block sections, after \
                     the Modules or Btf section"
                })
            }
            (Expect::Btf | Expect::Body, SectionKind::PageOwners) => {
                page_owners = parse_json(&payload, payload_offset, kind)?;
                records_end = offset;
                expect = Expect::Text;
            }
            (Expect::Btf | Expect::Body | Expect::Text, SectionKind::Text) => {
                text = KernelText::decode(&payload, payload_offset)?;
                if expect != Expect::Text {
                    records_end = offset;
                }
                expect = Expect::Stop;
            }
            (Expect::Btf | Expect::Body | Expect::Text | Expect::Stop, SectionKind::Stop) => {
                stop = Some(parse_json(&payload, payload_offset, kind)?);
                if matches!(expect, Expect::Btf | Expect::Body) {
                    records_end = offset;
                }
                expect = Expect::End;
            }
            (Expect::Text, _) => {
                return misplaced(
                    "the PageOwners section must be followed by the Text or the Stop section",
                )
            }
            (Expect::Stop, _) => {
                return misplaced("the Text section must be followed by the Stop section")
            }
            (Expect::Btf | Expect::Body, SectionKind::End) => {
                return misplaced("the Stop section must come before the End section")
            }
            (Expect::Btf | Expect::Body, _) => return misplaced("the file already has one"),
            (Expect::End, SectionKind::End) => {
                let end = check_end(&payload, offset, payload_offset, record_bytes, chunks)?;
                if version >= 2 && end[0] != block_records {
                    return Err(ProfileError::EndMismatch {
                        offset: payload_offset,
                        what: END_COUNTS[0],
                        declared: end[0],
                        found: block_records,
                    });
                }
                if section_end != len {
                    return Err(ProfileError::TrailingData {
                        offset: section_end,
                        extra: len - section_end,
                    });
                }
                // Both are set: the order above admits End only after Header and Stop.
                let (Some(header), Some(stop)) = (header, stop) else {
                    return misplaced("a profile needs a Header and a Stop section");
                };
                return Ok(Layout {
                    version,
                    code,
                    blocks,
                    header,
                    stop,
                    kallsyms,
                    modules,
                    btf,
                    text,
                    page_owners,
                    records_start,
                    records_end,
                    end,
                    end_payload: payload_offset,
                    file_size: len,
                });
            }
            (Expect::End, _) => {
                return misplaced("only the End section may follow the Stop section")
            }
        }
        pos = section_end;
    }
}

struct Section {
    kind: SectionKind,
    /// The payload, CRC-checked; empty for a Records section and only the block header for
    /// a Block section, which are not read here.
    payload: Vec<u8>,
    /// Offset just past the payload.
    end: u64,
}

/// Reads and checks the section whose header is at `pos` of a source of `len` bytes: known
/// kind, whole, and, except for Records and Block sections, CRC right. A Block section's
/// payload is read only as far as its block header.
fn read_section(
    source: &Source,
    len: u64,
    pos: u64,
    version: u32,
) -> Result<Section, ProfileError> {
    let available = len.saturating_sub(pos);
    if available == 0 {
        return Err(ProfileError::MissingEnd { offset: len });
    }
    if available < SECTION_HEADER_SIZE as u64 {
        return Err(ProfileError::TruncatedSectionHeader {
            offset: len,
            available,
        });
    }
    let mut h = [0u8; SECTION_HEADER_SIZE];
    source.read_at(pos, &mut h)?;
    let (raw_kind, stored, declared) = section_header(&h);
    let Some(kind) = SectionKind::from_u32(raw_kind) else {
        return Err(ProfileError::UnknownSection {
            offset: pos,
            kind: raw_kind,
        });
    };
    if kind == SectionKind::Records && declared > MAX_RECORDS_CHUNK as u64 {
        return Err(ProfileError::ChunkTooLarge {
            offset: pos,
            len: declared,
            max: MAX_RECORDS_CHUNK as u64,
        });
    }
    let start = pos + SECTION_HEADER_SIZE as u64;
    // Compared with what the file holds before anything is allocated, so a huge declared
    // length is caught here.
    if declared > len - start {
        return Err(ProfileError::TruncatedSection {
            offset: len,
            kind,
            declared,
        });
    }
    let end = start + declared;
    if kind == SectionKind::Records {
        return Ok(Section {
            kind,
            payload: Vec::new(),
            end,
        });
    }
    if kind == SectionKind::Block && version >= 2 {
        if declared > MAX_BLOCK as u64 {
            return Err(ProfileError::BadBlock {
                offset: pos,
                problem: BlockProblem::TooLarge { len: declared },
            });
        }
        let head = (declared as usize).min(BLOCK_HEADER_SIZE);
        return Ok(Section {
            kind,
            payload: source.read_vec(start, head)?,
            end,
        });
    }
    let size = usize::try_from(declared).map_err(|_| ProfileError::TruncatedSection {
        offset: len,
        kind,
        declared,
    })?;
    let payload = source.read_vec(start, size)?;
    let computed = crc32fast::hash(&payload);
    if computed != stored {
        return Err(ProfileError::Checksum {
            offset: pos,
            kind,
            stored,
            computed,
        });
    }
    Ok(Section { kind, payload, end })
}

/// What the End section's counts are, in order, as [`ProfileError::EndMismatch`] names them.
const END_COUNTS: [&str; 3] = ["records", "bytes of records", "Records sections"];

/// Checks the End section's size and its byte and chunk counts against what the section
/// headers say; returns its three counts (the record count is checked by the iterator).
fn check_end(
    payload: &[u8],
    offset: u64,
    payload_offset: u64,
    record_bytes: u64,
    chunks: u64,
) -> Result<[u64; 3], ProfileError> {
    if payload.len() != END_SIZE {
        return Err(ProfileError::BadEndSize {
            offset,
            len: payload.len() as u64,
            expected: END_SIZE as u64,
        });
    }
    let declared = [0, 1, 2].map(|i| u64_at(payload, i * 8).unwrap_or(u64::MAX));
    for i in [1, 2] {
        let found = [0, record_bytes, chunks][i];
        if declared[i] != found {
            return Err(ProfileError::EndMismatch {
                offset: payload_offset + (i * 8) as u64,
                what: END_COUNTS[i],
                declared: declared[i],
                found,
            });
        }
    }
    Ok(declared)
}
