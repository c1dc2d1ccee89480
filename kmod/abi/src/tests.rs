use super::*;

fn encode_record<const N: usize>(
    kind: RecordKind,
    cpu: u32,
    time_ns: u64,
    payload: &[u8; N],
) -> [u8; 128] {
    let mut buf = [0u8; 128];
    let mut header = [0u8; RECORD_HEADER_SIZE];
    RecordHeader {
        kind: kind as u16,
        size: kind.record_size() as u16,
        cpu,
        time_ns,
    }
    .encode(&mut header);
    buf[..RECORD_HEADER_SIZE].copy_from_slice(&header);
    buf[RECORD_HEADER_SIZE..RECORD_HEADER_SIZE + N].copy_from_slice(payload);
    buf
}

#[test]
fn header_layout_is_little_endian_field_by_field() {
    let mut out = [0u8; RECORD_HEADER_SIZE];
    RecordHeader {
        kind: 0x0102,
        size: 0x0304,
        cpu: 0x0506_0708,
        time_ns: 0x1112_1314_1516_1718,
    }
    .encode(&mut out);
    assert_eq!(
        out,
        [
            0x02, 0x01, 0x04, 0x03, 0x08, 0x07, 0x06, 0x05, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13,
            0x12, 0x11
        ]
    );
}

#[test]
fn alloc_round_trips_through_a_whole_record() {
    let alloc = Alloc {
        ptr: 0xffff_8880_0123_4500,
        call_site: 0xffff_ffff_8123_4567,
        cache: 0xffff_8880_0011_2200,
        bytes_req: 200,
        bytes_alloc: 256,
        gfp: 0xcc0,
        node: -1,
        flags: ALLOC_KMALLOC,
    };
    let mut payload = [0u8; Alloc::SIZE];
    alloc.encode(&mut payload);
    let buf = encode_record(RecordKind::Alloc, 1, 42, &payload);
    let (header, record) = Record::decode(&buf).expect("valid record");
    assert_eq!(header.cpu, 1);
    assert_eq!(header.time_ns, 42);
    assert_eq!(usize::from(header.size), RecordKind::Alloc.record_size());
    assert_eq!(record, Record::Alloc(alloc));
}

#[test]
fn free_cache_info_and_lost_round_trip() {
    let free = Free {
        ptr: 7,
        call_site: 8,
        cache: 9,
        flags: FREE_KFREE,
    };
    let mut payload = [0u8; Free::SIZE];
    free.encode(&mut payload);
    let buf = encode_record(RecordKind::Free, 0, 1, &payload);
    assert_eq!(Record::decode(&buf).expect("free").1, Record::Free(free));

    let info = CacheInfo {
        cache: 0xabc,
        object_size: 232,
        size: 256,
        align: 8,
        slab_flags: 0x2000,
        name_len: 0,
        origin: CACHE_ORIGIN_SEEN,
        name: [0; CACHE_NAME_BYTES],
    }
    .with_name(b"skbuff_head_cache");
    let mut payload = [0u8; CacheInfo::SIZE];
    info.encode(&mut payload);
    let buf = encode_record(RecordKind::CacheInfo, 0, 1, &payload);
    let Record::CacheInfo(back) = Record::decode(&buf).expect("cache info").1 else {
        panic!("wrong kind");
    };
    assert_eq!(back, info);
    assert_eq!(back.name_bytes(), b"skbuff_head_cache");
    assert_eq!(back.name_len, 17);

    let lost = Lost { count: 12345 };
    let mut payload = [0u8; Lost::SIZE];
    lost.encode(&mut payload);
    let buf = encode_record(RecordKind::Lost, 3, 9, &payload);
    assert_eq!(Record::decode(&buf).expect("lost").1, Record::Lost(lost));
}

#[test]
fn long_cache_names_are_cut_and_say_so() {
    let long = [b'x'; 100];
    let info = CacheInfo {
        cache: 1,
        object_size: 1,
        size: 8,
        align: 8,
        slab_flags: 0,
        name_len: 0,
        origin: CACHE_ORIGIN_WALK,
        name: [0; CACHE_NAME_BYTES],
    }
    .with_name(&long);
    assert_eq!(info.name_bytes().len(), CACHE_NAME_BYTES - 1);
    assert_eq!(info.name_len, 100);
}

#[test]
fn bad_records_are_rejected_with_the_reason() {
    let mut payload = [0u8; Lost::SIZE];
    Lost { count: 1 }.encode(&mut payload);
    let good = encode_record(RecordKind::Lost, 0, 0, &payload);

    assert_eq!(
        Record::decode(&good[..10]),
        Err(AbiError::Truncated {
            needed: RECORD_HEADER_SIZE,
            available: 10
        })
    );
    assert_eq!(
        Record::decode(&good[..20]),
        Err(AbiError::Truncated {
            needed: RecordKind::Lost.record_size(),
            available: 20
        })
    );

    let mut unknown = good;
    unknown[0] = 0x77;
    assert_eq!(Record::decode(&unknown), Err(AbiError::UnknownKind(0x77)));

    let mut wrong_size = good;
    wrong_size[2] = 32;
    assert!(matches!(
        Record::decode(&wrong_size),
        Err(AbiError::WrongSize {
            size: 32,
            expected: 24,
            ..
        })
    ));

    let mut alloc = [0u8; Alloc::SIZE];
    Alloc::default().encode(&mut alloc);
    let mut buf = encode_record(RecordKind::Alloc, 0, 0, &alloc);
    buf[RECORD_HEADER_SIZE + 44] = 1;
    assert_eq!(Record::decode(&buf), Err(AbiError::NonZeroReserved));
}

#[test]
fn ioctl_numbers_follow_the_kernel_ioc_encoding() {
    // _IOR(0xD9, 0, 32 bytes) computed by hand: dir 2 << 30 | 32 << 16 | 0xD9 << 8 | 0.
    assert_eq!(IOC_VERSION, 0x8020_D900);
    assert_eq!(IOC_CONFIGURE, 0x4030_D901);
    assert_eq!(IOC_START, 0x0000_D902);
    assert_eq!(IOC_STOP, 0x0000_D903);
    assert_eq!(IOC_STATUS, 0xC048_D904);
    // _IOW(0xD9, 5, 32 bytes): 1 << 30 | 0x20 << 16 | 0xD905.
    assert_eq!(IOC_HISTORY_PLAN, 0x4020_D905);
}

#[test]
fn config_validation_rejects_every_bad_field() {
    let good = Config {
        struct_size: Config::SIZE as u32,
        events: EVENT_SLAB,
        ring_bytes: DEFAULT_RING_BYTES,
        ..Config::default()
    };
    let mut buf = [0u8; Config::SIZE];
    good.encode(&mut buf);
    assert_eq!(Config::decode(&buf), Ok(good));

    let bad = [
        Config {
            struct_size: 40,
            ..good
        },
        Config { events: 0, ..good },
        Config {
            events: 0x8000_0000,
            ..good
        },
        Config {
            ring_bytes: MIN_RING_BYTES / 2,
            ..good
        },
        Config {
            ring_bytes: MAX_RING_BYTES * 2,
            ..good
        },
        Config {
            ring_bytes: DEFAULT_RING_BYTES + 8,
            ..good
        },
    ];
    for config in bad {
        config.encode(&mut buf);
        assert_eq!(
            Config::decode(&buf),
            Err(AbiError::OutOfRange),
            "{config:?}"
        );
    }
}

#[test]
fn config_validation_checks_each_sampler_rules() {
    let good = Config {
        struct_size: Config::SIZE as u32,
        events: EVENT_SLAB,
        ring_bytes: DEFAULT_RING_BYTES,
        ..Config::default()
    };
    let mut buf = [0u8; Config::SIZE];
    // Samplers: each with its own period rules and PMU fields.
    let software = Config {
        events: EVENT_SAMPLES,
        sampler: u32::from(SAMPLER_KIND_SOFTWARE),
        sample_period_ns: DEFAULT_SAMPLE_PERIOD_NS,
        ..good
    };
    let ibs = Config {
        sampler: u32::from(SAMPLER_KIND_IBS),
        sample_period_ns: 0x1_0000,
        pmu_type: 11,
        ..software
    };
    let pebs = Config {
        sampler: u32::from(SAMPLER_KIND_PEBS),
        sample_period_ns: 10_007,
        pmu_type: 4,
        pmu_config: 0x1cd,
        pmu_config1: 3,
        ..software
    };
    for config in [software, ibs, pebs] {
        config.encode(&mut buf);
        assert_eq!(Config::decode(&buf), Ok(config));
    }
    let bad_samplers = [
        Config {
            pmu_type: 11,
            ..software
        },
        Config {
            sampler: 4,
            ..software
        },
        Config {
            sample_period_ns: MIN_SAMPLE_PERIOD_NS - 1,
            ..software
        },
        Config {
            sample_period_ns: 0x1_0008,
            ..ibs
        },
        Config {
            sample_period_ns: 0,
            ..ibs
        },
        Config {
            sample_period_ns: MAX_IBS_PERIOD + 16,
            ..ibs
        },
        Config { pmu_type: 0, ..ibs },
        Config {
            pmu_config1: 1,
            ..ibs
        },
        Config {
            sample_period_ns: MIN_PEBS_PERIOD - 1,
            ..pebs
        },
        Config {
            pmu_type: 0,
            ..pebs
        },
        Config {
            sample_user: 2,
            ..pebs
        },
        Config {
            pmu_type: 11,
            ..good
        },
    ];
    for config in bad_samplers {
        config.encode(&mut buf);
        assert_eq!(
            Config::decode(&buf),
            Err(AbiError::OutOfRange),
            "{config:?}"
        );
    }
}

#[test]
fn status_and_version_round_trip() {
    let status = Status {
        cpus_ptr: 0x7fff_0000,
        cpus_len: 4,
        nr_cpus: 2,
        state: STATE_RUNNING,
        records_written: 10,
        records_lost: 2,
        bytes_read: 640,
        histories_started: 7,
        stray_hits: 3,
        armed_slots: 4,
        reserved_slots: 2,
    };
    let mut buf = [0u8; Status::SIZE];
    status.encode(&mut buf);
    assert_eq!(Status::decode(&buf), Ok(status));

    let version = VersionInfo {
        abi_version: ABI_VERSION,
        nr_cpu_ids: 2,
        online_cpus: 2,
        samplers: 0,
        features: FEATURE_SLAB_EVENTS,
        min_ring_bytes: MIN_RING_BYTES,
        max_ring_bytes: MAX_RING_BYTES,
        max_record_size: MAX_RECORD_SIZE as u32,
    };
    let mut buf = [0u8; VersionInfo::SIZE];
    version.encode(&mut buf);
    assert_eq!(VersionInfo::decode(&buf), Ok(version));

    let cpu = CpuStatus {
        records_written: 1,
        records_lost: 2,
        bytes_pending: 3,
    };
    let mut buf = [0u8; CpuStatus::SIZE];
    cpu.encode(&mut buf);
    assert_eq!(CpuStatus::decode(&buf), Ok(cpu));
}

#[test]
fn sampler_fields_are_validated_with_the_samples_event_only() {
    let slab_only = Config {
        struct_size: Config::SIZE as u32,
        events: EVENT_SLAB,
        ring_bytes: DEFAULT_RING_BYTES,
        ..Config::default()
    };
    let sampling = Config {
        events: EVENT_SLAB | EVENT_SAMPLES,
        sampler: u32::from(SAMPLER_KIND_SOFTWARE),
        sample_period_ns: DEFAULT_SAMPLE_PERIOD_NS,
        sample_user: 1,
        ..slab_only
    };
    let mut buf = [0u8; Config::SIZE];
    for good in [slab_only, sampling] {
        good.encode(&mut buf);
        assert_eq!(Config::decode(&buf), Ok(good));
    }
    let bad = [
        // Sampler fields without the samples event.
        Config {
            sample_period_ns: 1,
            ..slab_only
        },
        Config {
            sampler: 1,
            ..slab_only
        },
        // Hardware samplers are not accepted yet; periods out of range; sample_user not 0/1.
        Config {
            sampler: u32::from(SAMPLER_KIND_IBS),
            ..sampling
        },
        Config {
            sampler: 0,
            ..sampling
        },
        Config {
            sample_period_ns: MIN_SAMPLE_PERIOD_NS - 1,
            ..sampling
        },
        Config {
            sample_period_ns: MAX_SAMPLE_PERIOD_NS + 1,
            ..sampling
        },
        Config {
            sample_user: 2,
            ..sampling
        },
    ];
    for config in bad {
        config.encode(&mut buf);
        assert_eq!(
            Config::decode(&buf),
            Err(AbiError::OutOfRange),
            "{config:?}"
        );
    }
}

#[test]
fn access_sample_round_trips_and_rejects_bad_fields() {
    let mut sample = AccessSample {
        ip: 0xffff_ffff_8100_1234,
        gs_base: 0xffff_8880_3fc0_0000,
        pid: 42,
        tid: 43,
        insn_len: 3,
        flags: 0,
        sampler: SAMPLER_KIND_SOFTWARE,
        ..AccessSample::default()
    };
    for (i, r) in sample.regs.iter_mut().enumerate() {
        *r = 0x1000 * (i as u64 + 1);
    }
    sample.insn[..3].copy_from_slice(&[0x48, 0x8b, 0x07]); // mov (%rdi),%rax
    let mut payload = [0u8; AccessSample::SIZE];
    sample.encode(&mut payload);
    let buf = {
        let mut buf = [0u8; 256];
        let mut header = [0u8; RECORD_HEADER_SIZE];
        RecordHeader {
            kind: RecordKind::AccessSample as u16,
            size: RecordKind::AccessSample.record_size() as u16,
            cpu: 1,
            time_ns: 5,
        }
        .encode(&mut header);
        buf[..RECORD_HEADER_SIZE].copy_from_slice(&header);
        buf[RECORD_HEADER_SIZE..RECORD_HEADER_SIZE + AccessSample::SIZE].copy_from_slice(&payload);
        buf
    };
    let (_, record) = Record::decode(&buf).expect("valid sample");
    assert_eq!(record, Record::AccessSample(sample));
    let Record::AccessSample(back) = record else {
        unreachable!()
    };
    assert_eq!(back.insn_bytes(), &[0x48, 0x8b, 0x07]);
    assert_eq!(back.regs[reg::RDI], 0x1000 * 8);
    assert_eq!(MAX_RECORD_SIZE, RecordKind::IbsSample.record_size());

    let mut bad = payload;
    bad[168] = 17; // insn_len
    assert_eq!(AccessSample::decode(&bad), Err(AbiError::OutOfRange));
    let mut bad = payload;
    bad[170] = 9; // sampler
    assert_eq!(AccessSample::decode(&bad), Err(AbiError::OutOfRange));
    let mut bad = payload;
    bad[171] = 1; // padding
    assert_eq!(AccessSample::decode(&bad), Err(AbiError::NonZeroReserved));
}

#[test]
fn whole_records_encode_and_decode_back() {
    let records = [
        Record::Alloc(Alloc {
            ptr: 0x10,
            cache: 0x20,
            ..Alloc::default()
        }),
        Record::Free(Free {
            ptr: 0x10,
            ..Free::default()
        }),
        Record::Lost(Lost { count: 3 }),
        Record::AccessSample(AccessSample {
            ip: 0xffff_ffff_8100_0000,
            sampler: SAMPLER_KIND_SOFTWARE,
            ..AccessSample::default()
        }),
    ];
    for record in records {
        let mut buf = [0u8; MAX_RECORD_SIZE];
        let size = record.encode(7, 99, &mut buf);
        assert_eq!(size, record.kind().record_size());
        let (header, back) = Record::decode(&buf[..size]).expect("decodes");
        assert_eq!((header.cpu, header.time_ns, back), (7, 99, record));
    }
}

#[test]
fn ibs_samples_carry_their_registers() {
    let ibs = IbsRegs {
        caps: IBS_CAPS_OPDATA4 | 0x1,
        regs: [
            1,
            0xffff_ffff_8100_0000,
            3,
            4,
            5,
            0xffff_8880_0000_1000,
            0x1000,
            0,
            9,
        ],
    };
    let sample = AccessSample {
        ip: 0xffff_ffff_8100_0000,
        sampler: SAMPLER_KIND_IBS,
        hw_valid: HW_DATA_ADDR,
        data_addr: 0xffff_8880_0000_1000,
        ibs: Some(ibs),
        ..AccessSample::default()
    };
    let record = Record::AccessSample(sample);
    assert_eq!(record.kind(), RecordKind::IbsSample);
    let mut buf = [0u8; MAX_RECORD_SIZE];
    let size = record.encode(3, 77, &mut buf);
    assert_eq!(
        size,
        RECORD_HEADER_SIZE + AccessSample::SIZE + IbsRegs::SIZE
    );
    let (header, back) = Record::decode(&buf[..size]).expect("valid IBS sample");
    assert_eq!((header.cpu, header.time_ns), (3, 77));
    assert_eq!(back, record);

    // The kernel's raw layout leaves out the absent IbsBrTarget: caps, 7 registers, OpData4.
    let mut raw = [0u8; PERF_RAW_MAX];
    let len = ibs.to_perf_raw(&mut raw);
    assert_eq!(len, 4 + 8 * 8);
    // And back: the fixed indexes again; a blob cut short of what its caps promise is refused.
    assert_eq!(IbsRegs::from_perf_raw(&raw[..len]), Some(ibs));
    assert_eq!(IbsRegs::from_perf_raw(&raw[..len - 1]), None);
    assert_eq!(IbsRegs::from_perf_raw(&raw[..3]), None);
    assert_eq!(&raw[..4], &ibs.caps.to_le_bytes());
    assert_eq!(&raw[4 + 8 * 7..4 + 8 * 8], &9u64.to_le_bytes());

    // A register the caps say is absent must be zero.
    let mut bad = ibs;
    bad.regs[IBS_BR_TARGET] = 1;
    let mut p = [0u8; IbsRegs::SIZE];
    bad.encode(&mut p);
    assert_eq!(IbsRegs::decode(&p), Err(AbiError::NonZeroReserved));
    // An IBS sample without registers, or registers on another sampler's sample: refused.
    let no_regs = Record::AccessSample(AccessSample {
        ibs: None,
        ..sample
    });
    let size = no_regs.encode(0, 0, &mut buf);
    assert_eq!(Record::decode(&buf[..size]), Err(AbiError::OutOfRange));
    let software = Record::AccessSample(AccessSample {
        sampler: SAMPLER_KIND_SOFTWARE,
        ..sample
    });
    let size = software.encode(0, 0, &mut buf);
    assert_eq!(Record::decode(&buf[..size]), Err(AbiError::OutOfRange));
}

fn plan_target(name: &str, used: &[(u32, u32)]) -> HistoryTarget {
    let mut ranges = [WatchRange::default(); HISTORY_RANGES];
    for (range, &(offset, len)) in ranges.iter_mut().zip(used) {
        *range = WatchRange { offset, len };
    }
    HistoryTarget {
        ranges,
        ..HistoryTarget::default()
    }
    .with_name(name.as_bytes())
}

fn good_plan() -> HistoryPlan {
    HistoryPlan {
        struct_size: HistoryPlan::SIZE as u32,
        target_count: 2,
        max_per_sec: 100,
        timeout_ms: 1000,
        max_hits: 4096,
        targets_ptr: 0x7fff_0000_1000,
    }
}

fn good_targets() -> [HistoryTarget; 2] {
    [
        plan_target("dprof_selftest_item", &[(0, 8), (8, 4), (16, 8), (12, 2)]),
        HistoryTarget {
            site_start: 0xffff_ffff_8100_0000,
            site_end: 0xffff_ffff_8100_0100,
            ..plan_target("kmalloc-1k", &[(16, 2)])
        },
    ]
}

#[test]
fn history_plan_and_targets_round_trip() {
    let plan = good_plan();
    let mut buf = [0u8; HistoryPlan::SIZE];
    plan.encode(&mut buf);
    assert_eq!(HistoryPlan::decode(&buf), Ok(plan));
    for target in good_targets() {
        let mut buf = [0u8; HistoryTarget::SIZE];
        target.encode(&mut buf);
        assert_eq!(HistoryTarget::decode(&buf), Ok(target));
    }
    assert_eq!(good_targets()[1].name_bytes(), b"kmalloc-1k");
}

#[test]
fn history_plan_validation_rejects_every_bad_field() {
    let mut buf = [0u8; HistoryPlan::SIZE];
    let with = |f: &dyn Fn(&mut HistoryPlan)| {
        let mut p = good_plan();
        f(&mut p);
        p
    };
    for p in [
        with(&|p| p.struct_size = 24),
        with(&|p| p.target_count = 0),
        with(&|p| p.target_count = MAX_HISTORY_TARGETS as u32 + 1),
        with(&|p| p.max_per_sec = 0),
        with(&|p| p.max_per_sec = MAX_HISTORIES_PER_SEC + 1),
        with(&|p| p.timeout_ms = 0),
        with(&|p| p.timeout_ms = MAX_HISTORY_TIMEOUT_MS + 1),
        with(&|p| p.max_hits = 0),
        with(&|p| p.max_hits = MAX_HISTORY_HITS + 1),
        with(&|p| p.targets_ptr = 0),
    ] {
        p.encode(&mut buf);
        assert_eq!(
            HistoryPlan::decode(&buf),
            Err(AbiError::OutOfRange),
            "{p:?}"
        );
    }
    good_plan().encode(&mut buf);
    buf[20] = 1;
    assert_eq!(HistoryPlan::decode(&buf), Err(AbiError::NonZeroReserved));
    assert!(matches!(
        HistoryPlan::decode(&buf[..20]),
        Err(AbiError::Truncated { .. })
    ));
}

#[test]
fn history_target_validation_rejects_every_bad_field() {
    let mut buf = [0u8; HistoryTarget::SIZE];
    let with = |i: usize, f: &dyn Fn(&mut HistoryTarget)| {
        let mut t = good_targets()[i];
        f(&mut t);
        t
    };
    let range = |offset, len| WatchRange { offset, len };
    for t in [
        // An empty name, and bytes after the NUL.
        with(0, &|t| t.cache_name = [0; CACHE_NAME_BYTES]),
        with(0, &|t| t.cache_name[40] = b'x'),
        // A site range that is empty or half given.
        with(1, &|t| t.site_end = t.site_start),
        with(0, &|t| t.site_start = 5),
        // Lengths a debug register cannot watch, misaligned offsets, overlapping pairs, an
        // unused second range with an offset.
        with(0, &|t| t.ranges[0] = range(0, 3)),
        with(0, &|t| t.ranges[0] = range(0, 16)),
        with(0, &|t| t.ranges[0] = range(0, 0)),
        with(0, &|t| t.ranges[0] = range(4, 8)),
        with(0, &|t| t.ranges[1] = range(2, 4)),
        with(0, &|t| t.ranges[1] = range(4, 4)),
        with(1, &|t| t.ranges[1] = range(8, 0)),
    ] {
        t.encode(&mut buf);
        assert_eq!(
            HistoryTarget::decode(&buf),
            Err(AbiError::OutOfRange),
            "{t:?}"
        );
    }
    assert!(matches!(
        HistoryTarget::decode(&buf[..40]),
        Err(AbiError::Truncated { .. })
    ));
}

#[test]
fn histories_need_the_slab_events() {
    let mut config = Config {
        struct_size: Config::SIZE as u32,
        events: EVENT_HISTORIES,
        ring_bytes: DEFAULT_RING_BYTES,
        ..Config::default()
    };
    let mut buf = [0u8; Config::SIZE];
    config.encode(&mut buf);
    assert_eq!(Config::decode(&buf), Err(AbiError::OutOfRange));
    config.events = EVENT_HISTORIES | EVENT_SLAB;
    config.encode(&mut buf);
    assert_eq!(Config::decode(&buf), Ok(config));
}

#[test]
fn history_records_round_trip_and_reject_bad_fields() {
    let ranges = [
        WatchRange { offset: 8, len: 8 },
        WatchRange { offset: 16, len: 1 },
        WatchRange { offset: 0, len: 4 },
        WatchRange::default(),
    ];
    let mut regs = [0u64; SAMPLE_REGS];
    for (i, r) in regs.iter_mut().enumerate() {
        *r = 0x1000 + i as u64;
    }
    let records = [
        Record::HistoryStart(HistoryStart {
            history: 1,
            object: 0xffff_8880_0123_4500,
            cache: 0xffff_8880_0000_1000,
            call_site: 0xffff_ffff_c000_0123,
            target: 3,
            ranges,
        }),
        Record::HistoryArm(HistoryArm {
            history: 1,
            delay_ns: 12_345,
        }),
        Record::HistoryHit(HistoryHit {
            history: 1,
            ip: 0xffff_ffff_c000_0456,
            regs,
            pid: 42,
            tid: 43,
            range: 1,
            flags: 0,
            seq: 9,
        }),
        Record::HistoryEnd(HistoryEnd {
            history: 1,
            object: 0xffff_8880_0123_4500,
            call_site: 0xffff_ffff_c000_0789,
            reason: HISTORY_END_FREED,
            hits: 10,
            dropped_hits: 1,
            lifetime_ns: 99_000,
        }),
    ];
    let mut buf = [0u8; MAX_RECORD_SIZE];
    for record in records {
        let size = record.encode(1, 5_000, &mut buf);
        assert_eq!(size, record.kind().record_size());
        let (header, back) = Record::decode(&buf[..size]).expect("decodes");
        assert_eq!((header.cpu, header.time_ns, back), (1, 5_000, record));
    }

    // Each bad field, by kind: a reserved word, an out-of-range value.
    let start_at = |i: usize, v: u8| {
        let mut b = [0u8; MAX_RECORD_SIZE];
        let size = records[0].encode(0, 0, &mut b);
        b[RECORD_HEADER_SIZE + i] = v;
        Record::decode(&b[..size])
    };
    assert_eq!(start_at(36, 1), Err(AbiError::NonZeroReserved));
    assert_eq!(start_at(33, 16), Err(AbiError::OutOfRange)); // target 4096
    assert_eq!(start_at(44, 3), Err(AbiError::OutOfRange)); // first length 3
    assert_eq!(start_at(48, 12), Err(AbiError::OutOfRange)); // second at 12: overlaps 8..16
    assert_eq!(start_at(56, 8), Err(AbiError::OutOfRange)); // third at 8: overlaps the first
    assert_eq!(start_at(64, 4), Err(AbiError::OutOfRange)); // fourth unused at a nonzero offset
    let mut b = [0u8; MAX_RECORD_SIZE];
    let size = records[0].encode(0, 0, &mut b);
    let payload = &mut b[RECORD_HEADER_SIZE..size];
    payload[60] = 0; // the third unused...
    payload[64] = 24; // ...and the fourth used: unused ranges come last
    payload[68] = 8;
    assert_eq!(Record::decode(&b[..size]), Err(AbiError::OutOfRange));
    let hit_at = |i: usize, v: u8| {
        let mut b = [0u8; MAX_RECORD_SIZE];
        let size = records[2].encode(0, 0, &mut b);
        b[RECORD_HEADER_SIZE + i] = v;
        Record::decode(&b[..size])
    };
    assert_eq!(hit_at(152, 4), Err(AbiError::OutOfRange)); // range 4
    assert_eq!(hit_at(153, 2), Err(AbiError::OutOfRange)); // unknown flag
    assert_eq!(hit_at(154, 1), Err(AbiError::NonZeroReserved));
    let end_at = |i: usize, v: u8| {
        let mut b = [0u8; MAX_RECORD_SIZE];
        let size = records[3].encode(0, 0, &mut b);
        b[RECORD_HEADER_SIZE + i] = v;
        Record::decode(&b[..size])
    };
    assert_eq!(end_at(24, 0), Err(AbiError::OutOfRange)); // reason 0
    assert_eq!(end_at(24, 5), Err(AbiError::OutOfRange)); // reason 5
    assert_eq!(end_at(36, 1), Err(AbiError::NonZeroReserved));
}

#[test]
fn decode_view_reads_samples_in_place_and_checks_like_decode() {
    let mut regs = [0u64; SAMPLE_REGS];
    for (i, r) in regs.iter_mut().enumerate() {
        *r = 0x1000 + i as u64;
    }
    let software = AccessSample {
        ip: 0xffff_ffff_8100_0000,
        regs,
        gs_base: 0xffff_8880_7fc0_0000,
        pid: 5,
        tid: 6,
        insn: [0x8b; SAMPLE_INSN_BYTES],
        insn_len: 3,
        flags: SAMPLE_USER,
        sampler: SAMPLER_KIND_SOFTWARE,
        ..AccessSample::default()
    };
    let ibs = AccessSample {
        sampler: SAMPLER_KIND_IBS,
        hw_valid: HW_DATA_ADDR,
        data_addr: 0xffff_8880_0000_1000,
        ibs: Some(IbsRegs {
            caps: 1,
            regs: [1, 2, 3, 4, 5, 6, 7, 0, 0],
        }),
        ..software
    };
    for sample in [software, ibs] {
        let mut buf = [0u8; MAX_RECORD_SIZE];
        let size = Record::AccessSample(sample).encode(2, 42, &mut buf);
        let mut out = Record::Lost(Lost { count: 9 });
        let (header, view) = Record::decode_view(&buf[..size], &mut out).expect("valid");
        assert_eq!((header.cpu, header.time_ns), (2, 42));
        let RecordView::AccessSample(v) = view else {
            panic!("a sample comes back as a view");
        };
        assert_eq!(v.to_sample(), sample);
        assert_eq!(
            (v.ip(), v.gs_base(), v.insn(), v.insn_len()),
            (sample.ip, sample.gs_base, sample.insn, 3)
        );
        assert_eq!((v.flags(), v.sampler()), (sample.flags, sample.sampler));
        for (i, &r) in regs.iter().enumerate() {
            assert_eq!(v.reg(i), r);
        }
        assert_eq!(v.reg(SAMPLE_REGS), 0);
        // `out` is left alone for samples.
        assert_eq!(out, Record::Lost(Lost { count: 9 }));
    }
    // Other records are decoded into `out`.
    let mut buf = [0u8; MAX_RECORD_SIZE];
    let free = Record::Free(Free {
        ptr: 0x10,
        ..Free::default()
    });
    let size = free.encode(1, 1, &mut buf);
    let mut out = Record::Lost(Lost { count: 0 });
    let (_, view) = Record::decode_view(&buf[..size], &mut out).expect("valid");
    assert!(matches!(view, RecordView::Decoded(r) if *r == free));
    // Bad samples fail as decode fails.
    let cases = [
        AccessSample { ibs: None, ..ibs },
        AccessSample {
            insn_len: 17,
            ..software
        },
    ];
    for bad in cases {
        let size = Record::AccessSample(bad).encode(0, 0, &mut buf);
        let mut out = Record::Lost(Lost { count: 0 });
        assert_eq!(
            Record::decode_view(&buf[..size], &mut out).map(|(h, _)| h),
            Record::decode(&buf[..size]).map(|(h, _)| h)
        );
        assert!(Record::decode(&buf[..size]).is_err());
    }
    let size = Record::AccessSample(software).encode(0, 0, &mut buf);
    assert_eq!(
        Record::decode_view(&buf[..size - 8], &mut out).map(|(h, _)| h),
        Record::decode(&buf[..size - 8]).map(|(h, _)| h)
    );
}

fn good_causal_plan() -> CausalPlan {
    let mut plan = CausalPlan {
        struct_size: CausalPlan::SIZE as u32,
        point_count: 3,
        flags: 0,
        ..CausalPlan::default()
    };
    plan.points[0] = ProgressPoint::new(PROGRESS_KPROBE, b"udp_sendmsg");
    plan.points[1] = ProgressPoint::new(PROGRESS_TRACEPOINT, b"net_dev_xmit");
    plan.points[2] = ProgressPoint::new(PROGRESS_USER, b"requests");
    plan
}

#[test]
fn causal_plan_round_trips_and_rejects_every_bad_field() {
    let mut buf = [0u8; CausalPlan::SIZE];
    let plan = good_causal_plan();
    plan.encode(&mut buf);
    assert_eq!(CausalPlan::decode(&buf), Ok(plan));
    assert_eq!(plan.used_points()[2].name_bytes(), b"requests");
    let with = |f: &dyn Fn(&mut CausalPlan)| {
        let mut p = good_causal_plan();
        f(&mut p);
        p
    };
    for p in [
        with(&|p| p.struct_size = 16),
        with(&|p| p.point_count = 0),
        with(&|p| p.point_count = MAX_PROGRESS_POINTS as u32 + 1),
        with(&|p| p.flags = 4),
        with(&|p| p.points[0].kind = 0),
        with(&|p| p.points[0].kind = 5),
        // A sampled point needs its range; other kinds have none.
        with(&|p| p.points[1] = ProgressPoint::sampled(b"f", 0..0x10)),
        with(&|p| p.points[1] = ProgressPoint::sampled(b"f", 0x20..0x20)),
        // Reversed: its start after its end.
        with(&|p| {
            p.points[1] = ProgressPoint::sampled(b"f", 0x10..0x20);
            p.points[1].start = 0x30;
        }),
        with(&|p| p.points[0].end = 0x10),
        with(&|p| p.points[1] = ProgressPoint::new(PROGRESS_USER, b"")),
        with(&|p| p.points[1] = ProgressPoint::new(PROGRESS_USER, b"has space")),
        with(&|p| p.points[1].name[40] = b'x'),
        with(&|p| p.points[1].name = [b'a'; PROGRESS_NAME_BYTES]),
        // The same name twice for one kind.
        with(&|p| p.points[1] = ProgressPoint::new(PROGRESS_KPROBE, b"udp_sendmsg")),
        // An arrival beyond the points, or on a sampled point.
        with(&|p| p.arrival = 4),
        with(&|p| {
            p.points[1] = ProgressPoint::sampled(b"f", 0x10..0x20);
            p.arrival = 2;
        }),
        // Latency roles: a begin without its end, two begins, an unknown role, a sampled
        // point in the pair.
        with(&|p| p.points[0].latency = LATENCY_BEGIN),
        with(&|p| {
            p.points[0].latency = LATENCY_BEGIN;
            p.points[1].latency = LATENCY_BEGIN;
            p.points[2].latency = LATENCY_END;
        }),
        with(&|p| p.points[0].latency = 3),
        with(&|p| {
            p.points[1] = ProgressPoint::sampled(b"f", 0x10..0x20).with_latency(LATENCY_END);
            p.points[0].latency = LATENCY_BEGIN;
        }),
    ] {
        p.encode(&mut buf);
        assert_eq!(CausalPlan::decode(&buf), Err(AbiError::OutOfRange), "{p:?}");
    }
    assert_eq!(good_causal_plan().latency_pair(), None);
    let p = with(&|p| {
        p.points[2].latency = LATENCY_BEGIN;
        p.points[0].latency = LATENCY_END;
    });
    p.encode(&mut buf);
    // The role is the word after the first point's kind.
    assert_eq!(buf[16 + 4], LATENCY_END as u8);
    let decoded = CausalPlan::decode(&buf).expect("a latency pair");
    assert_eq!(decoded, p);
    assert_eq!(decoded.latency_pair(), Some((2, 0)));
    let p = with(&|p| p.points[1] = ProgressPoint::sampled(b"udp_sendmsg", 0x10..0x20));
    p.encode(&mut buf);
    assert_eq!(CausalPlan::decode(&buf), Ok(p));
    let p = with(&|p| p.flags = CAUSAL_RECORD_SAMPLES | CAUSAL_PER_CPU_DELAYS);
    p.encode(&mut buf);
    assert_eq!(CausalPlan::decode(&buf), Ok(p));
    // The same name for two kinds is two points.
    let p = with(&|p| p.points[1] = ProgressPoint::new(PROGRESS_USER, b"udp_sendmsg"));
    p.encode(&mut buf);
    assert_eq!(CausalPlan::decode(&buf), Ok(p));
    with(&|p| p.points[5] = ProgressPoint::new(PROGRESS_USER, b"x")).encode(&mut buf);
    assert_eq!(CausalPlan::decode(&buf), Err(AbiError::NonZeroReserved));
    assert_eq!(good_causal_plan().arrival_index(), None);
    // The arrival field is 1 + the point's index, right after the flags.
    good_causal_plan().encode(&mut buf);
    buf[12] = 3;
    let decoded = CausalPlan::decode(&buf).expect("an arrival on the user point");
    assert_eq!(decoded.arrival, 3);
    assert_eq!(decoded.arrival_index(), Some(2));
    assert!(matches!(
        CausalPlan::decode(&buf[..100]),
        Err(AbiError::Truncated { .. })
    ));
}

#[test]
fn causal_type_and_experiment_control_are_validated() {
    let good = CausalType {
        struct_size: CausalType::SIZE as u32,
        index: 3,
        ips_ptr: 0x7fff_0000,
        ip_count: 12,
        ..CausalType::default()
    }
    .with_name(b"dprof_selftest_x");
    let mut buf = [0u8; CausalType::SIZE];
    good.encode(&mut buf);
    assert_eq!(CausalType::decode(&buf), Ok(good));
    assert_eq!(good.name_bytes(), b"dprof_selftest_x");
    // A cache test alone is allowed; neither ips nor a cache is not.
    let cache_only = CausalType {
        ips_ptr: 0,
        ip_count: 0,
        ..good
    };
    cache_only.encode(&mut buf);
    assert_eq!(CausalType::decode(&buf), Ok(cache_only));
    for t in [
        CausalType {
            struct_size: 8,
            ..good
        },
        CausalType {
            index: MAX_CAUSAL_TYPES as u32,
            ..good
        },
        CausalType {
            ip_count: MAX_CAUSAL_TYPE_IPS + 1,
            ..good
        },
        CausalType { ips_ptr: 0, ..good },
        CausalType {
            ip_count: 0,
            ..good
        },
        CausalType {
            ips_ptr: 0,
            ip_count: 0,
            ..good.with_name(b"")
        },
    ] {
        t.encode(&mut buf);
        assert_eq!(CausalType::decode(&buf), Err(AbiError::OutOfRange), "{t:?}");
    }

    let control = ExperimentControl {
        experiment: 7,
        type_index: 1,
        speedup_percent: 35,
        arrival_delay_ns: 0,
    };
    let mut buf = [0u8; ExperimentControl::SIZE];
    control.encode(&mut buf);
    assert_eq!(ExperimentControl::decode(&buf), Ok(control));
    for c in [
        ExperimentControl {
            speedup_percent: 101,
            ..control
        },
        ExperimentControl {
            type_index: MAX_CAUSAL_TYPES as u32,
            ..control
        },
    ] {
        c.encode(&mut buf);
        assert_eq!(ExperimentControl::decode(&buf), Err(AbiError::OutOfRange));
    }
    // Any delay per arrival: whether the plan has an arrival point is the module's check.
    control.encode(&mut buf);
    buf[13] = 1;
    assert_eq!(
        ExperimentControl::decode(&buf).map(|c| c.arrival_delay_ns),
        Ok(256)
    );
}

fn good_experiment_end() -> ExperimentEnd {
    let mut end = ExperimentEnd {
        control: ExperimentControl {
            experiment: 4,
            type_index: 2,
            speedup_percent: 50,
            arrival_delay_ns: 0,
        },
        flags: 0,
        point_count: 2,
        wall_ns: 500_000_000,
        delay_ns: 40_000_000,
        paused_ns: 39_000_000,
        credited_ns: 2_000_000,
        type_samples: 80,
        samples: 1000,
        ..ExperimentEnd::default()
    };
    end.points[0] = PointVisits {
        visits: 100,
        time_sum_ns: 25_000_000_000,
        total: 900,
    };
    end.points[1] = PointVisits {
        visits: 99,
        time_sum_ns: 25_100_000_000,
        total: 898,
    };
    end
}

#[test]
fn experiment_records_round_trip_and_reject_bad_fields() {
    let start = ExperimentStart {
        control: good_experiment_end().control,
        global_delay_ns: 123,
    };
    let mut p = [0u8; ExperimentStart::SIZE];
    start.encode(&mut p);
    let buf = encode_record(RecordKind::ExperimentStart, 1, 99, &p);
    assert_eq!(
        Record::decode(&buf).map(|(_, r)| r),
        Ok(Record::ExperimentStart(start))
    );

    let end = good_experiment_end();
    let mut out = [0u8; MAX_RECORD_SIZE];
    let size = Record::ExperimentEnd(end).encode(0, 5, &mut out);
    assert_eq!(size, RecordKind::ExperimentEnd.record_size());
    let (header, record) = Record::decode(&out[..size]).expect("decodes");
    assert_eq!((header.cpu, header.time_ns), (0, 5));
    assert_eq!(record, Record::ExperimentEnd(end));
    assert_eq!(RecordKind::ExperimentEnd.name(), "experiment_end");

    let mut payload = [0u8; ExperimentEnd::SIZE];
    let with = |f: &dyn Fn(&mut ExperimentEnd)| {
        let mut e = good_experiment_end();
        f(&mut e);
        e
    };
    let full = with(&|e| {
        e.flags = EXPERIMENT_CUT_SHORT | EXPERIMENT_TASK_TABLE_FULL;
        e.in_flight_delay = 7_000_000;
        e.capped_pauses = 3;
        e.max_owed_after_pause_ns = 12_000_000;
    });
    full.encode(&mut payload);
    assert_eq!(ExperimentEnd::decode(&payload), Ok(full));
    // The three words after the points, in that order, end the record.
    assert_eq!(
        payload[ExperimentEnd::SIZE - 24..][..8],
        7_000_000u64.to_le_bytes()
    );
    assert_eq!(
        payload[ExperimentEnd::SIZE - 8..],
        12_000_000u64.to_le_bytes()
    );
    for e in [
        with(&|e| e.flags = 4),
        with(&|e| e.point_count = 0),
        with(&|e| e.point_count = MAX_PROGRESS_POINTS as u32 + 1),
        with(&|e| e.type_samples = 1001),
        with(&|e| e.points[0].visits = 901),
        with(&|e| e.points[3].visits = 1),
        with(&|e| e.control.speedup_percent = 105),
        // A debt left after capped pauses, but none was capped.
        with(&|e| e.max_owed_after_pause_ns = 1),
    ] {
        e.encode(&mut payload);
        assert_eq!(
            ExperimentEnd::decode(&payload),
            Err(AbiError::OutOfRange),
            "{e:?}"
        );
    }
    assert!(matches!(
        ExperimentEnd::decode(&payload[..40]),
        Err(AbiError::Truncated { .. })
    ));
}

// Layout vectors: every structure with distinct field values, and its bytes as the hand-written
// encoders of ABI version 5 laid them out (before `wire!` derived the offsets).

/// Every structure with distinct field values, encoded: `(name, bytes)`.
#[expect(clippy::too_many_lines, reason = "a table: one value per structure")]
fn encoded_vectors(mut out: impl FnMut(&'static str, &[u8])) {
    macro_rules! emit {
        ($ty:ident, $value:expr) => {{
            let mut buf = [0u8; $ty::SIZE];
            $value.encode(&mut buf);
            out(stringify!($ty), &buf);
        }};
    }
    let control = ExperimentControl {
        experiment: 0x0102_0304,
        type_index: 5,
        speedup_percent: 60,
        arrival_delay_ns: 0,
    };
    let ibs = IbsRegs {
        caps: IBS_CAPS_BRNTRGT | 0x0a0b_0000,
        regs: [
            0x11, 0x1122, 0x1133, 0x1144, 0x1155, 0x1166, 0x1177, 0x1188, 0,
        ],
    };
    let mut sample = AccessSample {
        ip: 0x0102_0304_0506_0708,
        gs_base: 0x1112_1314_1516_1718,
        pid: 0x2122_2324,
        tid: 0x2526_2728,
        insn_len: 15,
        flags: SAMPLE_USER,
        sampler: SAMPLER_KIND_IBS,
        hw_valid: 0x3132_3334,
        data_addr: 0x4142_4344_4546_4748,
        phys_addr: 0x5152_5354_5556_5758,
        data_src: 0x6162_6364_6566_6768,
        latency: 0x7172_7374,
        hw_flags: 0x7576_7778,
        ibs: Some(ibs),
        ..AccessSample::default()
    };
    for (i, r) in sample.regs.iter_mut().enumerate() {
        *r = 0xa0 + i as u64;
    }
    for (i, b) in sample.insn.iter_mut().enumerate() {
        *b = 0xc0 + i as u8;
    }
    let ranges = [
        WatchRange { offset: 8, len: 8 },
        WatchRange { offset: 2, len: 2 },
        WatchRange { offset: 16, len: 4 },
        WatchRange { offset: 24, len: 8 },
    ];
    emit!(
        RecordHeader,
        RecordHeader {
            kind: 0x0102,
            size: 0x0304,
            cpu: 0x0506_0708,
            time_ns: 0x1112_1314_1516_1718
        }
    );
    emit!(
        Alloc,
        Alloc {
            ptr: 0x0102_0304_0506_0708,
            call_site: 0x1112_1314_1516_1718,
            cache: 0x2122_2324_2526_2728,
            bytes_req: 0x3132_3334,
            bytes_alloc: 0x3536_3738,
            gfp: 0x4142_4344,
            node: -2,
            flags: ALLOC_KMALLOC
        }
    );
    emit!(
        Free,
        Free {
            ptr: 0x0102_0304_0506_0708,
            call_site: 0x1112_1314_1516_1718,
            cache: 0x2122_2324_2526_2728,
            flags: FREE_KFREE
        }
    );
    emit!(
        CacheInfo,
        CacheInfo {
            cache: 0x0102_0304_0506_0708,
            object_size: 0x1112_1314,
            size: 0x1516_1718,
            align: 0x2122_2324,
            slab_flags: 0x2526_2728,
            name_len: 0,
            origin: CACHE_ORIGIN_SEEN,
            name: [0; CACHE_NAME_BYTES]
        }
        .with_name(b"kmalloc-1k")
    );
    emit!(
        Lost,
        Lost {
            count: 0x0102_0304_0506_0708
        }
    );
    emit!(AccessSample, sample);
    emit!(IbsRegs, ibs);
    emit!(
        HistoryStart,
        HistoryStart {
            history: 0x0102_0304_0506_0708,
            object: 0x1112_1314_1516_1718,
            cache: 0x2122_2324_2526_2728,
            call_site: 0x3132_3334_3536_3738,
            target: 7,
            ranges
        }
    );
    emit!(
        HistoryArm,
        HistoryArm {
            history: 0x0102_0304_0506_0708,
            delay_ns: 0x1112_1314_1516_1718
        }
    );
    emit!(
        HistoryHit,
        HistoryHit {
            history: 0x0102_0304_0506_0708,
            ip: 0x1112_1314_1516_1718,
            regs: sample.regs,
            pid: 0x2122_2324,
            tid: 0x2526_2728,
            range: 1,
            flags: HIT_USER,
            seq: 0x3132_3334
        }
    );
    emit!(
        HistoryEnd,
        HistoryEnd {
            history: 0x0102_0304_0506_0708,
            object: 0x1112_1314_1516_1718,
            call_site: 0x2122_2324_2526_2728,
            reason: HISTORY_END_STOPPED,
            hits: 0x3132_3334,
            dropped_hits: 0x3536_3738,
            lifetime_ns: 0x4142_4344_4546_4748
        }
    );
    emit!(
        ExperimentStart,
        ExperimentStart {
            control,
            global_delay_ns: 0x1112_1314_1516_1718
        }
    );
    let mut end = ExperimentEnd {
        control,
        flags: EXPERIMENT_CUT_SHORT,
        point_count: 1,
        wall_ns: 0x11,
        delay_ns: 0x12,
        paused_ns: 0x13,
        credited_ns: 0x14,
        type_samples: 0x15,
        samples: 0x16,
        ..ExperimentEnd::default()
    };
    end.points[0] = PointVisits {
        visits: 0x21,
        time_sum_ns: 0x22,
        total: 0x23,
    };
    end.points[MAX_PROGRESS_POINTS - 1] = PointVisits {
        visits: 0x31,
        time_sum_ns: 0x32,
        total: 0x33,
    };
    end.in_flight_delay = 0x41;
    end.capped_pauses = 0x42;
    end.max_owed_after_pause_ns = 0x43;
    emit!(ExperimentEnd, end);
    emit!(
        VersionInfo,
        VersionInfo {
            abi_version: 1,
            nr_cpu_ids: 2,
            online_cpus: 3,
            samplers: 4,
            features: 5,
            min_ring_bytes: 6,
            max_ring_bytes: 7,
            max_record_size: 8
        }
    );
    emit!(
        Config,
        Config {
            struct_size: 1,
            events: 2,
            ring_bytes: 3,
            sampler: 4,
            sample_period_ns: 5,
            sample_user: 6,
            pmu_type: 7,
            pmu_config: 0x0102_0304_0506_0708,
            pmu_config1: 0x1112_1314_1516_1718
        }
    );
    emit!(
        HistoryPlan,
        HistoryPlan {
            struct_size: 1,
            target_count: 2,
            max_per_sec: 3,
            timeout_ms: 4,
            max_hits: 5,
            targets_ptr: 0x2122_2324_2526_2728,
        }
    );
    emit!(
        HistoryTarget,
        HistoryTarget {
            site_start: 0x0102_0304_0506_0708,
            site_end: 0x1112_1314_1516_1718,
            ranges,
            ..HistoryTarget::default()
        }
        .with_name(b"filp")
    );
    let mut causal = CausalPlan {
        struct_size: 1,
        point_count: 2,
        flags: 3,
        ..CausalPlan::default()
    };
    causal.points[MAX_PROGRESS_POINTS - 1] =
        ProgressPoint::sampled(b"requests", 0x0102_0304_0506_0708..0x1112_1314_1516_1718)
            .with_latency(5);
    emit!(CausalPlan, causal);
    emit!(
        CausalType,
        CausalType {
            struct_size: 1,
            index: 2,
            ips_ptr: 0x0102_0304_0506_0708,
            ip_count: 3,
            ..CausalType::default()
        }
        .with_name(b"filp")
    );
    emit!(ExperimentControl, control);
    emit!(
        Status,
        Status {
            cpus_ptr: 0x0102_0304_0506_0708,
            cpus_len: 2,
            nr_cpus: 3,
            state: STATE_STOPPED,
            records_written: 5,
            records_lost: 6,
            bytes_read: 7,
            histories_started: 8,
            stray_hits: 9,
            armed_slots: 10,
            reserved_slots: 11
        }
    );
    emit!(
        CpuStatus,
        CpuStatus {
            records_written: 1,
            records_lost: 2,
            bytes_pending: 3
        }
    );
}

/// Hex, whitespace ignored; `0*N` stands for N zero bytes.
const VECTORS: [(&str, &str); 22] = [
    ("RecordHeader", "0201040308070605 1817161514131211"),
    (
        "Alloc",
        "0807060504030201 1817161514131211 2827262524232221 3433323138373635 44434241feffffff \
         0100000000000000",
    ),
    (
        "Free",
        "0807060504030201 1817161514131211 2827262524232221 0100000000000000",
    ),
    (
        "CacheInfo",
        "0807060504030201 1413121118171615 2423222128272625 0a0001006b6d616c 6c6f632d316b 0*42",
    ),
    ("Lost", "0807060504030201"),
    (
        "AccessSample",
        "0807060504030201 a000000000000000 a100000000000000 a200000000000000 a300000000000000 \
         a400000000000000 a500000000000000 a600000000000000 a700000000000000 a800000000000000 \
         a900000000000000 aa00000000000000 ab00000000000000 ac00000000000000 ad00000000000000 \
         ae00000000000000 af00000000000000 1817161514131211 2423222128272625 c0c1c2c3c4c5c6c7 \
         c8c9cacbcccdcecf 0f01020034333231 4847464544434241 5857565554535251 6867666564636261 \
         7473727178777675",
    ),
    (
        "IbsRegs",
        "20000b0a00000000 1100000000000000 2211000000000000 3311000000000000 4411000000000000 \
         5511000000000000 6611000000000000 7711000000000000 8811000000000000 0000000000000000",
    ),
    (
        "HistoryStart",
        "0807060504030201 1817161514131211 2827262524232221 3837363534333231 0700000000000000 \
         0800000008000000 0200000002000000 1000000004000000 1800000008000000",
    ),
    ("HistoryArm", "0807060504030201 1817161514131211"),
    (
        "HistoryHit",
        "0807060504030201 1817161514131211 a000000000000000 a100000000000000 a200000000000000 \
         a300000000000000 a400000000000000 a500000000000000 a600000000000000 a700000000000000 \
         a800000000000000 a900000000000000 aa00000000000000 ab00000000000000 ac00000000000000 \
         ad00000000000000 ae00000000000000 af00000000000000 2423222128272625 0101000034333231",
    ),
    (
        "HistoryEnd",
        "0807060504030201 1817161514131211 2827262524232221 0400000034333231 3837363500000000 \
         4847464544434241",
    ),
    (
        "ExperimentStart",
        "0403020105000000 3c00000000000000 1817161514131211",
    ),
    (
        "ExperimentEnd",
        "0403020105000000 3c00000000000000 0100000001000000 1100000000000000 1200000000000000 \
         1300000000000000 1400000000000000 1500000000000000 1600000000000000 2100000000000000 \
         2200000000000000 23 0*151 3100000000000000 3200000000000000 3300000000000000 \
         4100000000000000 4200000000000000 4300000000000000",
    ),
    (
        "VersionInfo",
        "0100000002000000 0300000004000000 0500000006000000 0700000008000000",
    ),
    (
        "Config",
        "0100000002000000 0300000004000000 0500000006000000 0700000000000000 0807060504030201 \
         1817161514131211",
    ),
    (
        "HistoryPlan",
        "0100000002000000 0300000004000000 0500000000000000 2827262524232221",
    ),
    (
        "HistoryTarget",
        "66696c70 0*44 0807060504030201 1817161514131211 0800000008000000 0200000002000000 \
         1000000004000000 1800000008000000",
    ),
    (
        "CausalPlan",
        "0100000002000000 03 0*623 0400000005000000 7265717565737473 0*56 0807060504030201 \
         1817161514131211",
    ),
    (
        "CausalType",
        "0100000002000000 66696c70 0*44 0807060504030201 0300000000000000",
    ),
    ("ExperimentControl", "0403020105000000 3c00000000000000"),
    (
        "Status",
        "0807060504030201 0200000003000000 0300000000000000 0500000000000000 0600000000000000 \
         0700000000000000 0800000000000000 0900000000000000 0a0000000b000000",
    ),
    (
        "CpuStatus",
        "0100000000000000 0200000000000000 0300000000000000",
    ),
];

/// The offset of the first byte where `bytes` and the vector `text` differ, if they do.
fn first_difference(bytes: &[u8], text: &str) -> Option<usize> {
    let mut at = 0;
    for token in text.split_whitespace() {
        if let Some(zeros) = token.strip_prefix("0*") {
            let zeros: usize = zeros.parse().expect("a zero count");
            for _ in 0..zeros {
                if bytes.get(at) != Some(&0) {
                    return Some(at);
                }
                at += 1;
            }
        } else {
            for pair in token.as_bytes().chunks(2) {
                let text = core::str::from_utf8(pair).expect("ASCII");
                let byte = u8::from_str_radix(text, 16).expect("hex");
                if bytes.get(at) != Some(&byte) {
                    return Some(at);
                }
                at += 1;
            }
        }
    }
    (at != bytes.len()).then_some(at)
}

#[test]
fn every_structure_keeps_the_layout_of_abi_version_5() {
    let mut seen = 0;
    encoded_vectors(|name, bytes| {
        let (_, text) = VECTORS.iter().find(|(n, _)| *n == name).expect("a vector");
        assert_eq!(first_difference(bytes, text), None, "{name}");
        seen += 1;
    });
    assert_eq!(seen, VECTORS.len());
}

#[test]
fn a_causal_scope_needs_ranges_and_its_own_size() {
    let good = CausalScope {
        struct_size: CausalScope::SIZE as u32,
        range_count: 2,
        ranges_ptr: 0x7000_0000,
    };
    let mut buf = [0u8; CausalScope::SIZE];
    good.encode(&mut buf);
    assert_eq!(CausalScope::decode(&buf), Ok(good));
    // _IOW(0xD9, 10, 16 bytes): 1 << 30 | 0x10 << 16 | 0xD90A.
    assert_eq!(IOC_CAUSAL_SCOPE, 0x4010_D90A);
    for bad in [
        CausalScope {
            struct_size: 8,
            ..good
        },
        CausalScope {
            range_count: 0,
            ..good
        },
        CausalScope {
            range_count: MAX_SCOPE_RANGES + 1,
            ..good
        },
        CausalScope {
            ranges_ptr: 0,
            ..good
        },
    ] {
        bad.encode(&mut buf);
        assert_eq!(
            CausalScope::decode(&buf),
            Err(AbiError::OutOfRange),
            "{bad:?}"
        );
    }
}

#[test]
fn scope_ranges_are_sorted_disjoint_and_searched_by_their_ends() {
    let ranges = [(0x100, 0x180), (0x180, 0x200), (0x400, 0x401)];
    assert!(scope_ranges_valid(&ranges));
    assert!(scope_ranges_valid(&[]));
    assert!(!scope_ranges_valid(&[(0x100, 0x100)]), "an empty range");
    assert!(
        !scope_ranges_valid(&[(0x100, 0x200), (0x1ff, 0x300)]),
        "overlapping"
    );
    assert!(
        !scope_ranges_valid(&[(0x400, 0x500), (0x100, 0x200)]),
        "unsorted"
    );
    for (ip, inside) in [
        (0xff, false),
        (0x100, true),
        (0x17f, true),
        (0x180, true),
        (0x1ff, true),
        (0x200, false),
        (0x3ff, false),
        (0x400, true),
        (0x401, false),
        (u64::MAX, false),
    ] {
        assert_eq!(scope_contains(&ranges, ip), inside, "{ip:#x}");
    }
    assert!(!scope_contains(&[], 0x100));
}

#[test]
fn page_sites_need_allocator_ranges_and_their_own_size() {
    let good = PageSites {
        struct_size: PageSites::SIZE as u32,
        allocator_count: 3,
        allocator_ptr: 0x7000_0000,
        elsewhere_ptr: 0,
        elsewhere_count: 0,
    };
    let mut buf = [0u8; PageSites::SIZE];
    good.encode(&mut buf);
    assert_eq!(PageSites::decode(&buf), Ok(good));
    // _IOW(0xD9, 11, 32 bytes).
    assert_eq!(IOC_PAGE_SITES, 0x4020_D90B);
    let with_elsewhere = PageSites {
        elsewhere_ptr: 0x7100_0000,
        elsewhere_count: 2,
        ..good
    };
    with_elsewhere.encode(&mut buf);
    assert_eq!(PageSites::decode(&buf), Ok(with_elsewhere));
    for bad in [
        PageSites {
            struct_size: 16,
            ..good
        },
        PageSites {
            allocator_count: 0,
            ..good
        },
        PageSites {
            allocator_count: MAX_SCOPE_RANGES + 1,
            ..good
        },
        PageSites {
            allocator_ptr: 0,
            ..good
        },
        PageSites {
            elsewhere_count: 1,
            ..good
        },
        PageSites {
            elsewhere_count: MAX_SCOPE_RANGES + 1,
            elsewhere_ptr: 0x7100_0000,
            ..good
        },
    ] {
        bad.encode(&mut buf);
        assert_eq!(
            PageSites::decode(&buf),
            Err(AbiError::OutOfRange),
            "{bad:?}"
        );
    }
}

#[test]
fn a_page_allocation_s_site_is_the_first_caller_past_the_allocator() {
    let allocator = [(0x1000, 0x2000), (0x3000, 0x3100)];
    let elsewhere = [(0x5000, 0x5100)];
    // The probe and the tracepoint's frames, two allocator frames, then the caller.
    let chain = [0x9010, 0x9020, 0x1010, 0x3050, 0x4010, 0x6000];
    assert_eq!(page_site(&chain, &allocator, &elsewhere), Some(0x4010));
    // A return address right after a call that ends an allocator function is still the
    // allocator's: the byte before it is.
    let chain = [0x9010, 0x1010, 0x2000, 0x4010];
    assert_eq!(page_site(&chain, &allocator, &elsewhere), Some(0x4010));
    // Pages the slab allocator takes: not recorded.
    let chain = [0x9010, 0x1010, 0x5010, 0x4010];
    assert_eq!(page_site(&chain, &allocator, &elsewhere), None);
    // Only allocator frames, or none at all: site 0.
    assert_eq!(
        page_site(&[0x9010, 0x1010, 0x3010], &allocator, &elsewhere),
        Some(0)
    );
    assert_eq!(
        page_site(&[0x9010, 0x9020], &allocator, &elsewhere),
        Some(0)
    );
    assert_eq!(page_site(&[], &allocator, &[]), Some(0));
}
