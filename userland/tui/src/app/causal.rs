//! The causal view's state: which analysis (progress point, or the latency pair) is shown,
//! and the type selected in its ranking.

use dprof_model::causal::{Analysis, CausalReport};
use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::list::{ListState, Nav};
use crate::event::EventState;

/// The analysis shown and the selected row of its ranking.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CausalState {
    list: ListState,
    analysis: usize,
}

impl CausalState {
    /// The selection and scroll of the ranking.
    #[must_use]
    pub const fn list(&self) -> &ListState {
        &self.list
    }

    /// Index of the analysis shown in [`CausalReport::analyses`].
    #[must_use]
    pub const fn analysis(&self) -> usize {
        self.analysis
    }

    /// The analysis shown, if the report has it.
    #[must_use]
    pub fn shown<'r>(&self, report: &'r CausalReport) -> Option<&'r Analysis> {
        report.analyses.get(self.analysis)
    }

    /// The type-table index of the selected type.
    #[must_use]
    pub fn selected_type_index(&self, report: &CausalReport) -> Option<usize> {
        self.shown(report)?
            .types
            .get(self.list.selected())
            .map(|t| t.type_index)
    }

    /// Selects the type named `name` when the ranking shown lists it; otherwise the selection
    /// stays where it was.
    pub(crate) fn follow(&mut self, report: &CausalReport, name: Option<&str>) {
        let Some(analysis) = self.shown(report) else {
            return;
        };
        let len = analysis.types.len();
        match name.and_then(|n| analysis.types.iter().position(|t| t.name == n)) {
            Some(row) => self.list.select(row, len),
            None => self.list.select(self.list.selected(), len),
        }
    }

    /// ↑↓ and pages move in the ranking; ←→ (h l) show the previous or next analysis with
    /// the same type selected.
    pub(crate) fn handle_key(&mut self, key: KeyEvent, report: &CausalReport) -> EventState {
        let count = report.analyses.len();
        let step: isize = match key.code {
            KeyCode::Left | KeyCode::Char('h') => -1,
            KeyCode::Right | KeyCode::Char('l') => 1,
            _ => {
                let len = self.shown(report).map_or(0, |a| a.types.len());
                return match Nav::of(&key) {
                    Some(nav) if len > 0 => {
                        self.list.apply(nav, len);
                        EventState::Consumed
                    }
                    _ => EventState::NotConsumed,
                };
            }
        };
        if count < 2 {
            return EventState::NotConsumed;
        }
        let type_index = self.selected_type_index(report);
        self.analysis = (self.analysis as isize + step).rem_euclid(count as isize) as usize;
        let row = self.shown(report).and_then(|a| {
            a.types
                .iter()
                .position(|t| Some(t.type_index) == type_index)
        });
        let len = self.shown(report).map_or(0, |a| a.types.len());
        self.list.select(row.unwrap_or(0), len);
        EventState::Consumed
    }
}

#[cfg(test)]
mod tests {
    use dprof_fixtures::causal::{self as example, Planned};
    use ratatui::crossterm::event::KeyModifiers;

    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    /// Two points and their latency pair: three analyses; ←→ cycle through them and keep the
    /// selected type.
    #[test]
    fn left_and_right_change_the_analysis_and_keep_the_type() {
        let config = example::config(
            &[("a", 10), ("b", 5)],
            &["user:begin", "user:end"],
            Some((0, 1)),
        );
        let planned: Vec<Planned> = (0..6)
            .map(|i| {
                Planned::even(
                    i,
                    i % 2,
                    [0, 50, 100][(i / 2) as usize],
                    1_000_000,
                    0,
                    &[100, 100],
                )
            })
            .collect();
        let report = dprof_analysis::causal::analyze(&config, &example::records(&planned));
        assert_eq!(report.analyses.len(), 3);
        let mut state = CausalState::default();
        state.follow(&report, Some("b"));
        assert_eq!(state.selected_type_index(&report), Some(1));
        assert!(state.handle_key(key(KeyCode::Right), &report).is_consumed());
        assert_eq!(state.analysis(), 1);
        assert_eq!(state.selected_type_index(&report), Some(1));
        assert!(state
            .handle_key(key(KeyCode::Char('h')), &report)
            .is_consumed());
        assert!(state.handle_key(key(KeyCode::Left), &report).is_consumed());
        assert_eq!(state.analysis(), 2);
        assert_eq!(state.selected_type_index(&report), Some(1));
        assert!(state.handle_key(key(KeyCode::Home), &report).is_consumed());
        assert_eq!(state.list().selected(), 0);
        assert!(!state
            .handle_key(key(KeyCode::Char('x')), &report)
            .is_consumed());
    }
}
