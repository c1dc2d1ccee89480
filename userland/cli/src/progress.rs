//! `dprof progress`: signal a user progress point of a running `dprof causal`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use dprof_collect::device::ProgressSignal;

/// Count visits of a user progress point (`dprof causal --progress user:NAME`).
///
/// Run it where the workload finishes a unit of work (a request, a transaction), or let the
/// program write NAME to /dev/dprof itself through a write-only open, which is cheaper:
///   int fd = open("/dev/dprof", O_WRONLY);  write(fd, "NAME", strlen("NAME"));
/// Either works beside the collector. With no `dprof causal` running that has a user point
/// of this name, it fails and says so.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[expect(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct ProgressArgs {
    /// The user progress point's name.
    #[arg(value_name = "NAME")]
    name: String,
    /// Count this many visits at once.
    #[arg(long, value_name = "N", default_value = "1",
          value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// The dprof device.
    #[arg(long, value_name = "PATH", default_value = dprof_abi::DEVICE_PATH)]
    device: PathBuf,
}

pub fn run(args: &ProgressArgs) -> anyhow::Result<ExitCode> {
    let mut signal = ProgressSignal::open_path(&args.device)?;
    for done in 0..args.count {
        signal
            .signal(&args.name)
            .with_context(|| format!("after {done} of {} visits", args.count))?;
    }
    Ok(ExitCode::SUCCESS)
}
