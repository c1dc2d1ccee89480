//! The struct a register points to at an instruction, on a committed build of
//! `tests/data/instruction_types.c` (`tests/data/make-instruction-types.sh`): its ips and
//! location lists are that build's, whatever compiler runs the tests.

use std::path::Path;

use iced_x86::{Decoder, DecoderOptions, Register};
use object::{Object, ObjectSection, ObjectSymbol};

use super::DebugInfo;

const ELF: &[u8] = include_bytes!("../../../tests/data/instruction_types.elf");

fn debug_info() -> DebugInfo {
    DebugInfo::from_bytes(Path::new("instruction_types.elf"), ELF.to_vec()).expect("parses")
}

/// DWARF's number of a 64-bit general-purpose register (x86-64 psABI).
fn dwarf_register(reg: Register) -> u16 {
    const ORDER: [Register; 16] = [
        Register::RAX,
        Register::RDX,
        Register::RCX,
        Register::RBX,
        Register::RSI,
        Register::RDI,
        Register::RBP,
        Register::RSP,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ];
    let at = ORDER.iter().position(|r| *r == reg).expect("a 64-bit GPR");
    u16::try_from(at).expect("small")
}

/// The memory operands `disp(%base)` of function `name`: `(ip, DWARF register, disp)`.
fn operands(name: &str) -> Vec<(u64, u16, i64)> {
    // Copied: `include_bytes!` data has no alignment, the ELF parser wants it.
    let elf = ELF.to_vec();
    let file = object::File::parse(&*elf).expect("ELF");
    let sym = file
        .symbols()
        .find(|s| s.name() == Ok(name))
        .expect("the function's symbol");
    let text = file.section_by_name(".text").expect(".text");
    let data = text.data().expect("bytes");
    let start = usize::try_from(sym.address() - text.address()).expect("in .text");
    let bytes = &data[start..start + usize::try_from(sym.size()).expect("size")];
    let mut decoder = Decoder::with_ip(64, bytes, sym.address(), DecoderOptions::NONE);
    let mut found = Vec::new();
    for insn in &mut decoder {
        if insn.mnemonic() == iced_x86::Mnemonic::Nop {
            continue;
        }
        let memory = (0..insn.op_count()).any(|i| insn.op_kind(i) == iced_x86::OpKind::Memory);
        if memory && insn.memory_index() == Register::None && insn.memory_base().is_gpr64() {
            let disp = insn.memory_displacement64() as i64;
            found.push((insn.ip(), dwarf_register(insn.memory_base()), disp));
        }
    }
    found
}

#[test]
fn a_parameter_in_its_register_names_the_struct_and_field() {
    let info = debug_info();
    let ops = operands("read_count");
    assert_eq!(ops.len(), 1, "one load: {ops:x?}");
    let (ip, reg, disp) = ops[0];
    let found = info.pointer_target(ip, reg, disp).expect("typed");
    // `const node_t *`: through the const and the typedef to the struct.
    assert_eq!(found.struct_name, "node");
    assert_eq!(found.variable, "n");
    assert_eq!(found.field.as_deref(), Some("count"));
}

#[test]
fn a_location_list_places_the_parameter_after_the_call() {
    let info = debug_info();
    let ops = operands("after_call");
    assert_eq!(ops.len(), 2, "two loads after the call: {ops:x?}");
    for (ip, reg, disp) in ops {
        // Moved from %rdi into a callee-saved register before the call: only the location
        // list says so.
        assert_ne!(reg, 5, "not %rdi at {ip:#x}");
        let found = info.pointer_target(ip, reg, disp).expect("typed");
        assert_eq!(
            (found.struct_name.as_str(), found.variable.as_str()),
            ("node", "n")
        );
        let field = if disp == 0 { "key" } else { "in.b" };
        assert_eq!(found.field.as_deref(), Some(field), "{ip:#x} +{disp}");
        // Before the move, the register holds no variable.
        let entry = file_symbol("after_call");
        assert_eq!(info.pointer_target(entry, reg, disp), None);
    }
}

#[test]
fn an_inlined_callee_is_typed() {
    let info = debug_info();
    let ops = operands("through_inline");
    assert_eq!(ops.len(), 1, "{ops:x?}");
    let (ip, reg, disp) = ops[0];
    let found = info.pointer_target(ip, reg, disp).expect("typed");
    assert_eq!(found.struct_name, "pair");
    assert_eq!(found.field.as_deref(), Some("y"));
}

#[test]
fn an_integer_in_the_register_and_other_registers_are_misses() {
    let info = debug_info();
    let ops = operands("from_integer");
    assert_eq!(ops.len(), 1, "{ops:x?}");
    let (ip, reg, disp) = ops[0];
    assert_eq!(info.pointer_target(ip, reg, disp), None, "an unsigned long");
    let (ip, _, disp) = operands("read_count")[0];
    assert_eq!(
        info.pointer_target(ip, 0, disp),
        None,
        "%rax holds no variable"
    );
    assert_eq!(info.pointer_target(0x10, 5, 0), None, "no code there");
    // `struct node` is 40 bytes: a displacement outside it is no access to it.
    let (ip, reg, _) = operands("read_count")[0];
    assert!(info.pointer_target(ip, reg, 39).is_some());
    assert_eq!(info.pointer_target(ip, reg, 40), None, "past the end");
    assert_eq!(info.pointer_target(ip, reg, -8), None, "before the start");
}

fn file_symbol(name: &str) -> u64 {
    let elf = ELF.to_vec();
    let file = object::File::parse(&*elf).expect("ELF");
    file.symbols()
        .find(|s| s.name() == Ok(name))
        .expect("symbol")
        .address()
}
