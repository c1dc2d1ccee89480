//! Reading format version 2's Block sections: each CPU's blocks in file order, merged into
//! one stream in time order.
//!
//! A CPU's records are coded in its own blocks, and a block is written when it is full, so a
//! quiet CPU's block can cover the whole collection while a busy one's covers a millisecond:
//! file order is far from time order. The reader keeps one block per CPU open and yields the
//! record with the earliest time next (ties to the lower CPU), so that readers see records
//! as close to time order as the rings wrote them, whatever the block sizes.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;

use dprof_abi::RecordKind;

use crate::codec::{
    decode_record, BlockHeader, BlockInfo, BlockProblem, Cursor, StreamState, WireRecords,
    BLOCK_HEADER_SIZE,
};
use crate::error::ProfileError;
use crate::layout::{changed, Layout, Source};
use crate::sections::{SectionKind, SECTION_HEADER_SIZE};

/// One CPU's blocks and the one being read.
#[derive(Debug)]
struct Stream {
    cpu: u32,
    /// Indexes into [`Layout::blocks`], in file order.
    blocks: Vec<usize>,
    /// The next of `blocks` to load.
    next: usize,
    /// The coded records of the loaded block.
    data: Vec<u8>,
    pos: usize,
    /// Records of the loaded block not yet decoded.
    left: u32,
    /// File offset of `data[0]`.
    data_offset: u64,
    state: StreamState,
    /// What went wrong reading this CPU's next block or record: yielded when its turn comes,
    /// so that the other CPUs' earlier records come first, as in a version 1 file.
    failed: Option<ProfileError>,
    /// The CPU's next record, decoded ahead (its time is on the heap), as wire bytes: the
    /// last record of its kind.
    out: WireRecords,
    /// Its kind, the file offset of its coded bytes, and how many they are.
    out_kind: RecordKind,
    out_offset: u64,
    out_coded: usize,
}

/// The merge of every CPU's blocks.
#[derive(Debug)]
pub(crate) struct BlockMerge {
    streams: Vec<Stream>,
    /// (time of the next record, stream) of every stream with a record left. The top's
    /// record is the one [`BlockMerge::next`] handed out last, if it did: it stays on the
    /// heap until the following call, when its stream decodes the next one (no longer
    /// borrowed) and the top's key is replaced, one sift instead of a pop and a push.
    /// Keys as [`heap_key`] packs them: one comparison each.
    heap: BinaryHeap<Reverse<u128>>,
    started: bool,
    handed_out: bool,
}

/// A record decoded from a block.
pub(crate) struct Decoded<'a> {
    /// Its wire bytes (header and payload).
    pub wire: &'a [u8],
    /// File offset of its coded bytes.
    pub offset: u64,
    /// How many coded bytes it took.
    pub coded: usize,
}

impl BlockMerge {
    pub(crate) fn new(layout: &Layout) -> Self {
        let mut streams: Vec<Stream> = Vec::new();
        for (index, block) in layout.blocks.iter().enumerate() {
            let cpu = block.header.cpu;
            match streams.iter_mut().find(|s| s.cpu == cpu) {
                Some(stream) => stream.blocks.push(index),
                None => streams.push(Stream {
                    cpu,
                    blocks: vec![index],
                    next: 0,
                    data: Vec::new(),
                    pos: 0,
                    left: 0,
                    data_offset: 0,
                    state: StreamState::new(),
                    failed: None,
                    out: WireRecords::new(),
                    out_kind: RecordKind::Lost,
                    out_offset: 0,
                    out_coded: 0,
                }),
            }
        }
        streams.sort_by_key(|s| s.cpu);
        Self {
            streams,
            heap: BinaryHeap::new(),
            started: false,
            handed_out: false,
        }
    }

    /// Bytes of the blocks held, one per CPU at most.
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.streams.iter().map(|s| s.data.capacity()).sum()
    }

    /// The next record in time order, or `None` after the last.
    pub(crate) fn next(
        &mut self,
        source: &Source,
        layout: &Layout,
    ) -> Result<Option<Decoded<'_>>, ProfileError> {
        if !self.started {
            self.started = true;
            for s in 0..self.streams.len() {
                if let Some(time) = self.streams[s].advance(source, layout) {
                    self.heap.push(Reverse(heap_key(time, s)));
                }
            }
        }
        if std::mem::take(&mut self.handed_out) {
            if let Some(mut top) = self.heap.peek_mut() {
                let s = stream_of(top.0);
                match self.streams[s].advance(source, layout) {
                    Some(time) => *top = Reverse(heap_key(time, s)),
                    None => {
                        PeekMut::pop(top);
                    }
                }
            }
        }
        let Some(s) = self.heap.peek().map(|top| stream_of(top.0)) else {
            return Ok(None);
        };
        if let Some(e) = self.streams[s].failed.take() {
            // Nothing follows a problem in its stream.
            self.heap.pop();
            return Err(e);
        }
        let stream = &self.streams[s];
        self.handed_out = true;
        Ok(Some(Decoded {
            wire: stream.out.get(stream.out_kind),
            offset: stream.out_offset,
            coded: stream.out_coded,
        }))
    }
}

/// `(time, stream)` as one number, in the same order.
fn heap_key(time: u64, stream: usize) -> u128 {
    (u128::from(time) << 64) | stream as u128
}

/// The stream of a [`heap_key`].
fn stream_of(key: u128) -> usize {
    key as u64 as usize
}

impl Stream {
    /// Decodes the stream's next record, loading its next block when the current one is
    /// done, and returns its time; `None` after its last. A problem takes the next record's
    /// place (in `failed`), at the time it would have come: the block's first time, or the
    /// time of the record before.
    fn advance(&mut self, source: &Source, layout: &Layout) -> Option<u64> {
        let (time, problem) = loop {
            if self.left > 0 {
                let start = self.pos;
                let mut cursor = Cursor {
                    bytes: &self.data,
                    pos: start,
                };
                let decoded = decode_record(
                    &mut self.state,
                    &mut cursor,
                    self.cpu,
                    &layout.code,
                    &mut self.out,
                );
                let end = cursor.pos;
                match decoded {
                    Ok(kind) => {
                        self.pos = end;
                        self.left -= 1;
                        self.out_kind = kind;
                        self.out_offset = self.data_offset + start as u64;
                        self.out_coded = end - start;
                        return Some(self.state.time());
                    }
                    Err(problem) => break (self.state.time(), self.bad(problem)),
                }
            }
            if self.pos != self.data.len() {
                let problem = BlockProblem::Trailing(self.data.len() - self.pos);
                break (self.state.time(), self.bad(problem));
            }
            let &index = self.blocks.get(self.next)?;
            self.next += 1;
            let info = &layout.blocks[index];
            if let Err(e) = load(self, info, source) {
                break (info.header.first_time, e);
            }
        };
        self.failed = Some(problem);
        Some(time)
    }

    /// `problem` at the stream's position.
    fn bad(&self, problem: BlockProblem) -> ProfileError {
        ProfileError::BadBlock {
            offset: self.data_offset + self.pos as u64,
            problem,
        }
    }
}

/// Reads a block into `stream`, checking its CRC and that it is the block open found.
fn load(stream: &mut Stream, info: &BlockInfo, source: &Source) -> Result<(), ProfileError> {
    // Open checked the length against MAX_BLOCK.
    let len = usize::try_from(info.len).unwrap_or(usize::MAX);
    let mut buf = vec![0u8; SECTION_HEADER_SIZE + len];
    source.read_at(info.offset, &mut buf)?;
    let (head, payload) = buf.split_at(SECTION_HEADER_SIZE);
    let stored = u32::from_le_bytes(head[4..8].try_into().unwrap_or_default());
    let kind = u32::from_le_bytes(head[0..4].try_into().unwrap_or_default());
    let declared = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
    if kind != SectionKind::Block as u32
        || declared != info.len
        || BlockHeader::decode(payload).ok() != Some(info.header)
    {
        return Err(changed(source, info.offset));
    }
    let computed = crc32fast::hash(payload);
    if computed != stored {
        return Err(ProfileError::Checksum {
            offset: info.offset,
            kind: SectionKind::Block,
            stored,
            computed,
        });
    }
    buf.drain(..SECTION_HEADER_SIZE + BLOCK_HEADER_SIZE);
    stream.data = buf;
    stream.pos = 0;
    stream.left = info.header.records;
    stream.data_offset = info.offset + (SECTION_HEADER_SIZE + BLOCK_HEADER_SIZE) as u64;
    stream.state.reset();
    stream.out.reset();
    Ok(())
}
