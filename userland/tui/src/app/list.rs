//! A selection in a list of rows, and the keys that move it.

use std::cell::Cell;

use ratatui::crossterm::event::{KeyCode, KeyEvent};

/// Rows a page key moves (the views do not tell the state their height).
const PAGE: usize = 10;

/// A move of the selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nav {
    /// One row up (↑, k).
    Up,
    /// One row down (↓, j).
    Down,
    /// A page up.
    PageUp,
    /// A page down.
    PageDown,
    /// The first row (Home, g).
    First,
    /// The last row (End, G).
    Last,
}

impl Nav {
    /// The move a key asks for, if any.
    #[must_use]
    pub const fn of(key: &KeyEvent) -> Option<Self> {
        Some(match key.code {
            KeyCode::Up | KeyCode::Char('k') => Self::Up,
            KeyCode::Down | KeyCode::Char('j') => Self::Down,
            KeyCode::PageUp => Self::PageUp,
            KeyCode::PageDown => Self::PageDown,
            KeyCode::Home | KeyCode::Char('g') => Self::First,
            KeyCode::End | KeyCode::Char('G') => Self::Last,
            _ => return None,
        })
    }
}

/// The selected row of a list, and the first row shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListState {
    selected: usize,
    /// The first row drawn. Only the view knows how many rows fit, so it keeps the selection
    /// in sight while drawing and leaves the result here for the next draw: a memo of the
    /// layout, not state that keys change (gitui's `VerticalScroll` does the same).
    scroll: Cell<usize>,
}

impl ListState {
    /// The selected row.
    #[must_use]
    pub const fn selected(&self) -> usize {
        self.selected
    }

    /// Selects row `row` of `len` (the last one when past the end).
    pub fn select(&mut self, row: usize, len: usize) {
        self.selected = row.min(len.saturating_sub(1));
    }

    /// Back to the first row, scrolled to the top.
    pub fn reset(&mut self) {
        self.selected = 0;
        self.scroll.set(0);
    }

    /// Moves the selection within `len` rows.
    pub fn apply(&mut self, nav: Nav, len: usize) {
        let last = len.saturating_sub(1);
        self.selected = match nav {
            Nav::Up => self.selected.saturating_sub(1),
            Nav::Down => (self.selected + 1).min(last),
            Nav::PageUp => self.selected.saturating_sub(PAGE),
            Nav::PageDown => (self.selected + PAGE).min(last),
            Nav::First => 0,
            Nav::Last => last,
        };
    }

    /// The first row the last draw showed.
    pub(crate) fn scroll(&self) -> usize {
        self.scroll.get()
    }

    /// Where the draw scrolled to.
    pub(crate) fn set_scroll(&self, first: usize) {
        self.scroll.set(first);
    }
}
