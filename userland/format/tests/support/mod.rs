//! What the format's test files share.

use dprof_format::{FILE_HEADER_SIZE, SECTION_HEADER_SIZE};

/// (kind, offset of the section header, payload length) of every section of a whole file.
pub fn sections_of(bytes: &[u8]) -> Vec<(u32, usize, usize)> {
    let mut out = Vec::new();
    let mut pos = FILE_HEADER_SIZE;
    while pos < bytes.len() {
        let kind = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4"));
        let len = u64::from_le_bytes(bytes[pos + 8..pos + 16].try_into().expect("8")) as usize;
        out.push((kind, pos, len));
        pos += SECTION_HEADER_SIZE + len;
    }
    out
}
