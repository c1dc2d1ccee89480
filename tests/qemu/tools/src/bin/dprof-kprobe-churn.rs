//! Guest load of the kprobe-removal scenario (and of the `dprof` mode of
//! tests/qemu/stress/kprobe-churn.sh): dprof.ko's own kprobes registered and removed in a
//! loop on a function the other CPUs run flat out. Each round is one causal session with the
//! raw ioctls: a plan with a kprobe progress point on FUNCTION, start, a 0% experiment (which
//! counts the kprobe's visits), stop, close (which unregisters the kprobe). Every other round
//! waits long enough for the kprobe optimizer (5 jiffies) to turn the int3 into a jump first.
//!
//! Fails when a round's kprobe counted no visit (it was not live); prints the rounds and the
//! visits. The harness fails the run on any kernel report, so a stale int3 after removal
//! ("Oops: int3") fails it.
//!
//! Usage: `dprof-kprobe-churn [ROUNDS] [FUNCTION]`

use std::time::Duration;

use anyhow::Context;
use dprof_abi as abi;
use dprof_qemu_tools::dev;
use nix::errno::Errno;
use nix::fcntl::OFlag;

fn errno(e: Errno) -> anyhow::Error {
    anyhow::anyhow!(dev::errno_str(e))
}

/// One session; returns the progress visits its records count.
fn round(function: &str, hold: Duration) -> anyhow::Result<u64> {
    let fd = dev::open(OFlag::O_RDONLY).context("open /dev/dprof")?;
    dev::configure_samples(&fd, 1_000_000, 0)
        .map_err(errno)
        .context("configure")?;
    dev::causal_plan(&fd, &[(abi::PROGRESS_KPROBE, function)], 0)
        .map_err(errno)
        .context("causal plan")?;
    // A type is needed for an experiment; a 0% one inserts nothing, it only counts visits.
    let ip = round as fn(&str, Duration) -> anyhow::Result<u64> as usize as u64;
    dev::causal_type(&fd, 0, &[ip], "")
        .map_err(errno)
        .context("causal type")?;
    dev::ioctl_none(&fd, abi::IOC_START)
        .map_err(errno)
        .context("start")?;
    dev::experiment_start(&fd, 1, 0, 0)
        .map_err(errno)
        .context("experiment")?;
    // A read of our own: on vfs_read (the default) a visit even when the host runs neither
    // dd's vCPU within a 2 ms hold, as a loaded host may.
    let mut byte = [0u8; 1];
    std::fs::File::open("/dev/zero")
        .and_then(|mut zero| std::io::Read::read(&mut zero, &mut byte))
        .context("read /dev/zero")?;
    std::thread::sleep(hold);
    dev::ioctl_none(&fd, abi::IOC_EXPERIMENT_END)
        .map_err(errno)
        .context("experiment end")?;
    dev::ioctl_none(&fd, abi::IOC_STOP)
        .map_err(errno)
        .context("stop")?;
    let visits = dev::drain(&fd)?
        .iter()
        .map(|record| match record {
            abi::Record::ExperimentEnd(end) => end.points[0].visits,
            _ => 0,
        })
        .sum();
    drop(fd);
    Ok(visits)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let rounds: u64 = args.get(1).map_or(Ok(1000), |s| s.parse())?;
    let function = args.get(2).map_or("vfs_read", String::as_str);
    let mut visits = 0;
    for i in 0..rounds {
        // 200 ms: the optimizer (5 jiffies) has run; 2 ms: it has not.
        let hold = Duration::from_millis(if i % 2 == 0 { 200 } else { 2 });
        let counted = round(function, hold).with_context(|| format!("round {i}"))?;
        // The probe must have been live every round, or the round tested nothing.
        anyhow::ensure!(
            counted > 0,
            "round {i}: the kprobe on {function} counted no visit"
        );
        visits += counted;
        if (i + 1) % 100 == 0 {
            println!("dprof-kprobe-churn: {} rounds, {visits} visits", i + 1);
        }
    }
    println!("dprof-kprobe-churn: {rounds} rounds on {function}, {visits} visits");
    Ok(())
}
