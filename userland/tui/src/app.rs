//! The browser's state, and how events change it.
//!
//! [`App`] routes a key to the part of the state it concerns: the help overlay, the filter
//! being typed, the view shown (its component handles moves, sorting and panes), and last the
//! keys that work everywhere (views, back, search, help, quit). Each part answers
//! [`EventState`]; the first that consumes a key ends its handling.

mod absence;
mod causal;
mod data_flow;
mod data_profile;
mod list;
mod type_detail;
mod view;
mod view_types;

use dprof_model::{FunctionCount, Report, TypeProfile};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub use absence::Absence;
pub use causal::CausalState;
pub use data_flow::{DataFlowState, FlowLayout, FlowSubject};
pub use data_profile::{field_label, type_label, Column, DataProfileState};
pub use list::{ListState, Nav};
pub use type_detail::{Pane, PaneSort, TypeDetailState};
pub use view::View;
pub use view_types::{view_type_names, ViewTypesState};

use crate::event::{Event, EventState, LoadEvent};

/// What the loader has said so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loading {
    /// What it is doing, when it said.
    pub stage: Option<String>,
    /// Records done and in all, once it counts them.
    pub records: Option<(u64, u64)>,
}

/// How many views Esc/Backspace can go back through.
const BACK_DEPTH: usize = 64;

/// The whole state of the browser.
#[derive(Debug)]
pub struct App {
    source: String,
    report: Option<Report>,
    loading: Loading,
    /// The loader's warnings, then the report's.
    warnings: Vec<String>,
    view: View,
    /// Views to go back to, the last most recent.
    back: Vec<View>,
    data_profile: DataProfileState,
    type_detail: TypeDetailState,
    data_flow: DataFlowState,
    /// The miss classification view's type list.
    misses: ViewTypesState,
    /// The working-set view's type list.
    working_set: ViewTypesState,
    /// Whether the working-set view shows the cache sets by their types rather than the
    /// selected type (`b` toggles).
    working_set_by_set: bool,
    /// The causal view's analysis and ranking selection.
    causal: CausalState,
    /// The function the data flow view was opened at (Enter on a function of a type).
    data_flow_function: Option<String>,
    help: bool,
    quit: bool,
}

impl App {
    /// A browser waiting for its report; `source` names what is loaded (the file).
    #[must_use]
    pub fn new(source: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            report: None,
            loading: Loading::default(),
            warnings: Vec::new(),
            view: View::DataProfile,
            back: Vec::new(),
            data_profile: DataProfileState::default(),
            type_detail: TypeDetailState::default(),
            data_flow: DataFlowState::default(),
            misses: ViewTypesState::default(),
            working_set: ViewTypesState::default(),
            working_set_by_set: false,
            causal: CausalState::default(),
            data_flow_function: None,
            help: false,
            quit: false,
        }
    }

    /// A browser over `report`, as if its loader had just finished.
    #[must_use]
    pub fn with_report(source: impl Into<String>, report: Report) -> Self {
        let mut app = Self::new(source);
        app.handle(Event::Loaded(Box::new(report)));
        app
    }

    /// Applies one event.
    pub fn handle(&mut self, event: Event) -> EventState {
        match event {
            Event::Key(key) => self.handle_key(key),
            Event::Resize => EventState::Consumed,
            Event::Load(LoadEvent::Stage(stage)) => {
                self.loading.stage = Some(stage);
                EventState::Consumed
            }
            Event::Load(LoadEvent::Records { done, total }) => {
                self.loading.records = Some((done, total));
                EventState::Consumed
            }
            Event::Load(LoadEvent::Warning(w)) => {
                self.warnings.push(w);
                EventState::Consumed
            }
            Event::Loaded(report) => {
                self.warnings
                    .extend(report.warnings.iter().map(|w| w.message.clone()));
                self.data_profile.load(&report);
                self.report = Some(*report);
                self.sync_views();
                EventState::Consumed
            }
            Event::LoadFailed => {
                self.quit = true;
                EventState::Consumed
            }
        }
    }

    fn handle_key(&mut self, key: KeyEvent) -> EventState {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return EventState::Consumed;
        }
        if self.help {
            // Any key closes the help: it is what a person tries first.
            self.help = false;
            return EventState::Consumed;
        }
        let Some(report) = &self.report else {
            return self.handle_loading_key(key);
        };
        if self.view == View::DataProfile
            && self.data_profile.is_editing()
            && self
                .data_profile
                .handle_filter_key(key, report)
                .is_consumed()
        {
            return EventState::Consumed;
        }
        if self.handle_view_key(key).is_consumed() {
            return EventState::Consumed;
        }
        self.handle_global_key(key)
    }

    /// While loading: quit and help only.
    fn handle_loading_key(&mut self, key: KeyEvent) -> EventState {
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            _ => return EventState::NotConsumed,
        }
        EventState::Consumed
    }

    /// Keys of the view shown: its component's, then its drill-downs.
    fn handle_view_key(&mut self, key: KeyEvent) -> EventState {
        let Some(report) = &self.report else {
            return EventState::NotConsumed;
        };
        match self.view {
            View::DataProfile => {
                if self.data_profile.handle_key(key, report).is_consumed() {
                    return EventState::Consumed;
                }
                if key.code == KeyCode::Enter && self.data_profile.selected_type().is_some() {
                    self.go(View::TypeDetail);
                    return EventState::Consumed;
                }
            }
            View::TypeDetail => {
                let Some(t) = self
                    .data_profile
                    .selected_type()
                    .and_then(|i| report.data_profile.types.get(i))
                else {
                    return EventState::NotConsumed;
                };
                if self.type_detail.handle_key(key, t).is_consumed() {
                    return EventState::Consumed;
                }
                if key.code == KeyCode::Enter {
                    if let Some(f) = self.type_detail.selected_function(t) {
                        let function = f.function.clone();
                        self.go(View::DataFlow);
                        if let Some(t) = self
                            .report
                            .as_ref()
                            .and_then(|r| flow_subject(r, &self.data_profile))
                            .and_then(FlowSubject::histories)
                        {
                            self.data_flow.focus(&t.data_flow, &function);
                        }
                        self.data_flow_function = Some(function);
                        return EventState::Consumed;
                    }
                }
            }
            View::DataFlow => {
                if self.data_flow.handle_key(key).is_consumed() {
                    return EventState::Consumed;
                }
                if key.code == KeyCode::Enter {
                    return self.open_selected_node();
                }
            }
            View::WorkingSet if key.code == KeyCode::Char('b') => {
                self.working_set_by_set = !self.working_set_by_set;
                return EventState::Consumed;
            }
            View::MissClassification | View::WorkingSet => return self.handle_type_list_key(key),
            View::Causal => return self.handle_causal_key(key),
        }
        EventState::NotConsumed
    }

    /// Keys of the causal view: moves in the ranking and between progress points (the data
    /// profile's selection follows when it has the type), Enter opens the type's Type view.
    fn handle_causal_key(&mut self, key: KeyEvent) -> EventState {
        let Some(causal) = self.report.as_ref().and_then(|r| r.causal.as_ref()) else {
            return EventState::NotConsumed;
        };
        let moved = self.causal.handle_key(key, causal).is_consumed();
        let enter = key.code == KeyCode::Enter;
        if !moved && !enter {
            return EventState::NotConsumed;
        }
        let name = self
            .causal
            .selected_type_index(causal)
            .and_then(|i| causal.types.get(i))
            // A function or module is no data type: the data profile has nothing to select.
            .filter(|t| t.unit == dprof_model::causal::CausalUnit::Type)
            .map(|t| t.name.clone());
        let index = self.report.as_ref().and_then(|r| {
            r.data_profile
                .types
                .iter()
                .position(|t| Some(&t.name) == name.as_ref())
        });
        // A type the data profile lacks (or its filter hides) leaves its selection alone.
        let selected = index.is_some_and(|i| self.data_profile.select_type(i));
        if enter {
            if !selected {
                return EventState::NotConsumed;
            }
            self.go(View::TypeDetail);
        } else if selected {
            // The other views follow; a type the data profile lacks keeps the ranking's
            // selection where the keys put it.
            self.sync_views();
        }
        EventState::Consumed
    }

    /// Keys of the miss classification and working-set views: moves in their type list (the
    /// data profile's selection follows, so every per-type view shows the same type), Enter
    /// opens the type's Type view.
    fn handle_type_list_key(&mut self, key: KeyEvent) -> EventState {
        let Some(report) = &self.report else {
            return EventState::NotConsumed;
        };
        let names = view_type_names(report, self.view);
        let state = match self.view {
            View::MissClassification => &mut self.misses,
            _ => &mut self.working_set,
        };
        let moved = state.handle_key(key, names.len()).is_consumed();
        let enter = key.code == KeyCode::Enter;
        if !moved && !enter {
            return EventState::NotConsumed;
        }
        let index = names.get(state.selected()).and_then(|&name| {
            report
                .data_profile
                .types
                .iter()
                .position(|t| t.name == name)
        });
        // A type the filter hides stays unselected there; the list keeps its own selection.
        let selected = index.is_some_and(|i| self.data_profile.select_type(i));
        if enter {
            if !selected {
                return EventState::NotConsumed;
            }
            self.go(View::TypeDetail);
        } else {
            self.sync_views();
        }
        EventState::Consumed
    }

    /// Enter on a data flow node: the type view, its functions pane on that function. Only
    /// functions with sampled accesses of the type are there; on others Enter does nothing
    /// (the view says so).
    fn open_selected_node(&mut self) -> EventState {
        let Some((type_name, function)) = self.selected_flow_node().and_then(|(t, node)| {
            self.sampled_function(&t.name, &node.function)?;
            Some((t.name.clone(), node.function.clone()))
        }) else {
            return EventState::NotConsumed;
        };
        let Some(report) = &self.report else {
            return EventState::NotConsumed;
        };
        let Some(index) = report
            .data_profile
            .types
            .iter()
            .position(|t| t.name == type_name)
        else {
            return EventState::NotConsumed;
        };
        if !self.data_profile.select_type(index) {
            // The filter hides the type: clear it rather than open a type the table lacks.
            self.data_profile.clear_filter(report);
            self.data_profile.select_type(index);
        }
        self.go(View::TypeDetail);
        let shown = self.report.as_ref();
        if let Some(t) = shown.and_then(|r| r.data_profile.types.get(index)) {
            self.type_detail.focus_function(t, &function);
        }
        EventState::Consumed
    }

    /// Keys that work in every view.
    fn handle_global_key(&mut self, key: KeyEvent) -> EventState {
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Tab => self.go(self.view.offset(1)),
            KeyCode::BackTab => self.go(self.view.offset(-1)),
            KeyCode::Char(c @ '1'..='6') => {
                let i = c as usize - '1' as usize;
                self.go(View::ALL[i]);
            }
            KeyCode::Esc | KeyCode::Backspace => return self.go_back(),
            KeyCode::Char('/') => {
                self.go(View::DataProfile);
                self.data_profile.start_editing();
            }
            _ => return EventState::NotConsumed,
        }
        EventState::Consumed
    }

    /// Shows `view`, remembering the one shown for Esc.
    fn go(&mut self, view: View) {
        if view == self.view {
            return;
        }
        if self.back.len() == BACK_DEPTH {
            self.back.remove(0);
        }
        self.back.push(self.view);
        self.view = view;
        self.sync_views();
    }

    /// Esc/Backspace: the view shown before; in the data profile with nothing to go back to,
    /// clears the filter.
    fn go_back(&mut self) -> EventState {
        if let Some(view) = self.back.pop() {
            self.view = view;
            self.sync_views();
            return EventState::Consumed;
        }
        match &self.report {
            Some(report)
                if self.view == View::DataProfile && !self.data_profile.filter().is_empty() =>
            {
                self.data_profile.clear_filter(report);
                EventState::Consumed
            }
            _ => EventState::NotConsumed,
        }
    }

    /// The per-type views follow the selection of the data profile.
    fn sync_views(&mut self) {
        if let Some(report) = &self.report {
            let index = self.data_profile.selected_type();
            self.type_detail
                .show(index, index.map(|i| &report.data_profile.types[i]));
            let name = index.map(|i| report.data_profile.types[i].name.as_str());
            self.misses
                .follow(&view_type_names(report, View::MissClassification), name);
            self.working_set
                .follow(&view_type_names(report, View::WorkingSet), name);
            if let Some(causal) = &report.causal {
                self.causal.follow(causal, name);
            }
        }
        let shown = self
            .report
            .as_ref()
            .and_then(|r| flow_subject(r, &self.data_profile))
            .and_then(FlowSubject::histories);
        self.data_flow.show(shown);
    }

    /// What is browsed (the file).
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The report, once loaded.
    #[must_use]
    pub const fn report(&self) -> Option<&Report> {
        self.report.as_ref()
    }

    /// What the loader has said so far.
    #[must_use]
    pub const fn loading(&self) -> &Loading {
        &self.loading
    }

    /// The loader's and the report's warnings.
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The view shown.
    #[must_use]
    pub const fn view(&self) -> View {
        self.view
    }

    /// The data profile's state: sort, filter, selection.
    #[must_use]
    pub const fn data_profile(&self) -> &DataProfileState {
        &self.data_profile
    }

    /// The type view's state: pane, selections.
    #[must_use]
    pub const fn type_detail(&self) -> &TypeDetailState {
        &self.type_detail
    }

    /// The type selected in the data profile, which the per-type views show.
    #[must_use]
    pub fn selected_type(&self) -> Option<&TypeProfile> {
        let report = self.report.as_ref()?;
        report
            .data_profile
            .types
            .get(self.data_profile.selected_type()?)
    }

    /// The miss classification view's type list.
    #[must_use]
    pub const fn misses(&self) -> &ViewTypesState {
        &self.misses
    }

    /// The working-set view's type list.
    #[must_use]
    pub const fn working_set(&self) -> &ViewTypesState {
        &self.working_set
    }

    /// Whether the working-set view shows the cache sets by their types (`b`).
    #[must_use]
    pub const fn working_set_by_set(&self) -> bool {
        self.working_set_by_set
    }

    /// The type selected in `view`'s own type list (miss classification, working set).
    #[must_use]
    pub fn view_type(&self, view: View) -> Option<&str> {
        let state = match view {
            View::MissClassification => &self.misses,
            View::WorkingSet => &self.working_set,
            _ => return None,
        };
        view_type_names(self.report.as_ref()?, view)
            .get(state.selected())
            .copied()
    }

    /// The causal view's state: the analysis shown and the selected type.
    #[must_use]
    pub const fn causal(&self) -> &CausalState {
        &self.causal
    }

    /// The data flow view's state: layers and the selected node.
    #[must_use]
    pub const fn data_flow(&self) -> &DataFlowState {
        &self.data_flow
    }

    /// What the data flow view shows: the selected type's histories, or the type with the
    /// most histories when none is selected. `None` when the report has no histories.
    #[must_use]
    pub fn data_flow_subject(&self) -> Option<FlowSubject<'_>> {
        flow_subject(self.report.as_ref()?, &self.data_profile)
    }

    /// The type shown in the data flow view and its selected node.
    #[must_use]
    pub fn selected_flow_node(
        &self,
    ) -> Option<(
        &dprof_model::histories::TypeHistories,
        &dprof_model::histories::FlowNode,
    )> {
        let t = self.data_flow_subject()?.histories()?;
        let node = t.data_flow.nodes.get(self.data_flow.selected_node()?)?;
        Some((t, node))
    }

    /// The sampled accesses of type `type_name` in `function`, which Enter on a data flow
    /// node opens; `None` when no sample of the type fell in it.
    #[must_use]
    pub fn sampled_function(&self, type_name: &str, function: &str) -> Option<&FunctionCount> {
        self.report
            .as_ref()?
            .data_profile
            .types
            .iter()
            .find(|t| t.name == type_name)?
            .functions
            .iter()
            .find(|f| f.function == function)
    }

    /// The function the data flow view was opened at.
    #[must_use]
    pub fn data_flow_function(&self) -> Option<&str> {
        self.data_flow_function.as_deref()
    }

    /// Whether the help overlay is shown.
    #[must_use]
    pub const fn help_open(&self) -> bool {
        self.help
    }

    /// Whether the person asked to quit (or loading failed).
    #[must_use]
    pub const fn should_quit(&self) -> bool {
        self.quit
    }

    /// Why `view` has nothing to show for this report, if it has not.
    #[must_use]
    pub fn absence(&self, view: View) -> Option<Absence> {
        absence::absence(view, self.report.as_ref()?)
    }
}

/// What the data flow view shows of `report` with the data profile's selection (a function of
/// fields, not of `App`, so that the data flow's state can change while it is borrowed).
fn flow_subject<'r>(
    report: &'r Report,
    data_profile: &DataProfileState,
) -> Option<FlowSubject<'r>> {
    let selected = data_profile
        .selected_type()
        .and_then(|i| report.data_profile.types.get(i));
    FlowSubject::of(
        report.histories.as_ref()?,
        selected.map(|t| t.name.as_str()),
    )
}
