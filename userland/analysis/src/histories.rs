//! Object access histories (paper section 4.3), path traces (4.4) and the data flow view
//! (3.4).
//!
//! ```text
//! HistoryStart/Arm/Hit/End ──▶ assemble: per history, hits in time order ──▶ path traces
//!   (file order; hits of a        find the accessing instruction (decode        per type ──▶ data flow
//!    history may follow its       its function from the Text section),          (+ sampled    graph
//!    End from another ring)       cross-check its address against the range      accesses)
//! ```
//!
//! A debug-register trap reports the instruction *after* the access and the registers after
//! it, so the accessing instruction is the one that ends exactly at the trap ip: found by
//! decoding the containing function from its kallsyms start with the live code bytes the
//! collector captured ([`dprof_format::KernelText`]). Its memory operand, recomputed from
//! the trap's registers, must overlap the watched range: [`HitCheck`] says whether it did,
//! could not be checked (the instruction overwrote a register its address is made of; string
//! and other implicit operands) or whether no code was there to decode. Nothing is guessed.
//!
//! A type collected with `--histories full:TYPE` has its pairwise histories merged, set by
//! set, into whole-object histories ([`full`]'s module doc says how).
//!
//! Only histories that ran from allocation to free ([`EndReason::Freed`], or
//! [`EndReason::Reallocated`]: freed at an unknown time by a path without a tracepoint) make
//! path traces; histories cut by a timeout or by the end of collection are counted.
//!
//! [`plan`] goes the other way: from a data profile to the targets `dprof collect --histories
//! auto` hands the module.

mod assemble;
mod by_type;
mod code;
mod flow;
mod full;
mod paths;

#[cfg(test)]
mod tests;

pub use assemble::{assemble, has_histories, Histories, History, HistoryEnding, Hit};
pub(crate) use assemble::{assemble_from, Collected};
pub use by_type::{analyze, report};
pub use code::hit_registers;

/// The data profile's bounce flag from the histories too: a history with a CPU change is an
/// object that moved between CPUs within its lifetime, whether or not samples caught it. Each
/// type with histories gets their count, and at least that many bounced objects.
pub fn apply_bounces(profile: &mut dprof_model::DataProfile, histories: &Histories) {
    let mut by_type: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for history in &histories.histories {
        *by_type.entry(history.type_name.as_str()).or_default() +=
            u64::from(history.cpu_changes() > 0);
    }
    for ty in &mut profile.types {
        if let Some(&moved) = by_type.get(ty.name.as_str()) {
            ty.bounced_histories = Some(moved);
            ty.bounced_objects = ty.bounced_objects.max(moved);
            ty.bounce = ty.bounced_objects > 0;
        }
    }
}
