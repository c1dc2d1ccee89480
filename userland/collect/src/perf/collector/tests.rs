use std::fs;

use super::*;

/// A root with what `PerfCollector::new` reads, and `sys/kernel/slab` with one plain cache,
/// one merged pool and a link to it.
fn fake_root(paranoid: Option<&str>) -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let p = root.path();
    fs::create_dir_all(p.join("proc/sys/kernel")).expect("mkdir");
    if let Some(level) = paranoid {
        fs::write(p.join("proc/sys/kernel/perf_event_paranoid"), level).expect("write");
    }
    fs::create_dir_all(p.join("sys/devices/system/cpu")).expect("mkdir");
    fs::write(p.join("sys/devices/system/cpu/online"), "0-2,5\n").expect("write");
    for (dir, object_size) in [("dentry", "192"), (":a-0000064", "64")] {
        let d = p.join("sys/kernel/slab").join(dir);
        fs::create_dir_all(&d).expect("mkdir");
        fs::write(d.join("object_size"), object_size).expect("write");
        fs::write(d.join("slab_size"), object_size).expect("write");
        fs::write(d.join("align"), "8\n").expect("write");
    }
    std::os::unix::fs::symlink(":a-0000064", p.join("sys/kernel/slab/kmalloc-64"))
        .expect("symlink");
    root
}

#[test]
fn cpus_come_from_the_online_list() {
    let root = fake_root(Some("-1\n"));
    let perf =
        PerfCollector::new(root.path(), Vec::new(), Path::new("/nonexistent")).expect("allowed");
    assert_eq!(perf.cpus, [0, 1, 2, 5]);
    let version = perf.checked_version().expect("version");
    assert_eq!((version.nr_cpu_ids, version.online_cpus), (6, 4));
    // What the CPU offers is read from sysfs, as with the module.
    assert_eq!(
        version.samplers,
        SAMPLER_SOFTWARE | SAMPLER_IBS | SAMPLER_PEBS
    );
    assert_eq!(version.features & dprof_abi::FEATURE_HISTORIES, 0);
}

#[test]
fn a_kernel_without_perf_events_is_refused_in_a_sentence() {
    let root = fake_root(None);
    let err = PerfCollector::new(root.path(), Vec::new(), Path::new("/nonexistent"))
        .expect_err("refused");
    assert!(
        err.to_string()
            .starts_with("this kernel has no perf events"),
        "{err}"
    );
}

#[test]
fn slab_geometry_follows_links_and_leaves_out_pool_directories() {
    let root = fake_root(Some("2"));
    let geometry = slab_geometry(root.path());
    let mut names: Vec<&String> = geometry.keys().collect();
    names.sort();
    assert_eq!(names, ["dentry", "kmalloc-64"]);
    assert_eq!(geometry["kmalloc-64"].object_size, 64);
    assert_eq!(geometry["dentry"].slot_size, 192);
    assert!(slab_geometry(Path::new("/nonexistent")).is_empty());
}

#[test]
fn what_only_the_module_does_is_refused_by_name() {
    let root = fake_root(Some("-1"));
    let mut perf =
        PerfCollector::new(root.path(), Vec::new(), Path::new("/nonexistent")).expect("allowed");
    let histories = Config {
        events: EVENT_SLAB | EVENT_HISTORIES,
        ..Config::default()
    };
    let err = perf.configure(&histories).expect_err("refused");
    assert!(
        err.to_string()
            .starts_with("object access histories need dprof.ko"),
        "{err}"
    );
    let err = perf.experiment_end().expect_err("refused");
    assert!(
        err.to_string()
            .starts_with("causal experiments need dprof.ko"),
        "{err}"
    );
    let unknown = Config {
        events: EVENT_SAMPLES,
        sampler: 9,
        ..Config::default()
    };
    assert!(matches!(perf.configure(&unknown), Err(PerfError::Sampler)));
}

#[test]
fn before_configuration_reads_are_drained_and_counters_zero() {
    let root = fake_root(Some("-1"));
    let mut perf =
        PerfCollector::new(root.path(), Vec::new(), Path::new("/nonexistent")).expect("allowed");
    let mut buf = [0u8; 64];
    assert!(matches!(perf.read(&mut buf), Ok(ReadOutcome::Drained)));
    let (status, cpus) = perf.status(8).expect("status");
    assert_eq!(
        (status.records_written, status.records_lost, cpus.len()),
        (0, 0, 6)
    );
}
