//! The Text section: bytes of kernel code captured when collection stopped, so that the
//! analysis can decode instructions the records only point at (a debug-register trap reports
//! the instruction *after* the access; finding the accessing one means decoding its function
//! from the start). Live bytes, read from `/proc/kcore`, are exact for modules too and include
//! the kernel's run-time patching (alternatives, static keys), which a vmlinux file does not.
//!
//! Payload: blocks, each `u64 address, u32 length, u32 reserved (0)`, then `length` bytes,
//! then zero padding to a multiple of 8. Blocks are sorted by address and do not overlap.

use crate::error::ProfileError;

/// Bytes of kernel code by address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelText {
    /// Sorted by address, disjoint.
    blocks: Vec<(u64, Vec<u8>)>,
}

/// Size of a block's header.
const BLOCK_HEADER: usize = 16;

impl KernelText {
    /// No code.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no block is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Blocks held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Bytes of code held.
    #[must_use]
    pub fn byte_count(&self) -> usize {
        self.blocks.iter().map(|(_, b)| b.len()).sum()
    }

    /// Adds `bytes` at `address`, merging with blocks it overlaps or touches (where they
    /// overlap, the bytes already held win: both came from the same live kernel).
    pub fn insert(&mut self, address: u64, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let end = address.saturating_add(bytes.len() as u64);
        let mut start = address;
        let mut merged_end = end;
        // Blocks that overlap or touch [address, end).
        let first = self
            .blocks
            .partition_point(|(a, b)| a.saturating_add(b.len() as u64) < address);
        let mut last = first;
        while last < self.blocks.len() && self.blocks[last].0 <= end {
            let (a, b) = &self.blocks[last];
            start = start.min(*a);
            merged_end = merged_end.max(a.saturating_add(b.len() as u64));
            last += 1;
        }
        let len = usize::try_from(merged_end - start).unwrap_or(usize::MAX);
        let mut merged = vec![0u8; len];
        let at = |addr: u64| usize::try_from(addr - start).unwrap_or(usize::MAX);
        merged[at(address)..at(end)].copy_from_slice(bytes);
        for (a, b) in self.blocks.drain(first..last) {
            merged[at(a)..at(a) + b.len()].copy_from_slice(&b);
        }
        self.blocks.insert(first, (start, merged));
    }

    /// The `len` bytes at `address`, when one block holds all of them.
    #[must_use]
    pub fn bytes_at(&self, address: u64, len: usize) -> Option<&[u8]> {
        let (start, bytes) = self.block_containing(address)?;
        let from = usize::try_from(address - start).ok()?;
        bytes.get(from..from.checked_add(len)?)
    }

    /// The block holding `address`: its start and bytes.
    #[must_use]
    pub fn block_containing(&self, address: u64) -> Option<(u64, &[u8])> {
        let i = self.blocks.partition_point(|(a, _)| *a <= address);
        let (start, bytes) = self.blocks.get(i.checked_sub(1)?)?;
        (address - start < bytes.len() as u64).then_some((*start, bytes.as_slice()))
    }

    /// The blocks, by address.
    pub fn blocks(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.blocks.iter().map(|(a, b)| (*a, b.as_slice()))
    }

    /// The section payload.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_count() + self.blocks.len() * 24);
        for (address, bytes) in &self.blocks {
            out.extend_from_slice(&address.to_le_bytes());
            // Blocks come from functions; none is anywhere near 4 GiB.
            out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(bytes);
            out.resize(out.len().next_multiple_of(8), 0);
        }
        out
    }

    /// Parses a section payload that starts at file offset `offset`.
    ///
    /// # Errors
    /// [`ProfileError::BadText`] naming the offset of the first bad block.
    pub fn decode(payload: &[u8], offset: u64) -> Result<Self, ProfileError> {
        let mut blocks: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut pos = 0usize;
        while pos < payload.len() {
            let bad = |reason| ProfileError::BadText {
                offset: offset + pos as u64,
                reason,
            };
            let header = payload
                .get(pos..pos + BLOCK_HEADER)
                .ok_or_else(|| bad("the payload ends inside a block header"))?;
            let word = |i: usize| {
                u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]])
            };
            let address = u64::from(word(0)) | (u64::from(word(4)) << 32);
            let len = word(8) as usize;
            if word(12) != 0 {
                return Err(bad("a block's reserved word is not zero"));
            }
            if len == 0 {
                return Err(bad("a block is empty"));
            }
            let body = pos + BLOCK_HEADER;
            let bytes = payload
                .get(body..body + len)
                .ok_or_else(|| bad("a block runs past the end of the section"))?;
            let padded = (body + len).next_multiple_of(8);
            if payload
                .get(body + len..padded)
                .is_none_or(|p| p.iter().any(|&b| b != 0))
            {
                return Err(bad("a block's padding is missing or not zero"));
            }
            if address.checked_add(len as u64).is_none() {
                return Err(bad("a block runs past the end of the address space"));
            }
            if let Some((prev, prev_bytes)) = blocks.last() {
                if address < prev + prev_bytes.len() as u64 {
                    return Err(bad("blocks are not sorted by address or overlap"));
                }
            }
            blocks.push((address, bytes.to_vec()));
            pos = padded;
        }
        Ok(Self { blocks })
    }
}
