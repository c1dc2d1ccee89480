//! `dprof report perf.data`: a perf.data that `perf record` wrote (cpu-clock samples with the
//! interrupted registers, and the kmem tracepoints) turned into a profile, as if the perf
//! backend had collected it: the same [`Translator`] makes the records. A perf.data has the
//! records, the tracepoints' formats and a few facts about the machine; it has neither the
//! kernel's symbols nor its code, so those are read from the running kernel, which must be the
//! one that recorded: its release, build id and text address are checked against the file's.

use std::collections::HashMap;
use std::path::Path;

use dprof_abi::{
    ABI_VERSION, FEATURE_SLAB_EVENTS, MAX_RECORD_SIZE, MAX_RING_BYTES, MIN_RING_BYTES,
    SAMPLER_SOFTWARE,
};
use dprof_format::{
    CacheGeometry, CollectConfig, CpuCounters, CpuId, DeviceCounters, MergedCache, ModuleInfo,
    ProfileEncoder, ProfileHeader, SamplingConfig, StopInfo, StopReason, Target,
};
use linux_perf_data::{DsoKey, Feature, PerfFile, PerfFileReader, PerfFileRecord};
use linux_perf_event_reader::{
    AttrFlags, EventRecord, PerfEventAttr, PerfEventType, RawEventRecord, ReadFormat,
    RecordParseInfo, RecordType, SampleFormat, SamplingPolicy, SoftwareCounterType,
};

use super::collector::{per_cpu_offset, slab_geometry};
use super::data_file;
use super::error::ImportError;
use super::events::ABI_REG_ORDER;
use super::memory::{KernelMemory, NoKernelMemory};
use super::tracefs::Format;
use super::tracing_data;
use super::translate::{CacheTable, Geometry, Kmem, KmemFields, Source, Translator};
use crate::system;

/// What the header says collected the records.
const BACKEND: &str = "perf.data";
/// The most CPUs Linux supports on x86-64 (`CONFIG_NR_CPUS`): more in a file is damage, and
/// per-CPU tables are sized by it.
const MAX_CPUS: u32 = 8192;

/// A perf.data turned into a profile.
#[derive(Debug)]
pub struct Imported {
    /// The profile's bytes, for `dprof_format::Profile::from_vec`.
    pub profile: Vec<u8>,
    /// Access samples in it.
    pub samples: u64,
    /// Allocations and frees in it.
    pub slab_events: u64,
    /// Records perf said it lost.
    pub lost: u64,
    /// What the person should know about the conversion, one sentence each.
    pub notes: Vec<String>,
}

/// What the running machine says that a perf.data does not: the kernel's symbols, its
/// identity, the slab caches' geometry, and the facts the header takes from the machine.
#[derive(Clone, Debug, Default)]
pub(crate) struct Machine {
    pub(crate) release: String,
    pub(crate) build_id: Option<String>,
    pub(crate) proc_version: Option<String>,
    pub(crate) boot_cmdline: String,
    pub(crate) kallsyms: Vec<u8>,
    pub(crate) modules: Vec<u8>,
    pub(crate) btf: Option<Vec<u8>>,
    pub(crate) cpu_model: String,
    pub(crate) cpu_id: Option<CpuId>,
    pub(crate) online_cpus: u32,
    pub(crate) caches: Vec<CacheGeometry>,
    pub(crate) merged_caches: Vec<MergedCache>,
    pub(crate) slabs: HashMap<String, Geometry>,
    /// When it booted, seconds since the Unix epoch (`btime` of `/proc/stat`).
    pub(crate) boot_unix_s: Option<u64>,
}

impl Machine {
    /// The machine whose procfs and sysfs are under `root`. Only the release and kallsyms
    /// are required; the rest falls back to what a perf.data says, or to nothing.
    fn gather(root: &Path) -> Result<Self, ImportError> {
        let boot_unix_s = std::fs::read_to_string(root.join("proc/stat"))
            .ok()
            .and_then(|stat| {
                stat.lines()
                    .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
            });
        Ok(Self {
            release: system::kernel_release(root).map_err(ImportError::System)?,
            build_id: system::kernel_build_id(root),
            proc_version: system::proc_version(root).ok(),
            boot_cmdline: system::boot_cmdline(root).unwrap_or_default(),
            kallsyms: system::kallsyms(root).map_err(ImportError::System)?,
            modules: system::modules(root).unwrap_or_default(),
            btf: system::kernel_btf(root),
            cpu_model: system::cpu_model(root).unwrap_or_else(|_| "unknown".to_owned()),
            cpu_id: system::cpu_id(root).ok().flatten(),
            online_cpus: system::online_cpus(root).unwrap_or(1),
            caches: system::cache_geometry(root),
            merged_caches: system::merged_caches(root),
            slabs: slab_geometry(root),
            boot_unix_s,
        })
    }
}

/// Turns the perf.data in `bytes` into a profile, reading what it lacks from the running
/// machine (procfs and sysfs under `root`; kernel code from `kcore`, else through BPF).
///
/// # Errors
/// An [`ImportError`] saying why, in one sentence: a cut or damaged file, a perf.data from
/// another kernel, one without the events dprof needs (saying how to record them), or a
/// machine whose kernel cannot be read.
pub fn import_perf_data(bytes: &[u8], root: &Path, kcore: &Path) -> Result<Imported, ImportError> {
    // The file is checked before the machine is read: a bad file needs no root.
    data_file::check(bytes)?;
    let machine = Machine::gather(root)?;
    convert(bytes, &machine, || KernelMemory::open(kcore).map(Some))
}

fn corrupt(e: impl std::fmt::Display) -> ImportError {
    ImportError::Corrupt {
        what: e.to_string(),
    }
}

/// The recorded events dprof reads, by attribute index.
#[derive(Debug)]
pub(crate) struct Events {
    /// What each attribute is (`None`: not read).
    pub(crate) sources: Vec<Option<Source>>,
    /// Each event id's attribute.
    pub(crate) ids: HashMap<u64, usize>,
    /// The sampler's period in ns (0: unknown).
    pub(crate) period_ns: u32,
    /// Whether the sampler sampled user mode too.
    pub(crate) user: bool,
    /// Sentences for the person.
    pub(crate) notes: Vec<String>,
}

impl Events {
    /// The sampler and the kmem tracepoints of `file`, their fields found in its tracing
    /// data; refused when one is missing or recorded in a way dprof cannot use.
    pub(crate) fn of(file: &PerfFile) -> Result<Self, ImportError> {
        let attrs = file.event_attributes();
        let mut events = Self {
            sources: vec![None; attrs.len()],
            ids: HashMap::new(),
            period_ns: 0,
            user: false,
            notes: Vec::new(),
        };
        let formats = match file.feature_section_data(Feature::TRACING_DATA) {
            Some(section) => {
                tracing_data::event_formats(section).map_err(|message| ImportError::Corrupt {
                    what: format!("its tracing data section does not parse: {message}"),
                })?
            }
            None => Vec::new(),
        };
        let mut kmem_seen = Vec::new();
        let mut sampler = false;
        for (index, desc) in attrs.iter().enumerate() {
            let attr = desc.attributes();
            for &id in desc.ids() {
                events.ids.insert(id, index);
            }
            match attr.type_ {
                PerfEventType::Software(SoftwareCounterType::CpuClock) => {
                    (events.period_ns, events.user) = sampler_of(attr)?;
                    events.sources[index] = Some(Source::Sampler);
                    sampler = true;
                }
                PerfEventType::Tracepoint(id) => {
                    let Some(fields) = kmem_of(attr, &formats, id)? else {
                        continue;
                    };
                    if fields.kind == Kmem::CacheAlloc && !fields.names_cache() {
                        events.notes.push(
                            "the recording kernel's kmem_cache_alloc tracepoint does not name \
                             the cache (older kernels' does not): allocations are typed by slot \
                             size (slab-N)"
                                .to_owned(),
                        );
                    }
                    kmem_seen.push(fields.kind);
                    events.sources[index] = Some(Source::Kmem(Box::new(fields)));
                }
                _ => {}
            }
        }
        let missing: Vec<String> = Kmem::ALL
            .iter()
            .filter(|(kind, _)| !kmem_seen.contains(kind))
            .map(|(_, name)| format!("kmem:{name}"))
            .collect();
        if !missing.is_empty() {
            // A tracepoint recorded without its format is as good as missing: say which.
            let recorded = attrs
                .iter()
                .filter(|d| matches!(d.attributes().type_, PerfEventType::Tracepoint(_)))
                .filter_map(|d| d.name())
                .any(|name| missing.iter().any(|m| m == name));
            if recorded {
                return Err(ImportError::NoTracepointFormat {
                    missing: missing.join(", "),
                });
            }
            return Err(ImportError::NoKmem {
                missing: missing.join(", "),
            });
        }
        if !sampler {
            return Err(ImportError::NoSampler);
        }
        let without_cpu = attrs
            .iter()
            .zip(&events.sources)
            .any(|(d, s)| s.is_some() && !d.attributes().sample_format.contains(SampleFormat::CPU));
        if without_cpu {
            events.notes.push(
                "perf recorded no CPU numbers (perf record without -a): every record is counted \
                 on CPU 0, so objects moving between CPUs are not seen"
                    .to_owned(),
            );
        }
        Ok(events)
    }
}

/// The cpu-clock sampler's period in ns (0: unknown) and whether it sampled user mode;
/// refused without the interrupted registers.
fn sampler_of(attr: &PerfEventAttr) -> Result<(u32, bool), ImportError> {
    let needed = ABI_REG_ORDER.iter().fold(0u64, |m, &r| m | (1 << r));
    if !attr.sample_format.contains(SampleFormat::REGS_INTR)
        || attr.sample_regs_intr & needed != needed
    {
        return Err(ImportError::NoIntrRegs);
    }
    let period_ns = match attr.sampling_policy {
        SamplingPolicy::Period(p) => u32::try_from(p.get()).unwrap_or(u32::MAX),
        // perf's default, -F: a period the kernel adjusts, near this one.
        SamplingPolicy::Frequency(hz) if hz > 0 => {
            u32::try_from(1_000_000_000 / hz).unwrap_or(u32::MAX)
        }
        _ => 0,
    };
    Ok((period_ns, !attr.flags.contains(AttrFlags::EXCLUDE_USER)))
}

/// The fields of tracepoint `id` when it is a kmem one the tracing data describes; refused
/// when it was sampled or its records lack the raw data.
fn kmem_of(
    attr: &PerfEventAttr,
    formats: &[tracing_data::EventFormat],
    id: u64,
) -> Result<Option<KmemFields>, ImportError> {
    let Some((kind, name, format)) = kmem_format(formats, id) else {
        return Ok(None);
    };
    let fields = KmemFields::new(kind, &format)
        .map_err(|message| ImportError::TracepointFormat { name, message })?;
    match attr.sampling_policy {
        SamplingPolicy::Period(p) if p.get() == 1 => {}
        SamplingPolicy::Period(p) => {
            return Err(ImportError::SampledTracepoint {
                name,
                period: p.get(),
            })
        }
        _ => return Err(ImportError::SampledTracepoint { name, period: 0 }),
    }
    if !attr.sample_format.contains(SampleFormat::RAW) {
        return Err(ImportError::TracepointFormat {
            name,
            message: "its samples lack the raw record".to_owned(),
        });
    }
    Ok(Some(fields))
}

/// The kmem tracepoint whose tracefs id is `id`, with its format, if the tracing data has it.
fn kmem_format(
    formats: &[tracing_data::EventFormat],
    id: u64,
) -> Option<(Kmem, &'static str, Format)> {
    formats
        .iter()
        .filter(|f| f.system == "kmem")
        .filter_map(|f| Format::parse(&f.text).ok())
        .find(|f| f.id == id)
        .and_then(|format| {
            let (kind, name) = Kmem::ALL.iter().find(|(_, n)| *n == format.name)?;
            Some((*kind, *name, format))
        })
}

/// Refuses a perf.data of another kernel than the running one: another release, another
/// build of it (when both have a build id).
fn check_kernel(file: &PerfFile, machine: &Machine) -> Result<String, ImportError> {
    let recorded = file
        .os_release()
        .map_err(|e| corrupt(format!("its OSRELEASE section: {e}")))?
        .ok_or(ImportError::NoRelease)?
        .trim()
        .to_owned();
    if recorded != machine.release {
        return Err(ImportError::OtherKernel {
            recorded,
            running: machine.release.clone(),
        });
    }
    let kernel_build_id = file.build_ids().ok().and_then(|ids| {
        ids.get(&DsoKey::Kernel)
            .map(|info| dprof_analysis::debuginfo::hex(&info.build_id))
    });
    if let (Some(recorded_id), Some(running)) = (kernel_build_id, &machine.build_id) {
        if !recorded_id.is_empty() && recorded_id != *running {
            return Err(ImportError::OtherBuild {
                release: recorded,
                recorded: recorded_id,
                running: running.clone(),
            });
        }
    }
    Ok(recorded)
}

/// A feature section that is a list of strings (CMDLINE): a count, then each string's
/// length and bytes. Read here rather than by `linux-perf-data`, which reserves room for the
/// count before it reads, however large a damaged one is.
fn string_list(section: &[u8]) -> Option<Vec<String>> {
    let u32_at = |at: usize| {
        section
            .get(at..at.checked_add(4)?)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    let count = u32_at(0)?;
    let mut at = 4;
    let mut out = Vec::new();
    for _ in 0..count {
        let len = usize::try_from(u32_at(at)?).ok()?;
        let bytes = section.get(at + 4..(at + 4).checked_add(len)?)?;
        let text = bytes.split(|&b| b == 0).next().unwrap_or(bytes);
        out.push(String::from_utf8_lossy(text).into_owned());
        at += 4 + len;
    }
    Some(out)
}

/// `GenuineIntel,6,69,1` (perf's CPUID on x86) as the header's CPU id.
fn cpu_id_of(perf: &str) -> Option<CpuId> {
    let mut parts = perf.split(',');
    let vendor = parts.next()?.trim().to_owned();
    let family = parts.next()?.trim().parse().ok()?;
    let model = parts.next()?.trim().parse().ok()?;
    Some(CpuId {
        vendor,
        family,
        model,
    })
}

/// What the records gave, besides the translator's output.
#[derive(Debug, Default)]
struct Span {
    first_ns: Option<u64>,
    last_ns: u64,
    /// Samples naming a CPU beyond the machine's, dropped.
    beyond: u64,
    /// Sample records that did not parse, dropped.
    unparsed: u64,
}

/// The recording machine's CPUs, as the perf.data says (else as this machine does).
#[derive(Clone, Copy, Debug)]
struct Cpus {
    online: u32,
    /// CPU numbers are below this.
    nr_cpu_ids: u32,
}

impl Cpus {
    fn of(file: &PerfFile, machine: &Machine) -> Result<Self, ImportError> {
        let nr = file.nr_cpus().ok().flatten();
        if let Some(n) = nr.filter(|n| n.nr_cpus_available.max(n.nr_cpus_online) > MAX_CPUS) {
            return Err(corrupt(format!(
                "it claims {} CPUs, and Linux has {MAX_CPUS} at most",
                n.nr_cpus_available.max(n.nr_cpus_online)
            )));
        }
        let online = nr.map_or(machine.online_cpus, |n| n.nr_cpus_online).max(1);
        let nr_cpu_ids = nr
            .map_or(machine.online_cpus, |n| n.nr_cpus_available)
            .max(online);
        Ok(Self { online, nr_cpu_ids })
    }
}

/// The conversion, with the machine already read: `open_memory` gives the kernel's code, and
/// is called only once the perf.data has passed its checks.
pub(crate) fn convert(
    bytes: &[u8],
    machine: &Machine,
    open_memory: impl FnOnce() -> Result<Option<KernelMemory>, NoKernelMemory>,
) -> Result<Imported, ImportError> {
    data_file::check(bytes)?;
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(std::io::Cursor::new(bytes)).map_err(corrupt)?;
    if perf_file.features().has_feature(Feature::COMPRESSED) {
        return Err(ImportError::Compressed);
    }
    let release = check_kernel(&perf_file, machine)?;
    let events = Events::of(&perf_file)?;
    if system::kallsyms_address(&machine.kallsyms, "_text") == Some(0) {
        return Err(ImportError::HiddenSymbols);
    }
    let cpus = Cpus::of(&perf_file, machine)?;
    let memory = open_memory().map_err(ImportError::NoKernelMemory)?;
    let mut notes = events.notes.clone();
    let mut translator = Translator::new(
        CacheTable::new(machine.slabs.clone()),
        memory,
        cpus.nr_cpu_ids as usize,
    );
    if let Some(address) = per_cpu_offset(&machine.kallsyms) {
        translator.learn_gs_bases(address);
    } else {
        notes.push(
            "kallsyms has no __per_cpu_offset (CONFIG_KALLSYMS_ALL is off): accesses through \
             per-CPU pointers are not typed"
                .to_owned(),
        );
    }
    let mut span = Span::default();
    while let Some(record) = record_iter
        .next_record(&mut perf_file)
        .map_err(|e| corrupt(format!("its data section: {e}")))?
    {
        if let PerfFileRecord::EventRecord { attr_index, record } = record {
            feed(
                &record,
                attr_index,
                &events,
                cpus,
                machine,
                &mut translator,
                &mut span,
            )?;
        }
    }
    if span.unparsed > 0 {
        notes.push(format!(
            "{} sample records did not parse and were left out",
            span.unparsed
        ));
    }
    if span.beyond > 0 {
        notes.push(format!(
            "{} sample records named a CPU beyond the machine's {} and were left out",
            span.beyond, cpus.nr_cpu_ids
        ));
    }
    let header = header_of(&perf_file, machine, &events, cpus, release, &span);
    let stop = stop_of(&translator, &header, &span);
    let profile = encode(&header, machine, &translator, &stop).map_err(ImportError::Write)?;
    Ok(Imported {
        profile,
        samples: translator.counts.samples,
        slab_events: translator.counts.slab_events,
        lost: translator.lost.iter().sum(),
        notes,
    })
}

/// The profile's bytes: the system snapshot, the records, the stop.
fn encode(
    header: &ProfileHeader,
    machine: &Machine,
    translator: &Translator,
    stop: &StopInfo,
) -> Result<Vec<u8>, dprof_format::WriteError> {
    let out = Vec::with_capacity(translator.out.len() + machine.kallsyms.len());
    let mut encoder = ProfileEncoder::new(out, header, &machine.kallsyms, &machine.modules)?;
    if let Some(btf) = &machine.btf {
        encoder.btf(btf)?;
    }
    encoder.records(&translator.out)?;
    encoder.finish(stop)
}

/// One record of the perf.data into the translator: samples of the events read, the kernel's
/// map (checked against the running kernel), lost counts.
fn feed(
    record: &RawEventRecord<'_>,
    attr_index: usize,
    events: &Events,
    cpus: Cpus,
    machine: &Machine,
    translator: &mut Translator,
    span: &mut Span,
) -> Result<(), ImportError> {
    match record.record_type {
        RecordType::SAMPLE => {
            let Some(Some(source)) = events.sources.get(attr_index) else {
                return Ok(());
            };
            if !callchain_fits(&record.data.as_slice(), &record.parse_info) {
                span.unparsed += 1;
                return Ok(());
            }
            let Ok(EventRecord::Sample(s)) = record.parse() else {
                span.unparsed += 1;
                return Ok(());
            };
            // The reader gives a record whose id no attribute lists to the first one.
            if s.id
                .is_some_and(|id| events.ids.get(&id) != Some(&attr_index))
            {
                span.unparsed += 1;
                return Ok(());
            }
            if s.cpu.unwrap_or(0) >= cpus.nr_cpu_ids {
                span.beyond += 1;
                return Ok(());
            }
            if span.first_ns.is_none() {
                // As the module does when it starts: every cache described first.
                let start = s.timestamp.unwrap_or(0);
                span.first_ns = Some(start);
                span.last_ns = start;
                translator.describe_all(start);
            }
            translator.perf_sample(source, &s, 0, &mut span.last_ns);
        }
        RecordType::MMAP => {
            if let Ok(EventRecord::Mmap(m)) = record.parse() {
                check_text(&m.path.as_slice(), m.pid, m.page_offset, machine)?;
            }
        }
        RecordType::LOST => {
            if let Ok(EventRecord::Lost(lost)) = record.parse() {
                let cpu = record
                    .common_data()
                    .ok()
                    .and_then(|c| c.cpu)
                    .filter(|&c| c < cpus.nr_cpu_ids)
                    .unwrap_or(0);
                translator.lost(cpu, span.last_ns, lost.count);
            }
        }
        _ => {}
    }
    Ok(())
}

/// The profile header: what the perf.data says (the kernel, the CPUs, perf's command line),
/// the rest from the running machine.
fn header_of(
    file: &PerfFile,
    machine: &Machine,
    events: &Events,
    cpus: Cpus,
    release: String,
    span: &Span,
) -> ProfileHeader {
    // perf's clock counts from boot: the first record's wall time, as near as it can be told.
    let created_unix_s = machine
        .boot_unix_s
        .map_or(0, |boot| boot + span.first_ns.unwrap_or(0) / 1_000_000_000);
    let argv = file
        .feature_section_data(Feature::CMDLINE)
        .and_then(string_list)
        .unwrap_or_else(|| vec!["perf".to_owned(), "record".to_owned()]);
    ProfileHeader {
        dprof_version: crate::VERSION.to_owned(),
        created_unix_s,
        kernel_release: release,
        proc_version: machine.proc_version.clone(),
        build_id: machine.build_id.clone(),
        cmdline: machine.boot_cmdline.clone(),
        cpu_model: file
            .cpu_desc()
            .ok()
            .flatten()
            .map_or_else(|| machine.cpu_model.clone(), str::to_owned),
        cpu_id: file
            .cpu_id()
            .ok()
            .flatten()
            .and_then(cpu_id_of)
            .or_else(|| machine.cpu_id.clone()),
        online_cpus: cpus.online,
        caches: machine.caches.clone(),
        slab_merging: system::slab_merging(&machine.boot_cmdline),
        merged_caches: machine.merged_caches.clone(),
        memory_layout: None,
        percpu_section: None,
        kernel_image: Vec::new(),
        config: CollectConfig {
            backend: Some(BACKEND.to_owned()),
            events: vec!["slab".to_owned(), "samples".to_owned()],
            // perf chose its own buffers; the file does not say their size.
            ring_bytes: 0,
            target: Target::Command { argv },
            sampling: Some(SamplingConfig {
                sampler: "software".to_owned(),
                period_ns: events.period_ns,
                user: events.user,
                period_events: None,
                pmu: None,
            }),
            histories: None,
            causal: None,
            sample_registers: dprof_format::SampleRegisters::All,
            history_registers: dprof_format::HistoryRegisters::All,
            collector_pid: None,
        },
        module: ModuleInfo {
            abi_version: ABI_VERSION,
            nr_cpu_ids: cpus.nr_cpu_ids,
            online_cpus: cpus.online,
            samplers: SAMPLER_SOFTWARE,
            features: FEATURE_SLAB_EVENTS,
            min_ring_bytes: MIN_RING_BYTES,
            max_ring_bytes: MAX_RING_BYTES,
            max_record_size: MAX_RECORD_SIZE as u32,
        },
    }
}

/// The Stop section: the records' time span, and the translator's counters as the module's.
fn stop_of(translator: &Translator, header: &ProfileHeader, span: &Span) -> StopInfo {
    let elapsed_ns = span.last_ns.saturating_sub(span.first_ns.unwrap_or(0));
    StopInfo {
        // perf.data does not say how perf stopped; it wrote its file, as after a command.
        reason: StopReason::CommandExited { status: 0 },
        ended_unix_s: header.created_unix_s + elapsed_ns / 1_000_000_000,
        elapsed_ns,
        device: Some(DeviceCounters {
            records_written: translator.written.iter().sum(),
            records_lost: translator.lost.iter().sum(),
            bytes_read: translator.out.len() as u64,
            cpus: translator
                .written
                .iter()
                .zip(&translator.lost)
                .map(|(&records_written, &records_lost)| CpuCounters {
                    records_written,
                    records_lost,
                })
                .collect(),
            histories: None,
        }),
    }
}

/// Whether the callchain of a sample record, when its event records one (`perf record -g`),
/// fits in the record: `linux-perf-event-reader` multiplies its length unchecked, which a
/// damaged record overflows. The fields before it are walked as that reader walks them.
fn callchain_fits(body: &[u8], info: &RecordParseInfo) -> bool {
    let f = info.sample_format;
    if !f.contains(SampleFormat::CALLCHAIN) {
        return true;
    }
    let u64_at = |at: usize| {
        body.get(at..at.checked_add(8)?)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let mut at: usize = [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ]
    .iter()
    .filter(|&&flag| f.contains(flag))
    .count()
        * 8;
    if f.contains(SampleFormat::READ) {
        let r = info.read_format;
        let times = 8
            * (usize::from(r.contains(ReadFormat::TOTAL_TIME_ENABLED))
                + usize::from(r.contains(ReadFormat::TOTAL_TIME_RUNNING)));
        let id = 8 * usize::from(r.contains(ReadFormat::ID));
        if r.contains(ReadFormat::GROUP) {
            at += 8 + times + id;
        } else {
            let Some(values) = u64_at(at)
                .and_then(|nr| usize::try_from(nr).ok())
                .and_then(|nr| nr.checked_mul(8 + id))
            else {
                return false;
            };
            let Some(next) = at
                .checked_add(8 + times)
                .and_then(|a| a.checked_add(values))
            else {
                return false;
            };
            at = next;
        }
    }
    u64_at(at).is_some_and(|nr| nr <= (body.len().saturating_sub(at + 8) / 8) as u64)
}

/// Refuses the perf.data when its kernel map (`[kernel.kallsyms]_text`, whose offset is where
/// `_text` was) puts the kernel elsewhere than it is now: the kernel restarted since.
fn check_text(path: &[u8], pid: i32, recorded: u64, machine: &Machine) -> Result<(), ImportError> {
    let Some(symbol) = path.strip_prefix(b"[kernel.kallsyms]") else {
        return Ok(());
    };
    let Ok(symbol) = std::str::from_utf8(symbol) else {
        return Ok(());
    };
    if pid != -1 || symbol.is_empty() || recorded == 0 {
        return Ok(());
    }
    match system::kallsyms_address(&machine.kallsyms, symbol) {
        Some(running) if running != 0 && running != recorded => {
            Err(ImportError::Restarted { recorded, running })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
