//! Reading the device: batches of records on their way to the file, and the one drain loop
//! after stop.

use std::time::{Duration, Instant};

use dprof_format::ProfileWriter;

use crate::backend::Backend;
use crate::device::ReadOutcome;
use crate::error::{backend, CollectError};
use crate::observer::Observer;
use crate::tap::Tap;

/// Bytes gathered from the device before they go to the writer in one call.
pub(crate) const READ_BUFFER: usize = 1 << 20;
/// Room left in the buffer below which it is written out before the next read.
const MIN_READ_ROOM: usize = 64 << 10;
/// Longest time gathered records wait in memory while the rings are idle.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Sleep when the rings are empty.
pub(crate) const IDLE_SLEEP: Duration = Duration::from_millis(5);
/// How often the progress line asks the module for its counters.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_millis(200);
/// How long to keep reading after stop while the module answers EAGAIN instead of 0.
const DRAIN_PATIENCE: Duration = Duration::from_secs(2);

/// Gathers reads in one buffer and hands it to the writer when it is nearly full, at most a
/// second after the last time, and at the end, so that the writer is called once for many
/// records when the module hands out a few per read.
pub(crate) struct Batch {
    buf: Vec<u8>,
    filled: usize,
    last_flush: Instant,
}

impl Batch {
    pub(crate) fn new() -> Self {
        Self {
            buf: vec![0u8; READ_BUFFER],
            filled: 0,
            last_flush: Instant::now(),
        }
    }

    /// One read; gathered records go to the writer when the buffer is nearly full, when the
    /// rings are empty and the last write is a second old, and when the rings are drained.
    pub(crate) fn read<B: Backend>(
        &mut self,
        dev: &mut B,
        writer: &mut ProfileWriter,
        tap: &mut Tap,
    ) -> Result<ReadOutcome, CollectError> {
        if self.buf.len() - self.filled < MIN_READ_ROOM {
            self.flush(writer, tap)?;
        }
        let outcome = dev
            .read(self.buf.get_mut(self.filled..).unwrap_or(&mut []))
            .map_err(backend)?;
        match outcome {
            ReadOutcome::Data(n) => self.filled = (self.filled + n).min(self.buf.len()),
            ReadOutcome::Empty if self.last_flush.elapsed() < FLUSH_EVERY => {}
            ReadOutcome::Empty | ReadOutcome::Drained => self.flush(writer, tap)?,
        }
        Ok(outcome)
    }

    pub(crate) fn flush(
        &mut self,
        writer: &mut ProfileWriter,
        tap: &mut Tap,
    ) -> Result<(), CollectError> {
        self.last_flush = Instant::now();
        if self.filled > 0 {
            let bytes = self.buf.get(..self.filled).unwrap_or(&[]);
            writer.write_records(bytes)?;
            tap.see(bytes);
            self.filled = 0;
        }
        Ok(())
    }
}

/// Reads what is left in the rings after stop, until the module says "drained" (0 bytes).
pub(crate) fn drain<B: Backend>(
    dev: &mut B,
    writer: &mut ProfileWriter,
    batch: &mut Batch,
    tap: &mut Tap,
    observer: &mut dyn Observer,
) -> Result<(), CollectError> {
    match read_until_drained(observer, || batch.read(dev, writer, tap))? {
        DrainEnd::Drained => Ok(()),
        DrainEnd::GaveUp => batch.flush(writer, tap),
    }
}

/// Reads until the module says drained (after stop), handing whole records to `sink`.
pub(crate) fn drain_into<B: Backend>(
    dev: &mut B,
    buf: &mut [u8],
    sink: &mut dyn FnMut(&[u8]) -> Result<(), CollectError>,
    observer: &mut dyn Observer,
) -> Result<(), CollectError> {
    read_until_drained(observer, || {
        let outcome = dev.read(buf).map_err(backend)?;
        if let ReadOutcome::Data(n) = outcome {
            sink(buf.get(..n).unwrap_or(&[]))?;
        }
        Ok(outcome)
    })?;
    Ok(())
}

/// How [`read_until_drained`] ended.
pub(crate) enum DrainEnd {
    /// The module said drained.
    Drained,
    /// The module still answered EAGAIN after [`DRAIN_PATIENCE`] (warned).
    GaveUp,
}

/// Calls `read` (one read of the device) until the module says drained, after stop, waiting
/// at most [`DRAIN_PATIENCE`] while it answers EAGAIN. The one drain loop of `collect` and
/// `causal`.
pub(crate) fn read_until_drained(
    observer: &mut dyn Observer,
    mut read: impl FnMut() -> Result<ReadOutcome, CollectError>,
) -> Result<DrainEnd, CollectError> {
    let mut idle_since: Option<Instant> = None;
    loop {
        match read()? {
            ReadOutcome::Data(_) => idle_since = None,
            ReadOutcome::Drained => return Ok(DrainEnd::Drained),
            ReadOutcome::Empty => {
                if idle_since.get_or_insert_with(Instant::now).elapsed() > DRAIN_PATIENCE {
                    observer.warn(
                        "the module still answers EAGAIN 2 s after stop; finishing without \
                         the rest",
                    );
                    return Ok(DrainEnd::GaveUp);
                }
                std::thread::sleep(IDLE_SLEEP);
            }
        }
    }
}

/// One read: whole records, or why there are none.
pub(crate) fn read_some<'b, B: Backend>(
    dev: &mut B,
    buf: &'b mut [u8],
) -> Result<Option<&'b [u8]>, CollectError> {
    Ok(match dev.read(buf).map_err(backend)? {
        ReadOutcome::Data(n) => Some(buf.get(..n).unwrap_or(&[])),
        // A 0-byte read while running should not happen; waiting is the safe answer.
        ReadOutcome::Empty | ReadOutcome::Drained => None,
    })
}
