//! A history's steps, one line each, as the data flow pane lists them: a path trace's and a
//! merged whole-object path's, laid out alike.

use dprof_model::histories::{MergedPath, PathTrace, SampleMatch, Span as Range};
use dprof_model::AccessKind;
use ratatui::text::{Line, Span};

use super::style::{CPU_CHANGE, DIM};

/// One access of a path, as its line shows it.
struct Step<'p> {
    cpu_change: bool,
    since_alloc_ns: u64,
    function: &'p str,
    function_offset: u64,
    instruction_found: bool,
    range: Range,
    field: Option<&'p str>,
    kind: Option<AccessKind>,
    /// A merged step's CPU label; a path trace's steps have none.
    cpu: Option<u32>,
    sampled: Option<&'p SampleMatch>,
}

impl Step<'_> {
    fn location(&self) -> String {
        if self.instruction_found {
            format!("{}+{:#x}", self.function, self.function_offset)
        } else {
            format!("{}+{:#x} (no code)", self.function, self.function_offset)
        }
    }

    fn kind(&self) -> &'static str {
        self.kind.map_or("?", AccessKind::name)
    }

    fn cpu(&self) -> String {
        self.cpu.map(|c| format!("cpu {c}")).unwrap_or_default()
    }
}

/// A path trace's accesses, then its free.
pub(super) fn path_trace_lines(path: &PathTrace, width: usize) -> Vec<Line<'static>> {
    let steps: Vec<Step<'_>> = path
        .elements
        .iter()
        .map(|e| Step {
            cpu_change: e.cpu_change,
            since_alloc_ns: e.mean_since_alloc_ns,
            function: &e.function,
            function_offset: e.function_offset,
            instruction_found: e.instruction_found,
            range: e.range,
            field: e.field.as_deref(),
            kind: e.kind,
            cpu: None,
            sampled: e.sampled.as_ref(),
        })
        .collect();
    let end = format!("freed by {}", path.end);
    lines(&steps, path.end_cpu_change, &end, width)
}

/// A merged path's accesses with their CPU labels, then its free.
pub(super) fn merged_path_lines(path: &MergedPath, width: usize) -> Vec<Line<'static>> {
    let steps: Vec<Step<'_>> = path
        .steps
        .iter()
        .map(|s| Step {
            cpu_change: s.cpu_change,
            since_alloc_ns: s.mean_since_alloc_ns,
            function: &s.function,
            function_offset: s.function_offset,
            instruction_found: s.instruction_found,
            range: s.chunk,
            field: s.field.as_deref(),
            kind: s.kind,
            cpu: Some(s.cpu),
            sampled: s.sampled.as_ref(),
        })
        .collect();
    let end = format!("freed by {} on cpu {}", path.end, path.end_cpu);
    lines(&steps, path.end_cpu_change, &end, width)
}

/// One line per step: the CPU change, the time since allocation, the instruction, the range
/// with its field, the access, the CPU label and what the samples say. Field names are cut
/// (with `…`) to keep each line within `width`, the offsets never.
fn lines(steps: &[Step<'_>], end_cpu_change: bool, end: &str, width: usize) -> Vec<Line<'static>> {
    let change = |cpu_change: bool| {
        if cpu_change {
            Span::styled("cpu ", CPU_CHANGE)
        } else {
            Span::raw("    ")
        }
    };
    let widest = |f: &dyn Fn(&Step<'_>) -> usize| steps.iter().map(f).max().unwrap_or(0);
    let location_width = widest(&|s| s.location().chars().count());
    let kind_width = widest(&|s| s.kind().len());
    let cpu_width = widest(&|s| s.cpu().len());
    let cpu_gap = usize::from(cpu_width > 0);
    let sampled_width = widest(&|s| step_samples(s.sampled).chars().count());
    // The change, the time, the location, the range's, the access's and the CPU's columns and
    // their gaps, the samples.
    let room = width.saturating_sub(
        4 + 12 + location_width + 2 + 1 + kind_width + 1 + cpu_width + cpu_gap + sampled_width,
    );
    let range_width = widest(&|s| s.range.with_field(s.field).chars().count().min(room))
        .max(widest(&|s| s.range.to_string().len()))
        .max(8);
    let mut out: Vec<Line<'static>> = steps
        .iter()
        .map(|s| {
            let cpu = if cpu_width > 0 {
                format!("{:<cpu_width$} ", s.cpu())
            } else {
                String::new()
            };
            Line::from(vec![
                change(s.cpu_change),
                Span::styled(format!("{:>8} ns ", s.since_alloc_ns), DIM),
                Span::raw(format!(
                    "{:<location_width$}  {:<range_width$} {:<kind_width$} {cpu}",
                    s.location(),
                    fit_field(s.range, s.field, range_width),
                    s.kind()
                )),
                Span::styled(step_samples(s.sampled), DIM),
            ])
        })
        .collect();
    out.push(Line::from(vec![
        change(end_cpu_change),
        Span::raw(format!("            {end}")),
    ]));
    out
}

/// `range` with as much of `field` as `width` holds, cut with `…`; the range alone when not
/// even one character of the name fits.
fn fit_field(range: Range, field: Option<&str>, width: usize) -> String {
    let plain = range.to_string();
    let Some(field) = field else {
        return plain;
    };
    let full = range.with_field(Some(field));
    if full.chars().count() <= width {
        return full;
    }
    // The range, a space, at least one character of the name and the ellipsis.
    let keep = width.saturating_sub(plain.len() + 2);
    if keep == 0 {
        return plain;
    }
    let cut: String = field.chars().take(keep).collect();
    format!("{plain} {cut}…")
}

/// What the samples of a step say, short enough for its line: `4 samples, 3 misses` with a
/// hardware sampler, `4 samples` with the software one, `-` when none matched.
fn step_samples(sampled: Option<&SampleMatch>) -> String {
    sampled.map_or_else(
        || "-".to_owned(),
        |s| match s.misses {
            Some(m) => format!("{} samples, {m} misses", s.samples),
            None => format!("{} samples", s.samples),
        },
    )
}

#[cfg(test)]
mod tests {
    use dprof_model::histories::{MergedPath, MergedStep, SampleMatch, Span as Range};
    use dprof_model::AccessKind;
    use ratatui::text::Line;

    use super::merged_path_lines;

    fn text(line: &Line<'_>) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    /// A merged step's line: its CPU label and its samples, the field name cut to the width.
    #[test]
    fn a_merged_step_shows_its_cpu_label_and_samples_within_the_width() {
        let step = MergedStep {
            function: "f".to_owned(),
            function_offset: 4,
            ip: 0xffff_ffff_8100_0004,
            instruction_found: true,
            chunk: Range {
                offset: 0x10,
                len: 8,
            },
            field: Some("payload".to_owned()),
            kind: Some(AccessKind::Write),
            cpu: 1,
            cpu_change: true,
            mean_since_alloc_ns: 100,
            sampled: Some(SampleMatch {
                samples: 4,
                hw_samples: 4,
                misses: Some(1),
                miss_rate: Some(0.25),
                mean_latency_cycles: None,
                sources: Vec::new(),
            }),
        };
        let path = MergedPath {
            sets: 1,
            share: 1.0,
            alloc_function: "a".to_owned(),
            end: "g".to_owned(),
            end_cpu: 1,
            end_cpu_change: false,
            steps: vec![step],
        };
        let lines: Vec<String> = merged_path_lines(&path, 66).iter().map(text).collect();
        assert_eq!(
            lines,
            vec![
                "cpu      100 ns f+0x4  +0x10/8 pa… write cpu 1 4 samples, 1 misses".to_owned(),
                "                freed by g on cpu 1".to_owned(),
            ]
        );
    }
}
