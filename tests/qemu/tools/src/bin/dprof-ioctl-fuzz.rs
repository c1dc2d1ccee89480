//! Hammers /dev/dprof with random ioctl and read calls (guest side of the module-robustness
//! scenario). Every call must either succeed or fail with an errno from the documented set;
//! anything else, or a kernel oops (caught by the harness from the console log), fails the run.
//!
//! Before the random calls, the causal ioctls are driven through their states with exact
//! errnos expected (`causal_checks`), and user-point writers race session close
//! (`writer_race`). The random calls include causal plans (good, broken, with unknown kprobes
//! and tracepoints), type entries and experiments, and writes through a write-only open.
//!
//! Usage: dprof-ioctl-fuzz [CALLS] [SEED]

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, ensure, Context};
use dprof_abi as abi;
use dprof_qemu_tools::dev;
use nix::errno::Errno;
use nix::fcntl::OFlag;

/// xorshift64*: deterministic from the seed, so a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A command: mostly ours (right or wrong size/direction), sometimes anything.
fn random_cmd(rng: &mut Rng) -> u32 {
    let known = [
        abi::IOC_VERSION,
        abi::IOC_CONFIGURE,
        abi::IOC_START,
        abi::IOC_STOP,
        abi::IOC_STATUS,
        abi::IOC_CAUSAL_PLAN,
        abi::IOC_CAUSAL_TYPE,
        abi::IOC_EXPERIMENT_START,
        abi::IOC_EXPERIMENT_END,
        abi::IOC_CAUSAL_SCOPE,
        abi::IOC_PAGE_SITES,
    ];
    match rng.below(4) {
        0 | 1 => known[rng.below(known.len() as u64) as usize],
        2 => {
            let base = known[rng.below(known.len() as u64) as usize] & 0xFFFF;
            base | ((rng.below(4) as u32) << 30) | ((rng.below(1 << 14) as u32) << 16)
        }
        _ => rng.next() as u32,
    }
}

/// A valid configuration, or one with a field broken.
fn random_config(rng: &mut Rng, buf: &mut [u8]) {
    let mut config = abi::Config {
        struct_size: abi::Config::SIZE as u32,
        events: abi::EVENT_SLAB,
        ring_bytes: abi::MIN_RING_BYTES << rng.below(4),
        ..abi::Config::default()
    };
    if rng.below(2) == 0 {
        // A valid sampling setup (10 µs to 10 ms), so that start/stop also run the sampler.
        config.events |= abi::EVENT_SAMPLES;
        config.sampler = u32::from(abi::SAMPLER_KIND_SOFTWARE);
        config.sample_period_ns = abi::MIN_SAMPLE_PERIOD_NS + rng.below(10_000_000) as u32;
        config.sample_user = rng.below(2) as u32;
        if rng.below(3) == 0 {
            // A hardware sampler on a PMU this guest has not (type 0: no hardware PMU under
            // TCG; a type no PMU has) or on the software PMU's cpu-clock, which perf accepts:
            // the module must refuse cleanly or run it without crashing.
            let ibs = rng.below(2) == 0;
            config.sampler = u32::from(if ibs {
                abi::SAMPLER_KIND_IBS
            } else {
                abi::SAMPLER_KIND_PEBS
            });
            config.pmu_type = match rng.below(3) {
                0 => 0,
                1 => 1,
                _ => 1000 + rng.below(1000) as u32,
            };
            config.pmu_config = rng.below(2);
            config.sample_period_ns = if ibs {
                abi::MIN_IBS_PERIOD << rng.below(16)
            } else {
                abi::MIN_PEBS_PERIOD + rng.below(100_000) as u32
            };
        }
    }
    match rng.below(9) {
        0 => config.struct_size = rng.next() as u32,
        3 => config.sampler = rng.next() as u32,
        4 => config.sample_period_ns = rng.next() as u32,
        5 => config.sample_user = rng.next() as u32,
        1 => config.events = rng.next() as u32,
        2 => config.ring_bytes = rng.next() as u32,
        _ => {}
    }
    let mut bytes = [0u8; abi::Config::SIZE];
    config.encode(&mut bytes);
    if rng.below(8) == 0 {
        bytes[rng.below(abi::Config::SIZE as u64) as usize] = rng.next() as u8;
    }
    buf[..bytes.len()].copy_from_slice(&bytes);
}

/// Point names: real ones, unknown ones, and a blacklisted function.
const POINT_NAMES: [(u32, &str); 9] = [
    (abi::PROGRESS_KPROBE, "__x64_sys_getppid"),
    (abi::PROGRESS_KPROBE, "ksys_read"),
    (abi::PROGRESS_KPROBE, "dprof_no_such_function"),
    // Kprobes refuse their own machinery (EINVAL).
    (abi::PROGRESS_KPROBE, "kprobe_int3_handler"),
    (abi::PROGRESS_TRACEPOINT, "sched_switch"),
    (abi::PROGRESS_TRACEPOINT, "kmem_cache_alloc"),
    (abi::PROGRESS_TRACEPOINT, "dprof_no_such_tracepoint"),
    (abi::PROGRESS_USER, "requests"),
    (abi::PROGRESS_USER, "done"),
];

/// A causal plan, often valid, sometimes broken.
fn random_plan(rng: &mut Rng, buf: &mut [u8]) {
    let count = 1 + rng.below(4) as usize;
    let mut points = Vec::new();
    for _ in 0..count {
        let p = POINT_NAMES[rng.below(POINT_NAMES.len() as u64) as usize];
        if !points.contains(&p) {
            points.push(p);
        }
    }
    let flags = if rng.below(4) == 0 {
        abi::CAUSAL_RECORD_SAMPLES
    } else {
        0
    };
    let mut bytes = dev::plan_bytes(&points, flags);
    match rng.below(8) {
        0 => bytes[4] = rng.next() as u8,                   // point count
        1 => bytes[8] = rng.next() as u8,                   // flags
        2 => bytes[16] = rng.next() as u8,                  // a point's kind
        3 => bytes[16 + 8 + rng.below(64) as usize] = b' ', // a space in a name
        4 => bytes[rng.below(bytes.len() as u64) as usize] = rng.next() as u8,
        5 => bytes[12] = rng.below(6) as u8, // the arrival point, valid or not
        6 => bytes[20] = rng.below(4) as u8, // the first point's latency role, valid or not
        _ => {}
    }
    buf[..bytes.len()].copy_from_slice(&bytes);
}

/// A type entry whose ips lie in `buf` past the entry (or at a bad address), sometimes with a
/// cache name, known or not.
fn random_type(rng: &mut Rng, buf: &mut [u8]) {
    let count = rng.below(300) as u32;
    let ips_off = 4096;
    for i in 0..count as usize {
        let ip = 0xffff_ffff_8100_0000u64 + rng.below(1 << 24);
        buf[ips_off + i * 8..ips_off + i * 8 + 8].copy_from_slice(&ip.to_le_bytes());
    }
    let mut entry = abi::CausalType {
        struct_size: abi::CausalType::SIZE as u32,
        index: rng.below(4) as u32,
        ips_ptr: if count == 0 {
            0
        } else {
            buf.as_ptr() as u64 + ips_off as u64
        },
        ip_count: count,
        ..abi::CausalType::default()
    };
    match rng.below(6) {
        0 => entry = entry.with_name(b"kmalloc-64"),
        1 => entry = entry.with_name(b"dprof-no-such-cache"),
        2 => entry.ips_ptr = [0x1000, 0xffff_ffff_8100_0000, rng.next()][rng.below(3) as usize],
        3 => entry.index = rng.next() as u32,
        4 => entry.ip_count = rng.next() as u32,
        _ => {}
    }
    let mut bytes = [0u8; abi::CausalType::SIZE];
    entry.encode(&mut bytes);
    buf[..bytes.len()].copy_from_slice(&bytes);
}

/// A scope of sorted kernel text ranges in `buf` past the entry, sometimes out of order,
/// overlapping, at a bad address or with a count that does not match.
fn random_scope(rng: &mut Rng, buf: &mut [u8]) {
    let count = 1 + rng.below(200) as u32;
    let ranges_off = 4096;
    let mut start = 0xffff_ffff_8100_0000u64;
    for i in 0..count as usize {
        start += rng.below(1 << 12);
        let end = start + 1 + rng.below(1 << 10);
        let at = ranges_off + i * 16;
        buf[at..at + 8].copy_from_slice(&start.to_le_bytes());
        buf[at + 8..at + 16].copy_from_slice(&end.to_le_bytes());
        start = end;
    }
    let mut scope = abi::CausalScope {
        struct_size: abi::CausalScope::SIZE as u32,
        range_count: count,
        ranges_ptr: buf.as_ptr() as u64 + ranges_off as u64,
    };
    match rng.below(5) {
        0 => scope.range_count = rng.next() as u32,
        1 => scope.ranges_ptr = [0x1000, 0, rng.next()][rng.below(3) as usize],
        // A byte of some range changed: often out of order or overlapping.
        2 => buf[ranges_off + rng.below(u64::from(count) * 16) as usize] = rng.next() as u8,
        _ => {}
    }
    let mut bytes = [0u8; abi::CausalScope::SIZE];
    scope.encode(&mut bytes);
    buf[..bytes.len()].copy_from_slice(&bytes);
}

/// Page sites in `buf`: the allocator's ranges at 4096, the others' at 8192, sometimes with a
/// bad count, pointer or byte.
fn random_page_sites(rng: &mut Rng, buf: &mut [u8]) {
    let mut ranges_at = |off: usize, rng: &mut Rng| -> u32 {
        let count = 1 + rng.below(100) as u32;
        let mut start = 0xffff_ffff_8100_0000u64 + rng.below(1 << 20);
        for i in 0..count as usize {
            start += rng.below(1 << 12);
            let end = start + 1 + rng.below(1 << 10);
            let at = off + i * 16;
            buf[at..at + 8].copy_from_slice(&start.to_le_bytes());
            buf[at + 8..at + 16].copy_from_slice(&end.to_le_bytes());
            start = end;
        }
        count
    };
    let allocator_count = ranges_at(4096, rng);
    let elsewhere_count = if rng.below(2) == 0 {
        0
    } else {
        ranges_at(8192, rng)
    };
    let base = buf.as_ptr() as u64;
    let mut sites = abi::PageSites {
        struct_size: abi::PageSites::SIZE as u32,
        allocator_count,
        allocator_ptr: base + 4096,
        elsewhere_ptr: if elsewhere_count == 0 { 0 } else { base + 8192 },
        elsewhere_count,
    };
    match rng.below(6) {
        0 => sites.allocator_count = rng.next() as u32,
        1 => sites.elsewhere_count = rng.next() as u32,
        2 => sites.allocator_ptr = [0x1000, 0, rng.next()][rng.below(3) as usize],
        3 => buf[4096 + rng.below(u64::from(allocator_count) * 16) as usize] = rng.next() as u8,
        _ => {}
    }
    let mut bytes = [0u8; abi::PageSites::SIZE];
    sites.encode(&mut bytes);
    buf[..bytes.len()].copy_from_slice(&bytes);
}

/// `IOC_PAGE_SITES`: refused before a configuration with slab events and when malformed; once
/// set, a session records the page allocator's allocations and frees.
fn page_sites_checks() -> anyhow::Result<()> {
    let fd = dev::open(OFlag::O_RDONLY)?;
    let allocator = [
        (0xffff_ffff_8100_0000u64, 0xffff_ffff_8100_0100u64),
        (0xffff_ffff_8100_0200, 0xffff_ffff_8100_0300),
    ];
    let elsewhere = [(0xffff_ffff_8100_0400u64, 0xffff_ffff_8100_0500u64)];
    expect(
        "page sites before configure",
        dev::page_sites(&fd, &allocator, 2, &elsewhere),
        Err(Errno::EINVAL),
    )?;
    expect(
        "configure samples",
        dev::configure_samples(&fd, 1_000_000, 0),
        Ok(()),
    )?;
    expect(
        "page sites without slab events",
        dev::page_sites(&fd, &allocator, 2, &elsewhere),
        Err(Errno::EINVAL),
    )?;
    expect(
        "configure samples and slab",
        dev::configure_samples(&fd, 1_000_000, abi::EVENT_SLAB),
        Ok(()),
    )?;
    let (a, b) = (allocator[0], allocator[1]);
    for (what, ranges) in [
        ("page sites out of order", [b, a]),
        ("page sites overlapping", [a, (a.0 + 8, b.1)]),
        ("page sites with an empty range", [a, (b.0, b.0)]),
    ] {
        expect(
            what,
            dev::page_sites(&fd, &ranges, 2, &[]),
            Err(Errno::EINVAL),
        )?;
    }
    expect(
        "page sites with no allocator range",
        dev::page_sites(&fd, &allocator, 0, &[]),
        Err(Errno::EINVAL),
    )?;
    expect(
        "page sites with too many ranges",
        dev::page_sites(&fd, &allocator, abi::MAX_SCOPE_RANGES + 1, &[]),
        Err(Errno::EINVAL),
    )?;
    expect(
        "page sites at a bad address",
        // SAFETY: an unmapped address, which the kernel must refuse.
        unsafe { dev::ioctl(&fd, abi::IOC_PAGE_SITES, 0x1000 as *mut u8) },
        Err(Errno::EFAULT),
    )?;
    expect(
        "page sites",
        dev::page_sites(&fd, &allocator, 2, &elsewhere),
        Ok(()),
    )?;
    expect(
        "page sites again (replace them)",
        dev::page_sites(&fd, &allocator[..1], 1, &[]),
        Ok(()),
    )?;
    expect("start", dev::ioctl_none(&fd, abi::IOC_START), Ok(()))?;
    // Page cache pages, taken and given back.
    let file = std::env::temp_dir().join("dprof-ioctl-fuzz-pages");
    std::fs::write(&file, vec![0x5a; 1 << 20])?;
    std::fs::remove_file(&file)?;
    expect(
        "page sites while collecting",
        dev::page_sites(&fd, &allocator, 2, &[]),
        Err(Errno::EINVAL),
    )?;
    expect("stop", dev::ioctl_none(&fd, abi::IOC_STOP), Ok(()))?;
    let records = dev::drain(&fd)?;
    let allocs = records
        .iter()
        .filter(|r| matches!(r, abi::Record::Alloc(a) if a.flags & abi::ALLOC_PAGES != 0))
        .count();
    let frees = records
        .iter()
        .filter(|r| matches!(r, abi::Record::Free(f) if f.flags & abi::FREE_PAGES != 0))
        .count();
    println!("page sites: {allocs} page allocations and {frees} page frees recorded");
    ensure!(
        allocs >= 256 && frees >= 256,
        "writing and removing a 1 MiB file recorded {allocs} page allocations and {frees} \
         page frees, want at least 256 of each"
    );
    Ok(())
}

/// An experiment on one of the first types, with a speedup sometimes out of range.
fn random_experiment(rng: &mut Rng, buf: &mut [u8]) {
    let control = abi::ExperimentControl {
        experiment: rng.next() as u32,
        type_index: rng.below(5) as u32,
        speedup_percent: rng.below(120) as u32,
        // Sometimes an arrival delay, which a plan without an arrival point refuses.
        arrival_delay_ns: if rng.below(4) == 0 {
            rng.below(1_000_000) as u32
        } else {
            0
        },
    };
    let mut bytes = [0u8; abi::ExperimentControl::SIZE];
    control.encode(&mut bytes);
    buf[..bytes.len()].copy_from_slice(&bytes);
}

/// Checks that `result` is `want` (Ok or an errno), naming the step.
fn expect(step: &str, result: Result<(), Errno>, want: Result<(), Errno>) -> anyhow::Result<()> {
    if result != want {
        let show = |r: Result<(), Errno>| match r {
            Ok(()) => "ok".to_string(),
            Err(e) => dev::errno_str(e),
        };
        bail!("{step}: got {}, want {}", show(result), show(want));
    }
    Ok(())
}

/// The causal ioctls in every state, with the errnos the ABI documents.
fn causal_checks() -> anyhow::Result<()> {
    use abi::{PROGRESS_KPROBE as KP, PROGRESS_TRACEPOINT as TP, PROGRESS_USER as UP};
    let fd = dev::open(OFlag::O_RDONLY)?;
    let good = [
        (KP, "__x64_sys_getppid"),
        (TP, "sched_switch"),
        (UP, "requests"),
    ];
    let ips = [0xffff_ffff_8100_0000u64, 0xffff_ffff_8100_0001];
    expect(
        "plan before configure",
        dev::causal_plan(&fd, &good, 0),
        Err(Errno::EINVAL),
    )?;
    expect(
        "type before plan",
        dev::causal_type(&fd, 0, &ips, ""),
        Err(Errno::EINVAL),
    )?;
    // Slab events only: no sampler, no plan.
    let slab_only = abi::Config {
        struct_size: abi::Config::SIZE as u32,
        events: abi::EVENT_SLAB,
        ring_bytes: abi::MIN_RING_BYTES,
        ..abi::Config::default()
    };
    let mut bytes = [0u8; abi::Config::SIZE];
    slab_only.encode(&mut bytes);
    expect(
        "configure slab",
        dev::ioctl_bytes(&fd, abi::IOC_CONFIGURE, &mut bytes),
        Ok(()),
    )?;
    expect(
        "plan without samples",
        dev::causal_plan(&fd, &good, 0),
        Err(Errno::EINVAL),
    )?;
    checks_configured(fd, &good, &ips)
}

/// Plans the ABI's checks refuse, on a configured device.
fn malformed_plans(fd: &OwnedFd, good: &[(u32, &str)]) -> anyhow::Result<()> {
    use abi::PROGRESS_USER as UP;
    expect(
        "plan with no point",
        dev::causal_plan(fd, &[], 0),
        Err(Errno::EINVAL),
    )?;
    expect(
        "plan with bad flags",
        dev::causal_plan(fd, good, 0x80),
        Err(Errno::EINVAL),
    )?;
    expect(
        "plan with a duplicate point",
        dev::causal_plan(fd, &[(UP, "a"), (UP, "a")], 0),
        Err(Errno::EINVAL),
    )?;
    expect(
        "plan with the arrival beyond its points",
        dev::ioctl_bytes(
            fd,
            abi::IOC_CAUSAL_PLAN,
            &mut dev::plan_bytes_with_arrival(good, 0, good.len() as u32 + 1, None),
        ),
        Err(Errno::EINVAL),
    )?;
    // The first point's latency role (bytes 20..24), with no other role in the plan.
    for (what, role) in [
        ("plan with a latency begin and no end", abi::LATENCY_BEGIN),
        ("plan with an unknown latency role", 3),
    ] {
        let mut bytes = dev::plan_bytes(good, 0);
        bytes[20..24].copy_from_slice(&role.to_le_bytes());
        expect(
            what,
            dev::ioctl_bytes(fd, abi::IOC_CAUSAL_PLAN, &mut bytes),
            Err(Errno::EINVAL),
        )?;
    }
    // Begin and end on two points, then a begin on both.
    let mut bytes = dev::plan_bytes_with_arrival(&[(UP, "a"), (UP, "b")], 0, 0, Some((0, 1)));
    let second = 20 + abi::ProgressPoint::SIZE;
    bytes[second..second + 4].copy_from_slice(&abi::LATENCY_BEGIN.to_le_bytes());
    expect(
        "plan with two latency begins",
        dev::ioctl_bytes(fd, abi::IOC_CAUSAL_PLAN, &mut bytes),
        Err(Errno::EINVAL),
    )
}

/// Scopes the module must refuse, after a plan: `scope` is a good one of two ranges.
fn malformed_scopes(fd: &OwnedFd, scope: &[(u64, u64)]) -> anyhow::Result<()> {
    let (a, b) = (scope[0], scope[1]);
    for (what, ranges) in [
        ("scope out of order", [b, a]),
        ("scope with overlapping ranges", [a, (a.0 + 8, b.1)]),
        ("scope with an empty range", [a, (b.0, b.0)]),
    ] {
        expect(what, dev::causal_scope(fd, &ranges, 2), Err(Errno::EINVAL))?;
    }
    expect(
        "scope with no range",
        dev::causal_scope(fd, scope, 0),
        Err(Errno::EINVAL),
    )?;
    expect(
        "scope with too many ranges",
        dev::causal_scope(fd, scope, abi::MAX_SCOPE_RANGES + 1),
        Err(Errno::EINVAL),
    )?;
    // Ranges at an unmapped address: nothing read, no scope.
    let unmapped = abi::CausalScope {
        struct_size: abi::CausalScope::SIZE as u32,
        range_count: 2,
        ranges_ptr: 0x1000,
    };
    let mut bytes = [0u8; abi::CausalScope::SIZE];
    unmapped.encode(&mut bytes);
    expect(
        "scope, ranges at a bad address",
        dev::ioctl_bytes(fd, abi::IOC_CAUSAL_SCOPE, &mut bytes),
        Err(Errno::EFAULT),
    )?;
    expect(
        "scope at a bad address",
        // SAFETY: an unmapped address, which the kernel must refuse.
        unsafe { dev::ioctl(fd, abi::IOC_CAUSAL_SCOPE, 0x1000 as *mut u8) },
        Err(Errno::EFAULT),
    )
}

/// Plans and types on a configured device.
fn checks_configured(fd: OwnedFd, good: &[(u32, &str)], ips: &[u64]) -> anyhow::Result<()> {
    use abi::{PROGRESS_KPROBE as KP, PROGRESS_TRACEPOINT as TP};
    expect(
        "configure samples",
        dev::configure_samples(&fd, 1_000_000, 0),
        Ok(()),
    )?;
    malformed_plans(&fd, good)?;
    expect(
        "plan with an unknown function",
        dev::causal_plan(
            &fd,
            &[(KP, "__x64_sys_getppid"), (KP, "dprof_no_such_function")],
            0,
        ),
        Err(Errno::ENOENT),
    )?;
    expect(
        "plan with an unknown tracepoint",
        dev::causal_plan(
            &fd,
            &[(TP, "sched_switch"), (TP, "dprof_no_such_tracepoint")],
            0,
        ),
        Err(Errno::ENOENT),
    )?;
    expect(
        "plan at a bad address",
        // SAFETY: an unmapped address, which the kernel must refuse.
        unsafe { dev::ioctl(&fd, abi::IOC_CAUSAL_PLAN, 0x1000 as *mut u8) },
        Err(Errno::EFAULT),
    )?;
    // A scope: two functions' worth of kernel text, in order (x86-64 `(u64, u64)` is two
    // little-endian words, as the ABI lays a range out).
    let scope = [
        (0xffff_ffff_8100_0000, 0xffff_ffff_8100_0100),
        (0xffff_ffff_8100_0200, 0xffff_ffff_8100_0300),
    ];
    expect(
        "scope before a plan",
        dev::causal_scope(&fd, &scope, 2),
        Err(Errno::EINVAL),
    )?;
    expect("plan", dev::causal_plan(&fd, good, 0), Ok(()))?;
    expect(
        "second plan",
        dev::causal_plan(&fd, good, 0),
        Err(Errno::EBUSY),
    )?;
    malformed_scopes(&fd, &scope)?;
    expect("scope", dev::causal_scope(&fd, &scope, 2), Ok(()))?;
    expect(
        "scope again (replaces it)",
        dev::causal_scope(&fd, &scope[..1], 1),
        Ok(()),
    )?;
    expect(
        "type, unknown cache",
        dev::causal_type(&fd, 0, ips, "dprof-no-such-cache"),
        Err(Errno::ENOENT),
    )?;
    expect(
        "type, no ips no cache",
        dev::causal_type(&fd, 0, &[], ""),
        Err(Errno::EINVAL),
    )?;
    expect(
        "type, index 32",
        dev::causal_type(&fd, 32, ips, ""),
        Err(Errno::EINVAL),
    )?;
    {
        let entry = abi::CausalType {
            struct_size: abi::CausalType::SIZE as u32,
            index: 1,
            ips_ptr: 0x1000,
            ip_count: 4,
            ..abi::CausalType::default()
        };
        let mut b = [0u8; abi::CausalType::SIZE];
        entry.encode(&mut b);
        expect(
            "type, ips at a bad address",
            dev::ioctl_bytes(&fd, abi::IOC_CAUSAL_TYPE, &mut b),
            Err(Errno::EFAULT),
        )?;
    }
    expect("type 0", dev::causal_type(&fd, 0, ips, ""), Ok(()))?;
    expect(
        "type 0 again",
        dev::causal_type(&fd, 0, &ips[..1], ""),
        Ok(()),
    )?;
    expect(
        "type 2, cache only",
        dev::causal_type(&fd, 2, &[], "kmalloc-64"),
        Ok(()),
    )?;
    checks_running(fd, good, ips)
}

/// Experiments and user points while collecting, and stop.
fn checks_running(fd: OwnedFd, good: &[(u32, &str)], ips: &[u64]) -> anyhow::Result<()> {
    expect(
        "experiment before start",
        dev::experiment_start(&fd, 1, 0, 50),
        Err(Errno::EINVAL),
    )?;
    expect(
        "experiment with an arrival delay, no arrival point",
        dev::experiment_start_control(
            &fd,
            &abi::ExperimentControl {
                experiment: 1,
                type_index: 0,
                speedup_percent: 0,
                arrival_delay_ns: 1000,
            },
        ),
        Err(Errno::EINVAL),
    )?;
    expect(
        "end before start",
        dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END),
        Err(Errno::EINVAL),
    )?;
    let writer = dev::open(OFlag::O_WRONLY)?;
    expect(
        "ioctl on a writer",
        dev::ioctl_none(&writer, abi::IOC_START),
        Err(Errno::EBADF),
    )?;
    expect(
        "write before start",
        dev::write(&writer, b"requests").map(drop),
        Err(Errno::ENOENT),
    )?;
    expect("start", dev::ioctl_none(&fd, abi::IOC_START), Ok(()))?;
    expect(
        "scope while collecting",
        dev::causal_scope(&fd, &[(0xffff_ffff_8100_0000, 0xffff_ffff_8100_0100)], 1),
        Err(Errno::EINVAL),
    )?;
    expect(
        "plan while running",
        dev::causal_plan(&fd, good, 0),
        Err(Errno::EINVAL),
    )?;
    expect(
        "write",
        dev::write(
            &writer,
            b"requests
",
        )
        .map(drop),
        Ok(()),
    )?;
    expect(
        "write, unknown point",
        dev::write(&writer, b"other").map(drop),
        Err(Errno::ENOENT),
    )?;
    expect(
        "write, kprobe name",
        dev::write(&writer, b"__x64_sys_getppid").map(drop),
        Err(Errno::ENOENT),
    )?;
    expect(
        "write, empty",
        dev::write(
            &writer, b"
",
        )
        .map(drop),
        Err(Errno::EINVAL),
    )?;
    expect(
        "write, long",
        dev::write(&writer, &[b'a'; 65]).map(drop),
        Err(Errno::EINVAL),
    )?;
    expect(
        "write, 64 bytes",
        dev::write(&writer, &[b'a'; 64]).map(drop),
        Err(Errno::EINVAL),
    )?;
    checks_experiments(fd, writer, good, ips)
}

/// Experiments in every state, and stop mid-experiment.
fn checks_experiments(
    fd: OwnedFd,
    writer: OwnedFd,
    good: &[(u32, &str)],
    ips: &[u64],
) -> anyhow::Result<()> {
    expect(
        "experiment on an unset type",
        dev::experiment_start(&fd, 1, 1, 50),
        Err(Errno::EINVAL),
    )?;
    expect(
        "experiment at 101%",
        dev::experiment_start(&fd, 1, 0, 101),
        Err(Errno::EINVAL),
    )?;
    expect("experiment", dev::experiment_start(&fd, 1, 0, 50), Ok(()))?;
    expect(
        "second experiment",
        dev::experiment_start(&fd, 2, 0, 50),
        Err(Errno::EINVAL),
    )?;
    expect(
        "type during an experiment",
        dev::causal_type(&fd, 0, ips, ""),
        Err(Errno::EBUSY),
    )?;
    expect("end", dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END), Ok(()))?;
    expect(
        "end again",
        dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END),
        Err(Errno::EINVAL),
    )?;
    expect(
        "experiment on the cache type",
        dev::experiment_start(&fd, 3, 2, 100),
        Ok(()),
    )?;
    // Stopped mid-experiment: an ExperimentEnd cut short.
    expect("stop", dev::ioctl_none(&fd, abi::IOC_STOP), Ok(()))?;
    expect(
        "write after stop",
        dev::write(&writer, b"requests").map(drop),
        Err(Errno::ENOENT),
    )?;
    expect(
        "end after stop",
        dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END),
        Err(Errno::EINVAL),
    )?;
    expect(
        "type after stop",
        dev::causal_type(&fd, 0, ips, ""),
        Err(Errno::EINVAL),
    )?;
    checks_after_stop(fd, writer, good, ips)
}

/// The records of the session, then a writer's close and the collector's close mid-run.
fn checks_after_stop(
    fd: OwnedFd,
    writer: OwnedFd,
    good: &[(u32, &str)],
    ips: &[u64],
) -> anyhow::Result<()> {
    let records = dev::drain(&fd)?;
    let ends: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            abi::Record::ExperimentEnd(e) => Some(*e),
            _ => None,
        })
        .collect();
    ensure!(
        ends.len() == 2,
        "{} ExperimentEnd records, want 2",
        ends.len()
    );
    ensure!(
        ends[0].flags == 0 && ends[1].flags == abi::EXPERIMENT_CUT_SHORT,
        "cut-short flags"
    );
    ensure!(
        ends[0].points[2].visits == 0 && ends[0].points[2].total == 1,
        "user point: {:?}, want 0 visits in the experiment of 1 in total (written before it)",
        ends[0].points[2]
    );
    // The writer's close must not end a session: a new one, then close the writer mid-run.
    expect(
        "configure again",
        dev::configure_samples(&fd, 1_000_000, 0),
        Ok(()),
    )?;
    expect("plan again", dev::causal_plan(&fd, good, 0), Ok(()))?;
    expect("start again", dev::ioctl_none(&fd, abi::IOC_START), Ok(()))?;
    let writer2 = dev::open(OFlag::O_WRONLY)?;
    drop(writer2);
    expect(
        "write beside a closed writer",
        dev::write(&writer, b"requests").map(drop),
        Ok(()),
    )?;
    expect(
        "a second collector",
        dev::open(OFlag::O_RDONLY).map(drop),
        Err(Errno::EBUSY),
    )?;
    expect(
        "a read-write opener",
        dev::open(OFlag::O_RDWR).map(drop),
        Err(Errno::EBUSY),
    )?;
    let mut status = [0u8; abi::Status::SIZE];
    abi::Status::default().encode(&mut status);
    expect(
        "status",
        dev::ioctl_bytes(&fd, abi::IOC_STATUS, &mut status),
        Ok(()),
    )?;
    let status = abi::Status::decode(&status).map_err(|e| anyhow::anyhow!("{e}"))?;
    ensure!(
        status.state == abi::STATE_RUNNING,
        "closing a writer changed the state to {}",
        status.state
    );
    // Closing the collector mid-experiment ends it (cut short) and the writer sees ENOENT.
    expect("type", dev::causal_type(&fd, 0, ips, ""), Ok(()))?;
    expect(
        "experiment before close",
        dev::experiment_start(&fd, 4, 0, 25),
        Ok(()),
    )?;
    drop(fd);
    expect(
        "write after close",
        dev::write(&writer, b"requests").map(drop),
        Err(Errno::ENOENT),
    )?;
    drop(writer);
    println!("dprof-ioctl-fuzz: causal state checks passed");
    Ok(())
}

/// Writer threads hammer a user point while the collector opens, plans, starts, runs
/// experiments and closes, `rounds` times. Writes may only succeed or get ENOENT.
fn writer_race(rounds: u32) -> anyhow::Result<()> {
    let done = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for _ in 0..3 {
        let (done, ok) = (Arc::clone(&done), Arc::clone(&ok));
        writers.push(std::thread::spawn(move || -> anyhow::Result<u64> {
            let mut calls = 0;
            while !done.load(Ordering::Relaxed) {
                // A fresh writer now and then: opens and closes race the session too.
                let fd = dev::open(OFlag::O_WRONLY)?;
                for _ in 0..100 {
                    match dev::write(&fd, b"requests") {
                        Ok(_) => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Errno::ENOENT) => {}
                        Err(e) => bail!("writer: unexpected errno {}", dev::errno_str(e)),
                    }
                    calls += 1;
                }
                drop(fd);
            }
            Ok(calls)
        }));
    }
    let result = (|| -> anyhow::Result<()> {
        for round in 0..rounds {
            let fd = dev::open(OFlag::O_RDONLY)?;
            let plan = [
                (abi::PROGRESS_USER, "requests"),
                (abi::PROGRESS_KPROBE, "ksys_read"),
            ];
            expect(
                "race configure",
                dev::configure_samples(&fd, 200_000, 0),
                Ok(()),
            )?;
            expect("race plan", dev::causal_plan(&fd, &plan, 0), Ok(()))?;
            expect(
                "race type",
                dev::causal_type(&fd, 0, &[0xffff_ffff_8100_0000], ""),
                Ok(()),
            )?;
            expect("race start", dev::ioctl_none(&fd, abi::IOC_START), Ok(()))?;
            expect(
                "race experiment",
                dev::experiment_start(&fd, round, 0, 100),
                Ok(()),
            )?;
            std::thread::sleep(std::time::Duration::from_millis(5));
            if round % 2 == 0 {
                expect(
                    "race end",
                    dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END),
                    Ok(()),
                )?;
            }
            if round % 3 == 0 {
                expect("race stop", dev::ioctl_none(&fd, abi::IOC_STOP), Ok(()))?;
            }
            drop(fd);
        }
        Ok(())
    })();
    done.store(true, Ordering::Relaxed);
    let mut calls = 0;
    for w in writers {
        calls += w.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
    }
    result?;
    println!(
        "dprof-ioctl-fuzz: writer race: {rounds} sessions, {calls} writes, {} counted",
        ok.load(Ordering::Relaxed)
    );
    Ok(())
}

/// A write to the user-point writer: a known, unknown, empty or over-long name.
fn random_write(rng: &mut Rng, writer: impl AsFd, call: u64) -> anyhow::Result<()> {
    let names: [&[u8]; 5] = [b"requests", b"done\n", b"", b"nope", &[b'x'; 70]];
    match dev::write(&writer, names[rng.below(5) as usize]) {
        Ok(_) | Err(Errno::ENOENT | Errno::EINVAL) => Ok(()),
        Err(e) => bail!(
            "call {call}: user point write: unexpected errno {}",
            dev::errno_str(e)
        ),
    }
}

/// The causal ioctls' outcomes are counted apart, so the run shows they got past validation.
fn label(cmd: u32, outcome: String) -> String {
    match cmd {
        abi::IOC_CAUSAL_PLAN => format!("causal plan: {outcome}"),
        abi::IOC_CAUSAL_TYPE => format!("causal type: {outcome}"),
        abi::IOC_CAUSAL_SCOPE => format!("causal scope: {outcome}"),
        abi::IOC_PAGE_SITES => format!("page sites: {outcome}"),
        abi::IOC_EXPERIMENT_START => format!("experiment start: {outcome}"),
        abi::IOC_EXPERIMENT_END => format!("experiment end: {outcome}"),
        _ => outcome,
    }
}

fn errno_name(errno: Errno) -> &'static str {
    match errno {
        Errno::EINVAL => "EINVAL",
        Errno::ENOTTY => "ENOTTY",
        Errno::EFAULT => "EFAULT",
        Errno::EBUSY => "EBUSY",
        Errno::EAGAIN => "EAGAIN",
        Errno::ENOMEM => "ENOMEM",
        Errno::ENOENT => "ENOENT",
        Errno::EOPNOTSUPP => "EOPNOTSUPP",
        Errno::ENODEV => "ENODEV",
        _ => "other",
    }
}

/// The checks with known answers, before the random calls.
fn fixed_checks() -> anyhow::Result<()> {
    causal_checks()?;
    page_sites_checks()?;
    writer_race(30)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let calls: u64 = args.get(1).map_or(Ok(10_000), |s| s.parse())?;
    let seed: u64 = args.get(2).map_or(Ok(0x00d0_f00d), |s| s.parse())?;
    let mut rng = Rng(seed | 1);
    fixed_checks()?;
    let fd = dev::open(OFlag::O_RDONLY).with_context(|| format!("open {}", abi::DEVICE_PATH))?;

    let allowed = [
        Errno::EINVAL,
        Errno::ENOTTY,
        Errno::EFAULT,
        Errno::EBUSY,
        Errno::EAGAIN,
        Errno::ENOMEM,
        // perf refusing a hardware sampler's PMU or configuration at START.
        Errno::ENOENT,
        Errno::EOPNOTSUPP,
        Errno::ENODEV,
    ];
    let mut buffer = vec![0u8; 64 * 1024];
    // A user-point writer beside the fuzzed collector.
    let writer = dev::open(OFlag::O_WRONLY)?;
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    for call in 0..calls {
        // Random bytes in our buffer, then maybe a well-formed configuration.
        for b in buffer.iter_mut().take(256) {
            *b = rng.next() as u8;
        }
        let cmd = random_cmd(&mut rng);
        if cmd == abi::IOC_CONFIGURE || rng.below(4) == 0 {
            random_config(&mut rng, &mut buffer);
        }
        match cmd {
            abi::IOC_CAUSAL_PLAN => random_plan(&mut rng, &mut buffer),
            abi::IOC_CAUSAL_TYPE => random_type(&mut rng, &mut buffer),
            abi::IOC_CAUSAL_SCOPE => random_scope(&mut rng, &mut buffer),
            abi::IOC_PAGE_SITES => random_page_sites(&mut rng, &mut buffer),
            abi::IOC_EXPERIMENT_START => random_experiment(&mut rng, &mut buffer),
            _ => {}
        }
        if rng.below(20) == 0 {
            random_write(&mut rng, &writer, call)?;
        }
        if cmd == abi::IOC_STATUS && rng.below(2) == 0 {
            // A status request pointing back into our buffer, with a random length.
            let mut status = abi::Status {
                cpus_ptr: buffer.as_ptr() as u64 + 1024,
                cpus_len: rng.below(8) as u32,
                ..abi::Status::default()
            };
            if rng.below(4) == 0 {
                status.cpus_ptr = rng.next();
                status.cpus_len = rng.next() as u32;
            }
            let mut bytes = [0u8; abi::Status::SIZE];
            status.encode(&mut bytes);
            buffer[..bytes.len()].copy_from_slice(&bytes);
        }
        let arg: u64 = match rng.below(6) {
            0 => 0,
            1 => rng.next(),
            2 => 0xffff_ffff_8100_0000, // kernel text
            3 => 0x1000,                // unmapped
            _ => buffer.as_mut_ptr() as u64,
        };
        let (what, ret) = if rng.below(10) == 0 {
            let len = [0usize, 8, 100, abi::MAX_RECORD_SIZE, buffer.len()][rng.below(5) as usize];
            let ptr = if arg == buffer.as_mut_ptr() as u64 {
                arg
            } else {
                arg & !0xfff
            };
            // Raw libc: the pointer is deliberately arbitrary (often not ours), which nix's
            // slice-taking read cannot express.
            // SAFETY: the kernel checks the user pointer; a bad one yields EFAULT, and our
            // own buffer is at least `len` bytes long.
            let n = unsafe {
                libc::read(
                    fd.as_raw_fd(),
                    ptr as *mut libc::c_void,
                    len.min(buffer.len()),
                )
            };
            ("read".to_string(), n as i64)
        } else {
            // Raw libc: the request and its argument are random at run time, while nix's ioctl
            // macros fix the request (and its argument's type) at compile time.
            // SAFETY: arbitrary ioctls on our own device; pointer arguments are either our
            // buffer or addresses the kernel must reject.
            let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::c_ulong::from(cmd), arg) };
            (format!("ioctl {cmd:#x}"), i64::from(r))
        };
        let outcome = if ret >= 0 {
            "ok".to_string()
        } else {
            let errno = Errno::last();
            anyhow::ensure!(
                allowed.contains(&errno),
                "call {call} ({what}, arg {arg:#x}): unexpected errno {}",
                dev::errno_str(errno)
            );
            errno_name(errno).to_string()
        };
        let outcome = label(cmd, outcome);
        *outcomes.entry(outcome).or_default() += 1;
    }
    drop(fd);
    drop(writer);
    println!("dprof-ioctl-fuzz: {calls} calls, seed {seed}");
    for (outcome, n) in &outcomes {
        println!("  {outcome}: {n}");
    }
    Ok(())
}
