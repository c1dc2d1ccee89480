//! The running kernel's BTF for one collection: read once, parsed once. Its bytes go into the
//! profile; its types serve every reader of kernel structs at the start (the memory layout's
//! `struct page`, the per-CPU section's variables, the run queues, `struct slab`), which
//! would otherwise each parse the same few megabytes again.

use std::path::Path;

use dprof_analysis::btf::Btf;

/// The kernel's BTF, or why there is none to read types from.
#[derive(Debug)]
pub struct KernelBtf {
    bytes: Option<Vec<u8>>,
    types: Result<Btf, String>,
}

impl KernelBtf {
    /// The BTF of the kernel whose sysfs is under `root` (`sys/kernel/btf/vmlinux`).
    #[must_use]
    pub fn read(root: &Path) -> Self {
        Self::from_bytes(crate::system::kernel_btf(root))
    }

    /// BTF from `bytes`, `None` where the kernel has none.
    #[must_use]
    pub fn from_bytes(bytes: Option<Vec<u8>>) -> Self {
        let types = match bytes.as_deref() {
            None | Some([]) => Err("the kernel has no BTF (/sys/kernel/btf/vmlinux)".to_owned()),
            Some(b) => Btf::parse(b).map_err(|e| format!("the kernel's BTF does not parse: {e}")),
        };
        Self { bytes, types }
    }

    /// The bytes as the kernel gave them, for the profile's Btf section.
    #[must_use]
    pub fn bytes(&self) -> Option<&[u8]> {
        self.bytes.as_deref()
    }

    /// The parsed types, or the sentence that says why there are none.
    ///
    /// # Errors
    /// When the kernel has no BTF, or it does not parse.
    pub fn types(&self) -> Result<&Btf, String> {
        self.types.as_ref().map_err(Clone::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_bad_btf_say_why_and_keep_the_bytes() {
        let none = KernelBtf::from_bytes(None);
        assert!(none.types().expect_err("no BTF").contains("has no BTF"));
        assert_eq!(none.bytes(), None);
        let empty = KernelBtf::from_bytes(Some(Vec::new()));
        assert!(empty.types().expect_err("empty").contains("has no BTF"));
        let junk = KernelBtf::from_bytes(Some(b"junk".to_vec()));
        assert!(junk.types().expect_err("junk").contains("does not parse"));
        assert_eq!(junk.bytes(), Some(&b"junk"[..]));
    }

    #[test]
    fn good_btf_is_parsed_once_for_every_reader() {
        let mut b = dprof_fixtures::btf::BtfBuilder::new();
        b.int("long", 8);
        let btf = KernelBtf::from_bytes(Some(b.finish()));
        let first: *const Btf = btf.types().expect("parses");
        let second: *const Btf = btf.types().expect("parses");
        assert_eq!(first, second);
    }
}
