//! What the drivers tell the person running them: progress, lines and warnings, through an
//! [`Observer`] the front end implements.

use std::time::Duration;

/// Where a run stands, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// `dprof collect`: what was written so far.
    Collecting {
        /// Records written.
        records: u64,
        /// Bytes of records written.
        bytes: u64,
        /// Records the module lost so far.
        lost: u64,
        /// Time since the start.
        elapsed: Duration,
    },
    /// `dprof causal`'s profiling phase.
    Profiling,
    /// `dprof causal`: the experiment just done.
    Experiment {
        /// Experiments done.
        done: u32,
        /// Its type.
        type_name: &'a str,
        /// Its virtual speedup.
        speedup_percent: u32,
        /// The experiment length from now on.
        length: Duration,
        /// Its fewest visits of a progress point.
        fewest_visits: u64,
    },
}

/// The front end of a run: shows progress and passes lines on to the person.
pub trait Observer {
    /// Where the run stands now (replaces what was shown before).
    fn progress(&mut self, progress: &Progress<'_>);
    /// A line for the person (`dprof: ` goes before it).
    fn say(&mut self, line: &str);
    /// Something went wrong, and the run goes on (`dprof: warning: ` goes before it).
    fn warn(&mut self, message: &str);
    /// The run is over: no more progress.
    fn finished(&mut self);
}

/// Asked between reads: `Some(signal)` once the person asked the run to stop (the signal
/// that asked), `None` while it should go on.
pub type Interrupt<'a> = &'a dyn Fn() -> Option<i32>;
