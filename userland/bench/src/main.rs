//! `dprof-bench`: how fast `dprof report`'s analysis runs, and how much memory it takes.
//!
//! It writes a synthetic profile (by default 5M access samples and 1M allocations: 50 caches,
//! objects that live and die, 2000 instructions with real x86-64 bytes, 8 CPUs whose records
//! are interleaved per drain as the collector writes them) to a temporary file, then opens it
//! and runs the analysis (reading and checking the records, decode, time-order, address set
//! replay, resolution, aggregation) as `dprof report` does (on two threads when the machine
//! has two CPUs: one reads and decodes, one replays; `--one-thread` for one), and prints
//! samples per second and peak
//! memory.
//!
//! Peak memory is the process's peak resident set (`VmHWM` in `/proc/self/status`, the value
//! `getrusage` reports as `ru_maxrss`) over opening the profile and the analysis: the reader
//! streams the records a chunk at a time, so this is what `dprof report` needs. The peak is
//! reset (`/proc/self/clear_refs`) just before the profile is opened, so that generating the
//! synthetic profile in the same process does not count.
//!
//! `dprof-bench --help` lists the knobs; `--keep FILE` keeps the profile, `--profile FILE`
//! analyzes an existing one, `--breakdown` also times reading the records, and reading plus
//! decoding the samples' instructions, alone.
//!
//! `--views` also times the analysis with the miss classification and working-set views
//! (`dprof report --json`, `--view misses`, `--view working-set`) and prints the cache
//! simulation's throughput (simulated accesses per second); `--convergence 1000,10000,...`
//! then recomputes the views from one recorded pass with each `--sim-objects` cap and prints
//! the answer (mean lines resident per level of the types holding most) against the largest
//! cap's, to show how many simulated objects the answer needs.
//!
//! `--transcode IN OUT` writes a profile anew with its history hits reduced to the registers
//! their check reads, and prints the bytes per record of each kind before and after.
//!
//! Run it from a release build: `cargo run --release -p dprof-bench`.

use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use dprof_abi::{
    reg, AccessSample, Alloc, CacheInfo, Free, Record, RecordKind, ALLOC_KMALLOC, CACHE_NAME_BYTES,
    SAMPLER_KIND_SOFTWARE, SAMPLE_USER,
};
use dprof_analysis::pipeline::{self, Analyzer, Options};
use dprof_analysis::symbols::Kallsyms;
use dprof_analysis::views::{self, ViewOptions};
use dprof_fixtures::profile::{example_header, lossless_stop};
use dprof_format::{Profile, ProfileEncoder, StopInfo, StopReason};
use dprof_model::working_set::WorkingSetReport;
use dprof_model::Bucket;

/// `println!` that ignores a closed pipe (`dprof-bench | head`).
macro_rules! say {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod transcode;

/// Benchmark of the data-profile analysis on a synthetic profile.
#[derive(Debug, Parser)]
#[command(name = "dprof-bench")]
struct Args {
    /// Access samples to generate.
    #[arg(long, default_value_t = 5_000_000)]
    samples: u64,
    /// Allocations to generate (most are freed again).
    #[arg(long, default_value_t = 1_000_000)]
    allocs: u64,
    /// Slab caches (10 of them generic kmalloc caches).
    #[arg(long, default_value_t = 50)]
    caches: usize,
    /// Distinct sampled instructions.
    #[arg(long, default_value_t = 2000)]
    ips: usize,
    /// CPUs.
    #[arg(long, default_value_t = 8)]
    cpus: u32,
    /// Objects live at once, all caches together.
    #[arg(long, default_value_t = 150_000)]
    live: usize,
    /// Keep the generated profile here instead of a temporary file.
    #[arg(long, value_name = "FILE", conflicts_with = "profile")]
    keep: Option<PathBuf>,
    /// Analyze this profile instead of generating one.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Also time reading (and checking) the records alone, and that plus decoding the
    /// samples' instructions.
    #[arg(long)]
    breakdown: bool,
    /// Run the analysis this many times and report the best and the median: on a shared
    /// machine one run can be several times slower than the next.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Analyze on one thread (by default the records are read and decoded on a second one
    /// while this one replays them, as `dprof report` does).
    #[arg(long)]
    one_thread: bool,
    /// Also time the analysis with the miss classification and working-set views, and the
    /// cache simulation's throughput.
    #[arg(long)]
    views: bool,
    /// Write the profile IN anew as OUT with its history hits reduced to the registers their
    /// check reads (from the profile's own code), print the bytes per record of each kind of
    /// both, and check that their histories reports are identical; nothing else runs.
    #[arg(long, num_args = 2, value_names = ["IN", "OUT"])]
    transcode: Vec<PathBuf>,
    /// With --views: recompute the views with each of these --sim-objects caps
    /// (comma-separated) and print the answer for each, against the largest cap's.
    #[arg(long, value_name = "N,...", value_delimiter = ',', requires = "views")]
    convergence: Vec<usize>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let [input, output] = args.transcode.as_slice() {
        return transcode::run(input, output);
    }
    let (path, temporary) = match (&args.profile, &args.keep) {
        (Some(p), _) | (None, Some(p)) => (p.clone(), false),
        (None, None) => (
            std::env::temp_dir().join(format!("dprof-bench-{}.dprof", std::process::id())),
            true,
        ),
    };
    if args.profile.is_none() {
        let started = Instant::now();
        let (records, bytes) = generate(&args, &path)?;
        say!(
            "generated {} records ({} samples, {} allocations) in {:.1} s: {} ({:.0} MiB)",
            records,
            args.samples,
            args.allocs,
            started.elapsed().as_secs_f64(),
            path.display(),
            bytes as f64 / f64::from(1 << 20)
        );
    }
    let result = bench(&path, args.breakdown, args.repeat, args.one_thread).and_then(|()| {
        if args.views {
            bench_views(&path, &args.convergence)
        } else {
            Ok(())
        }
    });
    if temporary {
        let _ = std::fs::remove_file(&path);
    }
    result?;
    print_perf_hint(args.samples);
    Ok(())
}

fn bench(path: &Path, breakdown: bool, repeat: u32, one_thread: bool) -> anyhow::Result<()> {
    // Reset the peak so that it measures opening and analyzing, not generating.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let started = Instant::now();
    let profile = Profile::open(path)?;
    let opened = started.elapsed().as_secs_f64();
    say!(
        "opened the profile ({} records, {:.0} MiB; section headers and small sections \
         checked) in {opened:.3} s",
        profile.record_count(),
        profile.file_size() as f64 / f64::from(1 << 20)
    );
    if breakdown {
        breakdown_times(&profile)?;
    }
    let mut runs: Vec<(f64, Option<f64>)> = Vec::new();
    let mut last = None;
    for _ in 0..repeat {
        let started = Instant::now();
        let cpu_before = dprof_collect::system::process_cpu_ns();
        let options = Options {
            two_threads: !one_thread,
            ..Options::default()
        };
        let report = pipeline::analyze(&profile, &options)?;
        let wall = started.elapsed().as_secs_f64();
        let on_cpu = dprof_collect::system::process_cpu_ns()
            .zip(cpu_before)
            .map(|(after, before)| after.saturating_sub(before) as f64 / 1e9);
        runs.push((wall, on_cpu));
        last = Some(report);
    }
    let Some(report) = last else {
        anyhow::bail!("no analysis ran");
    };
    let peak = status_kib("VmHWM:");
    let samples = report.coverage.total_samples;
    let mut walls: Vec<f64> = runs.iter().map(|r| r.0).collect();
    walls.sort_by(f64::total_cmp);
    let best = walls.first().copied().unwrap_or(f64::NAN);
    let median = walls.get(walls.len() / 2).copied().unwrap_or(f64::NAN);
    let rate = |s: f64| samples as f64 / s / 1e6;
    say!(
        "analysis: {samples} samples, {} records in {best:.2} s on {}, reading and checking \
         the records included: {:.2} M samples/s, {:.2} M records/s{}",
        profile.record_count(),
        if one_thread {
            "one thread"
        } else {
            "two threads"
        },
        rate(best),
        profile.record_count() as f64 / best / 1e6,
        if repeat > 1 {
            format!(
                " (best of {repeat} runs; median {:.2} M samples/s)",
                rate(median)
            )
        } else {
            String::new()
        }
    );
    if let Some(on_cpu) = runs.iter().filter_map(|r| r.1).min_by(f64::total_cmp) {
        say!(
            "  on-CPU time of the analysis, all its threads: {on_cpu:.2} s: {:.2} M samples/s \
             per CPU second (wall time includes waiting for a CPU on a busy machine)",
            rate(on_cpu)
        );
    }
    say!("coverage: {}", report.coverage.summary);
    say!(
        "types: {}; address set: {} allocations, {} frees, peak {} live objects; reorder buffer: at most {} records, {} late",
        report.data_profile.types.len(),
        report.address_set.allocs,
        report.address_set.frees,
        report.address_set.peak_live_objects,
        report.ordering.max_buffered,
        report.ordering.late_records
    );
    match peak {
        Some(peak) if reset => say!(
            "memory: peak resident {} MiB over opening the profile and the analysis (the \
             records are streamed, one chunk of at most {} MiB at a time)",
            peak / 1024,
            dprof_format::MAX_RECORDS_CHUNK >> 20
        ),
        Some(peak) => say!(
            "memory: peak resident {} MiB of the whole process (the peak could not be reset, \
             so generating the profile counts too)",
            peak / 1024
        ),
        None => say!("memory: /proc/self/status is not readable"),
    }
    let slab = report.coverage.count(Bucket::Slab);
    anyhow::ensure!(
        samples == 0 || slab > 0,
        "no sample resolved to a slab object: the benchmark profile is broken"
    );
    Ok(())
}

/// Times the analysis with the views, the simulation alone, and with `caps` the answer's
/// convergence.
fn bench_views(path: &Path, caps: &[usize]) -> anyhow::Result<()> {
    let profile = Profile::open(path)?;
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let started = Instant::now();
    let cpu = thread_cpu_ns();
    let report = pipeline::analyze_views(
        &profile,
        &kallsyms,
        &Options::default(),
        &ViewOptions::default(),
        &mut |_| {},
    )?;
    say!(
        "views: the analysis with the miss classification and working-set views takes {:.2} \
         s{} (the main pass also records lifetimes and slab samples; then layout and \
         simulation){}",
        started.elapsed().as_secs_f64(),
        on_cpu_since(cpu),
        match status_kib("VmHWM:") {
            Some(peak) if reset => format!(", peak resident {} MiB", peak / 1024),
            _ => String::new(),
        }
    );
    let ws = report
        .working_set
        .context("the analysis made no working set")?;
    let sim = &ws.simulation;
    say!(
        "simulation: {} objects of {} eligible, {} accesses in {:.3} s: {:.2} M simulated \
         accesses/s ({} cache levels)",
        sim.objects,
        sim.eligible_objects,
        sim.accesses,
        sim.seconds,
        sim.accesses_per_second / 1e6,
        ws.geometry.len()
    );
    if caps.is_empty() {
        return Ok(());
    }
    convergence(&profile, &kallsyms, caps)
}

/// The views recomputed from one recorded main pass with each `--sim-objects` cap in `caps`:
/// the simulation's throughput and answer against the largest cap's.
fn convergence(profile: &Profile, kallsyms: &Kallsyms, caps: &[usize]) -> anyhow::Result<()> {
    let mut analyzer = Analyzer::new(profile.header(), kallsyms, &Options::default());
    analyzer.record_views();
    let mut records = profile.records();
    while let Some(pushed) =
        records.next_view_with(|header, record| analyzer.push_view(header, record))
    {
        pushed?;
    }
    let (base, _, recorded) = analyzer.finish_with_views();
    let recorded = recorded.context("nothing recorded for the views")?;
    let mut runs: Vec<(usize, WorkingSetReport, Option<f64>)> = Vec::new();
    let mut sorted = caps.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    for &cap in &sorted {
        let mut r = base.clone();
        let options = ViewOptions {
            sim_objects: cap.max(1),
            ..ViewOptions::default()
        };
        let cpu = thread_cpu_ns();
        views::compute(
            &mut r,
            &recorded,
            None,
            profile.header(),
            kallsyms,
            &options,
        );
        let on_cpu = thread_cpu_ns()
            .zip(cpu)
            .map(|(after, before)| after.saturating_sub(before) as f64 / 1e9);
        runs.push((cap, r.working_set.context("no working set")?, on_cpu));
    }
    let Some((_, reference, _)) = runs.last() else {
        return Ok(());
    };
    let lines = |ws: &WorkingSetReport, name: &str, level: &str| {
        ws.find_type(name)
            .and_then(|t| t.resident_lines.iter().find(|r| r.level == level))
            .map_or(0.0, |r| r.mean_lines)
    };
    // The types holding most lines in the farthest level of the reference.
    let levels: Vec<String> = reference.geometry.iter().map(|l| l.name.clone()).collect();
    let mut top: Vec<(f64, String)> = reference
        .types
        .iter()
        .map(|t| {
            let far = levels.last().map_or(0.0, |l| lines(reference, &t.name, l));
            (far, t.name.clone())
        })
        .collect();
    top.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    top.truncate(3);
    say!(
        "convergence: mean lines resident per level of the {} types holding most, each with \
         its error against the largest cap ({}); the same seed throughout",
        top.len(),
        sorted.last().copied().unwrap_or(0)
    );
    for (cap, ws, on_cpu) in &runs {
        let s = &ws.simulation;
        let mut cells = Vec::new();
        let mut worst = 0f64;
        for (_, name) in &top {
            for level in &levels {
                let (got, want) = (lines(ws, name, level), lines(reference, name, level));
                let error = if want > 0.0 { (got - want) / want } else { 0.0 };
                worst = worst.max(error.abs());
                cells.push(format!("{name} {level} {got:.0} ({:+.1}%)", error * 100.0));
            }
        }
        let per_core = on_cpu.map_or_else(String::new, |c| {
            format!(
                "; the views {c:.3} s on-CPU, {:.2} M accesses/s per core",
                s.accesses as f64 / c / 1e6
            )
        });
        say!(
            "  --sim-objects {cap}: {} objects, {} accesses simulated in {:.3} s ({:.2} M/s\
             {per_core}); worst error {:.1}%: {}",
            s.objects,
            s.accesses,
            s.seconds,
            s.accesses_per_second / 1e6,
            worst * 100.0,
            cells.join(", ")
        );
    }
    Ok(())
}

/// Times reading (and checking) the records alone, and that plus decoding the samples'
/// instructions, to show what the analysis adds.
fn breakdown_times(profile: &Profile) -> anyhow::Result<()> {
    let t = Instant::now();
    let cpu = thread_cpu_ns();
    let mut n = 0u64;
    for item in profile.records() {
        let (h, r) = item?;
        n = n.wrapping_add(h.time_ns ^ u64::from(matches!(r, Record::AccessSample(_))));
    }
    say!(
        "breakdown: reading, checking and decoding the records alone takes {:.2} s{} \
         (checksum {n:x})",
        t.elapsed().as_secs_f64(),
        on_cpu_since(cpu)
    );
    let t = Instant::now();
    let cpu = thread_cpu_ns();
    let mut d = dprof_analysis::decode::Decoder::new();
    let mut k = 0u64;
    for item in profile.records() {
        if let (_, Record::AccessSample(s)) = item? {
            if let dprof_analysis::decode::DecodeOutcome::Access(a) = d.access(&s) {
                k = k.wrapping_add(a.addr);
            }
        }
    }
    say!(
        "breakdown: that and decoding the samples' instructions takes {:.2} s{} (checksum \
         {k:x})",
        t.elapsed().as_secs_f64(),
        on_cpu_since(cpu)
    );
    Ok(())
}

/// ", N s on-CPU" since `before` (a [`thread_cpu_ns`] reading), or nothing when unknown.
fn on_cpu_since(before: Option<u64>) -> String {
    thread_cpu_ns()
        .zip(before)
        .map_or_else(String::new, |(after, before)| {
            format!(
                ", {:.2} s on-CPU",
                after.saturating_sub(before) as f64 / 1e9
            )
        })
}

/// Nanoseconds this thread has run on a CPU (/proc/thread-self/schedstat, first field).
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// A `/proc/self/status` value in KiB.
fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn print_perf_hint(samples: u64) {
    let perf = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("perf"))
            .find(|p| p.is_file())
    });
    match perf {
        Some(p) => say!("perf: found at {}", p.display()),
        None => say!("perf: not installed (Debian package linux-perf)"),
    }
    say!(
        "perf: to compare, profile a workload of about {samples} samples with perf and time \
         perf's data-type report over it (perf 6.8+; it finds the kernel's debug info itself):\n  \
         perf record -e cpu-clock -c 100000 -a -o /tmp/dprof-bench-perf.data -- sleep 30   \
         # software sampling, as dprof's\n  \
         perf mem record -a -o /tmp/dprof-bench-perf.data -- sleep 30   # or PEBS/IBS where \
         available\n  \
         perf report -i /tmp/dprof-bench-perf.data --header-only | grep -i 'sample'\n  \
         /usr/bin/time -f '%e s, peak %M KiB' perf report -i /tmp/dprof-bench-perf.data \
         --stdio --sort type,typeoff > /dev/null\n  \
         /usr/bin/time -f '%e s, peak %M KiB' perf report -i /tmp/dprof-bench-perf.data \
         --stdio --type-stat > /dev/null"
    );
}

// ---------------------------------------------------------------------------------------------
// The synthetic profile.

/// xorshift64*: deterministic, fast.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A skewed index below `n`: a few hot, many cold.
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u * u) * n as f64) as usize
    }
}

const FUNCTION_BASE: u64 = 0xffff_ffff_8100_0000;
const FUNCTIONS: u64 = 400;
const GLOBAL_BASE: u64 = 0xffff_ffff_8200_0000;
const GLOBALS: u64 = 50;
const PERCPU_VARS: u64 = 20;
const CACHE_ID_BASE: u64 = 0xffff_8881_0000_0000;
const REGION_BASE: u64 = 0xffff_8882_0000_0000;
const OLD_OBJECTS: u64 = 0xffff_8890_0000_0000;
const STACKS: u64 = 0xffff_c900_0000_0000;

const NAMES: [&str; 16] = [
    "tcp_sendmsg",
    "tcp_recvmsg",
    "__alloc_skb",
    "skb_release_data",
    "schedule",
    "dup_task_struct",
    "do_sys_poll",
    "alloc_pipe_info",
    "ext4_lookup",
    "d_alloc",
    "vfs_read",
    "copy_process",
    "ip_rcv",
    "dev_queue_xmit",
    "kmem_cache_alloc_node",
    "__wake_up_common",
];

fn kallsyms() -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "0000000000000000 A __per_cpu_start");
    for i in 0..PERCPU_VARS {
        let _ = writeln!(s, "{:016x} D pcpu_var_{i}", 0x1000 + i * 0x100);
    }
    let _ = writeln!(s, "{:016x} A __per_cpu_end", 0x1000 + PERCPU_VARS * 0x100);
    for i in 0..FUNCTIONS {
        let name = NAMES[(i % NAMES.len() as u64) as usize];
        let _ = writeln!(s, "{:016x} T {name}_{i}", FUNCTION_BASE + i * 0x1000);
    }
    for i in 0..GLOBALS {
        let _ = writeln!(s, "{:016x} D global_{i}", GLOBAL_BASE + i * 0x100);
    }
    let _ = writeln!(s, "{:016x} B __bss_stop", GLOBAL_BASE + GLOBALS * 0x100);
    s
}

struct Cache {
    id: u64,
    name: String,
    size: u32,
    generic: bool,
    region: u64,
    next_slot: u64,
    free_slots: Vec<u64>,
    live: Vec<u64>,
    target: usize,
    sites: Vec<u64>,
}

/// What an instruction touches.
#[derive(Clone, Copy)]
enum Target {
    Slab(usize),
    Global,
    Percpu,
    Stack,
    Unknown,
    None,
    User,
}

struct IpSpec {
    ip: u64,
    insn: [u8; 16],
    len: u8,
    target: Target,
    base_reg: usize,
    disp: u64,
}

const BASE_REGS: [usize; 8] = [
    reg::RDI,
    reg::RSI,
    reg::RBX,
    reg::RDX,
    reg::RCX,
    reg::R8,
    reg::R8 + 1,
    reg::R8 + 2,
];

/// `mov disp32(base),%rax` (0x8b), `mov %rax,disp32(base)` (0x89) or `lock add
/// %eax,disp32(base)`: base is not %rsp/%r12 (no SIB needed).
fn mem_insn(op: u8, base: usize, disp: u32, lock: bool) -> Vec<u8> {
    let mut v = Vec::new();
    if lock {
        v.push(0xf0);
        if base >= 8 {
            v.push(0x41);
        }
        v.push(0x01);
    } else {
        v.push(0x48 | u8::from(base >= 8));
        v.push(op);
    }
    v.push(0x80 | (base as u8 & 7));
    v.extend_from_slice(&disp.to_le_bytes());
    v
}

fn ip_specs(rng: &mut Rng, n: usize, caches: &[Cache]) -> Vec<IpSpec> {
    (0..n)
        .map(|i| {
            let ip =
                FUNCTION_BASE + (i as u64 % FUNCTIONS) * 0x1000 + (i as u64 / FUNCTIONS) * 0x20;
            let base_reg = BASE_REGS[rng.below(BASE_REGS.len() as u64) as usize];
            let roll = rng.below(100);
            let (target, bytes, disp): (Target, Vec<u8>, u64) = match roll {
                0..=64 => {
                    let c = rng.below(caches.len() as u64) as usize;
                    let size = u64::from(caches[c].size.max(16));
                    let disp = rng.below(size / 8) * 8;
                    let insn = match rng.below(10) {
                        0..=5 => mem_insn(0x8b, base_reg, disp as u32, false),
                        6..=8 => mem_insn(0x89, base_reg, disp as u32, false),
                        _ => mem_insn(0, base_reg, disp as u32, true),
                    };
                    (Target::Slab(c), insn, disp)
                }
                65..=71 => {
                    let g = rng.below(GLOBALS);
                    let target = GLOBAL_BASE + g * 0x100 + rng.below(32) * 8;
                    let disp = target.wrapping_sub(ip + 7) as u32;
                    let mut v = vec![0x48, 0x8b, 0x05];
                    v.extend_from_slice(&disp.to_le_bytes());
                    (Target::Global, v, 0)
                }
                72..=78 => {
                    let off = 0x1000 + rng.below(PERCPU_VARS) * 0x100 + rng.below(32) * 8;
                    let mut v = vec![0x65, 0x48, 0x8b, 0x04, 0x25];
                    v.extend_from_slice(&(off as u32).to_le_bytes());
                    (Target::Percpu, v, 0)
                }
                79..=83 => {
                    let disp = rng.below(64) * 8;
                    let mut v = vec![0x48, 0x8b, 0x84, 0x24];
                    v.extend_from_slice(&(disp as u32).to_le_bytes());
                    (Target::Stack, v, disp)
                }
                84..=91 => (
                    Target::Unknown,
                    mem_insn(0x8b, base_reg, 8, false),
                    rng.below(64) * 64,
                ),
                92..=95 => (Target::None, vec![0x48, 0x01, 0xc2], 0),
                96 => (Target::None, vec![0x48, 0x8d, 0x47, 0x08], 0),
                97..=98 => (Target::None, vec![0x57], 0),
                _ => (Target::User, vec![0x48, 0x01, 0xc2], 0),
            };
            let mut insn = [0u8; 16];
            insn[..bytes.len()].copy_from_slice(&bytes);
            IpSpec {
                ip,
                insn,
                len: bytes.len() as u8,
                target,
                base_reg,
                disp,
            }
        })
        .collect()
}

fn make_caches(rng: &mut Rng, n: usize, live: usize) -> Vec<Cache> {
    const GENERIC: [(&str, u32); 10] = [
        ("kmalloc-8", 8),
        ("kmalloc-16", 16),
        ("kmalloc-32", 32),
        ("kmalloc-64", 64),
        ("kmalloc-128", 128),
        ("kmalloc-256", 256),
        ("kmalloc-512", 512),
        ("kmalloc-1k", 1024),
        ("kmalloc-2k", 2048),
        ("kmalloc-cg-4k", 4096),
    ];
    const DEDICATED: [(&str, u32); 10] = [
        ("skbuff_head_cache", 256),
        ("task_struct", 4096),
        ("filp", 256),
        ("dentry", 192),
        ("inode_cache", 640),
        ("TCP", 2432),
        ("vm_area_struct", 192),
        ("anon_vma_chain", 64),
        ("radix_tree_node", 576),
        ("sigqueue", 80),
    ];
    (0..n)
        .map(|i| {
            let (name, size, generic) = if i < GENERIC.len() {
                (GENERIC[i].0.to_owned(), GENERIC[i].1, true)
            } else {
                let (base, size) = DEDICATED[(i - GENERIC.len()) % DEDICATED.len()];
                let round = (i - GENERIC.len()) / DEDICATED.len();
                let name = if round == 0 {
                    base.to_owned()
                } else {
                    format!("{base}_{round}")
                };
                (name, size, false)
            };
            let sites = (0..if generic { 8 } else { 2 })
                .map(|_| FUNCTION_BASE + rng.below(FUNCTIONS) * 0x1000 + 0x42)
                .collect();
            Cache {
                id: CACHE_ID_BASE + i as u64 * 0x1000,
                name,
                size,
                generic,
                region: REGION_BASE + i as u64 * (1 << 32),
                next_slot: 0,
                free_slots: Vec::new(),
                live: Vec::new(),
                target: live / n.max(1),
                sites,
            }
        })
        .collect()
}

/// Appends one encoded record.
fn put(buf: &mut Vec<u8>, cpu: u32, time_ns: u64, record: &Record) {
    let mut bytes = [0u8; dprof_abi::MAX_RECORD_SIZE];
    let size = record.encode(cpu, time_ns, &mut bytes);
    buf.extend_from_slice(&bytes[..size]);
}

/// Writes the synthetic profile; returns (records, file bytes).
#[expect(clippy::too_many_lines, reason = "one generator loop")]
fn generate(args: &Args, path: &Path) -> anyhow::Result<(u64, u64)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cpus = args.cpus.max(1);
    let mut header = example_header();
    header.online_cpus = cpus;
    header.module.nr_cpu_ids = cpus;
    header.module.online_cpus = cpus;
    "6.12.0-bench".clone_into(&mut header.kernel_release);
    // As the collector writes it: only the registers the analysis reads.
    header.config.sample_registers = dprof_format::SampleRegisters::Address;
    let mut caches = make_caches(&mut rng, args.caches.max(1), args.live);
    let ips = ip_specs(&mut rng, args.ips.max(1), &caches);
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut enc = ProfileEncoder::new(
        BufWriter::with_capacity(1 << 20, file),
        &header,
        kallsyms().as_bytes(),
        b"",
    )?;
    enc.set_register_filter(Box::new(|ip, insn| {
        dprof_analysis::decode::address_registers(insn, ip)
    }));

    let mut per_cpu: Vec<Vec<u8>> = vec![Vec::new(); cpus as usize];
    let mut drained = Vec::with_capacity(2 << 20);
    let mut writing = std::time::Duration::ZERO;
    let mut first_cpu = 0usize;
    let mut time = 1_000u64;
    let mut records = 0u64;
    for c in &caches {
        let info = CacheInfo {
            cache: c.id,
            object_size: c.size,
            size: c.size,
            align: 8,
            slab_flags: 0,
            name_len: 0,
            origin: 0,
            name: [0; CACHE_NAME_BYTES],
        }
        .with_name(c.name.as_bytes());
        put(&mut per_cpu[0], 0, time, &Record::CacheInfo(info));
        records += 1;
    }
    let stacks: Vec<u64> = (0..256).map(|i| STACKS + i * 0x4000).collect();
    let gs = |cpu: u32| 0xffff_8880_7fc0_0000 + u64::from(cpu) * 0x8_0000;
    let (mut samples_left, mut allocs_left) = (args.samples, args.allocs);
    let mut events = 0u64;
    while samples_left + allocs_left > 0 {
        time += 1 + rng.below(800);
        let cpu = rng.below(u64::from(cpus)) as u32;
        let buf = &mut per_cpu[cpu as usize];
        if rng.below(samples_left + allocs_left) < allocs_left {
            allocs_left -= 1;
            let c = rng.skewed(caches.len());
            let cache = &mut caches[c];
            let large = cache.generic && rng.below(100) == 0;
            let (ptr, size, id) = if large {
                let size = 16_384u32 << rng.below(3);
                (
                    OLD_OBJECTS + (1 << 36) + rng.below(1 << 20) * 0x1_0000,
                    size,
                    0,
                )
            } else {
                let slot = cache.free_slots.pop().unwrap_or_else(|| {
                    cache.next_slot += 1;
                    cache.next_slot - 1
                });
                let ptr = cache.region + slot * u64::from(cache.size);
                cache.live.push(ptr);
                (ptr, cache.size, cache.id)
            };
            let call_site = cache.sites[rng.below(cache.sites.len() as u64) as usize];
            let alloc = Alloc {
                ptr,
                call_site,
                cache: id,
                bytes_req: size,
                bytes_alloc: size,
                gfp: 0xcc0,
                node: -1,
                flags: if cache.generic { ALLOC_KMALLOC } else { 0 },
            };
            put(buf, cpu, time, &Record::Alloc(alloc));
            records += 1;
            if large {
                put(
                    buf,
                    cpu,
                    time + 1,
                    &Record::Free(Free {
                        ptr,
                        call_site,
                        cache: 0,
                        flags: 1,
                    }),
                );
                records += 1;
            } else if cache.live.len() > cache.target {
                let victim = rng.below(cache.live.len() as u64) as usize;
                let ptr = cache.live.swap_remove(victim);
                cache
                    .free_slots
                    .push((ptr - cache.region) / u64::from(cache.size));
                put(
                    buf,
                    cpu,
                    time + 1,
                    &Record::Free(Free {
                        ptr,
                        call_site: call_site + 0x100,
                        cache: cache.id,
                        flags: 0,
                    }),
                );
                records += 1;
            }
        } else {
            samples_left -= 1;
            let spec = &ips[rng.skewed(ips.len())];
            let mut s = AccessSample {
                ip: spec.ip,
                gs_base: gs(cpu),
                pid: 1000 + cpu,
                tid: 1000 + cpu,
                insn: spec.insn,
                insn_len: spec.len,
                sampler: SAMPLER_KIND_SOFTWARE,
                ..AccessSample::default()
            };
            let stack = stacks[rng.below(stacks.len() as u64) as usize];
            s.regs[reg::RSP] = stack + 0x3e00 - rng.below(64) * 8;
            match spec.target {
                Target::Slab(c) => {
                    let cache = &caches[c];
                    // Objects allocated before collection: not in the address set.
                    s.regs[spec.base_reg] = if cache.live.is_empty() || rng.below(10) == 0 {
                        OLD_OBJECTS + rng.below(1 << 24) * 64
                    } else {
                        cache.live[rng.below(cache.live.len() as u64) as usize]
                    };
                }
                Target::Unknown => {
                    s.regs[spec.base_reg] = OLD_OBJECTS + rng.below(1 << 24) * 64 + spec.disp;
                }
                Target::User => {
                    s.flags = SAMPLE_USER;
                    s.ip = 0x40_0000 + (spec.ip & 0xffff);
                    s.gs_base = 0;
                }
                Target::Global | Target::Percpu | Target::Stack | Target::None => {}
            }
            put(buf, cpu, time, &Record::AccessSample(s));
            records += 1;
        }
        events += 1;
        // The collector drains every ring in turn, starting one further each time.
        if events.is_multiple_of(4096) || samples_left + allocs_left == 0 {
            for i in 0..per_cpu.len() {
                let c = (first_cpu + i) % per_cpu.len();
                drained.append(&mut per_cpu[c]);
            }
            first_cpu = (first_cpu + 1) % per_cpu.len();
            if drained.len() >= 1 << 20 || samples_left + allocs_left == 0 {
                let started = Instant::now();
                enc.records(&drained)?;
                writing += started.elapsed();
                drained.clear();
            }
        }
    }
    let bytes_read = enc.record_bytes();
    let stop = StopInfo {
        reason: StopReason::DurationElapsed,
        ended_unix_s: 1_700_000_100,
        ..lossless_stop(records, bytes_read, cpus, time)
    };
    say!(
        "writing the records (checking and coding them, as the collector does): {:.0} ns per \
         record",
        writing.as_secs_f64() * 1e9 / records.max(1) as f64
    );
    let per_record = |kind| {
        enc.bytes_per_record(kind)
            .map_or_else(|| "-".to_owned(), |b| format!("{b:.1}"))
    };
    say!(
        "bytes per record as written (format version {}): sample {}, alloc {}, free {}, \
         cache_info {}",
        dprof_format::FORMAT_VERSION,
        per_record(RecordKind::AccessSample),
        per_record(RecordKind::Alloc),
        per_record(RecordKind::Free),
        per_record(RecordKind::CacheInfo)
    );
    let mut out = enc.finish(&stop)?;
    out.flush()?;
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    Ok((records, bytes))
}
