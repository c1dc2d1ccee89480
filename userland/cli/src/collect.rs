//! `dprof collect` and `dprof causal`: their arguments, progress and messages, around the
//! drivers of `dprof_collect`.

mod causal;
mod record;

use std::process::ExitCode;

pub use causal::CausalArgs;
pub use record::{run, CollectArgs, UsageError};

/// `dprof causal`.
pub fn run_causal(args: &CausalArgs) -> anyhow::Result<ExitCode> {
    causal::run(args)
}
