//! `dprof`: collect kernel data profiles from `/dev/dprof` and look at them.

mod collect;
mod dump;
mod ibs_decode;
mod perf_data;
mod progress;
mod report;
mod tui;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// dprof: a data-centric cache-miss profiler for the Linux kernel.
///
/// dprof attributes kernel memory activity to data types (slab caches) rather than to code.
/// `dprof collect` records allocations and frees from the dprof.ko module into a profile
/// file; `dprof report` shows its data profile, `dprof tui` browses it in the terminal and
/// `dprof dump` prints its records. Profiles are self-contained: they carry the kernel
/// release, CPU and cache geometry, configuration, and kallsyms and module snapshots, so they
/// can be read on any machine.
#[derive(Debug, Parser)]
#[command(name = "dprof", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    // Boxed: its options make it the largest variant by far.
    Causal(Box<collect::CausalArgs>),
    Collect(collect::CollectArgs),
    Dump(dump::DumpArgs),
    IbsDecode(ibs_decode::IbsDecodeArgs),
    Progress(progress::ProgressArgs),
    Report(report::ReportArgs),
    Tui(tui::TuiArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Causal(args) => collect::run_causal(&args),
        Command::Collect(args) => collect::run(&args),
        Command::Dump(args) => dump::run(&args),
        Command::IbsDecode(args) => ibs_decode::run(&args),
        Command::Progress(args) => progress::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Tui(args) => tui::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if let Some(usage) = e.downcast_ref::<collect::UsageError>() {
                Cli::command()
                    .error(clap::error::ErrorKind::ArgumentConflict, &usage.0)
                    .exit()
            }
            // `{:#}` puts the whole context chain on one line.
            eprintln!("dprof: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
