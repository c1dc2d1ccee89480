//! The heat strip: an object's bytes, one row per 64-byte cache line, each cell shaded by the
//! samples that touched its bytes; runs of untouched lines fold into one row.

use std::collections::BTreeMap;

use dprof_model::FieldCount;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::style::DIM;
use crate::app::field_label;

/// Bytes per cache line (x86).
pub(crate) const LINE_BYTES: u64 = 64;
/// Shades from few samples to the most.
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// A byte of the object no sample touched.
const UNTOUCHED: char = '·';
/// Widest a sample's access is taken to be (a `rep movs` could claim more).
const MAX_ACCESS: u64 = 64;
/// Columns of the per-line sample count.
const COUNT_WIDTH: usize = 7;

/// One cache line's heat.
#[derive(Clone, Debug)]
struct LineHeat {
    /// Samples that touched each byte.
    bytes: [u64; LINE_BYTES as usize],
    /// Samples of the offsets that start in this line.
    samples: u64,
    /// Those offsets, named.
    labels: Vec<String>,
}

impl Default for LineHeat {
    fn default() -> Self {
        Self {
            bytes: [0; LINE_BYTES as usize],
            samples: 0,
            labels: Vec::new(),
        }
    }
}

/// A row of the strip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StripRow {
    /// Cache line `n`.
    Line(u64),
    /// `count` untouched lines from line `first`.
    Gap { first: u64, count: u64 },
}

/// The heat strip of one type.
pub(crate) struct HeatStrip<'a> {
    lines: BTreeMap<u64, LineHeat>,
    /// Bytes of the object (or, without an object size, up to the last byte touched).
    extent: u64,
    most: u64,
    selected: Option<&'a FieldCount>,
}

impl<'a> HeatStrip<'a> {
    /// The strip of an object of `object_size` bytes (when known) touched at `fields`, with
    /// `selected` marked.
    pub(crate) fn new(
        fields: &'a [FieldCount],
        object_size: Option<u32>,
        selected: Option<&'a FieldCount>,
    ) -> Self {
        let mut lines: BTreeMap<u64, LineHeat> = BTreeMap::new();
        let mut end = 0;
        for f in fields {
            let (start, stop) = span(f);
            end = end.max(stop);
            let first = lines.entry(start / LINE_BYTES).or_default();
            first.samples += f.samples;
            first.labels.push(field_label(f));
            for byte in start..stop {
                let line = lines.entry(byte / LINE_BYTES).or_default();
                line.bytes[(byte % LINE_BYTES) as usize] += f.samples;
            }
        }
        let most = lines
            .values()
            .flat_map(|l| l.bytes.iter().copied())
            .max()
            .unwrap_or(0);
        Self {
            lines,
            extent: object_size.map_or(end, u64::from).max(end),
            most,
            selected,
        }
    }

    /// Rows the strip takes in all.
    pub(crate) fn height(&self) -> usize {
        self.rows().len()
    }

    /// Bytes per cell that fit a line in `width` columns.
    pub(crate) fn bytes_per_cell(&self, width: u16) -> u64 {
        let cells = usize::from(width).saturating_sub(self.label_width() + 1 + COUNT_WIDTH);
        let mut per_cell = 1;
        while per_cell < LINE_BYTES && (LINE_BYTES / per_cell) as usize > cells {
            per_cell *= 2;
        }
        per_cell
    }

    fn line_count(&self) -> u64 {
        self.extent.div_ceil(LINE_BYTES)
    }

    /// Hex digits of a line's offset: enough for the object's last line, at least 3.
    fn label_digits(&self) -> usize {
        let last = self.line_count().saturating_sub(1) * LINE_BYTES;
        format!("{last:x}").len().max(3)
    }

    /// Columns of `+0x0c0`.
    fn label_width(&self) -> usize {
        self.label_digits() + 3
    }

    fn rows(&self) -> Vec<StripRow> {
        let mut rows = Vec::new();
        let mut next = 0;
        let gap = |rows: &mut Vec<StripRow>, from: u64, to: u64| match to - from {
            0 => {}
            1 => rows.push(StripRow::Line(from)),
            count => rows.push(StripRow::Gap { first: from, count }),
        };
        for &line in self.lines.keys() {
            gap(&mut rows, next, line);
            rows.push(StripRow::Line(line));
            next = line + 1;
        }
        gap(&mut rows, next, self.line_count().max(next));
        rows
    }

    fn selected_bytes(&self) -> Option<(u64, u64)> {
        self.selected.map(span)
    }

    fn render_line(&self, line: u64, width: u16) -> Line<'static> {
        let per_cell = self.bytes_per_cell(width);
        let heat = self.lines.get(&line);
        let base = line * LINE_BYTES;
        let mut spans = vec![Span::styled(
            format!("+0x{base:0d$x} ", d = self.label_digits()),
            DIM,
        )];
        let selected = self.selected_bytes();
        for cell in 0..LINE_BYTES / per_cell {
            let start = base + cell * per_cell;
            if start >= self.extent {
                spans.push(Span::raw(" "));
                continue;
            }
            let samples = heat.map_or(0, |h| {
                let at = (cell * per_cell) as usize;
                h.bytes[at..at + per_cell as usize]
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0)
            });
            let (glyph, mut style) = self.shade(samples);
            if selected.is_some_and(|(from, to)| start < to && from < start + per_cell) {
                style = style.add_modifier(Modifier::REVERSED);
            }
            spans.push(Span::styled(glyph.to_string(), style));
        }
        let samples = heat.map_or(0, |h| h.samples);
        spans.push(Span::raw(format!("{samples:>COUNT_WIDTH$}")));
        if let Some(h) = heat {
            spans.push(Span::styled(format!("  {}", h.labels.join(", ")), DIM));
        }
        Line::from(spans)
    }

    fn shade(&self, samples: u64) -> (char, Style) {
        if samples == 0 || self.most == 0 {
            return (UNTOUCHED, DIM);
        }
        let level = (samples * LEVELS.len() as u64).div_ceil(self.most) as usize;
        let level = level.clamp(1, LEVELS.len());
        let color = match level {
            1..=2 => Color::Blue,
            3..=4 => Color::Green,
            5..=6 => Color::Yellow,
            _ => Color::Red,
        };
        (LEVELS[level - 1], Style::new().fg(color))
    }
}

/// The bytes one offset's samples touched (a size of 0, unknown, counts as one byte).
fn span(f: &FieldCount) -> (u64, u64) {
    let size = u64::from(f.size).clamp(1, MAX_ACCESS);
    (f.offset, f.offset.saturating_add(size))
}

impl Widget for &HeatStrip<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let rows = self.rows();
        let height = usize::from(area.height);
        // Keep the selected offset's line in sight, in the middle when the strip scrolls.
        let first = self
            .selected
            .and_then(|f| {
                rows.iter().position(|r| match *r {
                    StripRow::Line(l) => l == f.offset / LINE_BYTES,
                    StripRow::Gap { .. } => false,
                })
            })
            .map_or(0, |at| at.saturating_sub(height / 2))
            .min(rows.len().saturating_sub(height));
        let lines: Vec<Line> = rows
            .iter()
            .skip(first)
            .take(height)
            .map(|row| match *row {
                StripRow::Line(line) => self.render_line(line, area.width),
                StripRow::Gap { first, count } => Line::styled(
                    format!(
                        "{:<w$} ⋮ {count} untouched lines (+{:#x} to +{:#x})",
                        "",
                        first * LINE_BYTES,
                        (first + count) * LINE_BYTES - 1,
                        w = self.label_width()
                    ),
                    DIM,
                ),
            })
            .collect();
        Paragraph::new(lines).render(area, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(offset: u64, size: u32, samples: u64, name: Option<&str>) -> FieldCount {
        FieldCount {
            offset,
            size,
            field: name.map(str::to_owned),
            samples,
            reads: samples,
            writes: 0,
            read_writes: 0,
            misses: None,
        }
    }

    /// 4 bytes per cell, so a line is 16 cells: an sk_buff-like object of 232 bytes.
    #[test]
    fn cells_shade_by_samples_and_untouched_lines_fold() {
        let fields = [
            field(0x8, 8, 3, None),
            field(0x70, 4, 3, Some("len")),
            field(0x10, 8, 1, None),
        ];
        let strip = HeatStrip::new(&fields, Some(232), None);
        let area = Rect::new(0, 0, 44, 4);
        let mut buf = Buffer::empty(area);
        assert_eq!(strip.bytes_per_cell(area.width), 4);
        (&strip).render(area, &mut buf);
        let expected = Buffer::with_lines([
            "+0x000 ··██▃▃··········      4  +0x8, +0x10 ",
            "+0x040 ············█···      3  +0x70 len   ",
            "       ⋮ 2 untouched lines (+0x80 to +0xff) ",
            "                                            ",
        ]);
        assert_eq!(text_of(&buf), text_of(&expected));
    }

    /// An object with no size (a stack) ends at its last byte touched; the rest folds.
    #[test]
    fn without_a_size_the_strip_ends_at_the_last_byte_touched() {
        let fields = [field(0x3e90, 8, 1, None)];
        let strip = HeatStrip::new(&fields, None, Some(&fields[0]));
        assert_eq!(strip.height(), 2);
        let area = Rect::new(0, 0, 30, 2);
        let mut buf = Buffer::empty(area);
        (&strip).render(area, &mut buf);
        let lines = text_of(&buf);
        assert!(lines[0].contains("⋮ 250 untouched lines"), "{lines:?}");
        assert!(lines[1].starts_with("+0x3e80 ··█           1"), "{lines:?}");
        // The selected offset is shown reversed.
        let cell = &buf[(10, 1)];
        assert!(cell.modifier.contains(Modifier::REVERSED), "{cell:?}");
    }

    fn text_of(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect()
    }
}
