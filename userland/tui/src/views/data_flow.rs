//! The data flow of one type: its functions from alloc to free in layers, the selected
//! function's steps in and out, the path traces, the hits' cross-check and how fast new paths
//! stopped appearing.
//!
//! Wide, the graph is drawn as boxes, layer under layer, with the steps out of each function
//! under its box; the side panel holds the rest. Narrow (or when the boxes do not fit), the
//! graph is a list of layers, and the rest sits under it in short form. A type watched over
//! its whole object adds its merged paths' convergence and the most frequent one
//! ([`whole_object`]).

use dprof_model::histories::{
    Convergence, DataFlow, FlowEdge, FlowNode, FlowRange, FlowRole, HistoryReport, PathTrace,
    TypeHistories,
};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Padding, Paragraph, Widget};

use super::absence;
use super::history_steps;
use super::style::{ACCENT, CPU_CHANGE, DIM, HEADING, SELECTED, WARN};
use super::whole_object;
use super::wrap::{wrap, wrap_at_most};
use crate::app::{App, FlowLayout, FlowSubject, View};

/// From this width the graph and the side panel sit side by side.
const WIDE: u16 = 120;
/// Rows of a node's box: its borders and two lines.
const BOX_HEIGHT: u16 = 4;
/// The narrowest box worth drawing; below it the graph is a list.
const MIN_BOX_WIDTH: u16 = 16;
/// Widest a box gets (long names are cut, the details panel has them whole).
const MAX_BOX_WIDTH: u16 = 34;
/// The CLI's hint of how many histories find the common paths (paper section 4.4).
const CONVERGENCE_HINT: &str = "about 30-100 histories find the common paths";

pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    if app.absence(View::DataFlow).is_some() {
        absence::render(app, area, buf);
        return;
    }
    match app.data_flow_subject() {
        Some(FlowSubject::Type { histories, picked }) => {
            render_type(app, histories, picked, area, buf);
        }
        Some(FlowSubject::NoHistories { name, others }) => {
            render_no_histories(name, others, area, buf);
        }
        None => {
            let inner = frame(" Data flow ", area, buf);
            Paragraph::new(Line::styled(
                "the profile's histories name no type: no data flow",
                WARN,
            ))
            .render(inner, buf);
        }
    }
}

/// The view's border titled `title`; returns the room inside.
fn frame(title: &str, area: Rect, buf: &mut Buffer) -> Rect {
    let block = Block::bordered()
        .title(title.to_owned())
        .border_style(DIM)
        .padding(Padding::horizontal(1));
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

/// The type selected has no history: say so and name the types that have.
fn render_no_histories(name: &str, all: &HistoryReport, area: Rect, buf: &mut Buffer) {
    let inner = frame(&format!(" Data flow · {name} "), area, buf);
    let width = usize::from(inner.width);
    let mut lines = vec![
        Line::styled(format!("no histories of {name}"), WARN.patch(HEADING)),
        Line::raw(""),
    ];
    lines.extend(
        wrap(
            "histories were collected for other types; select one in the Data profile (1) to \
             see its data flow:",
            width,
        )
        .into_iter()
        .map(Line::from),
    );
    for t in &all.types {
        lines.push(Line::from(vec![
            Span::raw("  "),
            Span::styled(t.name.clone(), ACCENT),
            Span::styled(
                format!("  {} histories, {} alloc to free", t.histories, t.complete),
                DIM,
            ),
        ]));
    }
    Paragraph::new(lines).render(inner, buf);
}

fn render_type(app: &App, t: &TypeHistories, picked: bool, area: Rect, buf: &mut Buffer) {
    let inner = frame(&format!(" Data flow · {} ", t.name), area, buf);
    if inner.width >= WIDE {
        let [graph_area, side] =
            Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)])
                .spacing(2)
                .areas(inner);
        render_graph(app, t, graph_area, true, buf);
        render_side(app, t, picked, side, buf);
    } else {
        render_narrow(app, t, picked, inner, buf);
    }
}

/// The graph, or why there is none; boxes when `boxes` and they fit, else a list of layers.
fn render_graph(app: &App, t: &TypeHistories, area: Rect, boxes: bool, buf: &mut Buffer) {
    let flow = &t.data_flow;
    if flow.nodes.is_empty() {
        // A report saved by an older dprof has no reason: the same sentence without counts.
        let text = flow.why_empty.as_ref().map_or_else(
            || {
                format!(
                    "no history of {} ran from allocation to free: no data flow (collect \
                     longer, or with a longer --history-timeout)",
                    t.name
                )
            },
            |empty| empty.message.clone(),
        );
        let lines: Vec<Line> = wrap(&text, usize::from(area.width))
            .into_iter()
            .map(|l| Line::styled(l, WARN))
            .collect();
        Paragraph::new(lines).render(area, buf);
        return;
    }
    let heading = if boxes {
        format!(
            " Functions from alloc to free, {} histories · ",
            flow.histories
        )
    } else {
        " Alloc to free · ".to_owned()
    };
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(DIM)
        .title(Line::from(vec![
            Span::raw(heading),
            Span::raw("↓ same CPU · "),
            Span::styled("⇓ cpu", CPU_CHANGE),
            Span::raw(": to another CPU "),
        ]));
    let inner = block.inner(area);
    block.render(area, buf);
    let state = app.data_flow();
    let selected = state.selected_node();
    if !(boxes && draw_boxes(flow, state.layout(), selected, inner, buf)) {
        draw_layers(app, flow, inner, buf);
    }
}

/// The step out of a node as one line: `↓ 3 st_producer`, `⇓ 2 st_consumer (cpu 2)`; `↑`
/// marks a step back to a function of an earlier layer.
fn edge_line(edge: &FlowEdge, back: bool) -> Line<'static> {
    let arrow = match (back, edge.cpu_changes > 0) {
        (true, _) => "↑",
        (false, true) => "⇓",
        (false, false) => "↓",
    };
    let text = format!("{arrow} {} {}", edge.transitions, edge.to);
    if edge.cpu_changes > 0 {
        Line::from(vec![
            Span::styled(text, CPU_CHANGE),
            Span::styled(format!(" (cpu {})", edge.cpu_changes), CPU_CHANGE),
        ])
    } else {
        Line::raw(text)
    }
}

/// The steps out of `node`, and whether each goes back up.
fn out_edges<'f>(
    flow: &'f DataFlow,
    layout: &FlowLayout,
    node: usize,
) -> Vec<(&'f FlowEdge, bool)> {
    let Some(from) = flow.nodes.get(node) else {
        return Vec::new();
    };
    let layer = layout.layer_of(node);
    flow.edges
        .iter()
        .filter(|e| e.from == from.function)
        .map(|e| {
            let to_layer = flow
                .nodes
                .iter()
                .position(|n| n.function == e.to)
                .and_then(|i| layout.layer_of(i));
            (e, to_layer <= layer)
        })
        .collect()
}

/// `alloc`, `free`, or nothing.
const fn role_name(role: FlowRole) -> &'static str {
    match role {
        FlowRole::Alloc => "alloc",
        FlowRole::Free => "free",
        FlowRole::AllocAndFree => "alloc+free",
        FlowRole::Access => "",
    }
}

/// `R 3 W 3 RW 0`, with `? n` for hits of unknown kind.
fn accesses_short(node: &FlowNode) -> String {
    let unknown = if node.unknown_kind > 0 {
        format!(" ? {}", node.unknown_kind)
    } else {
        String::new()
    };
    format!(
        "R {} W {} RW {}{unknown}",
        node.reads, node.writes, node.read_writes
    )
}

/// What sampling saw of the node: `5 misses`, `1 samples`, `no samples`.
fn cost(node: &FlowNode) -> String {
    node.sampled.as_ref().map_or_else(
        || "no samples".to_owned(),
        |s| match s.misses {
            Some(m) => format!("{m} misses"),
            None => format!("{} samples", s.samples),
        },
    )
}

/// A box's second line: `3 hist · 1 samples`.
fn box_cost_line(node: &FlowNode) -> String {
    format!("{} hist · {}", node.histories, cost(node))
}

/// Draws the layers as rows of boxes; `false` (drawing nothing) when they do not fit.
fn draw_boxes(
    flow: &DataFlow,
    layout: &FlowLayout,
    selected: Option<usize>,
    area: Rect,
    buf: &mut Buffer,
) -> bool {
    let layers = layout.layers();
    // Rows of steps under each layer: the most any of its nodes has.
    let edge_rows: Vec<u16> = layers
        .iter()
        .map(|nodes| {
            nodes
                .iter()
                .map(|&i| out_edges(flow, layout, i).len() as u16)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let height: u16 = edge_rows.iter().map(|r| BOX_HEIGHT + r).sum();
    let widest = layers.iter().map(Vec::len).max().unwrap_or(1).max(1) as u16;
    if height > area.height || area.width / widest < MIN_BOX_WIDTH + 1 {
        return false;
    }
    // One width for every box, so that the layers line up.
    let want = flow
        .nodes
        .iter()
        .map(|node| {
            let line2 = box_cost_line(node).chars().count();
            [
                node.function.chars().count() + 4,
                accesses_short(node).len() + 2,
                line2 + 2,
            ]
            .into_iter()
            .max()
            .unwrap_or(0)
        })
        .max()
        .unwrap_or(0) as u16;
    let mut y = area.y;
    for (nodes, &rows) in layers.iter().zip(&edge_rows) {
        let slot = area.width / nodes.len().max(1) as u16;
        for (k, &i) in nodes.iter().enumerate() {
            let Some(node) = flow.nodes.get(i) else {
                continue;
            };
            let slot_x = area.x + slot * k as u16;
            let line1 = accesses_short(node);
            let line2 = box_cost_line(node);
            let width = want.clamp(MIN_BOX_WIDTH, MAX_BOX_WIDTH).min(slot - 1);
            let x = slot_x + (slot - width) / 2;
            let is_selected = selected == Some(i);
            let (border, title) = if is_selected {
                (ACCENT.add_modifier(Modifier::BOLD), SELECTED.patch(HEADING))
            } else {
                (Style::new(), HEADING)
            };
            let mut block = Block::bordered()
                .border_style(border)
                .title(Span::styled(format!(" {} ", node.function), title));
            let role = role_name(node.role);
            if !role.is_empty() {
                block = block.title_bottom(Line::styled(format!(" {role} "), DIM).right_aligned());
            }
            let rect = Rect::new(x, y, width, BOX_HEIGHT);
            let inner = block.inner(rect);
            block.render(rect, buf);
            Paragraph::new(vec![Line::raw(line1), Line::styled(line2, DIM)]).render(inner, buf);
            // Steps out, from the middle of the box to the end of its slot.
            let edge_x = x + width / 2;
            let room = slot_x + slot - edge_x;
            for (row, (edge, back)) in out_edges(flow, layout, i).into_iter().enumerate() {
                let line = edge_line(edge, back);
                buf.set_line(edge_x, y + BOX_HEIGHT + row as u16, &line, room);
            }
        }
        y += BOX_HEIGHT + rows;
    }
    true
}

/// The layers as a list: one line per function, its steps out under it.
fn draw_layers(app: &App, flow: &DataFlow, area: Rect, buf: &mut Buffer) {
    let state = app.data_flow();
    let layout = state.layout();
    let selected = state.selected_node();
    let name_width = flow
        .nodes
        .iter()
        .map(|n| n.function.chars().count())
        .max()
        .unwrap_or(0)
        .min(28);
    let mut lines: Vec<Line> = Vec::new();
    // The selected node's first and last line, to keep them in sight.
    let mut selected_lines = (0, 0);
    for (l, nodes) in layout.layers().iter().enumerate() {
        for (k, &i) in nodes.iter().enumerate() {
            let Some(node) = flow.nodes.get(i) else {
                continue;
            };
            let layer = if k == 0 {
                format!("{:>2} ", l + 1)
            } else {
                "   ".to_owned()
            };
            let is_selected = selected == Some(i);
            let start = lines.len();
            let mut node_line = Line::from(vec![
                Span::styled(layer, DIM),
                Span::styled(
                    format!("{:<name_width$}", node.function),
                    if is_selected { HEADING } else { Style::new() },
                ),
                Span::styled(format!(" {:<5}", role_name(node.role)), DIM),
                Span::raw(format!(" {}", accesses_short(node))),
                Span::styled(format!(" · {}", cost(node)), DIM),
            ]);
            if is_selected {
                node_line = node_line.style(SELECTED);
            }
            lines.push(node_line);
            for (edge, back) in out_edges(flow, layout, i) {
                let mut line = edge_line(edge, back);
                line.spans.insert(0, Span::raw("      "));
                lines.push(line);
            }
            if is_selected {
                selected_lines = (start, lines.len() - 1);
            }
        }
    }
    let height = usize::from(area.height).max(1);
    let list = state.list();
    let mut first = list.scroll();
    if selected_lines.0 < first {
        first = selected_lines.0;
    } else if selected_lines.1 >= first + height {
        // The node and its steps, or at least the node when they do not all fit.
        first = (selected_lines.1 + 1 - height).min(selected_lines.0);
    }
    first = first.min(lines.len().saturating_sub(height));
    list.set_scroll(first);
    Paragraph::new(lines)
        .scroll((u16::try_from(first).unwrap_or(u16::MAX), 0))
        .render(area, buf);
}

/// `4 histories (3 alloc to free, with 2 CPU changes; 1 timed out) · 19 hits`: the CPU
/// changes are the data flow's, of the histories from alloc to free.
fn counts_text(t: &TypeHistories) -> String {
    let e = &t.end_reasons;
    let mut ends = vec![if t.complete > 0 {
        format!(
            "{} alloc to free, with {} CPU changes",
            t.complete, t.data_flow.cpu_changes
        )
    } else {
        "0 alloc to free".to_owned()
    }];
    for (n, what) in [
        (e.timeout, "timed out"),
        (e.stopped, "stopped with collection"),
        (e.unfinished, "with no end record"),
    ] {
        if n > 0 {
            ends.push(format!("{n} {what}"));
        }
    }
    format!(
        "{} histories ({}) · {} hits",
        t.histories,
        ends.join("; "),
        t.hits
    )
}

/// Whether new paths stopped appearing, in a sentence.
fn convergence_text(c: &Convergence) -> String {
    if c.histories == 0 {
        "no complete history: no paths".to_owned()
    } else if c.last_new_path_at < c.histories {
        format!(
            "{} paths: new paths stopped appearing after {} histories ({} seen; {CONVERGENCE_HINT})",
            c.paths, c.last_new_path_at, c.histories
        )
    } else {
        format!(
            "{} paths in {} histories, the last new one at history {}: not converged yet \
             ({CONVERGENCE_HINT})",
            c.paths, c.histories, c.last_new_path_at
        )
    }
}

/// `no type selected: ...` when the type was picked for the person.
fn picked_line(t: &TypeHistories, picked: bool) -> Option<String> {
    picked.then(|| {
        format!(
            "no type selected: showing {}, the type with the most histories ({})",
            t.name, t.histories
        )
    })
}

/// The selected node: histories, accesses, steps in and out, and what Enter opens.
fn node_lines(app: &App, t: &TypeHistories, width: usize, full: bool) -> Vec<Line<'static>> {
    let Some((_, node)) = app.selected_flow_node() else {
        return Vec::new();
    };
    let flow = &t.data_flow;
    let role = role_name(node.role);
    let mut heading = vec![Span::styled(node.function.clone(), HEADING)];
    if !role.is_empty() {
        heading.push(Span::styled(format!(" [{role}]"), DIM));
    }
    heading.push(Span::raw(format!(
        " · in {} of {} histories",
        node.histories, flow.histories
    )));
    let mut lines = vec![Line::from(heading)];
    let mut accesses = vec![format!(
        "reads {}, writes {}, read-writes {}",
        node.reads, node.writes, node.read_writes
    )];
    if node.unknown_kind > 0 {
        accesses.push(format!("unknown {}", node.unknown_kind));
    }
    let accesses = accesses.join(", ");
    let accesses = match &node.sampled {
        Some(s) => match (s.misses, s.mean_latency_cycles) {
            (Some(m), Some(l)) => {
                format!(
                    "{accesses} · {} samples, {m} misses, {l:.0} cycles",
                    s.samples
                )
            }
            (Some(m), None) => format!("{accesses} · {} samples, {m} misses", s.samples),
            _ => format!("{accesses} · {} samples", s.samples),
        },
        None => accesses,
    };
    if full {
        lines.extend(
            wrap_at_most(&accesses, width, 2)
                .into_iter()
                .map(Line::from),
        );
        lines.extend(fields_lines(node, width));
    }
    let steps = |label: &str, edges: Vec<&FlowEdge>, end: &str, other: fn(&FlowEdge) -> &str| {
        let mut spans = vec![Span::styled(format!("{label} "), DIM)];
        if edges.is_empty() {
            spans.push(Span::styled(end.to_owned(), DIM));
        }
        for (k, e) in edges.into_iter().enumerate() {
            if k > 0 {
                spans.push(Span::raw(", "));
            }
            let text = format!("{} {}", other(e), e.transitions);
            if e.cpu_changes > 0 {
                spans.push(Span::styled(
                    format!("{text} (cpu {})", e.cpu_changes),
                    CPU_CHANGE,
                ));
            } else {
                spans.push(Span::raw(text));
            }
        }
        Line::from(spans)
    };
    let incoming = flow
        .edges
        .iter()
        .filter(|e| e.to == node.function)
        .collect();
    lines.push(steps("from", incoming, "the allocation", |e| &e.from));
    if full {
        let outgoing = flow
            .edges
            .iter()
            .filter(|e| e.from == node.function)
            .collect();
        lines.push(steps("to  ", outgoing, "the free", |e| &e.to));
    }
    lines.push(match app.sampled_function(&t.name, &node.function) {
        Some(f) => Line::from(vec![
            Span::styled("Enter", ACCENT),
            Span::raw(format!(
                ": its {} sampled accesses in the Type view",
                f.samples
            )),
        ]),
        None => Line::styled(
            format!("no sample of {} in this function: nothing to open", t.name),
            DIM,
        ),
    });
    lines
}

/// `fields +0x10/8 next (W 2), +0x18/4 len (R 3)`: the ranges a node touched, on at most two
/// lines; none when it touched none (the alloc and free ends of some paths).
fn fields_lines(node: &FlowNode, width: usize) -> Vec<Line<'static>> {
    if node.ranges.is_empty() {
        return Vec::new();
    }
    let ranges: Vec<String> = node.ranges.iter().map(FlowRange::summary).collect();
    wrap_at_most(&format!("fields {}", ranges.join(", ")), width, 2)
        .into_iter()
        .map(Line::from)
        .collect()
}

/// The functions of a path, consecutive accesses in one function on one CPU merged, each
/// with whether the object had moved to another CPU on the way to it.
fn path_functions(path: &PathTrace) -> Vec<(&str, bool)> {
    let mut out: Vec<(&str, bool)> = vec![(&path.alloc_function, false)];
    let steps = path
        .elements
        .iter()
        .map(|e| (e.function.as_str(), e.cpu_change))
        .chain([(path.end.as_str(), path.end_cpu_change)]);
    for (function, cpu_change) in steps {
        if cpu_change || out.last().is_none_or(|&(last, _)| last != function) {
            out.push((function, cpu_change));
        }
    }
    out
}

/// A path on one line: `2 66.7%  st_alloc → st_producer ⇒cpu st_consumer → st_free`.
fn path_line(path: &PathTrace) -> Line<'static> {
    let mut spans = vec![Span::styled(
        format!("{:>3} {:>5.1}%  ", path.histories, path.share * 100.0),
        DIM,
    )];
    for (k, (function, cpu_change)) in path_functions(path).into_iter().enumerate() {
        if k > 0 {
            if cpu_change {
                spans.push(Span::styled(" ⇒cpu ", CPU_CHANGE));
            } else {
                spans.push(Span::styled(" → ", DIM));
            }
        }
        spans.push(Span::raw(function.to_owned()));
    }
    Line::from(spans)
}

/// A path with its accesses, one per line, as `dprof report --view data-flow` lists them,
/// each line within `width`.
fn path_lines(n: usize, path: &PathTrace, width: usize) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("Path {n}"), HEADING),
        Span::raw(format!(
            " · {} histories ({:.1}%) · {} to {}",
            path.histories,
            path.share * 100.0,
            path.alloc_function,
            path.end
        )),
    ])];
    lines.extend(history_steps::path_trace_lines(path, width));
    lines
}

/// A section title over `area`'s first row; returns the rows under it.
fn section(title: Line<'_>, area: Rect, buf: &mut Buffer) -> Rect {
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(DIM)
        .title(title);
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

/// Wide: summary, the selected node, then the paths with their accesses.
fn render_side(app: &App, t: &TypeHistories, picked: bool, area: Rect, buf: &mut Buffer) {
    let width = usize::from(area.width);
    let mut summary: Vec<Line> = Vec::new();
    if let Some(note) = picked_line(t, picked) {
        summary.extend(
            wrap(&note, width)
                .into_iter()
                .map(|l| Line::styled(l, WARN)),
        );
    }
    summary.extend(wrap(&counts_text(t), width).into_iter().map(Line::from));
    summary.extend(
        wrap(&format!("hits: {}", t.checks), width)
            .into_iter()
            .map(Line::from),
    );
    if t.dropped_hits > 0 || t.late_hits > 0 {
        let text = format!(
            "not seen: {} hits dropped by the module, {} timed after their history's end",
            t.dropped_hits, t.late_hits
        );
        summary.extend(wrap(&text, width).into_iter().map(|l| Line::styled(l, DIM)));
    }
    summary.extend(
        wrap(&convergence_text(&t.convergence), width)
            .into_iter()
            .map(Line::from),
    );
    let node = node_lines(app, t, width, true);
    let node_height = if node.is_empty() {
        0
    } else {
        node.len() as u16 + 1
    };
    let whole = t
        .full
        .as_ref()
        .map(|f| whole_object::lines(f, width))
        .unwrap_or_default();
    let whole_height = if whole.is_empty() {
        0
    } else {
        whole.len() as u16 + 1
    };
    let [summary_area, node_area, whole_area, paths_area] = Layout::vertical([
        Constraint::Length(summary.len() as u16 + 1),
        Constraint::Length(node_height),
        Constraint::Length(whole_height),
        Constraint::Fill(1),
    ])
    .areas(area);
    let inner = section(Line::raw(" Histories "), summary_area, buf);
    Paragraph::new(summary).render(inner, buf);
    if !node.is_empty() {
        let inner = section(Line::raw(" Selected function "), node_area, buf);
        Paragraph::new(node).render(inner, buf);
    }
    if !whole.is_empty() {
        let inner = section(
            Line::raw(" Whole object: pairwise histories merged "),
            whole_area,
            buf,
        );
        Paragraph::new(whole).render(inner, buf);
    }
    let inner = section(
        Line::raw(format!(" Paths, most frequent first ({}) ", t.paths.len())),
        paths_area,
        buf,
    );
    let mut lines: Vec<Line> = Vec::new();
    let mut shown = 0;
    for (n, path) in t.paths.iter().enumerate() {
        let one = path_lines(n + 1, path, usize::from(inner.width));
        // Keep a row for the "more paths" line when some would be left out.
        let reserve = usize::from(n + 1 < t.paths.len());
        if lines.len() + one.len() + reserve > usize::from(inner.height) {
            break;
        }
        lines.extend(one);
        lines.push(Line::raw(""));
        shown += 1;
    }
    if shown < t.paths.len() {
        lines.push(Line::styled(
            format!("… {} more paths", t.paths.len() - shown),
            DIM,
        ));
    }
    Paragraph::new(lines).render(inner, buf);
}

/// Narrow: summary lines, the graph as a list of layers, the selected node, paths on one
/// line each.
fn render_narrow(app: &App, t: &TypeHistories, picked: bool, area: Rect, buf: &mut Buffer) {
    let width = usize::from(area.width);
    let mut summary: Vec<Line> = Vec::new();
    if let Some(note) = picked_line(t, picked) {
        summary.extend(
            wrap_at_most(&note, width, 2)
                .into_iter()
                .map(|l| Line::styled(l, WARN)),
        );
    }
    summary.extend(
        wrap_at_most(&counts_text(t), width, 2)
            .into_iter()
            .map(Line::from),
    );
    let checks = &t.checks;
    let checks = format!(
        "hits: {} verified, {} mismatched, {} unverifiable, {} no code",
        checks.verified,
        checks.mismatched,
        checks.unverifiable(),
        checks.no_code()
    );
    summary.extend(wrap_at_most(&checks, width, 2).into_iter().map(Line::from));
    if let Some(f) = &t.full {
        summary.extend(whole_object::short_lines(f, width));
    }
    let node = node_lines(app, t, width, false);
    let node_height = if node.is_empty() {
        0
    } else {
        node.len() as u16 + 1
    };
    let paths_shown = t.paths.len().min(3) as u16;
    let paths_height = if t.paths.is_empty() {
        0
    } else {
        paths_shown + 1
    };
    let [summary_area, graph_area, node_area, paths_area] = Layout::vertical([
        Constraint::Length(summary.len() as u16),
        Constraint::Min(3),
        Constraint::Length(node_height),
        Constraint::Length(paths_height),
    ])
    .areas(area);
    Paragraph::new(summary).render(summary_area, buf);
    render_graph(app, t, graph_area, false, buf);
    if !node.is_empty() {
        let inner = section(Line::raw(" Selected function "), node_area, buf);
        Paragraph::new(node).render(inner, buf);
    }
    if !t.paths.is_empty() {
        let c = &t.convergence;
        let title = if c.last_new_path_at < c.histories {
            format!(
                " Paths: {} in {} histories, none new after {} ",
                c.paths, c.histories, c.last_new_path_at
            )
        } else {
            format!(
                " Paths: {} in {} histories, the last new at {}: not converged ",
                c.paths, c.histories, c.last_new_path_at
            )
        };
        let inner = section(Line::raw(title), paths_area, buf);
        let lines: Vec<Line> = t.paths.iter().take(3).map(path_line).collect();
        Paragraph::new(lines).render(inner, buf);
    }
}
