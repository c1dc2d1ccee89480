//! Object access histories in the report (paper sections 4.3 and 4.4, view 3.4): per type, how
//! its histories ended, the cross-check of their hits, the path traces, the order of fields
//! watched together and the data flow from allocation to free.

use serde::{Deserialize, Serialize};

use crate::access::AccessKind;

/// Why a history ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The object was freed ([`HISTORY_END_FREED`]).
    Freed,
    /// Its address was allocated again without a traced free ([`HISTORY_END_REALLOCATED`]).
    Reallocated,
    /// It outlived the plan's timeout ([`HISTORY_END_TIMEOUT`]).
    Timeout,
    /// Collection stopped while it was alive ([`HISTORY_END_STOPPED`]).
    Stopped,
}

impl EndReason {
    /// Whether the history covers the object's whole life (alloc to free).
    #[must_use]
    pub const fn is_complete(self) -> bool {
        matches!(self, Self::Freed | Self::Reallocated)
    }
}

/// A watched byte range of an object, as reports show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Span {
    /// Offset from the object's start.
    pub offset: u32,
    /// Bytes.
    pub len: u32,
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "+{:#x}/{}", self.offset, self.len)
    }
}

impl Span {
    /// `+0x10/8 next`: the range with the field at its offset, or the range alone when the
    /// field is not named (the data profile's offsets read the same way).
    #[must_use]
    pub fn with_field(self, field: Option<&str>) -> String {
        match field {
            Some(name) => format!("{self} {name}"),
            None => self.to_string(),
        }
    }
}

/// Why a hit's address could not be checked against its watched range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unverifiable {
    /// The instruction overwrote a base or index register of its memory operand
    /// (`mov 0x8(%rax),%rax`): the trap's registers no longer give its address.
    RegisterClobbered,
    /// String instructions, push/pop and other implicit or several memory operands.
    ImplicitOperands,
    /// A `%gs`/`%fs`-relative operand: the hit does not carry the segment base.
    SegmentBase,
}

/// Why no accessing instruction was found for a hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoCode {
    /// No kallsyms function contains the trap ip.
    NoSymbol,
    /// The profile's Text section holds no bytes for the function from its start.
    NoBytes,
    /// Decoding the function from its start gives no instruction ending at the trap ip.
    NoBoundary,
    /// The instruction there does not decode.
    Undecodable,
    /// The hit happened in user mode.
    UserMode,
}

/// What the cross-check of one hit found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HitCheck {
    /// The accessing instruction's memory operand overlaps the watched range.
    Verified,
    /// It does not (or the instruction found has no memory operand): the trap and the code
    /// disagree.
    Mismatched,
    /// The address could not be recomputed.
    Unverifiable(Unverifiable),
    /// No accessing instruction was found.
    NoCode(NoCode),
}

/// Hits by cross-check outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HitChecks {
    /// [`HitCheck::Verified`].
    pub verified: u64,
    /// [`HitCheck::Mismatched`].
    pub mismatched: u64,
    /// [`Unverifiable::RegisterClobbered`].
    pub unverifiable_clobbered: u64,
    /// [`Unverifiable::ImplicitOperands`].
    pub unverifiable_implicit: u64,
    /// [`Unverifiable::SegmentBase`].
    pub unverifiable_segment: u64,
    /// [`NoCode::NoSymbol`].
    pub no_code_symbol: u64,
    /// [`NoCode::NoBytes`].
    pub no_code_bytes: u64,
    /// [`NoCode::NoBoundary`].
    pub no_code_boundary: u64,
    /// [`NoCode::Undecodable`].
    pub no_code_undecodable: u64,
    /// [`NoCode::UserMode`].
    pub no_code_user_mode: u64,
}

impl HitChecks {
    /// Counts one hit's check.
    pub fn add(&mut self, check: HitCheck) {
        let n = match check {
            HitCheck::Verified => &mut self.verified,
            HitCheck::Mismatched => &mut self.mismatched,
            HitCheck::Unverifiable(Unverifiable::RegisterClobbered) => {
                &mut self.unverifiable_clobbered
            }
            HitCheck::Unverifiable(Unverifiable::ImplicitOperands) => {
                &mut self.unverifiable_implicit
            }
            HitCheck::Unverifiable(Unverifiable::SegmentBase) => &mut self.unverifiable_segment,
            HitCheck::NoCode(NoCode::NoSymbol) => &mut self.no_code_symbol,
            HitCheck::NoCode(NoCode::NoBytes) => &mut self.no_code_bytes,
            HitCheck::NoCode(NoCode::NoBoundary) => &mut self.no_code_boundary,
            HitCheck::NoCode(NoCode::Undecodable) => &mut self.no_code_undecodable,
            HitCheck::NoCode(NoCode::UserMode) => &mut self.no_code_user_mode,
        };
        *n += 1;
    }

    /// Hits whose address could not be recomputed.
    #[must_use]
    pub const fn unverifiable(&self) -> u64 {
        self.unverifiable_clobbered + self.unverifiable_implicit + self.unverifiable_segment
    }

    /// Hits with no accessing instruction found.
    #[must_use]
    pub const fn no_code(&self) -> u64 {
        self.no_code_symbol
            + self.no_code_bytes
            + self.no_code_boundary
            + self.no_code_undecodable
            + self.no_code_user_mode
    }
}

impl std::fmt::Display for HitChecks {
    /// `5 verified, 1 mismatched, 1 unverifiable (1 register clobbered), 1 no code (1 no
    /// bytes)`, zero details left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let details = |parts: &[(u64, &str)]| {
            let listed: Vec<String> = parts
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, what)| format!("{n} {what}"))
                .collect();
            if listed.is_empty() {
                String::new()
            } else {
                format!(" ({})", listed.join(", "))
            }
        };
        write!(
            f,
            "{} verified, {} mismatched, {} unverifiable{}, {} no code{}",
            self.verified,
            self.mismatched,
            self.unverifiable(),
            details(&[
                (self.unverifiable_clobbered, "register clobbered"),
                (self.unverifiable_implicit, "implicit operands"),
                (self.unverifiable_segment, "segment base"),
            ]),
            self.no_code(),
            details(&[
                (self.no_code_symbol, "no symbol"),
                (self.no_code_bytes, "no bytes"),
                (self.no_code_boundary, "no instruction ends at the trap"),
                (self.no_code_undecodable, "undecodable"),
                (self.no_code_user_mode, "user mode"),
            ]),
        )
    }
}

/// What one type's histories show.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeHistories {
    /// Type name, as in the data profile.
    pub name: String,
    /// Histories of this type.
    pub histories: u64,
    /// Of them, from allocation to free: the ones path traces and the data flow use.
    pub complete: u64,
    /// Histories by how they ended; `unfinished`: no End record.
    pub end_reasons: EndReasons,
    /// Hits kept (in time, before the end).
    pub hits: u64,
    /// Hits the module reported dropping (End records).
    pub dropped_hits: u64,
    /// Hits timed after their history's end, dropped.
    pub late_hits: u64,
    /// Mean lifetime of complete histories (ns).
    pub mean_lifetime_ns: Option<u64>,
    /// Longest delay before another CPU watched an object (ns): its accesses before were
    /// missed.
    pub max_arm_delay_ns: u64,
    /// The hits' cross-check.
    pub checks: HitChecks,
    /// Distinct paths against histories seen.
    pub convergence: Convergence,
    /// Execution paths, most frequent first.
    pub paths: Vec<PathTrace>,
    /// Order of two fields watched together.
    pub field_orders: Vec<FieldOrder>,
    /// The functions from alloc to free, merged over the paths.
    pub data_flow: DataFlow,
    /// The whole object's merged access histories, for a type collected with `--histories
    /// full:TYPE`; absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<FullCoverage>,
}

/// Histories per way of ending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndReasons {
    /// Freed.
    pub freed: u64,
    /// Reallocated without a traced free.
    pub reallocated: u64,
    /// Timed out.
    pub timeout: u64,
    /// Stopped with collection.
    pub stopped: u64,
    /// No End record.
    pub unfinished: u64,
}

/// The histories section of a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryReport {
    /// Histories in the profile.
    pub histories: u64,
    /// Of them, from allocation to free.
    pub complete: u64,
    /// Hits kept.
    pub hits: u64,
    /// Hits of histories with no start record.
    pub orphan_hits: u64,
    /// Hits timed after their history's end, dropped.
    pub late_hits: u64,
    /// The cross-check of every kept hit.
    pub checks: HitChecks,
    /// Types by histories, most first.
    pub types: Vec<TypeHistories>,
}

impl HistoryReport {
    /// The type named `name`.
    #[must_use]
    pub fn find_type(&self, name: &str) -> Option<&TypeHistories> {
        self.types.iter().find(|t| t.name == name)
    }
}

/// One access along a path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathElement {
    /// Function of the accessing instruction (or of the trap ip when it was not found).
    pub function: String,
    /// Offset of the instruction in it.
    pub function_offset: u64,
    /// The accessing instruction's address (the trap ip when not found).
    pub ip: u64,
    /// Whether the accessing instruction was found (see [`super::HitCheck`]).
    pub instruction_found: bool,
    /// The watched range it touched.
    pub range: Span,
    /// The field at the range's offset, when debug info names it.
    #[serde(default)]
    pub field: Option<String>,
    /// Read, write or both, when known.
    pub kind: Option<AccessKind>,
    /// A CPU change (see [`DataFlow::cpu_changes`]): it ran on another CPU than the access
    /// before (the allocating CPU for the first).
    pub cpu_change: bool,
    /// Mean time since allocation over the path's histories (ns).
    pub mean_since_alloc_ns: u64,
    /// Samples of the same type, instruction and offset range; absent when none matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampleMatch>,
}

/// What access samples say about one instruction and offset range of a type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleMatch {
    /// Matching samples.
    pub samples: u64,
    /// Of them, samples with a hardware hit/miss status.
    pub hw_samples: u64,
    /// L1 data-cache misses (hardware samplers only).
    pub misses: Option<u64>,
    /// `misses / hw_samples`.
    pub miss_rate: Option<f64>,
    /// Mean latency in cycles, when the hardware gave latencies.
    pub mean_latency_cycles: Option<f64>,
    /// The hardware samples by where their data came from (the cache level that served the
    /// access, or memory), nearest first; empty with the software sampler, which sees no
    /// outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<crate::memory_source::SourceCount>,
}

impl SampleMatch {
    /// What shades a graph's node: sampled misses with a hardware sampler, else samples.
    #[must_use]
    pub fn cost(&self) -> u64 {
        self.misses.unwrap_or(self.samples)
    }
}

/// Histories of one type that took the same path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathTrace {
    /// Histories that took it (its frequency).
    pub histories: u64,
    /// `histories` / the type's complete histories.
    pub share: f64,
    /// The allocating function.
    pub alloc_function: String,
    /// The freeing function, or `(reallocated)` when the free was not traced.
    pub end: String,
    /// A CPU change (see [`DataFlow::cpu_changes`]): the object was freed on another CPU
    /// than its last access (or its allocation).
    pub end_cpu_change: bool,
    /// The accesses, in time order.
    pub elements: Vec<PathElement>,
}

impl PathTrace {
    /// The functions it passes through: the allocating one, those of its accesses (a run of
    /// accesses in one function named once), the freeing one.
    #[must_use]
    pub fn functions(&self) -> Vec<&str> {
        let mut out = vec![self.alloc_function.as_str()];
        for e in &self.elements {
            if out.last() != Some(&e.function.as_str()) {
                out.push(&e.function);
            }
        }
        if out.last() != Some(&self.end.as_str()) {
            out.push(&self.end);
        }
        out
    }
}

/// How fast new paths stopped appearing (the paper found 30 to 100 histories enough).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Convergence {
    /// Complete histories, in start order.
    pub histories: u64,
    /// Distinct paths among them.
    pub paths: u64,
    /// The history count (1-based) at which each new path appeared.
    pub new_path_at: Vec<u64>,
    /// The history count at which the last new path appeared: histories after it found none.
    pub last_new_path_at: u64,
}

/// The order of the first accesses to two ranges watched together (a pairwise history).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldOrder {
    /// The range at the lower offset.
    pub first: Span,
    /// Its field, when debug info names it.
    #[serde(default)]
    pub first_field: Option<String>,
    /// The other.
    pub second: Span,
    /// Its field, when debug info names it.
    #[serde(default)]
    pub second_field: Option<String>,
    /// Histories that watched this pair.
    pub histories: u64,
    /// `first` was touched before `second`.
    pub first_before_second: u64,
    /// `second` was touched before `first`.
    pub second_before_first: u64,
    /// Only one of the two was touched, or neither.
    pub one_or_none: u64,
}

/// What a function is to the type's objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowRole {
    /// Allocates them.
    Alloc,
    /// Touches them.
    Access,
    /// Frees them (or stands for an untraced free: `(reallocated)`).
    Free,
    /// Both allocates and frees them.
    AllocAndFree,
}

/// One function of the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowNode {
    /// Function name.
    pub function: String,
    /// Its role.
    pub role: FlowRole,
    /// Histories that went through it.
    pub histories: u64,
    /// Read-only hits in it.
    pub reads: u64,
    /// Write-only hits.
    pub writes: u64,
    /// Read-modify-write hits.
    pub read_writes: u64,
    /// Hits whose kind is unknown (instruction not found, implicit operands).
    pub unknown_kind: u64,
    /// The watched ranges its hits touched, by offset; their hits add up to the node's.
    #[serde(default)]
    pub ranges: Vec<FlowRange>,
    /// Samples of the type at the instructions and ranges its hits name; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampleMatch>,
}

/// The hits of one function on one watched range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRange {
    /// The range.
    pub range: Span,
    /// The field at its offset, when debug info names it.
    #[serde(default)]
    pub field: Option<String>,
    /// Read-only hits.
    pub reads: u64,
    /// Write-only hits.
    pub writes: u64,
    /// Read-modify-write hits.
    pub read_writes: u64,
    /// Hits whose kind is unknown.
    pub unknown_kind: u64,
}

impl FlowRange {
    /// The range with its field: `+0x10/8 next`.
    #[must_use]
    pub fn label(&self) -> String {
        self.range.with_field(self.field.as_deref())
    }

    /// The range, its field and its hits: `+0x10/8 next (R 3 W 2)`.
    #[must_use]
    pub fn summary(&self) -> String {
        format!("{} ({})", self.label(), self.kinds())
    }

    /// Its hits by kind, the kinds with none left out: `R 3 W 2`, `? 1`.
    #[must_use]
    pub fn kinds(&self) -> String {
        let listed: Vec<String> = [
            (self.reads, "R"),
            (self.writes, "W"),
            (self.read_writes, "RW"),
            (self.unknown_kind, "?"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{what} {n}"))
        .collect();
        listed.join(" ")
    }
}

impl FlowNode {
    /// Hits in the function.
    #[must_use]
    pub const fn hits(&self) -> u64 {
        self.reads + self.writes + self.read_writes + self.unknown_kind
    }

    /// What shades the node: its samples' [`SampleMatch::cost`], 0 without samples.
    #[must_use]
    pub fn cost(&self) -> u64 {
        self.sampled.as_ref().map_or(0, SampleMatch::cost)
    }
}

/// A step from one function to the next within a history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEdge {
    /// From this function.
    pub from: String,
    /// To this one.
    pub to: String,
    /// Times the step was taken, all histories together.
    pub transitions: u64,
    /// Histories that took it.
    pub histories: u64,
    /// Of the transitions, those that were a CPU change (see [`DataFlow::cpu_changes`]).
    pub cpu_changes: u64,
}

/// Why a type's data flow graph has no node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EmptyFlowReason {
    /// None of the type's histories ran from allocation to free: each timed out, was cut by
    /// the end of collection or has no end record ([`TypeHistories::end_reasons`]).
    NoCompleteHistory,
}

/// Why the graph is empty, for programs (`reason`) and for people (`message`, which every
/// front end shows as it is).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyFlow {
    /// Why.
    pub reason: EmptyFlowReason,
    /// One sentence saying so, and what would give a graph.
    pub message: String,
}

/// The data flow graph of one type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DataFlow {
    /// The type.
    pub type_name: String,
    /// Complete histories merged.
    pub histories: u64,
    /// CPU changes of the merged histories: the one count every view of the histories shows.
    ///
    /// A history is a sequence of steps: the allocation, each access (hit) in time order,
    /// then the free. A step is a *CPU change* when it ran on another CPU than the step before
    /// it. Only complete histories count (the graph is made of them), without their mismatched
    /// hits (which were no access to the watched bytes). It equals the sum of the edges'
    /// [`FlowEdge::cpu_changes`], and of the path traces' marked steps
    /// ([`PathElement::cpu_change`], [`PathTrace::end_cpu_change`]) times their histories.
    #[serde(default)]
    pub cpu_changes: u64,
    /// Why there is no node; absent when there are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_empty: Option<EmptyFlow>,
    /// Nodes, alloc first, free last (but for a free node that a step leaves: it hands
    /// objects on), the others by their mean position along the histories.
    pub nodes: Vec<FlowNode>,
    /// Edges, in node order of `from`, then most taken first.
    pub edges: Vec<FlowEdge>,
}

impl DataFlow {
    /// The node of `function`.
    #[must_use]
    pub fn node(&self, function: &str) -> Option<&FlowNode> {
        self.nodes.iter().find(|n| n.function == function)
    }

    /// The edge from `from` to `to`.
    #[must_use]
    pub fn edge(&self, from: &str, to: &str) -> Option<&FlowEdge> {
        self.edges.iter().find(|e| e.from == from && e.to == to)
    }
}

/// A type watched over its whole object (`--histories full:TYPE`, the paper's section 4.3):
/// the plan's targets watch up to four of its aligned chunks each, so that every pair of
/// chunks is watched together by some target. The module collects *rounds*: one complete
/// history of each target. A *history set* is one complete history of each target, matched
/// as the paper does "by matching up common access patterns to the same offset" (the
/// histories of a round watch different objects, which may take different paths): each
/// target gives the history that agrees with the set on the most chunks they share. Each set
/// is merged into one ordered access history of the whole object.
///
/// The merge: each chunk's *reference* accesses are its (instruction, kind) sequence in the
/// set's first history (in plan order, as matched) that watched it. A history *agrees* when its
/// accesses to each of its chunks are those chunks' references; then its interleaving orders
/// them exactly. The merged history is the topological order of every chunk's reference
/// accesses under the agreeing histories' orderings, ties (accesses no agreeing history
/// orders) and cycles broken by mean time since allocation. Histories that did not agree
/// ([`Self::unmerged_histories`]) order nothing: the fewer, the more of the merged order was
/// observed rather than inferred from time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FullCoverage {
    /// Bytes of the type's objects.
    pub object_size: u32,
    /// The chunks the targets watch, by offset.
    pub chunks: Vec<Span>,
    /// Targets (up to four chunks each) per set.
    pub targets: u64,
    /// History sets matched and merged.
    pub sets: u64,
    /// Rounds with a complete history (freed, with a traced free) of every target: what the
    /// sets were matched from.
    pub rounds: u64,
    /// Rounds some target has no complete history for (collection ended, or timed out,
    /// first): counted in the costs.
    pub incomplete_rounds: u64,
    /// Complete histories that no set used (a target with fewer complete histories ends the
    /// matching).
    pub unmatched_histories: u64,
    /// Histories of the merged sets whose accesses to a chunk differ from the chunk's
    /// reference: their order was left out of the merge.
    pub unmerged_histories: u64,
    /// Orderings of agreeing pairs that contradicted each other (a cycle), broken by time.
    pub cycles_broken: u64,
    /// Distinct merged paths after 1, 2, ..., `sets` sets (the paper's figure 4).
    pub distinct_paths_after: Vec<u64>,
    /// The set (1-based) at which the last new merged path appeared; 0 without sets.
    pub last_new_path_at: u64,
    /// What each set cost, complete and incomplete, in order.
    pub cost: Vec<SetCost>,
    /// All sets together.
    pub total_cost: SetCost,
    /// Distinct merged paths, most frequent first.
    pub paths: Vec<MergedPath>,
}

impl FullCoverage {
    /// Up to this many sets [`Self::curve`] lists every count; more are shown as runs.
    pub const CURVE_LISTED: usize = 40;

    /// [`Self::distinct_paths_after`] as people read it: `1 1 2 2`, or as runs when long:
    /// `1 x12, 2 x30`.
    #[must_use]
    pub fn curve(&self) -> String {
        let after = &self.distinct_paths_after;
        if after.len() <= Self::CURVE_LISTED {
            let listed: Vec<String> = after.iter().map(ToString::to_string).collect();
            return listed.join(" ");
        }
        let mut runs: Vec<(u64, usize)> = Vec::new();
        for &n in after {
            match runs.last_mut() {
                Some((last, count)) if *last == n => *count += 1,
                _ => runs.push((n, 1)),
            }
        }
        let runs: Vec<String> = runs.iter().map(|(n, c)| format!("{n} x{c}")).collect();
        runs.join(", ")
    }

    /// Sets after the last one that found a new path.
    #[must_use]
    pub const fn sets_without_new_path(&self) -> u64 {
        self.sets.saturating_sub(self.last_new_path_at)
    }

    /// Mean histories started per merged set, incomplete sets' attempts included: what one
    /// whole-object history cost.
    #[must_use]
    pub fn mean_histories_per_set(&self) -> Option<f64> {
        (self.sets > 0).then(|| self.total_cost.histories as f64 / self.sets as f64)
    }

    /// Mean hits recorded per merged set, incomplete sets' included.
    #[must_use]
    pub fn mean_hits_per_set(&self) -> Option<f64> {
        (self.sets > 0).then(|| self.total_cost.hits as f64 / self.sets as f64)
    }

    /// Mean wall time per merged set (ns), incomplete sets' included.
    #[must_use]
    pub fn mean_wall_ns_per_set(&self) -> Option<u64> {
        (self.sets > 0).then(|| self.total_cost.wall_ns / self.sets)
    }
}

/// What collecting one round cost (see [`FullCoverage`]). A round's histories are, for each
/// target, its k-th complete history (freed, with a traced free) and the target's tries
/// since its previous complete one (timed out, reallocated, cut).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetCost {
    /// The round's number (1-based); 0 for totals.
    pub set: u64,
    /// Whether every target has a complete history in it.
    pub complete: bool,
    /// Histories started.
    pub histories: u64,
    /// Of them, complete ones.
    pub complete_histories: u64,
    /// Hits recorded.
    pub hits: u64,
    /// From the set's first history start to its last end (ns); for totals, the sum.
    pub wall_ns: u64,
}

/// Sets whose merged histories took the same path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedPath {
    /// Sets that took it.
    pub sets: u64,
    /// `sets` / the merged sets.
    pub share: f64,
    /// The allocating function.
    pub alloc_function: String,
    /// The freeing function, or `(reallocated)`.
    pub end: String,
    /// The CPU label of the free (see [`MergedStep::cpu`]).
    pub end_cpu: u32,
    /// The free ran on another CPU than the last step (or the allocation).
    pub end_cpu_change: bool,
    /// The accesses to the whole object, in merged order.
    pub steps: Vec<MergedStep>,
}

/// One access of a merged history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedStep {
    /// Function of the accessing instruction (or of the trap ip when it was not found).
    pub function: String,
    /// Offset of the instruction in it.
    pub function_offset: u64,
    /// The accessing instruction's address (the trap ip when not found).
    pub ip: u64,
    /// Whether the accessing instruction was found.
    pub instruction_found: bool,
    /// The chunk it touched.
    pub chunk: Span,
    /// The field at the chunk's offset, when debug info names it.
    #[serde(default)]
    pub field: Option<String>,
    /// Read, write or both, when known.
    pub kind: Option<AccessKind>,
    /// The CPU as a label: CPUs numbered in order of first appearance in the history the
    /// access comes from, the allocating CPU 0 (the paper's equivalent sequence of CPUs).
    pub cpu: u32,
    /// Its CPU label differs from the step before's (the allocation's, 0, for the first).
    pub cpu_change: bool,
    /// Mean time since allocation over the path's sets (ns).
    pub mean_since_alloc_ns: u64,
    /// Samples of the same type, instruction and chunk, as for a path trace's step
    /// ([`PathElement::sampled`]); absent when none matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampleMatch>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_curve(distinct_paths_after: Vec<u64>) -> FullCoverage {
        FullCoverage {
            object_size: 32,
            chunks: Vec::new(),
            targets: 6,
            sets: distinct_paths_after.len() as u64,
            rounds: distinct_paths_after.len() as u64,
            incomplete_rounds: 0,
            unmatched_histories: 0,
            unmerged_histories: 0,
            cycles_broken: 0,
            distinct_paths_after,
            last_new_path_at: 0,
            cost: Vec::new(),
            total_cost: SetCost::default(),
            paths: Vec::new(),
        }
    }

    #[test]
    fn a_short_curve_lists_every_count_and_a_long_one_its_runs() {
        assert_eq!(with_curve(vec![1, 1, 2]).curve(), "1 1 2");
        let long: Vec<u64> = (0..50).map(|i| if i < 10 { 1 } else { 3 }).collect();
        assert_eq!(with_curve(long).curve(), "1 x10, 3 x40");
    }
}
