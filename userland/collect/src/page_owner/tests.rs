use super::*;
use crate::kcore::tests::fake_kcore_segments;
use dprof_abi::reg;
use dprof_fixtures::btf::{BtfBuilder, BtfMember};
use dprof_fixtures::profile::software_sample;

const DIRECT: u64 = 0xffff_8880_0000_0000;
const VMEMMAP: u64 = 0xffff_ea00_0000_0000;
const LAYOUT: MemoryLayout = MemoryLayout {
    page_offset_base: DIRECT,
    vmalloc_base: 0xffff_c900_0000_0000,
    vmemmap_base: VMEMMAP,
    struct_page_size: 64,
};
/// Frames of the fake machine: a two-page slab, then pages of each other use.
const SLAB: u64 = 0x1000;
const ANON: u64 = 0x1002;
const FILE: u64 = 0x1003;
const TABLE: u64 = 0x1004;
const FREE: u64 = 0x1005;
const KERNEL: u64 = 0x1006;
/// Where the cache's `struct kmem_cache` and its name are.
const CACHE: u64 = DIRECT + 0x50_0000;
const PGTY_SLAB: u32 = 0xf5;

/// `struct page`, `struct slab` and `struct kmem_cache` as the reader needs them, with
/// `page_type` in an anonymous union as in the kernel.
fn btf(page_types: bool) -> Vec<u8> {
    let mut b = BtfBuilder::new();
    let long = b.int("unsigned long", 8);
    let uint = b.int("unsigned int", 4);
    let ptr = b.ptr(long);
    let page_type = b.union_type(
        "",
        4,
        &[
            BtfMember::at("_mapcount", uint, 0),
            BtfMember::at("page_type", uint, 0),
        ],
    );
    b.struct_type(
        "page",
        64,
        &[
            BtfMember::at("flags", long, 0),
            BtfMember::at("compound_head", long, 8),
            BtfMember::at("mapping", ptr, 24),
            BtfMember::at("", page_type, 48),
        ],
    );
    b.struct_type(
        "slab",
        64,
        &[
            BtfMember::at("__page_flags", long, 0),
            BtfMember::at("slab_cache", ptr, 8),
        ],
    );
    b.struct_type(
        "kmem_cache",
        128,
        &[
            BtfMember::at("size", uint, 24),
            BtfMember::at("oo", uint, 40),
            BtfMember::at("red_left_pad", uint, 44),
            BtfMember::at("name", ptr, 96),
        ],
    );
    if page_types {
        b.enum_type(
            "pagetype",
            &[
                ("PGTY_buddy", 0xf0),
                ("PGTY_table", 0xf2),
                ("PGTY_slab", PGTY_SLAB),
            ],
        );
    } else {
        b.enum_type("pageflags", &[("PG_locked", 0), ("PG_slab", 9)]);
    }
    b.finish()
}

/// The fake machine's memory: the struct pages of the frames above and the cache.
fn kcore(page_types: bool) -> (tempfile::TempDir, KernelMemory) {
    let mut pages = vec![0u8; 4096];
    let first = 0x1000u64; // pages[0] is the struct page of frame 0x1000
    let mut page = |pfn: u64, offset: usize, value: u64| {
        let at = (pfn - first) as usize * 64 + offset;
        pages[at..at + 8].copy_from_slice(&value.to_le_bytes());
    };
    if page_types {
        page(SLAB, 48, u64::from(PGTY_SLAB << 24));
        page(TABLE, 48, 0xf200_0000);
        page(FREE, 48, 0xf000_0000);
    } else {
        page(SLAB, 0, 1 << 9);
    }
    page(SLAB, 8, CACHE);
    // The slab's second page is a tail: it points at its head.
    page(SLAB + 1, 8, VMEMMAP + SLAB * 64 + 1);
    page(ANON, 24, 0xffff_8880_0777_0001);
    page(FILE, 24, 0xffff_8880_0777_0100);
    let mut cache = vec![0u8; 4096];
    cache[24..28].copy_from_slice(&512u32.to_le_bytes()); // size
    cache[40..44].copy_from_slice(&(1u32 << 16 | 16).to_le_bytes()); // oo: order 1, 16 objects
    cache[44..48].copy_from_slice(&8u32.to_le_bytes()); // red_left_pad
    cache[96..104].copy_from_slice(&(CACHE + 0x800).to_le_bytes());
    cache[0x800..0x80a].copy_from_slice(b"files_cach");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kcore");
    std::fs::write(
        &path,
        fake_kcore_segments(&[(VMEMMAP + first * 64, &pages), (CACHE, &cache)]),
    )
    .expect("kcore");
    let memory = KernelMemory::open(&path).expect("opens");
    (dir, memory)
}

/// A kernel sample of `mov (%rax),%rbx` with %rax = `addr`.
fn touching(addr: u64) -> Record {
    Record::AccessSample(software_sample(
        0xffff_ffff_8100_1000,
        &[0x48, 0x8b, 0x18],
        &[(reg::RAX, addr)],
        0,
    ))
}

fn parsed(bytes: &[u8]) -> dprof_analysis::btf::Btf {
    dprof_analysis::btf::Btf::parse(bytes).expect("the test's BTF parses")
}

fn watch(page_types: bool) -> (tempfile::TempDir, PageOwnerWatch) {
    let (dir, memory) = kcore(page_types);
    let reader = PageReader::new(&parsed(&btf(page_types)), LAYOUT).expect("reader");
    (dir, PageOwnerWatch::with(reader, memory))
}

fn expected_slab() -> SlabPages {
    SlabPages {
        first_object: DIRECT + (SLAB << 12) + 8,
        stride: 512,
        objects: 16,
        cache: "files_cach".to_owned(),
    }
}

#[test]
fn each_page_is_read_once_and_says_who_owns_it() {
    for page_types in [true, false] {
        let (_dir, mut watch) = watch(page_types);
        // Both pages of the slab, one of them twice, and the other pages.
        for pfn in [SLAB, SLAB + 1, SLAB, ANON, FILE, TABLE, FREE, KERNEL] {
            watch.see(&touching(DIRECT + (pfn << 12) + 0x40));
        }
        let owners = watch.owners();
        assert_eq!(owners.slabs, [expected_slab()], "page types: {page_types}");
        let usage: Vec<(u64, PageUsage)> = owners.pages.iter().map(|p| (p.page, p.usage)).collect();
        let at = |pfn: u64| DIRECT + (pfn << 12);
        let mut expected = vec![
            (at(ANON), PageUsage::Anon),
            (at(FILE), PageUsage::PageCache),
        ];
        if page_types {
            expected.extend([
                (at(TABLE), PageUsage::PageTable),
                (at(FREE), PageUsage::Free),
            ]);
        } else {
            // Without page types, page tables and free pages are the kernel's own.
            expected.extend([
                (at(TABLE), PageUsage::Kernel),
                (at(FREE), PageUsage::Kernel),
            ]);
        }
        expected.push((at(KERNEL), PageUsage::Kernel));
        assert_eq!(usage, expected, "page types: {page_types}");
        assert_eq!(watch.counts(), (7, 0));
    }
}

#[test]
fn what_is_not_a_direct_map_kernel_access_is_not_looked_up() {
    let (_dir, mut watch) = watch(true);
    // A user-mode sample, a per-CPU access, kernel code and vmalloc addresses.
    let mut user = software_sample(0x40_1000, &[0x48, 0x8b, 0x18], &[(reg::RAX, DIRECT)], 0);
    user.flags = SAMPLE_USER;
    watch.see(&Record::AccessSample(user));
    watch.see(&Record::AccessSample(software_sample(
        0xffff_ffff_8100_1000,
        &[0x65, 0x48, 0x8b, 0x18], // mov %gs:(%rax),%rbx
        &[(reg::RAX, 0x1000)],
        DIRECT,
    )));
    watch.see(&touching(0xffff_ffff_8200_0000));
    watch.see(&touching(0xffff_c900_0000_1000));
    assert_eq!(watch.counts(), (0, 0));
    // A frame whose struct page cannot be read is remembered as unreadable, once.
    watch.see(&touching(DIRECT + (0x9000 << 12)));
    watch.see(&touching(DIRECT + (0x9000 << 12) + 8));
    assert_eq!(watch.counts(), (1, 1));
    assert!(watch.owners().is_empty());
}

#[test]
fn a_kernel_whose_btf_lacks_what_is_needed_is_refused_with_the_reason() {
    let mut b = BtfBuilder::new();
    let long = b.int("unsigned long", 8);
    b.struct_type("page", 64, &[BtfMember::at("flags", long, 0)]);
    let err = PageReader::new(&parsed(&b.finish()), LAYOUT).expect_err("no slab mark");
    assert!(
        err.contains("PGTY_slab") && err.contains("PG_slab"),
        "{err}"
    );
    let err = PageOwnerWatch::new(
        None,
        &KernelBtf::from_bytes(Some(btf(true))),
        Path::new("/nonexistent"),
    )
    .expect_err("no layout");
    assert!(err.contains("layout"), "{err}");
    let err = PageOwnerWatch::new(
        Some(LAYOUT),
        &KernelBtf::from_bytes(None),
        Path::new("/nonexistent"),
    )
    .expect_err("no BTF");
    assert!(err.contains("BTF"), "{err}");
}
