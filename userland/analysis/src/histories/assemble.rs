//! Histories from records: each history's start, arms, hits in time order and end, each hit
//! cross-checked against the instruction that made it.

use dprof_abi::{
    Alloc, HistoryEnd, HistoryHit, HistoryStart, Record, RecordHeader, WatchRange,
    HISTORY_END_FREED, HISTORY_END_REALLOCATED, HISTORY_END_STOPPED, HISTORY_END_TIMEOUT,
    HISTORY_RANGES, HIT_USER,
};
use rustc_hash::FxHashMap;

use crate::decode::{DecodeOutcome, NoAccess};
use crate::resolve::{Resolver, SymbolSource};
use dprof_format::{FullCoveragePlan, KernelText, MergedCache, Profile, ProfileError};
use dprof_model::AccessKind;

use dprof_model::histories::{EndReason, HitCheck, HitChecks, NoCode, Span, Unverifiable};

/// The reason of a `HistoryEnd` record.
const fn end_reason_of(reason: u32) -> Option<EndReason> {
    match reason {
        HISTORY_END_FREED => Some(EndReason::Freed),
        HISTORY_END_REALLOCATED => Some(EndReason::Reallocated),
        HISTORY_END_TIMEOUT => Some(EndReason::Timeout),
        HISTORY_END_STOPPED => Some(EndReason::Stopped),
        _ => None,
    }
}

/// The report's span of a watched range.
pub(crate) const fn span_of(r: WatchRange) -> Span {
    Span {
        offset: r.offset,
        len: r.len,
    }
}

/// One access to a watched range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// Record time (ns).
    pub time_ns: u64,
    /// Nanoseconds since the object's allocation (the history's start).
    pub since_alloc_ns: u64,
    /// CPU that accessed.
    pub cpu: u32,
    /// A CPU change ([`History::cpu_changes`]): the CPU differs from the previous hit's (the
    /// allocating CPU for the first hit).
    pub cpu_change: bool,
    /// Instruction pointer of the trap: just after the access.
    pub trap_ip: u64,
    /// The accessing instruction, when found.
    pub insn_ip: Option<u64>,
    /// Its mnemonic, when found.
    pub mnemonic: Option<std::sync::Arc<str>>,
    /// The watched range hit.
    pub range: Span,
    /// Read, write or both, when the instruction names one memory operand.
    pub kind: Option<AccessKind>,
    /// Bytes the instruction accessed, when known.
    pub size: Option<u32>,
    /// The cross-check.
    pub check: HitCheck,
    /// Number of the hit in its history (gaps: hits the module dropped).
    pub seq: u32,
    /// Accessing task.
    pub pid: u32,
    /// Accessing thread.
    pub tid: u32,
}

impl Hit {
    /// The instruction the path traces name: the accessing one, or the trap ip when it was
    /// not found.
    #[must_use]
    pub fn ip(&self) -> u64 {
        self.insn_ip.unwrap_or(self.trap_ip)
    }
}

/// How a history ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryEnding {
    /// Why.
    pub reason: EndReason,
    /// Record time (ns).
    pub time_ns: u64,
    /// CPU that ended it (the freeing CPU for [`EndReason::Freed`]).
    pub cpu: u32,
    /// The free's call site ([`EndReason::Freed`]), else 0.
    pub free_site: u64,
    /// Hits the module recorded.
    pub hits: u32,
    /// Hits the module did not record (over the plan's limit, full ring).
    pub dropped_hits: u32,
    /// Nanoseconds from start to end.
    pub lifetime_ns: u64,
}

/// One object access history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// Its number in the session.
    pub id: u64,
    /// The object's type, named as the data profile names it.
    pub type_name: String,
    /// The object's address.
    pub object: u64,
    /// The allocation's call site.
    pub alloc_site: u64,
    /// The plan target it matched.
    pub target: u32,
    /// The watched ranges in use (one to four).
    pub ranges: Vec<Span>,
    /// Record time of the start (the allocation), ns.
    pub start_ns: u64,
    /// Allocating CPU.
    pub start_cpu: u32,
    /// `(cpu, delay_ns)`: when each other CPU started watching; its accesses before were
    /// missed.
    pub arms: Vec<(u32, u64)>,
    /// How it ended; `None` when the profile has no End record for it (lost, or cut).
    pub end: Option<HistoryEnding>,
    /// Hits in time order (those timed after the end are dropped and counted).
    pub hits: Vec<Hit>,
    /// Hits timed after the history's end, dropped.
    pub late_hits: u64,
}

impl History {
    /// Whether it ran from allocation to free.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.end.is_some_and(|e| e.reason.is_complete())
    }

    /// The history's CPU changes: the one definition the path traces, the data flow graph
    /// and its total ([`dprof_model::histories::DataFlow::cpu_changes`]) count. The steps of
    /// a history are its allocation, its hits in time order and, when complete, its free; a
    /// step is a CPU change when it ran on another CPU than the step before. The hits' are
    /// [`Hit::cpu_change`], the free's [`Self::end_cpu_change`].
    #[must_use]
    pub fn cpu_changes(&self) -> u64 {
        self.hits.iter().filter(|h| h.cpu_change).count() as u64 + u64::from(self.end_cpu_change())
    }

    /// Whether the free (or the reallocation) ran on another CPU than the last access, or the
    /// allocation when there was none; `false` for a history cut before its free, whose end
    /// is no access.
    #[must_use]
    pub fn end_cpu_change(&self) -> bool {
        let last_cpu = self.hits.last().map_or(self.start_cpu, |h| h.cpu);
        self.end
            .is_some_and(|e| e.reason.is_complete() && e.cpu != last_cpu)
    }

    /// This history without its mismatched hits, CPU changes recomputed: a trap whose
    /// instruction did not touch the watched bytes is not an access to them. Real debug
    /// registers never report one; QEMU's TCG does, for unaligned stores elsewhere in the
    /// page (measured: see tests/qemu/scenarios/kernel-histories.sh).
    #[must_use]
    pub fn without_mismatches(&self) -> Self {
        let mut out = self.clone();
        out.hits.retain(|h| h.check != HitCheck::Mismatched);
        let mut prev_cpu = out.start_cpu;
        for hit in &mut out.hits {
            hit.cpu_change = hit.cpu != prev_cpu;
            prev_cpu = hit.cpu;
        }
        out
    }
}

/// Every history of a profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histories {
    /// By start time.
    pub histories: Vec<History>,
    /// Hits of histories the profile has no start for (lost records).
    pub orphan_hits: u64,
    /// Hits by cross-check outcome, over all histories.
    pub checks: HitChecks,
    /// Types watched over their whole object (the profile header's `--histories full`
    /// plans): their histories are merged set by set.
    pub full_plans: Vec<FullCoveragePlan>,
}

/// The history records of a profile, collected in file order.
#[derive(Default)]
pub(crate) struct Collected {
    pub(super) starts: Vec<(RecordHeader, HistoryStart)>,
    pub(super) arms: FxHashMap<u64, Vec<(u32, u64)>>,
    pub(super) hits: FxHashMap<u64, Vec<(RecordHeader, HistoryHit)>>,
    pub(super) ends: FxHashMap<u64, (RecordHeader, HistoryEnd)>,
    pub(super) cache_infos: Vec<dprof_abi::CacheInfo>,
}

impl Collected {
    pub(crate) fn push(&mut self, header: &RecordHeader, record: &Record) {
        match record {
            Record::CacheInfo(info) => self.cache_infos.push(*info),
            Record::HistoryStart(s) => self.starts.push((*header, *s)),
            Record::HistoryArm(a) => self
                .arms
                .entry(a.history)
                .or_default()
                .push((header.cpu, a.delay_ns)),
            Record::HistoryHit(h) => self.hits.entry(h.history).or_default().push((*header, *h)),
            Record::HistoryEnd(e) => {
                self.ends.insert(e.history, (*header, *e));
            }
            _ => {}
        }
    }
}

/// Assembles the histories of `profile`: types, hits in time order, accessing instructions
/// and their cross-check.
///
/// # Errors
/// The first problem found while reading the records.
pub fn assemble(profile: &Profile, symbols: &dyn SymbolSource) -> Result<Histories, ProfileError> {
    let mut collected = Collected::default();
    let mut records = profile.records();
    while let Some(pushed) = records.next_with(|header, record| collected.push(header, record)) {
        pushed?;
    }
    Ok(assemble_from(collected, profile, symbols))
}

/// [`assemble`] of the records a pass over `profile` collected (the data profile's pass
/// collects them as it goes: no second pass).
pub(crate) fn assemble_from(
    collected: Collected,
    profile: &Profile,
    symbols: &dyn SymbolSource,
) -> Histories {
    let mut histories = assemble_collected(
        collected,
        profile.text(),
        symbols,
        &profile.header().merged_caches,
    );
    histories.full_plans = profile
        .header()
        .config
        .histories
        .as_ref()
        .map(|h| h.full.clone())
        .unwrap_or_default();
    histories
}

/// Whether the profile holds any history record (a cheap first look, reading the records).
///
/// # Errors
/// The first problem found while reading the records.
pub fn has_histories(profile: &Profile) -> Result<bool, ProfileError> {
    for item in profile.records() {
        if matches!(item?.1, Record::HistoryStart(_)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `merged` is the profile header's merged pools, so that types are named as the data
/// profile names them.
pub(super) fn assemble_collected(
    mut collected: Collected,
    text: &KernelText,
    symbols: &dyn SymbolSource,
    merged: &[MergedCache],
) -> Histories {
    // Cache infos first: a cache's info may follow the first history of its type in file
    // order (rings drain independently), and names do not depend on time.
    let mut resolver = Resolver::new(symbols);
    resolver.set_merged_caches(merged);
    for info in &collected.cache_infos {
        resolver.cache_info(info);
    }
    let mut code = super::code::CodeIndex::new(text, symbols);
    let mut out = Histories::default();
    collected
        .starts
        .sort_by_key(|(h, s)| (h.time_ns, s.history));
    for (header, start) in &collected.starts {
        let type_id = resolver.alloc_type(&Alloc {
            ptr: start.object,
            call_site: start.call_site,
            cache: start.cache,
            ..Alloc::default()
        });
        let type_name = resolver
            .types()
            .get(type_id)
            .map_or_else(|| format!("cache@{:#x}", start.cache), |t| t.name.clone());
        let end = collected.ends.remove(&start.history).and_then(|(h, e)| {
            end_reason_of(e.reason).map(|reason| HistoryEnding {
                reason,
                time_ns: h.time_ns,
                cpu: h.cpu,
                free_site: e.call_site,
                hits: e.hits,
                dropped_hits: e.dropped_hits,
                lifetime_ns: e.lifetime_ns,
            })
        });
        let mut raw = collected.hits.remove(&start.history).unwrap_or_default();
        raw.sort_by_key(|(h, hit)| (h.time_ns, hit.seq));
        let mut history = History {
            id: start.history,
            type_name,
            object: start.object,
            alloc_site: start.call_site,
            target: start.target,
            ranges: start
                .ranges
                .iter()
                .filter(|r| r.len > 0)
                .map(|&r| span_of(r))
                .collect(),
            start_ns: header.time_ns,
            start_cpu: header.cpu,
            arms: collected.arms.remove(&start.history).unwrap_or_default(),
            end,
            hits: Vec::with_capacity(raw.len()),
            late_hits: 0,
        };
        let mut prev_cpu = header.cpu;
        for (hit_header, hit) in &raw {
            if end.is_some_and(|e| hit_header.time_ns > e.time_ns) {
                history.late_hits += 1;
                continue;
            }
            let mut h = resolve_hit(&mut code, start, hit_header, hit, prev_cpu);
            h.since_alloc_ns = hit_header.time_ns.saturating_sub(header.time_ns);
            out.checks.add(h.check);
            prev_cpu = h.cpu;
            history.hits.push(h);
        }
        out.histories.push(history);
    }
    out.orphan_hits = collected.hits.values().map(|v| v.len() as u64).sum();
    out
}

/// One hit: its accessing instruction and cross-check.
fn resolve_hit(
    code: &mut super::code::CodeIndex<'_>,
    start: &HistoryStart,
    header: &RecordHeader,
    hit: &HistoryHit,
    prev_cpu: u32,
) -> Hit {
    let range = start
        .ranges
        .get(usize::from(hit.range).min(HISTORY_RANGES - 1))
        .copied()
        .unwrap_or_default();
    let mut out = Hit {
        time_ns: header.time_ns,
        since_alloc_ns: 0,
        cpu: header.cpu,
        cpu_change: header.cpu != prev_cpu,
        trap_ip: hit.ip,
        insn_ip: None,
        mnemonic: None,
        range: span_of(range),
        kind: None,
        size: None,
        check: HitCheck::NoCode(NoCode::UserMode),
        seq: hit.seq,
        pid: hit.pid,
        tid: hit.tid,
    };
    if hit.flags & HIT_USER != 0 {
        return out;
    }
    let insn = match code.accessing_instruction(hit.ip) {
        Ok(insn) => insn,
        Err(why) => {
            out.check = HitCheck::NoCode(why);
            return out;
        }
    };
    out.insn_ip = Some(insn.ip);
    out.mnemonic = Some(code.mnemonic(&insn));
    out.kind = insn.kind();
    out.size = insn.size();
    out.check = match insn.access(&hit.regs, 0) {
        DecodeOutcome::Access(a) if a.gs_relative => {
            HitCheck::Unverifiable(Unverifiable::SegmentBase)
        }
        // Two locations always include an implicit one.
        DecodeOutcome::Two(_) => HitCheck::Unverifiable(Unverifiable::ImplicitOperands),
        DecodeOutcome::Access(_) if insn.has_implicit_operand() => {
            HitCheck::Unverifiable(Unverifiable::ImplicitOperands)
        }
        _ if insn.writes_address_register() => {
            HitCheck::Unverifiable(Unverifiable::RegisterClobbered)
        }
        DecodeOutcome::Access(a) => {
            let watched = start.object.wrapping_add(u64::from(range.offset));
            let size = u64::from(a.size.max(1));
            if a.addr < watched.wrapping_add(u64::from(range.len))
                && watched < a.addr.wrapping_add(size)
            {
                HitCheck::Verified
            } else {
                HitCheck::Mismatched
            }
        }
        DecodeOutcome::None(NoAccess::MultipleMemoryOperands) => {
            HitCheck::Unverifiable(Unverifiable::ImplicitOperands)
        }
        DecodeOutcome::None(NoAccess::UnsupportedSegment) => {
            HitCheck::Unverifiable(Unverifiable::SegmentBase)
        }
        DecodeOutcome::None(NoAccess::NoBytes | NoAccess::Undecodable) => {
            HitCheck::NoCode(NoCode::Undecodable)
        }
        // The instruction before the trap cannot have touched memory: trap and code disagree.
        DecodeOutcome::None(
            NoAccess::NoMemoryOperand | NoAccess::AddressOnly | NoAccess::UserMode,
        ) => HitCheck::Mismatched,
    };
    out
}
