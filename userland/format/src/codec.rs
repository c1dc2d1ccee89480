//! The record codec of format version 2: one CPU's records, within one block, as small
//! deltas against the records before them.
//!
//! A record in a block is:
//! ```text
//! u8      kind (the ABI record kind)
//! varint  time - time of the previous record in the block (zigzag: rings are in time order,
//!         but nothing relies on it)
//! varint  mask: bit i set when payload word i differs from word i of the previous record of
//!         the same kind in the block (words: the payload as little-endian u64s)
//! varint* one code per set bit, in word order:
//!           c & 1 == 0   the word is the previous one plus zigzag(c >> 1)
//!           c & 1 == 1   the word is entry c >> 1 of that word's recent values (below), or,
//!                        for c >> 1 == RECENT, the raw word in the varint that follows
//! ```
//! Each word of each kind keeps its [`RECENT`] latest distinct values, latest first, so that a
//! value that comes back (a call site, a cache, a task) costs one byte.
//!
//! Access samples are transformed before they are coded: the instruction pointer and the
//! instruction bytes become an index into the file's code table ([`crate::code`]), so that the
//! bytes are stored once per distinct instruction, and the registers the writer was told not
//! to keep are zeroed. The IBS registers that repeat other fields (the op's address, the data
//! addresses) are stored as their exclusive or with those, so that they cost nothing when
//! they agree. A history hit's registers the writer was told not to keep (by its trap ip) are
//! zeroed too; nothing else of it changes, so it decodes as any other record.
//!
//! The state starts from zero in every block, so that blocks decode independently.

use dprof_abi::{
    AccessSample, IbsRegs, RecordHeader, RecordKind, IBS_DC_LIN_AD, IBS_DC_PHYS_AD, IBS_OP_RIP,
    MAX_RECORD_SIZE, RECORD_HEADER_SIZE, SAMPLE_INSN_BYTES, SAMPLE_REGS,
};

/// Payload words of the largest record.
pub(crate) const MAX_WORDS: usize = (MAX_RECORD_SIZE - RECORD_HEADER_SIZE) / 8;
const _: () = assert!(MAX_WORDS <= 64, "the changed-word mask is a u64");
/// Distinct earlier values each word remembers.
const RECENT: usize = 5;
/// One past the largest record kind number.
const KIND_SLOTS: usize = 13;

/// What a code table entry holds: an instruction's address and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CodeKey {
    pub ip: u64,
    pub len: u8,
    pub bytes: [u8; SAMPLE_INSN_BYTES],
}

/// The coding state of one CPU's records in one block: per record kind, the words of the
/// last record of that kind, and each word's recent values.
pub(crate) struct StreamState {
    time: u64,
    /// By kind number.
    prev: Vec<[u64; MAX_WORDS]>,
    /// By kind number.
    recent: Vec<[Recent; MAX_WORDS]>,
}

impl std::fmt::Debug for StreamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamState")
            .field("time", &self.time)
            .finish_non_exhaustive()
    }
}

impl StreamState {
    pub(crate) fn new() -> Self {
        Self {
            time: 0,
            prev: vec![[0; MAX_WORDS]; KIND_SLOTS],
            recent: vec![[Recent::default(); MAX_WORDS]; KIND_SLOTS],
        }
    }

    /// Time of the last record coded or decoded.
    pub(crate) fn time(&self) -> u64 {
        self.time
    }

    /// Back to the state a block starts in.
    pub(crate) fn reset(&mut self) {
        self.time = 0;
        self.prev.iter_mut().for_each(|k| k.fill(0));
        self.recent
            .iter_mut()
            .for_each(|k| k.fill(Recent::default()));
    }
}

/// Slots of a word's ring of recent values: a power of two above [`RECENT`].
const RING: usize = 8;

/// A word's [`RECENT`] latest distinct values, latest first, in a ring: value `j` is in
/// slot `head + j`, so that a new value takes one slot (`head` moves back) instead of
/// shifting the others. Slots past the `RECENT`th hold older values no code can name.
#[derive(Clone, Copy, Debug, Default)]
struct Recent {
    slots: [u64; RING],
    head: usize,
}

impl Recent {
    /// Value `j`, latest first (`j` below [`RECENT`]).
    #[inline]
    fn get(&self, j: usize) -> u64 {
        self.slots[(self.head + j) % RING]
    }

    /// Where `value` is among the recent values.
    #[inline]
    fn position(&self, value: u64) -> Option<usize> {
        (0..RECENT).find(|&j| self.get(j) == value)
    }

    /// Remembers `value` as the latest, which was value `hit` (then the ones before it move
    /// down by one) or none of them (then all do, and the oldest is forgotten).
    #[inline]
    fn remember(&mut self, value: u64, hit: Option<usize>) {
        match hit {
            None => self.head = (self.head + RING - 1) % RING,
            Some(j) => {
                for k in (1..=j.min(RECENT - 1)).rev() {
                    self.slots[(self.head + k) % RING] = self.slots[(self.head + k - 1) % RING];
                }
            }
        }
        self.slots[self.head] = value;
    }
}

/// LEB128, written byte by byte: the crate's `encode_var` needs a buffer copied in after,
/// a `memmove` call per word on the collector's hot path.
#[inline]
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> u64 {
    ((z >> 1) as i64 ^ -((z & 1) as i64)) as u64
}

/// Why a block's bytes do not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockProblem {
    /// The bytes end inside a record.
    #[error("the block ends inside a record")]
    Truncated,
    /// A varint longer than a 64-bit value needs.
    #[error("a number is coded in more than ten bytes")]
    LongVarint,
    /// A kind byte that is no record kind.
    #[error("unknown record kind {0}")]
    UnknownKind(u8),
    /// The changed-word mask names words past the kind's payload.
    #[error("the changed-word mask {mask:#x} names words a {kind} record does not have")]
    BadMask {
        /// The kind's name.
        kind: &'static str,
        /// The mask.
        mask: u64,
    },
    /// A word code names a recent value that does not exist.
    #[error("a word refers to recent value {0}, and only {RECENT} are kept")]
    BadRecent(u64),
    /// A sample names an instruction the code table does not have.
    #[error("a sample names instruction {index} of a code table of {len}")]
    UnknownCode {
        /// The index.
        index: u64,
        /// Entries in the table.
        len: usize,
    },
    /// Bytes follow the last record the block's header counts.
    #[error("{0} bytes follow the block's last record")]
    Trailing(usize),
    /// The block payload is shorter than the block header.
    #[error("the block is shorter than its {BLOCK_HEADER_SIZE}-byte header")]
    ShortHeader,
    /// The block is larger than a reader accepts.
    #[error("the block declares {len} bytes, more than the {MAX_BLOCK} a block may hold")]
    TooLarge {
        /// Its declared length.
        len: u64,
    },
    /// The block's CPU is not one the module has.
    #[error("cpu {cpu} is not below the module's nr_cpu_ids {nr_cpu_ids}")]
    Cpu {
        /// CPU in the block header.
        cpu: u32,
        /// `nr_cpu_ids` from the header.
        nr_cpu_ids: u32,
    },
    /// A block that holds no records.
    #[error("the block holds no records")]
    Empty,
}

/// Bytes of a block's header: u32 cpu, u32 records, u64 time of its first record.
pub const BLOCK_HEADER_SIZE: usize = 16;
/// Largest block payload a reader accepts.
pub const MAX_BLOCK: usize = 1 << 20;
/// Encoded bytes at which the writer ends a CPU's block.
pub const WRITTEN_BLOCK: usize = 64 * 1024;

/// A Block section, as [`crate::Profile::open`] found it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockInfo {
    /// Offset of the section header.
    pub offset: u64,
    /// Payload length.
    pub len: u64,
    /// The block header at the start of the payload.
    pub header: BlockHeader,
}

/// The header of a Block section's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    pub cpu: u32,
    pub records: u32,
    pub first_time: u64,
}

impl BlockHeader {
    pub(crate) fn encode(&self) -> [u8; BLOCK_HEADER_SIZE] {
        let mut out = [0u8; BLOCK_HEADER_SIZE];
        out[0..4].copy_from_slice(&self.cpu.to_le_bytes());
        out[4..8].copy_from_slice(&self.records.to_le_bytes());
        out[8..16].copy_from_slice(&self.first_time.to_le_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, BlockProblem> {
        let head: &[u8; BLOCK_HEADER_SIZE] = bytes
            .get(..BLOCK_HEADER_SIZE)
            .and_then(|b| b.try_into().ok())
            .ok_or(BlockProblem::ShortHeader)?;
        let [c0, c1, c2, c3, r0, r1, r2, r3, t0, t1, t2, t3, t4, t5, t6, t7] = *head;
        let header = Self {
            cpu: u32::from_le_bytes([c0, c1, c2, c3]),
            records: u32::from_le_bytes([r0, r1, r2, r3]),
            first_time: u64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
        };
        if header.records == 0 {
            return Err(BlockProblem::Empty);
        }
        Ok(header)
    }
}

/// Encodes the wire record `record` (header and payload, checked) at the end of `out`.
/// `code_index` interns an instruction and says which registers to keep (a bit per
/// [`dprof_abi::reg`] index); `hit_registers` says which registers a history hit keeps,
/// given its trap ip.
pub(crate) fn encode_record(
    state: &mut StreamState,
    header: &RecordHeader,
    kind: RecordKind,
    record: &[u8],
    code_index: &mut dyn FnMut(CodeKey) -> (u64, u16),
    hit_registers: &mut dyn FnMut(u64) -> u16,
    out: &mut Vec<u8>,
) {
    let payload = &record[RECORD_HEADER_SIZE..usize::from(header.size)];
    let mut words = [0u64; MAX_WORDS];
    let n = payload.len() / 8;
    for (word, bytes) in words.iter_mut().zip(payload.chunks_exact(8)) {
        *word = u64::from_le_bytes(bytes.try_into().unwrap_or_default());
    }
    if matches!(kind, RecordKind::AccessSample | RecordKind::IbsSample) {
        transform_sample(&mut words, payload, code_index);
    } else if kind == RecordKind::HistoryHit {
        let keep = hit_registers(words[HIT_IP_WORD]);
        keep_registers(&mut words[HIT_REGS_WORD..][..SAMPLE_REGS], keep);
    }
    out.push(kind as u8);
    put_varint(out, zigzag(header.time_ns.wrapping_sub(state.time)));
    state.time = header.time_ns;
    let (prev, recent) = (
        &mut state.prev[kind as usize],
        &mut state.recent[kind as usize],
    );
    let mut mask = 0u64;
    for (i, (word, old)) in words[..n].iter().zip(prev.iter()).enumerate() {
        if word != old {
            mask |= 1 << i;
        }
    }
    put_varint(out, mask);
    let mut bits = mask;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let word = words[i];
        let hit = recent[i].position(word);
        let delta = zigzag(word.wrapping_sub(prev[i]));
        match hit {
            Some(j) => put_varint(out, ((j as u64) << 1) | 1),
            None if delta >> 63 == 0 => put_varint(out, delta << 1),
            None => {
                put_varint(out, ((RECENT as u64) << 1) | 1);
                put_varint(out, word);
            }
        }
        recent[i].remember(word, hit);
        prev[i] = word;
    }
}

/// Sample payload words: the ip, the instruction bytes and their length.
const IP_WORD: usize = 0;
const REGS_WORD: usize = 1;
/// `insn` follows `ip`, the registers, `gs_base` and `pid`/`tid`.
const INSN_WORD: usize = REGS_WORD + SAMPLE_REGS + 2;
/// Its length is the first byte of the word after the bytes.
const INSN_LEN_WORD: usize = INSN_WORD + SAMPLE_INSN_BYTES / 8;
const DATA_ADDR_WORD: usize = INSN_LEN_WORD + 1;
const PHYS_ADDR_WORD: usize = DATA_ADDR_WORD + 1;
/// The IBS registers follow the sample and their `caps` word.
const IBS_REGS_WORD: usize = AccessSample::SIZE / 8 + 1;
const _: () = assert!(IBS_REGS_WORD + IbsRegs::SIZE / 8 - 1 == MAX_WORDS);

/// `HistoryHit` payload words: the history, the trap ip, then the registers.
const HIT_IP_WORD: usize = 1;
const HIT_REGS_WORD: usize = 2;
const _: () = assert!(HIT_REGS_WORD + SAMPLE_REGS + 2 == dprof_abi::HistoryHit::SIZE / 8);

/// Zeroes the registers `keep` has no bit for: a zero word, the same in every record, is not
/// coded at all after the first, and decodes as zero.
fn keep_registers(regs: &mut [u64], keep: u16) {
    for (r, word) in regs.iter_mut().enumerate() {
        if keep & (1 << r) == 0 {
            *word = 0;
        }
    }
}

fn transform_sample(
    words: &mut [u64; MAX_WORDS],
    payload: &[u8],
    code_index: &mut dyn FnMut(CodeKey) -> (u64, u16),
) {
    let len = (words[INSN_LEN_WORD] & 0xff) as u8;
    // Bytes past the length are not the instruction's: not kept.
    let mut bytes = [0u8; SAMPLE_INSN_BYTES];
    let valid = usize::from(len).min(SAMPLE_INSN_BYTES);
    bytes[..valid].copy_from_slice(&payload[INSN_WORD * 8..INSN_WORD * 8 + valid]);
    let ip = words[IP_WORD];
    let (index, keep) = code_index(CodeKey { ip, len, bytes });
    words[IP_WORD] = index;
    words[INSN_WORD..INSN_LEN_WORD].fill(0);
    words[INSN_LEN_WORD] &= !0xff;
    keep_registers(&mut words[REGS_WORD..][..SAMPLE_REGS], keep);
    if payload.len() > AccessSample::SIZE {
        words[IBS_REGS_WORD + IBS_OP_RIP] ^= ip;
        words[IBS_REGS_WORD + IBS_DC_LIN_AD] ^= words[DATA_ADDR_WORD];
        words[IBS_REGS_WORD + IBS_DC_PHYS_AD] ^= words[PHYS_ADDR_WORD];
    }
}

/// A decoding position in a block's records.
pub(crate) struct Cursor<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl Cursor<'_> {
    /// LEB128, at most ten bytes.
    #[inline]
    fn varint(&mut self) -> Result<u64, BlockProblem> {
        // Most codes are one byte.
        if let Some(&b) = self.bytes.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        // Up to eight bytes at once, when eight are there: the first byte without its high
        // bit ends the code, and the seven-bit groups are packed by halving the gaps.
        if let Some(eight) = self.bytes.get(self.pos..self.pos + 8) {
            let word = u64::from_le_bytes(eight.try_into().unwrap_or_default());
            let ends = !word & 0x8080_8080_8080_8080;
            if ends != 0 {
                let bits = ends.trailing_zeros() + 1;
                let mut x = word & (u64::MAX >> (64 - bits)) & 0x7f7f_7f7f_7f7f_7f7f;
                x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
                x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
                x = (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4);
                self.pos += (bits / 8) as usize;
                return Ok(x);
            }
        }
        self.varint_slow()
    }

    /// [`Cursor::varint`] byte by byte: near the end of the bytes, and for codes of nine or
    /// ten bytes.
    #[cold]
    fn varint_slow(&mut self) -> Result<u64, BlockProblem> {
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let b = *self.bytes.get(self.pos).ok_or(BlockProblem::Truncated)?;
            self.pos += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(value);
            }
            shift += 7;
            if shift > 63 {
                return Err(BlockProblem::LongVarint);
            }
        }
    }

    fn byte(&mut self) -> Result<u8, BlockProblem> {
        let b = *self.bytes.get(self.pos).ok_or(BlockProblem::Truncated)?;
        self.pos += 1;
        Ok(b)
    }
}

/// The wire bytes of the last record of each kind decoded from one CPU's block: a record
/// differs from the one before it of its kind in a few words, so decoding rewrites only
/// those (and what [`transform_sample`] took out) instead of the whole record.
pub(crate) struct WireRecords {
    /// By kind number; each as long as the largest record.
    records: Vec<[u8; MAX_RECORD_SIZE]>,
}

impl std::fmt::Debug for WireRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireRecords").finish_non_exhaustive()
    }
}

impl WireRecords {
    pub(crate) fn new() -> Self {
        Self {
            records: vec![[0; MAX_RECORD_SIZE]; KIND_SLOTS],
        }
    }

    /// Back to all zero, as the words of [`StreamState::reset`].
    pub(crate) fn reset(&mut self) {
        self.records.iter_mut().for_each(|r| r.fill(0));
    }

    /// The wire bytes of the last record of `kind` decoded.
    pub(crate) fn get(&self, kind: RecordKind) -> &[u8] {
        &self.records[kind as usize][..kind.record_size()]
    }
}

/// Decodes the record at `cursor` into `out`'s record of its kind, as wire bytes (header and
/// payload), for `cpu`. Returns its kind. The wire record is not checked here: the caller
/// checks it as it checks a version 1 record.
pub(crate) fn decode_record(
    state: &mut StreamState,
    cursor: &mut Cursor<'_>,
    cpu: u32,
    code: &[CodeKey],
    out: &mut WireRecords,
) -> Result<RecordKind, BlockProblem> {
    let raw_kind = cursor.byte()?;
    let kind = RecordKind::from_u16(u16::from(raw_kind))
        .filter(|k| (*k as usize) < KIND_SLOTS)
        .ok_or(BlockProblem::UnknownKind(raw_kind))?;
    let time = state.time.wrapping_add(unzigzag(cursor.varint()?));
    state.time = time;
    let size = kind.record_size();
    let n = (size - RECORD_HEADER_SIZE) / 8;
    let mask = cursor.varint()?;
    if n < 64 && mask >> n != 0 {
        return Err(BlockProblem::BadMask {
            kind: kind.name(),
            mask,
        });
    }
    let (prev, recent) = (
        &mut state.prev[kind as usize],
        &mut state.recent[kind as usize],
    );
    let wire = &mut out.records[kind as usize];
    let mut bits = mask;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let c = cursor.varint()?;
        let (value, hit) = if c & 1 == 0 {
            (prev[i].wrapping_add(unzigzag(c >> 1)), None)
        } else {
            let j = c >> 1;
            match usize::try_from(j) {
                Ok(j) if j < RECENT => (recent[i].get(j), Some(j)),
                Ok(RECENT) => (cursor.varint()?, None),
                _ => return Err(BlockProblem::BadRecent(j)),
            }
        };
        recent[i].remember(value, hit);
        prev[i] = value;
        set_payload_word(wire, i, value);
    }
    let header = RecordHeader {
        kind: kind as u16,
        size: size as u16,
        cpu,
        time_ns: time,
    };
    let mut head = [0u8; RECORD_HEADER_SIZE];
    header.encode(&mut head);
    wire[..RECORD_HEADER_SIZE].copy_from_slice(&head);
    if matches!(kind, RecordKind::AccessSample | RecordKind::IbsSample) {
        let index = prev[IP_WORD];
        let entry = usize::try_from(index)
            .ok()
            .and_then(|i| code.get(i))
            .ok_or(BlockProblem::UnknownCode {
                index,
                len: code.len(),
            })?;
        untransform_sample(wire, prev, kind == RecordKind::IbsSample, entry);
    }
    Ok(kind)
}

/// Payload word `i` of a wire record.
#[inline]
fn set_payload_word(wire: &mut [u8; MAX_RECORD_SIZE], i: usize, value: u64) {
    let at = RECORD_HEADER_SIZE + i * 8;
    wire[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// Undoes [`transform_sample`] on a sample's wire record whose payload words are `words`
/// (as coded), with the sample's code table entry: every word the transform changed is
/// written again, whether or not this record's mask named it.
fn untransform_sample(
    wire: &mut [u8; MAX_RECORD_SIZE],
    words: &[u64; MAX_WORDS],
    ibs: bool,
    code: &CodeKey,
) {
    if ibs {
        let xored = |i: usize, with: u64| words[IBS_REGS_WORD + i] ^ with;
        set_payload_word(wire, IBS_REGS_WORD + IBS_OP_RIP, xored(IBS_OP_RIP, code.ip));
        let data = xored(IBS_DC_LIN_AD, words[DATA_ADDR_WORD]);
        set_payload_word(wire, IBS_REGS_WORD + IBS_DC_LIN_AD, data);
        let phys = xored(IBS_DC_PHYS_AD, words[PHYS_ADDR_WORD]);
        set_payload_word(wire, IBS_REGS_WORD + IBS_DC_PHYS_AD, phys);
    }
    set_payload_word(wire, IP_WORD, code.ip);
    let insn = RECORD_HEADER_SIZE + INSN_WORD * 8;
    wire[insn..insn + SAMPLE_INSN_BYTES].copy_from_slice(&code.bytes);
    set_payload_word(wire, INSN_LEN_WORD, words[INSN_LEN_WORD]);
    wire[RECORD_HEADER_SIZE + INSN_LEN_WORD * 8] = code.len;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_take_up_to_ten_bytes_and_no_more() {
        let mut coded = Vec::new();
        let mut values = vec![0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        // Every code length, at both ends of its range.
        values.extend((1..64).flat_map(|bits| [1u64 << bits, (1u64 << bits) - 1]));
        for value in values {
            for padding in [0, 1, 12] {
                // Codes near the end of the bytes and codes with bytes after them decode
                // alike.
                coded.clear();
                put_varint(&mut coded, value);
                let len = coded.len();
                coded.extend(std::iter::repeat_n(0xff, padding));
                let mut cursor = Cursor {
                    bytes: &coded,
                    pos: 0,
                };
                assert_eq!(
                    cursor.varint(),
                    Ok(value),
                    "{value:#x} with {padding} after"
                );
                assert_eq!(cursor.pos, len);
            }
        }
        let long = [0x80; 11];
        let mut cursor = Cursor {
            bytes: &long,
            pos: 0,
        };
        assert_eq!(cursor.varint(), Err(BlockProblem::LongVarint));
        let cut = [0x80, 0x80];
        let mut cursor = Cursor {
            bytes: &cut,
            pos: 0,
        };
        assert_eq!(cursor.varint(), Err(BlockProblem::Truncated));
    }

    /// The ring gives what a list kept latest first gives: a value met again moves to the
    /// front, a new one goes in front and the oldest of the five is forgotten.
    #[test]
    fn recent_values_stay_latest_first() {
        let mut ring = Recent::default();
        let mut list = [0u64; RECENT];
        let mut x = 7u64;
        for _ in 0..10_000 {
            // A few values, so that both hits and misses come.
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let value = (x >> 60) % 9;
            let hit = ring.position(value);
            assert_eq!(hit, list.iter().position(|&v| v == value));
            ring.remember(value, hit);
            let end = hit.unwrap_or(RECENT - 1);
            list[..=end].rotate_right(1);
            list[0] = value;
            assert_eq!(list, std::array::from_fn(|j| ring.get(j)));
        }
    }
}
