//! Whole screens of every view at 80x24 and 160x48, from the library's example profiles,
//! as insta snapshots (`cargo insta review`, or `INSTA_UPDATE=always`, after a deliberate
//! change). The version in the status bar is filtered out: it changes with every release.

#[path = "support/fixture.rs"]
mod fixture;

use dprof_model::causal::{Arrivals, DelayAccounting, FellBehind};
use dprof_tui::{App, Event, LoadEvent, View, MIN_HEIGHT, MIN_WIDTH};
use fixture::{
    causal_report, draw, freed_elsewhere_report, full_history_report, functions_report,
    history_report, ibs_report, nothing_to_rank_report, press, report, screen, shared_sets_report,
    timed_out_report, views_report, views_report_without_geometry, SOURCE,
};
use ratatui::crossterm::event::KeyCode;

/// Sizes every view is drawn at.
const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn assert_screen(name: &str, app: &App, width: u16, height: u16) {
    let terminal = draw(app, width, height);
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"dprof \d+\.\d+\.\d+\S*", "dprof [version]");
    settings.set_snapshot_suffix(format!("{width}x{height}"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, terminal.backend()));
}

/// The app showing `view` of the software example (its first type selected).
fn showing(view: View) -> App {
    let mut app = App::with_report(SOURCE, report());
    let digit = char::from(b'1' + view.index() as u8);
    press(&mut app, [KeyCode::Char(digit)]);
    assert_eq!(app.view(), view);
    app
}

fn snake(view: View) -> String {
    view.title().to_ascii_lowercase().replace(' ', "_")
}

#[test]
fn every_view_at_two_sizes() {
    for view in View::ALL {
        let app = showing(view);
        for (w, h) in SIZES {
            assert_screen(&snake(view), &app, w, h);
        }
    }
}

#[test]
fn views_of_a_hardware_profile() {
    let mut app = App::with_report(SOURCE, ibs_report());
    for (w, h) in SIZES {
        assert_screen("ibs_data_profile", &app, w, h);
    }
    press(&mut app, [KeyCode::Enter]);
    for (w, h) in SIZES {
        assert_screen("ibs_type", &app, w, h);
    }
}

/// The data flow of the history example: boxes and the side panel wide, a list of layers and
/// short forms at 80x24; the selected node (`st_producer`, one down from alloc) is marked.
#[test]
fn data_flow_of_a_profile_with_histories() {
    let mut app = App::with_report(SOURCE, history_report());
    press(&mut app, [KeyCode::Char('5'), KeyCode::Down]);
    assert_eq!(app.view(), View::DataFlow);
    for (w, h) in SIZES {
        assert_screen("history_data_flow", &app, w, h);
    }
}

/// The app showing `view` of `report` with its type `name` selected in the view's own list.
fn showing_type(report: dprof_model::Report, view: View, name: &str) -> App {
    let mut app = App::with_report(SOURCE, report);
    let digit = char::from(b'1' + view.index() as u8);
    press(&mut app, [KeyCode::Char(digit), KeyCode::Home]);
    for _ in 0..8 {
        if app.view_type(view) == Some(name) {
            break;
        }
        press(&mut app, [KeyCode::Down]);
    }
    assert_eq!(app.view(), view);
    assert_eq!(app.view_type(view), Some(name));
    app
}

/// The miss classification of the views example: `vw_pair`'s classes as bars (false sharing
/// dominant), its sharing pairs writer → missing; `vw_page`'s flagged L1d sets.
#[test]
fn misses_of_the_views_example() {
    let app = showing_type(views_report(), View::MissClassification, "vw_pair");
    for (w, h) in SIZES {
        assert_screen("views_misses_pair", &app, w, h);
    }
    let app = showing_type(views_report(), View::MissClassification, "vw_page");
    assert_screen("views_misses_page", &app, 160, 48);
}

/// The working set of the views example: `vw_page`'s 32 live objects over time, its resident
/// lines, and per level the histogram with the 8 flagged L1d sets marked.
#[test]
fn working_set_of_the_views_example() {
    let app = showing_type(views_report(), View::WorkingSet, "vw_page");
    for (w, h) in SIZES {
        assert_screen("views_working_set_page", &app, w, h);
    }
}

/// The working set by set (`b`): the 8 L1d sets that `ss_skb` and `ss_page` share come first,
/// flagged, each with both types and their allocation sites; `b` again gives the type back.
#[test]
fn working_set_by_set_of_the_shared_sets_example() {
    let mut app = showing_type(shared_sets_report(), View::WorkingSet, "ss_skb");
    press(&mut app, [KeyCode::Char('b')]);
    assert!(app.working_set_by_set());
    for (w, h) in SIZES {
        assert_screen("shared_sets_working_set_by_set", &app, w, h);
    }
    let text = screen(&app, 160, 48);
    assert!(
        text.contains("⚑     0   4 lines  ss_page 2 (ss_page_alloc 2) · ss_skb 2 (ss_send_ack 1, ss_send_fin 1)"),
        "{text}"
    );
    press(&mut app, [KeyCode::Char('b')]);
    assert!(!app.working_set_by_set());
    // The views example: the pages' own histogram flags their stride's sets, not conflicted
    // for all types together (the sweep fills every set).
    let mut app = showing_type(views_report(), View::WorkingSet, "vw_page");
    press(&mut app, [KeyCode::Char('b')]);
    let text = screen(&app, 160, 48);
    assert!(
        text.contains("      0   8 lines  vw_page 4 ⚑ (vw_alloc 4) · vw_sweep 4 (vw_alloc 4)"),
        "{text}"
    );
    let mut app = showing_type(views_report_without_geometry(), View::WorkingSet, "vw_page");
    press(&mut app, [KeyCode::Char('b')]);
    assert!(screen(&app, 80, 24).contains("no sets without cache geometry"));
}

/// Without cache geometry, both views say what they cannot show and show the rest.
#[test]
fn views_without_cache_geometry() {
    let app = showing_type(views_report_without_geometry(), View::WorkingSet, "vw_page");
    assert_screen("views_working_set_no_geometry", &app, 80, 24);
    let app = showing_type(
        views_report_without_geometry(),
        View::MissClassification,
        "vw_pair",
    );
    for (w, h) in SIZES {
        assert_screen("views_misses_no_geometry", &app, w, h);
    }
}

#[test]
fn type_view_of_a_stack_folds_untouched_lines() {
    let mut app = App::with_report(SOURCE, report());
    fixture::type_text(&mut app, "/stack");
    press(&mut app, [KeyCode::Enter, KeyCode::Enter]);
    assert_eq!(app.selected_type().map(|t| t.name.as_str()), Some("stack"));
    assert_screen("stack_type", &app, 80, 24);
}

#[test]
fn help_overlay() {
    let mut app = showing(View::DataProfile);
    press(&mut app, [KeyCode::Char('?')]);
    for (w, h) in SIZES {
        assert_screen("help", &app, w, h);
    }
}

#[test]
fn loading_shows_progress_and_warnings() {
    let mut app = App::new(SOURCE);
    assert_screen("loading_opening", &app, 80, 24);
    app.handle(Event::Load(LoadEvent::Warning(
        "no debug info for module(s) e1000: their fields and source lines stay unnamed".to_owned(),
    )));
    app.handle(Event::Load(LoadEvent::Records {
        done: 65_536,
        total: 262_144,
    }));
    assert_screen("loading_records", &app, 80, 24);
}

#[test]
fn a_tiny_terminal_says_so() {
    let app = showing(View::DataProfile);
    assert_screen("too_small", &app, 40, 10);
}

/// No view panics at any size, down to nothing, with the help open or not.
#[test]
fn no_size_panics() {
    let sizes = [
        (0, 0),
        (1, 1),
        (3, 40),
        (40, 3),
        (MIN_WIDTH - 1, MIN_HEIGHT),
        (MIN_WIDTH, MIN_HEIGHT - 1),
        (MIN_WIDTH, MIN_HEIGHT),
        (61, 17),
        (119, 30),
        (120, 30),
        (300, 100),
    ];
    for make in [
        report,
        ibs_report,
        history_report,
        views_report,
        views_report_without_geometry,
    ] {
        for view in View::ALL {
            let mut app = App::with_report(SOURCE, make());
            let digit = char::from(b'1' + view.index() as u8);
            press(&mut app, [KeyCode::Char(digit)]);
            for (w, h) in sizes {
                let _ = screen(&app, w, h);
            }
            press(&mut app, [KeyCode::Char('?')]);
            for (w, h) in sizes {
                let _ = screen(&app, w, h);
            }
        }
    }
    let loading = App::new(SOURCE);
    for (w, h) in sizes {
        let _ = screen(&loading, w, h);
    }
}

/// A causal session on functions ranks functions, named as kallsyms writes them, beside
/// their rank by samples; Enter on one opens nothing, as no data type is a function.
#[test]
fn causal_of_functions_ranks_functions() {
    let mut app = App::with_report(SOURCE, functions_report());
    press(&mut app, [KeyCode::Char('6')]);
    let s = screen(&app, 160, 48);
    for needle in [
        "function ",
        "ext4_da_write_begin",
        "sampled",
        "the function's instructions",
        "tcp_sendmsg: slope +0.496",
        "sample rank 2",
    ] {
        assert!(s.contains(needle), "{needle}: {s}");
    }
    press(&mut app, [KeyCode::Enter]);
    assert_eq!(screen(&app, 160, 48), s);
}

/// A causal session whose every experiment was discarded says why above the empty ranking.
#[test]
fn causal_with_nothing_to_rank_says_why() {
    let mut app = App::with_report(SOURCE, nothing_to_rank_report());
    press(&mut app, [KeyCode::Char('6')]);
    let s = screen(&app, 160, 48);
    let squeezed = s
        .split(['│', '\n'])
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        squeezed.contains("nothing to rank: none of the 4 experiments could be used"),
        "{s}"
    );
    let s = screen(&app, 80, 24);
    assert!(s.contains("nothing to rank: none of the 4"), "{s}");
    assert_screen("causal_nothing_to_rank", &app, 80, 24);
}

/// The causal ranking of the causal example: three slopes (helps, within noise, hurts), two
/// types never selected; the chart of the first type, then of `task_struct`'s falling line.
#[test]
fn causal_ranking_and_chart() {
    let mut app = App::with_report(SOURCE, causal_report());
    press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
    assert_eq!(app.view(), View::Causal);
    for (w, h) in SIZES {
        assert_screen("causal_ranking", &app, w, h);
    }
    press(&mut app, [KeyCode::Down, KeyCode::Down]);
    assert_screen("causal_hurts", &app, 160, 48);
    let s = screen(&app, 80, 24);
    assert!(s.contains("task_struct: slope -0.405"), "{s}");
    press(&mut app, [KeyCode::Down]);
    let s = screen(&app, 160, 48);
    assert!(s.contains("nothing to plot: never selected"), "{s}");
}

/// A `--fixed-speedup` session's ranking says how its slopes were found.
#[test]
fn a_fixed_speedup_ranking_says_how_its_slopes_were_found() {
    let mut report = causal_report();
    report
        .causal
        .as_mut()
        .expect("the example has a causal report")
        .fixed_speedup_percent = Some(50);
    let mut app = App::with_report(SOURCE, report);
    press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
    let s = screen(&app, 160, 48);
    assert!(s.contains("(mean at the fixed 50% over 50%, 95%"), "{s}");
}

/// An end-to-end session's ranking says that each experiment was a run, and how it was
/// measured.
#[test]
fn an_end_to_end_ranking_says_each_experiment_was_a_run() {
    let mut report = causal_report();
    report
        .causal
        .as_mut()
        .expect("the example has a causal report")
        .end_to_end_runs = Some(40);
    let mut app = App::with_report(SOURCE, report);
    press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
    let s = screen(&app, 160, 48);
    assert!(
        s.contains("end-to-end: runs per effective second, one experiment per run"),
        "{s}"
    );
}

/// The causal summary says whose delays the experiments kept.
#[test]
fn a_causal_summary_says_whose_delays_were_kept() {
    for (accounting, said) in [
        (DelayAccounting::Task, "delays per task"),
        (DelayAccounting::Cpu, "delays per CPU, idle CPUs credited"),
    ] {
        let mut report = causal_report();
        report
            .causal
            .as_mut()
            .expect("the example has a causal report")
            .delay_accounting = accounting;
        let mut app = App::with_report(SOURCE, report);
        press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
        let s = screen(&app, 200, 48);
        assert!(s.contains(said), "{s}");
    }
}

/// An amplified session's summary says by how much the load was amplified.
#[test]
fn a_causal_summary_says_how_much_the_load_was_amplified() {
    let mut report = causal_report();
    let causal = report
        .causal
        .as_mut()
        .expect("the example has a causal report");
    causal.arrivals = Some(Arrivals {
        point: 0,
        delay_per_arrival_ns: 500_000,
    });
    // Each usable experiment's arrivals inserted as much as its effective time: 2x.
    for m in causal
        .experiments
        .iter_mut()
        .filter(|e| e.discarded.is_none())
        .filter_map(|e| e.measured.as_mut())
    {
        let effective = m.effective_ns().max(0) as u64;
        m.wall_ns += effective;
        m.delay_ns += effective;
        m.arrival_delay_ns = effective;
    }
    let mut app = App::with_report(SOURCE, report);
    press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
    let s = screen(&app, 200, 48);
    assert!(s.contains("load amplified 2.00x"), "{s}");
}

/// A session whose tasks fell behind their delays says so in its summary, and one that kept
/// up does not.
#[test]
fn a_causal_summary_warns_when_tasks_fell_behind() {
    let mut report = causal_report();
    let causal = report
        .causal
        .as_mut()
        .expect("the example has a causal report");
    causal.fell_behind = Some(FellBehind {
        experiments: 3,
        usable: 20,
        capped_pauses: 40,
        max_owed_ns: 9_000_000,
    });
    let mut app = App::with_report(SOURCE, report);
    press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
    let s = screen(&app, 300, 48);
    assert!(
        s.contains("tasks fell behind their delays in 3 experiments, so those read low"),
        "{s}"
    );
    let mut app = App::with_report(SOURCE, causal_report());
    press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
    assert!(!screen(&app, 300, 48).contains("fell behind"));
}

/// A session whose module counted samples outside `--scope` for their callers says so in its
/// summary.
#[test]
fn a_causal_summary_says_when_samples_went_to_callers_in_scope() {
    let mut report = causal_report();
    report
        .causal
        .as_mut()
        .expect("the example has a causal report")
        .callers_in_scope = vec!["tcp_*".to_owned()];
    let mut app = App::with_report(SOURCE, report);
    press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
    let s = screen(&app, 300, 48);
    assert!(
        s.contains("samples outside the scope counted for their callers in it"),
        "{s}"
    );
    let mut app = App::with_report(SOURCE, causal_report());
    press(&mut app, [KeyCode::Char('6'), KeyCode::Home]);
    assert!(!screen(&app, 300, 48).contains("their callers"));
}

/// The data flow of an object freed on another CPU than its last access: the CPU change at
/// the free is counted in the summary as on the step into `st_free`; `st_free`, which hands
/// another object on to `st_consumer`, sits above it, its step out going down.
#[test]
fn data_flow_of_an_object_freed_on_another_cpu() {
    let mut app = App::with_report(SOURCE, freed_elsewhere_report());
    press(&mut app, [KeyCode::Char('5')]);
    assert_screen("freed_elsewhere_data_flow", &app, 160, 48);
}

/// The data flow of a type whose only history timed out: the reason where the graph would be.
#[test]
fn data_flow_of_a_type_whose_histories_all_timed_out() {
    let mut app = App::with_report(SOURCE, timed_out_report());
    press(&mut app, [KeyCode::Char('5')]);
    for (w, h) in SIZES {
        assert_screen("timed_out_data_flow", &app, w, h);
    }
}

/// A type watched over its whole object: the side panel adds the sets, the distinct merged
/// paths after each set and the most frequent merged path, each step with its CPU label and
/// its samples; narrow, the sets and the curve.
#[test]
fn data_flow_of_a_type_watched_over_its_whole_object() {
    let mut app = App::with_report(SOURCE, full_history_report());
    press(&mut app, [KeyCode::Char('5')]);
    assert_eq!(app.view(), View::DataFlow);
    for (w, h) in SIZES {
        assert_screen("full_data_flow", &app, w, h);
    }
}
