//! The command being profiled, and what ends a run: the person, the command's exit, or the
//! duration.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use dprof_format::StopReason;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::error::CollectError;
use crate::observer::{Interrupt, Observer};

/// The child process being profiled.
#[derive(Debug)]
pub struct Workload {
    child: Child,
    /// Set once it has exited.
    status: Option<ExitStatus>,
    /// Readable once it has exited (`pidfd_open`, Linux 5.3); `None` where the kernel has
    /// none.
    pidfd: Option<OwnedFd>,
}

impl Workload {
    /// Starts `command` (program and arguments), if there is one.
    ///
    /// # Errors
    /// [`CollectError::Spawn`] when it cannot be started.
    pub(crate) fn spawn(command: &[OsString]) -> Result<Option<Self>, CollectError> {
        let Some((program, rest)) = command.split_first() else {
            return Ok(None);
        };
        let child = std::process::Command::new(program)
            .args(rest)
            .spawn()
            .map_err(|source| CollectError::Spawn {
                program: program.to_string_lossy().into_owned(),
                source,
            })?;
        let pidfd = pidfd_of(&child);
        Ok(Some(Self {
            child,
            status: None,
            pidfd,
        }))
    }

    /// Sleeps until it exits or `timeout` passes, whichever is first, without reaping it
    /// ([`Ending::check`] does): a loop that must notice the exit at once need not wake
    /// often. Without a pidfd it sleeps a millisecond.
    pub(crate) fn wait_for_exit(&self, timeout: Duration) {
        let Some(fd) = &self.pidfd else {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return;
        };
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one pollfd, valid for the call; the descriptor is ours and open. An
        // interrupted or failed poll only ends the wait early.
        unsafe { libc::poll(&raw mut poll, 1, ms) };
    }

    /// Whether it has been seen to exit.
    #[must_use]
    pub fn has_exited(&self) -> bool {
        self.status.is_some()
    }

    /// Sends it `signal`.
    pub(crate) fn terminate(&self, signal: i32) {
        // The pid is our own child, not yet waited for, so it cannot have been reused.
        if let (Ok(pid), Ok(signal)) = (i32::try_from(self.child.id()), Signal::try_from(signal)) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// Stops it with SIGTERM after a failure, and waits for it.
    pub(crate) fn stop_after_failure(&mut self) {
        self.terminate(libc::SIGTERM);
        let _ = self.child.wait();
    }

    /// Its exit status once collection is over: waited for if the run was interrupted
    /// first (`signal`, the signal that interrupted it).
    ///
    /// # Errors
    /// [`CollectError::Wait`] when it cannot be waited for.
    pub fn exit_status(
        mut self,
        signal: Option<i32>,
        observer: &mut dyn Observer,
    ) -> Result<ExitStatus, CollectError> {
        match self.status {
            Some(status) => Ok(status),
            None => self.wait_after_interrupt(signal, observer),
        }
    }

    /// Waits for the command after dprof itself was interrupted. SIGINT from a terminal
    /// reaches the whole process group, so the command normally exits by itself; if it has
    /// not within a second (the signal was aimed at dprof alone), it is passed on.
    fn wait_after_interrupt(
        &mut self,
        signal: Option<i32>,
        observer: &mut dyn Observer,
    ) -> Result<ExitStatus, CollectError> {
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().map_err(CollectError::Wait)? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let signal = signal.unwrap_or(libc::SIGTERM);
        observer.say(&format!(
            "passing signal {signal} on to the command and waiting for it to exit"
        ));
        self.terminate(signal);
        self.child.wait().map_err(CollectError::Wait)
    }
}

/// A descriptor that becomes readable when `child` exits, if this kernel has `pidfd_open`.
fn pidfd_of(child: &Child) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(child.id()).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1; the pid is
    // our own child, not yet waited for, so it cannot have been reused.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: a descriptor just returned to us, owned by nothing else.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What ends the run, checked between reads.
pub(crate) struct Ending<'a> {
    pub(crate) interrupt: Interrupt<'a>,
    pub(crate) duration: Option<Duration>,
    pub(crate) start: Instant,
}

impl Ending<'_> {
    /// Why the run ends now, if it does: the person, the command's exit or the duration.
    pub(crate) fn check(
        &self,
        workload: &mut Option<Workload>,
    ) -> Result<Option<StopReason>, CollectError> {
        if let Some(signal) = (self.interrupt)() {
            return Ok(Some(StopReason::Interrupted { signal }));
        }
        if let Some(w) = workload.as_mut() {
            if let Some(status) = w.child.try_wait().map_err(CollectError::Wait)? {
                w.status = Some(status);
                return Ok(Some(match status.signal() {
                    Some(signal) => StopReason::CommandKilled { signal },
                    None => StopReason::CommandExited {
                        status: status.code().unwrap_or(-1),
                    },
                }));
            }
        }
        if self.duration.is_some_and(|d| self.start.elapsed() >= d) {
            return Ok(Some(StopReason::DurationElapsed));
        }
        Ok(None)
    }
}
