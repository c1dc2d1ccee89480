//! The type view's state: which pane has the focus, and each pane's sort and selection.

use dprof_model::{FieldCount, FunctionCount, TypeProfile};
use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::list::{ListState, Nav};
use crate::event::EventState;

/// A list of the type view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Pane {
    /// The offsets (fields) touched.
    #[default]
    Offsets,
    /// The functions that touched the type.
    Functions,
    /// The CPUs that touched the type.
    Cpus,
}

impl Pane {
    /// Every pane, left to right.
    pub const ALL: [Self; 3] = [Self::Offsets, Self::Functions, Self::Cpus];

    /// The pane's title.
    #[must_use]
    pub const fn title(self) -> &'static str {
        match self {
            Self::Offsets => "Offsets",
            Self::Functions => "Functions",
            Self::Cpus => "CPUs",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }

    /// Rows of this pane for type `t`.
    fn len(self, t: &TypeProfile) -> usize {
        match self {
            Self::Offsets => t.fields.len(),
            Self::Functions => t.functions.len(),
            Self::Cpus => t.cpus.len(),
        }
    }
}

/// What a pane is sorted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PaneSort {
    /// Samples, most first: the report's order.
    Samples,
    /// The row's own key: offset, function name or CPU number.
    Key,
    /// Misses a hardware sampler saw (types with hardware samples only).
    Misses,
}

impl PaneSort {
    /// The sort's name in `pane`, as the pane's title shows it.
    #[must_use]
    pub const fn name(self, pane: Pane) -> &'static str {
        match (self, pane) {
            (Self::Samples, _) => "samples",
            (Self::Misses, _) => "misses",
            (Self::Key, Pane::Offsets) => "offset",
            (Self::Key, Pane::Functions) => "function",
            (Self::Key, Pane::Cpus) => "CPU",
        }
    }

    /// Whether it starts with the largest value.
    const fn descending(self) -> bool {
        !matches!(self, Self::Key)
    }
}

/// One pane's sort, rows and selection.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PaneList {
    sort: PaneSort,
    descending: bool,
    /// Indices into the pane's list of the type, in sort order.
    rows: Vec<usize>,
    list: ListState,
}

impl Default for PaneList {
    fn default() -> Self {
        Self {
            sort: PaneSort::Samples,
            descending: true,
            rows: Vec::new(),
            list: ListState::default(),
        }
    }
}

/// Sort keys of one row: (samples, misses, key); names sort as text.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum RowKey<'t> {
    Number(u64),
    Text(&'t str),
}

impl PaneList {
    fn sort_rows(&mut self, pane: Pane, t: &TypeProfile) {
        let key = |i: usize| -> RowKey<'_> {
            match (pane, self.sort) {
                (Pane::Offsets, PaneSort::Samples) => RowKey::Number(t.fields[i].samples),
                (Pane::Offsets, PaneSort::Misses) => {
                    RowKey::Number(t.fields[i].misses.unwrap_or(0))
                }
                (Pane::Offsets, PaneSort::Key) => RowKey::Number(t.fields[i].offset),
                (Pane::Functions, PaneSort::Samples) => RowKey::Number(t.functions[i].samples),
                (Pane::Functions, PaneSort::Misses) => {
                    RowKey::Number(t.functions[i].misses.unwrap_or(0))
                }
                (Pane::Functions, PaneSort::Key) => RowKey::Text(&t.functions[i].function),
                (Pane::Cpus, PaneSort::Key) => RowKey::Number(u64::from(t.cpus[i].cpu)),
                (Pane::Cpus, _) => RowKey::Number(t.cpus[i].samples),
            }
        };
        let mut rows: Vec<usize> = (0..pane.len(t)).collect();
        // Stable: ties keep the report's order (most samples first).
        rows.sort_by(|&a, &b| {
            let order = key(a).cmp(&key(b));
            if self.descending {
                order.reverse()
            } else {
                order
            }
        });
        self.rows = rows;
        self.list.reset();
    }
}

/// The type view's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeDetailState {
    /// The type shown: an index into the report's types.
    type_index: Option<usize>,
    pane: Pane,
    panes: [PaneList; 3],
}

impl TypeDetailState {
    /// Shows type `index` (`t`); a new type starts at its first offset, sorted by samples.
    pub(crate) fn show(&mut self, index: Option<usize>, t: Option<&TypeProfile>) {
        if index == self.type_index && index.is_some() {
            return;
        }
        self.type_index = index;
        self.pane = Pane::Offsets;
        for pane in Pane::ALL {
            let list = &mut self.panes[pane.index()];
            *list = PaneList::default();
            if let Some(t) = t {
                list.sort_rows(pane, t);
            }
        }
    }

    /// The pane with the focus.
    #[must_use]
    pub const fn pane(&self) -> Pane {
        self.pane
    }

    /// The rows of `pane`: indices into the type's list, in sort order.
    #[must_use]
    pub fn rows(&self, pane: Pane) -> &[usize] {
        &self.panes[pane.index()].rows
    }

    /// The selection of `pane`.
    #[must_use]
    pub fn list(&self, pane: Pane) -> &ListState {
        &self.panes[pane.index()].list
    }

    /// What `pane` is sorted by, and whether largest first.
    #[must_use]
    pub fn sort(&self, pane: Pane) -> (PaneSort, bool) {
        let p = &self.panes[pane.index()];
        (p.sort, p.descending)
    }

    fn selected_row(&self, pane: Pane) -> Option<usize> {
        let p = &self.panes[pane.index()];
        p.rows.get(p.list.selected()).copied()
    }

    /// The offset selected in the offsets pane (the heat strip marks it).
    #[must_use]
    pub fn selected_field<'t>(&self, t: &'t TypeProfile) -> Option<&'t FieldCount> {
        t.fields.get(self.selected_row(Pane::Offsets)?)
    }

    /// The function under the cursor, when the functions pane has the focus.
    #[must_use]
    pub fn selected_function<'t>(&self, t: &'t TypeProfile) -> Option<&'t FunctionCount> {
        if self.pane != Pane::Functions {
            return None;
        }
        t.functions.get(self.selected_row(Pane::Functions)?)
    }

    /// Focuses the functions pane on `function` of `t` (the pane keeps its sort).
    pub(crate) fn focus_function(&mut self, t: &TypeProfile, function: &str) {
        self.pane = Pane::Functions;
        let list = &mut self.panes[Pane::Functions.index()];
        let found = list
            .rows
            .iter()
            .position(|&i| t.functions.get(i).is_some_and(|f| f.function == function));
        if let Some(row) = found {
            list.list.select(row, list.rows.len());
        }
    }

    /// Moves, panes (←/→, h/l) and sorting of the focused pane.
    pub(crate) fn handle_key(&mut self, key: KeyEvent, t: &TypeProfile) -> EventState {
        let pane = self.pane;
        let list = &mut self.panes[pane.index()];
        if let Some(nav) = Nav::of(&key) {
            list.list.apply(nav, list.rows.len());
            return EventState::Consumed;
        }
        match key.code {
            KeyCode::Left | KeyCode::Char('h') => {
                self.pane = Pane::ALL[(pane.index() + Pane::ALL.len() - 1) % Pane::ALL.len()];
            }
            KeyCode::Right | KeyCode::Char('l') => {
                self.pane = Pane::ALL[(pane.index() + 1) % Pane::ALL.len()];
            }
            KeyCode::Char('s') => {
                list.sort = match list.sort {
                    PaneSort::Samples => PaneSort::Key,
                    PaneSort::Key if t.hardware.is_some() && pane != Pane::Cpus => PaneSort::Misses,
                    PaneSort::Key | PaneSort::Misses => PaneSort::Samples,
                };
                list.descending = list.sort.descending();
                list.sort_rows(pane, t);
            }
            KeyCode::Char('S') => {
                list.descending = !list.descending;
                list.sort_rows(pane, t);
            }
            _ => return EventState::NotConsumed,
        }
        EventState::Consumed
    }
}
