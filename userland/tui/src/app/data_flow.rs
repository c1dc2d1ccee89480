//! The data flow view's state: which type's graph is shown, its layers, and the selected node.

use dprof_model::histories::{DataFlow, FlowNode, FlowRole, HistoryReport, TypeHistories};
use ratatui::crossterm::event::KeyEvent;

use super::list::{ListState, Nav};
use crate::event::EventState;

/// What the data flow view shows.
#[derive(Clone, Copy, Debug)]
pub enum FlowSubject<'r> {
    /// The histories of a type.
    Type {
        /// Its histories, paths and graph.
        histories: &'r TypeHistories,
        /// No type was selected: this is the type with the most histories.
        picked: bool,
    },
    /// The type selected has no history; `others` lists the types that have.
    NoHistories {
        /// The type selected.
        name: &'r str,
        /// Every type with histories, most first.
        others: &'r HistoryReport,
    },
}

impl<'r> FlowSubject<'r> {
    /// The subject for the type selected in the data profile (`selected`), from `histories`.
    /// `None` when the histories have no type at all.
    pub(crate) fn of(histories: &'r HistoryReport, selected: Option<&'r str>) -> Option<Self> {
        match selected {
            Some(name) => Some(histories.find_type(name).map_or(
                Self::NoHistories {
                    name,
                    others: histories,
                },
                |t| Self::Type {
                    histories: t,
                    picked: false,
                },
            )),
            None => histories.types.first().map(|t| Self::Type {
                histories: t,
                picked: true,
            }),
        }
    }

    /// The type's histories, when it has any.
    #[must_use]
    pub const fn histories(self) -> Option<&'r TypeHistories> {
        match self {
            Self::Type { histories, .. } => Some(histories),
            Self::NoHistories { .. } => None,
        }
    }
}

/// The graph's nodes in layers, alloc at the top and free at the bottom.
///
/// Layers come from the longest path from the alloc nodes, over the edges that go forward in
/// the graph's node order (the order [`DataFlow`] gives: by mean position along the
/// histories); an edge going back (a function touched again later) does not push its target
/// down, so cycles cannot make the layering endless. Free nodes that no step leaves sit
/// together on a last layer of their own; one that hands objects on to another function is
/// laid out like any other, so that its steps out go down.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowLayout {
    /// Per layer, top to bottom, node indices into [`DataFlow::nodes`] in node order.
    layers: Vec<Vec<usize>>,
    /// The layer of each node.
    layer_of: Vec<usize>,
    /// Node indices in the order the selection moves through them: layer by layer.
    order: Vec<usize>,
}

impl FlowLayout {
    /// The layering of `flow`.
    #[must_use]
    pub fn of(flow: &DataFlow) -> Self {
        let n = flow.nodes.len();
        let index = |f: &str| flow.nodes.iter().position(|node| node.function == f);
        let mut layer_of = vec![0usize; n];
        // Nodes are in node order, so one pass in that order sees every forward edge's source
        // settled before its target.
        for to in 0..n {
            if is_top(&flow.nodes[to]) {
                continue;
            }
            let from_layers = flow
                .edges
                .iter()
                .filter(|e| e.to == flow.nodes[to].function)
                .filter_map(|e| index(&e.from))
                .filter(|&from| from < to)
                .map(|from| layer_of[from] + 1);
            layer_of[to] = from_layers.max().unwrap_or(1);
        }
        let last = |node: &FlowNode| {
            node.role == FlowRole::Free
                && !flow
                    .edges
                    .iter()
                    .any(|e| e.from == node.function && e.to != node.function)
        };
        let last_access = flow
            .nodes
            .iter()
            .zip(&layer_of)
            .filter(|(node, _)| !last(node))
            .map(|(_, &layer)| layer)
            .max()
            .unwrap_or(0);
        for (node, layer) in flow.nodes.iter().zip(layer_of.iter_mut()) {
            if last(node) {
                *layer = last_access + 1;
            }
        }
        let depth = layer_of.iter().max().map_or(0, |&l| l + 1);
        let mut layers = vec![Vec::new(); depth];
        for (i, &layer) in layer_of.iter().enumerate() {
            layers[layer].push(i);
        }
        // Layers no node fell on (a graph with no access between alloc and free) are dropped.
        layers.retain(|l: &Vec<usize>| !l.is_empty());
        for (l, nodes) in layers.iter().enumerate() {
            for &i in nodes {
                layer_of[i] = l;
            }
        }
        let order = layers.iter().flatten().copied().collect();
        Self {
            layers,
            layer_of,
            order,
        }
    }

    /// Per layer, top to bottom, node indices in node order.
    #[must_use]
    pub fn layers(&self) -> &[Vec<usize>] {
        &self.layers
    }

    /// The layer of node `node`.
    #[must_use]
    pub fn layer_of(&self, node: usize) -> Option<usize> {
        self.layer_of.get(node).copied()
    }

    /// Node indices in the order the selection moves through them.
    #[must_use]
    pub fn order(&self) -> &[usize] {
        &self.order
    }
}

/// Whether a node belongs on the first layer.
fn is_top(node: &FlowNode) -> bool {
    matches!(node.role, FlowRole::Alloc | FlowRole::AllocAndFree)
}

/// The data flow view's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataFlowState {
    /// The type whose graph is laid out.
    type_name: Option<String>,
    layout: FlowLayout,
    /// The selection among [`FlowLayout::order`].
    list: ListState,
}

impl DataFlowState {
    /// Shows the graph of `t`; the same type keeps its selection, another starts at alloc.
    pub(crate) fn show(&mut self, t: Option<&TypeHistories>) {
        let name = t.map(|t| t.name.as_str());
        if name == self.type_name.as_deref() {
            return;
        }
        self.type_name = name.map(str::to_owned);
        self.layout = t.map_or_else(FlowLayout::default, |t| FlowLayout::of(&t.data_flow));
        self.list.reset();
    }

    /// Selects the node of `function`, when the graph has one.
    pub(crate) fn focus(&mut self, flow: &DataFlow, function: &str) {
        let found = self
            .layout
            .order
            .iter()
            .position(|&i| flow.nodes.get(i).is_some_and(|n| n.function == function));
        if let Some(row) = found {
            self.list.select(row, self.layout.order.len());
        }
    }

    /// The layering of the graph shown.
    #[must_use]
    pub const fn layout(&self) -> &FlowLayout {
        &self.layout
    }

    /// The selection among the nodes, in [`FlowLayout::order`].
    #[must_use]
    pub const fn list(&self) -> &ListState {
        &self.list
    }

    /// The selected node: an index into [`DataFlow::nodes`].
    #[must_use]
    pub fn selected_node(&self) -> Option<usize> {
        self.layout.order.get(self.list.selected()).copied()
    }

    /// Moves between nodes.
    pub(crate) fn handle_key(&mut self, key: KeyEvent) -> EventState {
        match Nav::of(&key) {
            Some(nav) => {
                self.list.apply(nav, self.layout.order.len());
                EventState::Consumed
            }
            None => EventState::NotConsumed,
        }
    }
}

#[cfg(test)]
mod tests {
    use dprof_model::histories::{FlowEdge, FlowNode};

    use super::*;

    fn node(function: &str, role: FlowRole) -> FlowNode {
        FlowNode {
            function: function.to_owned(),
            role,
            histories: 1,
            reads: 0,
            writes: 0,
            read_writes: 0,
            unknown_kind: 0,
            ranges: Vec::new(),
            sampled: None,
        }
    }

    fn edge(from: &str, to: &str) -> FlowEdge {
        FlowEdge {
            from: from.to_owned(),
            to: to.to_owned(),
            transitions: 1,
            histories: 1,
            cpu_changes: 0,
        }
    }

    #[test]
    fn layers_follow_the_longest_path_with_free_last() {
        // alloc -> a -> b -> free, alloc -> b, b -> a (back), alloc -> c -> free.
        let flow = DataFlow {
            type_name: "t".to_owned(),
            histories: 2,
            cpu_changes: 0,
            why_empty: None,
            nodes: vec![
                node("alloc", FlowRole::Alloc),
                node("a", FlowRole::Access),
                node("c", FlowRole::Access),
                node("b", FlowRole::Access),
                node("free", FlowRole::Free),
            ],
            edges: vec![
                edge("alloc", "a"),
                edge("alloc", "b"),
                edge("alloc", "c"),
                edge("a", "b"),
                edge("b", "a"),
                edge("c", "free"),
                edge("b", "free"),
            ],
        };
        let layout = FlowLayout::of(&flow);
        assert_eq!(layout.layers(), [vec![0], vec![1, 2], vec![3], vec![4]]);
        assert_eq!(layout.order(), [0, 1, 2, 3, 4]);
        assert_eq!(layout.layer_of(3), Some(2));
    }

    /// `hand_on` frees some objects and hands others on to `free`: laid out by its steps,
    /// above `free`, rather than on the last layer with it.
    #[test]
    fn a_free_node_a_step_leaves_is_not_on_the_last_layer() {
        let flow = DataFlow {
            type_name: "t".to_owned(),
            histories: 2,
            cpu_changes: 0,
            why_empty: None,
            nodes: vec![
                node("alloc", FlowRole::Alloc),
                node("a", FlowRole::Access),
                node("hand_on", FlowRole::Free),
                node("free", FlowRole::Free),
            ],
            edges: vec![
                edge("alloc", "a"),
                edge("a", "hand_on"),
                edge("alloc", "hand_on"),
                edge("hand_on", "free"),
            ],
        };
        let layout = FlowLayout::of(&flow);
        assert_eq!(layout.layers(), [vec![0], vec![1], vec![2], vec![3]]);
    }

    #[test]
    fn alloc_straight_to_free_leaves_no_empty_layer() {
        let flow = DataFlow {
            type_name: "t".to_owned(),
            histories: 1,
            cpu_changes: 0,
            why_empty: None,
            nodes: vec![node("alloc", FlowRole::Alloc), node("free", FlowRole::Free)],
            edges: vec![edge("alloc", "free")],
        };
        assert_eq!(FlowLayout::of(&flow).layers(), [vec![0], vec![1]]);
    }
}
