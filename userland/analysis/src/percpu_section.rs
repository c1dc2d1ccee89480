//! Where the kernel linked its static per-CPU section, when kallsyms does not say.
//!
//! Since Linux 6.15, x86-64 no longer links the per-CPU section at address 0: a per-CPU
//! variable has an ordinary kernel address inside `.data..percpu`, and code reaches a CPU's
//! copy as `%gs:VARIABLE`, the gs base being that CPU's offset. kallsyms lists the section's
//! bounds (`__per_cpu_start`) only with `CONFIG_KALLSYMS_ALL`, which distribution and cloud
//! kernels often leave off. The kernel's BTF still lists each per-CPU variable with its offset
//! in the section (its `.data..percpu` DATASEC), so the section's start is all that is missing
//! to name them.
//!
//! [`locate`] finds that start from the kernel's code: every `%gs:` operand without a base or
//! index register addresses a static per-CPU variable, so the start is the one address that
//! puts many operands exactly on a variable's first byte. Each operand votes for
//! `operand - offset` of every variable; only page-aligned candidates count, because the
//! section holds page-aligned variables and so starts on a page. The winner must lead clearly,
//! and nearly every operand must then fall inside the section; otherwise the code does not
//! tell, and nothing is guessed.

use std::collections::HashMap;
use std::ops::Range;

/// Pages are 4 KiB on x86-64, and the section starts on one.
const PAGE_BYTES: u64 = 4096;

/// Fewest operands that must land on a variable's first byte.
const MIN_VOTES: u32 = 8;

/// How far the winner must lead the runner-up, as a factor.
const LEAD: u32 = 3;

/// Share of the distinct operands that must lie inside the section the winner places.
const MIN_INSIDE: f64 = 0.9;

/// One per-CPU variable of the kernel's BTF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PercpuVariable {
    /// Its name (`runqueues`).
    pub name: String,
    /// Its offset from the section's start.
    pub offset: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// The static per-CPU section as BTF describes it: its size and variables, without an
/// address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PercpuLayout {
    /// Bytes of the section.
    pub bytes: u64,
    /// Its variables, sorted by offset.
    pub variables: Vec<PercpuVariable>,
}

/// A section start found from the code, and how sure it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The section's addresses: `__per_cpu_start..__per_cpu_end`.
    pub section: Range<u64>,
    /// Distinct operands that land on a variable's first byte with this start.
    pub votes: u32,
    /// Distinct `%gs:` operands looked at.
    pub operands: usize,
}

/// Why the code does not place the section.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotLocated {
    /// BTF lists no per-CPU variable.
    #[error("the kernel's BTF lists no per-CPU variable")]
    NoVariables,
    /// Too few operands agree on any start.
    #[error(
        "{operands} distinct %gs: operands in the kernel's code put at most {votes} on a \
         per-CPU variable's first byte at any one section start (at least {MIN_VOTES} needed)"
    )]
    TooFewVotes {
        /// Distinct operands.
        operands: usize,
        /// The best start's votes.
        votes: u32,
    },
    /// Two starts are about as likely.
    #[error(
        "two per-CPU section starts are about as likely ({best:#x} with {votes} operands, \
         {second:#x} with {second_votes})"
    )]
    Ambiguous {
        /// The best start.
        best: u64,
        /// Its votes.
        votes: u32,
        /// The runner-up.
        second: u64,
        /// Its votes.
        second_votes: u32,
    },
    /// Too many operands fall outside the section the best start places.
    #[error(
        "with the per-CPU section at {start:#x}, only {inside} of {operands} distinct %gs: \
         operands fall inside it"
    )]
    OperandsOutside {
        /// The best start.
        start: u64,
        /// Operands inside.
        inside: usize,
        /// Distinct operands.
        operands: usize,
    },
}

/// The section's start from `operands`, the addresses of the kernel code's `%gs:` operands
/// that have no base or index register (see
/// [`gs_operand_addresses`](crate::decode::gs_operand_addresses)).
///
/// # Errors
/// [`NotLocated`] when the operands do not single out one start.
pub fn locate(operands: &[u64], layout: &PercpuLayout) -> Result<Located, NotLocated> {
    if layout.variables.is_empty() {
        return Err(NotLocated::NoVariables);
    }
    let mut distinct = operands.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut starts: Vec<u64> = layout.variables.iter().map(|v| v.offset).collect();
    starts.sort_unstable();
    starts.dedup();
    let mut votes: HashMap<u64, u32> = HashMap::new();
    for &operand in &distinct {
        for &offset in &starts {
            let candidate = operand.wrapping_sub(offset);
            if candidate % PAGE_BYTES == 0 {
                *votes.entry(candidate).or_default() += 1;
            }
        }
    }
    // Highest votes first, ties to the lower address so the outcome does not depend on the
    // map's order.
    let mut ranked: Vec<(u64, u32)> = votes.into_iter().collect();
    ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let (best, best_votes) = ranked.first().copied().unwrap_or((0, 0));
    if best_votes < MIN_VOTES {
        return Err(NotLocated::TooFewVotes {
            operands: distinct.len(),
            votes: best_votes,
        });
    }
    if let Some(&(second, second_votes)) = ranked.get(1) {
        if best_votes < LEAD * second_votes {
            return Err(NotLocated::Ambiguous {
                best,
                votes: best_votes,
                second,
                second_votes,
            });
        }
    }
    let section = best..best.wrapping_add(layout.bytes);
    let inside = distinct.iter().filter(|o| section.contains(o)).count();
    if (inside as f64) < MIN_INSIDE * distinct.len() as f64 {
        return Err(NotLocated::OperandsOutside {
            start: best,
            inside,
            operands: distinct.len(),
        });
    }
    Ok(Located {
        section,
        votes: best_votes,
        operands: distinct.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: u64 = 0xffff_ffff_83af_9000;

    fn layout() -> PercpuLayout {
        let variables = [
            ("cpu_debug_store", 0, 4096),
            ("irq_stack_backing_store", 4096, 16384),
            ("current_task", 86040, 8),
            ("this_cpu_off", 86056, 8),
            ("__preempt_count", 86064, 4),
            ("cpu_number", 86068, 4),
            ("runqueues", 90112, 4096),
        ]
        .into_iter()
        .chain((0..20).map(|i| ("counter", 100_000 + 64 * i, 8)))
        .map(|(name, offset, size)| PercpuVariable {
            name: name.to_owned(),
            offset,
            size,
        })
        .collect();
        PercpuLayout {
            bytes: 185_560,
            variables,
        }
    }

    /// Operands as a kernel's code has them: the scalars at their first byte (some many
    /// times), fields of `runqueues`, and a few stray ones.
    fn operands(start: u64) -> Vec<u64> {
        let mut ops = Vec::new();
        for offset in [86040, 86056, 86064, 86068, 90112] {
            ops.extend([start + offset; 5]);
        }
        ops.extend((0..20).map(|i| start + 100_000 + 64 * i));
        ops.extend([start + 90112 + 8, start + 90112 + 0x140, start + 4096 + 24]);
        ops
    }

    #[test]
    fn the_start_that_puts_operands_on_variables_wins() {
        let found = locate(&operands(START), &layout()).expect("located");
        assert_eq!(found.section, START..START + 185_560);
        // 5 distinct scalars and runqueues, 20 counters; the field accesses are not starts.
        assert_eq!(found.votes, 25);
        assert_eq!(found.operands, 28);
    }

    #[test]
    fn operands_outside_the_section_fail_the_check() {
        let mut ops = operands(START);
        // As many distinct stray operands as good ones, far away.
        ops.extend((0..28).map(|i| 0xffff_ffff_8100_0000 + 8 * i));
        assert_eq!(
            locate(&ops, &layout()),
            Err(NotLocated::OperandsOutside {
                start: START,
                inside: 28,
                operands: 56
            })
        );
    }

    #[test]
    fn too_few_operands_or_variables_place_nothing() {
        let few = [START + 86064, START + 86068];
        assert!(matches!(
            locate(&few, &layout()),
            Err(NotLocated::TooFewVotes { operands: 2, .. })
        ));
        assert_eq!(
            locate(&operands(START), &PercpuLayout::default()),
            Err(NotLocated::NoVariables)
        );
        assert!(matches!(
            locate(&[], &layout()),
            Err(NotLocated::TooFewVotes {
                operands: 0,
                votes: 0
            })
        ));
    }

    #[test]
    fn two_starts_as_likely_are_ambiguous() {
        // Two kernels' worth of operands, one page apart in their starts.
        let mut ops = operands(START);
        ops.extend(operands(START + 2 * PAGE_BYTES));
        assert!(matches!(
            locate(&ops, &layout()),
            Err(NotLocated::Ambiguous { .. })
        ));
    }

    #[test]
    fn an_unaligned_start_is_never_chosen() {
        // Code whose operands sit a variable's offset from an unaligned start: no
        // page-aligned start puts more than a coincidence on a first byte.
        assert!(matches!(
            locate(&operands(START + 8), &layout()),
            Err(NotLocated::TooFewVotes { votes, .. }) if votes < MIN_VOTES
        ));
    }
}
