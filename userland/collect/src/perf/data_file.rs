//! A perf.data's layout, checked before `linux-perf-data` reads it: that reader trusts the
//! sizes the file states and allocates them, so a cut or damaged file would make it allocate
//! without bound. Here every section, the feature sections and the event descriptions are
//! checked to lie within the file. The layout is perf's `perf_file_header`
//! (`tools/perf/util/header.h`).

use super::error::ImportError;

/// What starts a perf.data written on a little-endian machine.
pub const MAGIC: [u8; 8] = *b"PERFILE2";
/// The same, written on a big-endian one.
const BIG_ENDIAN_MAGIC: [u8; 8] = *b"2ELIFREP";
/// `perf_file_header`: magic, size, `attr_size`, three sections and 256 feature bits.
const FILE_HEADER_SIZE: u64 = 104;
/// `perf_pipe_file_header`: magic and size.
const PIPE_HEADER_SIZE: u64 = 16;
/// `PERF_ATTR_SIZE_VER0`, the smallest `perf_event_attr`.
const ATTR_SIZE_MIN: u64 = 64;
/// The feature bit of the event descriptions (`HEADER_EVENT_DESC`).
const EVENT_DESC: usize = 12;

fn corrupt(what: impl Into<String>) -> ImportError {
    ImportError::Corrupt { what: what.into() }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Reads a section's bytes in order, every count checked against what is left.
struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Walk<'_> {
    fn skip(&mut self, len: u64, what: &str) -> Result<(), ImportError> {
        let left = self.bytes.len() - self.at;
        match usize::try_from(len) {
            Ok(len) if len <= left => {
                self.at += len;
                Ok(())
            }
            _ => Err(corrupt(format!(
                "the event descriptions claim {len} bytes for {what}, and {left} are left"
            ))),
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32, ImportError> {
        let b = self
            .bytes
            .get(self.at..self.at + 4)
            .ok_or_else(|| corrupt(format!("the event descriptions end inside {what}")))?;
        self.at += 4;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The section at header offset `at` (offset and size), checked to lie in the file.
fn section(bytes: &[u8], at: usize, name: &str) -> Result<(u64, u64), ImportError> {
    let (offset, size) = (u64_at(bytes, at), u64_at(bytes, at + 8));
    let len = bytes.len() as u64;
    match offset.checked_add(size) {
        Some(end) if end <= len => Ok((offset, size)),
        _ => Err(corrupt(format!(
            "its {name} ends at byte {}, and the file has {len} bytes: it was cut short",
            u128::from(offset) + u128::from(size)
        ))),
    }
}

/// Checks that `bytes` are a whole perf.data in perf's file format whose sections all lie in
/// the file, with event descriptions that do too.
///
/// # Errors
/// [`ImportError::NotPerfData`], [`ImportError::BigEndian`], [`ImportError::Pipe`], or
/// [`ImportError::Corrupt`] saying what does not fit.
pub(crate) fn check(bytes: &[u8]) -> Result<(), ImportError> {
    let head = &bytes[..bytes.len().min(8)];
    if head.len() == 8 && head == BIG_ENDIAN_MAGIC {
        return Err(ImportError::BigEndian);
    }
    if head.len() < 8 || head != MAGIC {
        return Err(ImportError::NotPerfData);
    }
    let len = bytes.len() as u64;
    if len < PIPE_HEADER_SIZE {
        return Err(corrupt(format!(
            "the file has {len} bytes, and perf's header alone has {FILE_HEADER_SIZE}"
        )));
    }
    let header_size = u64_at(bytes, 8);
    if header_size == PIPE_HEADER_SIZE {
        return Err(ImportError::Pipe);
    }
    if header_size < FILE_HEADER_SIZE {
        return Err(corrupt(format!(
            "its header claims {header_size} bytes, and perf's has {FILE_HEADER_SIZE}"
        )));
    }
    if len < FILE_HEADER_SIZE {
        return Err(corrupt(format!(
            "the file has {len} bytes, and perf's header alone has {FILE_HEADER_SIZE}"
        )));
    }
    let attr_size = u64_at(bytes, 16);
    if !(ATTR_SIZE_MIN..=4096).contains(&attr_size) {
        return Err(corrupt(format!(
            "its header gives event attributes {attr_size} bytes each"
        )));
    }
    section(bytes, 24, "attribute section")?;
    let (data_offset, data_size) = section(bytes, 40, "data section")?;
    section(bytes, 56, "event type section")?;
    // One (offset, size) pair per feature bit set, right after the data.
    let features: Vec<usize> = (0..256)
        .filter(|&bit| bytes[72 + bit / 8] & (1 << (bit % 8)) != 0)
        .collect();
    let table = data_offset + data_size;
    if table + 16 * features.len() as u64 > len {
        return Err(corrupt(format!(
            "its feature table (from byte {table}) runs past the end of the file ({len} bytes): \
             it was cut short"
        )));
    }
    let mut event_desc = None;
    for (i, &bit) in features.iter().enumerate() {
        let at = usize::try_from(table).unwrap_or(usize::MAX) + 16 * i;
        let (offset, size) = section(bytes, at, &format!("feature section {bit}"))?;
        if bit == EVENT_DESC {
            // Within the file, as just checked.
            event_desc = Some(&bytes[offset as usize..(offset + size) as usize]);
        }
    }
    let event_desc = event_desc.ok_or_else(|| {
        corrupt(
            "it has no event descriptions (EVENT_DESC), which perf has written since Linux 3.10",
        )
    })?;
    check_event_desc(event_desc)
}

/// The event descriptions: `nr`, `attr_size`, then per event its attribute, `nr_ids`, a
/// length-prefixed name and the ids; every count must fit in the section.
fn check_event_desc(section: &[u8]) -> Result<(), ImportError> {
    let mut w = Walk {
        bytes: section,
        at: 0,
    };
    let nr = w.u32("the event count")?;
    let attr_size = u64::from(w.u32("the attribute size")?);
    if attr_size < ATTR_SIZE_MIN {
        return Err(corrupt(format!(
            "the event descriptions give attributes {attr_size} bytes each"
        )));
    }
    for _ in 0..nr {
        w.skip(attr_size, "an attribute")?;
        let ids = w.u32("an id count")?;
        let name = w.u32("a name's length")?;
        w.skip(u64::from(name), "a name")?;
        w.skip(8 * u64::from(ids), "the ids")?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
