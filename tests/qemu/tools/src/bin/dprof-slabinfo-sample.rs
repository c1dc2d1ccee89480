//! Samples one cache's line of /proc/slabinfo every `INTERVAL_MS` until SIGTERM or SIGINT, for
//! comparing the working set view's live objects with the kernel's own count.
//!
//! Usage: `dprof-slabinfo-sample CACHE INTERVAL_MS OUT`
//!
//! OUT gets a header line with the cache's geometry from /sys/kernel/slab/CACHE, which bounds
//! how far SLUB's count may drift from the live objects (free objects in per-CPU slabs count
//! as active):
//!
//! ```text
//! # cache dprof_selftest_sweep objs_per_slab 32 cpu_partial 6
//! ```
//!
//! then one line per sample: `BEGIN_NS END_NS ACTIVE_OBJS NUM_OBJS`, where BEGIN and END are
//! `CLOCK_MONOTONIC` readings taken just before and after reading /proc/slabinfo (the kernel
//! computed the line at some moment between them). `CLOCK_MONOTONIC` is the clock of the
//! profile's records (`ktime_get_mono_fast_ns`).

use std::ffi::c_int;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use nix::sys::signal::{self, SigHandler, Signal};
use nix::time::{clock_gettime, ClockId};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn monotonic_ns() -> u64 {
    // CLOCK_MONOTONIC always exists: the error (0) is only there for the types.
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |ts| {
        u64::try_from(ts.tv_sec()).unwrap_or(0) * 1_000_000_000
            + u64::try_from(ts.tv_nsec()).unwrap_or(0)
    })
}

/// `(active_objs, num_objs)` of `cache` in a /proc/slabinfo text.
fn slabinfo_counts(text: &str, cache: &str) -> Result<(u64, u64)> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(cache))
        .with_context(|| format!("cache {cache} is not in /proc/slabinfo"))?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    ensure!(fields.len() >= 3, "bad /proc/slabinfo line {line:?}");
    Ok((fields[1].parse()?, fields[2].parse()?))
}

fn sysfs_number(cache: &str, file: &str) -> Result<u64> {
    let path = format!("/sys/kernel/slab/{cache}/{file}");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    text.split_whitespace()
        .next()
        .with_context(|| format!("{path} is empty"))?
        .parse()
        .with_context(|| format!("parsing {path}"))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, cache, interval_ms, out] = &args[..] else {
        bail!("usage: dprof-slabinfo-sample CACHE INTERVAL_MS OUT");
    };
    let interval = Duration::from_millis(
        interval_ms
            .parse()
            .with_context(|| format!("INTERVAL_MS {interval_ms:?} is not a number of ms"))?,
    );
    ensure!(
        Path::new(&format!("/sys/kernel/slab/{cache}")).is_dir(),
        "no slab cache named {cache} (no /sys/kernel/slab/{cache})"
    );
    let objs_per_slab = sysfs_number(cache, "objs_per_slab")?;
    let cpu_partial = sysfs_number(cache, "cpu_partial")?;
    // Checked before the first sample: a wrong name fails at once, not at the end.
    slabinfo_counts(&std::fs::read_to_string("/proc/slabinfo")?, cache)?;
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { signal::signal(sig, SigHandler::Handler(request_stop)) }
            .with_context(|| format!("installing the {sig} handler"))?;
    }
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(out).with_context(|| format!("creating {out}"))?,
    );
    writeln!(
        file,
        "# cache {cache} objs_per_slab {objs_per_slab} cpu_partial {cpu_partial}"
    )?;
    let mut samples = 0u64;
    while !STOP.load(Ordering::Relaxed) {
        let begin = monotonic_ns();
        let text = std::fs::read_to_string("/proc/slabinfo")?;
        let end = monotonic_ns();
        let (active, total) = slabinfo_counts(&text, cache)?;
        writeln!(file, "{begin} {end} {active} {total}")?;
        samples += 1;
        std::thread::sleep(interval);
    }
    file.flush()?;
    println!("dprof-slabinfo-sample: {samples} samples of {cache}");
    Ok(())
}
