//! The tracing data `perf record` stores with tracepoint events (a perf.data's `TRACING_DATA`
//! feature section): among other things, the `format` file of every recorded tracepoint as
//! tracefs gave it while recording, so that a raw record's fields can be found without the
//! tracefs of the machine that recorded. The layout is perf's (`util/trace-event-info.c`
//! writes it, `util/trace-event-read.c` reads it):
//!
//! ```text
//! "\x17\x08\x44tracing"  version "\0"  endian (1 byte: 1 big)  long size (1)  page size (u32)
//! "header_page\0"  size (u64)  bytes
//! "header_event\0"  size (u64)  bytes
//! ftrace formats: count (u32), then each: size (u64)  bytes
//! event formats: systems (u32), then each: name "\0"  count (u32), then each: size (u64)  bytes
//! (then kallsyms, printk formats and saved command lines, which are not read here)
//! ```

/// What starts the tracing data.
const MAGIC: &[u8] = b"\x17\x08\x44tracing";

/// One tracepoint's format, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventFormat {
    /// Its system (`kmem`).
    pub(crate) system: String,
    /// The text of its `format` file, which [`super::tracefs::Format::parse`] reads.
    pub(crate) text: String,
}

/// Reads the section's bytes in order, every length checked against what is left.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    big_endian: bool,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, len: u64, what: &str) -> Result<&'a [u8], String> {
        let left = self.bytes.len() - self.at;
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= left)
            .ok_or_else(|| {
                format!(
                    "{what} at byte {} claims {len} bytes, and {left} are left",
                    self.at
                )
            })?;
        let out = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b: [u8; 4] = self
            .take(4, what)?
            .try_into()
            .map_err(|_| what.to_owned())?;
        Ok(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let b: [u8; 8] = self
            .take(8, what)?
            .try_into()
            .map_err(|_| what.to_owned())?;
        Ok(if self.big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    /// A NUL-terminated string, without its NUL.
    fn c_str(&mut self, what: &str) -> Result<&'a [u8], String> {
        let rest = &self.bytes[self.at..];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| format!("{what} at byte {} has no end", self.at))?;
        self.at += len + 1;
        Ok(&rest[..len])
    }

    /// `name` followed by a u64 size and that many bytes, which are skipped.
    fn named_block(&mut self, name: &[u8]) -> Result<(), String> {
        let what = String::from_utf8_lossy(&name[..name.len() - 1]).into_owned();
        if self.take(name.len() as u64, &what)? != name {
            return Err(format!("no {what} where perf writes it"));
        }
        let size = self.u64(&what)?;
        self.take(size, &what)?;
        Ok(())
    }
}

/// The format of every tracepoint in `section`, the `TRACING_DATA` feature section of a
/// perf.data.
///
/// # Errors
/// A phrase saying where the section is not what perf writes.
pub(crate) fn event_formats(section: &[u8]) -> Result<Vec<EventFormat>, String> {
    if !section.starts_with(MAGIC) {
        return Err("it does not start with perf's tracing data magic".to_owned());
    }
    let mut c = Cursor {
        bytes: section,
        at: MAGIC.len(),
        big_endian: false,
    };
    c.c_str("the version")?;
    c.big_endian = c.take(1, "the byte order")?[0] != 0;
    c.take(1, "the long size")?;
    c.u32("the page size")?;
    c.named_block(b"header_page\0")?;
    c.named_block(b"header_event\0")?;
    let ftrace = c.u32("the ftrace format count")?;
    for _ in 0..ftrace {
        let size = c.u64("an ftrace format")?;
        c.take(size, "an ftrace format")?;
    }
    let systems = c.u32("the system count")?;
    let mut formats = Vec::new();
    for _ in 0..systems {
        let system = String::from_utf8_lossy(c.c_str("a system name")?).into_owned();
        let count = c.u32("an event count")?;
        for _ in 0..count {
            let size = c.u64("an event format")?;
            let text = String::from_utf8_lossy(c.take(size, "an event format")?).into_owned();
            formats.push(EventFormat {
                system: system.clone(),
                text,
            });
        }
    }
    Ok(formats)
}

#[cfg(test)]
pub(crate) mod tests;
