//! The kernel's memory layout for the profile's header: the values of `page_offset_base`,
//! `vmalloc_base` and `vmemmap_base` (randomised at boot with `CONFIG_RANDOMIZE_MEMORY`),
//! read from kernel memory where kallsyms locates them, and the size of a `struct page` from
//! the kernel's BTF. The analysis then types `struct page` and vmalloc addresses.

use std::path::Path;

use dprof_analysis::btf::Btf;
use dprof_format::MemoryLayout;

use crate::perf::KernelMemory;

/// The layout of the running kernel, or why it cannot be read here.
pub(crate) fn read(
    kallsyms: &[u8],
    btf: Option<&[u8]>,
    kcore: &Path,
) -> Result<MemoryLayout, String> {
    let address = |name: &str| {
        crate::system::kallsyms_address(kallsyms, name)
            .ok_or_else(|| format!("kallsyms does not locate {name} (CONFIG_KALLSYMS_ALL is off)"))
    };
    let variables = [
        address("page_offset_base")?,
        address("vmalloc_base")?,
        address("vmemmap_base")?,
    ];
    let btf = btf
        .filter(|b| !b.is_empty())
        .ok_or("the kernel has no BTF (/sys/kernel/btf/vmlinux) to size a struct page")?;
    let struct_page_size = Btf::parse(btf)
        .map_err(|e| format!("the kernel's BTF does not parse: {e}"))?
        .struct_size("page")
        .filter(|&size| size > 0)
        .ok_or("the kernel's BTF has no struct page")?;
    let mut memory = KernelMemory::open(kcore).map_err(|e| e.to_string())?;
    let mut values = [0u64; 3];
    for (value, at) in values.iter_mut().zip(variables) {
        // Exactly 8 bytes: the variables' neighbours need not be readable.
        *value = memory
            .u64_now(at)
            .filter(|&v| v >> 63 == 1)
            .ok_or_else(|| format!("cannot read kernel memory at {at:#x}"))?;
    }
    let [page_offset_base, vmalloc_base, vmemmap_base] = values;
    // The layout's order on x86-64; anything else was not read right.
    if !(page_offset_base < vmalloc_base && vmalloc_base < vmemmap_base) {
        return Err(format!(
            "the bases read are not in the kernel's order (direct map {page_offset_base:#x}, \
             vmalloc {vmalloc_base:#x}, vmemmap {vmemmap_base:#x})"
        ));
    }
    Ok(MemoryLayout {
        page_offset_base,
        vmalloc_base,
        vmemmap_base,
        struct_page_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kcore::tests::fake_kcore;
    use dprof_fixtures::btf::{BtfBuilder, BtfMember};

    /// Where the three variables sit, as kallsyms lists them.
    const VARIABLES: u64 = 0xffff_ffff_81a2_f168;
    const KALLSYMS: &[u8] = b"ffffffff81a2f168 D page_offset_base\n\
        ffffffff81a2f170 D vmalloc_base\n\
        ffffffff81a2f178 D vmemmap_base\n";

    fn btf_with_page(size: u32) -> Vec<u8> {
        let mut b = BtfBuilder::new();
        let long = b.int("unsigned long", 8);
        b.struct_type("page", size, &[BtfMember::at("flags", long, 0)]);
        b.finish()
    }

    fn kcore_with(values: [u64; 3]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kcore");
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&path, fake_kcore(VARIABLES, &bytes)).expect("write");
        (dir, path)
    }

    #[test]
    fn the_bases_are_read_where_kallsyms_locates_them() {
        let (_dir, kcore) = kcore_with([
            0xffff_8880_0000_0000,
            0xffff_c900_0000_0000,
            0xffff_ea00_0000_0000,
        ]);
        let layout = read(KALLSYMS, Some(&btf_with_page(64)), &kcore).expect("read");
        assert_eq!(
            layout,
            MemoryLayout {
                page_offset_base: 0xffff_8880_0000_0000,
                vmalloc_base: 0xffff_c900_0000_0000,
                vmemmap_base: 0xffff_ea00_0000_0000,
                struct_page_size: 64,
            }
        );
    }

    #[test]
    fn what_is_missing_is_said() {
        let (_dir, kcore) = kcore_with([
            0xffff_8880_0000_0000,
            0xffff_c900_0000_0000,
            0xffff_ea00_0000_0000,
        ]);
        let btf = btf_with_page(64);
        let err = read(b"ffffffff81000000 T _text\n", Some(&btf), &kcore).expect_err("no symbols");
        assert!(
            err.contains("page_offset_base") && err.contains("KALLSYMS_ALL"),
            "{err}"
        );
        let err = read(KALLSYMS, None, &kcore).expect_err("no BTF");
        assert!(err.contains("BTF"), "{err}");
        let mut no_page = BtfBuilder::new();
        no_page.int("int", 4);
        let err = read(KALLSYMS, Some(&no_page.finish()), &kcore).expect_err("no struct page");
        assert!(err.contains("struct page"), "{err}");
        // Values out of the kernel's order were not read right.
        let (_dir, swapped) = kcore_with([
            0xffff_c900_0000_0000,
            0xffff_8880_0000_0000,
            0xffff_ea00_0000_0000,
        ]);
        let err = read(KALLSYMS, Some(&btf), &swapped).expect_err("out of order");
        assert!(err.contains("order"), "{err}");
    }
}
