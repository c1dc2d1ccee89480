//! The arrival check of the module-robustness scenario (guest side), with the raw ioctls
//! only: load amplification's mechanism, with answers exact to the nanosecond.
//!
//! - A plan, per task, with two user points, `arrive` (the arrival point, and where a request
//!   begins) and `depart` (where it ends), and a type whose one instruction address no sample
//!   can hit (an unmapped kernel address), so that every delay is an arrival's.
//! - One busy child process per CPU but one, which owe every delay and serve it by pausing.
//! - Experiment 1: 0% speedup, `DELAY_NS` per arrival; this program writes `arrive` WRITES
//!   times, then `depart` as often, so that the k-th arrival finds k requests in flight.
//!   Experiment 2: the same writes, no arrival delay.
//!
//! Checks: experiment 1's delay is exactly WRITES x `DELAY_NS` (this program is the plan's
//! owner, exempt from delays, so no arrival is credited to anyone and no type delay exists);
//! the children paused within 20% of that delay each; experiment 2 inserted nothing although
//! its arrivals were counted; both experiments counted every write of both points. The
//! latency pair: experiment 1 weighed its delays by exactly `DELAY_NS` x WRITES(WRITES+1)/2
//! requests in flight, experiment 2 by nothing. Falling behind: the writes owe the children
//! far more than one 5 ms pause, so experiment 1 capped some of their pauses, with at most
//! what was inserted still owed after one; experiment 2 capped none.
//!
//! Usage: `dprof-arrival-probe [WRITES] [EXPERIMENT_MS]`

use std::hint::black_box;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use dprof_abi as abi;
use dprof_qemu_tools::dev;
use nix::errno::Errno;
use nix::fcntl::OFlag;

/// Delay per arrival in experiment 1 (ns).
const DELAY_NS: u32 = 200_000;

fn errno(e: Errno) -> anyhow::Error {
    anyhow::anyhow!("{}", dev::errno_str(e))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("busy") {
        // A child: busy until killed.
        let mut x = 0u64;
        loop {
            x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
    }
    let writes: u64 = args.get(1).map_or(Ok(500), |s| s.parse())?;
    let experiment_ms: u64 = args.get(2).map_or(Ok(1500), |s| s.parse())?;
    let (cpus, ends) = run(writes, experiment_ms)?;
    check(&ends, cpus, writes)?;
    println!("arrival probe: all checks passed");
    Ok(())
}

/// The session: two experiments; returns the online CPUs and the end records.
fn run(writes: u64, experiment_ms: u64) -> anyhow::Result<(u64, Vec<abi::ExperimentEnd>)> {
    let fd = dev::open(OFlag::O_RDONLY).context("open /dev/dprof")?;
    let version = dev::version(&fd).map_err(errno)?;
    ensure!(
        version.features & abi::FEATURE_ARRIVALS != 0,
        "the module does not report FEATURE_ARRIVALS"
    );
    let cpus = u64::from(version.online_cpus);
    ensure!(
        cpus >= 2,
        "{cpus} CPU: the check needs another CPU to pause"
    );
    dev::configure_samples(&fd, 1_000_000, 0)
        .map_err(errno)
        .context("configure")?;
    let points = [
        (abi::PROGRESS_USER, "arrive"),
        (abi::PROGRESS_USER, "depart"),
    ];
    dev::ioctl_bytes(
        &fd,
        abi::IOC_CAUSAL_PLAN,
        &mut dev::plan_bytes_with_arrival(&points, 0, 1, Some((0, 1))),
    )
    .map_err(errno)
    .context("causal plan with an arrival point")?;
    // No instruction lives there: no sample is ever of this type.
    dev::causal_type(&fd, 0, &[0xffff_ffff_ffff_f000], "")
        .map_err(errno)
        .context("causal type")?;
    dev::ioctl_none(&fd, abi::IOC_START)
        .map_err(errno)
        .context("start")?;
    let exe = std::env::current_exe().context("this program's path")?;
    let mut children = (1..cpus)
        .map(|_| std::process::Command::new(&exe).arg("busy").spawn())
        .collect::<Result<Vec<_>, _>>()
        .context("starting the busy children")?;
    std::thread::sleep(Duration::from_millis(200));
    let user_fd = dev::open(OFlag::O_WRONLY).context("write-only open")?;
    let experiment = |number: u32, delay: u32| -> anyhow::Result<()> {
        dev::experiment_start_control(
            &fd,
            &abi::ExperimentControl {
                experiment: number,
                type_index: 0,
                speedup_percent: 0,
                arrival_delay_ns: delay,
            },
        )
        .map_err(errno)
        .with_context(|| format!("experiment {number}"))?;
        for name in [&b"arrive"[..], b"depart"] {
            for _ in 0..writes {
                dev::write(&user_fd, name)
                    .map_err(errno)
                    .context("user point write")?;
            }
        }
        std::thread::sleep(Duration::from_millis(experiment_ms));
        dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END)
            .map_err(errno)
            .with_context(|| format!("end {number}"))
    };
    let result = experiment(1, DELAY_NS).and_then(|()| experiment(2, 0));
    for child in &mut children {
        child.kill().context("stopping a busy child")?;
        child.wait().context("reaping a busy child")?;
    }
    result?;
    dev::ioctl_none(&fd, abi::IOC_STOP)
        .map_err(errno)
        .context("stop")?;
    let ends = dev::drain(&fd)?
        .iter()
        .filter_map(|r| match r {
            abi::Record::ExperimentEnd(e) => Some(*e),
            _ => None,
        })
        .collect();
    Ok((cpus, ends))
}

/// The checks of the module comment.
fn check(ends: &[abi::ExperimentEnd], cpus: u64, writes: u64) -> anyhow::Result<()> {
    let [e1, e2] = ends else {
        bail!("{} ExperimentEnd records, want 2", ends.len());
    };
    for e in [e1, e2] {
        println!(
            "arrival: experiment {} ({} ns per arrival): wall {} ns, delay {} ns, paused {} ns, \
             credited {} ns, arrivals {}, departures {}, type samples {}, in-flight delay {}, \
             capped pauses {}, most owed after one {} ns",
            e.control.experiment,
            e.control.arrival_delay_ns,
            e.wall_ns,
            e.delay_ns,
            e.paused_ns,
            e.credited_ns,
            e.points[0].visits,
            e.points[1].visits,
            e.type_samples,
            e.in_flight_delay,
            e.capped_pauses,
            e.max_owed_after_pause_ns
        );
        ensure!(
            e.flags == 0,
            "experiment {} was cut short",
            e.control.experiment
        );
        ensure!(
            e.points[0].visits == writes && e.points[1].visits == writes,
            "experiment {}: {} arrivals and {} departures for {writes} writes of each",
            e.control.experiment,
            e.points[0].visits,
            e.points[1].visits
        );
        ensure!(e.type_samples == 0, "a sample fell on an unmapped address");
    }
    let want = writes * u64::from(DELAY_NS);
    ensure!(
        e1.delay_ns == want,
        "experiment 1 inserted {} ns, want {writes} arrivals x {DELAY_NS} ns = {want} ns",
        e1.delay_ns
    );
    let owed = want * (cpus - 1);
    let ratio = e1.paused_ns as f64 / owed as f64;
    println!(
        "arrival: the children paused {} ns for {owed} ns owed, ratio {ratio:.3}",
        e1.paused_ns
    );
    ensure!(
        (0.8..=1.2).contains(&ratio),
        "the busy children paused {} ns, not within 20% of {owed} ns",
        e1.paused_ns
    );
    ensure!(
        e2.delay_ns == 0 && e2.paused_ns == 0,
        "experiment 2 had no arrival delay but inserted {} ns",
        e2.delay_ns
    );
    let weighed = u64::from(DELAY_NS) * writes * (writes + 1) / 2;
    ensure!(
        e1.in_flight_delay == weighed,
        "experiment 1 weighed its delays by {} ns x requests, want {DELAY_NS} ns x \
         {writes}({writes}+1)/2 = {weighed}",
        e1.in_flight_delay
    );
    ensure!(
        e2.in_flight_delay == 0,
        "experiment 2 inserted nothing but weighed {} ns x requests",
        e2.in_flight_delay
    );
    ensure!(
        e1.capped_pauses > 0
            && e1.max_owed_after_pause_ns > 0
            && e1.max_owed_after_pause_ns <= want,
        "experiment 1 owed {want} ns at once but capped {} pauses, {} ns left after one",
        e1.capped_pauses,
        e1.max_owed_after_pause_ns
    );
    ensure!(
        e2.capped_pauses == 0 && e2.max_owed_after_pause_ns == 0,
        "experiment 2 owed nothing but capped {} pauses",
        e2.capped_pauses
    );
    Ok(())
}
