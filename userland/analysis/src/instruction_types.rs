//! The second resolver: an access typed from its instruction, not its address. For a memory
//! operand `disp(%base)`, the struct the base register points to, from the DWARF location of
//! the variable the register holds at that ip (perf's data-type method; the DWARF side is
//! [`crate::debuginfo::DebugInfo::pointer_target`]), and the member at `disp`.
//!
//! It runs after the replay, once per distinct (instruction, address type), over what the
//! replay aggregated: samples whose address resolved to no type are typed (by struct), and
//! generic types (`kmalloc-N@site`, merged pools) whose typed samples mostly point at their
//! objects' start get that struct. The cross-check of both resolvers needs the cache-to-struct
//! names, so it runs where they are known ([`crate::report::annotate_fields`]).

use std::collections::BTreeMap;

use dprof_model::instruction_types::{
    GenericTyped, InstructionSite, InstructionTypes, StructSamples,
};
use rustc_hash::FxHashMap;

use crate::decode::BaseOperand;
use crate::resolve::SymbolSource;

#[cfg(test)]
mod tests;

/// Samples of one instruction that resolved to one type (or none), at one offset.
#[derive(Clone, Debug)]
pub struct Observation<'a> {
    /// The instruction.
    pub ip: u64,
    /// The address's type, and whether it is split by allocation site; `None`: no type.
    pub address_type: Option<(&'a str, bool)>,
    /// The offset in the address type's object (when it has one).
    pub offset: Option<u64>,
    /// Samples.
    pub samples: u64,
}

/// Share of a generic type's typed samples one struct needs to name the type.
const GENERIC_MAJORITY: f64 = 0.5;

/// Types what `observations` saw by instruction: `base_operand` gives the instruction's
/// `disp(%base)` operand, `symbols` the DWARF answer and function names. `None` when
/// `symbols` has no debug info to type with.
pub fn type_accesses<'a>(
    observations: impl IntoIterator<Item = Observation<'a>>,
    base_operand: &dyn Fn(u64) -> Option<BaseOperand>,
    symbols: &dyn SymbolSource,
    function_name: &dyn Fn(u64) -> String,
) -> Option<InstructionTypes> {
    if !symbols.types_instructions() {
        return None;
    }
    let mut out = InstructionTypes::default();
    // Sites by (ip, address type, offset), summed.
    let mut sites: FxHashMap<(u64, Option<String>, Option<u64>), InstructionSite> =
        FxHashMap::default();
    let mut unknown: BTreeMap<String, u64> = BTreeMap::new();
    // Generic type -> (typed samples, struct at the object's start -> samples).
    let mut generic: BTreeMap<String, (u64, BTreeMap<String, u64>)> = BTreeMap::new();
    for o in observations {
        let Some(operand) = base_operand(o.ip) else {
            continue;
        };
        out.operand_samples += o.samples;
        let Some(target) =
            symbols.pointer_target(o.ip, operand.dwarf_register(), operand.displacement)
        else {
            continue;
        };
        out.typed_samples += o.samples;
        match o.address_type {
            None => {
                out.typed_unknown += o.samples;
                *unknown.entry(target.struct_name.clone()).or_default() += o.samples;
            }
            Some((name, true)) => {
                out.typed_generic += o.samples;
                let entry = generic.entry(name.to_owned()).or_default();
                entry.0 += o.samples;
                // The register points at the object's start: the object is that struct.
                if o.offset.and_then(|off| i64::try_from(off).ok()) == Some(operand.displacement) {
                    *entry.1.entry(target.struct_name.clone()).or_default() += o.samples;
                }
            }
            Some((_, false)) => {}
        }
        let key = (o.ip, o.address_type.map(|(n, _)| n.to_owned()), o.offset);
        sites
            .entry(key)
            .or_insert_with(|| InstructionSite {
                ip: o.ip,
                function: function_name(o.ip),
                address_type: o.address_type.map(|(n, _)| n.to_owned()),
                offset: o.offset,
                struct_name: target.struct_name,
                variable: target.variable,
                displacement: operand.displacement,
                field: target.field,
                samples: 0,
                agrees: None,
                address_struct: None,
                address_field: None,
            })
            .samples += o.samples;
    }
    out.sites = sites.into_values().collect();
    out.sites.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.ip.cmp(&b.ip))
            .then(a.address_type.cmp(&b.address_type))
            .then(a.offset.cmp(&b.offset))
    });
    out.unknown_by_struct = unknown
        .into_iter()
        .map(|(struct_name, samples)| StructSamples {
            struct_name,
            samples,
        })
        .collect();
    out.unknown_by_struct.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.struct_name.cmp(&b.struct_name))
    });
    for (type_name, (typed, structs)) in generic {
        let best = structs
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
        if let Some((struct_name, samples)) = best {
            if samples as f64 > typed as f64 * GENERIC_MAJORITY {
                out.generic_types.push(GenericTyped {
                    type_name,
                    struct_name,
                    samples,
                    typed_samples: typed,
                });
            }
        }
    }
    Some(out)
}
