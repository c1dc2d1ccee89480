use std::collections::HashMap;
use std::fmt::Write;

use dprof_abi::{Record, RecordKind, ALLOC_KMALLOC, FREE_KFREE};

use super::*;
use crate::perf::tracefs::Format;

fn format(name: &str, fields: &[(&str, usize, usize)], data_loc: &str) -> Format {
    let mut text = format!("name: {name}\nID: 7\nformat:\n");
    for (field, offset, size) in fields {
        let decl = if *field == data_loc {
            format!("__data_loc char[] {field}")
        } else {
            format!("unsigned long {field}")
        };
        writeln!(
            text,
            "\tfield:{decl};\toffset:{offset};\tsize:{size};\tsigned:0;"
        )
        .expect("writes to a String");
    }
    Format::parse(&text).expect("parses")
}

/// `kmem_cache_alloc` of Linux 6.18, `kmem_cache_free` and `kmalloc` as every kernel has them.
fn cache_alloc() -> KmemFields {
    let f = format(
        "kmem_cache_alloc",
        &[
            ("call_site", 8, 8),
            ("ptr", 16, 8),
            ("name", 24, 4),
            ("bytes_req", 32, 8),
            ("bytes_alloc", 40, 8),
            ("gfp_flags", 48, 8),
        ],
        "name",
    );
    KmemFields::new(Kmem::CacheAlloc, &f).expect("usable")
}

fn kmalloc() -> KmemFields {
    let f = format(
        "kmalloc",
        &[
            ("call_site", 8, 8),
            ("ptr", 16, 8),
            ("bytes_req", 24, 8),
            ("bytes_alloc", 32, 8),
            ("gfp_flags", 40, 8),
        ],
        "",
    );
    KmemFields::new(Kmem::Kmalloc, &f).expect("usable")
}

fn cache_free() -> KmemFields {
    let f = format(
        "kmem_cache_free",
        &[("call_site", 8, 8), ("ptr", 16, 8), ("name", 24, 4)],
        "name",
    );
    KmemFields::new(Kmem::CacheFree, &f).expect("usable")
}

fn raw(fields: &[(usize, u64)], name: Option<&[u8]>) -> Vec<u8> {
    let mut raw = vec![0u8; 56];
    for &(offset, value) in fields {
        raw[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
    }
    if let Some(name) = name {
        let loc = 0x38u32 | ((name.len() as u32 + 1) << 16);
        raw[24..28].copy_from_slice(&loc.to_le_bytes());
        raw.extend_from_slice(name);
        raw.push(0);
    }
    raw
}

fn geometry() -> HashMap<String, Geometry> {
    let g = |object_size, slot_size| Geometry {
        object_size,
        slot_size,
        align: 8,
    };
    HashMap::from([
        ("dentry".to_owned(), g(192, 192)),
        ("kmalloc-64".to_owned(), g(64, 64)),
        ("kmalloc-cg-1k".to_owned(), g(1024, 1024)),
    ])
}

fn records(out: &[u8]) -> Vec<(u32, Record)> {
    let mut at = 0;
    let mut all = Vec::new();
    while at < out.len() {
        let (header, record) = Record::decode(&out[at..]).expect("decodes");
        at += usize::from(header.size);
        all.push((header.cpu, record));
    }
    all
}

#[test]
fn allocations_and_frees_carry_the_cache_named_by_the_tracepoint() {
    let mut t = Translator::new(CacheTable::new(geometry()), None, 2);
    let alloc = raw(
        &[
            (8, 0xffff_ffff_8100_1000),
            (16, 0xffff_8880_0000_1000),
            (32, 192),
            (40, 192),
        ],
        Some(b"dentry"),
    );
    t.kmem(&cache_alloc(), 1, 100, &alloc);
    let free = raw(
        &[(8, 0xffff_ffff_8100_2000), (16, 0xffff_8880_0000_1000)],
        Some(b"dentry"),
    );
    t.kmem(&cache_free(), 0, 200, &free);
    let got = records(&t.out);
    let [(1, Record::CacheInfo(info)), (1, Record::Alloc(a)), (0, Record::Free(f))] = &got[..]
    else {
        panic!("expected the cache's description, then the allocation and the free: {got:?}");
    };
    assert_eq!(info.name_bytes(), b"dentry");
    assert_eq!(
        (info.object_size, info.size, info.origin),
        (192, 192, CACHE_ORIGIN_SEEN)
    );
    assert_eq!(
        (a.cache, a.ptr, a.bytes_alloc, a.flags),
        (info.cache, 0xffff_8880_0000_1000, 192, 0)
    );
    assert_eq!((f.cache, f.flags), (info.cache, 0));
    assert_eq!(t.written, [1, 2]);
}

#[test]
fn kmalloc_is_typed_by_its_size_class_and_large_ones_by_none() {
    let mut t = Translator::new(CacheTable::new(geometry()), None, 1);
    let small = raw(
        &[
            (8, 0xffff_ffff_8100_1000),
            (16, 0xffff_8880_0000_2000),
            (24, 50),
            (32, 64),
        ],
        None,
    );
    t.kmem(&kmalloc(), 0, 1, &small);
    let accounted = raw(
        &[
            (8, 0xffff_ffff_8100_1000),
            (16, 0xffff_8880_0000_3000),
            (24, 1000),
            (32, 1024),
            (40, 1 << 22),
        ],
        None,
    );
    t.kmem(&kmalloc(), 0, 2, &accounted);
    let large = raw(
        &[
            (8, 0xffff_ffff_8100_1000),
            (16, 0xffff_8880_0001_0000),
            (32, 16384),
        ],
        None,
    );
    t.kmem(&kmalloc(), 0, 3, &large);
    let names: Vec<String> = records(&t.out)
        .iter()
        .filter_map(|(_, r)| match r {
            Record::CacheInfo(i) => Some(String::from_utf8_lossy(i.name_bytes()).into_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["kmalloc-64", "kmalloc-cg-1k"]);
    let allocs: Vec<Alloc> = records(&t.out)
        .into_iter()
        .filter_map(|(_, r)| match r {
            Record::Alloc(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(allocs.len(), 3);
    assert!(allocs.iter().all(|a| a.flags == ALLOC_KMALLOC));
    assert_ne!(allocs[0].cache, 0);
    assert_ne!(allocs[1].cache, allocs[0].cache);
    assert_eq!(allocs[2].cache, 0, "a large kmalloc comes from no cache");
}

/// The size a generic kmalloc cache's name gives (`kmalloc-cg-2k`: 2048), for every prefix
/// in `prefixes`; `None` for other names.
fn named_size(prefixes: &[&str], name: &str) -> Option<u32> {
    prefixes.iter().find_map(|p| {
        let size = name.strip_prefix(p)?;
        match size.strip_suffix('k') {
            Some(k) => k.parse::<u32>().ok().map(|k| k * 1024),
            None => size.parse().ok(),
        }
    })
}

/// Generic caches whose slots are their objects, as on most kernels.
fn exact(prefixes: &[&str], name: &str) -> Option<Geometry> {
    named_size(prefixes, name).map(|size| Geometry {
        object_size: size,
        slot_size: size,
        align: 8,
    })
}

const ALL_PREFIXES: [&str; 4] = ["kmalloc-", "kmalloc-cg-", "kmalloc-rcl-", "dma-kmalloc-"];

#[test]
fn kmalloc_cache_names_follow_the_kernel_s() {
    let all = |n: &str| exact(&ALL_PREFIXES, n);
    let plain = |n: &str| exact(&["kmalloc-"], n);
    assert_eq!(kmalloc_cache(90, 96, 0, all).as_deref(), Some("kmalloc-96"));
    assert_eq!(
        kmalloc_cache(1500, 2048, GFP_ACCOUNT, all).as_deref(),
        Some("kmalloc-cg-2k")
    );
    assert_eq!(
        kmalloc_cache(128, 128, GFP_RECLAIMABLE, all).as_deref(),
        Some("kmalloc-rcl-128")
    );
    assert_eq!(
        kmalloc_cache(40, 64, GFP_DMA, all).as_deref(),
        Some("dma-kmalloc-64")
    );
    // A kernel without accounted caches (cgroup.memory=nokmem) serves them from the plain ones.
    assert_eq!(
        kmalloc_cache(2000, 2048, GFP_ACCOUNT, plain).as_deref(),
        Some("kmalloc-2k")
    );
    assert_eq!(
        kmalloc_cache(8000, 8192, 0, all).as_deref(),
        Some("kmalloc-8k")
    );
    assert_eq!(kmalloc_cache(8193, 8193, 0, all), None);
    assert_eq!(kmalloc_cache(0, 0, 0, all), None);
    // Without the caches' geometry, the size names the cache.
    assert_eq!(
        kmalloc_cache(500, 512, GFP_ACCOUNT, |_| None).as_deref(),
        Some("kmalloc-512")
    );
}

#[test]
fn on_a_kasan_kernel_the_slot_size_names_the_kmalloc_cache() {
    // KASAN's redzones and metadata: each generic cache's slot is larger than its objects,
    // as large as a bigger cache's objects (kmalloc-16 holds its 16 bytes in a 32-byte slot),
    // and small caches can share a slot size (kmalloc-8 and kmalloc-16 here).
    let kasan = |n: &str| {
        let object_size = named_size(&["kmalloc-", "kmalloc-cg-"], n)?;
        let slot_size = match object_size {
            0..=16 => 32,
            17..=32 => 64,
            512 => 2048,
            4096 => 8192,
            8192 => 12288,
            other => other + 128,
        };
        Some(Geometry {
            object_size,
            slot_size,
            align: 8,
        })
    };
    for (bytes_req, bytes_alloc, gfp, cache) in [
        (5, 32, 0, "kmalloc-8"),
        (12, 32, 0, "kmalloc-16"),
        (20, 64, 0, "kmalloc-32"),
        (300, 2048, 0, "kmalloc-512"),
        (4096, 8192, 0, "kmalloc-4k"),
        (5000, 12288, 0, "kmalloc-8k"),
        (24, 64, GFP_ACCOUNT, "kmalloc-cg-32"),
    ] {
        assert_eq!(
            kmalloc_cache(bytes_req, bytes_alloc, gfp, kasan).as_deref(),
            Some(cache),
            "{bytes_req} bytes in a {bytes_alloc}-byte slot"
        );
    }
}

#[test]
fn nulls_kfree_of_nothing_and_cut_records_make_no_record() {
    let mut t = Translator::new(CacheTable::new(geometry()), None, 1);
    let kfree = KmemFields::new(
        Kmem::Kfree,
        &format("kfree", &[("call_site", 8, 8), ("ptr", 16, 8)], ""),
    )
    .expect("usable");
    t.kmem(
        &kfree,
        0,
        1,
        &raw(&[(8, 0xffff_ffff_8100_1000), (16, 0)], None),
    );
    t.kmem(
        &kfree,
        0,
        1,
        &raw(&[(8, 0xffff_ffff_8100_1000), (16, 16)], None),
    );
    t.kmem(&kfree, 0, 1, &[0u8; 12]);
    assert!(t.out.is_empty());
    t.kmem(
        &kfree,
        0,
        1,
        &raw(
            &[(8, 0xffff_ffff_8100_1000), (16, 0xffff_8880_0000_1000)],
            None,
        ),
    );
    let got = records(&t.out);
    assert!(matches!(&got[..], [(0, Record::Free(f))] if f.flags == FREE_KFREE && f.cache == 0));
}

#[test]
fn events_without_the_needed_fields_are_refused_by_name() {
    let no_ptr = format("kfree", &[("call_site", 8, 8)], "");
    let err = KmemFields::new(Kmem::Kfree, &no_ptr).expect_err("refused");
    assert_eq!(err, "kmem:kfree has no ptr field");
    let no_size = format("kmalloc", &[("call_site", 8, 8), ("ptr", 16, 8)], "");
    assert!(KmemFields::new(Kmem::Kmalloc, &no_size)
        .expect_err("refused")
        .contains("bytes_alloc"));
}

#[test]
fn linux_6_1_allocations_still_get_a_cache_by_size() {
    let f = Format::parse(crate::perf::tracefs::tests::ALLOC_6_1).expect("parses");
    let fields = KmemFields::new(Kmem::CacheAlloc, &f).expect("usable");
    assert!(!fields.names_cache());
    let mut t = Translator::new(CacheTable::new(geometry()), None, 1);
    t.kmem(
        &fields,
        0,
        1,
        &raw(
            &[
                (8, 0xffff_ffff_8100_1000),
                (16, 0xffff_8880_0000_1000),
                (32, 256),
            ],
            None,
        ),
    );
    let got = records(&t.out);
    assert!(
        matches!(&got[..], [(0, Record::CacheInfo(i)), (0, Record::Alloc(a))]
            if i.name_bytes() == b"slab-256" && a.cache == i.cache),
        "{got:?}"
    );
}

#[test]
fn samples_keep_the_registers_in_the_abi_order_and_user_samples_no_bytes() {
    let mut t = Translator::new(CacheTable::new(HashMap::new()), None, 1);
    let mut regs = [0u64; dprof_abi::SAMPLE_REGS];
    for (i, r) in regs.iter_mut().enumerate() {
        *r = i as u64 * 0x10;
    }
    t.sample(&Sample {
        cpu: 0,
        time_ns: 5,
        ip: 0x7f00_0000_1000,
        pid: 10,
        tid: 11,
        user: true,
        regs,
    });
    let (header, record) = Record::decode(&t.out).expect("decodes");
    assert_eq!(header.kind, RecordKind::AccessSample as u16);
    let Record::AccessSample(s) = record else {
        panic!("a sample");
    };
    assert_eq!(
        (s.ip, s.pid, s.tid, s.insn_len, s.flags),
        (0x7f00_0000_1000, 10, 11, 0, SAMPLE_USER)
    );
    assert_eq!(s.regs, regs);
    assert_eq!(s.sampler, SAMPLER_KIND_SOFTWARE);
}

#[test]
fn lost_counts_are_records_and_counted_per_cpu() {
    let mut t = Translator::new(CacheTable::new(HashMap::new()), None, 2);
    t.lost(1, 9, 42);
    assert_eq!(t.lost, [0, 42]);
    assert!(matches!(Record::decode(&t.out), Ok((_, Record::Lost(l))) if l.count == 42));
}

#[test]
fn every_listed_cache_is_described_once_at_the_start() {
    let mut t = Translator::new(CacheTable::new(geometry()), None, 1);
    t.describe_all(1);
    t.kmem(
        &cache_alloc(),
        0,
        2,
        &raw(&[(16, 0xffff_8880_0000_1000), (40, 192)], Some(b"dentry")),
    );
    let got = records(&t.out);
    let infos: Vec<&CacheInfo> = got
        .iter()
        .filter_map(|(_, r)| match r {
            Record::CacheInfo(i) => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(infos.len(), 3, "dentry is not described twice");
    assert!(infos.iter().all(|i| i.origin == CACHE_ORIGIN_WALK));
}

#[test]
fn hardware_samples_keep_what_the_pmu_measured_and_ibs_its_registers() {
    use crate::perf::hw_sample::HwSample;
    let mut t = Translator::new(CacheTable::new(HashMap::new()), None, 2);
    let mut raw = 0u32.to_le_bytes().to_vec();
    for r in 0..7u64 {
        raw.extend_from_slice(&(0xa0 + r).to_le_bytes());
    }
    let sample = |raw: &'static [u8], weight| HwSample {
        ip: 0xffff_ffff_8100_1234,
        pid: 1,
        tid: 2,
        time_ns: 10,
        addr: 0xffff_8880_0000_1040,
        cpu: 1,
        raw,
        weight,
        data_src: 0x6810_0142,
        regs: [7; dprof_abi::SAMPLE_REGS],
        phys_addr: 0,
        user: false,
    };
    let raw: &'static [u8] = Box::leak(raw.into_boxed_slice());
    t.hardware_sample(true, &sample(raw, 230));
    t.hardware_sample(false, &sample(&[], 0));
    // An IBS sample whose registers are cut is dropped, as the module drops it.
    t.hardware_sample(true, &sample(&raw[..10], 5));
    let got = records(&t.out);
    let [(1, Record::AccessSample(ibs)), (1, Record::AccessSample(pebs))] = &got[..] else {
        panic!("two samples: {got:?}");
    };
    assert_eq!(ibs.sampler, dprof_abi::SAMPLER_KIND_IBS);
    assert_eq!(
        ibs.ibs.map(|r| r.regs[dprof_abi::IBS_DC_LIN_AD]),
        Some(0xa5)
    );
    let all = dprof_abi::HW_DATA_ADDR | dprof_abi::HW_DATA_SRC | dprof_abi::HW_LATENCY;
    assert_eq!(
        (ibs.hw_valid, ibs.latency, ibs.data_src),
        (all, 230, 0x6810_0142)
    );
    assert_eq!(pebs.sampler, dprof_abi::SAMPLER_KIND_PEBS);
    assert!(pebs.ibs.is_none());
    assert_eq!(
        pebs.hw_valid,
        dprof_abi::HW_DATA_ADDR | dprof_abi::HW_DATA_SRC,
        "no latency measured"
    );
}
