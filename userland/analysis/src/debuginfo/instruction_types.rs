//! Which pointer variable a register holds at an instruction, from DWARF: the method of perf's
//! data-type profiling (`tools/perf/util/annotate-data.c`), done with gimli.
//!
//! For a memory operand `disp(%reg)` at `pc`, the variable or parameter whose location at `pc`
//! is `%reg` (`DW_OP_regN`, as an expression or in a location list, `.debug_loclists` of
//! DWARF 5 included) is looked for in the innermost scope holding `pc`, then in each scope
//! around it: inlined subroutines and lexical blocks, then the function. When its type is a
//! pointer to a struct or union (through typedefs and qualifiers), that struct is what the
//! instruction touched, at `disp`.
//!
//! A vmlinux has millions of DIEs: nothing is indexed up front. The units' code ranges are read
//! once (a few thousand units), a unit's top-level functions when one of its ips is first asked
//! about, and only the one function holding `pc` is walked. Callers cache the answers.
//!
//! This module knows only gimli; the caller ([`super::DebugInfo::pointer_target`]) places
//! addresses and names the fields.

use gimli::{AttributeValue, Operation, Reader, UnitOffset};

/// A pointer variable found in a register, and the struct or union it points to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterVariable {
    /// The variable or parameter, as the source names it.
    pub variable: String,
    /// The struct or union its type points to (bare: `sk_buff`; a typedef's name for an
    /// anonymous one).
    pub struct_name: String,
}

/// Deepest chain of typedefs, qualifiers and abstract origins followed.
const MAX_HOPS: usize = 16;

/// Code ranges of every unit: `(begin, end, unit index)`, sorted by `begin`.
pub fn unit_code_ranges<R: Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    units: &[gimli::Unit<R>],
) -> Vec<(u64, u64, usize)> {
    let mut ranges = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        let Ok(mut iter) = dwarf.unit_ranges(unit) else {
            continue;
        };
        while let Ok(Some(r)) = iter.next() {
            if r.begin < r.end {
                ranges.push((r.begin, r.end, i));
            }
        }
    }
    ranges.sort_unstable();
    ranges
}

/// The units whose code holds `pc` (usually one), from [`unit_code_ranges`].
pub fn units_at(ranges: &[(u64, u64, usize)], pc: u64) -> impl Iterator<Item = usize> + '_ {
    let after = ranges.partition_point(|r| r.0 <= pc);
    // Unit ranges do not nest; a few overlapping ones (alternatives, cold parts) are looked
    // back over.
    ranges[..after]
        .iter()
        .rev()
        .take(8)
        .filter(move |r| pc < r.1)
        .map(|r| r.2)
}

/// Code ranges of the top-level functions of `unit` (`DW_TAG_subprogram` children of the unit
/// DIE with code), sorted by `begin`: `(begin, end, offset)`.
pub fn unit_functions<R: Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
) -> gimli::Result<Vec<(u64, u64, UnitOffset)>> {
    let mut functions = Vec::new();
    let mut tree = unit.entries_tree(None)?;
    let root = tree.root()?;
    let mut children = root.children();
    while let Some(child) = children.next()? {
        let entry = child.entry();
        if entry.tag() != gimli::DW_TAG_subprogram {
            continue;
        }
        let mut ranges = dwarf.die_ranges(unit, entry)?;
        while let Some(r) = ranges.next()? {
            if r.begin < r.end {
                functions.push((r.begin, r.end, entry.offset()));
            }
        }
    }
    functions.sort_unstable_by_key(|f| (f.0, f.1));
    Ok(functions)
}

/// The function among `functions` (from [`unit_functions`]) whose code holds `pc`.
#[must_use]
pub fn function_at(functions: &[(u64, u64, UnitOffset)], pc: u64) -> Option<UnitOffset> {
    let after = functions.partition_point(|f| f.0 <= pc);
    functions[..after]
        .iter()
        .rev()
        .take(8)
        .find(|f| pc < f.1)
        .map(|f| f.2)
}

/// The pointer-to-struct variable located in DWARF register `register` at `pc`, in the
/// function at `function` of `unit`: the innermost scope's first, then the scopes around it.
///
/// # Errors
/// When the DWARF is malformed.
pub fn register_variable<R: Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    function: UnitOffset,
    pc: u64,
    register: u16,
) -> gimli::Result<Option<RegisterVariable>> {
    let mut tree = unit.entries_tree(Some(function))?;
    let root = tree.root()?;
    // Scopes from the function inwards; each with the variables located in `register`.
    let mut found: Vec<UnitOffset> = Vec::new();
    scope_variables(dwarf, unit, root, pc, register, &mut found)?;
    // Innermost last: an inlined callee's parameter names the access, not the caller's.
    for &offset in found.iter().rev() {
        if let Some(v) = pointer_variable(dwarf, unit, offset)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// Appends the variables of `node`'s scope located in `register` at `pc`, then those of the
/// nested scope holding `pc`, recursively.
fn scope_variables<R: Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    node: gimli::EntriesTreeNode<'_, '_, '_, R>,
    pc: u64,
    register: u16,
    found: &mut Vec<UnitOffset>,
) -> gimli::Result<()> {
    let mut children = node.children();
    let mut inner = None;
    while let Some(child) = children.next()? {
        let entry = child.entry();
        match entry.tag() {
            gimli::DW_TAG_variable | gimli::DW_TAG_formal_parameter
                if located_in(dwarf, unit, entry, pc, register)? =>
            {
                found.push(entry.offset());
            }
            gimli::DW_TAG_lexical_block | gimli::DW_TAG_inlined_subroutine
                if inner.is_none() && holds(dwarf, unit, entry, pc)? =>
            {
                inner = Some(entry.offset());
            }
            _ => {}
        }
    }
    if let Some(offset) = inner {
        let mut tree = unit.entries_tree(Some(offset))?;
        scope_variables(dwarf, unit, tree.root()?, pc, register, found)?;
    }
    Ok(())
}

/// Whether scope `entry`'s code holds `pc`. A block with no code range of its own (gcc
/// leaves some) is taken to hold it: its variables' locations still have to match.
fn holds<R: Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    pc: u64,
) -> gimli::Result<bool> {
    let mut ranges = dwarf.die_ranges(unit, entry)?;
    let mut any = false;
    while let Some(r) = ranges.next()? {
        any = true;
        if r.begin <= pc && pc < r.end {
            return Ok(true);
        }
    }
    Ok(!any)
}

/// Whether `entry`'s location at `pc` is DWARF register `register`, the whole expression.
fn located_in<R: Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    pc: u64,
    register: u16,
) -> gimli::Result<bool> {
    let Some(value) = entry.attr_value(gimli::DW_AT_location)? else {
        return Ok(false);
    };
    if let AttributeValue::Exprloc(expr) = value {
        return Ok(is_register(unit, &expr, register));
    }
    let Some(mut locations) = dwarf.attr_locations(unit, value)? else {
        return Ok(false);
    };
    while let Some(l) = locations.next()? {
        if l.range.begin <= pc && pc < l.range.end && is_register(unit, &l.data, register) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether `expr` is exactly `DW_OP_regN` (or `DW_OP_regx N`) for `register`.
fn is_register<R: Reader<Offset = usize>>(
    unit: &gimli::Unit<R>,
    expr: &gimli::Expression<R>,
    register: u16,
) -> bool {
    let mut ops = expr.clone().operations(unit.encoding());
    matches!(ops.next(), Ok(Some(Operation::Register { register: r })) if r.0 == register)
        && matches!(ops.next(), Ok(None))
}

/// The variable at `offset` when its type is a pointer to a named struct or union.
fn pointer_variable<R: Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    offset: UnitOffset,
) -> gimli::Result<Option<RegisterVariable>> {
    // A concrete instance (inlined, or an out-of-line copy) has its name and type on the
    // abstract DIE it points to.
    let mut at = offset;
    let (mut name, mut ty) = (None, None);
    for _ in 0..MAX_HOPS {
        let entry = unit.entry(at)?;
        if name.is_none() {
            if let Some(v) = entry.attr_value(gimli::DW_AT_name)? {
                name = Some(dwarf.attr_string(unit, v)?.to_string_lossy()?.into_owned());
            }
        }
        if ty.is_none() {
            ty = unit_ref(entry.attr_value(gimli::DW_AT_type)?);
        }
        match unit_ref(entry.attr_value(gimli::DW_AT_abstract_origin)?) {
            Some(origin) if name.is_none() || ty.is_none() => at = origin,
            _ => break,
        }
    }
    let Some(ty) = ty else { return Ok(None) };
    let Some(struct_name) = pointee_struct(dwarf, unit, ty)? else {
        return Ok(None);
    };
    Ok(Some(RegisterVariable {
        variable: name.unwrap_or_else(|| "?".to_owned()),
        struct_name,
    }))
}

/// A reference into the same unit (gcc's and clang's types and origins, but for LTO).
fn unit_ref<R: Reader<Offset = usize>>(value: Option<AttributeValue<R>>) -> Option<UnitOffset> {
    match value? {
        AttributeValue::UnitRef(offset) => Some(offset),
        _ => None,
    }
}

/// The name of the struct or union type `ty` points to, through typedefs and qualifiers.
fn pointee_struct<R: Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    ty: UnitOffset,
) -> gimli::Result<Option<String>> {
    let mut at = ty;
    let mut through_pointer = false;
    let mut typedef_name = None;
    for _ in 0..MAX_HOPS {
        let entry = unit.entry(at)?;
        let next = unit_ref(entry.attr_value(gimli::DW_AT_type)?);
        match entry.tag() {
            gimli::DW_TAG_pointer_type if !through_pointer => through_pointer = true,
            gimli::DW_TAG_typedef if through_pointer => {
                if let Some(v) = entry.attr_value(gimli::DW_AT_name)? {
                    typedef_name =
                        Some(dwarf.attr_string(unit, v)?.to_string_lossy()?.into_owned());
                }
            }
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => {}
            gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type if through_pointer => {
                let name = match entry.attr_value(gimli::DW_AT_name)? {
                    Some(v) => Some(dwarf.attr_string(unit, v)?.to_string_lossy()?.into_owned()),
                    None => typedef_name,
                };
                return Ok(name);
            }
            _ => return Ok(None),
        }
        let Some(next) = next else { return Ok(None) };
        at = next;
    }
    Ok(None)
}
