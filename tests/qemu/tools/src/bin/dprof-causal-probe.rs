//! The positive causal check of the module-robustness scenario (guest side), with the raw
//! ioctls only:
//!
//! - a plan with a kprobe on `__x64_sys_getppid` (driven here by `getppid()` calls), a user
//!   point written through an `O_WRONLY` open of `/dev/dprof`, and the `sched_switch` tracepoint;
//! - type 0 = the instructions of this program's spin loop, which a second thread runs while
//!   one more thread per other CPU runs other busy work (so pauses, not only idle credit,
//!   serve the delay);
//! - one experiment at 50% (and a short one at 0%).
//!
//! Checks: the user point's visits equal the writes exactly; the kprobe's visits are at least
//! the `getppid()` calls; the 50% experiment inserted delay, and the pauses served plus the
//! delay credited to idle CPUs are within 20% of `delay x (cpus - 1)` (every CPU but the one
//! whose sample added a delay owes it); the 0% experiment inserted none.
//!
//! Modes (fourth argument). The first three account delays per CPU (`CAUSAL_PER_CPU_DELAYS`):
//! the other CPUs' busy work runs in this program's threads, which per-task accounting
//! would exempt as the collector's.
//! - `busy` (the default) keeps the other CPUs busy;
//! - `idle` leaves them idle, so the delay is credited rather than paused (the idle rule);
//! - `deferred` is `busy` where the sampler is configured as a hardware (IBS) sampler on the
//!   software PMU's cpu-clock (PMU type 1, config 0, which perf accepts): the module then
//!   defers every pause to its `irq_work` as it does for NMI handlers, so that path runs too;
//! - `task` accounts per task, and the busy work runs in child processes (this program run
//!   with `other-work`), which owe every delay the spinner inserts and serve it by pausing.
//!
//! Usage: `dprof-causal-probe [WRITES] [GETPPIDS] [EXPERIMENT_MS] [busy|idle|deferred|task]`

use std::hint::black_box;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use dprof_abi as abi;
use dprof_qemu_tools::dev;
use nix::errno::Errno;
use nix::fcntl::OFlag;

/// Bytes of the spin loop's code given as its "instructions" (every byte address: a superset
/// of the instruction starts, which is all the type test needs).
const SPIN_CODE_BYTES: u64 = 256;

/// Busy work that is not of the type: the CPU running it must pause, not be credited.
#[inline(never)]
fn other_work(stop: &AtomicBool) -> u64 {
    let mut x = 7u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1000 {
            x = black_box(x.rotate_left(5) ^ 0x9E37_79B9_7F4A_7C15);
        }
    }
    x
}

/// The hot loop: every sample in it is a sample of the experiment's type.
#[inline(never)]
fn spin(stop: &AtomicBool) -> u64 {
    let mut x = 1u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1000 {
            x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
    }
    x
}

/// What the CPUs other than the spinner's do, and how pauses are served.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Busy with other work: they pause in the sampler's handler.
    Busy,
    /// Idle: they are credited.
    Idle,
    /// Busy, with pauses deferred to the `irq_work`.
    Deferred,
    /// Per task, busy in child processes.
    Task,
}

fn errno(e: Errno) -> anyhow::Error {
    anyhow::anyhow!(dev::errno_str(e))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("other-work") {
        // A child of `task` mode: busy until killed.
        black_box(other_work(&AtomicBool::new(false)));
        return Ok(());
    }
    let writes: u64 = args.get(1).map_or(Ok(1000), |s| s.parse())?;
    let getppids: u64 = args.get(2).map_or(Ok(500), |s| s.parse())?;
    let experiment_ms: u64 = args.get(3).map_or(Ok(2000), |s| s.parse())?;
    let mode = match args.get(4).map(String::as_str) {
        None | Some("busy") => Mode::Busy,
        Some("idle") => Mode::Idle,
        Some("deferred") => Mode::Deferred,
        Some("task") => Mode::Task,
        Some(other) => bail!("unknown mode {other}: busy, idle, deferred or task"),
    };
    let (cpus, records) = run(writes, getppids, experiment_ms, mode)?;
    check(&records, cpus, writes, getppids, mode)?;
    println!("causal probe: all checks passed");
    Ok(())
}

/// The session: two experiments; returns the online CPUs and the records.
fn run(
    writes: u64,
    getppids: u64,
    experiment_ms: u64,
    mode: Mode,
) -> anyhow::Result<(u64, Vec<abi::Record>)> {
    let fd = dev::open(OFlag::O_RDONLY).context("open /dev/dprof")?;
    let version = dev::version(&fd).map_err(errno)?;
    ensure!(
        version.features & abi::FEATURE_CAUSAL != 0,
        "the module does not report FEATURE_CAUSAL"
    );
    let cpus = u64::from(version.online_cpus);
    configure(&fd, mode == Mode::Deferred)?;
    let points = [
        (abi::PROGRESS_KPROBE, "__x64_sys_getppid"),
        (abi::PROGRESS_USER, "requests"),
        (abi::PROGRESS_TRACEPOINT, "sched_switch"),
    ];
    let flags = if mode == Mode::Task {
        0
    } else {
        abi::CAUSAL_PER_CPU_DELAYS
    };
    dev::causal_plan(&fd, &points, flags)
        .map_err(errno)
        .context("causal plan")?;
    let spin_addr = spin as fn(&AtomicBool) -> u64 as usize as u64;
    let ips: Vec<u64> = (spin_addr..spin_addr + SPIN_CODE_BYTES).collect();
    dev::causal_type(&fd, 0, &ips, "")
        .map_err(errno)
        .context("causal type")?;
    dev::ioctl_none(&fd, abi::IOC_START)
        .map_err(errno)
        .context("start")?;

    let stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || spin(&stop))
    };
    // Keeps the other CPUs busy (but not all the time: the writes and the 0% run share them).
    let (others, mut children) = start_busy_work(mode, cpus, &stop)?;
    std::thread::sleep(Duration::from_millis(200));

    // Experiment 1: 50%, with the visits.
    dev::experiment_start(&fd, 1, 0, 50)
        .map_err(errno)
        .context("experiment 1")?;
    let user_fd = dev::open(OFlag::O_WRONLY).context("write-only open beside the collector")?;
    for i in 0..writes {
        let name: &[u8] = if i % 2 == 0 {
            b"requests"
        } else {
            b"requests\n"
        };
        let n = dev::write(&user_fd, name)
            .map_err(errno)
            .context("user point write")?;
        ensure!(n == name.len(), "write returned {n}, not {}", name.len());
    }
    for _ in 0..getppids {
        // Raw syscall, not nix's getppid(): the kprobe on `__x64_sys_getppid` counts these, so
        // each call must enter the kernel, whatever the C library might cache.
        // SAFETY: a syscall without arguments.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    std::thread::sleep(Duration::from_millis(experiment_ms));
    dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END)
        .map_err(errno)
        .context("end 1")?;
    // Experiment 2: 0%.
    dev::experiment_start(&fd, 2, 0, 0)
        .map_err(errno)
        .context("experiment 2")?;
    std::thread::sleep(Duration::from_millis(300));
    dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END)
        .map_err(errno)
        .context("end 2")?;
    stop.store(true, Ordering::Relaxed);
    black_box(
        spinner
            .join()
            .map_err(|_| anyhow::anyhow!("spinner panicked"))?,
    );
    for other in others {
        black_box(
            other
                .join()
                .map_err(|_| anyhow::anyhow!("busy thread panicked"))?,
        );
    }
    for child in &mut children {
        child.kill().context("stopping a busy child")?;
        child.wait().context("reaping a busy child")?;
    }
    // The user point is gone once collection stops.
    dev::ioctl_none(&fd, abi::IOC_STOP)
        .map_err(errno)
        .context("stop")?;
    match dev::write(&user_fd, b"requests") {
        Err(Errno::ENOENT) => {}
        other => bail!("a user point write after stop gave {other:?}, want ENOENT"),
    }
    drop(user_fd);
    let records = dev::drain(&fd)?;
    drop(fd);
    Ok((cpus, records))
}

/// The other CPUs' busy work: none (`idle`), child processes (`task`), or threads.
type BusyWork = (Vec<std::thread::JoinHandle<u64>>, Vec<std::process::Child>);

fn start_busy_work(mode: Mode, cpus: u64, stop: &Arc<AtomicBool>) -> anyhow::Result<BusyWork> {
    let busy = if mode == Mode::Idle { 1 } else { cpus };
    if mode == Mode::Task {
        let exe = std::env::current_exe().context("this program's path")?;
        let children = (1..busy)
            .map(|_| std::process::Command::new(&exe).arg("other-work").spawn())
            .collect::<Result<Vec<_>, _>>()
            .context("starting the busy child processes")?;
        return Ok((Vec::new(), children));
    }
    let threads = (1..busy)
        .map(|_| {
            let stop = Arc::clone(stop);
            std::thread::spawn(move || other_work(&stop))
        })
        .collect();
    Ok((threads, Vec::new()))
}

/// Software sampling every 1 ms, or (`deferred`) the same clock as a "hardware" sampler.
fn configure(fd: impl AsFd, deferred: bool) -> anyhow::Result<()> {
    if deferred {
        let config = abi::Config {
            struct_size: abi::Config::SIZE as u32,
            events: abi::EVENT_SAMPLES,
            ring_bytes: abi::MIN_RING_BYTES * 4,
            sampler: u32::from(abi::SAMPLER_KIND_IBS),
            // cpu-clock: 1,000,000 ns (a multiple of 16, as IBS periods must be).
            sample_period_ns: 1_000_000,
            pmu_type: 1,
            ..abi::Config::default()
        };
        let mut bytes = [0u8; abi::Config::SIZE];
        config.encode(&mut bytes);
        dev::ioctl_bytes(fd, abi::IOC_CONFIGURE, &mut bytes)
            .map_err(errno)
            .context("configure (deferred pauses)")?;
    } else {
        dev::configure_samples(fd, 1_000_000, 0)
            .map_err(errno)
            .context("configure")?;
    }
    Ok(())
}

/// The checks of the module comment, on the session's records.
fn check(
    records: &[abi::Record],
    cpus: u64,
    writes: u64,
    getppids: u64,
    mode: Mode,
) -> anyhow::Result<()> {
    let starts: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            abi::Record::ExperimentStart(s) => Some(*s),
            _ => None,
        })
        .collect();
    let ends: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            abi::Record::ExperimentEnd(e) => Some(*e),
            _ => None,
        })
        .collect();
    let samples = records
        .iter()
        .filter(|r| matches!(r, abi::Record::AccessSample(_)))
        .count();
    ensure!(
        starts.len() == 2 && ends.len() == 2,
        "{} ExperimentStart and {} ExperimentEnd records, want 2 and 2",
        starts.len(),
        ends.len()
    );
    ensure!(
        samples == 0,
        "{samples} samples recorded without CAUSAL_RECORD_SAMPLES"
    );
    let (e1, e2) = (&ends[0], &ends[1]);
    ensure!(
        e1.control.experiment == 1 && e2.control.experiment == 2,
        "experiment ids"
    );
    ensure!(
        e1.flags == 0 && e2.flags == 0,
        "an experiment was cut short"
    );
    let [kprobe, user, tracepoint, ..] = e1.points;
    println!(
        "causal: experiment 1 (50%): wall {} ns, delay {} ns, paused {} ns, credited {} ns, \
         samples {} (type {}), cpus {cpus}",
        e1.wall_ns, e1.delay_ns, e1.paused_ns, e1.credited_ns, e1.samples, e1.type_samples
    );
    println!(
        "causal: visits: user {} of {writes} written (time sum {} ns, total {}), kprobe {} \
         for {getppids} getppid() calls, sched_switch {}",
        user.visits, user.time_sum_ns, user.total, kprobe.visits, tracepoint.visits
    );
    println!(
        "causal: experiment 2 (0%): wall {} ns, delay {} ns, paused {} ns, credited {} ns, \
         samples {} (type {})",
        e2.wall_ns, e2.delay_ns, e2.paused_ns, e2.credited_ns, e2.samples, e2.type_samples
    );
    ensure!(
        user.visits == writes,
        "user point: {} visits, {writes} writes",
        user.visits
    );
    ensure!(
        user.total == writes,
        "user point total {} after {writes} writes",
        user.total
    );
    ensure!(
        user.time_sum_ns <= user.visits * e1.wall_ns,
        "user point time sum {} beyond visits x wall",
        user.time_sum_ns
    );
    ensure!(
        kprobe.visits >= getppids,
        "kprobe: {} visits for {getppids} calls",
        kprobe.visits
    );
    ensure!(tracepoint.visits > 0, "no sched_switch visit");
    ensure!(e1.type_samples > 0, "no sample fell in the spin loop");
    ensure!(e1.delay_ns > 0, "no delay inserted at 50%");
    if mode == Mode::Idle {
        ensure!(
            e1.credited_ns > 0,
            "no delay credited although the other CPUs were idle"
        );
    } else {
        ensure!(e1.paused_ns > 0, "no CPU paused although all were busy");
    }
    let expected = e1.delay_ns * (cpus - 1);
    let served = e1.paused_ns + e1.credited_ns;
    let ratio = served as f64 / expected.max(1) as f64;
    println!("causal: paused + credited = {served} ns, delay x (cpus - 1) = {expected} ns, ratio {ratio:.3}");
    ensure!(
        (0.8..=1.2).contains(&ratio),
        "paused + credited {served} ns is not within 20% of {expected} ns"
    );
    ensure!(
        e2.delay_ns == 0 && e2.paused_ns == 0,
        "the 0% experiment inserted delay"
    );
    Ok(())
}
