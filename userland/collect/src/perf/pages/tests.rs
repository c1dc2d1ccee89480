use dprof_abi::{ALLOC_PAGES, FREE_PAGES};

use super::*;

/// The three tracepoints' formats as Linux 6.12 and 6.18 write them.
fn fields(kind: PageEvent) -> PageFields {
    let text = match kind {
        PageEvent::Alloc => {
            "name: mm_page_alloc\nID: 9\nformat:\n\
             \tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:unsigned int order;\toffset:16;\tsize:4;\tsigned:0;\n\
             \tfield:unsigned long gfp_flags;\toffset:24;\tsize:8;\tsigned:0;\n"
        }
        PageEvent::Free => {
            "name: mm_page_free\nID: 10\nformat:\n\
             \tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:unsigned int order;\toffset:16;\tsize:4;\tsigned:0;\n"
        }
        PageEvent::FreeBatched => {
            "name: mm_page_free_batched\nID: 11\nformat:\n\
             \tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n"
        }
    };
    PageFields::new(kind, &Format::parse(text).expect("parses")).expect("usable")
}

fn raw(pfn: u64, order: u32, gfp: u64) -> Vec<u8> {
    let mut raw = vec![0u8; 32];
    raw[8..16].copy_from_slice(&pfn.to_le_bytes());
    raw[16..20].copy_from_slice(&order.to_le_bytes());
    raw[24..32].copy_from_slice(&gfp.to_le_bytes());
    raw
}

const KALLSYMS: &[u8] = b"ffffffff81100000 T __alloc_frozen_pages_noprof
ffffffff81100400 T get_page_from_freelist
ffffffff81100800 T alloc_pages_mpol
ffffffff81100c00 T __page_frag_cache_refill
ffffffff81101000 T skb_page_frag_refill
ffffffff81101400 T allocate_slab
ffffffff81101800 T ___kmalloc_large_node
ffffffff81101c00 T filemap_alloc_folio_noprof
ffffffff81102000 T tcp_sendmsg_locked
";
const DIRECT_MAP: u64 = 0xffff_8880_0000_0000;
const CONTEXT_KERNEL: u64 = u64::MAX - 127;

#[test]
fn a_page_allocation_s_site_is_its_first_caller_outside_the_allocator() {
    let mut pages = PageTracker::new(DIRECT_MAP, KALLSYMS);
    let alloc = fields(PageEvent::Alloc);
    let chain = [
        CONTEXT_KERNEL,
        0xffff_ffff_8110_0010, // __alloc_frozen_pages_noprof
        0xffff_ffff_8110_0810, // alloc_pages_mpol
        0xffff_ffff_8110_0c10, // __page_frag_cache_refill
        0xffff_ffff_8110_1010, // skb_page_frag_refill: the site
        0xffff_ffff_8110_2010, // tcp_sendmsg_locked
    ];
    let record = pages.event(&alloc, &raw(0x1234, 3, 0xcc0), &chain);
    assert_eq!(
        record,
        Some(PageRecord::Alloc(Alloc {
            ptr: DIRECT_MAP + 0x1234 * 4096,
            call_site: 0xffff_ffff_8110_1010,
            cache: 0,
            bytes_req: 32768,
            bytes_alloc: 32768,
            gfp: 0xcc0,
            node: -1,
            flags: ALLOC_PAGES,
        }))
    );
    // Its free is recorded, once; a free of pages never recorded is not.
    let free = fields(PageEvent::Free);
    let freed = Some(PageRecord::Free(Free {
        ptr: DIRECT_MAP + 0x1234 * 4096,
        call_site: 0,
        cache: 0,
        flags: FREE_PAGES,
    }));
    assert_eq!(pages.event(&free, &raw(0x1234, 3, 0), &[]), freed);
    assert_eq!(pages.event(&free, &raw(0x1234, 3, 0), &[]), None);
    assert_eq!(pages.event(&free, &raw(0x9999, 0, 0), &[]), None);
    // The batched free gives no order.
    let batched = fields(PageEvent::FreeBatched);
    let chain = [CONTEXT_KERNEL, 0xffff_ffff_8110_1c10];
    assert!(pages.event(&alloc, &raw(0x77, 0, 0), &chain).is_some());
    assert!(matches!(
        pages.event(&batched, &raw(0x77, 0, 0), &[]),
        Some(PageRecord::Free(Free { ptr, .. })) if ptr == DIRECT_MAP + 0x77 * 4096
    ));
}

#[test]
fn slab_and_large_kmalloc_pages_are_left_to_their_own_events() {
    let mut pages = PageTracker::new(DIRECT_MAP, KALLSYMS);
    let alloc = fields(PageEvent::Alloc);
    for owner in [0xffff_ffff_8110_1410, 0xffff_ffff_8110_1810] {
        let chain = [
            CONTEXT_KERNEL,
            0xffff_ffff_8110_0010,
            owner,
            0xffff_ffff_8110_2010,
        ];
        assert_eq!(pages.event(&alloc, &raw(0x10, 0, 0), &chain), None);
    }
    assert_eq!(pages.described_elsewhere, 2);
    // Their frees are not recorded either.
    assert_eq!(
        pages.event(&fields(PageEvent::Free), &raw(0x10, 0, 0), &[]),
        None
    );
}

#[test]
fn chains_without_a_caller_and_bad_frames_are_handled() {
    let mut pages = PageTracker::new(DIRECT_MAP, KALLSYMS);
    let alloc = fields(PageEvent::Alloc);
    // Only allocator frames: the outermost is the site. No chain at all: site 0.
    let chain = [CONTEXT_KERNEL, 0xffff_ffff_8110_0010, 0xffff_ffff_8110_0410];
    assert!(matches!(
        pages.event(&alloc, &raw(1, 0, 0), &chain),
        Some(PageRecord::Alloc(Alloc {
            call_site: 0xffff_ffff_8110_0410,
            ..
        }))
    ));
    assert!(matches!(
        pages.event(&alloc, &raw(2, 0, 0), &[]),
        Some(PageRecord::Alloc(Alloc { call_site: 0, .. }))
    ));
    // An unknown frame is a caller.
    assert!(matches!(
        pages.event(&alloc, &raw(3, 0, 0), &[0x1000]),
        Some(PageRecord::Alloc(Alloc {
            call_site: 0x1000,
            ..
        }))
    ));
    // A failed allocation (pfn -1), an impossible order and a short record give nothing.
    assert_eq!(pages.event(&alloc, &raw(u64::MAX, 0, 0), &[]), None);
    assert_eq!(pages.event(&alloc, &raw(4, 40, 0), &[]), None);
    assert_eq!(pages.event(&alloc, &[0u8; 12], &[]), None);
}

#[test]
fn a_format_without_the_fields_is_refused() {
    let text = "name: mm_page_alloc\nID: 9\nformat:\n\
                \tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n";
    let format = Format::parse(text).expect("parses");
    let why = PageFields::new(PageEvent::Alloc, &format).expect_err("no order");
    assert!(why.contains("no order field"), "{why}");
    let text = "name: mm_page_free\nID: 9\nformat:\n";
    let format = Format::parse(text).expect("parses");
    assert!(PageFields::new(PageEvent::Free, &format).is_err());
}
