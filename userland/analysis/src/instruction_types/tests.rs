use std::ops::Range;

use super::*;
use crate::debuginfo::PointerTarget;

/// DWARF's answers by (ip, register, displacement).
struct Dwarf;

impl SymbolSource for Dwarf {
    fn function(&self, _ip: u64) -> Option<(&str, u64)> {
        None
    }
    fn data_symbol(&self, _addr: u64) -> Option<(&str, u64)> {
        None
    }
    fn percpu_range(&self) -> Option<Range<u64>> {
        None
    }
    fn percpu_symbol(&self, _addr: u64) -> Option<(&str, u64)> {
        None
    }
    fn function_count(&self) -> usize {
        0
    }
    fn types_instructions(&self) -> bool {
        true
    }
    fn pointer_target(&self, ip: u64, register: u16, displacement: i64) -> Option<PointerTarget> {
        let (struct_name, variable) = match (ip, register) {
            (1, 5) => ("foo", "f"),
            (2 | 3, 3) => ("bar", "b"),
            _ => return None,
        };
        Some(PointerTarget {
            variable: variable.to_owned(),
            struct_name: struct_name.to_owned(),
            field: Some(format!("at{displacement}")),
        })
    }
}

/// `disp(%base)` operands by ip: %rdi (DWARF 5) at ip 1, %rbx (DWARF 3) at ips 2-4.
fn operand(ip: u64) -> Option<BaseOperand> {
    let (register, displacement) = match ip {
        1 => (dprof_abi::reg::RDI, 16),
        2 => (dprof_abi::reg::RBX, 8),
        3 | 4 => (dprof_abi::reg::RBX, 0),
        _ => return None,
    };
    Some(BaseOperand {
        register: u8::try_from(register).expect("small"),
        displacement,
    })
}

fn observation(
    ip: u64,
    address_type: Option<(&str, bool)>,
    offset: u64,
    samples: u64,
) -> Observation<'_> {
    Observation {
        ip,
        address_type,
        offset: address_type.map(|_| offset),
        samples,
    }
}

#[test]
fn unknown_addresses_get_a_struct_and_generic_types_the_one_at_their_start() {
    let generic = Some(("kmalloc-64@site", true));
    let observations = [
        // An unknown address whose instruction points to struct foo.
        observation(1, None, 0, 3),
        // A generic type: the register points at the object's start (offset 8 = disp 8)...
        observation(2, generic, 8, 5),
        // ...and into the middle of one (offset 8, disp 0): typed, but names nothing.
        observation(3, generic, 8, 2),
        // No variable in the register; no disp(%base) operand.
        observation(4, Some(("task_struct", false)), 0, 7),
        observation(5, None, 0, 11),
    ];
    let found = type_accesses(observations, &operand, &Dwarf, &|ip| format!("f{ip}"))
        .expect("DWARF answers");
    assert_eq!(
        found.operand_samples,
        3 + 5 + 2 + 7,
        "ip 5 has no such operand"
    );
    assert_eq!(found.typed_samples, 3 + 5 + 2);
    assert_eq!(found.typed_unknown, 3);
    assert_eq!(found.typed_generic, 5 + 2);
    assert_eq!(
        found.unknown_by_struct,
        vec![StructSamples {
            struct_name: "foo".to_owned(),
            samples: 3
        }]
    );
    assert_eq!(
        found.generic_types,
        vec![GenericTyped {
            type_name: "kmalloc-64@site".to_owned(),
            struct_name: "bar".to_owned(),
            samples: 5,
            typed_samples: 7,
        }]
    );
    let first = &found.sites[0];
    assert_eq!(
        (first.ip, first.function.as_str(), first.samples),
        (2, "f2", 5),
        "most sampled first"
    );
    assert_eq!(first.field.as_deref(), Some("at8"));
    assert_eq!(first.displacement, 8);
    assert_eq!(found.sites.len(), 3);
}

#[test]
fn without_dwarf_nothing_is_typed() {
    let none = type_accesses(
        [observation(1, None, 0, 3)],
        &operand,
        &crate::resolve::NoSymbols,
        &|_| String::new(),
    );
    assert_eq!(none, None);
}
