use std::fmt::Write;

use dprof_abi::{Record, ALLOC_KMALLOC, CACHE_ORIGIN_WALK, FREE_KFREE, SAMPLE_USER};
use dprof_format::Profile;
use perf_event_open_sys::bindings::perf_event_attr;

use super::*;
use crate::perf::data_file::tests::{event_desc, header_string, PerfData};
use crate::perf::error::PERF_RECORD_COMMAND;
use crate::perf::events;

const RELEASE: &str = "6.18.0-test";
const TEXT: u64 = 0xffff_ffff_8100_0000;
const BUILD_ID: &str = "48dc540c8b76393804ca8088dbfa7d42911a9444";

/// Feature bits of perf's header (`tools/perf/util/header.h`).
const TRACING_DATA: usize = 1;
const BUILD_ID_FEATURE: usize = 2;
const OSRELEASE: usize = 4;
const NRCPUS: usize = 7;
const CPUDESC: usize = 8;
const CPUID: usize = 9;
const CMDLINE: usize = 11;
const EVENT_DESC: usize = 12;
const COMPRESSED: usize = 27;

/// perf's record types.
const MMAP: u32 = 1;
const LOST: u32 = 2;
const SAMPLE: u32 = 9;
const MISC_KERNEL: u16 = 1;
const MISC_USER: u16 = 2;

/// Tracefs ids of the kmem tracepoints on the recording kernel, and perf's event ids.
const TP_ALLOC: u64 = 659;
const TP_KMALLOC: u64 = 660;
const TP_FREE: u64 = 661;
const TP_KFREE: u64 = 662;
const ID_CLOCK: u64 = 101;
const ID_ALLOC: u64 = 201;
const ID_KMALLOC: u64 = 202;
const ID_FREE: u64 = 203;
const ID_KFREE: u64 = 204;

const DENTRY: u64 = 0xffff_8880_0001_0000;
const SMALL: u64 = 0xffff_8880_0002_0000;

fn machine() -> Machine {
    let g = |object_size, slot_size| Geometry {
        object_size,
        slot_size,
        align: 8,
    };
    Machine {
        release: RELEASE.to_owned(),
        build_id: Some(BUILD_ID.to_owned()),
        boot_cmdline: "root=/dev/vda slab_nomerge".to_owned(),
        kallsyms: format!("{TEXT:016x} T _text\nffffffff82000000 D __per_cpu_offset\n")
            .into_bytes(),
        cpu_model: "live model".to_owned(),
        online_cpus: 2,
        slabs: HashMap::from([
            ("dentry".to_owned(), g(192, 192)),
            ("kmalloc-64".to_owned(), g(64, 64)),
        ]),
        boot_unix_s: Some(1_700_000_000),
        ..Machine::default()
    }
}

fn attr_bytes(attr: &perf_event_attr) -> Vec<u8> {
    // SAFETY: perf_event_attr is plain data; its bytes are read, as the kernel reads them.
    unsafe {
        std::slice::from_raw_parts(
            std::ptr::from_ref(attr).cast::<u8>(),
            std::mem::size_of::<perf_event_attr>(),
        )
    }
    .to_vec()
}

/// A tracepoint's format file as tracefs writes it: the common fields, then `fields`
/// (declaration, offset, size).
fn format_text(name: &str, id: u64, fields: &[(&str, usize, usize)]) -> String {
    let mut text = format!(
        "name: {name}\nID: {id}\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
         \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
    );
    for (decl, offset, size) in fields {
        writeln!(
            text,
            "\tfield:{decl};\toffset:{offset};\tsize:{size};\tsigned:0;"
        )
        .expect("writes to a String");
    }
    text.push_str("\nprint fmt: \"\"\n");
    text
}

fn kmem_formats() -> Vec<(&'static str, String)> {
    vec![
        (
            "kmem",
            format_text(
                "kmem_cache_alloc",
                TP_ALLOC,
                &[
                    ("unsigned long call_site", 8, 8),
                    ("const void * ptr", 16, 8),
                    ("__data_loc char[] name", 24, 4),
                    ("size_t bytes_req", 32, 8),
                    ("size_t bytes_alloc", 40, 8),
                    ("unsigned long gfp_flags", 48, 8),
                    ("int node", 56, 4),
                ],
            ),
        ),
        (
            "kmem",
            format_text(
                "kmalloc",
                TP_KMALLOC,
                &[
                    ("unsigned long call_site", 8, 8),
                    ("const void * ptr", 16, 8),
                    ("size_t bytes_req", 24, 8),
                    ("size_t bytes_alloc", 32, 8),
                    ("unsigned long gfp_flags", 40, 8),
                    ("int node", 48, 4),
                ],
            ),
        ),
        (
            "kmem",
            format_text(
                "kmem_cache_free",
                TP_FREE,
                &[
                    ("unsigned long call_site", 8, 8),
                    ("const void * ptr", 16, 8),
                    ("__data_loc char[] name", 24, 4),
                ],
            ),
        ),
        (
            "kmem",
            format_text(
                "kfree",
                TP_KFREE,
                &[
                    ("unsigned long call_site", 8, 8),
                    ("const void * ptr", 16, 8),
                ],
            ),
        ),
    ]
}

/// A raw tracepoint record of `len` bytes with u64 `fields` at their offsets and, when
/// `name` is given, a `__data_loc` string at offset 24 pointing past `len`.
fn raw(len: usize, fields: &[(usize, u64)], name: Option<&[u8]>) -> Vec<u8> {
    let mut raw = vec![0u8; len];
    for &(offset, value) in fields {
        raw[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
    }
    if let Some(name) = name {
        let loc = u32::try_from(len).expect("small") | ((name.len() as u32 + 1) << 16);
        raw[24..28].copy_from_slice(&loc.to_le_bytes());
        raw.extend_from_slice(name);
        raw.push(0);
    }
    raw
}

/// How the test's perf.data is recorded.
struct Recording {
    clock: perf_event_attr,
    tracepoints: Vec<(u64, u64, &'static str)>,
    tracepoint_period: u64,
    release: Option<&'static str>,
    kernel_build_id: Option<&'static str>,
    text: u64,
    formats: bool,
}

impl Default for Recording {
    fn default() -> Self {
        Self {
            clock: events::cpu_clock(100_000, true),
            tracepoints: vec![
                (TP_ALLOC, ID_ALLOC, "kmem:kmem_cache_alloc"),
                (TP_KMALLOC, ID_KMALLOC, "kmem:kmalloc"),
                (TP_FREE, ID_FREE, "kmem:kmem_cache_free"),
                (TP_KFREE, ID_KFREE, "kmem:kfree"),
            ],
            tracepoint_period: 1,
            release: Some(RELEASE),
            kernel_build_id: Some(BUILD_ID),
            text: TEXT,
            formats: true,
        }
    }
}

/// The cpu-clock sampler's registers: each perf register `r` holds `0x1000 + r`.
fn regs(attr: &perf_event_attr) -> Vec<u8> {
    let mut out = 2u64.to_le_bytes().to_vec(); // PERF_SAMPLE_REGS_ABI_64
    for r in 0..64 {
        if attr.sample_regs_intr & (1 << r) != 0 {
            out.extend_from_slice(&(0x1000 + r as u64).to_le_bytes());
        }
    }
    out
}

/// `sample_id` of the cpu-clock event: tid, time, cpu, identifier.
fn sample_id(time: u64, cpu: u32) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&7i32.to_le_bytes());
    out.extend_from_slice(&7i32.to_le_bytes());
    out.extend_from_slice(&time.to_le_bytes());
    out.extend_from_slice(&cpu.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&ID_CLOCK.to_le_bytes());
    out
}

impl Recording {
    fn perf_data(&self) -> PerfData {
        let mut p = PerfData::default();
        let mut descs = vec![(attr_bytes(&self.clock), "cpu-clock", vec![ID_CLOCK])];
        for &(tp, id, name) in &self.tracepoints {
            let mut attr = events::tracepoint(tp);
            attr.__bindgen_anon_1.sample_period = self.tracepoint_period;
            descs.push((attr_bytes(&attr), name, vec![id]));
        }
        p.feature(EVENT_DESC, event_desc(&descs));
        if let Some(release) = self.release {
            p.feature(OSRELEASE, header_string(release));
        }
        let mut nr = 4u32.to_le_bytes().to_vec();
        nr.extend_from_slice(&2u32.to_le_bytes());
        p.feature(NRCPUS, nr);
        p.feature(CPUDESC, header_string("AMD EPYC"));
        p.feature(CPUID, header_string("AuthenticAMD,25,1,1"));
        let mut cmdline = 3u32.to_le_bytes().to_vec();
        for w in ["perf", "record", "-a"] {
            cmdline.extend_from_slice(&header_string(w));
        }
        p.feature(CMDLINE, cmdline);
        if self.formats {
            let formats = kmem_formats();
            let events: Vec<(&str, &str)> = formats.iter().map(|(s, t)| (*s, t.as_str())).collect();
            p.feature(
                TRACING_DATA,
                crate::perf::tracing_data::tests::build(&events),
            );
        }
        if let Some(id) = self.kernel_build_id {
            let path = b"[kernel.kallsyms]\0\0\0\0\0\0\0";
            let mut event = Vec::new();
            let size = 8 + 4 + 24 + path.len();
            event.extend_from_slice(&67u32.to_le_bytes());
            event.extend_from_slice(&(MISC_KERNEL | (1 << 15)).to_le_bytes());
            event.extend_from_slice(&u16::try_from(size).expect("small").to_le_bytes());
            event.extend_from_slice(&(-1i32).to_le_bytes());
            let mut bid = [0u8; 24];
            for (i, b) in bid.iter_mut().take(20).enumerate() {
                *b = u8::from_str_radix(&id[2 * i..2 * i + 2], 16).expect("hex");
            }
            bid[20] = 20;
            event.extend_from_slice(&bid);
            event.extend_from_slice(path);
            p.feature(BUILD_ID_FEATURE, event);
        }
        // The kernel's map, as perf synthesizes it first: offset = where _text is.
        let mut mmap = Vec::new();
        mmap.extend_from_slice(&(-1i32).to_le_bytes());
        mmap.extend_from_slice(&0i32.to_le_bytes());
        mmap.extend_from_slice(&self.text.to_le_bytes());
        mmap.extend_from_slice(&0x120_0000u64.to_le_bytes());
        mmap.extend_from_slice(&self.text.to_le_bytes());
        mmap.extend_from_slice(b"[kernel.kallsyms]_text\0\0");
        mmap.extend_from_slice(&sample_id(0, 0));
        p.record(MMAP, MISC_KERNEL, &mmap);
        p
    }

    /// A tracepoint hit of event `id` with `raw`.
    fn tracepoint(p: &mut PerfData, id: u64, time: u64, cpu: u32, raw: &[u8]) {
        let mut body = id.to_le_bytes().to_vec();
        body.extend_from_slice(&7i32.to_le_bytes());
        body.extend_from_slice(&7i32.to_le_bytes());
        body.extend_from_slice(&time.to_le_bytes());
        body.extend_from_slice(&cpu.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        let padded = (raw.len() + 4).next_multiple_of(8) - 4;
        body.extend_from_slice(&u32::try_from(padded).expect("small").to_le_bytes());
        body.extend_from_slice(raw);
        body.resize(body.len() + padded - raw.len(), 0);
        p.record(SAMPLE, MISC_KERNEL, &body);
    }

    /// A cpu-clock sample at `ip`.
    fn sample(&self, p: &mut PerfData, time: u64, cpu: u32, ip: u64, user: bool) {
        let mut body = ID_CLOCK.to_le_bytes().to_vec();
        body.extend_from_slice(&ip.to_le_bytes());
        body.extend_from_slice(&7i32.to_le_bytes());
        body.extend_from_slice(&8i32.to_le_bytes());
        body.extend_from_slice(&time.to_le_bytes());
        body.extend_from_slice(&cpu.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        if self.clock.sample_type & u64::from(perf_event_open_sys::bindings::PERF_SAMPLE_REGS_INTR)
            != 0
        {
            body.extend_from_slice(&regs(&self.clock));
        }
        p.record(SAMPLE, if user { MISC_USER } else { MISC_KERNEL }, &body);
    }

    /// The workload: a dentry allocated, a kernel and a user sample, the dentry freed, a
    /// kmalloc and its kfree, and a lost count.
    fn bytes(&self) -> Vec<u8> {
        let mut p = self.perf_data();
        let alloc = raw(
            64,
            &[
                (8, 0xffff_ffff_8100_1000),
                (16, DENTRY),
                (32, 192),
                (40, 192),
            ],
            Some(b"dentry"),
        );
        Self::tracepoint(&mut p, ID_ALLOC, 1_000, 1, &alloc);
        self.sample(&mut p, 2_000, 1, 0xffff_ffff_8100_2000, false);
        self.sample(&mut p, 2_500, 0, 0x7f00_0000_1000, true);
        let free = raw(
            28,
            &[(8, 0xffff_ffff_8100_3000), (16, DENTRY)],
            Some(b"dentry"),
        );
        Self::tracepoint(&mut p, ID_FREE, 3_000, 0, &free);
        let kmalloc = raw(
            56,
            &[(8, 0xffff_ffff_8100_4000), (16, SMALL), (24, 50), (32, 64)],
            None,
        );
        Self::tracepoint(&mut p, ID_KMALLOC, 3_500, 1, &kmalloc);
        let kfree = raw(24, &[(8, 0xffff_ffff_8100_5000), (16, SMALL)], None);
        Self::tracepoint(&mut p, ID_KFREE, 4_000, 1, &kfree);
        let mut lost = ID_CLOCK.to_le_bytes().to_vec();
        lost.extend_from_slice(&3u64.to_le_bytes());
        lost.extend_from_slice(&sample_id(4_500, 1));
        p.record(LOST, 0, &lost);
        p.bytes()
    }
}

fn convert_with(bytes: &[u8], machine: &Machine) -> Result<Imported, ImportError> {
    convert(bytes, machine, || Ok(None))
}

#[test]
fn samples_and_slab_events_become_the_module_s_records() {
    let imported = convert_with(&Recording::default().bytes(), &machine()).expect("converts");
    assert_eq!(
        (imported.samples, imported.slab_events, imported.lost),
        (2, 4, 3)
    );
    let profile = Profile::from_vec(imported.profile).expect("a profile");
    let header = profile.header();
    assert_eq!(header.config.backend.as_deref(), Some("perf.data"));
    assert_eq!(header.kernel_release, RELEASE);
    assert_eq!(header.build_id.as_deref(), Some(BUILD_ID));
    assert_eq!((header.online_cpus, header.module.nr_cpu_ids), (2, 4));
    assert_eq!(header.cpu_model, "AMD EPYC");
    assert_eq!(
        header.cpu_id.as_ref().map(|c| (c.family, c.model)),
        Some((25, 1))
    );
    assert!(
        !header.slab_merging,
        "slab_nomerge is on the boot command line"
    );
    assert_eq!(
        header.config.target,
        Target::Command {
            argv: vec!["perf".into(), "record".into(), "-a".into()]
        }
    );
    let sampling = header.config.sampling.as_ref().expect("samples");
    assert_eq!(
        (sampling.sampler.as_str(), sampling.period_ns, sampling.user),
        ("software", 100_000, true)
    );
    assert_eq!(header.created_unix_s, 1_700_000_000);
    assert_eq!(profile.stop().elapsed_ns, 4_000 - 1_000);
    assert_eq!(profile.kallsyms(), machine().kallsyms.as_slice());

    let records: Vec<(u32, u64, Record)> = profile
        .records()
        .map(|r| r.expect("valid"))
        .map(|(head, r)| (head.cpu, head.time_ns, r))
        .collect();
    let infos: Vec<_> = records
        .iter()
        .filter_map(|(_, _, r)| match r {
            Record::CacheInfo(i) => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(infos.len(), 2, "every cache described once, at the start");
    assert!(infos.iter().all(|i| i.origin == CACHE_ORIGIN_WALK));
    let id_of = |name: &[u8]| {
        infos
            .iter()
            .find(|i| i.name_bytes() == name)
            .map(|i| i.cache)
            .expect("described")
    };
    let rest: Vec<&(u32, u64, Record)> = records
        .iter()
        .filter(|(_, _, r)| !matches!(r, Record::CacheInfo(_)))
        .collect();
    let [(1, 1_000, Record::Alloc(alloc)), (1, 2_000, Record::AccessSample(kernel)), (0, 2_500, Record::AccessSample(user)), (0, 3_000, Record::Free(free)), (1, 3_500, Record::Alloc(kmalloc)), (1, 4_000, Record::Free(kfree)), (1, _, Record::Lost(lost))] =
        rest[..]
    else {
        panic!("the records in time order: {rest:?}");
    };
    assert_eq!(
        (alloc.ptr, alloc.cache, alloc.bytes_alloc),
        (DENTRY, id_of(b"dentry"), 192)
    );
    assert_eq!((free.ptr, free.cache), (DENTRY, id_of(b"dentry")));
    assert_eq!(kernel.ip, 0xffff_ffff_8100_2000);
    assert_eq!((kernel.pid, kernel.tid, kernel.flags), (7, 8, 0));
    // The ABI's register order (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15) from perf'kernel.
    let expected: Vec<u64> = ABI_REG_ORDER
        .iter()
        .map(|&r| 0x1000 + u64::from(r))
        .collect();
    assert_eq!(kernel.regs.to_vec(), expected);
    assert_eq!(user.flags, SAMPLE_USER);
    assert_eq!(
        (kmalloc.ptr, kmalloc.cache, kmalloc.flags),
        (SMALL, id_of(b"kmalloc-64"), ALLOC_KMALLOC)
    );
    assert_eq!((kfree.ptr, kfree.flags), (SMALL, FREE_KFREE));
    assert_eq!(lost.count, 3);
}

fn refused(recording: &Recording, machine: &Machine) -> ImportError {
    convert_with(&recording.bytes(), machine).expect_err("refused")
}

#[test]
fn a_perf_data_of_another_kernel_is_refused_with_why() {
    let mut other = machine();
    other.release = "6.1.0-13-amd64".to_owned();
    let err = refused(&Recording::default(), &other);
    assert!(matches!(err, ImportError::OtherKernel { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("recorded on Linux 6.18.0-test and this machine runs 6.1.0-13-amd64")
            && text.contains("must be analysed on the machine that recorded it"),
        "{text}"
    );
    let mut rebuilt = machine();
    rebuilt.build_id = Some("00".repeat(20));
    let err = refused(&Recording::default(), &rebuilt);
    assert!(matches!(err, ImportError::OtherBuild { .. }), "{err}");
    let moved = Recording {
        text: TEXT + 0x20_0000,
        ..Recording::default()
    };
    let err = refused(&moved, &machine());
    assert!(matches!(err, ImportError::Restarted { .. }), "{err}");
    assert!(err.to_string().contains("restarted"), "{err}");
    let unnamed = Recording {
        release: None,
        ..Recording::default()
    };
    assert!(matches!(
        refused(&unnamed, &machine()),
        ImportError::NoRelease
    ));
    let mut hidden = machine();
    hidden.kallsyms = b"0000000000000000 T _text\n".to_vec();
    assert!(matches!(
        refused(&Recording::default(), &hidden),
        ImportError::HiddenSymbols
    ));
}

#[test]
fn samples_without_the_registers_are_refused_with_the_command_line() {
    let mut clock = events::cpu_clock(100_000, true);
    clock.sample_type &= !u64::from(perf_event_open_sys::bindings::PERF_SAMPLE_REGS_INTR);
    clock.sample_regs_intr = 0;
    let recording = Recording {
        clock,
        ..Recording::default()
    };
    let err = refused(&recording, &machine());
    assert!(matches!(err, ImportError::NoIntrRegs), "{err}");
    assert!(err.to_string().contains(PERF_RECORD_COMMAND), "{err}");
    // Some registers, not all of them.
    let mut clock = events::cpu_clock(100_000, true);
    clock.sample_regs_intr &= !(1 << perf_event_open_sys::bindings::PERF_REG_X86_R15);
    let recording = Recording {
        clock,
        ..Recording::default()
    };
    assert!(matches!(
        refused(&recording, &machine()),
        ImportError::NoIntrRegs
    ));
}

#[test]
fn missing_or_sampled_events_are_refused_by_name() {
    let some = Recording {
        tracepoints: vec![(TP_ALLOC, ID_ALLOC, "kmem:kmem_cache_alloc")],
        ..Recording::default()
    };
    let err = refused(&some, &machine());
    assert!(
        err.to_string()
            .contains("lacks kmem:kmalloc, kmem:kmem_cache_free, kmem:kfree"),
        "{err}"
    );
    let sampled = Recording {
        tracepoint_period: 100_000,
        ..Recording::default()
    };
    let err = refused(&sampled, &machine());
    assert!(
        matches!(
            err,
            ImportError::SampledTracepoint {
                period: 100_000,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("cpu-clock/period=100000"), "{err}");
    let no_formats = Recording {
        formats: false,
        ..Recording::default()
    };
    let err = refused(&no_formats, &machine());
    assert!(
        matches!(err, ImportError::NoTracepointFormat { .. }),
        "{err}"
    );
    // No sampler: the clock is a task-clock here.
    let mut clock = events::cpu_clock(100_000, true);
    clock.config = u64::from(perf_event_open_sys::bindings::PERF_COUNT_SW_TASK_CLOCK);
    let err = refused(
        &Recording {
            clock,
            ..Recording::default()
        },
        &machine(),
    );
    assert!(matches!(err, ImportError::NoSampler), "{err}");
}

#[test]
fn compressed_files_are_refused() {
    let mut p = Recording::default().perf_data();
    p.feature(COMPRESSED, vec![0; 20]);
    let err = convert_with(&p.bytes(), &machine()).expect_err("refused");
    assert!(matches!(err, ImportError::Compressed), "{err}");
}

#[test]
fn every_cut_of_a_perf_data_is_an_error_and_none_panics() {
    let bytes = Recording::default().bytes();
    for cut in (0..bytes.len()).step_by(3) {
        let Err(err) = convert_with(&bytes[..cut], &machine()) else {
            panic!("{cut} bytes of {} converted", bytes.len());
        };
        assert!(
            matches!(err, ImportError::Corrupt { .. } | ImportError::NotPerfData),
            "{cut}: {err}"
        );
    }
}

#[test]
fn damaged_bytes_never_panic() {
    let bytes = Recording::default().bytes();
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2000 {
        let mut damaged = bytes.clone();
        for _ in 0..rng.usize(1..4) {
            let at = rng.usize(8..damaged.len());
            damaged[at] = rng.u8(..);
        }
        // Any answer but a panic; a converted one is a valid profile.
        if let Ok(imported) = convert_with(&damaged, &machine()) {
            Profile::from_vec(imported.profile)
                .expect("a profile")
                .validate()
                .expect("valid records");
        }
    }
}
