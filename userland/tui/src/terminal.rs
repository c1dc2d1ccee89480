//! Taking the terminal (raw mode, alternate screen) and giving it back, whatever happens: on
//! return, on error, and on a panic in any thread.

use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::Terminal;

/// Whether the terminal is ours now; `restore` gives it back once however often it is called
/// (the guard's drop and the panic hook may both call it).
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The terminal, taken; dropping the guard gives it back.
pub(crate) struct TerminalGuard {
    pub(crate) terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalGuard {
    /// Takes the terminal: raw mode, alternate screen, hidden cursor.
    pub(crate) fn take() -> io::Result<Self> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        TAKEN.store(true, Ordering::SeqCst);
        // From here on a failure gives the terminal back (the `?`s below drop nothing that
        // would, so restore by hand).
        let entered = execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
            .and_then(|()| Terminal::new(CrosstermBackend::new(io::stdout())));
        match entered {
            Ok(terminal) => Ok(Self { terminal }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Gives the terminal back: leaves the alternate screen, shows the cursor, ends raw mode.
/// Errors are ignored: there is nothing better to do with a terminal that will not listen.
fn restore() {
    if TAKEN.swap(false, Ordering::SeqCst) {
        let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
        let _ = terminal::disable_raw_mode();
    }
}

/// A panic, in the draw loop or the loader thread, gives the terminal back before its message
/// is printed, so the message is readable and the shell usable.
fn install_panic_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
