//! The styles every view draws with.

use ratatui::style::{Color, Modifier, Style};

/// Headings and the focused pane's title.
pub(super) const HEADING: Style = Style::new().add_modifier(Modifier::BOLD);
/// The selected row.
pub(super) const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
/// Secondary text.
pub(super) const DIM: Style = Style::new().fg(Color::DarkGray);
/// Warnings and the bounce flag.
pub(super) const WARN: Style = Style::new().fg(Color::Yellow);
/// The view's tab, key names in the status bar.
pub(super) const ACCENT: Style = Style::new().fg(Color::Cyan);
/// A step where the object moved to another CPU.
pub(super) const CPU_CHANGE: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
