//! The kernel's memory layout for the profile's header: the values of `page_offset_base`,
//! `vmalloc_base` and `vmemmap_base` (randomised at boot with `CONFIG_RANDOMIZE_MEMORY`), and
//! the size of a `struct page` from the kernel's BTF. The analysis then types `struct page`
//! and vmalloc addresses.
//!
//! The bases are read from kernel memory where kallsyms locates the variables
//! (`CONFIG_KALLSYMS_ALL`). Elsewhere they are worked out from what the kernel's own
//! tracepoints show while the collector provokes them ([`crate::perf::Sighting`]), and the
//! direct map's is checked against the kernel's code, which it maps twice.

use std::collections::HashMap;
use std::path::Path;

use dprof_format::{ImageSectionKind, MemoryLayout};

use crate::kernel_btf::KernelBtf;
use crate::perf::{KernelMemory, Sighting};

/// The randomised regions start on a PUD boundary (`kernel_randomize_memory`).
const REGION_ALIGN: u64 = 1 << 30;
const PAGE_SHIFT: u32 = 12;
/// Bytes of kernel code compared through its two mappings.
const CODE_CHECKED: usize = 64;

/// The layout of the running kernel, or why it cannot be found here. `root` is where `/proc`
/// and tracefs are; `watch` provokes and watches the tracepoints when kallsyms does not locate
/// the variables.
pub(crate) fn read(
    root: &Path,
    kallsyms: &[u8],
    btf: &KernelBtf,
    kcore: &Path,
    watch: impl FnOnce(&Path) -> Result<Vec<Sighting>, String>,
) -> Result<MemoryLayout, String> {
    let struct_page_size = btf
        .types()?
        .struct_size("page")
        .filter(|&size| size > 0)
        .ok_or("the kernel's BTF has no struct page")?;
    let mut memory = KernelMemory::open(kcore).map_err(|e| e.to_string())?;
    let [page_offset_base, vmalloc_base, vmemmap_base] = match variable_addresses(kallsyms) {
        Ok(addresses) => read_variables(addresses, &mut memory)?,
        Err(missing) => {
            let sightings = watch(root).map_err(|e| format!("{missing}, and {e}"))?;
            let bases = bases_from_sightings(&sightings, struct_page_size)
                .map_err(|e| format!("{missing}, and {e}"))?;
            check_direct_map(root, kallsyms, bases[0], &mut memory)?;
            bases
        }
    };
    // The layout's order on x86-64; anything else was not read right.
    if !(page_offset_base < vmalloc_base && vmalloc_base < vmemmap_base) {
        return Err(format!(
            "the bases found are not in the kernel's order (direct map {page_offset_base:#x}, \
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

/// Where kallsyms puts the three variables, or which one it does not list.
fn variable_addresses(kallsyms: &[u8]) -> Result<[u64; 3], String> {
    let address = |name: &str| {
        crate::system::kallsyms_address(kallsyms, name)
            .ok_or_else(|| format!("kallsyms does not locate {name} (CONFIG_KALLSYMS_ALL is off)"))
    };
    Ok([
        address("page_offset_base")?,
        address("vmalloc_base")?,
        address("vmemmap_base")?,
    ])
}

fn read_variables(addresses: [u64; 3], memory: &mut KernelMemory) -> Result<[u64; 3], String> {
    let mut values = [0u64; 3];
    for (value, at) in values.iter_mut().zip(addresses) {
        // Exactly 8 bytes: the variables' neighbours need not be readable.
        *value = memory
            .u64_now(at)
            .filter(|&v| v >> 63 == 1)
            .ok_or_else(|| format!("cannot read kernel memory at {at:#x}"))?;
    }
    Ok(values)
}

/// The three bases from the sightings, each the value most of its pairs agree on:
/// - the direct map: a large kmalloc's address less its frame's, from the page allocation just
///   before it of as many bytes;
/// - the vmemmap: a folio's address less its frame times the size of a `struct page`;
/// - vmalloc: the start of the range vmap areas are looked for in, when it lies between the
///   two.
pub(crate) fn bases_from_sightings(
    sightings: &[Sighting],
    struct_page_size: u64,
) -> Result<[u64; 3], String> {
    let mut direct = Votes::default();
    let mut vmemmap = Votes::default();
    let mut vmalloc_starts = Votes::default();
    let mut pages: Option<(u64, u32)> = None;
    for sighting in sightings {
        match *sighting {
            Sighting::PagesAllocated { pfn, order } => pages = Some((pfn, order)),
            Sighting::Kmalloc { ptr, bytes } => {
                if let Some((pfn, order)) = pages {
                    let whole_pages = 1u64.checked_shl(PAGE_SHIFT + order);
                    if order > 0 && whole_pages == Some(bytes) {
                        direct.add(ptr.wrapping_sub(pfn << PAGE_SHIFT));
                    }
                }
            }
            Sighting::LruInsertion { folio, pfn } => {
                vmemmap.add(folio.wrapping_sub(pfn.wrapping_mul(struct_page_size)));
            }
            Sighting::VmapArea { vstart, vend } => {
                if vend > vstart {
                    vmalloc_starts.add(vstart);
                }
            }
        }
    }
    let direct = direct.winner().ok_or(
        "no large kmalloc followed its page allocation while the tracepoints were watched",
    )?;
    let vmemmap = vmemmap
        .winner()
        .ok_or("no folio was put on an LRU list while the tracepoints were watched")?;
    vmalloc_starts
        .0
        .retain(|&start, _| start > direct && start < vmemmap);
    let vmalloc = vmalloc_starts
        .winner()
        .ok_or("no vmap area was looked for between the direct map and the vmemmap")?;
    Ok([direct, vmalloc, vmemmap])
}

/// Candidate bases and how many sightings gave each.
#[derive(Default)]
struct Votes(HashMap<u64, u32>);

impl Votes {
    fn add(&mut self, base: u64) {
        // A base is in the kernel half and starts a region; anything else was a stray pair.
        if base >> 63 == 1 && base.is_multiple_of(REGION_ALIGN) {
            *self.0.entry(base).or_default() += 1;
        }
    }

    /// The base more than half of the votes went to.
    fn winner(&self) -> Option<u64> {
        let total: u32 = self.0.values().sum();
        self.0
            .iter()
            .find(|(_, &n)| 2 * n > total)
            .map(|(&base, _)| base)
    }
}

/// Checks a direct-map base worked out from sightings: the kernel's code, read at its own
/// address and through the direct map at the physical address `/proc/iomem` gives it, must
/// be the same bytes. Where either is unreadable the check cannot be made, and the base
/// stands on its sightings.
fn check_direct_map(
    root: &Path,
    kallsyms: &[u8],
    page_offset_base: u64,
    memory: &mut KernelMemory,
) -> Result<(), String> {
    let iomem = std::fs::read_to_string(root.join("proc/iomem")).unwrap_or_default();
    let (Some(physical), Some(text)) = (
        kernel_code_start(&iomem),
        crate::system::kallsyms_address(kallsyms, "_text"),
    ) else {
        return Ok(());
    };
    let mut at_text = [0u8; CODE_CHECKED];
    let mut through_direct_map = [0u8; CODE_CHECKED];
    if memory.read(text, &mut at_text) < CODE_CHECKED {
        return Ok(());
    }
    let alias = page_offset_base.wrapping_add(physical);
    if memory.read(alias, &mut through_direct_map) < CODE_CHECKED || at_text != through_direct_map {
        return Err(format!(
            "the direct map's base worked out from the tracepoints ({page_offset_base:#x}) \
             does not map the kernel's code where /proc/iomem puts it"
        ));
    }
    Ok(())
}

/// The physical address where the kernel's code starts, from `/proc/iomem` (none to readers
/// who may not see addresses).
fn kernel_code_start(iomem: &str) -> Option<u64> {
    crate::system::iomem_kernel_ranges(iomem)
        .into_iter()
        .find_map(|(kind, start, _)| (kind == ImageSectionKind::Code).then_some(start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kcore::tests::{fake_kcore, fake_kcore_segments};
    use dprof_fixtures::btf::{BtfBuilder, BtfMember};

    /// Where the three variables sit, as kallsyms lists them.
    const VARIABLES: u64 = 0xffff_ffff_81a2_f168;
    const KALLSYMS: &[u8] = b"ffffffff81a2f168 D page_offset_base\n\
        ffffffff81a2f170 D vmalloc_base\n\
        ffffffff81a2f178 D vmemmap_base\n";

    const ROOT: &str = "/nonexistent";

    fn not_watched(_: &Path) -> Result<Vec<Sighting>, String> {
        Err("the tracepoints were not watched".to_owned())
    }

    fn btf_with_page(size: u32) -> KernelBtf {
        let mut b = BtfBuilder::new();
        let long = b.int("unsigned long", 8);
        b.struct_type("page", size, &[BtfMember::at("flags", long, 0)]);
        KernelBtf::from_bytes(Some(b.finish()))
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
        let layout = read(
            Path::new(ROOT),
            KALLSYMS,
            &btf_with_page(64),
            &kcore,
            not_watched,
        )
        .expect("read");
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
        let err = read(
            Path::new(ROOT),
            b"ffffffff81000000 T _text\n",
            &btf,
            &kcore,
            not_watched,
        )
        .expect_err("no symbols");
        assert!(
            err.contains("page_offset_base") && err.contains("KALLSYMS_ALL"),
            "{err}"
        );
        let err = read(
            Path::new(ROOT),
            KALLSYMS,
            &KernelBtf::from_bytes(None),
            &kcore,
            not_watched,
        )
        .expect_err("no BTF");
        assert!(err.contains("BTF"), "{err}");
        let mut no_page = BtfBuilder::new();
        no_page.int("int", 4);
        let err = read(
            Path::new(ROOT),
            KALLSYMS,
            &KernelBtf::from_bytes(Some(no_page.finish())),
            &kcore,
            not_watched,
        )
        .expect_err("no struct page");
        assert!(err.contains("struct page"), "{err}");
        // Values out of the kernel's order were not read right.
        let (_dir, swapped) = kcore_with([
            0xffff_c900_0000_0000,
            0xffff_8880_0000_0000,
            0xffff_ea00_0000_0000,
        ]);
        let err =
            read(Path::new(ROOT), KALLSYMS, &btf, &swapped, not_watched).expect_err("out of order");
        assert!(err.contains("order"), "{err}");
    }

    const DIRECT: u64 = 0xffff_9a40_0000_0000;
    const VMALLOC: u64 = 0xffff_b8c0_0000_0000;
    const VMEMMAP: u64 = 0xffff_e2c0_0000_0000;
    /// Where modules and BPF code are looked for: not vmalloc's start.
    const MODULES: u64 = 0xffff_ffff_a000_0000;

    /// What the provoked tracepoints show on a kernel with the bases above and 64-byte pages.
    fn sightings() -> Vec<Sighting> {
        use Sighting::*;
        vec![
            // A 64 KiB kvzalloc: order 4 at frame 0x12340, reported twice by kmalloc.
            PagesAllocated {
                pfn: 0x12340,
                order: 4,
            },
            Kmalloc {
                ptr: DIRECT + (0x12340 << 12),
                bytes: 64 << 10,
            },
            Kmalloc {
                ptr: DIRECT + (0x12340 << 12),
                bytes: 64 << 10,
            },
            // A slab of another size in between: not a pair.
            PagesAllocated {
                pfn: 0x777,
                order: 1,
            },
            Kmalloc {
                ptr: 0xffff_9a40_1234_5600,
                bytes: 192,
            },
            PagesAllocated {
                pfn: 0x55550,
                order: 4,
            },
            Kmalloc {
                ptr: DIRECT + (0x55550 << 12),
                bytes: 64 << 10,
            },
            LruInsertion {
                folio: VMEMMAP + 0x3_0001 * 64,
                pfn: 0x3_0001,
            },
            LruInsertion {
                folio: VMEMMAP + 0x3_0002 * 64,
                pfn: 0x3_0002,
            },
            VmapArea {
                vstart: MODULES,
                vend: 0xffff_ffff_ff00_0000,
            },
            VmapArea {
                vstart: VMALLOC,
                vend: VMALLOC + (32 << 40),
            },
            VmapArea {
                vstart: VMALLOC,
                vend: VMALLOC + (32 << 40),
            },
        ]
    }

    #[test]
    fn the_bases_are_worked_out_from_the_sightings() {
        assert_eq!(
            bases_from_sightings(&sightings(), 64),
            Ok([DIRECT, VMALLOC, VMEMMAP])
        );
    }

    #[test]
    fn a_missing_or_inconsistent_sighting_is_said() {
        let without = |keep: fn(&Sighting) -> bool| -> Vec<Sighting> {
            sightings().into_iter().filter(keep).collect()
        };
        let err = bases_from_sightings(&without(|s| !matches!(s, Sighting::Kmalloc { .. })), 64)
            .expect_err("no kmalloc");
        assert!(err.contains("kmalloc"), "{err}");
        let err = bases_from_sightings(
            &without(|s| !matches!(s, Sighting::LruInsertion { .. })),
            64,
        )
        .expect_err("no folio");
        assert!(err.contains("LRU"), "{err}");
        let err = bases_from_sightings(
            &without(|s| {
                !matches!(
                    s,
                    Sighting::VmapArea {
                        vstart: VMALLOC,
                        ..
                    }
                )
            }),
            64,
        )
        .expect_err("only the modules' area");
        assert!(err.contains("vmap"), "{err}");
        // A wrong struct page size gives folio bases that start no region.
        let err = bases_from_sightings(&sightings(), 56).expect_err("wrong size");
        assert!(err.contains("LRU"), "{err}");
        // Pairs that disagree with no majority give no base.
        let mut split = sightings();
        split.push(Sighting::PagesAllocated {
            pfn: 0x10,
            order: 4,
        });
        split.push(Sighting::Kmalloc {
            ptr: DIRECT + (1 << 30) + (0x10 << 12),
            bytes: 64 << 10,
        });
        split.push(Sighting::PagesAllocated {
            pfn: 0x20,
            order: 4,
        });
        split.push(Sighting::Kmalloc {
            ptr: DIRECT + (1 << 30) + (0x20 << 12),
            bytes: 64 << 10,
        });
        split.push(Sighting::PagesAllocated {
            pfn: 0x30,
            order: 4,
        });
        split.push(Sighting::Kmalloc {
            ptr: DIRECT + (1 << 30) + (0x30 << 12),
            bytes: 64 << 10,
        });
        assert!(bases_from_sightings(&split, 64).is_err());
    }

    /// A machine whose kallsyms lists code only, with the kernel's code at physical 16 MiB.
    struct NoVariables {
        _dir: tempfile::TempDir,
        root: std::path::PathBuf,
        kcore: std::path::PathBuf,
    }

    const TEXT: u64 = 0xffff_ffff_8100_0000;
    const CODE_PHYSICAL: u64 = 0x100_0000;

    fn no_variables(direct_map_copy: &[u8]) -> NoVariables {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("proc")).expect("mkdir");
        std::fs::write(
            root.join("proc/iomem"),
            "00100000-bffdffff : System RAM\n  01000000-01e00000 : Kernel code\n",
        )
        .expect("iomem");
        let kcore = dir.path().join("kcore");
        std::fs::write(
            &kcore,
            fake_kcore_segments(&[
                (TEXT, &kernel_code()),
                (DIRECT + CODE_PHYSICAL, direct_map_copy),
            ]),
        )
        .expect("kcore");
        NoVariables {
            _dir: dir,
            root,
            kcore,
        }
    }

    /// A page of the kernel's code: the memory reader reads whole pages.
    fn kernel_code() -> Vec<u8> {
        (0..4096u32).map(|i| (i % 251) as u8).collect()
    }

    const CODE_ONLY: &[u8] = b"ffffffff81000000 T _text\nffffffff81000000 T startup_64\n";

    #[test]
    fn without_the_variables_the_bases_come_from_the_tracepoints_and_are_checked() {
        let btf = btf_with_page(64);
        let machine = no_variables(&kernel_code());
        let layout = read(&machine.root, CODE_ONLY, &btf, &machine.kcore, |_| {
            Ok(sightings())
        })
        .expect("worked out");
        assert_eq!(
            layout,
            MemoryLayout {
                page_offset_base: DIRECT,
                vmalloc_base: VMALLOC,
                vmemmap_base: VMEMMAP,
                struct_page_size: 64,
            }
        );
        // A direct map that does not hold the kernel's code where /proc/iomem says: refused.
        let machine = no_variables(&[0xcc; 4096]);
        let err = read(&machine.root, CODE_ONLY, &btf, &machine.kcore, |_| {
            Ok(sightings())
        })
        .expect_err("check fails");
        assert!(err.contains("kernel's code"), "{err}");
        // Tracepoints that cannot be watched: both reasons are said.
        let err = read(&machine.root, CODE_ONLY, &btf, &machine.kcore, not_watched)
            .expect_err("not watched");
        assert!(
            err.contains("KALLSYMS_ALL") && err.contains("not watched"),
            "{err}"
        );
    }

    #[test]
    fn kernel_code_is_found_in_iomem() {
        let iomem = "00000000-00000fff : Reserved\n00100000-bffdffff : System RAM\n  \
                     01000000-01e00000 : Kernel code\n  01e00000-0260ffff : Kernel rodata\n";
        assert_eq!(kernel_code_start(iomem), Some(0x100_0000));
        // What readers who may not see addresses get.
        assert_eq!(kernel_code_start("00000000-00000000 : Kernel code\n"), None);
        assert_eq!(kernel_code_start(""), None);
    }
}
