//! `dprof report`: the data profile of a profile, as a table, a drill-down into one type, or
//! JSON; the data flow of a type's object access histories ([`data_flow`]); the miss
//! classification ([`misses`]) and the working set ([`working_set`]); the causal ranking
//! ([`causal`]).

mod args;
mod causal;
mod data_flow;
mod misses;
mod output;
mod working_set;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use dprof_analysis::btf::Btf;
use dprof_analysis::cache::parse_overrides;
use dprof_analysis::debuginfo::{DebugInfo, MatchedBy};
use dprof_analysis::pipeline::{self, Options};
use dprof_analysis::report::{annotate_fields, FieldSource, StructNames};
use dprof_analysis::resolve::{SymbolSource, WithDebugInfo};
use dprof_analysis::symbols::Kallsyms;
use dprof_analysis::views::ViewOptions;
use dprof_format::{Profile, ProfileError};
use dprof_model::instruction_types::InstructionTypes;
use dprof_model::units::format_bytes;
use dprof_model::{
    HardwareSummary, Report, SourceCount, TypeHardware, TypeKind, TypeProfile, WarningCode,
};

pub use args::{AnalysisArgs, ReportArgs};
use args::{Format, View, DEFAULT_TOP};
use output::{header_lines, merged_cache_lines, more, Table};

pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    if args.format == Format::Dot && args.view != View::DataFlow {
        bail!("--format dot goes with --view data-flow");
    }
    if args.format == Format::Csv && args.view != View::WorkingSet {
        bail!("--format csv goes with --view working-set");
    }
    if args.by_set && args.view != View::WorkingSet {
        bail!("--by-set goes with --view working-set");
    }
    if args.format == Format::Coz && args.view != View::Causal {
        bail!("--format coz goes with --view causal");
    }
    let with_views = matches!(args.view, View::Misses | View::WorkingSet)
        || (args.json && args.view == View::DataProfile);
    if !with_views && args.cache.is_some() {
        bail!("--cache goes with --view misses, --view working-set or --json");
    }
    if args.view == View::Causal {
        // The causal view reads the experiment records only: no samples, no symbols.
        let profile = crate::perf_data::open(&args.file, |e| with_file(&args.file, e))?;
        return causal::run(args, &profile);
    }
    let overrides = match &args.cache {
        Some(spec) => parse_overrides(spec).context("--cache")?,
        None => Vec::new(),
    };
    let views = with_views.then(|| ViewOptions {
        overrides,
        sim_objects: usize::try_from(args.sim_objects).unwrap_or(usize::MAX),
        ..ViewOptions::default()
    });
    // Histories stand without samples (samples only add costs to them), and the working set
    // without either; the data profile needs samples.
    let need_samples = args.view == View::DataProfile;
    let Analyzed {
        report,
        have_field_names,
    } = open_profile(&args.file, &args.analysis)?.analyze(
        need_samples,
        views.as_ref(),
        &mut |_| {},
        &mut |warning| {
            eprintln!("dprof: warning: {warning}");
        },
    )?;
    if args.view == View::DataFlow {
        for w in report
            .warnings
            .iter()
            .filter(|w| w.code != WarningCode::NoSamples)
        {
            eprintln!("dprof: warning: {}", w.message);
        }
        return data_flow::run(args, &report);
    }
    for w in &report.warnings {
        eprintln!("dprof: warning: {}", w.message);
    }
    match args.view {
        View::Misses => return misses::run(args, &report),
        View::WorkingSet => return working_set::run(args, &report),
        View::DataProfile | View::DataFlow | View::Causal => {}
    }
    let selected = match &args.type_name {
        Some(name) => Some(find_type(&report, name)?),
        None => None,
    };

    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = match (args.json, selected) {
        (true, selected) => json(&report, selected, args.top, &mut out),
        (false, None) => text(&report, args.top.unwrap_or(DEFAULT_TOP), &mut out),
        (false, Some(t)) => type_text(
            &report,
            t,
            args.top.unwrap_or(DEFAULT_TOP),
            have_field_names,
            &mut out,
        ),
    }
    .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        other => other
            .context("cannot write to standard output")
            .map(|()| ExitCode::SUCCESS),
    }
}

/// A profile whose structure was checked, with the names for its types: what `dprof report`
/// and `dprof tui` analyze. Opening reads only the small sections, so a file that is not a
/// profile fails at once, before any slow work (and before `dprof tui` takes the terminal).
pub struct OpenedProfile {
    file: PathBuf,
    profile: Profile,
    names: StructNames,
    args: AnalysisArgs,
}

/// The report of a profile.
pub struct Analyzed {
    pub report: Report,
    /// Whether the fields were named: from --vmlinux's DWARF, else the profile's BTF.
    pub have_field_names: bool,
}

/// What an analysis is doing, for a progress display.
#[derive(Clone, Copy, Debug)]
pub enum Stage {
    /// Reading the DWARF of --vmlinux and --debug-dir, or the profile's BTF.
    DebugInfo,
    /// Reading and analyzing the records.
    Records(pipeline::Progress),
}

/// Opens `file` as a profile and reads --type-map.
pub fn open_profile(file: &Path, args: &AnalysisArgs) -> anyhow::Result<OpenedProfile> {
    let profile = crate::perf_data::open(file, |e| with_file(file, e))?;
    let mut names = StructNames::builtin();
    if let Some(path) = &args.type_map {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the type map {}", path.display()))?;
        names
            .add_user_map(&text)
            .with_context(|| path.display().to_string())?;
    }
    Ok(OpenedProfile {
        file: file.to_path_buf(),
        profile,
        names,
        args: args.clone(),
    })
}

/// A profile error, with the file named unless the error already names it.
fn with_file(file: &Path, e: ProfileError) -> anyhow::Error {
    match e {
        ProfileError::Io { .. } => anyhow::Error::new(e),
        _ => anyhow::Error::new(e).context(file.display().to_string()),
    }
}

impl OpenedProfile {
    /// Whether the profile is a causal session's (its header names the experiments' types).
    pub fn has_causal(&self) -> bool {
        self.profile.header().config.causal.is_some()
    }

    /// Reads the debug info (--vmlinux, else the profile's BTF), analyzes the records and
    /// names the fields; a profile without access samples is an error when `need_samples`.
    /// `progress` hears what is being done; `warn` gets one sentence for each thing that
    /// limits the report beyond the report's own warnings (the caller prints or shows it).
    /// With `views`, the report has the miss classification and working-set views.
    pub fn analyze(
        self,
        need_samples: bool,
        views: Option<&ViewOptions>,
        progress: &mut dyn FnMut(Stage),
        warn: &mut dyn FnMut(String),
    ) -> anyhow::Result<Analyzed> {
        let Self {
            file,
            profile,
            names,
            args,
        } = self;
        let mut kallsyms = Kallsyms::parse(profile.kallsyms());
        let debug = match &args.vmlinux {
            Some(path) => {
                progress(Stage::DebugInfo);
                Some(load_debug_info(path, &args, &profile, &kallsyms, warn)?)
            }
            None => None,
        };
        // Without DWARF, the kernel's BTF names the fields; a bad one costs only the names.
        let btf = match (&debug, profile.btf()) {
            (None, Some(bytes)) => {
                progress(Stage::DebugInfo);
                Btf::parse(bytes)
                    .map_err(|e| {
                        warn(format!(
                            "the profile's BTF section does not parse ({e}): fields stay \
                             unnamed (--vmlinux names them from DWARF)"
                        ));
                    })
                    .ok()
            }
            _ => None,
        };
        pipeline::place_percpu_section(&mut kallsyms, &profile, btf.as_ref());
        let options = Options::default();
        let mut on_records = |p| progress(Stage::Records(p));
        // The records are read and checked during the analysis: a bad one is an error, and no
        // report is made.
        let with_debug = debug.as_ref().map(|d| WithDebugInfo::new(&kallsyms, d));
        let symbols: &dyn SymbolSource = match &with_debug {
            Some(s) => s,
            None => &kallsyms,
        };
        let mut report = match views {
            Some(views) => {
                pipeline::analyze_views(&profile, symbols, &options, views, &mut on_records)
            }
            None => pipeline::analyze_with_progress(&profile, symbols, &options, &mut on_records),
        }
        .map_err(|e| with_file(&file, e))?;
        if need_samples && report.coverage.total_samples == 0 {
            if report.causal.is_some() {
                bail!(
                    "{}: the profile has no access samples, only causal experiments: see them \
                     with dprof report --view causal",
                    file.display()
                );
            }
            bail!(
                "{}: the profile has no access samples: collect with --events samples",
                file.display()
            );
        }
        let fields: Option<&dyn FieldSource> = match (&debug, &btf) {
            (Some(d), _) => Some(d),
            (None, Some(b)) => Some(b),
            (None, None) => None,
        };
        annotate_fields(&mut report, &names, fields);
        Ok(Analyzed {
            report,
            have_field_names: fields.is_some(),
        })
    }
}

fn load_debug_info(
    path: &Path,
    args: &AnalysisArgs,
    profile: &Profile,
    kallsyms: &Kallsyms,
    warn: &mut dyn FnMut(String),
) -> anyhow::Result<DebugInfo> {
    let mut debug = DebugInfo::load(path, args.debug_dir.as_deref())?;
    if debug.matches(profile.header())? == MatchedBy::ReleaseOnly {
        warn(format!(
            "the profile records only the kernel release, so {} could not be checked against \
             its banner or build id",
            path.display()
        ));
    }
    // kallsyms lists kprobe and ftrace trampolines as [__builtin__*] modules: no .ko exists.
    let missing: Vec<String> = debug
        .use_kallsyms(kallsyms)?
        .into_iter()
        .filter(|m| !m.starts_with("__builtin__"))
        .collect();
    if !missing.is_empty() {
        let hint = if args.debug_dir.is_some() {
            "no MODULE.ko for them in --debug-dir"
        } else {
            "pass --debug-dir DIR with their MODULE.ko files"
        };
        warn(format!(
            "no debug info for module(s) {}: their fields and source lines stay unnamed ({hint})",
            missing.join(", ")
        ));
    }
    Ok(debug)
}

fn find_type<'r>(report: &'r Report, name: &str) -> anyhow::Result<&'r TypeProfile> {
    if let Some(t) = report.find_type(name) {
        return Ok(t);
    }
    let close = report.similar_types(name, 5);
    if close.is_empty() {
        let top: Vec<&str> = report
            .data_profile
            .types
            .iter()
            .take(5)
            .map(|t| t.name.as_str())
            .collect();
        let unsampled = match report.data_profile.unsampled_types {
            0 => String::new(),
            n => format!(
                " ({n} types only allocated, never sampled, are not listed: see --view \
                 working-set)"
            ),
        };
        bail!(
            "no type {name:?} in the profile; the most sampled are: {}{unsampled}",
            top.join(", ")
        );
    }
    bail!(
        "no type {name:?} in the profile; did you mean: {}?",
        close.join(", ")
    );
}

/// The report, or one type of it, with lists cut to `top` entries when given.
fn json(
    report: &Report,
    selected: Option<&TypeProfile>,
    top: Option<usize>,
    out: &mut impl Write,
) -> io::Result<()> {
    let cut = |t: &TypeProfile| {
        let mut t = t.clone();
        if let Some(n) = top {
            t.functions.truncate(n);
            t.fields.truncate(n);
            t.cpus.truncate(n);
        }
        t
    };
    let value = if let Some(t) = selected {
        serde_json::to_value(cut(t))
    } else {
        let mut r = report.clone();
        if let Some(n) = top {
            r.data_profile.types.truncate(n);
            r.unknown_functions.truncate(n);
        }
        r.data_profile.types = r.data_profile.types.iter().map(cut).collect();
        serde_json::to_value(r)
    }
    .map_err(io::Error::other)?;
    serde_json::to_writer_pretty(&mut *out, &value).map_err(io::Error::other)?;
    writeln!(out)
}

fn percent(n: u64, total: u64) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", n as f64 * 100.0 / total as f64)
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn offset_label(f: &dprof_model::FieldCount) -> String {
    match &f.field {
        Some(name) => format!("+{:#x} {name}", f.offset),
        None => format!("+{:#x}", f.offset),
    }
}

fn type_label(t: &TypeProfile) -> String {
    match &t.struct_name {
        Some(s) if *s != t.name => format!("{} ({s})", t.name),
        _ => t.name.clone(),
    }
}

fn text(report: &Report, top: usize, out: &mut impl Write) -> io::Result<()> {
    header_lines(report, out)?;
    let dp = &report.data_profile;
    if let Some(hw) = &dp.hardware {
        hardware_line(hw, out)?;
        writeln!(out)?;
        hardware_table(report, hw, top, out)?;
        return text_footer(report, top, out);
    }
    writeln!(out)?;
    writeln!(
        out,
        "Data profile: {} types, ranked by samples (software sampler: no miss data)",
        dp.types.len()
    )?;
    let mut table = Table::new(&[
        ("rank", true),
        ("type", false),
        ("samples", true),
        ("share", true),
        ("objects", true),
        ("bounce", false),
        ("peak objs", true),
        ("peak bytes", true),
        ("top function", false),
        ("top offset", false),
    ]);
    for t in dp.types.iter().take(top) {
        let bounce = if t.bounce {
            format!("yes ({})", t.bounced_objects)
        } else {
            "no".to_owned()
        };
        let top_fn = t.functions.first().map_or_else(
            || "-".to_owned(),
            |f| format!("{} {}", f.function, percent(f.samples, t.samples)),
        );
        let top_field = t.fields.first().map_or_else(
            || "-".to_owned(),
            |f| format!("{} {}", offset_label(f), percent(f.samples, t.samples)),
        );
        table.row(vec![
            t.rank.to_string(),
            type_label(t),
            t.samples.to_string(),
            percent(t.samples, dp.resolved_samples),
            t.objects.to_string(),
            bounce,
            opt(t.peak_live_objects),
            t.peak_live_bytes
                .map_or_else(|| "-".to_owned(), format_bytes),
            top_fn,
            top_field,
        ]);
    }
    table.write(out)?;
    text_footer(report, top, out)
}

/// "IBS" or "PEBS" (or both).
fn sampler_names(hw: &HardwareSummary) -> String {
    if hw.samplers.is_empty() {
        return "hardware".to_owned();
    }
    hw.samplers
        .iter()
        .map(|s| s.to_ascii_uppercase())
        .collect::<Vec<_>>()
        .join("+")
}

fn latency_text(mean: Option<f64>) -> String {
    mean.map_or_else(|| "-".to_owned(), |m| format!("{m:.1}"))
}

/// `L1 28.6%, L2 14.3%, L3 14.3%`: the first `n` sources with their share of `total`.
fn sources_text(sources: &[SourceCount], total: u64, n: usize) -> String {
    if sources.is_empty() {
        return "-".to_owned();
    }
    sources
        .iter()
        .take(n)
        .map(|c| format!("{} {}", c.source.name(), percent(c.samples, total)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The profile-wide hardware line under the coverage line.
fn hardware_line(hw: &HardwareSummary, out: &mut impl Write) -> io::Result<()> {
    let latency = match hw.mean_latency_cycles {
        Some(m) => format!(
            "mean latency {m:.1} cycles ({} samples)",
            hw.latency_samples
        ),
        None => "no latencies".to_owned(),
    };
    writeln!(
        out,
        "{}: {} samples of memory accesses, {} resolved with hit/miss data: {} missed L1 ({}), \
         {} HITM, {latency}; {} data addresses from the hardware, {} different from the decoded \
         instruction's",
        sampler_names(hw),
        hw.samples,
        hw.resolved_samples,
        hw.misses,
        percent(hw.misses, hw.resolved_samples),
        hw.hitm,
        hw.hardware_addresses,
        hw.address_mismatches
    )?;
    writeln!(
        out,
        "sources: {}",
        sources_text(&hw.sources, hw.resolved_samples, usize::MAX)
    )
}

/// The data profile ranked by misses.
fn hardware_table(
    report: &Report,
    hw: &HardwareSummary,
    top: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    let dp = &report.data_profile;
    writeln!(
        out,
        "Data profile: {} types, ranked by L1 data-cache misses ({})",
        dp.types.len(),
        sampler_names(hw)
    )?;
    writeln!(
        out,
        "(share: of all misses; miss rate and sources: of the type's hardware samples; latency: \
         mean cycles; top function and offset: by misses)"
    )?;
    let mut table = Table::new(&[
        ("rank", true),
        ("type", false),
        ("misses", true),
        ("share", true),
        ("miss rate", true),
        ("latency", true),
        ("HITM", true),
        ("samples", true),
        ("objects", true),
        ("bounce", false),
        ("peak bytes", true),
        ("sources", false),
        ("top function", false),
        ("top offset", false),
    ]);
    let none = TypeHardware::NONE;
    for t in dp.types.iter().take(top) {
        let h = t.hardware.as_ref().unwrap_or(&none);
        let bounce = if t.bounce {
            format!("yes ({})", t.bounced_objects)
        } else {
            "no".to_owned()
        };
        let top_fn = t.functions.first().map_or_else(
            || "-".to_owned(),
            |f| {
                format!(
                    "{} {}",
                    f.function,
                    percent(f.misses.unwrap_or(0), h.misses)
                )
            },
        );
        let top_field = t.fields.first().map_or_else(
            || "-".to_owned(),
            |f| {
                format!(
                    "{} {}",
                    offset_label(f),
                    percent(f.misses.unwrap_or(0), h.misses)
                )
            },
        );
        table.row(vec![
            t.rank.to_string(),
            type_label(t),
            h.misses.to_string(),
            percent(h.misses, hw.misses),
            percent(h.misses, h.samples),
            latency_text(h.mean_latency_cycles),
            h.hitm.to_string(),
            t.samples.to_string(),
            t.objects.to_string(),
            bounce,
            t.peak_live_bytes
                .map_or_else(|| "-".to_owned(), format_bytes),
            sources_text(&h.sources, h.samples, 3),
            top_fn,
            top_field,
        ]);
    }
    table.write(out)
}

/// What follows the data profile table: how many rows were left out, the address set, and
/// the unknown addresses.
fn text_footer(report: &Report, top: usize, out: &mut impl Write) -> io::Result<()> {
    let dp = &report.data_profile;
    if dp.types.len() > top {
        writeln!(
            out,
            "... {} more types (--top N shows more)",
            dp.types.len() - top
        )?;
    }
    match dp.unsampled_types {
        0 => {}
        n => writeln!(
            out,
            "{n} {} only allocated, never sampled, left out (their objects count in the address \
             set and the working-set view)",
            if n == 1 { "type" } else { "types" }
        )?,
    }
    writeln!(out)?;
    let a = &report.address_set;
    writeln!(
        out,
        "address set: allocations {}, frees {} (+ {} of unknown objects, {} of NULL), missed \
         frees {}; live objects: peak {}, at the end {}",
        a.allocs,
        a.frees,
        a.unknown_frees,
        a.null_frees,
        a.missed_frees,
        a.peak_live_objects,
        a.live_at_end
    )?;
    // The pools behind the types shown: each holds several caches' objects.
    merged_cache_lines(report, dp.types.iter().take(top), out)?;
    if let Some(found) = &report.coverage.by_instruction {
        instruction_types_text(report, found, top, out)?;
    }
    let unknown = report.coverage.count(dprof_model::Bucket::UnknownAddress);
    if unknown > 0 {
        let fns: Vec<String> = report
            .unknown_functions
            .iter()
            .take(5)
            .map(|f| format!("{} ({})", f.function, f.samples))
            .collect();
        writeln!(
            out,
            "unknown addresses: {unknown} samples, from {}",
            fns.join(", ")
        )?;
    }
    Ok(())
}

/// Adds `n` to `name`'s count.
fn add_count<'a>(counts: &mut Vec<(&'a str, u64)>, name: &'a str, n: u64) {
    match counts.iter_mut().find(|(c, _)| *c == name) {
        Some((_, count)) => *count += n,
        None => counts.push((name, n)),
    }
}

/// What typing by instruction found: its share, the types it named, and the cross-check with
/// the address's type, disagreements listed (at most `top`).
fn instruction_types_text(
    report: &Report,
    found: &InstructionTypes,
    top: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "typed by instruction (the struct the variable in the operand's base register points \
         to, from DWARF): {} of {} samples with a disp(%base) operand; of them {} resolved to \
         no type by address, {} to a type split by site",
        found.typed_samples, found.operand_samples, found.typed_unknown, found.typed_generic
    )?;
    // What the address made of the typed samples, and the stack's structs (locals the
    // address resolver can only call `stack`).
    let mut by_kind: Vec<(&str, u64)> = Vec::new();
    let mut on_stack: Vec<(&str, u64)> = Vec::new();
    for site in &found.sites {
        let kind = site.address_type.as_deref().map_or("unknown", |name| {
            report
                .data_profile
                .types
                .iter()
                .find(|t| t.name == name)
                .map_or("other", |t| t.kind.name())
        });
        add_count(&mut by_kind, kind, site.samples);
        if kind == TypeKind::Stack.name() {
            add_count(&mut on_stack, &site.struct_name, site.samples);
        }
    }
    let listed = |counts: &mut Vec<(&str, u64)>| {
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        counts
            .iter()
            .take(top)
            .map(|(name, n)| format!("{name} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(out, "  by the address's kind: {}", listed(&mut by_kind))?;
    if !on_stack.is_empty() {
        writeln!(out, "  on the stack, by struct: {}", listed(&mut on_stack))?;
    }
    if !found.unknown_by_struct.is_empty() {
        let structs: Vec<String> = found
            .unknown_by_struct
            .iter()
            .take(top)
            .map(|s| format!("struct {} ({})", s.struct_name, s.samples))
            .collect();
        writeln!(out, "  unknown addresses by struct: {}", structs.join(", "))?;
    }
    for g in &found.generic_types {
        writeln!(
            out,
            "  {} is struct {}: {} of its {} typed samples point to it at the object's start",
            g.type_name, g.struct_name, g.samples, g.typed_samples
        )?;
    }
    writeln!(
        out,
        "  cross-check with the cache's struct: {} samples compared, {} agree ({})",
        found.compared_samples,
        found.agreed_samples,
        percent(found.agreed_samples, found.compared_samples)
    )?;
    let disagree: Vec<_> = found
        .sites
        .iter()
        .filter(|s| s.agrees == Some(false))
        .collect();
    for s in disagree.iter().take(top) {
        writeln!(
            out,
            "    disagree at {:#x} {}: {} +{:#x} {}; instruction: {} *{} +{:#x} {} ({} samples)",
            s.ip,
            s.function,
            s.address_type.as_deref().unwrap_or("?"),
            s.offset.unwrap_or(0),
            s.address_field.as_deref().unwrap_or("?"),
            s.struct_name,
            s.variable,
            s.displacement,
            s.field.as_deref().unwrap_or("?"),
            s.samples
        )?;
    }
    if disagree.len() > top {
        writeln!(
            out,
            "    ... {} more disagreements (--json lists them all)",
            disagree.len() - top
        )?;
    }
    Ok(())
}

fn type_text(
    report: &Report,
    t: &TypeProfile,
    top: usize,
    have_field_names: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    type_summary(report, t, out)?;
    type_tables(t, top, have_field_names, out)
}

/// The lines about one type above its tables.
fn type_summary(report: &Report, t: &TypeProfile, out: &mut impl Write) -> io::Result<()> {
    header_lines(report, out)?;
    writeln!(out)?;
    let what = t.description();
    writeln!(out, "Type {} ({})", t.name, what.join(", "))?;
    merged_cache_lines(report, [t], out)?;
    if let Some(g) = report
        .coverage
        .by_instruction
        .iter()
        .flat_map(|found| &found.generic_types)
        .find(|g| g.type_name == t.name)
    {
        writeln!(
            out,
            "struct {} by instruction: {} of its {} typed samples point to it at the object's \
             start",
            g.struct_name, g.samples, g.typed_samples
        )?;
    }
    writeln!(
        out,
        "samples: {} ({} of resolved): reads {}, writes {}, read-modify-writes {}",
        t.samples,
        percent(t.samples, report.data_profile.resolved_samples),
        t.reads,
        t.writes,
        t.read_writes
    )?;
    if let Some(h) = &t.hardware {
        type_hardware(report, h, out)?;
    }
    let unit = t.kind.instances();
    writeln!(
        out,
        "{unit} touched: {}, of them touched from more than one CPU: {} (bounce: {})",
        t.objects,
        t.bounced_objects,
        if t.bounce { "yes" } else { "no" }
    )?;
    if let Some(moved) = t.bounced_histories {
        writeln!(
            out,
            "object access histories with a CPU change: {moved} (they count as bounced objects)"
        )?;
    }
    if t.kind == TypeKind::Slab {
        writeln!(
            out,
            "address set: allocations {}, frees {}; live: peak {} objects, peak {}",
            opt(t.allocs),
            opt(t.frees),
            opt(t.peak_live_objects),
            t.peak_live_bytes
                .map_or_else(|| "-".to_owned(), format_bytes),
        )?;
    }
    Ok(())
}

/// The hardware lines of one type.
fn type_hardware(report: &Report, h: &TypeHardware, out: &mut impl Write) -> io::Result<()> {
    let latency = match h.mean_latency_cycles {
        Some(m) => format!("mean latency {m:.1} cycles ({} samples)", h.latency_samples),
        None => "no latencies".to_owned(),
    };
    let all_misses = report
        .data_profile
        .hardware
        .as_ref()
        .map_or(0, |s| s.misses);
    writeln!(
        out,
        "hardware: {} samples with hit/miss data: {} missed L1 ({} miss rate, {} of all \
         misses), {} HITM, {latency}",
        h.samples,
        h.misses,
        percent(h.misses, h.samples),
        percent(h.misses, all_misses),
        h.hitm,
    )?;
    let sources: Vec<String> = h
        .sources
        .iter()
        .map(|c| {
            format!(
                "{} {} ({})",
                c.source.name(),
                c.samples,
                percent(c.samples, h.samples)
            )
        })
        .collect();
    if sources.is_empty() {
        writeln!(out, "sources: -")
    } else {
        writeln!(out, "sources: {}", sources.join(", "))
    }
}

/// Offsets, functions and CPUs of one type.
fn type_tables(
    t: &TypeProfile,
    top: usize,
    have_field_names: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Offsets{}",
        if have_field_names {
            ""
        } else {
            " (field names need --vmlinux)"
        }
    )?;
    // With hardware samples: a misses column, and "-" for a size no one knows.
    let hw = t.hardware.is_some();
    let with_misses = |mut cols: Vec<(&'static str, bool)>, at: usize| {
        if hw {
            cols.insert(at, ("misses", true));
        }
        cols
    };
    let misses_cell = |cells: &mut Vec<String>, at: usize, misses: Option<u64>| {
        if hw {
            cells.insert(at, misses.unwrap_or(0).to_string());
        }
    };
    let mut fields = Table::new(&with_misses(
        vec![
            ("offset", false),
            ("size", true),
            ("samples", true),
            ("share", true),
            ("R", true),
            ("W", true),
            ("RW", true),
        ],
        2,
    ));
    for f in t.fields.iter().take(top) {
        let mut cells = vec![
            offset_label(f),
            if hw && f.size == 0 {
                "-".to_owned()
            } else {
                f.size.to_string()
            },
            f.samples.to_string(),
            percent(f.samples, t.samples),
            f.reads.to_string(),
            f.writes.to_string(),
            f.read_writes.to_string(),
        ];
        misses_cell(&mut cells, 2, f.misses);
        fields.row(cells);
    }
    fields.write(out)?;
    more(out, t.fields.len(), top, "offsets")?;
    writeln!(out)?;
    writeln!(out, "Functions")?;
    let mut fns = Table::new(&with_misses(
        vec![
            ("function", false),
            ("samples", true),
            ("share", true),
            ("R", true),
            ("W", true),
            ("RW", true),
        ],
        1,
    ));
    for f in t.functions.iter().take(top) {
        let mut cells = vec![
            f.function.clone(),
            f.samples.to_string(),
            percent(f.samples, t.samples),
            f.reads.to_string(),
            f.writes.to_string(),
            f.read_writes.to_string(),
        ];
        misses_cell(&mut cells, 1, f.misses);
        fns.row(cells);
    }
    fns.write(out)?;
    more(out, t.functions.len(), top, "functions")?;
    writeln!(out)?;
    writeln!(out, "CPUs")?;
    let mut cpus = Table::new(&[("cpu", true), ("samples", true), ("share", true)]);
    for c in t.cpus.iter().take(top) {
        cpus.row(vec![
            c.cpu.to_string(),
            c.samples.to_string(),
            percent(c.samples, t.samples),
        ]);
    }
    cpus.write(out)?;
    more(out, t.cpus.len(), top, "CPUs")
}
