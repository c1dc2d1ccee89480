//! Reading format version 2's Block sections: each CPU's blocks in file order, merged into
//! one stream in time order.
//!
//! A CPU's records are coded in its own blocks, and a block is written when it is full, so a
//! quiet CPU's block can cover the whole collection while a busy one's covers a millisecond:
//! file order is far from time order. The reader keeps one block per CPU open and yields the
//! record with the earliest time next (ties to the lower CPU), so that readers see records
//! as close to time order as the rings wrote them, whatever the block sizes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use dprof_abi::MAX_RECORD_SIZE;

use crate::codec::{
    decode_record, BlockHeader, BlockInfo, BlockProblem, Cursor, StreamState, BLOCK_HEADER_SIZE,
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
    /// The CPU's next record, decoded ahead (its time is on the heap), as wire bytes.
    out: Box<[u8; MAX_RECORD_SIZE]>,
    /// Its size, the file offset of its coded bytes, and how many they are.
    out_size: usize,
    out_offset: u64,
    out_coded: usize,
}

/// The merge of every CPU's blocks.
#[derive(Debug)]
pub(crate) struct BlockMerge {
    streams: Vec<Stream>,
    /// (time of the next record, stream) of every stream with a record left.
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    started: bool,
    /// The stream whose record [`BlockMerge::next`] handed out last: it decodes its next one
    /// at the following call, once that record is no longer borrowed.
    handed_out: Option<usize>,
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
                    out: Box::new([0; MAX_RECORD_SIZE]),
                    out_size: 0,
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
            handed_out: None,
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
                self.advance(s, source, layout);
            }
        }
        if let Some(s) = self.handed_out.take() {
            self.advance(s, source, layout);
        }
        let Some(Reverse((_, s))) = self.heap.pop() else {
            return Ok(None);
        };
        let stream = &mut self.streams[s];
        if let Some(e) = stream.failed.take() {
            return Err(e);
        }
        self.handed_out = Some(s);
        Ok(Some(Decoded {
            wire: &stream.out[..stream.out_size],
            offset: stream.out_offset,
            coded: stream.out_coded,
        }))
    }

    /// Puts stream `s`'s next record on the heap, loading its next block when the current
    /// one is done. A problem is put on the heap in its place, at the time it would have
    /// come: the block's first time, or the time of the record before.
    fn advance(&mut self, s: usize, source: &Source, layout: &Layout) {
        let stream = &mut self.streams[s];
        let (time, problem) = loop {
            if stream.left > 0 {
                let start = stream.pos;
                let mut cursor = Cursor {
                    bytes: &stream.data,
                    pos: start,
                };
                let decoded = decode_record(
                    &mut stream.state,
                    &mut cursor,
                    stream.cpu,
                    &layout.code,
                    &mut stream.out,
                );
                let end = cursor.pos;
                match decoded {
                    Ok(kind) => {
                        stream.pos = end;
                        stream.left -= 1;
                        stream.out_size = kind.record_size();
                        stream.out_offset = stream.data_offset + start as u64;
                        stream.out_coded = end - start;
                        self.heap.push(Reverse((stream.state.time(), s)));
                        return;
                    }
                    Err(problem) => break (stream.state.time(), stream.bad(problem)),
                }
            }
            if stream.pos != stream.data.len() {
                let problem = BlockProblem::Trailing(stream.data.len() - stream.pos);
                break (stream.state.time(), stream.bad(problem));
            }
            let Some(&index) = stream.blocks.get(stream.next) else {
                return;
            };
            stream.next += 1;
            let info = &layout.blocks[index];
            if let Err(e) = load(stream, info, source) {
                break (info.header.first_time, e);
            }
        };
        stream.failed = Some(problem);
        self.heap.push(Reverse((time, s)));
    }
}

impl Stream {
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
    Ok(())
}
