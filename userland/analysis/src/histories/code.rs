//! From a trap ip to the instruction that made the access: the one ending exactly there,
//! found by decoding its function from the kallsyms start with the profile's code bytes.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::decode::{decode_insn, instruction_boundaries, DecodedInsn};
use crate::resolve::SymbolSource;
use dprof_format::KernelText;
use dprof_model::histories::NoCode;

/// The registers (a bit per `dprof_abi::reg` index) the cross-check of a hit trapping at
/// `trap_ip` reads: the address registers of the instruction the analysis finds before the
/// trap in `text`; `None` when it finds none (then the check reads no register, but a
/// collector that asks before it has all the code keeps every register). What `dprof collect`
/// keeps of each hit ([`dprof_format::HistoryRegisters::Address`]).
#[must_use]
pub fn hit_registers(text: &KernelText, symbols: &dyn SymbolSource, trap_ip: u64) -> Option<u16> {
    CodeIndex::new(text, symbols).hit_registers(trap_ip)
}

/// Decoded functions and instructions, by address: each function is decoded once.
pub(super) struct CodeIndex<'a> {
    text: &'a KernelText,
    symbols: &'a dyn SymbolSource,
    /// Instruction boundaries `(ip, len)` of each function, by its start; `None`: no bytes.
    functions: FxHashMap<u64, Option<Vec<(u64, u8)>>>,
    /// Accessing instructions found, by trap ip.
    found: FxHashMap<u64, Result<DecodedInsn, NoCode>>,
    /// Mnemonics named, by instruction address: a hit shares its instruction's.
    mnemonics: FxHashMap<u64, Arc<str>>,
}

impl<'a> CodeIndex<'a> {
    pub(super) fn new(text: &'a KernelText, symbols: &'a dyn SymbolSource) -> Self {
        Self {
            text,
            symbols,
            functions: FxHashMap::default(),
            found: FxHashMap::default(),
            mnemonics: FxHashMap::default(),
        }
    }

    /// The mnemonic of `insn`, named once per instruction.
    pub(super) fn mnemonic(&mut self, insn: &DecodedInsn) -> Arc<str> {
        self.mnemonics
            .entry(insn.ip)
            .or_insert_with(|| insn.mnemonic().into())
            .clone()
    }

    /// The instruction that accessed memory for a trap at `trap_ip`.
    pub(super) fn accessing_instruction(&mut self, trap_ip: u64) -> Result<DecodedInsn, NoCode> {
        if let Some(found) = self.found.get(&trap_ip) {
            return *found;
        }
        let found = self.find(trap_ip);
        self.found.insert(trap_ip, found);
        found
    }

    fn find(&mut self, trap_ip: u64) -> Result<DecodedInsn, NoCode> {
        match self.symbols.function(trap_ip) {
            // A trap at a function's first byte follows the last instruction of the function
            // before, or is a `rep` string instruction trapping on itself.
            Some((_, 0)) => match self.ending_before(trap_ip) {
                Some(Ok(insn)) => Ok(insn),
                _ => self.find_in(trap_ip, trap_ip),
            },
            Some((_, off)) => self.find_in(trap_ip.wrapping_sub(off), trap_ip),
            None => Err(NoCode::NoSymbol),
        }
    }

    /// For a trap at a function's first byte: the instruction that ends the function before
    /// there; `None` when no function is before it.
    fn ending_before(&mut self, trap_ip: u64) -> Option<Result<DecodedInsn, NoCode>> {
        let before = self
            .symbols
            .function(trap_ip.wrapping_sub(1))
            .map(|(_, off)| trap_ip.wrapping_sub(1).wrapping_sub(off))?;
        Some(self.find_in(before, trap_ip))
    }

    /// The registers (a bit per `dprof_abi::reg` index) the cross-check of a hit trapping at
    /// `trap_ip` reads ([`DecodedInsn::address_registers`] of its accessing instruction),
    /// with the code the text holds now; `None` when no accessing instruction is found.
    ///
    /// The collector asks while the code it will keep is still growing: at a function's
    /// first byte, [`CodeIndex::accessing_instruction`] takes the instruction ending the
    /// function before when the text has that function's code, else a string instruction at
    /// the trap ip, so the registers of both are kept.
    pub(super) fn hit_registers(&mut self, trap_ip: u64) -> Option<u16> {
        let registers =
            |found: Result<DecodedInsn, NoCode>| found.ok().map(|i| i.address_registers());
        match self.symbols.function(trap_ip) {
            Some((_, 0)) => {
                let before = self.ending_before(trap_ip).and_then(registers);
                let here = registers(self.find_in(trap_ip, trap_ip));
                match (before, here) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) | b.unwrap_or(0)),
                }
            }
            _ => registers(self.accessing_instruction(trap_ip)),
        }
    }

    /// The accessing instruction for `trap_ip` in the function starting at `start`.
    fn find_in(&mut self, start: u64, trap_ip: u64) -> Result<DecodedInsn, NoCode> {
        let text = self.text;
        let boundaries = self
            .functions
            .entry(start)
            .or_insert_with(|| {
                let (block, bytes) = text.block_containing(start)?;
                let from = usize::try_from(start - block).ok()?;
                Some(instruction_boundaries(bytes.get(from..)?, start))
            })
            .as_deref()
            .ok_or(NoCode::NoBytes)?;
        if boundaries
            .last()
            .is_none_or(|&(ip, len)| ip.wrapping_add(u64::from(len)) < trap_ip)
        {
            // The bytes stop (or stop decoding) before the trap.
            return Err(
                if text.block_containing(trap_ip.wrapping_sub(1)).is_some() {
                    NoCode::NoBoundary
                } else {
                    NoCode::NoBytes
                },
            );
        }
        let at = boundaries.partition_point(|&(ip, _)| ip < trap_ip);
        let ending = at
            .checked_sub(1)
            .and_then(|i| boundaries.get(i))
            .filter(|&&(ip, len)| ip.wrapping_add(u64::from(len)) == trap_ip);
        if let Some(&(ip, len)) = ending {
            return self.decode(ip, len);
        }
        // A `rep` string instruction with iterations left traps on itself.
        let &(ip, len) = boundaries
            .get(at)
            .filter(|&&(ip, _)| ip == trap_ip)
            .ok_or(NoCode::NoBoundary)?;
        let insn = self.decode(ip, len)?;
        if insn.is_string_op() {
            Ok(insn)
        } else {
            Err(NoCode::NoBoundary)
        }
    }

    fn decode(&self, ip: u64, len: u8) -> Result<DecodedInsn, NoCode> {
        let bytes = self
            .text
            .bytes_at(ip, usize::from(len))
            .ok_or(NoCode::NoBytes)?;
        decode_insn(bytes, ip).map_err(|_| NoCode::Undecodable)
    }
}
