//! The data profile table's state: its columns, sort, filter and selection.

use std::cmp::Ordering;

use dprof_model::{DataProfile, FieldCount, Report, TypeHardware, TypeProfile};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::list::{ListState, Nav};
use crate::event::EventState;
use crate::format::{bytes, count, offset, percent};

/// A column of the data profile table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    /// Rank by the report's metric.
    Rank,
    /// Type name (with its struct when it differs).
    Type,
    /// L1 misses (hardware samplers).
    Misses,
    /// Samples.
    Samples,
    /// Share of all misses (hardware) or of resolved samples.
    Share,
    /// Misses / hardware samples of the type.
    MissRate,
    /// Mean latency in cycles.
    Latency,
    /// Accesses that found the line modified in another core's cache.
    Hitm,
    /// Objects touched.
    Objects,
    /// Objects touched from more than one CPU within one lifetime.
    Bounce,
    /// Most objects live at once.
    PeakObjects,
    /// Most bytes live at once.
    PeakBytes,
    /// The function with the most samples (misses).
    TopFunction,
    /// The offset with the most samples (misses).
    TopOffset,
}

/// Columns when types are ranked by samples (the software sampler).
const SAMPLE_COLUMNS: &[Column] = &[
    Column::Rank,
    Column::Type,
    Column::Samples,
    Column::Share,
    Column::Objects,
    Column::Bounce,
    Column::PeakObjects,
    Column::PeakBytes,
    Column::TopFunction,
    Column::TopOffset,
];

/// Columns when types are ranked by misses (a hardware sampler).
const MISS_COLUMNS: &[Column] = &[
    Column::Rank,
    Column::Type,
    Column::Misses,
    Column::Share,
    Column::MissRate,
    Column::Latency,
    Column::Hitm,
    Column::Samples,
    Column::Objects,
    Column::Bounce,
    Column::PeakBytes,
    Column::TopFunction,
    Column::TopOffset,
];

/// A value to sort by.
#[derive(Debug, PartialEq, PartialOrd)]
enum SortKey {
    Count(u64),
    Real(f64),
    Text(String),
}

impl SortKey {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Real(a), Self::Real(b)) => a.total_cmp(b),
            _ => self.partial_cmp(other).unwrap_or(Ordering::Equal),
        }
    }
}

/// A type's hardware statistics, zero when it has none.
static NO_HARDWARE: TypeHardware = TypeHardware::NONE;

fn hardware(t: &TypeProfile) -> &TypeHardware {
    t.hardware.as_ref().unwrap_or(&NO_HARDWARE)
}

impl Column {
    /// The heading.
    #[must_use]
    pub const fn header(self) -> &'static str {
        match self {
            Self::Rank => "rank",
            Self::Type => "type",
            Self::Misses => "misses",
            Self::Samples => "samples",
            Self::Share => "share",
            Self::MissRate => "miss rate",
            Self::Latency => "latency",
            Self::Hitm => "HITM",
            Self::Objects => "objects",
            Self::Bounce => "bounce",
            Self::PeakObjects => "peak objs",
            Self::PeakBytes => "peak bytes",
            Self::TopFunction => "top function",
            Self::TopOffset => "top offset",
        }
    }

    /// Whether the column holds numbers (right-aligned).
    #[must_use]
    pub const fn is_numeric(self) -> bool {
        !matches!(
            self,
            Self::Type | Self::Bounce | Self::TopFunction | Self::TopOffset
        )
    }

    /// Whether sorting by the column starts with the largest value: counts do, names and
    /// the rank do not.
    #[must_use]
    pub const fn sorts_descending(self) -> bool {
        !matches!(
            self,
            Self::Rank | Self::Type | Self::TopFunction | Self::TopOffset
        )
    }

    /// How long the column stays when the table is too wide: higher stays longer.
    pub(crate) const fn keep_priority(self, by_misses: bool) -> u8 {
        match self {
            Self::Type => 10,
            Self::Rank => 9,
            Self::Misses => 8,
            Self::Samples if !by_misses => 8,
            Self::Share | Self::Bounce => 7,
            Self::MissRate => 6,
            Self::Objects | Self::Hitm => 5,
            Self::PeakBytes | Self::Latency => 4,
            Self::Samples | Self::PeakObjects => 3,
            Self::TopFunction => 2,
            Self::TopOffset => 1,
        }
    }

    /// The text of the column for type `t`.
    #[must_use]
    pub fn cell(self, t: &TypeProfile, dp: &DataProfile) -> String {
        let by_misses = dp.hardware.is_some();
        let h = hardware(t);
        match self {
            Self::Rank => t.rank.to_string(),
            Self::Type => type_label(t),
            Self::Misses => h.misses.to_string(),
            Self::Samples => t.samples.to_string(),
            Self::Share => match &dp.hardware {
                Some(all) => percent(h.misses, all.misses),
                None => percent(t.samples, dp.resolved_samples),
            },
            Self::MissRate => percent(h.misses, h.samples),
            Self::Latency => h
                .mean_latency_cycles
                .map_or_else(|| "-".to_owned(), |m| format!("{m:.1}")),
            Self::Hitm => h.hitm.to_string(),
            Self::Objects => t.objects.to_string(),
            Self::Bounce => {
                if t.bounce {
                    format!("yes ({})", t.bounced_objects)
                } else {
                    "no".to_owned()
                }
            }
            Self::PeakObjects => count(t.peak_live_objects),
            Self::PeakBytes => t.peak_live_bytes.map_or_else(|| "-".to_owned(), bytes),
            Self::TopFunction => t.functions.first().map_or_else(
                || "-".to_owned(),
                |f| {
                    let share = if by_misses {
                        percent(f.misses.unwrap_or(0), h.misses)
                    } else {
                        percent(f.samples, t.samples)
                    };
                    format!("{} {share}", f.function)
                },
            ),
            Self::TopOffset => t.fields.first().map_or_else(
                || "-".to_owned(),
                |f| {
                    let share = if by_misses {
                        percent(f.misses.unwrap_or(0), h.misses)
                    } else {
                        percent(f.samples, t.samples)
                    };
                    format!("{} {share}", field_label(f))
                },
            ),
        }
    }

    fn sort_key(self, t: &TypeProfile, by_misses: bool) -> SortKey {
        let h = hardware(t);
        match self {
            Self::Rank => SortKey::Count(t.rank as u64),
            Self::Type => SortKey::Text(type_label(t).to_ascii_lowercase()),
            // A share orders as what it is a share of.
            Self::Share if by_misses => SortKey::Count(h.misses),
            Self::Misses => SortKey::Count(h.misses),
            Self::Samples | Self::Share => SortKey::Count(t.samples),
            Self::MissRate => SortKey::Real(h.miss_rate),
            Self::Latency => SortKey::Real(h.mean_latency_cycles.unwrap_or(-1.0)),
            Self::Hitm => SortKey::Count(h.hitm),
            Self::Objects => SortKey::Count(t.objects),
            Self::Bounce => SortKey::Count(t.bounced_objects),
            Self::PeakObjects => SortKey::Count(t.peak_live_objects.unwrap_or(0)),
            Self::PeakBytes => SortKey::Count(t.peak_live_bytes.unwrap_or(0)),
            Self::TopFunction => SortKey::Text(
                t.functions
                    .first()
                    .map_or_else(String::new, |f| f.function.to_ascii_lowercase()),
            ),
            Self::TopOffset => SortKey::Count(t.fields.first().map_or(u64::MAX, |f| f.offset)),
        }
    }
}

/// `name (struct)` when the struct's name differs from the type's, like `dprof report`.
#[must_use]
pub fn type_label(t: &TypeProfile) -> String {
    match &t.struct_name {
        Some(s) if *s != t.name => format!("{} ({s})", t.name),
        _ => t.name.clone(),
    }
}

/// `+0x70 len`, or `+0x70` without a field name.
#[must_use]
pub fn field_label(f: &FieldCount) -> String {
    match &f.field {
        Some(name) => format!("{} {name}", offset(f.offset)),
        None => offset(f.offset),
    }
}

/// The data profile table's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataProfileState {
    columns: &'static [Column],
    sort: Column,
    descending: bool,
    filter: String,
    editing: bool,
    /// Indices into the report's types: those the filter lets through, in sort order.
    rows: Vec<usize>,
    list: ListState,
}

impl Default for DataProfileState {
    fn default() -> Self {
        Self {
            columns: SAMPLE_COLUMNS,
            sort: Column::Rank,
            descending: false,
            filter: String::new(),
            editing: false,
            rows: Vec::new(),
            list: ListState::default(),
        }
    }
}

impl DataProfileState {
    /// Takes the report's columns and rows.
    pub(crate) fn load(&mut self, report: &Report) {
        self.columns = if report.data_profile.hardware.is_some() {
            MISS_COLUMNS
        } else {
            SAMPLE_COLUMNS
        };
        self.refresh(report, None);
    }

    /// The table's columns, all of them (the view drops what does not fit).
    #[must_use]
    pub const fn columns(&self) -> &'static [Column] {
        self.columns
    }

    /// The column sorted by, and whether largest first.
    #[must_use]
    pub const fn sort(&self) -> (Column, bool) {
        (self.sort, self.descending)
    }

    /// The filter: types whose name contains it (any case) are shown.
    #[must_use]
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// Whether keys go to the filter.
    #[must_use]
    pub const fn is_editing(&self) -> bool {
        self.editing
    }

    /// The rows shown: indices into the report's types.
    #[must_use]
    pub fn rows(&self) -> &[usize] {
        &self.rows
    }

    /// The selection among [`DataProfileState::rows`].
    #[must_use]
    pub const fn list(&self) -> &ListState {
        &self.list
    }

    /// The selected type: an index into the report's types.
    #[must_use]
    pub fn selected_type(&self) -> Option<usize> {
        self.rows.get(self.list.selected()).copied()
    }

    /// Selects type `index` (into the report's types); `false` when the filter hides it.
    pub(crate) fn select_type(&mut self, index: usize) -> bool {
        match self.rows.iter().position(|&r| r == index) {
            Some(row) => {
                self.list.select(row, self.rows.len());
                true
            }
            None => false,
        }
    }

    /// Starts typing into the filter.
    pub(crate) fn start_editing(&mut self) {
        self.editing = true;
    }

    /// Empties the filter and stops typing into it.
    pub(crate) fn clear_filter(&mut self, report: &Report) {
        self.editing = false;
        self.filter.clear();
        self.refresh(report, self.selected_type());
    }

    /// Recomputes the rows from the filter and sort, keeping `keep` selected when it is still
    /// shown.
    fn refresh(&mut self, report: &Report, keep: Option<usize>) {
        let types = &report.data_profile.types;
        let needle = self.filter.to_ascii_lowercase();
        self.rows = (0..types.len())
            .filter(|&i| needle.is_empty() || matches_filter(&types[i], &needle))
            .collect();
        let (sort, descending) = (self.sort, self.descending);
        let by_misses = report.data_profile.hardware.is_some();
        let keys: Vec<SortKey> = types.iter().map(|t| sort.sort_key(t, by_misses)).collect();
        self.rows.sort_by(|&a, &b| {
            let by_key = keys[a].cmp(&keys[b]);
            let by_key = if descending { by_key.reverse() } else { by_key };
            by_key.then(types[a].rank.cmp(&types[b].rank))
        });
        let row = keep
            .and_then(|k| self.rows.iter().position(|&r| r == k))
            .unwrap_or(0);
        if row == 0 {
            self.list.reset();
        }
        self.list.select(row, self.rows.len());
    }

    /// Keys while typing the filter: text, Backspace, Enter keeps it, Esc clears it. Other
    /// keys (arrows) are left to the table.
    pub(crate) fn handle_filter_key(&mut self, key: KeyEvent, report: &Report) -> EventState {
        let keep = self.selected_type();
        match key.code {
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.filter.push(c);
                self.refresh(report, keep);
            }
            KeyCode::Backspace => {
                self.filter.pop();
                self.refresh(report, keep);
            }
            KeyCode::Enter => self.editing = false,
            KeyCode::Esc => self.clear_filter(report),
            _ => return EventState::NotConsumed,
        }
        EventState::Consumed
    }

    /// Moves and sorting.
    pub(crate) fn handle_key(&mut self, key: KeyEvent, report: &Report) -> EventState {
        if let Some(nav) = Nav::of(&key) {
            self.list.apply(nav, self.rows.len());
            return EventState::Consumed;
        }
        let keep = self.selected_type();
        match key.code {
            KeyCode::Char('s') => {
                let at = self
                    .columns
                    .iter()
                    .position(|&c| c == self.sort)
                    .unwrap_or(0);
                self.sort = self.columns[(at + 1) % self.columns.len()];
                self.descending = self.sort.sorts_descending();
            }
            KeyCode::Char('S') => self.descending = !self.descending,
            _ => return EventState::NotConsumed,
        }
        self.refresh(report, keep);
        EventState::Consumed
    }
}

/// Whether the filter (lower case) is in the type's name, cache, site or struct.
fn matches_filter(t: &TypeProfile, needle: &str) -> bool {
    std::iter::once(&t.name)
        .chain(&t.struct_name)
        .chain(&t.cache)
        .chain(&t.site)
        .any(|s| s.to_ascii_lowercase().contains(needle))
}
