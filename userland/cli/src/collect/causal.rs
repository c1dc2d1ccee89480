//! `dprof causal`: its arguments and messages around [`dprof_collect::causal`], which runs
//! the profiling phase and the experiments.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use dprof_collect::causal::{
    self, parse_arrival, parse_arrival_speedup, parse_experiment_time, parse_latency, parse_point,
    parse_selection, unit_selection,
};
use dprof_collect::observer::Observer;
use dprof_collect::options::{parse_period, CausalOptions, Period, Selection};
use dprof_collect::scope::{parse_scope, Scope};
use dprof_format::{CausalUnit, DelayAccounting, ProgressPointSpec};
use dprof_model::units::{self, format_ns};

use super::record::{cli_error, exit_code_of, SamplerChoice, Signals, Terminal, UsageError};

/// Run causal experiments on the kernel's data types (or functions, or modules) while a
/// workload runs.
///
/// A profiling phase (--plan-time) finds the most sampled types and the instructions that
/// touch them; then experiments pick a type and a virtual speedup at random (0% half of the
/// time) and delay every other CPU whenever a sample lands on that type's accesses, as if
/// those accesses had become faster. Progress points measure what that does to the
/// workload's throughput (or, with --latency, to the time between two points).
///
/// End-to-end (--end-to-end RUNS, Coz's mode): the first run of the command is the profiling
/// phase; then the command runs RUNS more times, each run one experiment from its start to
/// its exit, and the measure is runs per effective second (a run's time less the delays
/// inserted during it). For commands that do a fixed amount of work and exit, where no
/// progress point fits; no --progress, --latency, --plan-time or --duration.
///
/// Load amplification (--arrival POINT --arrival-speedup NS): POINT is where requests
/// arrive. Each arrival inserts NS of delay for every other task, so that in effective time
/// requests come NS sooner each: the system is measured as if the load were higher (by
/// `gap / (gap - NS)`, the amplification each experiment reports), which shows what would
/// matter at that load, such as a type that only becomes the bottleneck there. The arriving
/// task first serves the delays it owes, so that virtual speedups do not make arrivals come
/// sooner too. For open-loop load (requests come at their own pace, not after responses).
///
/// Units (--units): `types` (the default), `functions` (every instruction of a kernel
/// function: a sample anywhere in it counts) or `modules` (the instructions of a module's
/// functions in scope, most sampled first, up to the 16384 one experiment entry takes).
/// Name them with --types, --functions or --modules (each implies its unit), or let the
/// profiling phase pick the --top most sampled.
///
/// Scope (--scope, functions and modules only), patterns separated by commas; a function is
/// a candidate when one of them matches:
///   GLOB                      functions by name (tcp_*, *_sendmsg); * any run, ? one char
///   [GLOB]                    every function of the modules whose name matches ([ext4],
///                             [nf_*]); [vmlinux] is the core kernel
/// In the experiments a kernel sample outside the scope counts for the first function in
/// it on its call chain, as in Coz: a helper left out (memcpy) is sped up with its caller.
///
/// Progress points:
///   kprobe:FUNCTION           a kernel function's entry (e.g. kprobe:udp_sendmsg)
///   tracepoint:SYSTEM:EVENT   a kernel tracepoint (e.g. tracepoint:net:net_dev_xmit)
///   user:NAME                 a program runs `dprof progress NAME` (or writes NAME to
///                             /dev/dprof through a write-only open) at each unit of work
///   sampled:FUNCTION          the samples whose ip lies in a kernel function (core kernel or
///                             module; Coz's sampled point): no probe, any function, but
///                             visits are sample counts at the sampling period, not calls
///
/// Examples:
///   dprof causal -o c.dprof --progress kprobe:udp_sendmsg -- ./udp-bench
///   dprof causal -o c.dprof --types TCP,skbuff_head_cache --progress user:req --duration 5m
///   dprof causal -o c.dprof --units functions --scope 'tcp_*,[vmlinux]' --progress user:req
///   dprof causal -o c.dprof --functions tcp_sendmsg,tcp_write_xmit --progress user:req
///   dprof causal -o c.dprof --end-to-end 40 -- tar xf linux.tar
///   dprof causal -o c.dprof --progress user:done --arrival user:req --arrival-speedup 200us \
///     -- ./open-loop-bench                         (as if requests came 200 us sooner each)
///   dprof report --view causal c.dprof            (the ranking; --format coz for Coz's viewer)
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[expect(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct CausalArgs {
    /// Write the profile to PATH (as PATH.partial until it is complete).
    #[arg(short, long, value_name = "PATH")]
    output: PathBuf,
    /// Run for this long in all, profiling phase included (e.g. 5m), instead of a command.
    #[arg(short, long, value_name = "TIME", value_parser = units::parse_duration)]
    duration: Option<Duration>,
    /// A progress point (see above); repeat for several. At least one, or --latency.
    #[arg(long = "progress", value_name = "POINT", value_parser = parse_point)]
    progress: Vec<ProgressPointSpec>,
    /// Latency mode: the mean time from the BEGIN point to the END point (Little's law);
    /// counted points only (not sampled:).
    #[arg(long, value_name = "BEGIN,END", value_parser = parse_latency)]
    latency: Option<(ProgressPointSpec, ProgressPointSpec)>,
    /// Where requests arrive (a counted point, as for --progress): its visits are counted,
    /// and an arriving task serves its delays first. With --arrival-speedup, load
    /// amplification (see above).
    #[arg(long, value_name = "POINT", value_parser = parse_arrival)]
    arrival: Option<ProgressPointSpec>,
    /// Load amplification: the delay each arrival inserts for every other task (e.g. 250us;
    /// a bare number is ns), so that requests come that much sooner each in effective time.
    #[arg(long, value_name = "NS", value_parser = parse_arrival_speedup, requires = "arrival")]
    arrival_speedup: Option<u64>,
    /// What experiments speed up: types, functions or modules [default: types, or what
    /// --functions or --modules names].
    #[arg(long, value_name = "UNIT", value_enum)]
    units: Option<Units>,
    /// Types to speed up: `auto` (the --top most sampled data types of the profiling phase,
    /// skipping pseudo-types: the kernel stacks, regions such as `user memory`, `struct page`
    /// and `vmalloc`, per-CPU memory no symbol names, the stack protector's canary), or names
    /// as `dprof report` shows them, comma-separated (pseudo-types included) [default: auto].
    #[arg(long, value_name = "TYPES", value_parser = parse_selection,
          conflicts_with_all = ["functions", "modules"])]
    types: Option<Selection>,
    /// Kernel functions to speed up, as kallsyms names them, comma-separated (implies
    /// --units functions); `auto`: the --top most sampled in --scope.
    #[arg(long, value_name = "FUNCTIONS", value_parser = parse_selection,
          conflicts_with = "modules")]
    functions: Option<Selection>,
    /// Modules to speed up, comma-separated, `vmlinux` for the core kernel (implies --units
    /// modules); `auto`: the --top most sampled in --scope.
    #[arg(long, value_name = "MODULES", value_parser = parse_selection)]
    modules: Option<Selection>,
    /// Functions and modules: which functions are candidates, GLOB or [MODULE-GLOB] patterns
    /// separated by commas (see above) [default: every function].
    #[arg(long, value_name = "PATTERNS", value_parser = parse_scope)]
    scope: Option<Scope>,
    /// With `auto`: how many of the most sampled types (functions, modules).
    #[arg(long, value_name = "N", default_value = "6",
          value_parser = clap::value_parser!(u32).range(1..=dprof_abi::MAX_CAUSAL_TYPES as i64))]
    top: u32,
    /// Length of the profiling phase that chooses the types and their instructions.
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = units::parse_duration)]
    plan_time: Duration,
    /// Length of the first experiment (later ones double while visits are too few).
    #[arg(long, value_name = "TIME", default_value = "200ms", value_parser = parse_experiment_time)]
    experiment: Duration,
    /// An experiment with fewer visits than this of any progress point doubles the length of
    /// the following experiments.
    #[arg(long, value_name = "N", default_value = "5",
          value_parser = clap::value_parser!(u64).range(1..))]
    min_visits: u64,
    /// Pause between experiments, so that one experiment's delays do not spill into the next.
    #[arg(long, value_name = "TIME", default_value = "10ms", value_parser = units::parse_duration)]
    cooloff: Duration,
    /// Seed of the random choice of types and speedups [default: from the clock].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Run every sped-up experiment at this virtual speedup, in percent (1 to 100), instead
    /// of one drawn from 5% to 100% (Coz's --fixed-speedup): all the experiments go to the
    /// one speedup you ask about, and a type's slope is its mean program speedup there,
    /// divided by it (no test of linearity).
    #[arg(long, value_name = "PERCENT",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    fixed_speedup: Option<u32>,
    /// Coz's end-to-end mode: after a profiling run of the command, run it RUNS more times,
    /// one experiment per run, measured by runs per effective second (see above).
    #[arg(long, value_name = "RUNS",
          value_parser = clap::value_parser!(u32).range(2..=100_000),
          conflicts_with_all = ["progress", "latency", "duration", "plan_time", "experiment",
                                "min_visits", "arrival"])]
    end_to_end: Option<u32>,
    /// Whose delays an experiment keeps: `task` (Coz's rules: a task woken by a timer or an
    /// interrupt serves the delays inserted while it slept, one woken by another task is
    /// credited with what that task served) or `cpu` (a CPU found idle is credited with what
    /// it owes: simpler, but it forgives a sleeping task's delays, so work woken by timers
    /// looks faster than it is).
    #[arg(long, value_name = "WHOSE", value_enum, default_value = "task")]
    delay_accounting: Accounting,
    /// Software sampler: time between samples on each CPU; IBS, PEBS: events (as for
    /// `dprof collect`). Each sample of the chosen type adds speedup x period of delay.
    #[arg(long, value_name = "PERIOD", value_parser = parse_period)]
    period: Option<Period>,
    /// Which sampler: auto, software, ibs or pebs (as for `dprof collect`).
    #[arg(long, value_name = "SAMPLER", value_enum, default_value = "auto")]
    sampler: SamplerChoice,
    /// Bytes of each per-CPU ring: a power of two from 64K to 256M.
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = dprof_collect::options::parse_ring_size)]
    ring_size: u32,
    /// The dprof device.
    #[arg(long, value_name = "PATH", default_value = dprof_abi::DEVICE_PATH)]
    device: PathBuf,
    /// The command to run, after `--`; experiments stop when it exits.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// What `--units` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Units {
    /// Data types: the instructions that touched each type in the profiling phase.
    Types,
    /// Kernel functions: every instruction of each.
    Functions,
    /// Modules (`vmlinux`: the core kernel): the instructions of their functions in scope.
    Modules,
}

/// What `--delay-accounting` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Accounting {
    /// Each task's delay count, across CPUs and sleeps.
    Task,
    /// Each CPU's delay count; idle CPUs are credited.
    Cpu,
}

impl From<Accounting> for DelayAccounting {
    fn from(accounting: Accounting) -> Self {
        match accounting {
            Accounting::Task => Self::Task,
            Accounting::Cpu => Self::Cpu,
        }
    }
}

impl From<Units> for CausalUnit {
    fn from(units: Units) -> Self {
        match units {
            Units::Types => Self::Type,
            Units::Functions => Self::Function,
            Units::Modules => Self::Module,
        }
    }
}

impl CausalArgs {
    /// What the experiments are asked to do.
    ///
    /// # Errors
    /// A [`UsageError`] when `--units` contradicts the list given.
    fn options(&self) -> Result<CausalOptions, UsageError> {
        let named = [
            (CausalUnit::Type, &self.types),
            (CausalUnit::Function, &self.functions),
            (CausalUnit::Module, &self.modules),
        ]
        .into_iter()
        .find_map(|(unit, list)| Some((unit, list.clone()?)));
        let (unit, selection) =
            unit_selection(self.units.map(CausalUnit::from), named).map_err(UsageError)?;
        Ok(CausalOptions {
            output: self.output.clone(),
            duration: self.duration,
            progress: self.progress.clone(),
            latency: self.latency.clone(),
            unit,
            selection,
            top: self.top,
            scope: self.scope.clone().unwrap_or_default(),
            plan_time: self.plan_time,
            experiment: self.experiment,
            min_visits: self.min_visits,
            cooloff: self.cooloff,
            seed: self.seed,
            fixed_speedup: self.fixed_speedup,
            end_to_end: self.end_to_end,
            delay_accounting: self.delay_accounting.into(),
            arrival: self.arrival.clone(),
            arrival_speedup_ns: self.arrival_speedup,
            period: self.period.clone(),
            sampler: self.sampler.into(),
            ring_size: self.ring_size,
            device: self.device.clone(),
            command: self.command.clone(),
        })
    }
}

pub fn run(args: &CausalArgs) -> anyhow::Result<ExitCode> {
    let options = args.options()?;
    let checked = causal::check(&options).map_err(cli_error)?;
    let mut terminal = Terminal::new();
    let experiments = checked.open(&mut terminal).map_err(cli_error)?;
    let signals = Signals::register()?;
    let outcome = experiments
        .run(&|| signals.which(), &mut terminal)
        .map_err(cli_error)?;
    let tally = outcome.tally;
    let visits = if options.end_to_end.is_some() {
        "one per run of the command".to_owned()
    } else {
        format!("{} with too few visits", tally.too_few_visits)
    };
    eprintln!(
        "dprof: {} experiments ({} at 0%) on {} {}, {visits}, {} records in {} ({}, {})",
        tally.done,
        tally.baselines,
        outcome.units,
        outcome.unit.plural(),
        outcome.records,
        outcome.path.display(),
        outcome.stop.reason,
        format_ns(outcome.stop.elapsed_ns)
    );
    eprintln!(
        "dprof: {}",
        causal::overhead_summary(outcome.startup_ns, &tally, outcome.stop.elapsed_ns)
    );
    if tally.lost_ends > 0 {
        terminal.warn(&format!(
            "{} experiments' end records did not arrive in time (they are read at the end)",
            tally.lost_ends
        ));
    }
    eprintln!(
        "dprof: see the ranking with `dprof report --view causal {}`",
        outcome.path.display()
    );
    exit_code_of(outcome.workload, &signals, &mut terminal)
}
