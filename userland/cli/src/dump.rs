//! `dprof dump`: a profile as text, JSON, or a summary of either.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use dprof_abi::{AccessSample, CacheInfo, Record, RecordHeader, SAMPLE_USER};
use dprof_analysis::decode::{DecodeOutcome, Decoder};
use dprof_analysis::summary::{cache_label, cache_name, Summary};
use dprof_analysis::symbols::Kallsyms;
use dprof_format::{PageOwners, Profile, ProfileError, ProfileHeader, StopInfo, Target};
use serde_json::json;

use dprof_model::units::{format_bytes, format_ns};

/// Print a profile: its header and every record, one per line.
///
/// Text output (the default): `key: value` lines for the header, the Stop section and the
/// snapshots, then one line per record in file order, e.g.
///
///   cpu=1 t=2000 alloc ptr=0x.. cache=0x..(skbuff_head_cache) site=0x..(__alloc_skb+0x42)
///   req=232 alloc=256 gfp=0xcc0 node=-1 flags=0
///   cpu=1 t=5500 sample ip=0x..(__alloc_skb+0x60) kernel pid=1000 tid=1001 insn=488b4710
///   access=read:8@0x..
///
/// Call sites and sampled ips are symbolized from the profile's own kallsyms snapshot. A
/// sample's access is decoded from its instruction bytes and registers: kind:size@address,
/// "(gs)" for per-CPU (%gs-relative) operands, two of them joined by a comma when the
/// instruction touched two locations (push of memory, movs; in JSON its "second"), or
/// none(reason) when it touched no data address dprof can compute.
///
/// --json prints one JSON document: {"format_version", "header", "stop", "kallsyms_bytes",
/// "modules_bytes", "btf_bytes" (null without a Btf section), "record_count", "record_bytes",
/// "chunks", "page_owners" (the slabs and other pages samples touched: {"slabs": [...],
/// "pages": [...]}), "records": [...]}, one record object per line. Addresses, cache identifiers, gfp
/// and slab flags are "0x..." strings (kernel addresses do not fit JSON doubles); counts,
/// sizes and times are numbers.
///
/// --summary prints counts per record kind and the bytes a record of each kind takes in the
/// file, allocations and frees per cache (most allocated first), lost records per CPU, the
/// time span, and samples (kernel/user, how many decode to a data address, the functions with
/// most samples) instead of the records; with --json the same as a JSON document
/// {"format_version", "header", "stop", "summary"}.
///
/// Records are printed as they are read, with cache names from the cache_info records before
/// them. A file that is not a complete, valid profile is refused with one line naming the
/// byte offset of the problem, and exit status 1; a problem found in the records (a corrupt
/// chunk, a bad record) comes after the records before it were printed.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[expect(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct DumpArgs {
    /// The profile to print, or a perf.data from perf record (converted first, on the
    /// machine that recorded it).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Print counts per kind, per cache and per CPU instead of every record.
    #[arg(long)]
    summary: bool,
}

/// Why a dump stopped: the output failed, or the profile's records did.
#[derive(Debug)]
enum Failure {
    Write(io::Error),
    Profile(ProfileError),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Self::Write(e)
    }
}

impl From<ProfileError> for Failure {
    fn from(e: ProfileError) -> Self {
        Self::Profile(e)
    }
}

/// A profile error with the file's name in front, unless it already names it.
fn with_file(e: ProfileError, file: &std::path::Path) -> anyhow::Error {
    match e {
        ProfileError::Io { .. } => anyhow::Error::new(e),
        _ => anyhow::Error::new(e).context(file.display().to_string()),
    }
}

pub fn run(args: &DumpArgs) -> anyhow::Result<ExitCode> {
    let profile = crate::perf_data::open(&args.file, |e| with_file(e, &args.file))?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = match (args.summary, args.json) {
        (false, false) => text(&profile, &mut out),
        (false, true) => json(&profile, &mut out),
        (true, false) => summary_text(&profile, &mut out),
        (true, true) => summary_json(&profile, &mut out),
    };
    // What was printed before a bad record stays printed; the error follows it.
    let flushed = out.flush();
    match written.and_then(|()| flushed.map_err(Failure::Write)) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // `dprof dump ... | head` is not an error.
        Err(Failure::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(Failure::Write(e)) => {
            Err(anyhow::Error::new(e).context("cannot write to standard output"))
        }
        Err(Failure::Profile(e)) => Err(with_file(e, &args.file)),
    }
}

/// An argument as a shell would need it quoted.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

fn target_text(target: &Target) -> String {
    match target {
        Target::Command { argv } => {
            let words: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
            format!("command {}", words.join(" "))
        }
        Target::Duration { ns } => format!("duration {}", format_ns(*ns)),
    }
}

fn bit_names(bits: u32, names: &[(u32, &str)]) -> String {
    let known: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    if known.is_empty() {
        format!("{bits:#x} (none)")
    } else {
        format!("{bits:#x} ({})", known.join(", "))
    }
}

/// Where the kernel put its memory: the layout, the per-CPU section, the image's sections.
fn kernel_memory_text(h: &ProfileHeader, out: &mut impl Write) -> io::Result<()> {
    match &h.memory_layout {
        Some(l) => writeln!(
            out,
            "memory_layout: direct map {:#x}, vmalloc {:#x}, vmemmap {:#x}, struct page {} B",
            l.page_offset_base, l.vmalloc_base, l.vmemmap_base, l.struct_page_size
        )?,
        None => writeln!(out, "memory_layout: (not recorded)")?,
    }
    if let Some(section) = &h.percpu_section {
        writeln!(
            out,
            "percpu_section: {:#x}..{:#x} (found by the collector; kallsyms lists none)",
            section.start, section.end
        )?;
    }
    if h.kernel_image.is_empty() {
        writeln!(out, "kernel_image: (not recorded)")?;
    } else {
        let sections: Vec<String> = h
            .kernel_image
            .iter()
            .map(|s| {
                let name = dprof_analysis::resolve::image_region(s.kind);
                format!("{name} {:#x}..{:#x}", s.start, s.end)
            })
            .collect();
        writeln!(out, "kernel_image: {}", sections.join(", "))?;
    }
    Ok(())
}

fn header_text(profile: &Profile, out: &mut impl Write) -> io::Result<()> {
    let h: &ProfileHeader = profile.header();
    let m = &h.module;
    writeln!(out, "format_version: {}", profile.version())?;
    writeln!(out, "file_bytes: {}", profile.file_size())?;
    writeln!(out, "dprof_version: {}", h.dprof_version)?;
    writeln!(out, "created_unix_s: {}", h.created_unix_s)?;
    writeln!(out, "kernel_release: {}", h.kernel_release)?;
    writeln!(
        out,
        "proc_version: {}",
        h.proc_version.as_deref().unwrap_or("(not recorded)")
    )?;
    writeln!(
        out,
        "build_id: {}",
        h.build_id.as_deref().unwrap_or("(not recorded)")
    )?;
    writeln!(out, "cmdline: {}", h.cmdline)?;
    writeln!(out, "cpu_model: {}", h.cpu_model)?;
    if let Some(id) = &h.cpu_id {
        writeln!(
            out,
            "cpu_id: {} family {:#x} model {:#x}",
            id.vendor, id.family, id.model
        )?;
    }
    writeln!(out, "online_cpus: {}", h.online_cpus)?;
    writeln!(out, "slab_merging: {}", h.slab_merging)?;
    kernel_memory_text(h, out)?;
    for c in &h.caches {
        let opt = |v: Option<u64>| v.map_or_else(|| "?".to_owned(), |v| v.to_string());
        writeln!(
            out,
            "cache: L{} {} size={} ways={} line={} sets={} cpus={}",
            c.level,
            c.cache_type,
            opt(c.size_bytes),
            opt(c.ways.map(u64::from)),
            opt(c.line_bytes.map(u64::from)),
            opt(c.sets.map(u64::from)),
            c.shared_cpu_list
        )?;
    }
    writeln!(out, "config.events: {}", h.config.events.join(","))?;
    writeln!(
        out,
        "config.ring_bytes: {} ({} per CPU)",
        h.config.ring_bytes,
        format_bytes(u64::from(h.config.ring_bytes))
    )?;
    writeln!(out, "config.target: {}", target_text(&h.config.target))?;
    match &h.config.sampling {
        Some(sm) => writeln!(
            out,
            "config.sampling: {} every {}{}",
            sm.sampler,
            sampling_period(sm),
            if sm.user { ", user mode too" } else { "" }
        )?,
        None => writeln!(out, "config.sampling: none")?,
    }
    writeln!(out, "module.abi_version: {}", m.abi_version)?;
    writeln!(out, "module.nr_cpu_ids: {}", m.nr_cpu_ids)?;
    writeln!(out, "module.online_cpus: {}", m.online_cpus)?;
    let samplers = [
        (dprof_abi::SAMPLER_SOFTWARE, "software"),
        (dprof_abi::SAMPLER_IBS, "ibs"),
        (dprof_abi::SAMPLER_PEBS, "pebs"),
    ];
    writeln!(out, "module.samplers: {}", bit_names(m.samplers, &samplers))?;
    let features = [
        (dprof_abi::FEATURE_SLAB_EVENTS, "slab_events"),
        (dprof_abi::FEATURE_CACHE_WALK, "cache_walk"),
    ];
    writeln!(out, "module.features: {}", bit_names(m.features, &features))?;
    writeln!(out, "module.min_ring_bytes: {}", m.min_ring_bytes)?;
    writeln!(out, "module.max_ring_bytes: {}", m.max_ring_bytes)?;
    writeln!(out, "module.max_record_size: {}", m.max_record_size)?;
    page_owners_text(profile.page_owners(), out)?;
    stop_text(profile.stop(), out)?;
    Ok(())
}

/// One line: slabs by cache and the other pages by use, most first.
fn page_owners_text(owners: &PageOwners, out: &mut impl Write) -> io::Result<()> {
    if owners.is_empty() {
        return writeln!(out, "page_owners: (none)");
    }
    let mut caches: BTreeMap<&str, usize> = BTreeMap::new();
    for slab in &owners.slabs {
        *caches.entry(slab.cache.as_str()).or_default() += 1;
    }
    let mut uses: BTreeMap<&str, usize> = BTreeMap::new();
    for page in &owners.pages {
        *uses
            .entry(dprof_analysis::resolve::page_region(page.usage))
            .or_default() += 1;
    }
    let most_first = |counts: BTreeMap<&str, usize>| {
        let mut v: Vec<_> = counts.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(
        out,
        "page_owners: {} slabs ({}); {} other pages ({})",
        owners.slabs.len(),
        most_first(caches),
        owners.pages.len(),
        most_first(uses)
    )
}

fn stop_text(stop: &StopInfo, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "stop.reason: {}", stop.reason)?;
    writeln!(out, "stop.ended_unix_s: {}", stop.ended_unix_s)?;
    writeln!(out, "stop.elapsed: {}", format_ns(stop.elapsed_ns))?;
    match &stop.device {
        None => writeln!(
            out,
            "stop.device: none (the module's counters were not read)"
        )?,
        Some(d) => {
            writeln!(out, "stop.device.records_written: {}", d.records_written)?;
            writeln!(out, "stop.device.records_lost: {}", d.records_lost)?;
            writeln!(out, "stop.device.bytes_read: {}", d.bytes_read)?;
            for (cpu, c) in d.cpus.iter().enumerate() {
                writeln!(
                    out,
                    "stop.device.cpu{cpu}: written={} lost={}",
                    c.records_written, c.records_lost
                )?;
            }
        }
    }
    Ok(())
}

/// Lines of a text blob, for counting.
fn lines(bytes: &[u8]) -> usize {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
}

fn text(profile: &Profile, out: &mut impl Write) -> Result<(), Failure> {
    header_text(profile, out)?;
    let syms = Kallsyms::parse(profile.kallsyms());
    writeln!(
        out,
        "kallsyms: {} bytes, {} code symbols, {} data symbols, {} per-CPU symbols",
        profile.kallsyms().len(),
        syms.len(),
        syms.data_len(),
        syms.percpu_len()
    )?;
    writeln!(
        out,
        "modules: {} bytes, {} modules",
        profile.modules().len(),
        lines(profile.modules())
    )?;
    match profile.btf() {
        Some(btf) => writeln!(out, "btf: {} bytes", btf.len())?,
        None => writeln!(out, "btf: none")?,
    }
    writeln!(
        out,
        "records: {} in {} sections, {} bytes",
        profile.record_count(),
        profile.chunk_count(),
        profile.record_bytes()
    )?;
    let mut infos = BTreeMap::new();
    let mut decoder = Decoder::new();
    for item in profile.records() {
        let (header, record) = item?;
        note_cache(&record, &mut infos);
        record_line(&header, &record, &infos, &syms, &mut decoder, out)?;
    }
    Ok(())
}

/// Keeps the first [`CacheInfo`] of each cache: records are named by the cache infos before
/// them, so that the dump is one pass over the file.
fn note_cache(record: &Record, infos: &mut BTreeMap<u64, CacheInfo>) {
    if let Record::CacheInfo(info) = record {
        infos.entry(info.cache).or_insert(*info);
    }
}

fn cache_text(id: u64, infos: &BTreeMap<u64, CacheInfo>) -> String {
    if id == 0 {
        "0".to_owned()
    } else {
        format!("{id:#x}({})", cache_label(id, infos))
    }
}

fn site_text(site: u64, syms: &Kallsyms) -> String {
    match syms.lookup(site) {
        // The module name would add a space; keep one token per field.
        Some(loc) => match &loc.symbol.module {
            Some(m) => format!("{site:#x}({}+{:#x}[{m}])", loc.symbol.name, loc.offset),
            None => format!("{site:#x}({}+{:#x})", loc.symbol.name, loc.offset),
        },
        None => format!("{site:#x}"),
    }
}

fn flag_text(flags: u32, bit: u32, name: &str) -> String {
    if flags == 0 {
        "0".to_owned()
    } else if flags == bit {
        format!("{flags:#x}({name})")
    } else {
        format!("{flags:#x}")
    }
}

fn sampler_name(kind: u8) -> &'static str {
    match kind {
        dprof_abi::SAMPLER_KIND_SOFTWARE => "software",
        dprof_abi::SAMPLER_KIND_IBS => "ibs",
        dprof_abi::SAMPLER_KIND_PEBS => "pebs",
        _ => "?",
    }
}

/// `read:8@0x1000`, `read:8@0x1000,write:8@0xffffc90000013e78` for two locations, or
/// `none(reason)`.
fn access_text(outcome: &DecodeOutcome) -> String {
    if let DecodeOutcome::None(reason) = outcome {
        return format!("none({})", reason.name());
    }
    let texts: Vec<String> = outcome
        .accesses()
        .iter()
        .map(|a| {
            format!(
                "{}:{}@{:#x}{}",
                a.kind.name(),
                a.size,
                a.addr,
                if a.gs_relative { "(gs)" } else { "" }
            )
        })
        .collect();
    texts.join(",")
}

fn sample_line(
    a: &AccessSample,
    syms: &Kallsyms,
    decoder: &mut Decoder,
    out: &mut impl Write,
) -> io::Result<()> {
    let user = a.flags & SAMPLE_USER != 0;
    let ip = if user {
        format!("{:#x}", a.ip)
    } else {
        site_text(a.ip, syms)
    };
    write!(
        out,
        " ip={ip} {} pid={} tid={} insn={} access={}",
        if user { "user" } else { "kernel" },
        a.pid,
        a.tid,
        if a.insn_len == 0 {
            "-".to_owned()
        } else {
            dprof_analysis::debuginfo::hex(a.insn_bytes())
        },
        access_text(&decoder.access(a)),
    )?;
    if a.sampler != dprof_abi::SAMPLER_KIND_SOFTWARE {
        write!(out, " sampler={}", sampler_name(a.sampler))?;
    }
    if a.hw_valid != 0 {
        write!(out, " hw_valid={:#x}", a.hw_valid)?;
        if a.hw_valid & dprof_abi::HW_DATA_ADDR != 0 {
            write!(out, " data_addr={:#x}", a.data_addr)?;
        }
        if a.hw_valid & dprof_abi::HW_PHYS_ADDR != 0 {
            write!(out, " phys_addr={:#x}", a.phys_addr)?;
        }
        if a.hw_valid & dprof_abi::HW_DATA_SRC != 0 {
            write!(out, " data_src={:#x}", a.data_src)?;
        }
        if a.hw_valid & dprof_abi::HW_LATENCY != 0 {
            write!(out, " latency={}", a.latency)?;
        }
        if a.hw_valid & dprof_abi::HW_FLAGS != 0 {
            write!(out, " hw_flags={:#x}", a.hw_flags)?;
        }
    }
    if let Some(ibs) = &a.ibs {
        write!(out, " ibs_caps={:#x}", ibs.caps)?;
        for (name, value) in ibs_registers(ibs) {
            write!(out, " {name}={value:#x}")?;
        }
    }
    writeln!(out)
}

/// Names of `IbsRegs::regs`, in index order, as the kernel's MSR names spell them.
const IBS_REGISTER_NAMES: [&str; 9] = [
    "IbsOpCtl",
    "IbsOpRip",
    "IbsOpData",
    "IbsOpData2",
    "IbsOpData3",
    "IbsDcLinAd",
    "IbsDcPhysAd",
    "IbsBrTarget",
    "IbsOpData4",
];

/// The IBS registers the sample's caps say the CPU has, with their names.
fn ibs_registers(ibs: &dprof_abi::IbsRegs) -> impl Iterator<Item = (&'static str, u64)> + '_ {
    IBS_REGISTER_NAMES
        .iter()
        .zip(ibs.regs)
        .enumerate()
        .filter(|&(i, _)| dprof_abi::IbsRegs::present(ibs.caps, i))
        .map(|(_, (name, value))| (*name, value))
}

fn record_line(
    h: &RecordHeader,
    record: &Record,
    infos: &BTreeMap<u64, CacheInfo>,
    syms: &Kallsyms,
    decoder: &mut Decoder,
    out: &mut impl Write,
) -> io::Result<()> {
    write!(
        out,
        "cpu={} t={} {}",
        h.cpu,
        h.time_ns,
        record.kind().name()
    )?;
    match record {
        Record::Alloc(a) => writeln!(
            out,
            " ptr={:#x} cache={} site={} req={} alloc={} gfp={:#x} node={} flags={}",
            a.ptr,
            cache_text(a.cache, infos),
            site_text(a.call_site, syms),
            a.bytes_req,
            a.bytes_alloc,
            a.gfp,
            a.node,
            flag_text(a.flags, dprof_abi::ALLOC_KMALLOC, "kmalloc"),
        ),
        Record::Free(f) => writeln!(
            out,
            " ptr={:#x} cache={} site={} flags={}",
            f.ptr,
            cache_text(f.cache, infos),
            site_text(f.call_site, syms),
            flag_text(f.flags, dprof_abi::FREE_KFREE, "kfree"),
        ),
        Record::CacheInfo(c) => writeln!(
            out,
            " cache={:#x} name={} name_len={} object_size={} size={} align={} slab_flags={:#x} \
             origin={}",
            c.cache,
            cache_name(c),
            c.name_len,
            c.object_size,
            c.size,
            c.align,
            c.slab_flags,
            origin_name(c.origin),
        ),
        Record::Lost(l) => writeln!(out, " count={}", l.count),
        Record::AccessSample(a) => sample_line(a, syms, decoder, out),
        Record::HistoryStart(s) => writeln!(
            out,
            " history={} object={:#x} cache={} site={} target={} ranges={}",
            s.history,
            s.object,
            cache_text(s.cache, infos),
            site_text(s.call_site, syms),
            s.target,
            ranges_text(&s.ranges),
        ),
        Record::HistoryArm(a) => {
            writeln!(out, " history={} delay_ns={}", a.history, a.delay_ns)
        }
        Record::HistoryHit(hit) => writeln!(
            out,
            " history={} seq={} range={} trap_ip={} pid={} tid={}{}",
            hit.history,
            hit.seq,
            hit.range,
            site_text(hit.ip, syms),
            hit.pid,
            hit.tid,
            if hit.flags & dprof_abi::HIT_USER == 0 {
                ""
            } else {
                " user"
            },
        ),
        Record::HistoryEnd(e) => writeln!(
            out,
            " history={} object={:#x} reason={} site={} hits={} dropped_hits={} lifetime_ns={}",
            e.history,
            e.object,
            history_end_name(e.reason),
            site_text(e.call_site, syms),
            e.hits,
            e.dropped_hits,
            e.lifetime_ns,
        ),
        Record::ExperimentStart(e) => writeln!(
            out,
            " experiment={} type_index={} speedup={}% global_delay_ns={}",
            e.control.experiment,
            e.control.type_index,
            e.control.speedup_percent,
            e.global_delay_ns,
        ),
        Record::ExperimentEnd(e) => experiment_end_line(e, out),
    }
}

/// The text of an experiment's end record (after the common prefix).
fn experiment_end_line(e: &dprof_abi::ExperimentEnd, out: &mut impl Write) -> io::Result<()> {
    write!(
        out,
        " experiment={} type_index={} speedup={}% wall_ns={} delay_ns={} paused_ns={} \
         credited_ns={} type_samples={} samples={}{}{}",
        e.control.experiment,
        e.control.type_index,
        e.control.speedup_percent,
        e.wall_ns,
        e.delay_ns,
        e.paused_ns,
        e.credited_ns,
        e.type_samples,
        e.samples,
        if e.flags & dprof_abi::EXPERIMENT_CUT_SHORT == 0 {
            ""
        } else {
            " cut_short"
        },
        if e.flags & dprof_abi::EXPERIMENT_TASK_TABLE_FULL == 0 {
            ""
        } else {
            " task_table_full"
        },
    )?;
    if e.capped_pauses != 0 {
        write!(
            out,
            " capped_pauses={} max_owed_after_pause_ns={}",
            e.capped_pauses, e.max_owed_after_pause_ns
        )?;
    }
    if e.in_flight_delay != 0 {
        write!(out, " in_flight_delay={}", e.in_flight_delay)?;
    }
    for (i, p) in e.points[..e.point_count as usize].iter().enumerate() {
        write!(out, " point{i}={}/{}", p.visits, p.total)?;
    }
    writeln!(out)
}

/// The JSON fields of an experiment's end record.
fn experiment_end_json(e: &dprof_abi::ExperimentEnd) -> serde_json::Value {
    json!({
        "experiment": e.control.experiment,
        "type_index": e.control.type_index,
        "speedup_percent": e.control.speedup_percent,
        "cut_short": e.flags & dprof_abi::EXPERIMENT_CUT_SHORT != 0,
        "task_table_full": e.flags & dprof_abi::EXPERIMENT_TASK_TABLE_FULL != 0,
        "wall_ns": e.wall_ns,
        "delay_ns": e.delay_ns,
        "paused_ns": e.paused_ns,
        "credited_ns": e.credited_ns,
        "type_samples": e.type_samples,
        "samples": e.samples,
        "in_flight_delay": e.in_flight_delay,
        "capped_pauses": e.capped_pauses,
        "max_owed_after_pause_ns": e.max_owed_after_pause_ns,
        "points": e.points[..e.point_count as usize].iter().map(|p| json!({
            "visits": p.visits,
            "time_sum_ns": p.time_sum_ns,
            "total": p.total,
        })).collect::<Vec<_>>(),
    })
}

/// `offset+len` for each watched range in use.
fn ranges_text(ranges: &[dprof_abi::WatchRange]) -> String {
    let used: Vec<String> = ranges
        .iter()
        .filter(|r| r.len != 0)
        .map(|r| format!("{}+{}", r.offset, r.len))
        .collect();
    used.join(",")
}

fn history_end_name(reason: u32) -> &'static str {
    match reason {
        dprof_abi::HISTORY_END_FREED => "freed",
        dprof_abi::HISTORY_END_REALLOCATED => "reallocated",
        dprof_abi::HISTORY_END_TIMEOUT => "timeout",
        dprof_abi::HISTORY_END_STOPPED => "stopped",
        _ => "?",
    }
}

fn origin_name(origin: u16) -> &'static str {
    match origin {
        dprof_abi::CACHE_ORIGIN_WALK => "walk",
        dprof_abi::CACHE_ORIGIN_SEEN => "seen",
        _ => "?",
    }
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// Register names in `AccessSample::regs` order.
const REG_NAMES: [&str; dprof_abi::SAMPLE_REGS] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

fn sample_json(a: &AccessSample, syms: &Kallsyms, decoder: &mut Decoder) -> serde_json::Value {
    let user = a.flags & SAMPLE_USER != 0;
    let regs: serde_json::Map<String, serde_json::Value> = REG_NAMES
        .iter()
        .zip(a.regs)
        .map(|(name, v)| ((*name).to_owned(), json!(hex(v))))
        .collect();
    let location = |m: &dprof_analysis::decode::MemAccess| {
        json!({
            "addr": hex(m.addr),
            "size": m.size,
            "kind": m.kind.name(),
            "gs_relative": m.gs_relative,
        })
    };
    // The first location; an instruction that touches two (push of memory, movs) also has
    // "second".
    let access = match decoder.access(a) {
        DecodeOutcome::Access(m) => location(&m),
        DecodeOutcome::Two([first, second]) => {
            let mut value = location(&first);
            value["second"] = location(&second);
            value
        }
        DecodeOutcome::None(reason) => json!({ "none": reason.name() }),
    };
    let hw = |bit: u32, v: serde_json::Value| (a.hw_valid & bit != 0).then_some(v);
    let mut value = json!({
        "ip": hex(a.ip),
        "symbol": (!user).then(|| syms.lookup(a.ip).map(|l| l.to_string())).flatten(),
        "mode": if user { "user" } else { "kernel" },
        "pid": a.pid,
        "tid": a.tid,
        "sampler": sampler_name(a.sampler),
        "insn": dprof_analysis::debuginfo::hex(a.insn_bytes()),
        "gs_base": hex(a.gs_base),
        "regs": regs,
        "access": access,
        "hw_valid": a.hw_valid,
        "data_addr": hw(dprof_abi::HW_DATA_ADDR, json!(hex(a.data_addr))),
        "phys_addr": hw(dprof_abi::HW_PHYS_ADDR, json!(hex(a.phys_addr))),
        "data_src": hw(dprof_abi::HW_DATA_SRC, json!(hex(a.data_src))),
        "latency": hw(dprof_abi::HW_LATENCY, json!(a.latency)),
        "hw_flags": hw(dprof_abi::HW_FLAGS, json!(a.hw_flags)),
    });
    // Only IBS samples have the key, so that other samples' JSON stays as it was.
    if let (Some(ibs), Some(map)) = (&a.ibs, value.as_object_mut()) {
        let mut regs = serde_json::Map::new();
        regs.insert("caps".to_owned(), json!(hex(u64::from(ibs.caps))));
        for (name, v) in ibs_registers(ibs) {
            regs.insert(name.to_owned(), json!(hex(v)));
        }
        map.insert("ibs".to_owned(), serde_json::Value::Object(regs));
    }
    value
}

fn record_json(
    h: &RecordHeader,
    record: &Record,
    infos: &BTreeMap<u64, CacheInfo>,
    syms: &Kallsyms,
    decoder: &mut Decoder,
) -> serde_json::Value {
    let symbol = |site| syms.lookup(site).map(|l| l.to_string());
    let name_of = |id| (id != 0).then(|| infos.get(&id).map(cache_name)).flatten();
    let mut v = match record {
        Record::Alloc(a) => json!({
            "ptr": hex(a.ptr),
            "cache": hex(a.cache),
            "cache_name": name_of(a.cache),
            "call_site": hex(a.call_site),
            "symbol": symbol(a.call_site),
            "bytes_req": a.bytes_req,
            "bytes_alloc": a.bytes_alloc,
            "gfp": hex(u64::from(a.gfp)),
            "node": a.node,
            "flags": a.flags,
        }),
        Record::Free(f) => json!({
            "ptr": hex(f.ptr),
            "cache": hex(f.cache),
            "cache_name": name_of(f.cache),
            "call_site": hex(f.call_site),
            "symbol": symbol(f.call_site),
            "flags": f.flags,
        }),
        Record::CacheInfo(c) => json!({
            "cache": hex(c.cache),
            "name": cache_name(c),
            "name_len": c.name_len,
            "object_size": c.object_size,
            "size": c.size,
            "align": c.align,
            "slab_flags": hex(u64::from(c.slab_flags)),
            "origin": origin_name(c.origin),
        }),
        Record::Lost(l) => json!({ "count": l.count }),
        Record::AccessSample(a) => sample_json(a, syms, decoder),
        Record::HistoryStart(s) => json!({
            "history": s.history,
            "object": hex(s.object),
            "cache": hex(s.cache),
            "cache_name": name_of(s.cache),
            "call_site": hex(s.call_site),
            "symbol": symbol(s.call_site),
            "target": s.target,
            "ranges": s.ranges.iter().filter(|r| r.len != 0)
                .map(|r| json!({ "offset": r.offset, "len": r.len }))
                .collect::<Vec<_>>(),
        }),
        Record::HistoryArm(a) => json!({ "history": a.history, "delay_ns": a.delay_ns }),
        Record::HistoryHit(hit) => json!({
            "history": hit.history,
            "seq": hit.seq,
            "range": hit.range,
            "trap_ip": hex(hit.ip),
            "symbol": symbol(hit.ip),
            "pid": hit.pid,
            "tid": hit.tid,
            "user": hit.flags & dprof_abi::HIT_USER != 0,
            "regs": hit.regs.iter().map(|&r| hex(r)).collect::<Vec<_>>(),
        }),
        Record::HistoryEnd(e) => json!({
            "history": e.history,
            "object": hex(e.object),
            "reason": history_end_name(e.reason),
            "call_site": hex(e.call_site),
            "symbol": symbol(e.call_site),
            "hits": e.hits,
            "dropped_hits": e.dropped_hits,
            "lifetime_ns": e.lifetime_ns,
        }),
        Record::ExperimentStart(e) => json!({
            "experiment": e.control.experiment,
            "type_index": e.control.type_index,
            "speedup_percent": e.control.speedup_percent,
            "global_delay_ns": e.global_delay_ns,
        }),
        Record::ExperimentEnd(e) => experiment_end_json(e),
    };
    let mut full = json!({
        "cpu": h.cpu,
        "time_ns": h.time_ns,
        "kind": record.kind().name(),
    });
    if let (Some(full), Some(fields)) = (full.as_object_mut(), v.as_object_mut()) {
        full.append(fields);
    }
    full
}

fn json(profile: &Profile, out: &mut impl Write) -> Result<(), Failure> {
    let head = json!({
        "format_version": profile.version(),
        "header": profile.header(),
        "stop": profile.stop(),
        "kallsyms_bytes": profile.kallsyms().len(),
        "modules_bytes": profile.modules().len(),
        "btf_bytes": profile.btf().map(<[u8]>::len),
        "record_count": profile.record_count(),
        "record_bytes": profile.record_bytes(),
        "chunks": profile.chunk_count(),
        "page_owners": profile.page_owners(),
    });
    // Written by hand around the records so that a large profile streams out, one record a
    // line, instead of being built as one value in memory.
    let head = serde_json::to_string(&head).map_err(io::Error::from)?;
    let head = head.strip_suffix('}').unwrap_or(&head);
    writeln!(out, "{head},\"records\":[")?;
    let syms = Kallsyms::parse(profile.kallsyms());
    let mut infos = BTreeMap::new();
    let mut decoder = Decoder::new();
    let mut first = true;
    for item in profile.records() {
        let (h, record) = item?;
        note_cache(&record, &mut infos);
        if !first {
            writeln!(out, ",")?;
        }
        first = false;
        let value = record_json(&h, &record, &infos, &syms, &mut decoder);
        serde_json::to_writer(&mut *out, &value).map_err(io::Error::from)?;
    }
    if !first {
        writeln!(out)?;
    }
    writeln!(out, "]}}")?;
    Ok(())
}

fn summary_text(profile: &Profile, out: &mut impl Write) -> Result<(), Failure> {
    let h = profile.header();
    let s = Summary::of(profile)?;
    let stop = profile.stop();
    writeln!(
        out,
        "kernel: {} on {} ({} CPUs online)",
        h.kernel_release, h.cpu_model, h.online_cpus
    )?;
    writeln!(
        out,
        "collected: dprof {} at {} (unix), events {}, ring {} per CPU, {}",
        h.dprof_version,
        h.created_unix_s,
        h.config.events.join(","),
        format_bytes(u64::from(h.config.ring_bytes)),
        target_text(&h.config.target)
    )?;
    if let Some(sm) = &h.config.sampling {
        writeln!(
            out,
            "sampling: {} every {}{}",
            sm.sampler,
            sampling_period(sm),
            if sm.user { ", user mode too" } else { "" }
        )?;
    }
    writeln!(
        out,
        "stopped: {} after {}",
        stop.reason,
        format_ns(stop.elapsed_ns)
    )?;
    writeln!(
        out,
        "slab_merging: {}",
        if h.slab_merging {
            "on (merged caches share one name: boot with slab_nomerge to keep types apart)"
        } else {
            "off"
        }
    )?;
    records_text(&s, out)?;
    match (s.first_time_ns, s.last_time_ns) {
        (Some(a), Some(b)) => writeln!(
            out,
            "time_span: {} (t={a} to t={b})",
            format_ns(b.saturating_sub(a))
        )?,
        _ => writeln!(out, "time_span: none (no records)")?,
    }
    if s.lost_per_cpu.is_empty() {
        writeln!(out, "lost: 0")?;
    } else {
        let per_cpu: Vec<String> = s
            .lost_per_cpu
            .iter()
            .map(|c| format!("cpu{}={}", c.cpu, c.count))
            .collect();
        writeln!(out, "lost: {} ({})", s.lost, per_cpu.join(" "))?;
    }
    if let Some(d) = &stop.device {
        writeln!(
            out,
            "module_counters: written={} lost={}",
            d.records_written, d.records_lost
        )?;
    }
    writeln!(out, "caches: {}", s.caches.len())?;
    writeln!(
        out,
        "{:>10} {:>10} {:>8}  name",
        "allocs", "frees", "objsize"
    )?;
    for c in &s.caches {
        let size = c
            .object_size
            .map_or_else(|| "-".to_owned(), |v| v.to_string());
        writeln!(
            out,
            "{:>10} {:>10} {:>8}  {}",
            c.allocs, c.frees, size, c.name
        )?;
    }
    samples_text(&s, out)?;
    Ok(())
}

/// The records: how many, in how many bytes, of which kinds, and what each kind costs.
fn records_text(s: &Summary, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "records: {} ({} bytes in {} sections, format version {}{})",
        s.records,
        s.record_bytes,
        s.chunks,
        s.format_version,
        if s.code_entries > 0 {
            format!(", {} distinct sampled instructions", s.code_entries)
        } else {
            String::new()
        }
    )?;
    writeln!(
        out,
        "kinds: alloc={} free={} cache_info={} lost={} sample={} history={} (hits {})",
        s.kinds.alloc,
        s.kinds.free,
        s.kinds.cache_info,
        s.kinds.lost,
        s.kinds.sample,
        s.kinds.history,
        s.kinds.history_hit
    )?;
    writeln!(out, "bytes per record: {}", bytes_per_record(s))?;
    Ok(())
}

/// "alloc=12.1 free=..." over the kinds the profile has: what each kind costs on disk.
fn bytes_per_record(s: &Summary) -> String {
    let (n, b) = (&s.kinds, &s.kind_bytes);
    let kinds = [
        ("alloc", n.alloc, b.alloc),
        ("free", n.free, b.free),
        ("cache_info", n.cache_info, b.cache_info),
        ("lost", n.lost, b.lost),
        ("sample", n.sample, b.sample),
        ("history_hit", n.history_hit, b.history_hit),
        (
            "history_other",
            n.history - n.history_hit,
            b.history - b.history_hit,
        ),
        ("experiment", n.experiment, b.experiment),
    ];
    let parts: Vec<String> = kinds
        .iter()
        .filter(|(_, count, _)| *count > 0)
        .map(|(name, count, bytes)| format!("{name}={:.1}", *bytes as f64 / *count as f64))
        .collect();
    if parts.is_empty() {
        "none (no records)".to_owned()
    } else {
        parts.join(" ")
    }
}

fn samples_text(s: &Summary, out: &mut impl Write) -> io::Result<()> {
    let sm = &s.samples;
    writeln!(
        out,
        "samples: {} (kernel={} user={})",
        s.kinds.sample, sm.kernel, sm.user
    )?;
    if s.kinds.sample == 0 {
        return Ok(());
    }
    writeln!(out, "decoded: {}", sm.decode)?;
    writeln!(
        out,
        "top functions by kernel samples{}:",
        if sm.unknown_function > 0 {
            format!(" ({} in no known function)", sm.unknown_function)
        } else {
            String::new()
        }
    )?;
    writeln!(out, "{:>10} {:>6}  function", "samples", "share")?;
    for f in &sm.top_functions {
        let share = 100.0 * f.samples as f64 / sm.kernel.max(1) as f64;
        let module = f
            .module
            .as_ref()
            .map_or_else(String::new, |m| format!(" [{m}]"));
        writeln!(
            out,
            "{:>10} {share:>5.1}%  {}{module}",
            f.samples, f.function
        )?;
    }
    Ok(())
}

fn summary_json(profile: &Profile, out: &mut impl Write) -> Result<(), Failure> {
    let doc = json!({
        "format_version": profile.version(),
        "header": profile.header(),
        "stop": profile.stop(),
        "summary": Summary::of(profile)?,
    });
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// A sampler's period as the header records it: a time for the software sampler, a count of
/// events for hardware samplers.
fn sampling_period(sm: &dprof_format::SamplingConfig) -> String {
    match &sm.period_events {
        Some(p) => format!("{} {}", p.count, p.unit),
        None => format_ns(u64::from(sm.period_ns)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dprof_abi::reg;
    use dprof_fixtures::profile::software_sample;

    const IP: u64 = 0xffff_ffff_8100_0000;

    #[test]
    fn a_sample_that_touches_two_locations_shows_both() {
        // push 0x8(%rdi): reads the object, writes the stack.
        let sample = software_sample(
            IP,
            &[0xff, 0x77, 0x08],
            &[(reg::RDI, 0x1000), (reg::RSP, 0x2000)],
            0,
        );
        let mut decoder = Decoder::new();
        assert_eq!(
            access_text(&decoder.access(&sample)),
            "read:8@0x1008,write:8@0x1ff8"
        );
        let syms = Kallsyms::parse(b"");
        let value = sample_json(&sample, &syms, &mut decoder);
        assert_eq!(value["access"]["addr"], "0x1008");
        assert_eq!(value["access"]["second"]["addr"], "0x1ff8");
        assert_eq!(value["access"]["second"]["kind"], "write");
    }
}
