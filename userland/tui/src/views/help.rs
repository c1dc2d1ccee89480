//! The help overlay: every key.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Widget};

use super::style::{ACCENT, DIM, HEADING};

/// Every key, and what it does.
pub(crate) const KEYS: &[(&str, &str)] = &[
    (
        "↑ ↓  k j",
        "move the selection: a row, a type, a Data flow node",
    ),
    ("PgUp PgDn", "move a page"),
    ("Home End  g G", "first, last row"),
    (
        "← →  h l",
        "previous, next pane (Type); progress point (Causal)",
    ),
    ("Tab  Shift-Tab", "next, previous view"),
    ("1 … 6", "go to a view"),
    (
        "Enter",
        "open: a type; a function's data flow; a node's accesses",
    ),
    ("Esc  Backspace", "back to the previous view"),
    ("/", "filter types as you type (Enter keeps, Esc clears)"),
    ("s", "sort by the next column"),
    ("S", "reverse the sort"),
    ("b", "Working set: the types in each cache set, or the type"),
    ("?", "this help (any key closes it)"),
    ("q  Ctrl-C", "quit"),
];

/// Width of the key column.
const KEY_WIDTH: usize = 16;

pub(super) fn render(area: Rect, buf: &mut Buffer) {
    let widest = KEYS
        .iter()
        .map(|(_, what)| KEY_WIDTH + what.chars().count())
        .max()
        .unwrap_or(0) as u16;
    let width = (widest + 4).min(area.width);
    let height = (KEYS.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    Clear.render(popup, buf);
    let block = Block::bordered()
        .title(Span::styled(" Keys ", HEADING))
        .title_bottom(
            Line::styled(format!(" dprof {} ", env!("CARGO_PKG_VERSION")), DIM).right_aligned(),
        );
    let inner = block.inner(popup);
    block.render(popup, buf);
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(key, what)| {
            Line::from(vec![
                Span::styled(format!(" {key:<w$}", w = KEY_WIDTH - 1), ACCENT),
                Span::raw(*what),
            ])
        })
        .collect();
    Paragraph::new(lines).render(inner, buf);
}
