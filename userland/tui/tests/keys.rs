//! Scripted key sequences: each step checks the state and the screen, at 80x24.

#[path = "support/fixture.rs"]
#[expect(dead_code, reason = "the render tests use the rest of it")]
mod fixture;

use dprof_tui::{App, Column, Event, EventState, LoadEvent, Pane, View};
use fixture::{
    causal_report, freed_elsewhere_report, history_report, key, press, report, screen,
    timed_out_report, type_text, views_report, SOURCE,
};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn shown_type(app: &App) -> Option<&str> {
    app.selected_type().map(|t| t.name.as_str())
}

/// Names of the types in the table, top to bottom.
fn table_order(app: &App) -> Vec<String> {
    let report = app.report().expect("loaded");
    app.data_profile()
        .rows()
        .iter()
        .map(|&i| report.data_profile.types[i].name.clone())
        .collect()
}

/// Open a type, drill into its data flow, back, sort, search, help, quit.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scripted session, read top to bottom"
)]
fn open_drill_back_sort_search_help_quit() {
    let mut app = App::with_report(SOURCE, report());
    assert_eq!(app.view(), View::DataProfile);
    assert_eq!(shown_type(&app), Some("skbuff_head_cache"));

    // Open a type: down to the second, Enter.
    press(
        &mut app,
        [KeyCode::Down, KeyCode::Char('j'), KeyCode::Char('k')],
    );
    assert_eq!(shown_type(&app), Some("task_struct"));
    press(&mut app, [KeyCode::Enter]);
    assert_eq!(app.view(), View::TypeDetail);
    let s = screen(&app, 80, 24);
    assert!(
        s.contains("task_struct · slab #2 · cache task_struct"),
        "{s}"
    );
    assert!(s.contains("Heat: samples per byte"), "{s}");
    assert!(s.contains("+0x8 stack"), "{s}");

    // Drill into the data flow from a function.
    press(&mut app, [KeyCode::Right]);
    assert_eq!(app.type_detail().pane(), Pane::Functions);
    let s = screen(&app, 80, 24);
    assert!(s.contains("▶ schedule"), "{s}");
    press(&mut app, [KeyCode::Enter]);
    assert_eq!(app.view(), View::DataFlow);
    assert_eq!(app.data_flow_function(), Some("schedule"));
    let s = screen(&app, 80, 24);
    assert!(s.contains("Data flow · task_struct"), "{s}");
    assert!(s.contains("no data flow in this profile"), "{s}");
    assert!(s.contains("no object histories collected"), "{s}");
    assert!(s.contains("opened at function schedule"), "{s}");

    // Back: the type as it was left, then the table.
    press(&mut app, [KeyCode::Esc]);
    assert_eq!(app.view(), View::TypeDetail);
    assert_eq!(app.type_detail().pane(), Pane::Functions);
    press(&mut app, [KeyCode::Backspace]);
    assert_eq!(app.view(), View::DataProfile);
    assert_eq!(shown_type(&app), Some("task_struct"), "the selection stays");

    // Sort: by type name, then reversed; the selection follows its type.
    press(&mut app, [KeyCode::Char('s')]);
    assert_eq!(app.data_profile().sort(), (Column::Type, false));
    assert_eq!(table_order(&app)[0], "global:jiffies");
    assert_eq!(shown_type(&app), Some("task_struct"));
    let s = screen(&app, 80, 24);
    assert!(s.contains("sorted by type ▲"), "{s}");
    assert!(s.contains("type ▲"), "{s}");
    press(&mut app, [KeyCode::Char('S')]);
    assert_eq!(app.data_profile().sort(), (Column::Type, true));
    assert_eq!(table_order(&app)[0], "task_struct");
    press(&mut app, [KeyCode::Char('s')]);
    assert_eq!(app.data_profile().sort(), (Column::Samples, true));
    assert_eq!(table_order(&app)[0], "skbuff_head_cache");

    // Search: filter as you type, Enter keeps it, Esc clears it.
    press(&mut app, [KeyCode::Char('/')]);
    assert!(app.data_profile().is_editing());
    type_text(&mut app, "KM");
    assert_eq!(app.data_profile().filter(), "KM");
    assert_eq!(
        table_order(&app),
        [
            "kmalloc-large@do_sys_poll",
            "kmalloc-1k@__alloc_skb",
            "kmalloc-1k@alloc_pipe_info"
        ]
    );
    let s = screen(&app, 80, 24);
    assert!(
        s.contains("/KM▏"),
        "the status bar shows the filter typed:\n{s}"
    );
    type_text(&mut app, "alloc-1k@a");
    assert_eq!(table_order(&app), ["kmalloc-1k@alloc_pipe_info"]);
    press(&mut app, [KeyCode::Backspace, KeyCode::Backspace]);
    assert_eq!(table_order(&app).len(), 2);
    press(&mut app, [KeyCode::Enter]);
    assert!(!app.data_profile().is_editing());
    let s = screen(&app, 80, 24);
    assert!(s.contains("filter \"KMalloc-1k\": 2 of 8 types"), "{s}");
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings
        .bind(|| insta::assert_snapshot!("filtered@80x24", fixture::draw(&app, 80, 24).backend()));
    // Esc, with no view to go back to, clears the filter.
    press(&mut app, [KeyCode::Esc]);
    assert_eq!(app.data_profile().filter(), "");
    assert_eq!(table_order(&app).len(), 8);

    // Help lists every key; any key closes it.
    press(&mut app, [KeyCode::Char('?')]);
    assert!(app.help_open());
    let s = screen(&app, 80, 24);
    for needle in [
        "Keys",
        "k j",
        "PgUp PgDn",
        "g G",
        "h l",
        "Shift-Tab",
        "1 … 6",
        "Enter",
        "Backspace",
        "/",
        "reverse the sort",
        "?",
        "Ctrl-C",
    ] {
        assert!(s.contains(needle), "help lacks {needle}:\n{s}");
    }
    press(&mut app, [KeyCode::Char('q')]);
    assert!(!app.help_open());
    assert!(!app.should_quit(), "q closes the help first");

    press(&mut app, [KeyCode::Char('q')]);
    assert!(app.should_quit());
}

#[test]
fn tab_visits_every_view_and_each_says_why_it_is_empty() {
    let mut app = App::with_report(SOURCE, report());
    let mut seen = vec![app.view()];
    for _ in 1..View::ALL.len() {
        press(&mut app, [KeyCode::Tab]);
        seen.push(app.view());
    }
    assert_eq!(seen, View::ALL);
    press(&mut app, [KeyCode::Tab]);
    assert_eq!(app.view(), View::DataProfile, "Tab wraps around");
    press(&mut app, [KeyCode::BackTab]);
    assert_eq!(app.view(), View::Causal);
    for (digit, why) in [
        ('3', "no miss classification in this profile"),
        (
            '3',
            "made without the miss classification and working-set views",
        ),
        ('4', "no working set in this profile"),
        ('5', "no data flow in this profile"),
        ('6', "no causal ranking in this profile"),
    ] {
        press(&mut app, [KeyCode::Char(digit)]);
        let s = screen(&app, 80, 24);
        assert!(s.contains(why), "{s}");
    }
}

#[test]
fn type_panes_sort_and_move() {
    let mut app = App::with_report(SOURCE, report());
    press(&mut app, [KeyCode::Enter]);
    let t = app.selected_type().expect("a type").clone();
    assert_eq!(
        app.type_detail().selected_field(&t).map(|f| f.offset),
        Some(8)
    );
    press(&mut app, [KeyCode::Char('s')]);
    assert_eq!(app.type_detail().rows(Pane::Offsets).len(), 3);
    let offsets: Vec<u64> = app
        .type_detail()
        .rows(Pane::Offsets)
        .iter()
        .map(|&i| t.fields[i].offset)
        .collect();
    assert_eq!(offsets, [0x8, 0x10, 0x70]);
    press(&mut app, [KeyCode::End]);
    assert_eq!(
        app.type_detail().selected_field(&t).map(|f| f.offset),
        Some(0x70)
    );
    // The heat strip marks the selected offset; the offsets pane lists it.
    let s = screen(&app, 80, 24);
    assert!(s.contains("▶ +0x70 len"), "{s}");
    press(&mut app, [KeyCode::Char('h')]);
    assert_eq!(app.type_detail().pane(), Pane::Cpus, "← wraps around");
    let s = screen(&app, 80, 24);
    assert!(s.contains("cpu  samples"), "{s}");
    // Enter on a CPU opens nothing.
    press(&mut app, [KeyCode::Enter]);
    assert_eq!(app.view(), View::TypeDetail);
    // Another type resets the panes.
    press(&mut app, [KeyCode::Esc, KeyCode::Down, KeyCode::Enter]);
    assert_eq!(app.type_detail().pane(), Pane::Offsets);
}

#[test]
fn loading_then_browsing() {
    let mut app = App::new(SOURCE);
    assert!(app.report().is_none());
    app.handle(Event::Load(LoadEvent::Stage(
        "reading debug info".to_owned(),
    )));
    let s = screen(&app, 80, 24);
    assert!(s.contains("reading debug info"), "{s}");
    app.handle(Event::Load(LoadEvent::Records {
        done: 13,
        total: 26,
    }));
    let s = screen(&app, 80, 24);
    assert!(s.contains("13 of 26 records (50%)"), "{s}");
    // Keys other than quit and help wait for the report.
    assert_eq!(app.handle(key(KeyCode::Enter)), EventState::NotConsumed);
    app.handle(Event::Loaded(Box::new(report())));
    let s = screen(&app, 80, 24);
    assert!(s.contains("skbuff_head_cache (sk_buff)"), "{s}");
    assert!(s.contains("rank ▲  type"), "{s}");
}

#[test]
fn quitting_while_loading_and_ctrl_c() {
    let mut app = App::new(SOURCE);
    press(&mut app, [KeyCode::Char('q')]);
    assert!(app.should_quit());

    let mut app = App::with_report(SOURCE, report());
    press(&mut app, [KeyCode::Char('/')]);
    type_text(&mut app, "q");
    assert!(!app.should_quit(), "q is text in the filter");
    app.handle(Event::Key(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert!(app.should_quit());
}

#[test]
fn a_filter_that_matches_nothing_says_so() {
    let mut app = App::with_report(SOURCE, report());
    press(&mut app, [KeyCode::Char('/')]);
    type_text(&mut app, "zzz");
    let s = screen(&app, 80, 24);
    assert!(s.contains("no type matches \"zzz\""), "{s}");
    press(&mut app, [KeyCode::Enter, KeyCode::Char('2')]);
    assert_eq!(app.view(), View::TypeDetail);
    let s = screen(&app, 80, 24);
    assert!(s.contains("no type selected"), "{s}");
}

/// The function of the selected data flow node.
fn selected_node(app: &App) -> Option<&str> {
    app.selected_flow_node()
        .map(|(_, node)| node.function.as_str())
}

/// The function under the cursor of the type view's functions pane.
fn selected_function(app: &App) -> Option<String> {
    let t = app.selected_type()?;
    app.type_detail()
        .selected_function(t)
        .map(|f| f.function.clone())
}

/// Open a type, Enter on a function: its node in the data flow; move node by node; Enter on a
/// node with sampled accesses: the type's functions pane on it; back.
#[test]
fn data_flow_nodes_and_their_accesses() {
    let mut app = App::with_report(SOURCE, history_report());
    assert_eq!(shown_type(&app), Some("st_obj"));
    press(&mut app, [KeyCode::Enter, KeyCode::Right]);
    assert_eq!(app.type_detail().pane(), Pane::Functions);
    assert_eq!(selected_function(&app).as_deref(), Some("st_consumer"));

    // Enter on a function: the data flow, on that function's node.
    press(&mut app, [KeyCode::Enter]);
    assert_eq!(app.view(), View::DataFlow);
    assert_eq!(selected_node(&app), Some("st_consumer"));
    let s = screen(&app, 80, 24);
    assert!(s.contains("Data flow · st_obj"), "{s}");
    assert!(s.contains("⇓ 2 st_consumer (cpu 2)"), "{s}");
    assert!(s.contains("st_consumer · in 3 of 3 histories"), "{s}");

    // Node by node, top to bottom in layer order; the ends stop the moves.
    press(&mut app, [KeyCode::Char('g')]);
    assert_eq!(selected_node(&app), Some("st_alloc"));
    press(&mut app, [KeyCode::Up]);
    assert_eq!(selected_node(&app), Some("st_alloc"));
    let mut order = vec![selected_node(&app).map(str::to_owned)];
    for _ in 0..5 {
        press(&mut app, [KeyCode::Char('j')]);
        order.push(selected_node(&app).map(str::to_owned));
    }
    let order: Vec<&str> = order.iter().flatten().map(String::as_str).collect();
    assert_eq!(
        order,
        [
            "st_alloc",
            "st_producer",
            "st_untraced",
            "st_consumer",
            "st_free",
            "st_free"
        ]
    );
    let s = screen(&app, 160, 48);
    assert!(s.contains("st_free [free] · in 3 of 3 histories"), "{s}");
    assert!(s.contains("from st_consumer 3"), "{s}");

    // A node no sample fell in has nothing to open.
    assert_eq!(app.handle(key(KeyCode::Enter)), EventState::NotConsumed);
    assert_eq!(app.view(), View::DataFlow);
    let s = screen(&app, 80, 24);
    assert!(
        s.contains("no sample of st_obj in this function: nothing to open"),
        "{s}"
    );

    // Enter on st_producer: the type view, its functions pane on st_producer.
    press(
        &mut app,
        [KeyCode::Char('k'), KeyCode::Char('k'), KeyCode::Char('k')],
    );
    assert_eq!(selected_node(&app), Some("st_producer"));
    let s = screen(&app, 80, 24);
    assert!(
        s.contains("Enter: its 1 sampled accesses in the Type view"),
        "{s}"
    );
    press(&mut app, [KeyCode::Enter]);
    assert_eq!(app.view(), View::TypeDetail);
    assert_eq!(app.type_detail().pane(), Pane::Functions);
    assert_eq!(selected_function(&app).as_deref(), Some("st_producer"));
    let s = screen(&app, 80, 24);
    assert!(s.contains("▶ st_producer"), "{s}");

    // Back: the data flow as it was left, then the type as first opened.
    press(&mut app, [KeyCode::Esc]);
    assert_eq!(app.view(), View::DataFlow);
    assert_eq!(selected_node(&app), Some("st_producer"));
    press(&mut app, [KeyCode::Esc]);
    assert_eq!(app.view(), View::TypeDetail);
    press(&mut app, [KeyCode::Esc]);
    assert_eq!(app.view(), View::DataProfile);
}

/// The selected function lists the ranges it touched, and the paths their accesses' ranges,
/// with field names beside the offsets.
#[test]
fn data_flow_names_the_fields() {
    let mut app = App::with_report(SOURCE, history_report());
    press(&mut app, [KeyCode::Char('5'), KeyCode::Down]);
    assert_eq!(selected_node(&app), Some("st_producer"));
    let s = screen(&app, 160, 48);
    assert!(
        s.contains("fields +0x10/8 payload (W 2), +0x18/4 len (R 3)"),
        "{s}"
    );
    assert!(s.contains("st_producer+0x8  +0x18/4 len "), "{s}");
}

/// An object freed on another CPU than its last access: the summary counts that CPU change
/// as the step into `st_free` shows it; `st_free`, which hands another object on to
/// `st_consumer`, is laid out above it, its step out going down.
#[test]
fn data_flow_counts_the_cpu_change_at_the_free() {
    let mut app = App::with_report(SOURCE, freed_elsewhere_report());
    press(&mut app, [KeyCode::Char('5')]);
    let s = screen(&app, 160, 48);
    assert!(
        s.contains("(2 alloc to free, with 1 CPU changes) · 3 hits"),
        "{s}"
    );
    assert!(s.contains("⇓ 1 st_free (cpu 1)"), "{s}");
    assert!(s.contains("↓ 1 st_consumer"), "{s}");
    assert!(!s.contains("↑ 1 st_consumer"), "{s}");
}

/// A type whose only history timed out: the graph's place says why there is none.
#[test]
fn data_flow_of_a_type_whose_histories_all_timed_out() {
    let mut app = App::with_report(SOURCE, timed_out_report());
    press(&mut app, [KeyCode::Char('5')]);
    assert_eq!(app.view(), View::DataFlow);
    let s = screen(&app, 160, 48);
    assert!(
        s.contains("no history of st_obj ran from allocation to free (1 timed out): no data flow"),
        "{s}"
    );
}

/// A type with no histories says so and names the types that have; with no type selected,
/// the type with the most histories is shown, saying so.
#[test]
fn data_flow_of_a_type_without_histories_and_of_no_type() {
    let mut merged = report();
    merged.histories = history_report().histories;
    let mut app = App::with_report(SOURCE, merged);
    press(&mut app, [KeyCode::Char('5')]);
    assert!(app.selected_flow_node().is_none());
    let s = screen(&app, 80, 24);
    assert!(s.contains("no histories of skbuff_head_cache"), "{s}");
    assert!(s.contains("st_obj  4 histories, 3 alloc to free"), "{s}");
    assert_eq!(app.handle(key(KeyCode::Enter)), EventState::NotConsumed);

    press(&mut app, [KeyCode::Char('/')]);
    type_text(&mut app, "zzz");
    press(&mut app, [KeyCode::Enter, KeyCode::Char('5')]);
    assert_eq!(app.view(), View::DataFlow);
    assert_eq!(selected_node(&app), Some("st_alloc"));
    let s = screen(&app, 80, 24);
    assert!(
        s.contains("no type selected: showing st_obj, the type with the most"),
        "{s}"
    );
}

/// The Misses and Working set views move through their own type list; the data profile's
/// selection follows, so each per-type view shows the type last chosen in any of them, and
/// Enter opens it in the Type view.
#[test]
fn misses_and_working_set_lists_follow_one_selection() {
    let mut app = App::with_report(SOURCE, views_report());
    let report = app.report().expect("loaded");
    let misses: Vec<String> = report
        .misses
        .as_ref()
        .expect("views computed")
        .types
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(misses.len() >= 2, "{misses:?}");
    press(&mut app, [KeyCode::Char('3'), KeyCode::Home]);
    assert_eq!(app.view(), View::MissClassification);
    assert_eq!(app.view_type(View::MissClassification), Some(&*misses[0]));
    assert_eq!(shown_type(&app), Some(&*misses[0]));
    press(&mut app, [KeyCode::Char('j')]);
    assert_eq!(app.view_type(View::MissClassification), Some(&*misses[1]));
    assert_eq!(
        shown_type(&app),
        Some(&*misses[1]),
        "the data profile follows"
    );
    let s = screen(&app, 80, 24);
    assert!(s.contains(&format!("Misses · {}", misses[1])), "{s}");
    assert!(s.contains("↑↓ type · Enter open"), "{s}");
    // The working set shows the same type.
    press(&mut app, [KeyCode::Tab]);
    assert_eq!(app.view(), View::WorkingSet);
    assert_eq!(app.view_type(View::WorkingSet), Some(&*misses[1]));
    let s = screen(&app, 80, 24);
    assert!(s.contains(&format!("Working set · {}", misses[1])), "{s}");
    // End, then past the end, stays on the last.
    press(&mut app, [KeyCode::End, KeyCode::Down]);
    let last = app
        .report()
        .and_then(|r| r.working_set.as_ref())
        .and_then(|w| w.types.last())
        .map(|t| t.name.clone());
    assert_eq!(app.view_type(View::WorkingSet), last.as_deref());
    // Enter: the Type view of that type; Esc comes back.
    press(&mut app, [KeyCode::Enter]);
    assert_eq!(app.view(), View::TypeDetail);
    assert_eq!(shown_type(&app), last.as_deref());
    press(&mut app, [KeyCode::Esc]);
    assert_eq!(app.view(), View::WorkingSet);
    assert_eq!(app.view_type(View::WorkingSet), last.as_deref());
}

/// Keys in a view with no type list (an old report) fall through to the global keys.
#[test]
fn misses_without_the_views_ignores_moves() {
    let mut app = App::with_report(SOURCE, report());
    press(&mut app, [KeyCode::Char('3')]);
    let before = shown_type(&app).map(str::to_owned);
    assert_eq!(app.handle(key(KeyCode::Down)), EventState::NotConsumed);
    assert_eq!(app.handle(key(KeyCode::Enter)), EventState::NotConsumed);
    assert_eq!(app.view(), View::MissClassification);
    assert_eq!(shown_type(&app).map(str::to_owned), before);
    assert_eq!(app.view_type(View::MissClassification), None);
}

/// Misses with a hardware sampler are counted as misses and not labelled inferred; a report
/// whose views found no slab type says so in each tab.
#[test]
fn measured_misses_and_views_without_types() {
    let mut report = views_report();
    let misses = report.misses.as_mut().expect("views computed");
    misses.inferred = false;
    misses.basis = "L1 data-cache misses of slab types seen by the hardware sampler".to_owned();
    let mut app = App::with_report(SOURCE, report);
    press(&mut app, [KeyCode::Char('3')]);
    let s = screen(&app, 80, 24);
    assert!(!s.contains("inferred"), "{s}");
    assert!(s.contains("misses  dominant"), "{s}");
    assert!(s.contains("L1 data-cache misses of slab types"), "{s}");

    let mut report = views_report();
    report
        .misses
        .as_mut()
        .expect("views computed")
        .types
        .clear();
    report
        .working_set
        .as_mut()
        .expect("views computed")
        .types
        .clear();
    let mut app = App::with_report(SOURCE, report);
    press(&mut app, [KeyCode::Char('3')]);
    assert_eq!(app.view_type(View::MissClassification), None);
    let s = screen(&app, 80, 24);
    assert!(s.contains("no miss classification in this profile"), "{s}");
    assert!(
        s.contains("no slab type had samples or history accesses"),
        "{s}"
    );
    press(&mut app, [KeyCode::Char('4')]);
    let s = screen(&app, 80, 24);
    assert!(s.contains("no working set in this profile"), "{s}");
    assert!(
        s.contains("no slab object was allocated during collection"),
        "{s}"
    );
    assert_eq!(app.handle(key(KeyCode::Down)), EventState::NotConsumed);
}

/// The causal view: the ranking follows the data profile's selection, moves in it select the
/// type there too, Enter opens its Type view; a report without experiments says so.
#[test]
fn causal_ranking_moves_and_opens_types() {
    let mut app = App::with_report(SOURCE, causal_report());
    press(&mut app, [KeyCode::Char('6')]);
    assert_eq!(app.view(), View::Causal);
    let causal = app
        .report()
        .and_then(|r| r.causal.as_ref())
        .expect("causal");
    let selected = |app: &App| {
        let causal = app
            .report()
            .and_then(|r| r.causal.as_ref())
            .expect("causal");
        app.causal()
            .selected_type_index(causal)
            .map(|i| causal.types[i].name.clone())
    };
    assert_eq!(causal.analyses.len(), 1);
    // The data profile's first type is skbuff_head_cache: the ranking starts on it.
    assert_eq!(selected(&app).as_deref(), Some("skbuff_head_cache"));
    press(&mut app, [KeyCode::Down, KeyCode::Down]);
    assert_eq!(selected(&app).as_deref(), Some("task_struct"));
    assert_eq!(shown_type(&app), Some("task_struct"));
    // One progress point: ←→ have nowhere to go.
    assert_eq!(app.handle(key(KeyCode::Right)), EventState::NotConsumed);
    press(&mut app, [KeyCode::Enter]);
    assert_eq!(app.view(), View::TypeDetail);
    assert_eq!(shown_type(&app), Some("task_struct"));
    press(&mut app, [KeyCode::Esc]);
    assert_eq!(app.view(), View::Causal);
    // dentry is not in the data profile: Enter does nothing.
    press(&mut app, [KeyCode::Down]);
    assert_eq!(selected(&app).as_deref(), Some("dentry"));
    assert_eq!(app.handle(key(KeyCode::Enter)), EventState::NotConsumed);
    assert_eq!(app.view(), View::Causal);

    let mut plain = App::with_report(SOURCE, report());
    press(&mut plain, [KeyCode::Char('6')]);
    let s = screen(&plain, 80, 24);
    assert!(s.contains("the profile has no causal experiments"), "{s}");
}
