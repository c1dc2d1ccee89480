use std::ops::Range;

use dprof_abi::{Alloc, CacheInfo, ALLOC_KMALLOC, CACHE_NAME_BYTES};

use super::*;

/// A table-driven symbol source.
struct Table;

impl SymbolSource for Table {
    fn function(&self, ip: u64) -> Option<(&str, u64)> {
        (0x1000..0x2000)
            .contains(&ip)
            .then(|| ("f", ip - 0x1000))
            .or_else(|| (0x2000..0x3000).contains(&ip).then(|| ("g", ip - 0x2000)))
    }
    fn data_symbol(&self, addr: u64) -> Option<(&str, u64)> {
        (0xffff_ffff_8200_0000..0xffff_ffff_8200_0040)
            .contains(&addr)
            .then(|| ("jiffies", addr - 0xffff_ffff_8200_0000))
    }
    fn percpu_range(&self) -> Option<Range<u64>> {
        Some(0..0x2000)
    }
    fn percpu_symbol(&self, addr: u64) -> Option<(&str, u64)> {
        (0x1000..0x1100)
            .contains(&addr)
            .then(|| ("runqueues", addr - 0x1000))
    }
    fn function_count(&self) -> usize {
        2
    }
}

fn cache(id: u64, name: &str, size: u32) -> CacheInfo {
    CacheInfo {
        cache: id,
        object_size: size,
        size,
        align: 8,
        slab_flags: 0,
        name_len: 0,
        origin: 0,
        name: [0; CACHE_NAME_BYTES],
    }
    .with_name(name.as_bytes())
}

fn alloc(ptr: u64, cache: u64, size: u32, call_site: u64) -> Alloc {
    Alloc {
        ptr,
        call_site,
        cache,
        bytes_req: size,
        bytes_alloc: size,
        flags: if cache == 0 { ALLOC_KMALLOC } else { 0 },
        ..Alloc::default()
    }
}

const CTX: SampleContext = SampleContext {
    cpu: 0,
    gs_base: 0xffff_8880_7fc0_0000,
    rsp: 0xffff_c900_0001_3e80,
};

fn name(r: &Resolver<'_>, id: TypeId) -> String {
    r.types()
        .get(id)
        .map(|t| t.name.clone())
        .unwrap_or_default()
}

#[test]
fn interval_lookup_finds_the_object_and_offset() {
    let mut set = AddressSet::new();
    let new = |base, size| NewObject {
        base,
        size,
        type_id: TypeId(0),
        time_ns: 0,
        cpu: 0,
    };
    let at = |set: &AddressSet, addr| set.find(addr).map(|h| (h.slot, h.offset));
    let a = set.insert(new(0x1000, 0x100), |_| panic!("nothing to replace"));
    let b = set.insert(new(0x1100, 0x40), |_| panic!("nothing to replace"));
    assert_eq!(at(&set, 0x1000), Some((a, 0)));
    assert_eq!(at(&set, 0x10ff), Some((a, 0xff)));
    assert_eq!(at(&set, 0x1100), Some((b, 0)));
    assert_eq!(at(&set, 0x113f), Some((b, 0x3f)));
    assert_eq!(at(&set, 0x1140), None);
    assert_eq!(at(&set, 0xfff), None);
    assert_eq!(set.remove(0x1000).map(|o| o.base), Some(0x1000));
    assert_eq!(at(&set, 0x1010), None);
    assert_eq!(set.remove(0x1000), None, "already freed");
    // Touches: first, again, from another CPU (once), again.
    let touch = |set: &mut AddressSet, addr, cpu| set.find_touch(addr, cpu).map(|(_, t)| t);
    assert_eq!(touch(&mut set, 0x1100, 3), Some(Touch::First));
    assert_eq!(touch(&mut set, 0x1108, 3), Some(Touch::Again));
    assert_eq!(touch(&mut set, 0x1110, 1), Some(Touch::Bounced));
    assert_eq!(touch(&mut set, 0x1100, 2), Some(Touch::Again));
    assert_eq!(touch(&mut set, 0x1140, 2), None);
    // The freed slot is reused, with a new serial.
    let c = set.insert(new(0x2000, 8), |_| {});
    assert_eq!(c, a);
    assert_eq!(set.get(c).map(|o| o.serial), Some(2));
    assert_eq!(
        set.find_touch(0x2000, 5).map(|(h, t)| (h.slot, t)),
        Some((c, Touch::First)),
        "a new lifetime starts untouched"
    );
    assert_eq!(set.len(), 2);
}

#[test]
fn page_crossing_large_and_empty_objects() {
    let mut set = AddressSet::new();
    let new = |base, size| NewObject {
        base,
        size,
        type_id: TypeId(7),
        time_ns: 0,
        cpu: 0,
    };
    let at = |set: &AddressSet, addr| set.find(addr).map(|h| (h.slot, h.offset, h.type_id));
    // 16 KiB across five pages, starting mid-page.
    let a = set.insert(new(0x1_0f00, 0x4000), |_| {});
    assert_eq!(at(&set, 0x1_0f00), Some((a, 0, TypeId(7))));
    assert_eq!(at(&set, 0x1_2abc), Some((a, 0x1bbc, TypeId(7))));
    assert_eq!(at(&set, 0x1_4eff), Some((a, 0x3fff, TypeId(7))));
    assert_eq!(at(&set, 0x1_4f00), None);
    // Its touch state is one, whichever page is touched.
    let touch = |set: &mut AddressSet, addr, cpu| set.find_touch(addr, cpu).map(|(_, t)| t);
    assert_eq!(touch(&mut set, 0x1_0f00, 0), Some(Touch::First));
    assert_eq!(touch(&mut set, 0x1_4000, 0), Some(Touch::Again));
    assert_eq!(touch(&mut set, 0x1_3000, 1), Some(Touch::Bounced));
    assert_eq!(touch(&mut set, 0x1_0f00, 2), Some(Touch::Again));
    // 1 MiB: not paged.
    let big = set.insert(new(0x100_0000, 1 << 20), |_| {});
    assert_eq!(at(&set, 0x108_0000), Some((big, 0x8_0000, TypeId(7))));
    assert_eq!(touch(&mut set, 0x108_0000, 4), Some(Touch::First));
    assert_eq!(touch(&mut set, 0x100_0000, 5), Some(Touch::Bounced));
    assert_eq!(at(&set, 0x110_0000), None);
    // A small object inside the large one replaces it.
    let mut gone = Vec::new();
    let small = set.insert(new(0x104_0000, 64), |o| gone.push(o.base));
    assert_eq!(gone, [0x100_0000]);
    assert_eq!(at(&set, 0x104_0010), Some((small, 0x10, TypeId(7))));
    assert_eq!(at(&set, 0x100_0010), None);
    // A large object over small ones replaces them all.
    let mut gone = Vec::new();
    set.insert(new(0x1_0000, 1 << 26), |o| gone.push(o.base));
    gone.sort_unstable();
    assert_eq!(gone, [0x1_0f00, 0x104_0000]);
    assert_eq!(set.len(), 1);
    assert!(set.remove(0x1_0000).is_some());
    assert!(set.is_empty());
    // A zero-size object holds no address but can be freed.
    set.insert(new(0x5000, 0), |_| {});
    assert_eq!(at(&set, 0x5000), None);
    assert!(set.remove(0x5000).is_some());
}

/// xorshift64: deterministic pseudo-random numbers for the model tests.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Checks the address set against a naive model (a list of (start, size, first CPU touching
/// it, bounced)) over `steps` random operations: inserts of what `object` picks, frees, and
/// lookups near what `object` picks from a random CPU, with their touch states (kept in page
/// indexes for objects within a page, by slot for others, across the page forms' changes).
/// Returns the most pages indexed by position at once.
fn check_against_model(
    steps: usize,
    mut next: impl FnMut() -> u64,
    mut object: impl FnMut(&mut dyn FnMut() -> u64) -> (u64, u32),
) -> usize {
    let mut set = AddressSet::new();
    let mut model: Vec<(u64, u32, Option<u32>, bool)> = Vec::new();
    let mut positional = 0;
    for _ in 0..steps {
        let (base, size) = object(&mut next);
        match next() % 3 {
            0 => {
                let end = base + u64::from(size.max(1));
                let mut expected: Vec<u64> = model
                    .iter()
                    .filter(|&&(s, z, ..)| s < end && s + u64::from(z.max(1)) > base)
                    .map(|&(s, ..)| s)
                    .collect();
                model.retain(|&(s, z, ..)| !(s < end && s + u64::from(z.max(1)) > base));
                model.push((base, size, None, false));
                let mut got = Vec::new();
                set.insert(
                    NewObject {
                        base,
                        size,
                        type_id: TypeId(0),
                        time_ns: 0,
                        cpu: 0,
                    },
                    |o| got.push(o.base),
                );
                got.sort_unstable();
                expected.sort_unstable();
                assert_eq!(got, expected);
            }
            1 => {
                let known = model.iter().position(|&(s, ..)| s == base);
                assert_eq!(
                    set.remove_entry(base).map(|r| r.size),
                    known.map(|i| model[i].1)
                );
                if let Some(i) = known {
                    model.swap_remove(i);
                }
            }
            _ => {
                let addr = base + next() % 4096;
                let cpu = (next() % 3) as u32;
                let expected = model
                    .iter_mut()
                    .find(|(s, z, ..)| addr >= *s && addr - *s < u64::from(*z))
                    .map(|(s, _, first, bounced)| {
                        let touch = match *first {
                            None => {
                                *first = Some(cpu);
                                Touch::First
                            }
                            Some(c) if c != cpu && !*bounced => {
                                *bounced = true;
                                Touch::Bounced
                            }
                            Some(_) => Touch::Again,
                        };
                        (*s, addr - *s, touch)
                    });
                let found = set.find(addr).map(|h| h.slot);
                let got = set.find_touch(addr, cpu).map(|(h, touch)| {
                    assert_eq!(Some(h.slot), found, "find and find_touch agree");
                    let obj = set.get(h.slot).expect("a hit's slot is live");
                    (obj.base, h.offset, touch)
                });
                assert_eq!(got, expected, "{addr:#x}");
            }
        }
        assert_eq!(set.len(), model.len());
        positional = positional.max(set.positional_pages());
    }
    positional
}

/// Objects of random sizes at random 8-byte aligned starts.
#[test]
fn matches_a_naive_model() {
    check_against_model(20_000, xorshift(0x2545_f491_4f6c_dd1d), |next| {
        let base = 0x10_0000 + (next() % 0x4_0000) * 8;
        let size = match next() % 10 {
            0 => (next() % (1 << 20)) as u32,
            1 => 0,
            _ => 8 << (next() % 10),
        };
        (base, size)
    });
}

/// Slab-like layouts (objects of one size at its stride, pages filling up and emptying, which
/// switches pages between their positional and sorted forms), with now and then an object of
/// another size or phase in the middle.
#[test]
fn matches_a_naive_model_on_slab_layouts() {
    const SIZES: [u32; 6] = [8, 24, 64, 192, 640, 4096];
    let positional = check_against_model(200_000, xorshift(0x9e37_79b9_7f4a_7c15), |next| {
        let cache = (next() % SIZES.len() as u64) as usize;
        let size = SIZES[cache];
        // Few objects per cache, so pages fill up and empty again often.
        let region = 0x1000_0000 * (cache as u64 + 1);
        let phase = if cache.is_multiple_of(2) { 0 } else { 40 };
        let base = region + phase + (next() % 600) * u64::from(size);
        match next() % 50 {
            0 => (base + 8, size),
            1 => (base, size / 2 + 8),
            _ => (base, size),
        }
    });
    assert!(
        positional > 10,
        "only {positional} pages reached the positional form"
    );
}

#[test]
fn an_allocation_replaces_every_object_it_overlaps() {
    let mut set = AddressSet::new();
    let new = |base, size| NewObject {
        base,
        size,
        type_id: TypeId(0),
        time_ns: 0,
        cpu: 0,
    };
    set.insert(new(0x1000, 0x100), |_| {});
    set.insert(new(0x1100, 0x100), |_| {});
    set.insert(new(0x1200, 0x100), |_| {});
    set.insert(new(0x1300, 0x100), |_| {});
    let mut replaced = Vec::new();
    set.insert(new(0x1080, 0x200), |o| replaced.push(o.base));
    replaced.sort_unstable();
    assert_eq!(replaced, [0x1000, 0x1100, 0x1200]);
    assert_eq!(set.len(), 2);
    assert_eq!(set.find(0x1000), None);
    assert!(set.find(0x1300).is_some());
    // Same start: replaced too.
    let mut n = 0;
    set.insert(new(0x1300, 8), |_| n += 1);
    assert_eq!(n, 1);
    // Sizes up to the top of the address space do not overflow.
    set.insert(new(u64::MAX - 4, u32::MAX), |_| {});
    assert!(set.find(u64::MAX - 1).is_some());
}

#[test]
fn dedicated_caches_name_their_type_and_kmalloc_is_split_by_site() {
    let mut r = Resolver::new(&Table);
    r.cache_info(&cache(1, "task_struct", 4096));
    r.cache_info(&cache(2, "kmalloc-1k", 1024));
    r.cache_info(&cache(3, "kmalloc-cg-64", 64));
    r.cache_info(&cache(4, "dma-kmalloc-512", 512));
    r.cache_info(&cache(1, "task_struct", 4096));
    let t = r.alloc_type(&alloc(0x10, 1, 0, 0x1010));
    assert_eq!(name(&r, t), "task_struct");
    // Another cache at the same address later.
    r.cache_info(&cache(1, "renamed", 8));
    let t2 = r.alloc_type(&alloc(0x10, 1, 0, 0x1010));
    assert_eq!(name(&r, t2), "renamed");
    r.cache_info(&cache(1, "task_struct", 4096));
    assert_eq!(
        r.alloc_type(&alloc(0x10, 1, 0, 0x1010)),
        t,
        "one type per name"
    );
    let f = r.alloc_type(&alloc(0x10, 2, 0, 0x1010));
    let g = r.alloc_type(&alloc(0x10, 2, 0, 0x2020));
    let f2 = r.alloc_type(&alloc(0x10, 2, 0, 0x1fff));
    assert_eq!(name(&r, f), "kmalloc-1k@f");
    assert_eq!(name(&r, g), "kmalloc-1k@g");
    assert_eq!(f, f2, "two call sites in one function are one type");
    let cg = r.alloc_type(&alloc(0x10, 3, 0, 0x1000));
    assert_eq!(name(&r, cg), "kmalloc-cg-64@f");
    let dma = r.alloc_type(&alloc(0x10, 4, 0, 0x9999));
    assert_eq!(name(&r, dma), "dma-kmalloc-512@0x9999");
    let large = r.alloc_type(&alloc(0x10, 0, 0, 0x2000));
    assert_eq!(name(&r, large), "kmalloc-large@g");
    let unknown = r.alloc_type(&alloc(0x10, 0xabc, 0, 0x1000));
    assert_eq!(name(&r, unknown), "cache@0xabc");
    assert_eq!(r.counts().unknown_cache_allocs, 1);
    assert!(is_generic_kmalloc("kmalloc-rnd-01-64"));
    assert!(is_generic_kmalloc("kmalloc-rcl-8"));
    assert!(!is_generic_kmalloc("kmem_cache"));
}

#[test]
fn page_allocations_are_split_by_site_apart_from_large_kmallocs() {
    let mut r = Resolver::new(&Table);
    let pages = |ptr, bytes, call_site| Alloc {
        ptr,
        call_site,
        bytes_req: bytes,
        bytes_alloc: bytes,
        flags: dprof_abi::ALLOC_PAGES,
        ..Alloc::default()
    };
    let f = r.alloc_type(&pages(0xffff_8880_0100_0000, 4096, 0x1010));
    let g = r.alloc_type(&pages(0xffff_8880_0100_4000, 16384, 0x2010));
    assert_eq!(name(&r, f), "page@f");
    assert_eq!(name(&r, g), "page@g");
    let info = r.types().get(f).expect("the type");
    assert_eq!((info.kind, info.cache.as_deref()), (TypeKind::Slab, None));
    assert_eq!(info.site.as_deref(), Some("f"));
    // A large kmalloc at the same site is another type.
    let large = r.alloc_type(&alloc(0x10, 0, 8192, 0x1010));
    assert_eq!(name(&r, large), "kmalloc-large@f");
    // An address inside the pages resolves to them, by offset from their start.
    r.alloc(&pages(0xffff_8880_0100_4000, 16384, 0x2010), 10, 0, |_| {});
    assert!(matches!(
        r.resolve(0xffff_8880_0100_5008, false, &CTX),
        Resolution::Slab { type_id, offset: 0x1008, .. } if type_id == g
    ));
    assert!(r.free(0xffff_8880_0100_4000).is_some());
    // The module records every page free: one of pages never recorded is no unknown free.
    let unknown = r.counts().unknown_frees;
    assert!(r.free_pages_entry(0xffff_8880_0100_4000).is_none());
    assert!(r.free_pages_entry(0xffff_8880_0900_0000).is_none());
    assert_eq!(r.counts().unknown_frees, unknown);
    r.alloc(&pages(0xffff_8880_0100_8000, 4096, 0x1010), 20, 0, |_| {});
    let frees = r.counts().frees;
    assert!(r.free_pages_entry(0xffff_8880_0100_8000).is_some());
    assert_eq!(r.counts().frees, frees + 1);
}

#[test]
fn rust_sites_are_demangled_and_rust_allocations_split_by_size() {
    let k = crate::symbols::Kallsyms::parse(
        b"ffffffff81000000 T _RNvMNtNtCs1234_6kernel5alloc9allocatorNtB2_11ReallocFunc4call\n\
          ffffffff81000100 T __kmalloc\n\
          ffffffffa0000000 t _RNvMs_NtCsjer0vnqcy3J_10dprof_main7sessionNtB4_7Session4emit\t[dprof]\n\
          ffffffffa0000100 t _ZN10dprof_main4ring13Ring$LT$T$GT$3new17h0123456789abcdefE\t[dprof]\n\
          ffffffffa0000200 t _ZN10dprof_main4ring13Ring$LT$T$GT$3new17hfedcba9876543210E\t[dprof]\n\
          ffffffffa0000300 t dprof_shim_alloc\t[dprof]\n",
    );
    let mut r = Resolver::new(&k);
    r.cache_info(&cache(2, "kmalloc-64", 64));
    let site = |r: &Resolver<'_>, id| r.types().get(id).and_then(|t| t.site.clone());

    let emit = r.alloc_type(&alloc(0x10, 2, 40, 0xffff_ffff_a000_0010));
    assert_eq!(
        name(&r, emit),
        "kmalloc-64@<dprof_main::session::Session>::emit"
    );
    assert_eq!(
        site(&r, emit).as_deref(),
        Some("<dprof_main::session::Session>::emit")
    );
    // Two instances of a generic function: legacy mangling gives them one path, their hashes
    // tell them apart.
    let first = r.alloc_type(&alloc(0x10, 2, 40, 0xffff_ffff_a000_0110));
    let second = r.alloc_type(&alloc(0x10, 2, 40, 0xffff_ffff_a000_0210));
    assert_eq!(name(&r, first), "kmalloc-64@dprof_main::ring::Ring<T>::new");
    assert_eq!(
        name(&r, second),
        "kmalloc-64@dprof_main::ring::Ring<T>::new::hfedcba9876543210"
    );
    assert_eq!(
        r.alloc_type(&alloc(0x10, 2, 8, 0xffff_ffff_a000_0120)),
        first
    );
    let c = r.alloc_type(&alloc(0x10, 2, 40, 0xffff_ffff_a000_0310));
    assert_eq!(name(&r, c), "kmalloc-64@dprof_shim_alloc");

    // KBox and KVec allocate through the kernel crate's allocator: every Rust allocation has
    // its call site there, and the size asked for tells Rust types apart.
    let allocator = 0xffff_ffff_8100_0040;
    let a48 = r.alloc_type(&alloc(0x10, 2, 48, allocator));
    let a24 = r.alloc_type(&alloc(0x10, 2, 24, allocator));
    assert_eq!(
        name(&r, a48),
        "kmalloc-64@<kernel::alloc::allocator::ReallocFunc>::call[48B]"
    );
    assert_eq!(
        name(&r, a24),
        "kmalloc-64@<kernel::alloc::allocator::ReallocFunc>::call[24B]"
    );
    assert_eq!(r.alloc_type(&alloc(0x20, 2, 48, allocator)), a48);
    assert_eq!(
        site(&r, a48).as_deref(),
        Some("<kernel::alloc::allocator::ReallocFunc>::call"),
        "the site is the function, which kallsyms and --histories know"
    );
    // A history's start does not know the size: the allocator's objects, unsplit.
    let unsized_ = r.alloc_type(&alloc(0x10, 2, 0, allocator));
    assert_eq!(
        name(&r, unsized_),
        "kmalloc-64@<kernel::alloc::allocator::ReallocFunc>::call"
    );
    assert!(is_site_symbol(
        "_ZN10dprof_main4ring13Ring$LT$T$GT$3new17hfedcba9876543210E",
        "dprof_main::ring::Ring<T>::new::hfedcba9876543210"
    ));
    assert!(is_site_symbol("__kmalloc", "__kmalloc"));
    assert!(!is_site_symbol("__kmalloc", "kmalloc"));
}

fn pool(pool: &str, aliases: &[&str]) -> MergedCache {
    MergedCache {
        pool: pool.to_owned(),
        aliases: aliases.iter().map(|&a| a.to_owned()).collect(),
    }
}

#[test]
fn merged_pools_are_split_by_site_and_other_caches_are_not() {
    let long = "a_cache_name_longer_than_the_records_keep_of_it_by_far";
    assert!(long.len() >= CACHE_NAME_BYTES);
    let pools = [
        pool(":0000192", &["aio_kiocb", "file_lock_cache", "rtable"]),
        // A mergeable cache alone in its pool holds one kind of object.
        pool(":0000104", &["lonely"]),
        pool(":0000064", &["kmalloc-64", "small_thing"]),
        pool(":0000512", &[long, "other"]),
    ];
    let mut r = Resolver::new(&Table);
    r.set_merged_caches(&pools);
    r.cache_info(&cache(1, "rtable", 192));
    r.cache_info(&cache(2, "dentry", 192));
    r.cache_info(&cache(3, "lonely", 104));
    r.cache_info(&cache(4, "kmalloc-64", 64));
    r.cache_info(&cache(5, long, 512));
    let f = r.alloc_type(&alloc(0x10, 1, 0, 0x1010));
    let g = r.alloc_type(&alloc(0x10, 1, 0, 0x2020));
    assert_eq!(
        r.alloc_type(&alloc(0x10, 1, 0, 0x1fff)),
        f,
        "one type per function"
    );
    assert_eq!(
        (name(&r, f), name(&r, g)),
        ("rtable@f".into(), "rtable@g".into())
    );
    let info = r.types().get(f).expect("type");
    assert_eq!(info.cache.as_deref(), Some("rtable"));
    assert_eq!(info.site.as_deref(), Some("f"));
    assert_eq!(info.object_size, Some(192));
    let dentry = r.alloc_type(&alloc(0x10, 2, 0, 0x1010));
    assert_eq!(name(&r, dentry), "dentry");
    assert_eq!(r.types().get(dentry).and_then(|t| t.site.clone()), None);
    let lonely = r.alloc_type(&alloc(0x10, 3, 0, 0x1010));
    assert_eq!(name(&r, lonely), "lonely");
    let kmalloc = r.alloc_type(&alloc(0x10, 4, 0, 0x1010));
    assert_eq!(name(&r, kmalloc), "kmalloc-64@f");
    // The record keeps the first bytes of a long name: they still find its pool.
    let cut = r.alloc_type(&alloc(0x10, 5, 0, 0x2020));
    let cut_name = format!("{}...@g", &long[..CACHE_NAME_BYTES - 1]);
    assert_eq!(name(&r, cut), cut_name);

    let pool_of = |cache: &str| r.merged_pool(cache).map(|p| p.pool.as_str());
    assert_eq!(pool_of("rtable"), Some(":0000192"));
    assert_eq!(pool_of("kmalloc-64"), Some(":0000064"));
    assert_eq!(pool_of(&cut_name[..cut_name.len() - 2]), Some(":0000512"));
    assert_eq!(pool_of("dentry"), None);
    assert_eq!(pool_of("lonely"), None);
    assert_eq!(pool_of("aio_kiocb"), None, "no cache of that name was met");

    // Without the header's pools, a cache is one type.
    let mut plain = Resolver::new(&Table);
    plain.cache_info(&cache(1, "rtable", 192));
    let t = plain.alloc_type(&alloc(0x10, 1, 0, 0x1010));
    assert_eq!(name(&plain, t), "rtable");
    assert_eq!(plain.merged_pool("rtable"), None);
}

#[test]
fn resolution_order_is_slab_stack_percpu_global_user() {
    let mut r = Resolver::new(&Table);
    r.cache_info(&cache(1, "task_struct", 4096));
    r.alloc(
        &alloc(0xffff_8880_0500_0000, 1, 4096, 0x1000),
        10,
        0,
        |_| {},
    )
    .expect("allocated");
    r.learn_gs_base(3, 0xffff_8880_7fd8_0000);
    let at = |r: &mut Resolver<'_>, addr, gs| {
        let res = r.resolve(addr, gs, &CTX);
        let n = match res {
            Resolution::Slab { type_id, .. }
            | Resolution::Global { type_id, .. }
            | Resolution::Percpu { type_id, .. }
            | Resolution::Stack { type_id, .. }
            | Resolution::UntracedObject { type_id, .. }
            | Resolution::Region { type_id, .. } => name(r, type_id),
            Resolution::Unknown => "?".to_owned(),
        };
        (n, res)
    };
    let (n, res) = at(&mut r, 0xffff_8880_0500_0010, false);
    assert_eq!(n, "task_struct");
    assert!(matches!(res, Resolution::Slab { offset: 0x10, .. }));
    let (n, res) = at(&mut r, 0xffff_c900_0001_0008, false);
    assert_eq!(n, "stack");
    assert!(matches!(
        res,
        Resolution::Stack {
            base: 0xffff_c900_0001_0000,
            offset: 8,
            ..
        }
    ));
    // %gs-relative: offset from the sample's own gs base.
    let (n, res) = at(&mut r, CTX.gs_base + 0x1008, true);
    assert_eq!(n, "percpu:runqueues");
    assert!(matches!(
        res,
        Resolution::Percpu {
            owner_cpu: 0,
            offset: 8,
            ..
        }
    ));
    // Another CPU's area through a plain pointer.
    let (n, res) = at(&mut r, 0xffff_8880_7fd8_1010, false);
    assert_eq!(n, "percpu:runqueues");
    assert!(matches!(
        res,
        Resolution::Percpu {
            owner_cpu: 3,
            offset: 0x10,
            ..
        }
    ));
    let (n, _) = at(&mut r, CTX.gs_base + 0x1800, true);
    assert_eq!(n, PERCPU_STATIC_TYPE);
    let (n, _) = at(&mut r, CTX.gs_base + 0x10_0000, true);
    assert_eq!(n, PERCPU_DYNAMIC_TYPE);
    let (n, res) = at(&mut r, 0xffff_ffff_8200_0008, false);
    assert_eq!(n, "global:jiffies");
    assert!(matches!(
        res,
        Resolution::Global {
            symbol: 0xffff_ffff_8200_0000,
            offset: 8,
            ..
        }
    ));
    assert_eq!(at(&mut r, 0xffff_8880_0900_0000, false).0, "?");
    // User memory (copy_to_user), one instance per page; the kernel half stays unknown.
    let (n, res) = at(&mut r, 0x7ffd_2500_1234, false);
    assert_eq!(n, USER_MEMORY_TYPE);
    assert!(matches!(
        res,
        Resolution::Region {
            base: 0x7ffd_2500_1000,
            offset: 0x234,
            ..
        }
    ));
    assert_eq!(at(&mut r, 0xff00_0000_0000_0000, false).0, "?");
    // After the free the object is gone.
    assert!(r.free(0xffff_8880_0500_0000).is_some());
    assert_eq!(at(&mut r, 0xffff_8880_0500_0010, false).0, "?");
}

#[test]
fn null_and_unknown_frees_are_counted() {
    let mut r = Resolver::new(&NoSymbols);
    assert!(r.free(0).is_none());
    assert!(r.free(16).is_none());
    assert!(r.free(0xffff_8880_0000_0000).is_none());
    assert!(r.alloc(&alloc(0, 0, 8, 0x1000), 0, 0, |_| {}).is_none());
    let c = r.counts();
    assert_eq!((c.null_frees, c.unknown_frees, c.null_allocs), (2, 1, 1));
}

#[test]
fn kallsyms_is_a_symbol_source() {
    let k = crate::symbols::Kallsyms::parse(dprof_fixtures::data_profile::KALLSYMS.as_bytes());
    let s: &dyn SymbolSource = &k;
    assert_eq!(
        s.function(0xffff_ffff_8110_0010),
        Some(("tcp_sendmsg", 0x10))
    );
    assert_eq!(s.data_symbol(0xffff_ffff_8210_0008), Some(("jiffies", 8)));
    assert_eq!(
        s.data_symbol(0xffff_8880_0000_0000),
        None,
        "the heap is not data"
    );
    assert_eq!(s.percpu_range(), Some(0..0x2000));
    assert_eq!(s.percpu_symbol(0x1048), Some(("runqueues", 8)));
    assert!(s.function_count() > 0);
}

#[test]
fn the_struct_page_array_and_vmalloc_space_are_regions_with_a_layout() {
    let layout = dprof_format::MemoryLayout {
        page_offset_base: 0xffff_8880_0000_0000,
        vmalloc_base: 0xffff_c900_0000_0000,
        vmemmap_base: 0xffff_ea00_0000_0000,
        struct_page_size: 64,
    };
    let name_of = |r: &Resolver<'_>, res: &Resolution| match *res {
        Resolution::Region { type_id, .. } => name(r, type_id),
        _ => "?".to_owned(),
    };
    let mut plain = Resolver::new(&NoSymbols);
    let page_field = 0xffff_ea00_0000_0000 + 3 * 64 + 8;
    assert!(matches!(
        plain.resolve(page_field, false, &CTX),
        Resolution::Unknown
    ));
    let mut r = Resolver::new(&NoSymbols);
    r.set_memory_layout(Some(layout));
    // The fourth struct page's field at +8.
    let res = r.resolve(page_field, false, &CTX);
    assert_eq!(name_of(&r, &res), STRUCT_PAGE_TYPE);
    assert!(matches!(
        res,
        Resolution::Region {
            base: 0xffff_ea00_0000_00c0,
            offset: 8,
            ..
        }
    ));
    // Another task's stack or a vmalloc area: the vmalloc region, by page.
    let res = r.resolve(0xffff_c900_0123_4567, false, &CTX);
    assert_eq!(name_of(&r, &res), VMALLOC_TYPE);
    assert!(matches!(
        res,
        Resolution::Region {
            base: 0xffff_c900_0123_4000,
            offset: 0x567,
            ..
        }
    ));
    // The sample's own stack stays its stack; the direct map stays unknown without an
    // object there.
    assert!(matches!(
        r.resolve(CTX.rsp - 8, false, &CTX),
        Resolution::Stack { .. }
    ));
    assert!(matches!(
        r.resolve(0xffff_8880_0900_0000, false, &CTX),
        Resolution::Unknown
    ));
}

#[test]
fn image_addresses_no_symbol_names_are_their_section_s_region() {
    use dprof_format::{ImageSection, ImageSectionKind};
    let section = |kind, start, end| ImageSection { kind, start, end };
    // Out of order, as a hand-edited header could have them.
    let image = [
        section(
            ImageSectionKind::Bss,
            0xffff_ffff_8300_0000,
            0xffff_ffff_8310_0000,
        ),
        section(
            ImageSectionKind::Code,
            0xffff_ffff_8100_0000,
            0xffff_ffff_8180_0000,
        ),
        section(
            ImageSectionKind::Data,
            0xffff_ffff_8200_0000,
            0xffff_ffff_8280_0000,
        ),
        section(
            ImageSectionKind::Rodata,
            0xffff_ffff_8180_0000,
            0xffff_ffff_8200_0000,
        ),
    ];
    let mut r = Resolver::new(&Table);
    r.set_kernel_image(&image);
    let region = |r: &mut Resolver<'_>, addr| match r.resolve(addr, false, &CTX) {
        Resolution::Region {
            type_id,
            base,
            offset,
        } => Some((name(r, type_id), base, offset)),
        _ => None,
    };
    // A symbol still names its variable.
    assert!(matches!(
        r.resolve(0xffff_ffff_8200_0008, false, &CTX),
        Resolution::Global { offset: 8, .. }
    ));
    // Past the symbol, the section's region, by page.
    assert_eq!(
        region(&mut r, 0xffff_ffff_8200_1234),
        Some(("kernel data".to_owned(), 0xffff_ffff_8200_1000, 0x234))
    );
    assert_eq!(
        region(&mut r, 0xffff_ffff_830f_ffff).map(|x| x.0),
        Some("kernel bss".to_owned())
    );
    assert_eq!(
        region(&mut r, 0xffff_ffff_8180_0000).map(|x| x.0),
        Some("kernel rodata".to_owned())
    );
    assert_eq!(
        region(&mut r, 0xffff_ffff_817f_ffff).map(|x| x.0),
        Some("kernel code".to_owned())
    );
    // Between sections and past the last one: unknown.
    for addr in [
        0xffff_ffff_8280_0000,
        0xffff_ffff_8310_0000,
        0xffff_ffff_8000_0000,
    ] {
        assert!(
            matches!(r.resolve(addr, false, &CTX), Resolution::Unknown),
            "{addr:#x}"
        );
    }
    // Without the sections, the same address is unknown.
    let mut plain = Resolver::new(&Table);
    assert!(matches!(
        plain.resolve(0xffff_ffff_8200_1234, false, &CTX),
        Resolution::Unknown
    ));
}

#[test]
fn objects_from_before_collection_resolve_through_their_page_owners() {
    use dprof_format::{OwnedPage, PageOwners, PageUsage, SlabPages};
    const SLAB: u64 = 0xffff_8880_0123_4000;
    const KMALLOC: u64 = 0xffff_8880_0200_0000;
    let owners = PageOwners {
        slabs: vec![
            // Two pages of 512-byte objects after an 8-byte red zone.
            SlabPages {
                first_object: SLAB + 8,
                stride: 512,
                objects: 15,
                cache: "task_struct".to_owned(),
            },
            SlabPages {
                first_object: KMALLOC,
                stride: 64,
                objects: 64,
                cache: "kmalloc-64".to_owned(),
            },
        ],
        pages: vec![
            OwnedPage {
                page: 0xffff_8880_0300_0000,
                usage: PageUsage::PageCache,
            },
            OwnedPage {
                page: 0xffff_8880_0300_1000,
                usage: PageUsage::PageTable,
            },
        ],
    };
    let mut r = Resolver::new(&NoSymbols);
    r.cache_info(&cache(1, "task_struct", 504));
    r.set_page_owners(&owners);
    let earlier = |r: &mut Resolver<'_>, addr| match r.resolve(addr, false, &CTX) {
        Resolution::UntracedObject {
            type_id,
            base,
            offset,
        } => Some((name(r, type_id), base, offset)),
        _ => None,
    };
    // The third object, at +0x10: the cache's own type, the one its new objects get.
    assert_eq!(
        earlier(&mut r, SLAB + 8 + 2 * 512 + 0x10),
        Some(("task_struct".to_owned(), SLAB + 8 + 1024, 0x10))
    );
    let traced = r.alloc(&alloc(0xffff_8880_0500_0000, 1, 504, 0x1000), 10, 0, |_| {});
    assert_eq!(
        traced.map(|(_, id)| name(&r, id)),
        Some("task_struct".to_owned())
    );
    // A generic kmalloc cache is split by site, and the site is unknown.
    assert_eq!(
        earlier(&mut r, KMALLOC + 64 * 63 + 63),
        Some((format!("kmalloc-64@{UNTRACED_SITE}"), KMALLOC + 64 * 63, 63))
    );
    // The red zone before the first object, and past the last: no object.
    assert_eq!(earlier(&mut r, SLAB + 4), None);
    assert_eq!(earlier(&mut r, KMALLOC + 64 * 64), None);
    // Pages by their use.
    let region = |r: &mut Resolver<'_>, addr| match r.resolve(addr, false, &CTX) {
        Resolution::Region {
            type_id,
            base,
            offset,
        } => Some((name(r, type_id), base, offset)),
        _ => None,
    };
    assert_eq!(
        region(&mut r, 0xffff_8880_0300_0abc),
        Some(("page cache page".to_owned(), 0xffff_8880_0300_0000, 0xabc))
    );
    assert_eq!(
        region(&mut r, 0xffff_8880_0300_1008),
        Some(("page table".to_owned(), 0xffff_8880_0300_1000, 8))
    );
    assert!(matches!(
        r.resolve(0xffff_8880_0300_2000, false, &CTX),
        Resolution::Unknown
    ));
    // A live traced object wins over its page's owner.
    let mut r = Resolver::new(&NoSymbols);
    r.cache_info(&cache(2, "files_cache", 512));
    r.set_page_owners(&owners);
    r.alloc(&alloc(SLAB + 8, 2, 512, 0x1000), 10, 0, |_| {})
        .expect("allocated");
    assert!(matches!(
        r.resolve(SLAB + 8 + 0x20, false, &CTX),
        Resolution::Slab { offset: 0x20, .. }
    ));
}

/// Pseudo-types by what the resolver names them; data types are not.
#[test]
fn pseudo_types_are_the_stack_regions_unnamed_percpu_memory_and_the_canary() {
    let pseudo = [
        (TypeKind::Stack, STACK_TYPE, "the kernel stacks"),
        (
            TypeKind::Region,
            USER_MEMORY_TYPE,
            "a region of memory, not one data type",
        ),
        (
            TypeKind::Region,
            STRUCT_PAGE_TYPE,
            "a region of memory, not one data type",
        ),
        (
            TypeKind::Region,
            VMALLOC_TYPE,
            "a region of memory, not one data type",
        ),
        (
            TypeKind::Percpu,
            PERCPU_STATIC_TYPE,
            "per-CPU memory that no symbol names",
        ),
        (
            TypeKind::Percpu,
            PERCPU_DYNAMIC_TYPE,
            "per-CPU memory that no symbol names",
        ),
        (
            TypeKind::Percpu,
            "percpu:fixed_percpu_data",
            "the stack protector's canary",
        ),
        (
            TypeKind::Percpu,
            "percpu:__stack_chk_guard",
            "the stack protector's canary",
        ),
        (
            TypeKind::Global,
            "global:__stack_chk_guard",
            "the stack protector's canary",
        ),
        (
            TypeKind::Slab,
            "page@skb_page_frag_refill",
            "pages from the page allocator, not one data type",
        ),
    ];
    for (kind, name, what) in pseudo {
        assert_eq!(pseudo_type(kind, name), Some(what), "{name}");
    }
    for (kind, name) in [
        (TypeKind::Slab, "task_struct"),
        (TypeKind::Slab, "kmalloc-1k@__alloc_skb"),
        (TypeKind::Slab, "stack"),
        (TypeKind::Slab, "page_pool"),
        (TypeKind::Slab, "kmalloc-large@alloc_pages_exact"),
        (TypeKind::Global, "global:jiffies"),
        (TypeKind::Percpu, "percpu:runqueues"),
        (TypeKind::Global, "global:fixed_percpu_data_users"),
    ] {
        assert_eq!(pseudo_type(kind, name), None, "{name}");
    }
}
