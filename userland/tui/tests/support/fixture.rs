//! The reports the TUI tests browse: the library's example profiles, analyzed, with field
//! names from a small stand-in for DWARF. Included with `#[path]` by each test file.

use dprof_analysis::pipeline::{self, Options};
use dprof_analysis::report::annotate_fields;
use dprof_analysis::report::{FieldSource, StructNames};
use dprof_fixtures::{data_profile as example, hardware as hw_example};
use dprof_format::Profile;
use dprof_model::Report;
use dprof_tui::{App, Event};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

/// What the tests call the file browsed.
pub const SOURCE: &str = "example.dprof";

/// Field names of the structs the examples use, as DWARF of vmlinux would give them.
struct ExampleFields;

impl FieldSource for ExampleFields {
    fn has_struct(&self, name: &str) -> bool {
        matches!(name, "sk_buff" | "task_struct" | "st_obj" | "fc_obj")
    }
    fn field_at(&self, struct_name: &str, offset: u64) -> Option<String> {
        let name = match (struct_name, offset) {
            ("sk_buff", 0..=7) => "next",
            ("sk_buff", 8..=15) => "prev",
            ("sk_buff", 16..=23) => "dev",
            ("sk_buff", 0x70..=0x73) | ("st_obj", 0x18..=0x1b) | ("fc_obj", 0x18..=0x1f) => "len",
            ("task_struct", 8..=15) => "stack",
            ("st_obj", 0x10..=0x17) => "payload",
            ("fc_obj", 0..=7) => "head",
            ("fc_obj", 0x10..=0x17) => "data",
            _ => return None,
        };
        Some(name.to_owned())
    }
}

fn analyzed(bytes: Vec<u8>) -> Report {
    let profile = Profile::from_vec(bytes).expect("the example is a valid profile");
    let mut report = pipeline::analyze(&profile, &Options::default()).expect("valid records");
    annotate_fields(&mut report, &StructNames::builtin(), Some(&ExampleFields));
    report
}

/// The software-sampler example: types ranked by samples.
pub fn report() -> Report {
    analyzed(example::profile())
}

/// The IBS example: types ranked by misses.
pub fn ibs_report() -> Report {
    analyzed(hw_example::profile(hw_example::Sampler::Ibs))
}

/// The history example (`dprof_fixtures::histories`): one type, `st_obj`, with object
/// access histories, path traces and a data flow.
pub fn history_report() -> Report {
    analyzed(dprof_fixtures::histories::profile())
}

/// The whole-object example (`dprof_fixtures::full_histories`): `fc_obj`'s pair histories
/// merged set by set.
pub fn full_history_report() -> Report {
    analyzed(dprof_fixtures::full_histories::profile())
}

/// The history example's `freed_elsewhere_profile`: an object freed on another CPU than its
/// last access, and `st_free` handing an object on to `st_consumer`.
pub fn freed_elsewhere_report() -> Report {
    analyzed(dprof_fixtures::histories::freed_elsewhere_profile())
}

/// The history example's `timed_out_profile`: `st_obj`'s only history timed out.
pub fn timed_out_report() -> Report {
    analyzed(dprof_fixtures::histories::timed_out_profile())
}

/// The causal example (`dprof_fixtures::causal`) after the data-profile example's
/// records: types ranked by slope (`skbuff_head_cache` helps, `kmalloc-1k@__alloc_skb` is
/// within noise, `task_struct` hurts, two never selected), five experiments discarded.
pub fn causal_report() -> Report {
    analyzed(dprof_fixtures::causal::profile_with_samples())
}

/// The causal report of `dprof_fixtures::causal::nothing_to_rank_planned`, in place of the
/// causal example's: every experiment discarded, no type ranked.
pub fn nothing_to_rank_report() -> Report {
    use dprof_fixtures::causal as causal_example;
    let mut report = causal_report();
    report.causal = Some(dprof_analysis::causal::analyze(
        &causal_example::example_config(),
        &causal_example::records(&causal_example::nothing_to_rank_planned()),
    ));
    report
}

/// The causal report of `dprof_fixtures::causal::functions_config` (a session of `dprof
/// causal --units functions`), in place of the causal example's.
pub fn functions_report() -> Report {
    use dprof_fixtures::causal as causal_example;
    let mut report = causal_report();
    report.causal = Some(dprof_analysis::causal::analyze(
        &causal_example::functions_config(),
        &causal_example::records(&causal_example::example_planned()),
    ));
    report
}

/// The views example (`dprof_fixtures::views`, the QEMU guest's caches): four slab types
/// whose miss classes and working sets are known from how it was built, analyzed with the
/// miss classification and working-set views.
pub fn views_report() -> Report {
    views_report_with(dprof_fixtures::views::profile())
}

/// Two types sharing known cache sets (`dprof_fixtures::shared_sets`).
pub fn shared_sets_report() -> Report {
    views_report_with(dprof_fixtures::shared_sets::profile())
}

/// The views example on a machine whose profile lists no cache: the views without geometry.
pub fn views_report_without_geometry() -> Report {
    views_report_with(dprof_fixtures::views::profile_with(2, Vec::new()))
}

fn views_report_with(bytes: Vec<u8>) -> Report {
    let profile = Profile::from_vec(bytes).expect("the views example is a valid profile");
    let kallsyms = dprof_analysis::symbols::Kallsyms::parse(profile.kallsyms());
    pipeline::analyze_views(
        &profile,
        &kallsyms,
        &Options::default(),
        &dprof_analysis::views::ViewOptions::default(),
        &mut |_| {},
    )
    .expect("valid records")
}

/// A key press.
pub fn key(code: KeyCode) -> Event {
    Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

/// Presses `keys` in order.
pub fn press(app: &mut App, keys: impl IntoIterator<Item = KeyCode>) {
    for code in keys {
        app.handle(key(code));
    }
}

/// Types `text` as key presses.
pub fn type_text(app: &mut App, text: &str) {
    press(app, text.chars().map(KeyCode::Char));
}

/// The app drawn on a `width` x `height` test terminal.
pub fn draw(app: &App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal
        .draw(|frame| frame.render_widget(app, frame.area()))
        .expect("draws");
    terminal
}

/// The screen's text, one string per line.
pub fn screen(app: &App, width: u16, height: u16) -> String {
    let terminal = draw(app, width, height);
    let buffer = terminal.backend().buffer();
    (0..buffer.area.height)
        .map(|y| {
            (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}
