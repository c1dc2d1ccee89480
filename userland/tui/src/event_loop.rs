//! The draw loop: take the terminal, start the input and loader threads, draw the state after
//! every batch of events, give the terminal back.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use dprof_model::Report;

use crate::app::App;
use crate::event::{read_input, Event, LoadEvent};
use crate::terminal::TerminalGuard;

/// How a browsing session ended.
#[derive(Debug)]
pub enum Outcome<E> {
    /// The person quit.
    Quit,
    /// The loader failed with this error; the terminal is already given back, so the caller
    /// can print it.
    LoadFailed(E),
}

/// Why the browser could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuiError {
    /// The terminal could not be set up or drawn on.
    #[error("cannot use the terminal")]
    Terminal(#[source] io::Error),
    /// The loader panicked (its message was printed by the panic hook).
    #[error("the analysis stopped without a report (it panicked)")]
    LoaderPanicked,
}

/// Browses the report that `load` makes, full screen, until the person quits.
///
/// `load` runs once, in a background thread, telling its progress through the callback it is
/// given; meanwhile the browser shows that progress and stays responsive (`q` quits). If the
/// person quits first, the loader thread is left to finish on its own: callers are expected to
/// exit. `source` names what is browsed (the file), for titles.
///
/// Call it only with a terminal on standard input and output; check the input before, so that
/// errors a person can fix (a missing or corrupt file) are printed on a normal screen.
///
/// # Errors
/// [`TuiError::Terminal`] when the terminal cannot be set up or written;
/// [`TuiError::LoaderPanicked`] when `load` panicked. The terminal is given back in every case.
pub fn run<E, L>(source: impl Into<String>, load: L) -> Result<Outcome<E>, TuiError>
where
    E: Send + 'static,
    L: FnOnce(&mut dyn FnMut(LoadEvent)) -> Result<Report, E> + Send + 'static,
{
    let mut app = App::new(source);
    let (sender, events) = mpsc::channel();
    let mut guard = TerminalGuard::take().map_err(TuiError::Terminal)?;
    let stop = Arc::new(AtomicBool::new(false));
    let input = {
        let (sender, stop) = (sender.clone(), Arc::clone(&stop));
        thread::Builder::new()
            .name("dprof-tui-input".to_owned())
            .spawn(move || read_input(&sender, &stop))
            .map_err(TuiError::Terminal)?
    };
    let loader = spawn_loader(sender, load).map_err(TuiError::Terminal)?;
    let ended = draw_loop(&mut guard, &mut app, &events);
    stop.store(true, Ordering::Relaxed);
    // The input thread polls its stop flag every 100 ms; a panic there was already reported.
    let _ = input.join();
    drop(guard);
    match ended? {
        Ended::Quit => Ok(Outcome::Quit),
        Ended::LoadFailed => match loader.join() {
            Ok(Some(e)) => Ok(Outcome::LoadFailed(e)),
            Ok(None) | Err(_) => Err(TuiError::LoaderPanicked),
        },
    }
}

/// Why the draw loop ended.
enum Ended {
    Quit,
    LoadFailed,
}

/// Runs `load` in its own thread. The thread returns the loader's error, or `None` when it
/// made a report or panicked; either way the draw loop hears how it ended.
fn spawn_loader<E, L>(sender: mpsc::Sender<Event>, load: L) -> io::Result<JoinHandle<Option<E>>>
where
    E: Send + 'static,
    L: FnOnce(&mut dyn FnMut(LoadEvent)) -> Result<Report, E> + Send + 'static,
{
    thread::Builder::new()
        .name("dprof-tui-load".to_owned())
        .spawn(move || {
            let progress_sender = sender.clone();
            let mut progress = move |e| {
                // The browser may be gone (the person quit): nothing to tell.
                let _ = progress_sender.send(Event::Load(e));
            };
            match panic::catch_unwind(AssertUnwindSafe(|| load(&mut progress))) {
                Ok(Ok(report)) => {
                    let _ = sender.send(Event::Loaded(Box::new(report)));
                    None
                }
                Ok(Err(e)) => {
                    let _ = sender.send(Event::LoadFailed);
                    Some(e)
                }
                Err(_) => {
                    let _ = sender.send(Event::LoadFailed);
                    None
                }
            }
        })
}

fn draw_loop(
    guard: &mut TerminalGuard,
    app: &mut App,
    events: &Receiver<Event>,
) -> Result<Ended, TuiError> {
    loop {
        guard
            .terminal
            .draw(|frame| frame.render_widget(&*app, frame.area()))
            .map_err(TuiError::Terminal)?;
        // One event, then whatever else is already waiting, then one draw: progress and
        // held-down keys do not queue up draws.
        let Ok(first) = events.recv() else {
            return Ok(Ended::Quit);
        };
        for event in std::iter::once(first).chain(events.try_iter()) {
            if matches!(event, Event::LoadFailed) {
                return Ok(Ended::LoadFailed);
            }
            app.handle(event);
            if app.should_quit() {
                return Ok(Ended::Quit);
            }
        }
    }
}
