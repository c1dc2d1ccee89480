//! The kernel's own cpu-clock sampling, without dprof: opens a kernel-mode cpu-clock perf event
//! with a 100 µs period on every CPU (no ring buffer: samples are dropped, the timer
//! interrupts still fire) and runs a command. A control for guest experiments: the same
//! interrupt load as `dprof collect --period 100us`, without dprof's handler.
//!
//! Usage: `dprof-perf-load PERIOD_NS -- CMD ARGS...`

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::raw::c_long;

use dprof_qemu_tools::PerfEventAttr;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 4 && args[2] == "--",
        "usage: dprof-perf-load PERIOD_NS -- CMD ARGS..."
    );
    let period: u64 = args[1].parse()?;
    let cpus = std::thread::available_parallelism()?.get();
    let mut fds = Vec::new();
    for cpu in 0..cpus {
        let attr = PerfEventAttr {
            kind: 1, // PERF_TYPE_SOFTWARE
            size: PerfEventAttr::abi_size(),
            config: 0, // PERF_COUNT_SW_CPU_CLOCK
            sample_period: period,
            sample_type: 1, // PERF_SAMPLE_IP
            // exclude_user (bit 4) | exclude_hv (bit 6) | exclude_idle (bit 7)
            flags: (1 << 4) | (1 << 6) | (1 << 7),
            ..PerfEventAttr::default()
        };
        // Raw syscall: nix has no perf_event_open wrapper.
        // SAFETY: perf_event_open with a valid attr pointer; pid -1, one CPU, no group.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &raw const attr,
                -1 as c_long,
                cpu as c_long,
                -1 as c_long,
                0 as c_long,
            )
        };
        anyhow::ensure!(
            fd >= 0,
            "perf_event_open on CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: perf_event_open returned a new descriptor that nothing else owns.
        fds.push(unsafe { OwnedFd::from_raw_fd(i32::try_from(fd)?) });
    }
    let status = std::process::Command::new(&args[3])
        .args(&args[4..])
        .status()?;
    drop(fds);
    anyhow::ensure!(status.success(), "the command failed: {status}");
    Ok(())
}
