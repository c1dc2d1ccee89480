//! `dprof-accuracy`: dprof's typing side by side with perf's data-type profiling
//! (`perf report -s type`, Linux 6.8+), on the same workload recorded twice in the guest
//! (`scripts/bench accuracy`, `tests/qemu/bench/accuracy.sh`) and the same vmlinux.
//!
//! ```text
//! dprof-accuracy --vmlinux VMLINUX --perf-report REPORT --dprof PROFILE [--top N]
//! ```
//!
//! REPORT is `perf report --stdio -n -t '|' -s addr,sym,type --vmlinux VMLINUX` of the perf
//! run; PROFILE the dprof run's profile, analyzed here with VMLINUX's DWARF as `dprof report
//! --vmlinux` does. Prints, for each tool, the fraction of memory-operand samples it typed
//! (idle left out; the instruction at each ip decoded from VMLINUX, the same rule for both),
//! with real types only and with stack pseudo-types; then, per instruction both typed, how
//! often they name the same C type, and the top disagreements.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use dprof_abi::Record;
use dprof_analysis::debuginfo::DebugInfo;
use dprof_analysis::pipeline::{Analyzer, Options};
use dprof_analysis::report::{annotate_fields, StructNames};
use dprof_analysis::resolve::WithDebugInfo;
use dprof_analysis::symbols::Kallsyms;
use dprof_format::Profile;
use dprof_model::TypeKind;

use compare::{ByIp, Named};
use vmlinux::Vmlinux;

// A binary's modules sit beside it in src/bin, where Cargo would take them for binaries.
#[path = "dprof-accuracy/compare.rs"]
mod compare;
#[path = "dprof-accuracy/perf_report.rs"]
mod perf_report;
#[path = "dprof-accuracy/vmlinux.rs"]
mod vmlinux;

const USAGE: &str =
    "usage: dprof-accuracy --vmlinux VMLINUX --perf-report REPORT --dprof PROFILE [--top N]";

/// The command line.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    vmlinux: PathBuf,
    perf_report: PathBuf,
    dprof: PathBuf,
    top: usize,
}

fn parse_args(args: &[String]) -> Result<Args> {
    let (mut vmlinux, mut perf_report, mut dprof, mut top) = (None, None, None, 10);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .with_context(|| format!("{flag} needs a value; {USAGE}"))
        };
        match flag.as_str() {
            "--vmlinux" => vmlinux = Some(PathBuf::from(value()?)),
            "--perf-report" => perf_report = Some(PathBuf::from(value()?)),
            "--dprof" => dprof = Some(PathBuf::from(value()?)),
            "--top" => {
                let v = value()?;
                top = v
                    .parse()
                    .with_context(|| format!("--top {v:?} is not a count"))?;
            }
            other => bail!("unknown argument {other:?}; {USAGE}"),
        }
    }
    let need =
        |p: Option<PathBuf>, flag: &str| p.with_context(|| format!("{flag} is missing; {USAGE}"));
    Ok(Args {
        vmlinux: need(vmlinux, "--vmlinux")?,
        perf_report: need(perf_report, "--perf-report")?,
        dprof: need(dprof, "--dprof")?,
        top,
    })
}

/// perf's rows by instruction.
fn perf_by_ip(rows: &[perf_report::Row]) -> ByIp {
    let mut by_ip = ByIp::new();
    for row in rows {
        let at = by_ip.entry(row.ip).or_default();
        at.samples += row.samples;
        let t = row.type_name.as_str();
        if t == perf_report::UNKNOWN {
            continue;
        }
        if perf_report::STACK_PSEUDO_TYPES.contains(&t) {
            at.stack += row.samples;
        } else {
            let named = Named {
                shown: t.to_owned(),
                c_type: Some(compare::normalise(t)),
            };
            at.add_real(named, row.samples);
        }
    }
    by_ip
}

/// dprof's answer per instruction: every sample by ip, and the types the analysis gave them
/// (with `--vmlinux`'s DWARF, as `dprof report --vmlinux` runs it), each type with its C
/// type where dprof knows one. Also returns dprof's own coverage line.
fn dprof_by_ip(path: &Path, vmlinux_path: &Path, vmlinux: &Vmlinux) -> Result<(ByIp, String)> {
    let profile = Profile::open(path).with_context(|| format!("opening {}", path.display()))?;
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let mut debug = DebugInfo::load(vmlinux_path, None)?;
    debug.matches(profile.header()).with_context(|| {
        format!(
            "{} is not the kernel {} was recorded on",
            vmlinux_path.display(),
            path.display()
        )
    })?;
    debug.use_kallsyms(&kallsyms)?;
    let symbols = WithDebugInfo::new(&kallsyms, &debug);
    let options = Options {
        two_threads: false,
        ..Options::default()
    };
    let mut analyzer = Analyzer::new(profile.header(), &symbols, &options);
    analyzer.set_page_owners(profile.page_owners());
    if profile.version() >= 2 {
        analyzer.records_in_time_order();
    }
    let mut by_ip = ByIp::new();
    for item in profile.records() {
        let (header, record) = item.with_context(|| format!("reading {}", path.display()))?;
        if let Record::AccessSample(sample) = &record {
            by_ip.entry(sample.ip).or_default().samples += 1;
        }
        analyzer.push(&header, &record);
    }
    let (mut report, sampled) = analyzer.finish_with_accesses();
    annotate_fields(&mut report, &StructNames::builtin(), Some(&debug));
    let kinds: HashMap<&str, (TypeKind, Option<&str>)> = report
        .data_profile
        .types
        .iter()
        .map(|t| (t.name.as_str(), (t.kind, t.struct_name.as_deref())))
        .collect();
    for (type_name, ip, samples) in sampled.samples_by_type_and_ip() {
        let at = by_ip.entry(ip).or_default();
        let (kind, struct_name) = kinds
            .get(type_name)
            .copied()
            .unwrap_or((TypeKind::Region, None));
        let variable = |prefix: &str| {
            type_name
                .strip_prefix(prefix)
                .and_then(|v| vmlinux.variable_type(v))
                .map(compare::normalise)
        };
        let c_type = match (kind, struct_name) {
            (TypeKind::Stack, _) => {
                at.stack += samples;
                continue;
            }
            (_, Some(st)) => Some(compare::normalise(st)),
            (TypeKind::Slab, None) => None,
            (TypeKind::Global, None) => variable("global:"),
            (TypeKind::Percpu, None) => variable("percpu:"),
            (TypeKind::Region, None) => {
                at.region += samples;
                continue;
            }
        };
        let shown = match struct_name {
            // Variables' C types come with their keyword (`struct pglist_data`), slab
            // types' structs without.
            Some(st) if compare::normalise(type_name) != compare::normalise(st) => {
                let st = st.strip_prefix("struct ").unwrap_or(st);
                format!("{type_name} (struct {st})")
            }
            _ => type_name.to_owned(),
        };
        at.add_real(Named { shown, c_type }, samples);
    }
    Ok((by_ip, report.coverage.summary))
}

fn typed_line(out: &mut String, tool: &str, t: &compare::Typed) -> std::fmt::Result {
    writeln!(
        out,
        "{tool:<6} typed {:5.1}% with real types, {:5.1}% with stack pseudo-types, {:5.1}% \
         with regions too, of {} memory-operand samples",
        t.percent(t.real),
        t.percent(t.with_stack),
        t.percent(t.with_regions),
        t.memory
    )?;
    writeln!(
        out,
        "       ({} samples: left out {} idle, {} without memory operand, {} outside vmlinux, \
         {} user mode)",
        t.samples, t.idle, t.no_memory_operand, t.outside_vmlinux, t.user,
    )
}

fn render(perf: &ByIp, dprof: &ByIp, coverage: &str, code: &Vmlinux, top: usize) -> Result<String> {
    let mut out = String::new();
    let (p, d) = (compare::typed(perf, code), compare::typed(dprof, code));
    typed_line(&mut out, "perf", &p)?;
    typed_line(&mut out, "dprof", &d)?;
    writeln!(out, "dprof's own coverage line: {coverage}")?;
    let a = compare::agreement(perf, dprof, code);
    let not_comparable: u64 = a.not_comparable.iter().map(|c| c.samples).sum();
    writeln!(
        out,
        "agreement: {:.1}% of {} samples ({} instructions both typed, perf's and dprof's samples \
         added; {} of them a struct page against a folio, slab or ptdesc; {} samples where \
         dprof's type has no C type left out; {} samples where one typed the stack and the \
         other a real type)",
        a.percent(),
        a.compared,
        a.instructions,
        a.agreed_as_page_overlay,
        not_comparable,
        a.stack_against_real.iter().map(|c| c.samples).sum::<u64>()
    )?;
    for (title, list) in [
        ("top disagreements", &a.disagreements),
        (
            "top instructions whose dprof type has no C type",
            &a.not_comparable,
        ),
        (
            "top instructions one typed as the stack, the other with a real type",
            &a.stack_against_real,
        ),
    ] {
        if list.is_empty() {
            continue;
        }
        writeln!(out, "{title}:")?;
        for c in list.iter().take(top) {
            writeln!(
                out,
                "  {:#x} {:<32} {:>5} samples  perf: {:<28} dprof: {}",
                c.ip, c.function, c.samples, c.perf, c.dprof
            )?;
        }
    }
    Ok(out)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = parse_args(&args)?;
    let vmlinux = Vmlinux::load(&args.vmlinux)?;
    let text = std::fs::read_to_string(&args.perf_report)
        .with_context(|| format!("cannot read {}", args.perf_report.display()))?;
    let rows = perf_report::parse(&text).with_context(|| args.perf_report.display().to_string())?;
    if rows.is_empty() {
        bail!(
            "{}: perf's report has no samples",
            args.perf_report.display()
        );
    }
    let perf = perf_by_ip(&rows);
    let (dprof, coverage) = dprof_by_ip(&args.dprof, &args.vmlinux, &vmlinux)?;
    print!("{}", render(&perf, &dprof, &coverage, &vmlinux, args.top)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|&a| a.to_owned()).collect()
    }

    #[test]
    fn reads_its_arguments() {
        let args = parse_args(&strings(&[
            "--vmlinux",
            "v",
            "--perf-report",
            "r",
            "--dprof",
            "p",
            "--top",
            "3",
        ]))
        .expect("good arguments parse");
        assert_eq!(
            args,
            Args {
                vmlinux: "v".into(),
                perf_report: "r".into(),
                dprof: "p".into(),
                top: 3
            }
        );
        for (bad, expected) in [
            (&["--vmlinux"][..], "--vmlinux needs a value"),
            (
                &["--vmlinux", "v", "--perf-report", "r"][..],
                "--dprof is missing",
            ),
            (&["--top", "x"][..], "--top \"x\" is not a count"),
            (&["--what"][..], "unknown argument \"--what\""),
        ] {
            let e = parse_args(&strings(bad)).expect_err("bad arguments are an error");
            assert!(format!("{e:#}").contains(expected), "{bad:?}: {e:#}");
        }
    }

    /// The text between `<<'WORKLOAD'` and `WORKLOAD` in a guest script.
    fn workload(script: &str) -> Option<&str> {
        let start = script.find("<<'WORKLOAD'\n")? + "<<'WORKLOAD'\n".len();
        let len = script[start..].find("\nWORKLOAD\n")?;
        Some(&script[start..start + len])
    }

    #[test]
    fn the_bench_runs_the_workload_of_workload_data_profile() {
        let bench = workload(include_str!("../../../bench/accuracy.sh"));
        let scenario = workload(include_str!("../../../scenarios/workload-data-profile.sh"));
        assert!(bench.is_some_and(|w| w.contains("wget")), "{bench:?}");
        assert_eq!(bench, scenario);
    }

    #[test]
    fn sorts_perf_rows_into_real_stack_and_unknown() {
        let row = |ip, samples, t: &str| perf_report::Row {
            ip,
            kernel: true,
            samples,
            type_name: t.into(),
        };
        let by_ip = perf_by_ip(&[
            row(1, 3, "struct sock"),
            row(1, 1, "(unknown)"),
            row(2, 2, "(stack operation)"),
            row(2, 1, "(stack canary)"),
        ]);
        assert_eq!(by_ip[&1].samples, 4);
        assert_eq!(
            by_ip[&1].real,
            vec![(
                Named {
                    shown: "struct sock".into(),
                    c_type: Some("sock".into())
                },
                3
            )]
        );
        assert_eq!((by_ip[&2].samples, by_ip[&2].stack), (3, 3));
    }
}
