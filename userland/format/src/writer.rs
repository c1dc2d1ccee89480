//! Writing profiles: [`ProfileEncoder`] streams sections to any `Write`; [`ProfileWriter`] puts
//! that in a `.partial` file and renames it only once the End section is on disk.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use dprof_abi::RecordKind;

use crate::code::{CodeInterner, HitRegisterFilter, HitRegisters, RegisterFilter};
use crate::codec::{encode_record, BlockHeader, StreamState, BLOCK_HEADER_SIZE, WRITTEN_BLOCK};
use crate::error::WriteError;
use crate::header::{ProfileHeader, StopInfo};
use crate::page_owners::PageOwners;
use crate::record_check::check_record_view;
use crate::sections::{
    SectionKind, END_SIZE, FILE_HEADER_SIZE, FORMAT_VERSION, MAGIC, SECTION_HEADER_SIZE,
};
use crate::text::KernelText;

/// Writes a profile section by section to `W`. The Header, Kallsyms and Modules sections go
/// out in [`ProfileEncoder::new`], the optional Btf section in [`ProfileEncoder::btf`] (refused
/// once records are written), Code and Block sections as [`ProfileEncoder::records`] fills
/// each CPU's block, and the last blocks, the Stop and End sections in
/// [`ProfileEncoder::finish`], so the sections can only come in the order the format requires.
#[derive(Debug)]
pub struct ProfileEncoder<W: Write> {
    out: W,
    nr_cpu_ids: u32,
    /// Records handed in.
    records: u64,
    /// Bytes of the Block sections' payloads written.
    record_bytes: u64,
    /// Block sections written.
    chunks: u64,
    /// Whether the Btf section is written: the format allows one.
    btf_written: bool,
    code: CodeInterner,
    /// Which registers history hits keep, by trap ip.
    hit_registers: HitRegisters,
    /// Each CPU's block being filled, by CPU number.
    blocks: Vec<Option<BlockBuilder>>,
    /// Encoded bytes of each record kind, by kind number, blocks not yet written included.
    kind_bytes: [u64; 16],
    /// Records of each kind, by kind number.
    kind_records: [u64; 16],
    /// Written after the records when not empty.
    page_owners: PageOwners,
}

/// One CPU's block being filled.
#[derive(Debug)]
struct BlockBuilder {
    state: StreamState,
    bytes: Vec<u8>,
    records: u32,
    first_time: u64,
}

impl<W: Write> ProfileEncoder<W> {
    /// Writes the file header and the Header, Kallsyms and Modules sections.
    ///
    /// # Errors
    /// [`WriteError::Io`] when `out` fails.
    pub fn new(
        mut out: W,
        header: &ProfileHeader,
        kallsyms: &[u8],
        modules: &[u8],
    ) -> Result<Self, WriteError> {
        let mut file_header = [0u8; FILE_HEADER_SIZE];
        file_header[..8].copy_from_slice(&MAGIC);
        file_header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.write_all(&file_header)?;
        let json = serde_json::to_vec(header).map_err(|e| WriteError::Json {
            kind: SectionKind::Header,
            message: e.to_string(),
        })?;
        write_section(&mut out, SectionKind::Header, &json)?;
        write_section(&mut out, SectionKind::Kallsyms, kallsyms)?;
        write_section(&mut out, SectionKind::Modules, modules)?;
        Ok(Self {
            out,
            nr_cpu_ids: header.module.nr_cpu_ids,
            records: 0,
            record_bytes: 0,
            chunks: 0,
            btf_written: false,
            code: CodeInterner::new(),
            hit_registers: HitRegisters::default(),
            blocks: Vec::new(),
            kind_bytes: [0; 16],
            kind_records: [0; 16],
            page_owners: PageOwners::default(),
        })
    }

    /// What owned the direct-map pages the samples touched: written after the records, at
    /// [`ProfileEncoder::finish`]. Nothing is written when it is empty.
    pub fn set_page_owners(&mut self, owners: PageOwners) {
        self.page_owners = owners;
    }

    /// Keeps only the registers `filter` names for each sampled instruction (it is asked once
    /// per distinct instruction); the others are stored as 0. By default every register is
    /// kept. Set it before the first records: samples written before keep every register.
    pub fn set_register_filter(&mut self, filter: RegisterFilter) {
        self.code.set_filter(filter);
    }

    /// Keeps only the registers `filter` names for each history hit, by its trap ip (it is
    /// asked once per distinct trap ip); the others are stored as 0. By default every
    /// register is kept. Set it before the first records: hits written before keep every
    /// register.
    pub fn set_hit_register_filter(&mut self, filter: HitRegisterFilter) {
        self.hit_registers.set_filter(filter);
    }

    /// Writes the Btf section: `bytes` are the kernel's BTF (`/sys/kernel/btf/vmlinux`), kept
    /// as they are. It must come before the first records, once at most.
    ///
    /// # Errors
    /// [`WriteError::MisplacedSection`] when records or a Btf section were already written
    /// (nothing is written then); [`WriteError::Io`].
    pub fn btf(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let misplaced = |expected| {
            Err(WriteError::MisplacedSection {
                kind: SectionKind::Btf,
                expected,
            })
        };
        if self.btf_written {
            return misplaced("the profile already has one");
        }
        if self.records > 0 {
            return misplaced("it goes before the first records");
        }
        write_section(&mut self.out, SectionKind::Btf, bytes)?;
        self.btf_written = true;
        Ok(())
    }

    /// Appends whole records, as read from the device: each goes into its CPU's block, and a
    /// block that is full is written out (after a Code section with the instructions it is
    /// the first to use). Every record is checked first, so that a malformed read writes
    /// nothing.
    ///
    /// # Errors
    /// [`WriteError::BadRecord`] when `bytes` are not whole valid records; [`WriteError::Io`].
    pub fn records(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let mut pos = 0;
        // Samples are checked in place, not copied out.
        let mut scratch = dprof_abi::Record::Lost(dprof_abi::Lost { count: 0 });
        while let Some(rest) = bytes.get(pos..).filter(|r| !r.is_empty()) {
            let (header, _) =
                check_record_view(rest, self.nr_cpu_ids, &mut scratch).map_err(|problem| {
                    WriteError::BadRecord {
                        offset: pos,
                        len: bytes.len(),
                        problem,
                    }
                })?;
            pos += usize::from(header.size).max(dprof_abi::RECORD_ALIGN);
        }
        // Second pass: the records were checked above.
        let mut pos = 0;
        while let Some(rest) = bytes.get(pos..).filter(|r| !r.is_empty()) {
            let Ok(header) = dprof_abi::RecordHeader::decode(rest) else {
                break;
            };
            let Some(kind) = RecordKind::from_u16(header.kind) else {
                break;
            };
            let size = usize::from(header.size).max(dprof_abi::RECORD_ALIGN);
            self.encode(&header, kind, &rest[..size])?;
            pos += size;
        }
        Ok(())
    }

    /// Codes one checked record into its CPU's block, and writes the block when it is full.
    fn encode(
        &mut self,
        header: &dprof_abi::RecordHeader,
        kind: RecordKind,
        record: &[u8],
    ) -> Result<(), WriteError> {
        let cpu = header.cpu as usize;
        if self.blocks.len() <= cpu {
            self.blocks.resize_with(cpu + 1, || None);
        }
        let block = self.blocks[cpu].get_or_insert_with(|| BlockBuilder {
            state: StreamState::new(),
            bytes: Vec::with_capacity(WRITTEN_BLOCK + 1024),
            records: 0,
            first_time: 0,
        });
        if block.records == 0 {
            block.first_time = header.time_ns;
        }
        let before = block.bytes.len();
        let (code, hits) = (&mut self.code, &mut self.hit_registers);
        encode_record(
            &mut block.state,
            header,
            kind,
            record,
            &mut |key| code.intern(key),
            &mut |trap_ip| hits.keep(trap_ip),
            &mut block.bytes,
        );
        self.kind_bytes[kind as usize] += (block.bytes.len() - before) as u64;
        self.kind_records[kind as usize] += 1;
        block.records += 1;
        self.records += 1;
        if block.bytes.len() >= WRITTEN_BLOCK || block.records == u32::MAX {
            self.write_block(cpu)?;
        }
        Ok(())
    }

    /// Writes CPU `cpu`'s block, if it holds records, after the code table's new entries.
    fn write_block(&mut self, cpu: usize) -> Result<(), WriteError> {
        let Some(block) = self.blocks.get_mut(cpu).and_then(Option::as_mut) else {
            return Ok(());
        };
        if block.records == 0 {
            return Ok(());
        }
        if let Some(code) = self.code.take_unwritten() {
            write_section(&mut self.out, SectionKind::Code, &code)?;
        }
        let head = BlockHeader {
            cpu: cpu as u32,
            records: block.records,
            first_time: block.first_time,
        }
        .encode();
        write_section_parts(&mut self.out, SectionKind::Block, &[&head, &block.bytes])?;
        self.record_bytes += (BLOCK_HEADER_SIZE + block.bytes.len()) as u64;
        self.chunks += 1;
        block.bytes.clear();
        block.records = 0;
        block.state.reset();
        Ok(())
    }

    /// Writes every CPU's block now, full or not (the next records start new ones), so that
    /// [`ProfileEncoder::record_bytes`] counts every record handed in.
    ///
    /// # Errors
    /// [`WriteError::Io`] when `out` fails.
    pub fn write_open_blocks(&mut self) -> Result<(), WriteError> {
        for cpu in 0..self.blocks.len() {
            self.write_block(cpu)?;
        }
        Ok(())
    }

    /// Encoded bytes of the records of each kind so far, by [`RecordKind`] number (index 0
    /// unused); block headers, section headers and the code table not included.
    #[must_use]
    pub fn kind_bytes(&self) -> &[u64; 16] {
        &self.kind_bytes
    }

    /// Mean encoded bytes of a record of `kind` so far; `None` before the first.
    #[must_use]
    pub fn bytes_per_record(&self, kind: RecordKind) -> Option<f64> {
        let n = self.kind_records[kind as usize];
        (n > 0).then(|| self.kind_bytes[kind as usize] as f64 / n as f64)
    }

    /// Records handed in so far (those still in a CPU's block included).
    #[must_use]
    pub fn record_count(&self) -> u64 {
        self.records
    }

    /// Bytes of the Block sections written so far (block headers included).
    #[must_use]
    pub fn record_bytes(&self) -> u64 {
        self.record_bytes
    }

    /// Block sections written so far.
    #[must_use]
    pub fn chunk_count(&self) -> u64 {
        self.chunks
    }

    /// Writes the Stop and End sections, flushes, and hands back the output.
    ///
    /// # Errors
    /// [`WriteError::Io`] when `out` fails.
    pub fn finish(self, stop: &StopInfo) -> Result<W, WriteError> {
        self.finish_with_text(stop, &KernelText::new())
    }

    /// [`ProfileEncoder::finish`], with a Text section first unless `text` is empty.
    ///
    /// # Errors
    /// [`WriteError::Io`] when `out` fails.
    pub fn finish_with_text(mut self, stop: &StopInfo, text: &KernelText) -> Result<W, WriteError> {
        self.write_open_blocks()?;
        if !self.page_owners.is_empty() {
            let json = serde_json::to_vec(&self.page_owners).map_err(|e| WriteError::Json {
                kind: SectionKind::PageOwners,
                message: e.to_string(),
            })?;
            write_section(&mut self.out, SectionKind::PageOwners, &json)?;
        }
        if !text.is_empty() {
            write_section(&mut self.out, SectionKind::Text, &text.encode())?;
        }
        let json = serde_json::to_vec(stop).map_err(|e| WriteError::Json {
            kind: SectionKind::Stop,
            message: e.to_string(),
        })?;
        write_section(&mut self.out, SectionKind::Stop, &json)?;
        let mut end = [0u8; END_SIZE];
        end[0..8].copy_from_slice(&self.records.to_le_bytes());
        end[8..16].copy_from_slice(&self.record_bytes.to_le_bytes());
        end[16..24].copy_from_slice(&self.chunks.to_le_bytes());
        write_section(&mut self.out, SectionKind::End, &end)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

fn write_section<W: Write>(out: &mut W, kind: SectionKind, payload: &[u8]) -> std::io::Result<()> {
    write_section_parts(out, kind, &[payload])
}

/// A section whose payload is `parts`, one after the other.
fn write_section_parts<W: Write>(
    out: &mut W,
    kind: SectionKind,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    let mut crc = crc32fast::Hasher::new();
    for part in parts {
        crc.update(part);
    }
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut header = [0u8; SECTION_HEADER_SIZE];
    header[0..4].copy_from_slice(&(kind as u32).to_le_bytes());
    header[4..8].copy_from_slice(&crc.finalize().to_le_bytes());
    header[8..16].copy_from_slice(&(len as u64).to_le_bytes());
    out.write_all(&header)?;
    for part in parts {
        out.write_all(part)?;
    }
    Ok(())
}

/// The file a profile for `path` is written to until it is finished: `path` + ".partial".
#[must_use]
pub fn partial_path(path: &Path) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(".partial");
    PathBuf::from(s)
}

/// Writes a profile to `PATH.partial` and renames it to `PATH` in [`ProfileWriter::finish`].
/// Dropped unfinished, it leaves the `.partial` file, which has no End section and so never
/// reads as a complete profile.
#[derive(Debug)]
pub struct ProfileWriter {
    encoder: ProfileEncoder<BufWriter<File>>,
    path: PathBuf,
    partial: PathBuf,
}

impl ProfileWriter {
    /// Creates `PATH.partial` (replacing any old one) and writes the Header, Kallsyms and
    /// Modules sections.
    ///
    /// # Errors
    /// [`WriteError::File`] when the file cannot be created or written.
    pub fn create(
        path: &Path,
        header: &ProfileHeader,
        kallsyms: &[u8],
        modules: &[u8],
    ) -> Result<Self, WriteError> {
        let partial = partial_path(path);
        let file = File::create(&partial).map_err(|source| WriteError::File {
            action: "create",
            path: partial.clone(),
            source,
        })?;
        let out = BufWriter::with_capacity(1 << 20, file);
        match ProfileEncoder::new(out, header, kallsyms, modules) {
            Ok(encoder) => Ok(Self {
                encoder,
                path: path.to_path_buf(),
                partial,
            }),
            Err(e) => {
                // Nothing worth keeping was written yet.
                let _ = std::fs::remove_file(&partial);
                Err(with_path(e, "write", &partial))
            }
        }
    }

    /// Writes the Btf section; see [`ProfileEncoder::btf`]: before the first records, once.
    ///
    /// # Errors
    /// [`WriteError::MisplacedSection`], or [`WriteError::File`] when writing fails.
    pub fn write_btf(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        self.encoder
            .btf(bytes)
            .map_err(|e| with_path(e, "write", &self.partial))
    }

    /// See [`ProfileEncoder::set_register_filter`].
    pub fn set_register_filter(&mut self, filter: RegisterFilter) {
        self.encoder.set_register_filter(filter);
    }

    /// See [`ProfileEncoder::set_hit_register_filter`].
    pub fn set_hit_register_filter(&mut self, filter: HitRegisterFilter) {
        self.encoder.set_hit_register_filter(filter);
    }

    /// See [`ProfileEncoder::set_page_owners`].
    pub fn set_page_owners(&mut self, owners: PageOwners) {
        self.encoder.set_page_owners(owners);
    }

    /// See [`ProfileEncoder::write_open_blocks`].
    ///
    /// # Errors
    /// [`WriteError::File`] when writing fails.
    pub fn write_open_blocks(&mut self) -> Result<(), WriteError> {
        self.encoder
            .write_open_blocks()
            .map_err(|e| with_path(e, "write", &self.partial))
    }

    /// See [`ProfileEncoder::bytes_per_record`].
    #[must_use]
    pub fn bytes_per_record(&self, kind: RecordKind) -> Option<f64> {
        self.encoder.bytes_per_record(kind)
    }

    /// Appends whole records; see [`ProfileEncoder::records`].
    ///
    /// # Errors
    /// [`WriteError::BadRecord`], or [`WriteError::File`] when writing fails.
    pub fn write_records(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        self.encoder
            .records(bytes)
            .map_err(|e| with_path(e, "write", &self.partial))
    }

    /// Records written so far.
    #[must_use]
    pub fn record_count(&self) -> u64 {
        self.encoder.record_count()
    }

    /// Bytes of the Block sections written so far.
    #[must_use]
    pub fn record_bytes(&self) -> u64 {
        self.encoder.record_bytes()
    }

    /// Block sections written so far.
    #[must_use]
    pub fn chunk_count(&self) -> u64 {
        self.encoder.chunk_count()
    }

    /// The final path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `.partial` file being written.
    #[must_use]
    pub fn partial(&self) -> &Path {
        &self.partial
    }

    /// Writes the Stop and End sections, syncs the file and renames it to its final path.
    /// Returns the final path.
    ///
    /// # Errors
    /// [`WriteError::File`]; the `.partial` file is left behind.
    pub fn finish(self, stop: &StopInfo) -> Result<PathBuf, WriteError> {
        self.finish_with_text(stop, &KernelText::new())
    }

    /// [`ProfileWriter::finish`] with a Text section (none when `text` is empty).
    ///
    /// # Errors
    /// As [`ProfileWriter::finish`].
    pub fn finish_with_text(
        self,
        stop: &StopInfo,
        text: &KernelText,
    ) -> Result<PathBuf, WriteError> {
        let out = self
            .encoder
            .finish_with_text(stop, text)
            .map_err(|e| with_path(e, "write", &self.partial))?;
        let file = out.into_inner().map_err(|e| WriteError::File {
            action: "write",
            path: self.partial.clone(),
            source: e.into_error(),
        })?;
        // The data must be on disk before the rename makes it look complete.
        file.sync_all().map_err(|source| WriteError::File {
            action: "sync",
            path: self.partial.clone(),
            source,
        })?;
        drop(file);
        std::fs::rename(&self.partial, &self.path).map_err(|source| WriteError::File {
            action: "rename to its final name",
            path: self.partial.clone(),
            source,
        })?;
        // Make the rename itself durable; not every file system lets a directory be synced.
        if let Some(dir) = self.path.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(self.path)
    }

    /// Gives up: removes the `.partial` file.
    ///
    /// # Errors
    /// When the file cannot be removed.
    pub fn abandon(self) -> std::io::Result<()> {
        let Self {
            encoder, partial, ..
        } = self;
        drop(encoder);
        std::fs::remove_file(partial)
    }
}

fn with_path(e: WriteError, action: &'static str, path: &Path) -> WriteError {
    match e {
        WriteError::Io(source) => WriteError::File {
            action,
            path: path.to_path_buf(),
            source,
        },
        other => other,
    }
}
