use dprof_collect::options::{Event, Period as PeriodArg};
use dprof_collect::samplers::{self, HardwareSamplers};
use dprof_collect::sampling::{plan, Sampling};
use dprof_format::{CpuCounters, DeviceCounters, StopInfo, StopReason};

use super::*;

fn stop(lost: [u64; 3]) -> StopInfo {
    StopInfo {
        reason: StopReason::DurationElapsed,
        ended_unix_s: 0,
        elapsed_ns: 2_500_000_000,
        device: Some(DeviceCounters {
            records_written: 1000,
            records_lost: lost.iter().sum(),
            bytes_read: 64_000,
            cpus: lost
                .iter()
                .map(|&records_lost| CpuCounters {
                    records_written: 1,
                    records_lost,
                })
                .collect(),
            histories: None,
        }),
    }
}

fn recorded(path: &str, records: u64, bytes: u64, stop: StopInfo) -> Recorded {
    Recorded {
        path: PathBuf::from(path),
        records,
        bytes,
        stop,
        workload: None,
        cpu_ns: None,
    }
}

#[test]
fn summary_line_without_losses() {
    let lines = report_lines(
        &recorded("out.dprof", 1000, 64_000, stop([0; 3])),
        4 << 20,
        Some(10 << 20),
    );
    assert_eq!(
        lines,
        [
            "dprof: 1000 records (62.5 KiB), 0 lost; out.dprof: 10 MiB with the kernel's \
             symbols and types (duration elapsed, 2.500000000 s)"
        ]
    );
    // A file that could not be measured is not given a size.
    let unmeasured = report_lines(
        &recorded("out.dprof", 1000, 64_000, stop([0; 3])),
        4 << 20,
        None,
    );
    assert_eq!(
        unmeasured,
        ["dprof: 1000 records (62.5 KiB), 0 lost; out.dprof (duration elapsed, 2.500000000 s)"]
    );
}

#[test]
fn summary_line_says_what_the_collector_cost_per_record() {
    let run = Recorded {
        cpu_ns: Some(250_000_000),
        ..recorded("out.dprof", 1_000_000, 64_000, stop([0; 3]))
    };
    assert_eq!(
        report_lines(&run, 4 << 20, None),
        [
            "dprof: 1000000 records (62.5 KiB), 0 lost; out.dprof (duration elapsed, \
             2.500000000 s); collector CPU 0.250000000 s (0.25 µs per record)"
        ]
    );
}

#[test]
fn losses_are_loud_and_suggest_a_ring_size() {
    let lines = report_lines(&recorded("o", 10, 640, stop([5, 0, 7])), 4 << 20, None);
    assert_eq!(lines.len(), 2);
    assert!(lines[0].contains(" 12 lost;"), "{}", lines[0]);
    assert_eq!(
        lines[1],
        "dprof: WARNING: 12 RECORDS WERE LOST (cpu0=5 cpu2=7): the per-CPU rings filled \
         faster than dprof read them, so this profile is missing events; collect again with \
         a larger --ring-size (now 4 MiB per CPU; try --ring-size 16M)"
    );
    let at_max = report_lines(&recorded("o", 10, 640, stop([1, 0, 0])), 256 << 20, None);
    assert!(
        at_max[1].ends_with("collect fewer events or for a shorter time"),
        "{}",
        at_max[1]
    );
}

/// The collector's options from a real command line.
fn args(extra: &[&str]) -> CollectOptions {
    use clap::Parser;
    let argv = ["dprof", "collect", "-o", "x.dprof", "--duration", "1s"];
    let cli = crate::Cli::try_parse_from(argv.iter().chain(extra)).expect("parses");
    match cli.command {
        crate::Command::Collect(a) => a.options(),
        other => panic!("not collect: {other:?}"),
    }
}

const NO_IBS: &str = "IBS needs an AMD CPU, and this one is GenuineIntel";
const NO_PEBS: &str = "this Intel CPU runs under a hypervisor that exposes no core PMU (no \
                       /sys/bus/event_source/devices/cpu)";

/// A cloud VM's answer: neither sampler.
fn no_hw() -> HardwareSamplers {
    HardwareSamplers {
        ibs: Err(NO_IBS.to_owned()),
        pebs: Err(NO_PEBS.to_owned()),
    }
}

fn ibs_caps() -> samplers::IbsCaps {
    samplers::IbsCaps {
        pmu_type: 11,
        config: 1 << 19,
        counts_ops: true,
        zen4: true,
    }
}

fn pebs_caps() -> samplers::PebsCaps {
    samplers::PebsCaps {
        pmu: "cpu".to_owned(),
        pmu_type: 4,
        pmu_name: Some("skylake".to_owned()),
        event: "event=0xcd,umask=0x1,ldlat=3".to_owned(),
        config: 0x1cd,
        config1: 3,
    }
}

fn amd() -> HardwareSamplers {
    HardwareSamplers {
        ibs: Ok(ibs_caps()),
        pebs: Err("PEBS needs an Intel CPU, and this one is AuthenticAMD".to_owned()),
    }
}

fn intel() -> HardwareSamplers {
    HardwareSamplers {
        ibs: Err(NO_IBS.to_owned()),
        pebs: Ok(pebs_caps()),
    }
}

const ALL: u32 = dprof_abi::SAMPLER_SOFTWARE | dprof_abi::SAMPLER_IBS | dprof_abi::SAMPLER_PEBS;

#[test]
fn events_default_to_what_the_module_offers() {
    let software = Some(dprof_abi::SAMPLER_SOFTWARE);
    let p = plan(&args(&[]), software, &no_hw()).expect("plan");
    assert_eq!(p.events, [Event::Slab, Event::Samples]);
    assert_eq!(p.sampling, Some(Sampling::software(1_000_000, false)));
    assert_eq!(p.note, None);
    let p = plan(&args(&[]), Some(0), &no_hw()).expect("plan");
    assert_eq!(p.events, [Event::Slab]);
    assert_eq!(p.sampling, None);
    assert!(p.note.is_some_and(|n| n.contains("no sampler")));
    let p = plan(
        &args(&[
            "--events",
            "samples,slab,samples",
            "--period",
            "250us",
            "--sample-user",
        ]),
        software,
        &no_hw(),
    )
    .expect("plan");
    assert_eq!(p.events, [Event::Slab, Event::Samples]);
    assert_eq!(p.sampling, Some(Sampling::software(250_000, true)));
    let p = plan(&args(&["--events", "slab"]), software, &no_hw()).expect("plan");
    assert_eq!((p.events.len(), p.sampling), (1, None));
}

#[test]
fn an_absent_sampler_is_one_sentence() {
    let err = plan(
        &args(&["--events", "samples", "--sampler", "software"]),
        Some(0),
        &no_hw(),
    )
    .expect_err("no sampler");
    assert_eq!(
        err.to_string(),
        "the module offers no software sampler (samplers 0x0): rebuild dprof.ko with it, \
         or collect --events slab"
    );
    let err = plan(
        &args(&["--events", "samples"]),
        Some(dprof_abi::SAMPLER_IBS),
        &no_hw(),
    )
    .expect_err("no usable sampler");
    assert_eq!(
        err.to_string(),
        format!(
            "the module offers no sampler this machine can use (samplers 0x2; no IBS: \
             {NO_IBS}; no PEBS: {NO_PEBS}): collect without samples, e.g. --events slab"
        )
    );
    // Asked for by name on a machine without them: before the module is even asked.
    let err = plan(&args(&["--sampler", "ibs"]), None, &no_hw()).expect_err("no IBS");
    assert_eq!(
        err.to_string(),
        format!("cannot sample with IBS: {NO_IBS}; use --sampler software")
    );
    let err = plan(&args(&["--sampler", "pebs"]), None, &no_hw()).expect_err("no PEBS");
    assert_eq!(
        err.to_string(),
        format!("cannot sample with PEBS: {NO_PEBS}; use --sampler software")
    );
    // The machine has IBS, the module does not.
    let err = plan(&args(&["--sampler", "ibs"]), Some(1), &amd()).expect_err("module");
    assert_eq!(
        err.to_string(),
        "the module offers no IBS sampler (samplers 0x1): load a dprof.ko built with it, or \
         use --sampler software"
    );
}

#[test]
fn auto_picks_ibs_then_pebs_then_software_and_says_why() {
    let p = plan(&args(&[]), Some(ALL), &amd()).expect("plan");
    assert_eq!(
        p.sampling,
        Some(Sampling {
            kind: dprof_abi::SAMPLER_KIND_IBS,
            name: "ibs",
            period: 0x40000,
            unit: "ops",
            user: false,
            pmu: "ibs_op".to_owned(),
            pmu_type: 11,
            pmu_config: 1 << 19,
            pmu_config1: 0,
        })
    );
    let header = p.sampling.as_ref().map(Sampling::header_config);
    assert_eq!(
        header.and_then(|h| h.period_events),
        Some(dprof_format::PeriodEvents {
            count: 0x40000,
            unit: "ops".to_owned()
        })
    );
    assert_eq!(
        p.pick.as_deref(),
        Some("ibs (AMD IBS op, ibs_op PMU type 11, every 262144 ops)")
    );
    let p = plan(&args(&[]), Some(ALL), &intel()).expect("plan");
    let s = p.sampling.expect("sampling");
    assert_eq!(
        (
            s.kind,
            s.period,
            s.unit,
            s.pmu_type,
            s.pmu_config,
            s.pmu_config1
        ),
        (dprof_abi::SAMPLER_KIND_PEBS, 100_003, "loads", 4, 0x1cd, 3)
    );
    assert_eq!(
        p.pick.as_deref(),
        Some(
            "pebs (Intel PEBS load latency, cpu PMU (skylake) type 4, mem-loads \
             event=0xcd,umask=0x1,ldlat=3, every 100003 loads; no IBS: IBS needs an AMD \
             CPU, and this one is GenuineIntel)"
        )
    );
    let p = plan(&args(&[]), Some(ALL), &no_hw()).expect("plan");
    assert_eq!(p.sampling, Some(Sampling::software(1_000_000, false)));
    assert_eq!(
        p.pick,
        Some(format!("software (no IBS: {NO_IBS}; no PEBS: {NO_PEBS})"))
    );
    // IBS on the CPU, not in the module.
    let p = plan(&args(&[]), Some(dprof_abi::SAMPLER_SOFTWARE), &amd()).expect("plan");
    assert_eq!(p.sampling.map(|s| s.name), Some("software"));
    assert!(p
        .pick
        .is_some_and(|l| l.starts_with("software (no IBS: the module offers no IBS sampler;")),);
}

#[test]
fn auto_follows_the_kind_of_period() {
    // A time: the software sampler, even where IBS exists.
    let p = plan(&args(&["--period", "250us"]), Some(ALL), &amd()).expect("plan");
    assert_eq!(p.sampling, Some(Sampling::software(250_000, false)));
    assert_eq!(
        p.pick.as_deref(),
        Some(
            "software (not IBS: --period 250us is a time, and IBS counts events; no PEBS: \
             PEBS needs an Intel CPU, and this one is AuthenticAMD)"
        )
    );
    // A count: a hardware sampler or nothing.
    let p = plan(&args(&["--period", "65536"]), Some(ALL), &amd()).expect("plan");
    assert_eq!(p.sampling.map(|s| (s.name, s.period)), Some(("ibs", 65536)));
    let err = plan(&args(&["--period", "65536"]), None, &no_hw()).expect_err("no hw");
    assert_eq!(
        err.to_string(),
        format!(
            "--period 65536 is a count of events, for IBS or PEBS, and neither can be used \
             (no IBS: {NO_IBS}; no PEBS: {NO_PEBS}): give the software sampler a time, e.g. \
             --period 1ms"
        )
    );
}

#[test]
fn periods_are_checked_per_sampler() {
    let ibs = |p: &str| {
        plan(&args(&["--sampler", "ibs", "--period", p]), None, &amd())
            .map(|p| p.sampling.map(|s| s.period))
            .map_err(|e| e.to_string())
    };
    assert_eq!(ibs("4096"), Ok(Some(4096)));
    assert_eq!(ibs("16"), Ok(Some(16)));
    assert_eq!(ibs("134217712"), Ok(Some(0x7FF_FFF0)));
    assert_eq!(
        ibs("1000"),
        Err(
            "--period 1000 is not a multiple of 16, which IBS needs (it counts in units of \
             16): use 992 or 1008"
                .to_owned()
        )
    );
    assert_eq!(
        ibs("8"),
        Err("--period 8 is below IBS's smallest period, 16".to_owned())
    );
    assert_eq!(
        ibs("134217728"),
        Err("--period 134217728 is above IBS's largest period, 134217712 (0x7fffff0)".to_owned())
    );
    assert_eq!(
        ibs("1ms"),
        Err(
            "--period 1ms is a time, but IBS counts ops: give a number, e.g. --period 262144"
                .to_owned()
        )
    );
    let pebs = |p: &str| {
        plan(&args(&["--sampler", "pebs", "--period", p]), None, &intel())
            .map(|p| p.sampling.map(|s| s.period))
            .map_err(|e| e.to_string())
    };
    assert_eq!(pebs("10007"), Ok(Some(10_007)));
    assert_eq!(
        pebs("999"),
        Err(
            "--period 999 is below PEBS's smallest period, 1000 loads: shorter ones flood \
             the rings with PEBS records"
                .to_owned()
        )
    );
    assert_eq!(
        pebs("5000000000"),
        Err("--period 5000000000 is above the largest period, 4294967295".to_owned())
    );
    assert_eq!(
        pebs("10ms"),
        Err(
            "--period 10ms is a time, but PEBS counts loads: give a number, e.g. --period \
             100003"
                .to_owned()
        )
    );
    let err = plan(
        &args(&["--sampler", "software", "--period", "65536"]),
        None,
        &no_hw(),
    )
    .expect_err("count for software");
    assert_eq!(
        err.to_string(),
        "--period 65536 is a count of events, but the software sampler takes the time \
         between samples, e.g. --period 1ms"
    );
}

#[test]
fn the_header_records_no_count_as_a_time() {
    let p = plan(&args(&["--sampler", "ibs"]), None, &amd()).expect("plan");
    let config = p.sampling.expect("sampling").header_config();
    assert_eq!((config.sampler.as_str(), config.period_ns), ("ibs", 0));
    let config = Sampling::software(250_000, true).header_config();
    assert_eq!(
        (config.sampler.as_str(), config.period_ns, config.user),
        ("software", 250_000, true)
    );
}

#[test]
fn periods_are_parsed_as_times_or_counts() {
    let time = |ns, text: &str| {
        Ok(PeriodArg::Time {
            ns,
            text: text.to_owned(),
        })
    };
    assert_eq!(parse_period("1ms"), time(1_000_000, "1ms"));
    assert_eq!(parse_period("10us"), time(10_000, "10us"));
    assert_eq!(parse_period("1s"), time(1_000_000_000, "1s"));
    assert_eq!(parse_period("65536"), Ok(PeriodArg::Count(65536)));
    assert_eq!(parse_period(" 100003 "), Ok(PeriodArg::Count(100_003)));
    let short = parse_period("5us").expect_err("too short");
    assert!(short.starts_with("\"5us\" is shorter than"), "{short}");
    assert!(parse_period("2s")
        .expect_err("too long")
        .contains("longer than"));
    assert!(parse_period("fast").is_err());
    assert!(parse_period("99999999999999999999999").is_err());
}

#[test]
fn exit_codes_follow_the_command() {
    assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), ExitCode::from(3));
    assert_eq!(
        exit_code(ExitStatus::from_raw(libc::SIGKILL)),
        ExitCode::from(137)
    );
}

#[test]
fn page_events_are_on_unless_refused() {
    assert!(args(&[]).page_events);
    assert!(!args(&["--no-page-events"]).page_events);
}
