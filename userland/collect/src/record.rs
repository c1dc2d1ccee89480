//! The `dprof collect` driver: checks the options, opens and configures the device, and
//! streams its records into a profile file until the command exits, the duration passes or
//! the person interrupts; with histories, plans them from a sampling phase first.
//!
//! A run goes [`check`] (nothing opened yet) → [`Checked::open`] (the device configured, no
//! file yet) → [`Collection::record`] (the file, the command, the records).

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use dprof_abi::{Config, VersionInfo};
use dprof_analysis::symbols::Kallsyms;
use dprof_format::{
    CollectConfig, DeviceCounters, HistoryCollectConfig, HistoryRegisters, KernelText, PageOwners,
    ProfileHeader, ProfileWriter, SampleRegisters, StopInfo, StopReason, Target,
};
use dprof_model::units::{self, format_bytes};

use crate::backend::{Backend, Collector};
use crate::device::{Device, ReadOutcome};
use crate::error::{backend, CollectError};
use crate::histories;
use crate::kernel_btf::KernelBtf;
use crate::observer::{Interrupt, Observer, Progress};
use crate::options::{BackendChoice, CollectOptions, Event, SamplerChoice};
use crate::page_owner::PageOwnerWatch;
use crate::perf::{PerfCollector, PerfError};
use crate::reading::{drain, Batch, IDLE_SLEEP, PROGRESS_EVERY};
use crate::samplers::{self, HardwareSamplers};
use crate::sampling::{plan, Plan, Sampling};
use crate::system;
use crate::tap::Tap;
use crate::workload::{Ending, Workload};

/// The options, checked against each other and against this machine's samplers; nothing
/// is opened yet.
#[derive(Debug)]
pub struct Checked<'o> {
    options: &'o CollectOptions,
    target: Target,
    hw: HardwareSamplers,
}

/// Checks `options`: what ends the collection, the sampler and history options against
/// the events, and what this machine lacks for the sampler asked for. Needs no root and no
/// module.
///
/// # Errors
/// [`CollectError::Usage`] for options that contradict each other, [`CollectError::Sampler`]
/// for a sampler this machine cannot give.
pub fn check(options: &CollectOptions) -> Result<Checked<'_>, CollectError> {
    let target = target_of(options)?;
    check_event_args(options)?;
    // What this machine lacks is said before the device is opened: it does not depend on the
    // module, and needs no root.
    let hw = samplers::detect(Path::new("/"));
    plan(options, None, &hw)?;
    Ok(Checked {
        options,
        target,
        hw,
    })
}

/// A configured device and the profile header, before the file exists.
pub struct Collection<'o, B = Collector> {
    options: &'o CollectOptions,
    dev: B,
    version: VersionInfo,
    config: Config,
    kallsyms: Vec<u8>,
    symbols: Kallsyms,
    modules: Vec<u8>,
    btf: KernelBtf,
    header: ProfileHeader,
}

impl<'o> Checked<'o> {
    /// Opens the device, checks the module's version and configures it, and describes this
    /// system for the profile header. If the device is missing or busy, nothing else
    /// happens and no file appears.
    ///
    /// # Errors
    /// When the device cannot be opened or configured, or this system cannot be described.
    pub fn open(self, observer: &mut dyn Observer) -> Result<Collection<'o>, CollectError> {
        let Self {
            options,
            target,
            hw,
        } = self;
        let root = Path::new("/");
        let kallsyms = system::kallsyms(root)?;
        let symbols = Kallsyms::parse(&kallsyms);
        let dev = open_backend(options, root, &kallsyms, observer)?;
        let (mut dev, version, plan, config) =
            open_and_configure(dev, options, &hw, &symbols, observer)?;
        let btf = KernelBtf::read(root);
        let layout = memory_layout(root, &kallsyms, &btf, &options.kcore, observer);
        let percpu = percpu_section(&kallsyms, &btf, &options.kcore, observer);
        let backend_name = match &mut dev {
            Collector::Module(_) => "module",
            Collector::Perf(perf) => {
                perf.set_memory_layout(layout, &btf);
                perf.set_percpu_section(percpu, &btf);
                for note in perf.take_notes() {
                    observer.say(&format!("note: {note}"));
                }
                "perf"
            }
        };
        let collect_config = CollectConfig {
            backend: Some(backend_name.to_owned()),
            events: plan.events.iter().map(|e| e.name().to_owned()).collect(),
            ring_bytes: options.ring_size,
            target,
            sampling: plan.sampling.as_ref().map(Sampling::header_config),
            histories: history_header(options),
            causal: None,
            sample_registers: dprof_format::SampleRegisters::Address,
            history_registers: if options.histories.is_some() {
                HistoryRegisters::Address
            } else {
                HistoryRegisters::All
            },
            collector_pid: Some(std::process::id()),
        };
        let mut header = system::gather_header(root, collect_config, version.into(), now_unix_s())
            .map_err(CollectError::Header)?;
        if let Some(warning) = merging_warning(&header) {
            observer.warn(&warning);
        }
        header.memory_layout = layout;
        header.percpu_section = percpu;
        header.kernel_image = system::kernel_image(root, &kallsyms);
        let modules = system::modules(root)?;
        Ok(Collection {
            options,
            dev,
            version,
            config,
            kallsyms,
            symbols,
            modules,
            btf,
            header,
        })
    }
}

/// A finished profile.
#[derive(Debug)]
pub struct Recorded {
    /// Where it is.
    pub path: PathBuf,
    /// Records written.
    pub records: u64,
    /// Bytes of records written.
    pub bytes: u64,
    /// What ended the collection, and the module's final counters.
    pub stop: StopInfo,
    /// The command, if one ran.
    pub workload: Option<Workload>,
    /// CPU time the collector (this process, not the command) spent from creating the file
    /// to finishing it, in ns; `None` where the clock cannot be read.
    pub cpu_ns: Option<u64>,
}

impl<B: Backend> Collection<'_, B> {
    /// Creates the file (as its `.partial`), starts the module and the command, and
    /// collects until the command exits, the duration passes or `interrupt` says so; then
    /// finishes the file. On an error the partial file is removed and the command stopped.
    ///
    /// # Errors
    /// [`CollectError::CollectionFailed`] when collection failed once the file existed,
    /// [`CollectError::Finish`] when the file could not be finished, or why the file could
    /// not be created.
    pub fn record(
        self,
        interrupt: Interrupt<'_>,
        observer: &mut dyn Observer,
    ) -> Result<Recorded, CollectError> {
        let Self {
            options,
            mut dev,
            version,
            config,
            kallsyms,
            symbols,
            modules,
            btf,
            header,
        } = self;
        let cpu_at_start = crate::system::process_cpu_ns();
        let mut writer = create_profile(
            &options.output,
            &header,
            &Snapshot {
                kallsyms: &kallsyms,
                symbols: &symbols,
                modules: &modules,
                btf: btf.bytes(),
                kcore: &options.kcore,
            },
        )?;
        let mut workload = None;
        let analysis = dprof_analysis::pipeline::Options::default();
        let mut tap = Tap::new(options, &header, &symbols, &analysis, config);
        tap.page_owners = page_owner_watch(&header, &btf, &options.kcore, observer);
        let result = collect_loop(
            &mut dev,
            &mut writer,
            Loop {
                options,
                version: &version,
                interrupt,
                symbols: &symbols,
            },
            &mut tap,
            &mut workload,
            observer,
        );
        observer.finished();
        let stop = match result {
            Ok(stop) => stop,
            Err(e) => {
                let _ = dev.stop();
                let partial = writer.partial().to_path_buf();
                let removed = writer.abandon().is_ok();
                if let Some(w) = workload.as_mut() {
                    observer.say("stopping the command (SIGTERM) because collection failed");
                    w.stop_after_failure();
                }
                let note = if removed {
                    format!("{} was removed", partial.display())
                } else {
                    format!("{} is incomplete", partial.display())
                };
                return Err(CollectError::CollectionFailed {
                    note,
                    source: Box::new(e),
                });
            }
        };
        // The last blocks first, so that the bytes count every record.
        writer
            .write_open_blocks()
            .map_err(|source| CollectError::Finish {
                partial: dprof_format::partial_path(&options.output),
                source,
            })?;
        let records = writer.record_count();
        let bytes = writer.record_bytes();
        for note in dev.take_notes() {
            observer.say(&format!("note: {note}"));
        }
        if let Some(watch) = &tap.page_owners {
            writer.set_page_owners(page_owners_found(watch, observer));
        }
        let text = capture_text(&tap, &symbols, &options.kcore, observer);
        let path =
            writer
                .finish_with_text(&stop, &text)
                .map_err(|source| CollectError::Finish {
                    partial: dprof_format::partial_path(&options.output),
                    source,
                })?;
        Ok(Recorded {
            path,
            records,
            bytes,
            stop,
            workload,
            cpu_ns: crate::system::process_cpu_ns()
                .zip(cpu_at_start)
                .map(|(end, start)| end.saturating_sub(start)),
        })
    }
}

/// What a person should know when the kernel merges slab caches.
pub(crate) fn merging_warning(header: &ProfileHeader) -> Option<String> {
    header.slab_merging.then(|| {
        format!(
            "slab merging is on (no slab_nomerge on the kernel command line): {} slab pools \
             are shared by several caches; the report splits their types by allocation site \
             (CACHE@function); boot with slab_nomerge for one type per cache",
            header.merged_caches.len()
        )
    })
}

/// The snapshot of the system a profile starts with: kallsyms (as read and parsed), the
/// modules, the kernel's BTF when it has one, and where its live code is read.
pub(crate) struct Snapshot<'a> {
    pub kallsyms: &'a [u8],
    pub symbols: &'a Kallsyms,
    pub modules: &'a [u8],
    pub btf: Option<&'a [u8]>,
    pub kcore: &'a Path,
}

/// Creates the profile (as its `.partial`) with the system snapshot: the header, kallsyms,
/// modules and, when the kernel has it, its BTF; with the register filters the header asks
/// for. Nothing is left behind on failure.
pub(crate) fn create_profile(
    output: &Path,
    header: &ProfileHeader,
    snapshot: &Snapshot<'_>,
) -> Result<ProfileWriter, CollectError> {
    let mut writer = ProfileWriter::create(output, header, snapshot.kallsyms, snapshot.modules)?;
    if header.config.sample_registers == SampleRegisters::Address {
        writer.set_register_filter(Box::new(|ip, insn| {
            dprof_analysis::decode::address_registers(insn, ip)
        }));
    }
    if header.config.history_registers == HistoryRegisters::Address {
        writer.set_hit_register_filter(crate::hit_registers::live_filter(
            snapshot.symbols.clone(),
            snapshot.kcore,
        ));
    }
    let btf = snapshot.btf;
    if let Some(btf) = btf {
        if let Err(e) = writer.write_btf(btf) {
            let _ = writer.abandon();
            return Err(e.into());
        }
    }
    Ok(writer)
}

/// A watch on the owners of the direct-map pages samples touch, when samples are collected
/// and the kernel's pages can be read; else `None`, after saying why.
fn page_owner_watch(
    header: &ProfileHeader,
    btf: &KernelBtf,
    kcore: &Path,
    observer: &mut dyn Observer,
) -> Option<PageOwnerWatch> {
    header.config.sampling.as_ref()?;
    PageOwnerWatch::new(header.memory_layout, btf, kcore)
        .map_err(|why| {
            observer.say(&format!(
                "note: objects allocated before collection and page memory will not be typed: \
                 {why}"
            ));
        })
        .ok()
}

/// What `watch` found, after saying how much.
fn page_owners_found(watch: &PageOwnerWatch, observer: &mut dyn Observer) -> PageOwners {
    let (pages, unreadable) = watch.counts();
    let unreadable = if unreadable > 0 {
        format!(" ({unreadable} unreadable)")
    } else {
        String::new()
    };
    observer.say(&format!(
        "read the owners of {pages} direct-map pages that samples touched{unreadable} (collector \
         time: {})",
        units::format_ns(u64::try_from(watch.time_spent().as_nanos()).unwrap_or(u64::MAX))
    ));
    watch.owners()
}

/// The kernel's memory layout for the header, or `None` after saying why it cannot be read.
pub(crate) fn memory_layout(
    root: &Path,
    kallsyms: &[u8],
    btf: &KernelBtf,
    kcore: &Path,
    observer: &mut dyn Observer,
) -> Option<dprof_format::MemoryLayout> {
    crate::memory_layout::read(
        root,
        kallsyms,
        btf,
        kcore,
        crate::perf::watch_layout_sightings,
    )
    .inspect(|_| {
        if system::kallsyms_address(kallsyms, "page_offset_base").is_none() {
            observer.say(
                "note: the kernel's memory layout comes from its own tracepoints (kallsyms does \
                 not list page_offset_base)",
            );
        }
    })
    .map_err(|why| {
        observer.say(&format!(
            "note: struct page, vmalloc and direct-map pages will not be typed: {why}"
        ));
    })
    .ok()
}

/// Where the kernel linked its per-CPU section, for the header when kallsyms does not list it
/// (see [`crate::percpu_section`]); `None` after saying why when it cannot be placed.
pub(crate) fn percpu_section(
    kallsyms: &[u8],
    btf: &KernelBtf,
    kcore: &Path,
    observer: &mut dyn Observer,
) -> Option<dprof_format::PercpuSection> {
    let started = std::time::Instant::now();
    match crate::percpu_section::find(kallsyms, btf, kcore) {
        Ok(found) => {
            if let crate::percpu_section::Found::Located {
                located: l,
                code_bytes,
            } = &found
            {
                observer.say(&format!(
                    "note: kallsyms does not list the per-CPU section; found it at {:#x} from \
                     the kernel's code ({} of the {} distinct %gs: operands in its first {} \
                     start a per-CPU variable there; {})",
                    l.section.start,
                    l.votes,
                    l.operands,
                    format_bytes(*code_bytes),
                    units::format_ns(
                        u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
                    )
                ));
            }
            crate::percpu_section::header_value(&found)
        }
        Err(why) => {
            observer.say(&format!(
                "note: per-CPU variables will not be named (their accesses count as {}): {why}",
                dprof_analysis::resolve::PERCPU_DYNAMIC_TYPE
            ));
            None
        }
    }
}

pub(crate) fn now_unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn usage(message: &str) -> CollectError {
    CollectError::Usage(message.to_owned())
}

/// What ends the collection (a usage error unless exactly one of a command and a duration
/// is given).
pub(crate) fn target_of(options: &CollectOptions) -> Result<Target, CollectError> {
    match (options.duration, options.command.is_empty()) {
        (Some(_), false) => Err(usage(
            "give either a command after `--` or --duration, not both: collection stops when \
             the command exits",
        )),
        (None, true) => Err(usage(
            "nothing would end the collection: give --duration (e.g. --duration 10s) or a \
             command after `--`",
        )),
        (Some(d), true) => Ok(Target::Duration {
            ns: u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        }),
        (None, false) => Ok(Target::Command {
            argv: options
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        }),
    }
}

/// The code history traps landed in, from kcore (empty without histories).
fn capture_text(
    tap: &Tap,
    symbols: &Kallsyms,
    kcore: &Path,
    observer: &mut dyn Observer,
) -> KernelText {
    match &tap.traps {
        Some(traps) if !traps.is_empty() => {
            let (text, note) = histories::capture_text(traps, symbols, kcore);
            if let Some(note) = note {
                observer.warn(&note);
            }
            text
        }
        _ => KernelText::new(),
    }
}

/// What the profile header says about --histories.
fn history_header(options: &CollectOptions) -> Option<HistoryCollectConfig> {
    options.histories.as_ref().map(|spec| HistoryCollectConfig {
        spec: spec.to_string(),
        max_per_sec: options.history_rate,
        timeout_ms: options.history_timeout_ms,
        max_hits: options.history_max_hits,
        plan_ns: spec
            .needs_planning()
            .then(|| u64::try_from(options.plan_time.as_nanos()).unwrap_or(u64::MAX)),
        // Checked before the file was created: an error here cannot happen.
        full: histories::full_coverage(spec, &slab_object_size).unwrap_or_default(),
    })
}

/// Usage errors of the sampler and history options against --events.
fn check_event_args(options: &CollectOptions) -> Result<(), CollectError> {
    let sampling_asked =
        options.period.is_some() || options.sample_user || options.sampler != SamplerChoice::Auto;
    if sampling_asked
        && options
            .events
            .as_ref()
            .is_some_and(|e| !e.contains(&Event::Samples))
    {
        return Err(usage(
            "--period, --sample-user and --sampler need the samples event (--events \
             slab,samples)",
        ));
    }
    check_history_args(options)
}

/// Usage errors of --histories against --events.
fn check_history_args(options: &CollectOptions) -> Result<(), CollectError> {
    if let Some(spec) = &options.histories {
        let given = options.events.as_ref();
        if given.is_some_and(|e| !e.contains(&Event::Slab)) {
            return Err(usage(
                "--histories needs the slab events, which start and end histories",
            ));
        }
        if spec.needs_planning() && given.is_some_and(|e| !e.contains(&Event::Samples)) {
            return Err(usage(
                "--histories auto (or a type without ranges) chooses from access samples: \
                 collect the samples event too, or give each type its ranges",
            ));
        }
    }
    Ok(())
}

/// The collector `--backend` asks for: with `auto`, the module when its device exists and
/// perf events otherwise, said on one line.
fn open_backend(
    options: &CollectOptions,
    root: &Path,
    kallsyms: &[u8],
    observer: &mut dyn Observer,
) -> Result<Collector, CollectError> {
    let perf = || {
        if options.histories.is_some() {
            return Err(backend(PerfError::NeedsModule {
                what: "object access histories (--histories)",
            }));
        }
        PerfCollector::new(root, kallsyms.to_vec(), &options.kcore)
            .map(|mut perf| {
                perf.set_page_events(options.page_events);
                Collector::Perf(Box::new(perf))
            })
            .map_err(backend)
    };
    let module = options.backend == BackendChoice::Module
        || (options.backend == BackendChoice::Auto && options.device.exists());
    if module {
        let device = Device::open_path(&options.device)?;
        observer.say(&format!("backend: dprof.ko ({})", options.device.display()));
        return Ok(Collector::Module(device));
    }
    if options.backend == BackendChoice::Auto {
        observer.say(&format!(
            "backend: perf events ({} does not exist: dprof.ko is not loaded)",
            options.device.display()
        ));
    } else {
        observer.say("backend: perf events (--backend perf)");
    }
    perf()
}

/// Checks the collector's version and configures it. Runs before anything else: if the
/// collector is missing, busy or refuses, nothing else happens and no file appears.
pub(crate) fn open_and_configure<B: Backend>(
    mut dev: B,
    options: &CollectOptions,
    hw: &HardwareSamplers,
    symbols: &Kallsyms,
    observer: &mut dyn Observer,
) -> Result<(B, VersionInfo, Plan, Config), CollectError> {
    let version = dev.checked_version().map_err(backend)?;
    if !(version.min_ring_bytes..=version.max_ring_bytes).contains(&options.ring_size) {
        return Err(CollectError::RingSize {
            given: format_bytes(u64::from(options.ring_size)),
            min: format_bytes(u64::from(version.min_ring_bytes)),
            max: format_bytes(u64::from(version.max_ring_bytes)),
        });
    }
    let plan = plan(options, Some(version.samplers), hw)?;
    if let Some(note) = &plan.note {
        observer.say(&format!("note: {note}"));
    }
    if let Some(pick) = &plan.pick {
        observer.say(&format!("sampler: {pick}"));
    }
    let events = &plan.events;
    if events.contains(&Event::Slab) && version.features & dprof_abi::FEATURE_SLAB_EVENTS == 0 {
        observer
            .warn("the module did not find all kmem tracepoints: expect few or no slab records");
    }
    let mut config = Config {
        struct_size: Config::SIZE as u32,
        events: events.iter().fold(0, |bits, e| bits | e.bit()),
        ring_bytes: options.ring_size,
        ..Config::default()
    };
    if let Some(s) = &plan.sampling {
        config.sampler = u32::from(s.kind);
        config.sample_period_ns = s.period;
        config.sample_user = u32::from(s.user);
        config.pmu_type = s.pmu_type;
        config.pmu_config = s.pmu_config;
        config.pmu_config1 = s.pmu_config1;
    }
    if let Some(spec) = &options.histories {
        if version.features & dprof_abi::FEATURE_HISTORIES == 0 {
            return Err(CollectError::NoHistories);
        }
        // A type to watch whole that cannot be fails before the file exists.
        histories::full_coverage(spec, &slab_object_size)?;
        // Types with their ranges are planned now, so that a wrong one fails before the
        // file exists; the others after the sampling phase.
        if let histories::HistorySpec::Types(types) = spec {
            if !spec.needs_planning() {
                let history_plan = histories::module_plan(
                    types,
                    symbols,
                    plan_limits(options),
                    &slab_object_size,
                )?;
                let mut with_histories = config;
                with_histories.events |= dprof_abi::EVENT_HISTORIES;
                dev.configure(&with_histories).map_err(backend)?;
                dev.history_plan(&history_plan).map_err(backend)?;
                send_page_sites(&mut dev, &version, options, &with_histories, symbols)?;
                return Ok((dev, version, plan, with_histories));
            }
        }
    }
    dev.configure(&config).map_err(backend)?;
    send_page_sites(&mut dev, &version, options, &config, symbols)?;
    Ok((dev, version, plan, config))
}

/// With slab events, on a module that records the page allocator's allocations, says where
/// its code lies (after each configuration: a new one starts a new session).
fn send_page_sites<B: Backend>(
    dev: &mut B,
    version: &VersionInfo,
    options: &CollectOptions,
    config: &Config,
    symbols: &Kallsyms,
) -> Result<(), CollectError> {
    if !options.page_events
        || config.events & dprof_abi::EVENT_SLAB == 0
        || version.features & dprof_abi::FEATURE_PAGE_SITES == 0
    {
        return Ok(());
    }
    let crate::page_sites::ModuleRanges {
        allocator,
        elsewhere,
    } = crate::page_sites::module_ranges(symbols);
    // Without the kernel's symbols (kallsyms hidden) no site could be found.
    if allocator.is_empty() {
        return Ok(());
    }
    dev.page_sites(&allocator, &elsewhere).map_err(backend)
}

/// The object size of the slab cache `name` on this machine.
fn slab_object_size(name: &str) -> Option<u32> {
    system::slab_object_size(Path::new("/"), name)
}

fn plan_limits(options: &CollectOptions) -> histories::PlanLimits {
    histories::PlanLimits {
        max_per_sec: options.history_rate,
        timeout_ms: options.history_timeout_ms,
        max_hits: options.history_max_hits,
    }
}

/// What the collection loop needs besides the device, the file, the tap and the observer.
#[derive(Clone, Copy)]
struct Loop<'a> {
    options: &'a CollectOptions,
    version: &'a VersionInfo,
    interrupt: Interrupt<'a>,
    symbols: &'a Kallsyms,
}

/// Ends the planning phase: stops, drains, chooses what to watch from the samples so far,
/// and starts again with histories.
fn start_histories<B: Backend>(
    dev: &mut B,
    writer: &mut ProfileWriter,
    batch: &mut Batch,
    tap: &mut Tap,
    run: &Loop,
    observer: &mut dyn Observer,
) -> Result<(), CollectError> {
    dev.stop().map_err(backend)?;
    drain(dev, writer, batch, tap, observer)?;
    let Some(mut planner) = tap.planner.take() else {
        return Ok(());
    };
    let Some(analyzer) = planner.analyzer.take() else {
        return Ok(());
    };
    let report = analyzer.finish();
    let types = histories::choose_types(&planner.spec, &report, run.symbols)?;
    let history_plan = histories::module_plan(
        &types,
        run.symbols,
        plan_limits(run.options),
        &slab_object_size,
    )?;
    let described: Vec<String> = types.iter().map(histories::TypeSpec::to_string).collect();
    observer.say(&format!(
        "histories: after {} of sampling, watching {}",
        units::format_ns(u64::try_from(run.options.plan_time.as_nanos()).unwrap_or(u64::MAX)),
        described.join(", ")
    ));
    planner.config.events |= dprof_abi::EVENT_HISTORIES;
    dev.configure(&planner.config).map_err(backend)?;
    dev.history_plan(&history_plan).map_err(backend)?;
    send_page_sites(dev, run.version, run.options, &planner.config, run.symbols)?;
    dev.start().map_err(backend)?;
    Ok(())
}

fn collect_loop<B: Backend>(
    dev: &mut B,
    writer: &mut ProfileWriter,
    run: Loop,
    tap: &mut Tap,
    workload: &mut Option<Workload>,
    observer: &mut dyn Observer,
) -> Result<StopInfo, CollectError> {
    let Loop {
        options, version, ..
    } = run;
    let mut batch = Batch::new();
    dev.start().map_err(backend)?;
    let ending = Ending {
        interrupt: run.interrupt,
        duration: options.duration,
        start: Instant::now(),
    };
    // Started after the module so that its startup is in the profile.
    *workload = Workload::spawn(&options.command)?;
    let mut last_progress: Option<Instant> = None;
    let mut lost = 0;
    let reason: StopReason = loop {
        if let Some(reason) = ending.check(workload)? {
            break reason;
        }
        if tap.planner.is_some() && ending.start.elapsed() >= options.plan_time {
            start_histories(dev, writer, &mut batch, tap, &run, observer)?;
        }
        match batch.read(dev, writer, tap)? {
            ReadOutcome::Data(_) => {}
            // A 0-byte read while running should not happen; waiting is the safe answer.
            ReadOutcome::Empty | ReadOutcome::Drained => std::thread::sleep(IDLE_SLEEP),
        }
        if last_progress.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
            last_progress = Some(Instant::now());
            if let Ok((status, _)) = dev.status(0) {
                lost = status.records_lost;
            }
            observer.progress(&Progress::Collecting {
                records: writer.record_count(),
                bytes: writer.record_bytes(),
                lost,
                elapsed: ending.start.elapsed(),
            });
        }
    };
    let elapsed = ending.start.elapsed();
    dev.stop().map_err(backend)?;
    drain(dev, writer, &mut batch, tap, observer)?;
    if tap.planner.is_some() {
        observer.warn(
            "collection ended within --plan-time: no histories were collected (make it \
             longer than --plan-time, or give each --histories type its ranges)",
        );
    }
    let device = match dev.status(version.nr_cpu_ids as usize) {
        Ok((status, cpus)) => Some(DeviceCounters::from_status(&status, &cpus)),
        Err(e) => {
            observer.warn(&format!("cannot read the module's final counters: {e}"));
            None
        }
    };
    Ok(StopInfo {
        reason,
        ended_unix_s: now_unix_s(),
        elapsed_ns: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
        device,
    })
}
