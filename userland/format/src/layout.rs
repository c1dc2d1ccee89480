//! What the reader and the block merge share: where a profile's bytes come from, and what
//! opening it found.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::codec::{BlockInfo, CodeKey};
use crate::error::ProfileError;
use crate::header::{ProfileHeader, StopInfo};
use crate::page_owners::PageOwners;
use crate::text::KernelText;

/// Where the bytes come from. Everything reads through [`Source::read_at`], so files and byte
/// vectors share the parser and the iterator.
#[derive(Debug)]
pub(crate) enum Source {
    File { file: File, path: PathBuf },
    Memory(Vec<u8>),
}

impl Source {
    /// Fills `buf` from `offset`; the callers stay within the length found at open.
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), ProfileError> {
        match self {
            Self::File { file, path } => {
                file.read_exact_at(buf, offset)
                    .map_err(|source| ProfileError::Io {
                        path: path.clone(),
                        source,
                    })
            }
            Self::Memory(bytes) => {
                let src = usize::try_from(offset)
                    .ok()
                    .and_then(|start| bytes.get(start..start.checked_add(buf.len())?));
                match src {
                    Some(src) => {
                        buf.copy_from_slice(src);
                        Ok(())
                    }
                    None => Err(self.io_error(io::ErrorKind::UnexpectedEof.into())),
                }
            }
        }
    }

    fn io_error(&self, source: io::Error) -> ProfileError {
        let path = match self {
            Self::File { path, .. } => path.clone(),
            Self::Memory(_) => PathBuf::from("(profile in memory)"),
        };
        ProfileError::Io { path, source }
    }

    /// Reads `len` bytes at `offset` into a new vector (small sections only).
    pub(crate) fn read_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>, ProfileError> {
        let mut buf = vec![0; len];
        self.read_at(offset, &mut buf)?;
        Ok(buf)
    }
}

/// What `reader::parse` found: the small sections and where the records are.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The file's format version: 1 (Records sections) or 2 (Code and Block sections).
    pub(crate) version: u32,
    /// Version 2: the code table, every Code section's entries in order.
    pub(crate) code: Vec<CodeKey>,
    /// Version 2: every Block section, in file order.
    pub(crate) blocks: Vec<BlockInfo>,
    pub(crate) header: ProfileHeader,
    pub(crate) stop: StopInfo,
    pub(crate) kallsyms: Vec<u8>,
    pub(crate) modules: Vec<u8>,
    /// The Btf section's payload, when the file has one.
    pub(crate) btf: Option<Vec<u8>>,
    pub(crate) text: KernelText,
    /// The `PageOwners` section (empty without one).
    pub(crate) page_owners: PageOwners,
    /// Offset of the first section after Modules and Btf: the first Records section, if any.
    pub(crate) records_start: u64,
    /// Offset of the section that ends the Records sections (`PageOwners`, Text or Stop).
    pub(crate) records_end: u64,
    /// The End section's counts, in its order: records, bytes of records, Records sections.
    /// Bytes and sections were checked against the section headers at open; records are
    /// checked by the iterator.
    pub(crate) end: [u64; 3],
    /// Offset of the End section's payload (its record count is the first field).
    pub(crate) end_payload: u64,
    pub(crate) file_size: u64,
}

/// The error for a file whose sections are no longer what `Profile::open` found.
pub(crate) fn changed(source: &Source, offset: u64) -> ProfileError {
    source.io_error(io::Error::other(format!(
        "the section at offset {offset} is not what it was when the profile was opened: the \
         file changed while it was read"
    )))
}
