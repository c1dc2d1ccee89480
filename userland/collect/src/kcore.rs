//! Reading live kernel memory from `/proc/kcore`, an ELF core file whose `PT_LOAD` segments
//! map kernel virtual addresses (text, modules, direct map) to file offsets. The collector
//! copies the code of the functions that history traps land in, so that the analysis can
//! decode them exactly as they ran (run-time patching and modules included).
//!
//! Only the ELF header and program headers are parsed (with `object`); the file's size is
//! that of the address space, so it is read with positioned reads, never whole.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use object::elf::{FileHeader64, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::LittleEndian;

use dprof_format::KernelText;

/// Why kernel memory could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KcoreError {
    /// The file could not be opened or read.
    #[error("cannot read {} (needs root and CONFIG_PROC_KCORE)", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a 64-bit little-endian ELF core file.
    #[error("{} is not a 64-bit little-endian ELF core file: {message}", path.display())]
    NotElf {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
}

/// Largest program header table read (kcore has a few dozen entries).
const MAX_HEADERS_BYTES: u64 = 1 << 20;

/// An opened `/proc/kcore` (or a file of the same shape).
#[derive(Debug)]
pub struct Kcore {
    file: File,
    path: PathBuf,
    /// (virtual address, file offset, size in the file), from the `PT_LOAD` segments.
    segments: Vec<(u64, u64, u64)>,
}

impl Kcore {
    /// Opens `path` and reads its segment table.
    ///
    /// # Errors
    /// [`KcoreError::Io`] or [`KcoreError::NotElf`].
    pub fn open(path: &Path) -> Result<Self, KcoreError> {
        let io = |source| KcoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        let not_elf = |message: String| KcoreError::NotElf {
            path: path.to_path_buf(),
            message,
        };
        let file = File::open(path).map_err(io)?;
        let mut head = vec![0u8; 64];
        file.read_exact_at(&mut head, 0).map_err(io)?;
        let header =
            FileHeader64::<LittleEndian>::parse(&*head).map_err(|e| not_elf(e.to_string()))?;
        let endian = header.endian().map_err(|e| not_elf(e.to_string()))?;
        let table_end = header.e_phoff(endian).saturating_add(
            u64::from(header.e_phnum(endian)) * u64::from(header.e_phentsize(endian)),
        );
        if table_end > MAX_HEADERS_BYTES {
            return Err(not_elf(format!("program headers end at {table_end}")));
        }
        let mut data = vec![0u8; usize::try_from(table_end).unwrap_or(0).max(64)];
        file.read_exact_at(&mut data, 0).map_err(io)?;
        let header =
            FileHeader64::<LittleEndian>::parse(&*data).map_err(|e| not_elf(e.to_string()))?;
        let segments = header
            .program_headers(endian, &*data)
            .map_err(|e| not_elf(e.to_string()))?
            .iter()
            .filter(|p| p.p_type(endian) == PT_LOAD)
            .map(|p| (p.p_vaddr(endian), p.p_offset(endian), p.p_filesz(endian)))
            .collect();
        Ok(Self {
            file,
            path: path.to_path_buf(),
            segments,
        })
    }

    /// The `len` bytes at kernel address `address`, if one segment maps all of them and they
    /// can be read (kcore reads unmapped memory as an error or zeroes; the caller decides
    /// what it trusts).
    #[must_use]
    pub fn read(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        let end = address.checked_add(len as u64)?;
        let (vaddr, offset, _) = self
            .segments
            .iter()
            .copied()
            .find(|&(v, _, s)| address >= v && v.checked_add(s).is_some_and(|e| end <= e))?;
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset + (address - vaddr))
            .ok()?;
        Some(buf)
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The code of each range in `ranges` (start, end) that `kcore` can read, merged; returns the
/// code and how many ranges could not be read.
#[must_use]
pub fn read_text(kcore: &Kcore, ranges: &[(u64, u64)]) -> (KernelText, usize) {
    let mut text = KernelText::new();
    let mut unreadable = 0;
    for &(start, end) in ranges {
        let len = usize::try_from(end.saturating_sub(start)).unwrap_or(0);
        match kcore.read(start, len) {
            Some(bytes) if len > 0 => text.insert(start, &bytes),
            _ => unreadable += 1,
        }
    }
    (text, unreadable)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An ELF64 core file with one `PT_LOAD` segment mapping `vaddr` to `bytes`.
    pub(crate) fn fake_kcore(vaddr: u64, bytes: &[u8]) -> Vec<u8> {
        fake_kcore_segments(&[(vaddr, bytes)])
    }

    /// A core file with one loadable segment per `(address, bytes)`.
    pub(crate) fn fake_kcore_segments(segments: &[(u64, &[u8])]) -> Vec<u8> {
        let headers = 64 + 56 * segments.len();
        let mut f = vec![0u8; headers];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2; // ELFCLASS64
        f[5] = 1; // little-endian
        f[6] = 1; // EV_CURRENT
        f[16..18].copy_from_slice(&4u16.to_le_bytes()); // ET_CORE
        f[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        f[20..24].copy_from_slice(&1u32.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        f[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        f[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        let count = u16::try_from(segments.len()).expect("few segments");
        f[56..58].copy_from_slice(&count.to_le_bytes()); // e_phnum
        for (i, (vaddr, bytes)) in segments.iter().enumerate() {
            let ph = 64 + 56 * i;
            let offset = f.len() as u64;
            f[ph..ph + 4].copy_from_slice(&PT_LOAD.to_le_bytes());
            f[ph + 8..ph + 16].copy_from_slice(&offset.to_le_bytes()); // p_offset
            f[ph + 16..ph + 24].copy_from_slice(&vaddr.to_le_bytes());
            f[ph + 32..ph + 40].copy_from_slice(&(bytes.len() as u64).to_le_bytes()); // p_filesz
            f[ph + 40..ph + 48].copy_from_slice(&(bytes.len() as u64).to_le_bytes()); // p_memsz
            f.extend_from_slice(bytes);
        }
        f
    }

    #[test]
    fn reads_code_through_the_segment_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kcore");
        let code: Vec<u8> = (0u8..64).collect();
        std::fs::write(&path, fake_kcore(0xffff_ffff_8100_0000, &code)).expect("write");
        let kcore = Kcore::open(&path).expect("opens");
        assert_eq!(
            kcore.read(0xffff_ffff_8100_0010, 4),
            Some(vec![16, 17, 18, 19])
        );
        // Past the segment's end, before its start, and across its end: not readable.
        assert_eq!(kcore.read(0xffff_ffff_8100_0040, 1), None);
        assert_eq!(kcore.read(0xffff_ffff_80ff_ffff, 1), None);
        assert_eq!(kcore.read(0xffff_ffff_8100_003e, 4), None);
        let (text, unreadable) = read_text(
            &kcore,
            &[
                (0xffff_ffff_8100_0000, 0xffff_ffff_8100_0008),
                (0xffff_ffff_8100_0008, 0xffff_ffff_8100_0010),
                (0xffff_ffff_9000_0000, 0xffff_ffff_9000_0010),
            ],
        );
        assert_eq!(unreadable, 1);
        assert_eq!(text.len(), 1, "touching ranges merge");
        assert_eq!(text.bytes_at(0xffff_ffff_8100_0000, 16), Some(&code[..16]));
    }

    #[test]
    fn a_file_that_is_not_elf_is_refused_with_its_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kcore");
        std::fs::write(&path, vec![0u8; 200]).expect("write");
        let err = Kcore::open(&path).expect_err("not ELF");
        assert!(
            err.to_string()
                .contains("is not a 64-bit little-endian ELF"),
            "{err}"
        );
        let err = Kcore::open(&dir.path().join("missing")).expect_err("missing");
        assert!(
            err.to_string().contains("needs root and CONFIG_PROC_KCORE"),
            "{err}"
        );
    }
}
