//! Names in the report model: which C struct a slab type's objects are ([`StructNames`]) and
//! which field an offset falls in ([`FieldSource`], implemented over DWARF and over BTF).
//! Offsets are always in the report; names only once [`annotate_fields`] ran.

mod struct_names;

#[cfg(test)]
mod tests;

use dprof_model::histories::{Span, TypeHistories};
use dprof_model::{FieldsNamed, Report, TypeKind, TypeProfile};

use crate::debuginfo::VariableType;
pub use struct_names::{FieldSource, StructNames, TypeMapError};

/// Names struct types and fields in `report`: sets [`TypeProfile::struct_name`] of slab types from
/// `names` (the user map, the built-in table, or a cache named like a struct `fields`
/// knows), and [`FieldCount::field`] from `fields` when given; then the fields of the miss
/// classification's evidence and of the histories (path traces, field orders, the data flow's
/// ranges, the merged whole-object paths' chunks), by the same struct names.
pub fn annotate_fields(report: &mut Report, names: &StructNames, fields: Option<&dyn FieldSource>) {
    let by_instruction = report.coverage.by_instruction.as_ref();
    for t in &mut report.data_profile.types {
        if t.kind == TypeKind::Region && t.name == crate::resolve::STRUCT_PAGE_TYPE {
            // The vmemmap is an array of one C struct.
            t.struct_name = Some(crate::resolve::STRUCT_PAGE_C_STRUCT.to_owned());
        } else if matches!(t.kind, TypeKind::Global | TypeKind::Percpu) {
            let Some((variable, fields)) = crate::resolve::variable_name(&t.name).zip(fields)
            else {
                continue;
            };
            match fields.variable_type(variable) {
                // A struct: its fields, as a slab object's.
                Some(VariableType::Composite(st)) => t.struct_name = Some(st),
                // Numbers or pointers: their bytes are the variable or its elements.
                Some(scalars) => {
                    for f in &mut t.fields {
                        f.field = scalars.scalar_at(variable, f.offset);
                    }
                    continue;
                }
                None => continue,
            }
        } else if t.kind != TypeKind::Slab {
            continue;
        } else {
            let Some(cache) = &t.cache else { continue };
            if t.site.is_some() {
                // Split by site (generic kmalloc, a merged pool): the cache holds several
                // structs, and only the type's instructions can tell which this one is.
                t.struct_name = by_instruction
                    .and_then(|it| it.generic_types.iter().find(|g| g.type_name == t.name))
                    .map(|g| g.struct_name.clone());
                if t.struct_name.is_none() {
                    continue;
                }
            } else {
                t.struct_name = names.struct_for(cache, fields);
            }
        }
        if let (Some(st), Some(fields)) = (&t.struct_name, fields) {
            for f in &mut t.fields {
                f.field = fields.field_at(st, f.offset);
            }
        }
    }
    let Some(fields) = fields else {
        return;
    };
    report
        .coverage
        .set_fields_named(fields_named(&report.data_profile.types));
    if let Some(it) = &mut report.coverage.by_instruction {
        cross_check(it, &report.data_profile.types, fields);
    }
    if let Some(histories) = &mut report.histories {
        for t in &mut histories.types {
            // Named as the data profile names the type; a type with no allocation in the
            // profile is looked up by its cache, unless split by site (`cache@function`).
            let st = match report.data_profile.types.iter().find(|p| p.name == t.name) {
                Some(p) => p.struct_name.clone(),
                None if !t.name.contains('@') => names.struct_for(&t.name, Some(fields)),
                None => None,
            };
            if let Some(st) = st {
                name_history_fields(t, &st, fields);
            }
        }
    }
    let Some(misses) = &mut report.misses else {
        return;
    };
    for m in &mut misses.types {
        let Some(st) = report
            .data_profile
            .types
            .iter()
            .find(|t| t.name == m.name)
            .and_then(|t| t.struct_name.as_deref())
        else {
            continue;
        };
        let sites = m
            .sharing
            .iter_mut()
            .flat_map(|e| [&mut e.writer, &mut e.missing])
            .chain(m.cannot_tell.iter_mut().map(|e| &mut e.missing));
        for site in sites {
            site.field = fields.field_at(st, site.offset);
        }
    }
}

/// Compares the two resolvers where both answer: sites whose address resolved to a slab type
/// of one struct (a cache not split by site, whose struct the names gave). They agree when the
/// address's struct has at the object's offset the member the instruction's struct has at the
/// displacement, or one that ends with it (the instruction's struct embedded there: `struct
/// sock *` into a `tcp_sock`, `struct list_head *` into a task's list); with no member to
/// compare, when the structs and the offsets are the same. Every member holding the byte
/// counts: union members overlap (`d_lockref.lock_count` and `d_lockref.lock`).
fn cross_check(
    it: &mut dprof_model::instruction_types::InstructionTypes,
    types: &[dprof_model::TypeProfile],
    fields: &dyn FieldSource,
) {
    it.compared_samples = 0;
    it.agreed_samples = 0;
    for site in &mut it.sites {
        let address_struct = site.address_type.as_ref().and_then(|name| {
            types
                .iter()
                .find(|t| &t.name == name && t.kind == TypeKind::Slab && t.site.is_none())
                .and_then(|t| t.struct_name.clone())
        });
        let (Some(address_struct), Some(offset)) = (address_struct, site.offset) else {
            continue;
        };
        let address_field = fields.field_at(&address_struct, offset);
        let agrees = match &site.field {
            // Any member holding the byte may be the one: union members overlap.
            Some(part) => address_field
                .iter()
                .cloned()
                .chain(fields.fields_holding(&address_struct, offset))
                .any(|whole| whole == *part || whole.ends_with(&format!(".{part}"))),
            None => {
                address_struct == site.struct_name
                    && i64::try_from(offset).ok() == Some(site.displacement)
            }
        };
        it.compared_samples += site.samples;
        if agrees {
            it.agreed_samples += site.samples;
        }
        site.agrees = Some(agrees);
        site.address_struct = Some(address_struct);
        site.address_field = address_field;
    }
}

/// Names the fields of `t`'s watched ranges, all of whose objects are `struct st`.
fn name_history_fields(t: &mut TypeHistories, st: &str, fields: &dyn FieldSource) {
    let name = |span: Span| fields.field_at(st, u64::from(span.offset));
    for e in t.paths.iter_mut().flat_map(|p| &mut p.elements) {
        e.field = name(e.range);
    }
    for order in &mut t.field_orders {
        order.first_field = name(order.first);
        order.second_field = name(order.second);
    }
    for r in t.data_flow.nodes.iter_mut().flat_map(|n| &mut n.ranges) {
        r.field = name(r.range);
    }
    for step in t
        .full
        .iter_mut()
        .flat_map(|f| &mut f.paths)
        .flat_map(|p| &mut p.steps)
    {
        step.field = name(step.chunk);
    }
}

/// How many samples on data types (pseudo-types left out) fell in a named field.
fn fields_named(types: &[TypeProfile]) -> FieldsNamed {
    let mut named = FieldsNamed::default();
    for t in types {
        // Stacks and regions are pseudo-types too.
        if crate::resolve::pseudo_type(t.kind, &t.name).is_some() {
            continue;
        }
        for f in &t.fields {
            named.typed_samples += f.samples;
            if f.field.is_some() {
                named.named_samples += f.samples;
            }
        }
    }
    named
}

impl FieldSource for crate::debuginfo::DebugInfo {
    fn has_struct(&self, name: &str) -> bool {
        self.struct_size(name).is_some()
    }
    fn field_at(&self, struct_name: &str, offset: u64) -> Option<String> {
        Self::field_at(self, struct_name, offset)
    }
    fn fields_holding(&self, struct_name: &str, offset: u64) -> Vec<String> {
        self.struct_fields(struct_name)
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f.offset <= offset && offset - f.offset < f.size)
            .map(|f| f.name)
            .collect()
    }
    fn variable_type(&self, name: &str) -> Option<VariableType> {
        Self::variable_type(self, name)
    }
}
