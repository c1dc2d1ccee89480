//! The perf collector: the module's [`Backend`] operations done with perf events, for kernels
//! where `dprof.ko` cannot load. It opens its events when configured (so that a refusal comes
//! before the profile file exists), enables them on start, and translates what the rings hold
//! into ABI records on each read.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use dprof_abi::{
    CausalPlan, Config, CpuStatus, ExperimentControl, RecordHeader, Status, VersionInfo,
    ABI_VERSION, EVENT_HISTORIES, EVENT_SAMPLES, EVENT_SLAB, FEATURE_SLAB_EVENTS, MAX_RECORD_SIZE,
    RECORD_HEADER_SIZE, SAMPLER_IBS, SAMPLER_KIND_IBS, SAMPLER_KIND_PEBS, SAMPLER_KIND_SOFTWARE,
    SAMPLER_PEBS, SAMPLER_SOFTWARE, STATE_CONFIGURED, STATE_RUNNING, STATE_STOPPED,
};
use dprof_format::{MemoryLayout, PercpuSection};
use linux_perf_event_reader::{EventRecord, RawData, RawEventRecord, RecordParseInfo, RecordType};

use super::error::PerfError;
use super::events::{self, Ring, RingRecord};
use super::hw_sample;
use super::memory::KernelMemory;
use super::page_reader::PageReader;
use super::pages::{PageEvent, PageFields, PageTracker};
use super::tracefs;
use super::translate::{CacheTable, Geometry, Kmem, KmemFields, Source, Translator};
use crate::device::ReadOutcome;
use crate::histories::ModulePlan;
use crate::kernel_btf::KernelBtf;

/// Largest per-CPU ring: perf's buffers are kernel memory that root may lock.
const MAX_RING_BYTES: u32 = 256 << 20;

/// The events of one collection, opened.
#[derive(Debug)]
struct Session {
    /// Per CPU: its number and its ring.
    rings: Vec<(u32, Ring, u64)>,
    /// Every event, for enabling and disabling.
    fds: Vec<OwnedFd>,
    /// Record id to what it is and how to parse it.
    sources: HashMap<u64, (Source, RecordParseInfo)>,
}

/// Collection through perf events.
#[derive(Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of one collection: started, what it collects, what the kernel lacks"
)]
pub struct PerfCollector {
    root: PathBuf,
    /// The text of `/proc/kallsyms`, as the caller read it for the profile.
    kallsyms: Vec<u8>,
    kcore: PathBuf,
    cpus: Vec<u32>,
    nr_cpu_ids: u32,
    session: Option<Session>,
    translator: Option<Translator>,
    state: u32,
    started: bool,
    bytes_read: u64,
    /// Where `out` has been read up to.
    out_read: usize,
    notes: Vec<String>,
    /// Where the direct map and the `struct page` array are, when known.
    memory_layout: Option<MemoryLayout>,
    /// The kmem tracepoint does not name the cache of an allocation, and kernel memory can be
    /// read: the cache is looked up in the object's slab.
    unnamed_allocs: bool,
    /// Access samples are collected.
    sampling: bool,
    /// With slab events, the page allocator's are opened too.
    page_events: bool,
}

impl PerfCollector {
    /// A collector for the machine whose procfs and sysfs are under `root` and whose
    /// `/proc/kallsyms` reads `kallsyms`, reading kernel code from `kcore` when it exists and
    /// through BPF when not.
    ///
    /// # Errors
    /// When perf events are not allowed ([`PerfError::Paranoid`]) or the CPUs cannot be
    /// listed.
    pub fn new(root: &Path, kallsyms: Vec<u8>, kcore: &Path) -> Result<Self, PerfError> {
        let paranoid = std::fs::read_to_string(root.join("proc/sys/kernel/perf_event_paranoid"))
            .map_err(|source| PerfError::NoPerf { source })?;
        let paranoid: i32 = paranoid.trim().parse().unwrap_or(2);
        // SAFETY: geteuid has no preconditions.
        let root_user = unsafe { libc::geteuid() } == 0;
        if !root_user && paranoid > -1 {
            return Err(PerfError::Paranoid { level: paranoid });
        }
        let online = std::fs::read_to_string(root.join("sys/devices/system/cpu/online"))
            .map_err(|source| PerfError::NoPerf { source })?;
        let cpus: Vec<u32> = dprof_model::cache::cpu_list(online.trim())
            .map(|ranges| ranges.into_iter().flatten().collect())
            .unwrap_or_default();
        let nr_cpu_ids = cpus.iter().max().map_or(1, |m| m + 1);
        Ok(Self {
            root: root.to_path_buf(),
            kallsyms,
            kcore: kcore.to_path_buf(),
            cpus,
            nr_cpu_ids,
            session: None,
            translator: None,
            state: 0,
            started: false,
            bytes_read: 0,
            out_read: 0,
            notes: Vec::new(),
            memory_layout: None,
            unnamed_allocs: false,
            sampling: false,
            page_events: true,
        })
    }

    /// Whether slab events bring the page allocator's too (the default); set before
    /// configuring.
    pub fn set_page_events(&mut self, on: bool) {
        self.page_events = on;
    }

    /// The kernel's memory layout, where it is known: with it, the collector finds an
    /// object's cache in its slab on kernels whose tracepoint does not name it. Set it after
    /// configuring (the layout is read only once the collector is known to work), before
    /// starting; a note says how allocations are typed.
    pub fn set_memory_layout(&mut self, layout: Option<MemoryLayout>, btf: &KernelBtf) {
        self.memory_layout = layout;
        let traces_pages = self.session.as_ref().is_some_and(|s| {
            s.sources
                .values()
                .any(|(source, _)| matches!(source, Source::Pages(_)))
        });
        if let (Some(translator), true) = (&mut self.translator, traces_pages) {
            match layout {
                Some(layout) => translator
                    .set_page_tracker(PageTracker::new(layout.page_offset_base, &self.kallsyms)),
                None => self.notes.push(
                    "page allocations are not traced: the direct map's base is unknown".to_owned(),
                ),
            }
        }
        if !self.unnamed_allocs {
            return;
        }
        let owner = self.slab_owner(btf);
        if let (Some(translator), Some(owner)) = (&mut self.translator, owner) {
            translator.set_slab_owner(owner);
        }
    }

    /// Where the kernel linked its per-CPU section (see [`crate::percpu_section`]), with the
    /// kernel's BTF: where kallsyms has no `__per_cpu_offset`, each CPU's per-CPU offset is
    /// then found through its run queue (see [`super::gs_bases`]), so that accesses through
    /// per-CPU pointers are typed. Call it after configuring, before starting; a note says
    /// what was found.
    pub fn set_percpu_section(&mut self, section: Option<PercpuSection>, btf: &KernelBtf) {
        let Some(translator) = &mut self.translator else {
            return;
        };
        if !self.sampling || translator.knows_gs_bases() {
            return;
        }
        let found = section
            .ok_or_else(|| "the per-CPU section was not found".to_owned())
            .and_then(|section| {
                let path = super::gs_bases::RunqueuePath::from_btf(btf.types()?, section)?;
                let task = super::bpf::current_task()
                    .map_err(|e| format!("the collector's task_struct: {e}"))?;
                let mut memory = KernelMemory::open(&self.kcore).map_err(|e| e.to_string())?;
                with_each_cpu(|move_to| {
                    super::gs_bases::find(path, task, &self.cpus, &mut memory, move_to)
                })
            });
        match found {
            Ok(bases) => {
                translator.set_gs_bases(&bases);
                self.notes.push(format!(
                    "kallsyms has no __per_cpu_offset (CONFIG_KALLSYMS_ALL is off): the \
                     per-CPU offsets of {} CPUs were read from their run queues",
                    bases.len()
                ));
            }
            Err(why) => self.notes.push(format!(
                "kallsyms has no __per_cpu_offset (CONFIG_KALLSYMS_ALL is off), and the \
                 per-CPU offsets could not be read from the run queues ({why}): accesses \
                 through per-CPU pointers are not typed"
            )),
        }
    }

    /// What the collector wants the person to know about how it collects (tracefs mounted,
    /// where code bytes come from, what this kernel's tracepoints lack), and, once the rings
    /// are drained, how it named what its slabs no longer told; each note taken once.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// The kmem tracepoints' ids and fields, read from tracefs.
    fn kmem_events(&mut self) -> Result<Vec<(u64, KmemFields)>, PerfError> {
        let mut kmem = Vec::new();
        {
            let (tracefs, mounted) = tracefs::locate(&self.root)?;
            if mounted {
                self.notes
                    .push(format!("mounted tracefs at {}", tracefs.display()));
            }
            for (kind, name) in Kmem::ALL {
                let format = tracefs::format(&tracefs, "kmem", name)?
                    .ok_or(PerfError::NoTracepoint { name })?;
                let fields =
                    KmemFields::new(kind, &format).map_err(|message| PerfError::BadFormat {
                        path: tracefs.join("events/kmem").join(name).join("format"),
                        message,
                    })?;
                kmem.push((format.id, fields));
            }
        }
        Ok(kmem)
    }

    /// The page allocator's tracepoints' ids and fields, where tracefs has them all; else
    /// none, and a note says why (pages are then typed by their use only).
    fn page_tracepoints(&mut self) -> Vec<(u64, PageFields)> {
        let found: Result<Vec<(u64, PageFields)>, String> = (|| {
            let (tracefs, _) = tracefs::locate(&self.root).map_err(|e| e.to_string())?;
            PageEvent::ALL
                .iter()
                .map(|&(kind, name)| {
                    let format = tracefs::format(&tracefs, "kmem", name)
                        .map_err(|e| e.to_string())?
                        .ok_or_else(|| format!("tracefs has no kmem:{name}"))?;
                    Ok((format.id, PageFields::new(kind, &format)?))
                })
                .collect()
        })();
        found.unwrap_or_else(|why| {
            self.notes.push(format!(
                "page allocations are not traced ({why}): pages are typed by their use only"
            ));
            Vec::new()
        })
    }

    fn open_session(&mut self, config: &Config) -> Result<(), PerfError> {
        let kmem = if config.events & EVENT_SLAB == 0 {
            Vec::new()
        } else {
            self.kmem_events()?
        };
        let unnamed_allocs = kmem
            .iter()
            .any(|(_, f)| f.kind == Kmem::CacheAlloc && !f.names_cache());
        let sampler = (config.events & EVENT_SAMPLES != 0).then(|| sampler_of(config));
        let mut session = Session {
            rings: Vec::new(),
            fds: Vec::new(),
            sources: HashMap::new(),
        };
        let mut attrs: Vec<(perf_event_open_sys::bindings::perf_event_attr, Source)> = Vec::new();
        let sampling = sampler.is_some();
        if let Some(sampler) = sampler {
            attrs.push(sampler);
        }
        for (id, fields) in kmem {
            attrs.push((events::tracepoint(id), Source::Kmem(Box::new(fields))));
        }
        if config.events & EVENT_SLAB != 0 && self.page_events {
            for (id, fields) in self.page_tracepoints() {
                attrs.push((
                    events::tracepoint_with_kernel_chain(id),
                    Source::Pages(Box::new(fields)),
                ));
            }
        }
        let parse: Vec<RecordParseInfo> = attrs
            .iter()
            .map(|(a, _)| events::parse_info(a))
            .collect::<Result<_, _>>()
            .map_err(|source| PerfError::Open {
                what: "the event attributes",
                cpu: 0,
                source,
            })?;
        for &cpu in &self.cpus {
            let mut owner: Option<usize> = None;
            for ((attr, source), info) in attrs.iter().zip(&parse) {
                let what = match source {
                    Source::Sampler => "the cpu-clock sampler",
                    Source::Hardware { ibs: true } => "the IBS op sampler",
                    Source::Hardware { ibs: false } => "the PEBS load-latency sampler",
                    Source::Kmem(_) => "a kmem tracepoint",
                    Source::Pages(_) => "a page allocator tracepoint",
                };
                let fd = events::open(attr, cpu).map_err(|source| PerfError::Open {
                    what,
                    cpu,
                    source,
                })?;
                let id = events::id(&fd).map_err(|source| PerfError::Open { what, cpu, source })?;
                match owner {
                    None => {
                        let ring = Ring::map(&fd, config.ring_bytes as usize)
                            .map_err(|source| PerfError::Ring { cpu, source })?;
                        session.rings.push((cpu, ring, 0));
                        owner = Some(session.fds.len());
                    }
                    Some(i) => events::redirect(&fd, &session.fds[i])
                        .map_err(|source| PerfError::Open { what, cpu, source })?,
                }
                session.fds.push(fd);
                session.sources.insert(id, (source.clone(), *info));
            }
        }
        let memory = if sampling || unnamed_allocs {
            match KernelMemory::open(&self.kcore) {
                Ok(m) => {
                    self.notes
                        .push(format!("instruction bytes are read from {}", m.describe()));
                    Some(m)
                }
                Err(e) => return Err(PerfError::NoKernelMemory(e)),
            }
        } else {
            None
        };
        let caches = CacheTable::new(slab_geometry(&self.root));
        self.unnamed_allocs = unnamed_allocs && memory.is_some();
        let mut translator = Translator::new(caches, memory, self.nr_cpu_ids as usize);
        if let Some(address) = per_cpu_offset(&self.kallsyms) {
            translator.learn_gs_bases(address);
        }
        self.sampling = sampling;
        self.translator = Some(translator);
        self.session = Some(session);
        Ok(())
    }

    /// How to find an allocation's cache on a kernel whose tracepoint does not name it, said
    /// in a note either way.
    fn slab_owner(&mut self, btf: &KernelBtf) -> Option<PageReader> {
        let reader = self
            .memory_layout
            .ok_or_else(|| "the kernel's memory layout is unknown".to_owned())
            .and_then(|layout| PageReader::new(btf.types()?, layout));
        match reader {
            Ok(reader) => {
                self.notes.push(
                    "this kernel's kmem_cache_alloc tracepoint does not name the cache (older \
                     kernels' does not): dprof reads it from each object's struct slab"
                        .to_owned(),
                );
                Some(reader)
            }
            Err(why) => {
                self.notes.push(format!(
                    "this kernel's kmem_cache_alloc tracepoint does not name the cache (older \
                     kernels' does not), and {why}: allocations are typed by slot size (slab-N)"
                ));
                None
            }
        }
    }

    fn enable(&self, on: bool) -> Result<(), PerfError> {
        if let Some(s) = &self.session {
            for fd in &s.fds {
                events::enable(fd, on).map_err(|source| PerfError::Enable { source })?;
            }
        }
        Ok(())
    }

    /// Moves what the rings hold into the translator's output.
    fn pull(&mut self) {
        let (Some(session), Some(translator)) = (&mut self.session, &mut self.translator) else {
            return;
        };
        let sources = &session.sources;
        for (cpu, ring, last_time) in &mut session.rings {
            ring.drain(|record| translate(&record, *cpu, last_time, sources, translator));
        }
        translator.drain_ended();
        if self.state == STATE_STOPPED && self.rings_empty() {
            if let Some(t) = &mut self.translator {
                if let Some(note) = t.finish() {
                    self.notes.push(note);
                }
                if let Some(note) = t.pages_note() {
                    self.notes.push(note);
                }
            }
        }
    }

    fn rings_empty(&self) -> bool {
        self.session
            .as_ref()
            .is_none_or(|s| s.rings.iter().all(|(_, r, _)| r.pending() == 0))
    }
}

/// One ring record into the translator.
fn translate(
    record: &RingRecord<'_>,
    cpu: u32,
    last_time: &mut u64,
    sources: &HashMap<u64, (Source, RecordParseInfo)>,
    out: &mut Translator,
) {
    let kind = RecordType(record.kind);
    if kind == RecordType::LOST {
        let mut body = RawData::from(record.body);
        if let (Ok(_id), Ok(count)) = (
            body.read_u64::<byteorder::LittleEndian>(),
            body.read_u64::<byteorder::LittleEndian>(),
        ) {
            out.lost(cpu, *last_time, count);
        }
        return;
    }
    if kind != RecordType::SAMPLE {
        return;
    }
    let Some(id) = record
        .body
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    else {
        return;
    };
    let Some((source, info)) = sources.get(&id) else {
        return;
    };
    if let Source::Hardware { ibs } = source {
        if let Some(sample) = hw_sample::parse(record.body, record.misc, *ibs) {
            *last_time = sample.time_ns;
            out.hardware_sample(*ibs, &sample);
        }
        return;
    }
    let raw = RawEventRecord::new(kind, record.misc, RawData::from(record.body), *info);
    if let Ok(EventRecord::Sample(s)) = raw.parse() {
        out.perf_sample(source, &s, cpu, last_time);
    }
}

/// The sampler `config` asks for, and what its records are.
fn sampler_of(config: &Config) -> (perf_event_open_sys::bindings::perf_event_attr, Source) {
    let user = config.sample_user != 0;
    let period = u64::from(config.sample_period_ns);
    match u8::try_from(config.sampler) {
        Ok(kind @ (SAMPLER_KIND_IBS | SAMPLER_KIND_PEBS)) => {
            let ibs = kind == SAMPLER_KIND_IBS;
            let attr = events::hardware(
                ibs,
                config.pmu_type,
                config.pmu_config,
                config.pmu_config1,
                period,
                user,
            );
            (attr, Source::Hardware { ibs })
        }
        _ => (events::cpu_clock(period, user), Source::Sampler),
    }
}

/// Runs `work` with a function that moves the calling thread to one CPU, then gives the
/// thread back the CPUs it was allowed before.
fn with_each_cpu<T>(
    work: impl FnOnce(&mut dyn FnMut(u32) -> Result<(), String>) -> Result<T, String>,
) -> Result<T, String> {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let allowed =
        sched_getaffinity(Pid::from_raw(0)).map_err(|e| format!("sched_getaffinity: {e}"))?;
    let mut move_to = |cpu: u32| {
        let mut only = CpuSet::new();
        only.set(cpu as usize)
            .map_err(|e| format!("CPU {cpu}: {e}"))?;
        // Returns once the thread runs there.
        sched_setaffinity(Pid::from_raw(0), &only).map_err(|e| format!("moving to CPU {cpu}: {e}"))
    };
    let result = work(&mut move_to);
    sched_setaffinity(Pid::from_raw(0), &allowed)
        .map_err(|e| format!("giving the collector its CPUs back: {e}"))?;
    result
}

/// The address of `__per_cpu_offset` in the text of `/proc/kallsyms`; `None` when it is not
/// there or its address is hidden (zero).
pub(crate) fn per_cpu_offset(kallsyms: &[u8]) -> Option<u64> {
    crate::system::kallsyms_address(kallsyms, "__per_cpu_offset").filter(|&a| a != 0)
}

/// The geometry of every cache `/sys/kernel/slab` lists (aliases of merged caches included,
/// through their links), by name; empty when it cannot be read.
pub(crate) fn slab_geometry(root: &Path) -> HashMap<String, Geometry> {
    let dir = root.join("sys/kernel/slab");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return HashMap::new();
    };
    let number = |path: &Path, file: &str| -> Option<u32> {
        std::fs::read_to_string(path.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let mut out = HashMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // `:a-0000192` and the like are merged caches' own directories, reached by aliases.
        if name.starts_with(':') {
            continue;
        }
        let path = entry.path();
        if let (Some(object_size), Some(slot_size), Some(align)) = (
            number(&path, "object_size"),
            number(&path, "slab_size"),
            number(&path, "align"),
        ) {
            out.insert(
                name,
                Geometry {
                    object_size,
                    slot_size,
                    align,
                },
            );
        }
    }
    out
}

/// The [`crate::backend::Backend`] operations, which `backend.rs` forwards to.
impl PerfCollector {
    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn checked_version(&self) -> Result<VersionInfo, PerfError> {
        Ok(VersionInfo {
            abi_version: ABI_VERSION,
            nr_cpu_ids: self.nr_cpu_ids,
            online_cpus: self.cpus.len() as u32,
            // Whether the CPU has IBS or PEBS is read from sysfs, as for the module.
            samplers: SAMPLER_SOFTWARE | SAMPLER_IBS | SAMPLER_PEBS,
            features: FEATURE_SLAB_EVENTS,
            min_ring_bytes: dprof_abi::MIN_RING_BYTES,
            max_ring_bytes: MAX_RING_BYTES,
            max_record_size: MAX_RECORD_SIZE as u32,
        })
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn configure(&mut self, config: &Config) -> Result<(), PerfError> {
        if config.events & EVENT_HISTORIES != 0 {
            return Err(PerfError::NeedsModule {
                what: "object access histories",
            });
        }
        let known = [SAMPLER_KIND_SOFTWARE, SAMPLER_KIND_IBS, SAMPLER_KIND_PEBS]
            .map(u32::from)
            .contains(&config.sampler);
        if config.events & EVENT_SAMPLES != 0 && !known {
            return Err(PerfError::Sampler);
        }
        self.session = None;
        self.translator = None;
        self.open_session(config)?;
        self.state = STATE_CONFIGURED;
        self.started = false;
        Ok(())
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn history_plan(&mut self, _plan: &ModulePlan) -> Result<(), PerfError> {
        Err(PerfError::NeedsModule {
            what: "object access histories",
        })
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn causal_plan(&mut self, _plan: &CausalPlan, _labels: &[String]) -> Result<(), PerfError> {
        Err(PerfError::NeedsModule {
            what: "causal experiments",
        })
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn causal_type(
        &mut self,
        _index: u32,
        _type_name: &str,
        _cache: &str,
        _ips: &[u64],
    ) -> Result<(), PerfError> {
        Err(PerfError::NeedsModule {
            what: "causal experiments",
        })
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn causal_scope(&mut self, _ranges: &[(u64, u64)]) -> Result<(), PerfError> {
        Err(PerfError::NeedsModule {
            what: "causal experiments",
        })
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn experiment_start(&mut self, _control: &ExperimentControl) -> Result<(), PerfError> {
        Err(PerfError::NeedsModule {
            what: "causal experiments",
        })
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn experiment_end(&mut self) -> Result<(), PerfError> {
        Err(PerfError::NeedsModule {
            what: "causal experiments",
        })
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn start(&mut self) -> Result<(), PerfError> {
        if !self.started {
            self.started = true;
            if let Some(t) = &mut self.translator {
                t.describe_all(monotonic_ns());
            }
        }
        self.enable(true)?;
        self.state = STATE_RUNNING;
        Ok(())
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn stop(&mut self) -> Result<(), PerfError> {
        self.enable(false)?;
        self.state = STATE_STOPPED;
        Ok(())
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn status(&mut self, capacity: usize) -> Result<(Status, Vec<CpuStatus>), PerfError> {
        let (written, lost) = self
            .translator
            .as_ref()
            .map_or((Vec::new(), Vec::new()), |t| {
                (t.written.clone(), t.lost.clone())
            });
        let status = Status {
            nr_cpus: self.nr_cpu_ids,
            state: self.state,
            records_written: written.iter().sum(),
            records_lost: lost.iter().sum(),
            bytes_read: self.bytes_read,
            ..Status::default()
        };
        let cpus = (0..capacity.min(self.nr_cpu_ids as usize))
            .map(|i| CpuStatus {
                records_written: written.get(i).copied().unwrap_or(0),
                records_lost: lost.get(i).copied().unwrap_or(0),
                bytes_pending: 0,
            })
            .collect();
        Ok((status, cpus))
    }

    #[expect(
        clippy::missing_errors_doc,
        reason = "the Backend trait documents them"
    )]
    pub fn read(&mut self, buf: &mut [u8]) -> Result<ReadOutcome, PerfError> {
        let waiting = self
            .translator
            .as_ref()
            .map_or(0, |t| t.out.len() - self.out_read);
        if waiting == 0 {
            if let Some(t) = &mut self.translator {
                t.out.clear();
            }
            self.out_read = 0;
            self.pull();
        }
        let Some(t) = &mut self.translator else {
            return Ok(ReadOutcome::Drained);
        };
        let pending = &t.out[self.out_read..];
        // Whole records only, as the device hands them out.
        let mut n = 0;
        while n + RECORD_HEADER_SIZE <= pending.len() {
            let Ok(header) = RecordHeader::decode(&pending[n..]) else {
                break;
            };
            let size = usize::from(header.size);
            if size == 0 || n + size > buf.len() || n + size > pending.len() {
                break;
            }
            n += size;
        }
        if n == 0 {
            if pending.is_empty() && self.state == STATE_STOPPED && self.rings_empty() {
                return Ok(ReadOutcome::Drained);
            }
            return Ok(ReadOutcome::Empty);
        }
        buf[..n].copy_from_slice(&pending[..n]);
        self.out_read += n;
        self.bytes_read += n as u64;
        Ok(ReadOutcome::Data(n))
    }
}

/// Now on `CLOCK_MONOTONIC`, the clock the events are stamped with.
fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

#[cfg(test)]
mod tests;
