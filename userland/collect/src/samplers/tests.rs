use std::path::Path;

use super::*;

/// A fake root with `files` (relative path, contents).
fn root_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (rel, text) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    dir
}

fn cpuinfo(vendor: &str, flags: &str) -> String {
    format!(
        "processor\t: 0\nvendor_id\t: {vendor}\nmodel name\t: Some CPU\nflags\t\t: {flags}\n\n\
         processor\t: 1\nvendor_id\t: {vendor}\nflags\t\t: {flags}\n"
    )
}

const DEV: &str = "sys/bus/event_source/devices";

fn skylake(pmu: &str, vendor_flags: &str) -> Vec<(String, String)> {
    let p = |rel: &str| format!("{DEV}/{pmu}/{rel}");
    vec![
        (
            "proc/cpuinfo".to_owned(),
            cpuinfo("GenuineIntel", vendor_flags),
        ),
        (p("type"), "4\n".to_owned()),
        (
            p("events/mem-loads"),
            "event=0xcd,umask=0x1,ldlat=3\n".to_owned(),
        ),
        (p("events/mem-stores"), "event=0xd0,umask=0x82\n".to_owned()),
        (p("format/event"), "config:0-7\n".to_owned()),
        (p("format/umask"), "config:8-15\n".to_owned()),
        (p("format/edge"), "config:18\n".to_owned()),
        (p("format/inv"), "config:23\n".to_owned()),
        (p("format/cmask"), "config:24-31\n".to_owned()),
        (p("format/ldlat"), "config1:0-15\n".to_owned()),
        (p("caps/pmu_name"), "skylake\n".to_owned()),
    ]
}

fn detect_in(files: &[(String, String)]) -> HardwareSamplers {
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let root = root_with(&refs);
    detect(root.path())
}

#[test]
fn intel_bare_metal_has_pebs_from_sysfs() {
    let found = detect_in(&skylake("cpu", "fpu pebs pdcm"));
    assert_eq!(
        found.pebs,
        Ok(PebsCaps {
            pmu: "cpu".to_owned(),
            pmu_type: 4,
            pmu_name: Some("skylake".to_owned()),
            event: "event=0xcd,umask=0x1,ldlat=3".to_owned(),
            config: 0x1cd,
            config1: 3,
        })
    );
    assert_eq!(
        found.ibs,
        Err("IBS needs an AMD CPU, and this one is GenuineIntel".to_owned())
    );
}

#[test]
fn hybrid_cpus_use_the_big_cores_pmu() {
    let found = detect_in(&skylake("cpu_core", "fpu"));
    let pebs = found.pebs.expect("PEBS on cpu_core");
    assert_eq!(
        (pebs.pmu.as_str(), pebs.config, pebs.config1),
        ("cpu_core", 0x1cd, 3)
    );
    let mut files = skylake("cpu_core", "fpu");
    files.push((
        format!("{DEV}/cpu_core/events/mem-loads-aux"),
        "event=0x03,umask=0x82\n".to_owned(),
    ));
    assert_eq!(
        detect_in(&files).pebs,
        Err(
            "the cpu_core PMU's mem-loads event needs the mem-loads-aux event as its group \
             leader on this CPU, and dprof.ko opens single events (the in-kernel perf API has \
             no groups)"
                .to_owned()
        )
    );
}

#[test]
fn intel_under_a_hypervisor_says_so() {
    // This is what a typical cloud VM looks like: no core PMU at all.
    let root = root_with(&[(
        "proc/cpuinfo",
        &cpuinfo("GenuineIntel", "fpu vme hypervisor lahf_lm"),
    )]);
    let found = detect(root.path());
    assert_eq!(
        found.pebs,
        Err(
            "this Intel CPU runs under a hypervisor that exposes no core PMU (no \
             /sys/bus/event_source/devices/cpu)"
                .to_owned()
        )
    );
    let root = root_with(&[("proc/cpuinfo", &cpuinfo("GenuineIntel", "fpu"))]);
    assert_eq!(
        detect(root.path()).pebs,
        Err("the kernel exposes no core PMU (no /sys/bus/event_source/devices/cpu)".to_owned())
    );
    // A virtual PMU without PEBS: the core PMU is there, mem-loads is not.
    let files: Vec<(String, String)> = skylake("cpu", "fpu hypervisor")
        .into_iter()
        .filter(|(p, _)| !p.ends_with("mem-loads"))
        .collect();
    assert_eq!(
        detect_in(&files).pebs,
        Err(
            "the cpu PMU has no mem-loads event (no /sys/bus/event_source/devices/cpu/\
             events/mem-loads): the hypervisor does not virtualize PEBS"
                .to_owned()
        )
    );
}

fn amd(extra: &[(&str, &str)], flags: &str) -> HardwareSamplers {
    let info = cpuinfo("AuthenticAMD", flags);
    let mut files = vec![("proc/cpuinfo", info.as_str())];
    files.extend_from_slice(extra);
    let root = root_with(&files);
    detect(root.path())
}

#[test]
fn amd_zen4_has_ibs_counting_ops() {
    let found = amd(
        &[
            ("sys/bus/event_source/devices/ibs_op/type", "11\n"),
            (
                "sys/bus/event_source/devices/ibs_op/format/cnt_ctl",
                "config:19\n",
            ),
            (
                "sys/bus/event_source/devices/ibs_op/format/l3missonly",
                "config:16\n",
            ),
            (
                "sys/bus/event_source/devices/ibs_op/caps/zen4_ibs_extensions",
                "1\n",
            ),
        ],
        "fpu ibs",
    );
    let ibs = found.ibs.expect("IBS");
    assert_eq!(
        ibs,
        IbsCaps {
            pmu_type: 11,
            config: 1 << 19,
            counts_ops: true,
            zen4: true,
        }
    );
    assert_eq!(ibs.unit(), "ops");
    assert_eq!(
        found.pebs,
        Err("PEBS needs an Intel CPU, and this one is AuthenticAMD".to_owned())
    );
}

#[test]
fn amd_without_cnt_ctl_counts_cycles() {
    let found = amd(
        &[("sys/bus/event_source/devices/ibs_op/type", "9\n")],
        "fpu ibs",
    );
    let ibs = found.ibs.expect("IBS");
    assert_eq!(
        (ibs.pmu_type, ibs.config, ibs.unit(), ibs.zen4),
        (9, 0, "cycles", false)
    );
}

#[test]
fn amd_without_ibs_names_the_reason() {
    assert_eq!(
        amd(&[], "fpu ibs hypervisor").ibs,
        Err(
            "this AMD CPU runs under a hypervisor that does not pass IBS through (no \
             /sys/bus/event_source/devices/ibs_op)"
                .to_owned()
        )
    );
    assert_eq!(
        amd(&[], "fpu").ibs,
        Err("this AMD CPU has no IBS (no ibs flag in /proc/cpuinfo)".to_owned())
    );
    let err = amd(&[], "fpu ibs").ibs.expect_err("no PMU");
    assert!(
        err.starts_with("the kernel registered no ibs_op PMU although the CPU has the ibs flag"),
        "{err}"
    );
    let err = amd(
        &[("sys/bus/event_source/devices/ibs_op/type", "eleven\n")],
        "fpu ibs",
    )
    .ibs
    .expect_err("bad type");
    assert_eq!(
        err,
        "/sys/bus/event_source/devices/ibs_op/type holds \"eleven\", not a PMU type number"
    );
}

#[test]
fn no_cpuinfo_means_an_unknown_vendor() {
    let found = detect(Path::new("/nonexistent/dprof-test-root"));
    assert_eq!(
        found.ibs,
        Err(
            "IBS needs an AMD CPU, and this one is unknown (no vendor_id in /proc/cpuinfo)"
                .to_owned()
        )
    );
    assert!(found.pebs.is_err());
}

#[test]
fn formats_are_parsed_generically() {
    let f = Format::parse("config:0-7,32-35\n").expect("parses");
    assert_eq!(f.field, ConfigField::Config);
    assert_eq!(f.ranges, [(0, 7), (32, 35)]);
    assert_eq!(f.width(), 12);
    // Low 8 bits to 0-7, the next 4 to 32-35.
    assert_eq!(f.place(0x3ff), Ok(0x3_0000_00ff));
    assert!(f.place(0x1000).is_err());
    assert_eq!(
        Format::parse("config:24").expect("one bit").place(1),
        Ok(1 << 24)
    );
    assert_eq!(
        Format::parse("config1:0-15").expect("config1").field,
        ConfigField::Config1
    );
    assert_eq!(
        Format::parse("config:0-63").expect("all").place(u64::MAX),
        Ok(u64::MAX)
    );
    for bad in ["config", "cfg:0-7", "config:7-0", "config:0-64", "config:a"] {
        assert!(Format::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn events_are_encoded_with_the_pmus_formats() {
    let formats = Formats::from_specs([
        ("event", "config:0-7"),
        ("umask", "config:8-15"),
        ("edge", "config:18"),
        ("ldlat", "config1:0-15"),
        ("frontend", "config2:0-23"),
    ])
    .expect("formats");
    assert_eq!(
        formats.encode_event("event=0xcd,umask=0x1,ldlat=3"),
        Ok((0x1cd, 3, 0))
    );
    assert_eq!(
        formats.encode_event("event=0x0b, umask=0x10, edge, frontend=0x11"),
        Ok((0x4_100b, 0, 0x11))
    );
    assert_eq!(
        formats.encode_event("event=0xcd,cmask=2"),
        Err("the PMU has no format for \"cmask\"".to_owned())
    );
    assert_eq!(
        formats.encode_event("event=0x1cd"),
        Err("event=0x1cd: 0x1cd does not fit in 8 bits".to_owned())
    );
    assert_eq!(
        formats.encode_event("event=zz"),
        Err("\"zz\" is not a number".to_owned())
    );
}
