//! `dprof tui`: browse a profile, or a saved JSON report, in the terminal.

use std::cell::RefCell;
use std::io::{self, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use dprof_analysis::cache::parse_overrides;
use dprof_analysis::views::ViewOptions;
use dprof_format::MAGIC;
use dprof_model::Report;
use dprof_tui::{LoadEvent, Outcome};

use crate::report::{open_profile, AnalysisArgs, OpenedProfile, Stage};

/// Browse a profile in the terminal, full screen.
///
/// FILE is a profile from dprof collect, analyzed as dprof report does (--vmlinux,
/// --debug-dir and --type-map name structs and fields; without --vmlinux, the profile's
/// BTF names the fields), or a report saved with dprof report --json (its names are those
/// it was written with). A profile is analyzed once, in the background, with a progress
/// bar; the browser then opens on its data profile.
///
/// Views (Tab, or 1 to 6): Data profile (sort by any column with s, filter as you type with
/// /), Type (the type's bytes as a heat strip per cache line, its offsets, functions and
/// CPUs), Misses (each slab type's misses by class: true or false sharing, conflict,
/// capacity, with the evidence), Working set (live objects over time, lines each cache level
/// holds, lines per associativity set; the cache geometry is the profile's, or --cache's),
/// Data flow (with --histories: the type's functions from alloc
/// to free, path traces, cross-check) and Causal. A view the profile has no data for says
/// why. Enter opens the selected type, a function's data flow, a node's sampled accesses;
/// Esc goes back, ? lists every key, q quits.
///
/// Needs a terminal of at least 50x12; dprof report prints the same data as text or JSON.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct TuiArgs {
    /// A profile, a perf.data from perf record (converted first, on the machine that
    /// recorded it), or a report saved by `dprof report --json`.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    analysis: AnalysisArgs,
    /// Cache levels replacing or adding to the profile's for the Misses and Working set views:
    /// NAME=SIZE/WAYS/LINE[,...], e.g. L1d=48K/12/64,L2=2M/16/64.
    #[arg(long, value_name = "SPEC")]
    cache: Option<String>,
}

/// What FILE holds.
enum Input {
    /// A profile, opened and checked: the analysis is still to run.
    Profile(Box<OpenedProfile>),
    /// A saved report.
    Report(Box<Report>),
}

pub fn run(args: &TuiArgs) -> anyhow::Result<ExitCode> {
    // Everything a person can fix in the command line or the file fails here, on a normal
    // screen, before the terminal is taken.
    let views = ViewOptions {
        overrides: match &args.cache {
            Some(spec) => parse_overrides(spec).context("--cache")?,
            None => Vec::new(),
        },
        ..ViewOptions::default()
    };
    let input = open(args)?;
    if !io::stdin().is_terminal() || !io::stdout().is_terminal() {
        bail!(
            "dprof tui needs a terminal on standard input and output; dprof report prints \
             the same data as text or JSON"
        );
    }
    let source = args.file.display().to_string();
    let outcome = match input {
        Input::Profile(opened) => dprof_tui::run(source, move |progress| {
            let progress = RefCell::new(progress);
            // A causal session may have no samples: its Causal view still has much to show.
            let need_samples = !opened.has_causal();
            opened
                .analyze(
                    need_samples,
                    Some(&views),
                    &mut |stage| (progress.borrow_mut())(load_event(stage)),
                    &mut |warning| (progress.borrow_mut())(LoadEvent::Warning(warning)),
                )
                .map(|analyzed| analyzed.report)
        }),
        Input::Report(report) => dprof_tui::run(source, move |_| Ok::<_, anyhow::Error>(*report)),
    }?;
    match outcome {
        Outcome::Quit => Ok(ExitCode::SUCCESS),
        // The terminal is back: the error prints like any other.
        Outcome::LoadFailed(e) => Err(e),
    }
}

fn load_event(stage: Stage) -> LoadEvent {
    match stage {
        Stage::DebugInfo => LoadEvent::Stage("reading debug info".to_owned()),
        Stage::Records(p) => LoadEvent::Records {
            done: p.records_done,
            total: p.records_total,
        },
    }
}

/// Opens FILE as a profile (it starts with the profile magic) or a JSON report (it starts
/// with `{`).
fn open(args: &TuiArgs) -> anyhow::Result<Input> {
    let file = &args.file;
    let mut head = Vec::with_capacity(MAGIC.len());
    std::fs::File::open(file)
        .and_then(|f| f.take(MAGIC.len() as u64).read_to_end(&mut head))
        .with_context(|| format!("cannot read {}", file.display()))?;
    if head.is_empty() {
        bail!(
            "{}: the file is empty: neither a dprof profile nor a JSON report",
            file.display()
        );
    }
    if head.starts_with(&MAGIC) || MAGIC.starts_with(&head) || crate::perf_data::is_perf_data(file)
    {
        return open_profile(file, &args.analysis).map(|p| Input::Profile(Box::new(p)));
    }
    if head.trim_ascii_start().first() == Some(&b'{') {
        if args.cache.is_some() {
            bail!(
                "{} is a JSON report: its views were computed when it was written; --cache \
                 applies to profiles (dprof report --json --cache SPEC PROFILE writes one with \
                 it)",
                file.display()
            );
        }
        return open_json(file, &args.analysis).map(Input::Report);
    }
    bail!(
        "{}: neither a dprof profile (bad magic at offset 0) nor a JSON report from dprof \
         report --json",
        file.display()
    );
}

fn open_json(file: &Path, analysis: &AnalysisArgs) -> anyhow::Result<Box<Report>> {
    if analysis.vmlinux.is_some() || analysis.type_map.is_some() {
        bail!(
            "{} is a JSON report: its structs and fields were named when it was written; \
             --vmlinux, --debug-dir and --type-map apply to profiles",
            file.display()
        );
    }
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    serde_json::from_str::<Report>(&text)
        .map(Box::new)
        .map_err(|e| {
            // `dprof report --json --type NAME` writes one type: say so rather than "missing
            // field".
            let one_type = serde_json::from_str::<serde_json::Value>(&text)
                .is_ok_and(|v| v.get("profile").is_none() && v.get("fields").is_some());
            if one_type {
                anyhow::anyhow!(
                    "{}: this JSON is one type (dprof report --json --type); the browser needs \
                 the whole report: dprof report --json PROFILE > FILE",
                    file.display()
                )
            } else {
                anyhow::Error::new(e).context(format!(
                    "{}: not a report written by dprof report --json",
                    file.display()
                ))
            }
        })
}
