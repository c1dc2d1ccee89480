//! The one event type the draw loop takes, and the input thread that produces key events.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use dprof_model::Report;
use ratatui::crossterm::event::{self as term_event, KeyEvent, KeyEventKind};

/// Everything that changes the state of the browser.
#[derive(Debug)]
pub enum Event {
    /// A key was pressed.
    Key(KeyEvent),
    /// The terminal changed size (the next draw uses the new size).
    Resize,
    /// The loader reports progress.
    Load(LoadEvent),
    /// The loader finished: the report to browse.
    Loaded(Box<Report>),
    /// The loader failed; the error goes back to the caller of [`crate::run`].
    LoadFailed,
}

/// What a loader says while it works.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadEvent {
    /// It started something slow, in a few words (`reading debug info`).
    Stage(String),
    /// It analyzed `done` of `total` records.
    Records {
        /// Records analyzed so far.
        done: u64,
        /// Records in the profile.
        total: u64,
    },
    /// Something that limits the report, one sentence (the CLI prints these on stderr; here
    /// they are shown while loading and in the data profile).
    Warning(String),
}

/// Whether a part of the app handled an event (gitui's components protocol): the first part
/// that consumes a key ends its handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventState {
    /// Handled: no one else sees it.
    Consumed,
    /// Not handled: the next part may take it.
    NotConsumed,
}

impl EventState {
    /// Whether the event was handled.
    #[must_use]
    pub const fn is_consumed(self) -> bool {
        matches!(self, Self::Consumed)
    }
}

/// How often the input thread looks at its stop flag.
const INPUT_POLL: Duration = Duration::from_millis(100);

/// Reads terminal events into `events` until `stop` is set or the receiver is gone. Polls
/// rather than blocking in `read`, so that it ends before the terminal is given back: a thread
/// still reading would take the shell's next keys.
pub(crate) fn read_input(events: &Sender<Event>, stop: &Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match term_event::poll(INPUT_POLL) {
            Ok(false) => continue,
            Ok(true) => {}
            // The terminal is gone: nothing more will come.
            Err(_) => return,
        }
        let event = match term_event::read() {
            // Only presses: terminals with key-release reporting would send each key twice.
            Ok(term_event::Event::Key(key)) if key.kind == KeyEventKind::Press => Event::Key(key),
            Ok(term_event::Event::Resize(..)) => Event::Resize,
            Ok(_) => continue,
            Err(_) => return,
        };
        if events.send(event).is_err() {
            return;
        }
    }
}
