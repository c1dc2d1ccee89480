//! The type list of the miss classification and working-set views: the types their report
//! section has, one selected, following the data profile's selection.

use dprof_model::Report;
use ratatui::crossterm::event::KeyEvent;

use super::list::{ListState, Nav};
use super::view::View;
use crate::event::EventState;

/// The names of the types `view`'s report section lists, in its order; empty when the report
/// has no such section (or `view` has no type list).
#[must_use]
pub fn view_type_names(report: &Report, view: View) -> Vec<&str> {
    match view {
        View::MissClassification => report.misses.as_ref().map_or_else(Vec::new, |m| {
            m.types.iter().map(|t| t.name.as_str()).collect()
        }),
        View::WorkingSet => report.working_set.as_ref().map_or_else(Vec::new, |w| {
            w.types.iter().map(|t| t.name.as_str()).collect()
        }),
        _ => Vec::new(),
    }
}

/// A selection among a view's types.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewTypesState {
    list: ListState,
}

impl ViewTypesState {
    /// Selects `selected` (the data profile's type) when `names` has it; otherwise the
    /// selection stays where it was (within `names`).
    pub(crate) fn follow(&mut self, names: &[&str], selected: Option<&str>) {
        match selected.and_then(|s| names.iter().position(|&n| n == s)) {
            Some(row) => self.list.select(row, names.len()),
            None => self.list.select(self.list.selected(), names.len()),
        }
    }

    /// The selection and scroll.
    #[must_use]
    pub const fn list(&self) -> &ListState {
        &self.list
    }

    /// The selected row.
    #[must_use]
    pub const fn selected(&self) -> usize {
        self.list.selected()
    }

    /// Moves among `len` types.
    pub(crate) fn handle_key(&mut self, key: KeyEvent, len: usize) -> EventState {
        match Nav::of(&key) {
            Some(nav) if len > 0 => {
                self.list.apply(nav, len);
                EventState::Consumed
            }
            _ => EventState::NotConsumed,
        }
    }
}
