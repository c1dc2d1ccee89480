//! The code table of format version 2: each distinct sampled instruction (address and bytes)
//! once, numbered in order of first use; samples store the number.
//!
//! A Code section's payload is `u32 first, u32 count`, then `count` entries of
//! `u64 ip, u8 len, len bytes`. `first` must be the number of entries before it, so the table
//! only grows and every section extends it. The writer puts a Code section with the new
//! entries before each block that uses them; the reader reads every Code section at open.

use dprof_abi::SAMPLE_INSN_BYTES;

use crate::codec::CodeKey;

/// Which of a sampled instruction's registers to keep (a bit per `dprof_abi::reg` index),
/// given its address and bytes. The writer asks once per distinct instruction.
pub type RegisterFilter = Box<dyn FnMut(u64, &[u8]) -> u16 + Send>;

/// Which of a history hit's registers to keep (a bit per `dprof_abi::reg` index), given its
/// trap ip. The writer asks once per distinct trap ip.
pub type HitRegisterFilter = Box<dyn FnMut(u64) -> u16 + Send>;

/// Keeps every register: what the writer does unless told otherwise.
pub const ALL_REGISTERS: u16 = u16::MAX;

/// The writer's answers of a [`HitRegisterFilter`], by trap ip: a hit costs one lookup.
#[derive(Default)]
pub(crate) struct HitRegisters {
    keep: rustc_hash::FxHashMap<u64, u16>,
    filter: Option<HitRegisterFilter>,
}

impl std::fmt::Debug for HitRegisters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HitRegisters")
            .field("trap_ips", &self.keep.len())
            .field("filter", &self.filter.is_some())
            .finish()
    }
}

impl HitRegisters {
    pub(crate) fn set_filter(&mut self, filter: HitRegisterFilter) {
        self.filter = Some(filter);
        self.keep.clear();
    }

    /// The registers a hit trapping at `trap_ip` keeps.
    pub(crate) fn keep(&mut self, trap_ip: u64) -> u16 {
        let Some(filter) = self.filter.as_mut() else {
            return ALL_REGISTERS;
        };
        *self.keep.entry(trap_ip).or_insert_with(|| filter(trap_ip))
    }
}

/// The writer's table: numbers instructions and remembers which registers each keeps.
pub(crate) struct CodeInterner {
    /// Looked up for every sample written: a fast hash.
    numbers: rustc_hash::FxHashMap<CodeKey, u32>,
    entries: Vec<CodeKey>,
    keep: Vec<u16>,
    /// Entries not yet written in a Code section start here.
    unwritten: usize,
    filter: Option<RegisterFilter>,
}

impl std::fmt::Debug for CodeInterner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeInterner")
            .field("entries", &self.entries.len())
            .field("unwritten", &self.unwritten)
            .field("filter", &self.filter.is_some())
            .finish_non_exhaustive()
    }
}

impl CodeInterner {
    pub(crate) fn new() -> Self {
        Self {
            numbers: rustc_hash::FxHashMap::default(),
            entries: Vec::new(),
            keep: Vec::new(),
            unwritten: 0,
            filter: None,
        }
    }

    pub(crate) fn set_filter(&mut self, filter: RegisterFilter) {
        self.filter = Some(filter);
    }

    /// The number of `key`, and the registers its samples keep.
    pub(crate) fn intern(&mut self, key: CodeKey) -> (u64, u16) {
        if let Some(&n) = self.numbers.get(&key) {
            return (u64::from(n), self.keep[n as usize]);
        }
        let n = self.entries.len() as u32;
        let valid = &key.bytes[..usize::from(key.len).min(SAMPLE_INSN_BYTES)];
        let keep = self
            .filter
            .as_mut()
            .map_or(ALL_REGISTERS, |f| f(key.ip, valid));
        self.numbers.insert(key, n);
        self.entries.push(key);
        self.keep.push(keep);
        (u64::from(n), keep)
    }

    /// The payload of a Code section with the entries not yet written, if any.
    pub(crate) fn take_unwritten(&mut self) -> Option<Vec<u8>> {
        let new = &self.entries[self.unwritten..];
        if new.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(8 + new.len() * 25);
        out.extend_from_slice(&(self.unwritten as u32).to_le_bytes());
        out.extend_from_slice(&(new.len() as u32).to_le_bytes());
        for entry in new {
            out.extend_from_slice(&entry.ip.to_le_bytes());
            out.push(entry.len);
            out.extend_from_slice(&entry.bytes[..usize::from(entry.len)]);
        }
        self.unwritten = self.entries.len();
        Some(out)
    }
}

/// Appends a Code section's entries to `table`; the error says what is wrong and where in
/// the payload.
pub(crate) fn decode_section(
    payload: &[u8],
    table: &mut Vec<CodeKey>,
) -> Result<(), (usize, &'static str)> {
    let u32_at = |pos: usize| {
        payload
            .get(pos..pos + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    let (Some(first), Some(count)) = (u32_at(0), u32_at(4)) else {
        return Err((0, "the section is shorter than its 8-byte header"));
    };
    if first as usize != table.len() {
        return Err((0, "its first entry does not follow the entries before it"));
    }
    let mut pos = 8;
    for _ in 0..count {
        let Some(head) = payload.get(pos..pos + 9) else {
            return Err((pos, "the section ends inside an entry"));
        };
        let ip = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
        let len = head[8];
        if usize::from(len) > SAMPLE_INSN_BYTES {
            return Err((pos + 8, "an instruction is longer than 16 bytes"));
        }
        let Some(code) = payload.get(pos + 9..pos + 9 + usize::from(len)) else {
            return Err((pos, "the section ends inside an entry"));
        };
        let mut bytes = [0u8; SAMPLE_INSN_BYTES];
        bytes[..code.len()].copy_from_slice(code);
        table.push(CodeKey { ip, len, bytes });
        pos += 9 + usize::from(len);
    }
    if pos != payload.len() {
        return Err((pos, "bytes follow the last entry"));
    }
    Ok(())
}
