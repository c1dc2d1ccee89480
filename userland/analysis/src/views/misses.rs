//! The miss classification view (paper section 3.3).
//!
//! First every access of every object access history (mismatched traps left out) is judged,
//! in time order, line by line (the first level's line size, the coherence unit):
//! - an *invalidation* when the most recent write to its line in the history came from
//!   another CPU and this CPU has not touched the line since: *true sharing* when that write
//!   overlapped the bytes accessed now, *false sharing* when it was to other bytes of the line
//!   (both within the object: a history watches one object);
//! - else *cannot tell* when the line also holds bytes of a neighbour object live at the
//!   time (small or unaligned objects): the neighbour may have been written by another CPU,
//!   which this object's history cannot see. Never on a single-CPU machine;
//! - else no invalidation.
//!
//! Accesses of unknown kind (implicit operands) count as reads.
//!
//! Then the samples of each slab type (with a hardware sampler: those that missed L1; with the
//! software sampler: every one, as the accesses that *would* miss, labelled inferred) are
//! classified in order:
//! 1. sharing: the fractions of the type's history accesses judged true sharing, false sharing
//!    and cannot tell among those in the same function touching the sample's offset, or, when
//!    none, among those on the same line of the object (objects taken as line-aligned);
//! 2. what remains, conflict: the sample's line falls in a set flagged for the type at some
//!    level (the nearest is named);
//! 3. capacity: the working set of that level's sampled types exceeds one of its caches and
//!    the type's lines cover at least [`CAPACITY_COVERAGE`] of its sets (misses spread over
//!    most sets, not concentrated in a few);
//! 4. else unclassified.
//!
//! Counts are fractional (a sample can be half true sharing), and the six classes add up to
//! the samples classified.

use rustc_hash::FxHashMap;

use super::layout::Layout;
use super::recorded::{Lifetime, MissBit, Recorded, ASSUMED_LINE_BYTES};
use crate::cache::CacheModel;
use crate::histories::{Histories, History};
use crate::resolve::SymbolSource;
use dprof_model::cache::CacheLevel;
use dprof_model::histories::Span;
use dprof_model::misses::{
    CannotTellEvidence, CapacityEvidence, ClassCount, ConflictEvidence, HistoryJudgement,
    MissClass, MissReport, SharingEvidence, SharingSite, TypeMisses,
};
use dprof_model::{AccessKind, Report};

/// The share of a level's sets a type's lines must cover for its misses to count as capacity
/// misses ("spread over most sets").
pub const CAPACITY_COVERAGE: f64 = 0.5;

/// What the history said of one access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Judged {
    True,
    False,
    CannotTell,
    NoInvalidation,
}

/// One judged history access, for the samples.
#[derive(Clone, Debug)]
struct JudgedAccess {
    function: String,
    range: Span,
    judged: Judged,
}

/// Evidence key: class, writer site, missing site (without names).
type SiteKey = (u64, u32, u64, u32);

/// One type's history judgements.
#[derive(Default)]
struct TypeJudgements {
    accesses: Vec<JudgedAccess>,
    counts: HistoryJudgement,
    sharing: FxHashMap<(MissClass, SiteKey, SiteKey), u64>,
    cannot_tell: FxHashMap<(SiteKey, String), u64>,
}

/// Lifetimes by base address, for neighbour questions.
struct Neighbours<'r> {
    by_base: Vec<(u64, u32)>,
    lifetimes: &'r [Lifetime],
}

/// How far below a line to look for the start of an object overlapping it: objects larger
/// than this (large kmallocs) are page-aligned and never share a line with a small one.
const NEIGHBOUR_REACH: u64 = crate::resolve::MAX_PAGED_BYTES;

impl<'r> Neighbours<'r> {
    fn new(lifetimes: &'r [Lifetime]) -> Self {
        let mut by_base: Vec<(u64, u32)> = lifetimes
            .iter()
            .enumerate()
            .map(|(i, l)| (l.base, i as u32))
            .collect();
        by_base.sort_unstable();
        Self { by_base, lifetimes }
    }

    /// The object starting at `base` live at `t`.
    fn starting_at(&self, base: u64, t: u64) -> Option<&'r Lifetime> {
        let from = self.by_base.partition_point(|&(b, _)| b < base);
        self.by_base[from..]
            .iter()
            .take_while(|&&(b, _)| b == base)
            .filter_map(|&(_, i)| self.lifetimes.get(i as usize))
            .find(|l| l.live_at(t))
    }

    /// A live object at `t` other than the one at `object` with bytes in `[start, end)`.
    fn at(&self, object: u64, start: u64, end: u64, t: u64) -> Option<&'r Lifetime> {
        let upto = self.by_base.partition_point(|&(b, _)| b < end);
        let low = start.saturating_sub(NEIGHBOUR_REACH);
        self.by_base[..upto]
            .iter()
            .rev()
            .take_while(|&&(b, _)| b >= low)
            .filter(|&&(b, _)| b != object)
            .filter_map(|&(_, i)| self.lifetimes.get(i as usize))
            .find(|l| l.end() > start && l.live_at(t))
    }
}

/// Judges every access of `history`.
fn judge_history(
    history: &History,
    line_shift: u32,
    multi_cpu: bool,
    neighbours: &Neighbours<'_>,
    recorded: &Recorded,
    symbols: &dyn SymbolSource,
    out: &mut TypeJudgements,
) {
    let h = history.without_mismatches();
    let object_end = h.object.saturating_add(
        neighbours
            .starting_at(h.object, h.start_ns)
            .map_or(0, |l| u64::from(l.size)),
    );
    let mut last_write: FxHashMap<u64, usize> = FxHashMap::default();
    let mut last_touch: FxHashMap<(u64, u32), usize> = FxHashMap::default();
    let site = |i: usize| -> SiteKey {
        let hit = &h.hits[i];
        (
            hit.ip(),
            hit.cpu,
            u64::from(hit.range.offset),
            hit.size.unwrap_or(hit.range.len),
        )
    };
    for (i, hit) in h.hits.iter().enumerate() {
        let addr = h.object.wrapping_add(u64::from(hit.range.offset));
        let line = addr >> line_shift;
        let invalidated_by = last_write.get(&line).copied().filter(|&w| {
            h.hits[w].cpu != hit.cpu && last_touch.get(&(line, hit.cpu)).is_none_or(|&t| t < w)
        });
        let judged = if let Some(w) = invalidated_by {
            let writer = h.hits[w].range;
            let overlap = writer.offset < hit.range.offset + hit.range.len
                && hit.range.offset < writer.offset + writer.len;
            let (judged, class) = if overlap {
                (Judged::True, MissClass::TrueSharing)
            } else {
                (Judged::False, MissClass::FalseSharing)
            };
            *out.sharing.entry((class, site(w), site(i))).or_default() += 1;
            judged
        } else {
            let line_start = line << line_shift;
            let line_end = line_start + (1 << line_shift);
            let whole_line = h.object <= line_start && object_end >= line_end;
            let neighbour = (multi_cpu && !whole_line)
                .then(|| neighbours.at(h.object, line_start, line_end, hit.time_ns))
                .flatten();
            match neighbour {
                Some(n) => {
                    let key = (site(i), recorded.type_name(n.type_id).to_owned());
                    *out.cannot_tell.entry(key).or_default() += 1;
                    Judged::CannotTell
                }
                None => Judged::NoInvalidation,
            }
        };
        out.counts.accesses += 1;
        match judged {
            Judged::True => out.counts.true_sharing += 1,
            Judged::False => out.counts.false_sharing += 1,
            Judged::CannotTell => out.counts.cannot_tell += 1,
            Judged::NoInvalidation => {}
        }
        out.accesses.push(JudgedAccess {
            function: crate::resolve::function_of(symbols, hit.ip()).0,
            range: hit.range,
            judged,
        });
        last_touch.insert((line, hit.cpu), i);
        if matches!(hit.kind, Some(AccessKind::Write | AccessKind::ReadWrite)) {
            last_write.insert(line, i);
        }
    }
}

/// Fractions `[true, false, cannot tell]` of the judged accesses that match a sample in
/// `function` at `[offset, offset + size)`: same function and overlapping bytes, else the same
/// line of the object. `None` when no access matches either way.
fn sharing_fractions(
    judged: &[JudgedAccess],
    function: &str,
    offset: u32,
    size: u32,
    line_bytes: u32,
) -> Option<[f64; 3]> {
    let end = offset + size.max(1);
    let tally = |pick: &dyn Fn(&JudgedAccess) -> bool| {
        let mut n = [0u64; 4];
        for a in judged.iter().filter(|a| pick(a)) {
            n[match a.judged {
                Judged::True => 0,
                Judged::False => 1,
                Judged::CannotTell => 2,
                Judged::NoInvalidation => 3,
            }] += 1;
        }
        let total: u64 = n.iter().sum();
        (total > 0).then(|| {
            let f = |k: usize| n[k] as f64 / total as f64;
            [f(0), f(1), f(2)]
        })
    };
    tally(&|a| {
        a.function == function && a.range.offset < end && offset < a.range.offset + a.range.len
    })
    .or_else(|| tally(&|a| a.range.offset / line_bytes == offset / line_bytes))
}

/// The miss classification section.
#[expect(
    clippy::too_many_lines,
    reason = "one pass from judgements to the model"
)]
pub(super) fn report(
    report: &Report,
    recorded: &Recorded,
    histories: Option<&Histories>,
    layout: &Layout,
    model: &CacheModel,
    online_cpus: u32,
    symbols: &dyn SymbolSource,
) -> MissReport {
    let hardware = report.data_profile.hardware.is_some();
    let line_bytes = model
        .levels
        .first()
        .map_or(ASSUMED_LINE_BYTES, |l| l.line_bytes);
    let line_shift = line_bytes.trailing_zeros();
    let multi_cpu = online_cpus > 1;
    let neighbours = Neighbours::new(&recorded.lifetimes);

    let mut judgements: Vec<TypeJudgements> = Vec::new();
    judgements.resize_with(layout.types.len(), TypeJudgements::default);
    let names = layout
        .types
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect::<FxHashMap<_, _>>();
    for h in histories.map_or(&[][..], |h| h.histories.as_slice()) {
        if let Some(j) = names
            .get(h.type_name.as_str())
            .and_then(|&i| judgements.get_mut(i))
        {
            judge_history(h, line_shift, multi_cpu, &neighbours, recorded, symbols, j);
        }
    }

    // Samples, classified.
    let mut counts = vec![[0f64; 6]; layout.types.len()];
    let mut totals = vec![0u64; layout.types.len()];
    let mut conflict_at = vec![vec![0f64; model.levels.len()]; layout.types.len()];
    let capacity: Vec<Option<CapacityEvidence>> = layout
        .types
        .iter()
        .map(|t| capacity_of(t, layout, model))
        .collect();
    let mut functions: FxHashMap<u64, String> = FxHashMap::default();
    let mut fractions: FxHashMap<(usize, u64, u32, u16), Option<[f64; 3]>> = FxHashMap::default();
    for s in &recorded.samples {
        if hardware && s.miss != MissBit::Miss {
            continue;
        }
        let Some(ti) = layout.type_of_object(recorded, s.object) else {
            continue;
        };
        let (Some(t), Some(l)) = (
            layout.types.get(ti),
            recorded.lifetimes.get(s.object as usize),
        ) else {
            continue;
        };
        totals[ti] += 1;
        let c = &mut counts[ti];
        let shared = *fractions
            .entry((ti, s.ip, s.offset, s.size))
            .or_insert_with(|| {
                let function = functions
                    .entry(s.ip)
                    .or_insert_with(|| crate::resolve::function_of(symbols, s.ip).0);
                sharing_fractions(
                    &judgements[ti].accesses,
                    function,
                    s.offset,
                    u32::from(s.size),
                    line_bytes,
                )
            });
        let mut rest = 1.0;
        if let Some([tru, fal, cannot]) = shared {
            c[MissClass::TrueSharing.index()] += tru;
            c[MissClass::FalseSharing.index()] += fal;
            c[MissClass::CannotTell.index()] += cannot;
            rest = (1.0 - tru - fal - cannot).max(0.0);
        }
        if rest <= 0.0 {
            continue;
        }
        let addr = l.base.wrapping_add(u64::from(s.offset));
        let flagged = model
            .levels
            .iter()
            .zip(&t.levels)
            .position(|(level, tl)| tl.is_flagged(level.set_of(addr)));
        if let Some(li) = flagged {
            c[MissClass::Conflict.index()] += rest;
            conflict_at[ti][li] += rest;
        } else if capacity[ti].is_some() {
            c[MissClass::Capacity.index()] += rest;
        } else {
            c[MissClass::Unclassified.index()] += rest;
        }
    }

    let mut types = Vec::new();
    for (ti, t) in layout.types.iter().enumerate() {
        let j = &judgements[ti];
        let total = totals[ti];
        if total == 0 && j.counts.true_sharing + j.counts.false_sharing == 0 {
            continue;
        }
        let classes: Vec<ClassCount> = MissClass::ALL
            .iter()
            .map(|&class| {
                let count = counts[ti][class.index()];
                ClassCount {
                    class,
                    count,
                    percent: if total == 0 {
                        0.0
                    } else {
                        count * 100.0 / total as f64
                    },
                }
            })
            .collect();
        let (dominant, margin) = dominant(&classes);
        let site = |key: &SiteKey| SharingSite {
            function: crate::resolve::function_of(symbols, key.0).0,
            ip: key.0,
            cpu: key.1,
            offset: key.2,
            size: key.3,
            field: None,
        };
        let mut sharing: Vec<SharingEvidence> = j
            .sharing
            .iter()
            .map(|((class, w, m), &count)| SharingEvidence {
                class: *class,
                count,
                writer: site(w),
                missing: site(m),
            })
            .collect();
        sharing.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.class.cmp(&b.class))
                .then((a.writer.ip, a.writer.cpu, a.missing.ip).cmp(&(
                    b.writer.ip,
                    b.writer.cpu,
                    b.missing.ip,
                )))
                .then(a.missing.cpu.cmp(&b.missing.cpu))
                .then(a.writer.offset.cmp(&b.writer.offset))
                .then(a.missing.offset.cmp(&b.missing.offset))
        });
        let mut cannot_tell: Vec<CannotTellEvidence> = j
            .cannot_tell
            .iter()
            .map(|((m, neighbour), &count)| CannotTellEvidence {
                count,
                missing: site(m),
                neighbour_type: neighbour.clone(),
            })
            .collect();
        cannot_tell.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then((a.missing.ip, a.missing.cpu, a.missing.offset).cmp(&(
                    b.missing.ip,
                    b.missing.cpu,
                    b.missing.offset,
                )))
                .then_with(|| a.neighbour_type.cmp(&b.neighbour_type))
        });
        let conflict = model
            .levels
            .iter()
            .zip(&t.levels)
            .enumerate()
            .filter(|(_, (_, tl))| !tl.histogram.flagged_sets.is_empty())
            .map(|(li, (level, tl))| ConflictEvidence {
                level: level.name.clone(),
                flagged_sets: tl.histogram.flagged_sets.clone(),
                lines_in_flagged_sets: tl.lines_in_flagged_sets,
                samples: conflict_at[ti][li],
            })
            .collect();
        types.push(TypeMisses {
            name: t.name.clone(),
            total,
            classes,
            dominant,
            margin,
            sharing,
            cannot_tell,
            conflict,
            capacity: capacity[ti].clone(),
            history_accesses: (j.counts.accesses > 0).then_some(j.counts),
        });
    }

    let mut notes = super::notes::common_notes(model);
    if model.levels.is_empty() {
        notes.push(format!(
            "sharing is judged with {line_bytes}-byte lines (assumed: no geometry)"
        ));
    }
    let typed_histories = histories.map_or(0, |h| h.histories.len());
    if typed_histories == 0 {
        notes.push(
            "no object access histories (collect --histories): true and false sharing cannot \
             be seen, only conflict, capacity and unclassified"
                .to_owned(),
        );
    } else {
        let with_histories = judgements.iter().filter(|j| j.counts.accesses > 0).count();
        notes.push(format!(
            "sharing is seen only through histories ({with_histories} types have some): writes \
             to bytes outside the watched ranges, and accesses before another CPU started \
             watching, are invisible; samples of types without histories can only be conflict, \
             capacity or unclassified"
        ));
    }
    if !multi_cpu {
        notes.push("a single CPU: no invalidations".to_owned());
    }
    MissReport {
        inferred: !hardware,
        basis: if hardware {
            "L1 data-cache misses of slab types seen by the hardware sampler".to_owned()
        } else {
            "inferred: the software sampler has no miss bits, so every sample of a slab type is \
             classified as the access that would miss"
                .to_owned()
        },
        geometry: model.levels.clone(),
        notes,
        types,
    }
}

/// The class with the largest count (the first in report order on a tie) and its lead in
/// percentage points.
fn dominant(classes: &[ClassCount]) -> (MissClass, f64) {
    let mut order: Vec<&ClassCount> = classes.iter().collect();
    order.sort_by(|a, b| b.count.total_cmp(&a.count).then(a.class.cmp(&b.class)));
    match order.as_slice() {
        [first, second, ..] => (first.class, first.percent - second.percent),
        [first] => (first.class, first.percent),
        [] => (MissClass::Unclassified, 0.0),
    }
}

/// The farthest level whose working set exceeds one cache with the type covering at least
/// [`CAPACITY_COVERAGE`] of its sets.
fn capacity_of(
    t: &super::layout::TypeLayout,
    layout: &Layout,
    model: &CacheModel,
) -> Option<CapacityEvidence> {
    model
        .levels
        .iter()
        .zip(&t.levels)
        .zip(&layout.working_set)
        .filter(|((level, tl), ws)| {
            ws.bytes > level.size_bytes && tl.covered_fraction >= CAPACITY_COVERAGE
        })
        .map(
            |((level, tl), ws): ((&CacheLevel, _), _)| CapacityEvidence {
                level: level.name.clone(),
                working_set_bytes: ws.bytes,
                cache_bytes: level.size_bytes,
                sets_covered_fraction: tl.covered_fraction,
            },
        )
        .next_back()
}
