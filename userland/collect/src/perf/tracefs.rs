//! The kmem tracepoints as this kernel defines them: where tracefs is (mounting it when it is
//! not), each event's id, and where each field lies in its raw record. Fields are read from
//! the event's `format` file, never assumed: Linux 6.1's `kmem_cache_alloc` has no cache name,
//! newer kernels' has one.

use std::path::{Path, PathBuf};

use super::error::PerfError;

/// Where tracefs is usually mounted, tried in order.
const MOUNT_POINTS: [&str; 2] = ["sys/kernel/tracing", "sys/kernel/debug/tracing"];

/// How a field is stored in the raw record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldKind {
    /// An integer of `size` bytes at `offset`.
    Scalar,
    /// A `__data_loc` string: a u32 at `offset` whose low half is the string's offset in the
    /// record and whose high half its length.
    DataLoc,
}

/// One field of a tracepoint's raw record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) offset: usize,
    pub(crate) size: usize,
    pub(crate) kind: FieldKind,
}

/// A tracepoint's id and its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Format {
    pub(crate) name: String,
    pub(crate) id: u64,
    pub(crate) fields: Vec<Field>,
}

impl Format {
    /// Parses the text of an event's `format` file.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("name:") {
                name = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("ID:") {
                id = Some(
                    rest.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("bad ID line {line:?}"))?,
                );
            } else if line.starts_with("field:") {
                fields.push(parse_field(line)?);
            }
        }
        Ok(Self {
            name: name.ok_or("no name line")?,
            id: id.ok_or("no ID line")?,
            fields,
        })
    }

    /// The field called `name`, if this kernel's event has it.
    pub(crate) fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// `field:unsigned long call_site;\toffset:8;\tsize:8;\tsigned:0;`
fn parse_field(line: &str) -> Result<Field, String> {
    let bad = || format!("bad field line {line:?}");
    let mut parts = line.split(';').map(str::trim);
    let decl = parts
        .next()
        .and_then(|p| p.strip_prefix("field:"))
        .ok_or_else(bad)?;
    let mut number = |key: &str| -> Result<usize, String> {
        parts
            .next()
            .and_then(|p| p.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(bad)
    };
    let offset = number("offset:")?;
    let size = number("size:")?;
    // The name is the declaration's last word, without an array suffix.
    let last = decl.rsplit(' ').next().ok_or_else(bad)?;
    let name = last
        .split('[')
        .next()
        .unwrap_or(last)
        .trim_start_matches('*');
    let kind = if decl.starts_with("__data_loc") {
        FieldKind::DataLoc
    } else {
        FieldKind::Scalar
    };
    if name.is_empty() || (kind == FieldKind::DataLoc && size != 4) {
        return Err(bad());
    }
    Ok(Field {
        name: name.to_owned(),
        offset,
        size,
        kind,
    })
}

/// Reads field values out of one raw tracepoint record.
pub(crate) struct RawRecord<'a>(pub(crate) &'a [u8]);

impl RawRecord<'_> {
    /// An unsigned scalar field (1, 2, 4 or 8 bytes), if the record holds it.
    pub(crate) fn unsigned(&self, field: &Field) -> Option<u64> {
        let bytes = self
            .0
            .get(field.offset..field.offset.checked_add(field.size)?)?;
        let mut buf = [0u8; 8];
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(u64::from_le_bytes(buf))
    }

    /// A signed 4-byte field.
    pub(crate) fn signed(&self, field: &Field) -> Option<i64> {
        let v = self.unsigned(field)?;
        Some(match field.size {
            4 => i64::from(v as u32 as i32),
            _ => v as i64,
        })
    }

    /// A `__data_loc` string, without its NUL.
    pub(crate) fn string(&self, field: &Field) -> Option<&[u8]> {
        let loc = self.unsigned(field)? as u32;
        let (offset, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
        let bytes = self.0.get(offset..offset.checked_add(len)?)?;
        Some(bytes.split(|&b| b == 0).next().unwrap_or(bytes))
    }
}

/// Where tracefs is under `root`, mounting it at `sys/kernel/tracing` when it is not mounted
/// anywhere; the second value says whether this call mounted it.
///
/// # Errors
/// [`PerfError::NoTracefs`] when it is neither mounted nor mountable.
pub(crate) fn locate(root: &Path) -> Result<(PathBuf, bool), PerfError> {
    for dir in MOUNT_POINTS {
        let path = root.join(dir);
        if path.join("events").is_dir() {
            return Ok((path, false));
        }
    }
    let target = root.join(MOUNT_POINTS[0]);
    nix::mount::mount(
        Some("tracefs"),
        &target,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|errno| PerfError::NoTracefs {
        path: target.clone(),
        source: std::io::Error::from(errno),
    })?;
    if target.join("events").is_dir() {
        Ok((target, true))
    } else {
        Err(PerfError::NoTracefs {
            path: target,
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
    }
}

/// The format of event `system:name` under the tracefs at `tracefs`, or `None` when this
/// kernel has no such event.
///
/// # Errors
/// [`PerfError::BadFormat`] when its format file is there but does not parse.
pub(crate) fn format(
    tracefs: &Path,
    system: &str,
    name: &str,
) -> Result<Option<Format>, PerfError> {
    let path = tracefs
        .join("events")
        .join(system)
        .join(name)
        .join("format");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    Format::parse(&text)
        .map(Some)
        .map_err(|message| PerfError::BadFormat { path, message })
}

#[cfg(test)]
pub(crate) mod tests;
