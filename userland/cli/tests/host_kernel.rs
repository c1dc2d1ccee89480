//! The perf backend on this machine's own kernel: no module, the kernel as it booted. Needs
//! root (perf events system-wide, tracefs, BPF or /proc/kcore). scripts/test runs as root and
//! sets `DPROF_TEST_REQUIRE_EXTERNAL`, so there a missing capability fails these tests.
//!
//! Each workload's types are known: a file-tree walk allocates and looks up dentries and
//! inodes; loopback TCP allocates socket buffers and sockets.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One collection at a time: each sees the whole machine.
static MACHINE: Mutex<()> = Mutex::new(());

/// Whether this process may use perf events system-wide; with `DPROF_TEST_REQUIRE_EXTERNAL`
/// set, that it may not is a failure.
fn host_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let perf = Path::new("/proc/sys/kernel/perf_event_paranoid").exists();
    if root && perf {
        return true;
    }
    assert!(
        std::env::var_os("DPROF_TEST_REQUIRE_EXTERNAL").is_none(),
        "the host-kernel tests need root and perf events (root: {root}, perf: {perf})"
    );
    eprintln!("skipped: the host-kernel tests need root and perf events");
    false
}

fn dprof(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dprof"));
    cmd.args(args).env_remove("RUST_BACKTRACE");
    cmd
}

fn check(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{what} failed: {stderr}");
    stderr
}

/// `dprof report --json` of `profile`.
fn report(profile: &Path) -> Value {
    let out = dprof(&["report", "--json"])
        .arg(profile)
        .output()
        .expect("dprof runs");
    check(&out, "report");
    serde_json::from_slice(&out.stdout).expect("the report is JSON")
}

/// The data-profile entry of type `name`.
fn type_named<'r>(report: &'r Value, name: &str) -> Option<&'r Value> {
    report["data_profile"]["types"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
}

fn count(t: &Value, key: &str) -> u64 {
    t[key].as_u64().unwrap_or(0)
}

/// What the collection said on stderr, checked for the things every perf collection says.
fn check_collect_messages(stderr: &str) {
    assert!(
        stderr.contains("backend: perf events (--backend perf)")
            || stderr.contains(
                "backend: perf events (/nonexistent/dprof does not exist: dprof.ko is not loaded)"
            ),
        "{stderr}"
    );
    assert!(stderr.contains(" 0 lost"), "records were lost: {stderr}");
    // The summary counts the bytes of every block, the last ones included.
    assert!(
        stderr.contains("), 0 lost; ") && !stderr.contains(" records (0 B)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(" with the kernel's symbols and types ("),
        "{stderr}"
    );
    assert!(stderr.contains(" µs per record)"), "{stderr}");
    assert!(
        stderr.contains("read the owners of "),
        "the pages samples touched were not read: {stderr}"
    );
    // Where kallsyms does not list the per-CPU section (x86-64 since 6.15 without
    // CONFIG_KALLSYMS_ALL, as this machine's kernel may be), the collector finds it.
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").expect("kallsyms");
    if !kallsyms.lines().any(|l| l.ends_with(" __per_cpu_start")) {
        assert!(
            stderr.contains("kallsyms does not list the per-CPU section; found it at 0x"),
            "{stderr}"
        );
    }
    // Without __per_cpu_offset, each CPU's per-CPU offset comes from its run queue.
    if !kallsyms.lines().any(|l| l.ends_with(" __per_cpu_offset")) {
        assert!(
            stderr.contains("CPUs were read from their run queues"),
            "{stderr}"
        );
    }
}

/// The header places the kernel image's four sections, in order, when root reads
/// `/proc/iomem` (it does in these tests).
fn check_kernel_image(profile: &Path) {
    let out = dprof(&["dump", "--summary", "--json"])
        .arg(profile)
        .output()
        .expect("dprof runs");
    check(&out, "dump");
    let dump: Value = serde_json::from_slice(&out.stdout).expect("the dump is JSON");
    let kinds: Vec<&str> = dump["header"]["kernel_image"]
        .as_array()
        .expect("kernel_image in the header")
        .iter()
        .filter_map(|s| s["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["code", "rodata", "data", "bss"],
        "{}",
        dump["header"]
    );
}

/// Checks what every report of a perf-backend profile of this machine has: the header says
/// perf, samples were taken and some resolved, and the coverage is stated.
fn check_common(report: &Value) {
    let coverage = &report["coverage"];
    assert!(count(coverage, "total_samples") > 100, "{coverage}");
    assert!(count(coverage, "resolved_samples") > 0, "{coverage}");
    assert!(
        coverage["summary"]
            .as_str()
            .is_some_and(|s| s.contains("resolved")),
        "{coverage}"
    );
    // With the memory layout (from kallsyms or the tracepoints) and the pages' owners, data
    // addresses resolve: page memory is a region, and hardly any address stays unknown.
    let bucket = |name: &str| {
        coverage["buckets"]
            .as_array()
            .and_then(|b| b.iter().find(|b| b["bucket"] == name))
            .map_or(0, |b| count(b, "samples"))
    };
    let (resolved, unknown) = (
        count(coverage, "resolved_samples"),
        bucket("unknown_address"),
    );
    // The bound, 2%: globals that kallsyms does not name (no CONFIG_KALLSYMS_ALL)
    // resolve to their section of the kernel image.
    assert!(
        unknown * 50 < resolved + unknown,
        "more than one address in fifty unresolved: {coverage}"
    );
    assert!(bucket("region") > 0, "{coverage}");
    let page_memory = report["data_profile"]["types"]
        .as_array()
        .expect("types")
        .iter()
        .any(|t| t["name"].as_str().is_some_and(|n| n.ends_with(" page")));
    assert!(
        page_memory,
        "no page of the direct map was typed by its use"
    );
    // Per-CPU data is named by variable, whether kallsyms or the collector placed the
    // per-CPU section: most per-CPU samples are not of the unnamed buckets.
    let (mut named, mut percpu) = (0, 0);
    for t in report["data_profile"]["types"].as_array().expect("types") {
        let name = t["name"].as_str().unwrap_or_default();
        if name.starts_with("percpu:") {
            percpu += count(t, "samples");
            if !name.starts_with("percpu:(") {
                named += count(t, "samples");
            }
        }
    }
    assert!(
        percpu > 0 && named * 2 > percpu,
        "{named} of {percpu} per-CPU samples named by variable"
    );
}

#[test]
fn a_file_tree_walk_types_dentries_and_inodes() {
    let _machine = MACHINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !host_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let tree = dir.path().join("tree");
    // 4000 new files: as many dentries and inodes allocated, looked up, then freed.
    let script = format!(
        "set -e; t={t}; for i in $(seq 1 40); do mkdir -p $t/$i; (cd $t/$i && touch $(seq 1 100)); done; \
         for r in 1 2 3; do find $t -type f | xargs stat > /dev/null; ls -lR $t > /dev/null; done; rm -rf $t",
        t = tree.display()
    );
    let profile = dir.path().join("walk.dprof");
    // No --backend: with no module loaded, `auto` takes perf events and says so.
    let out = dprof(&[
        "collect",
        "--device",
        "/nonexistent/dprof",
        "--period",
        "100us",
        "--ring-size",
        "64M",
        "-o",
    ])
    .arg(&profile)
    .args(["--", "sh", "-c", &script])
    .output()
    .expect("dprof runs");
    check_collect_messages(&check(&out, "collect"));
    check_kernel_image(&profile);
    let report = report(&profile);
    check_common(&report);
    let dentry = type_named(&report, "dentry").expect("dentry is a type");
    assert!(count(dentry, "allocs") >= 4000, "{dentry}");
    assert!(count(dentry, "samples") > 0, "{dentry}");
    assert_eq!(dentry["struct_name"], "dentry");
    // No --vmlinux: the field names come from the kernel's BTF, carried in the profile.
    let named = dentry["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .filter(|f| f["field"].is_string())
        .count();
    assert!(named > 0, "no dentry field is named: {dentry}");
    // The filesystem under the temporary directory decides the inode cache's name.
    let inodes: Vec<&Value> = report["data_profile"]["types"]
        .as_array()
        .expect("types")
        .iter()
        .filter(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("inode_cache"))
        })
        .filter(|t| count(t, "allocs") >= 4000)
        .collect();
    assert!(!inodes.is_empty(), "no inode cache allocated 4000 objects");
}

/// Loopback TCP for `run`: connections that each send 64 KiB, echoed back.
fn loopback_traffic(run: Duration) -> u64 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    let server = std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut buf = vec![0u8; 65536];
            let mut total = 0;
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 || stream.write_all(&buf[..n]).is_err() {
                    break;
                }
                total += n;
            }
            if total == 0 {
                break; // the last, empty connection ends the server
            }
        }
    });
    let payload = vec![0x5au8; 65536];
    let start = Instant::now();
    let mut connections = 0;
    while start.elapsed() < run {
        let mut s = TcpStream::connect(address).expect("connect");
        s.write_all(&payload).expect("send");
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let mut back = Vec::new();
        s.read_to_end(&mut back).expect("receive");
        assert_eq!(back.len(), payload.len());
        connections += 1;
    }
    drop(TcpStream::connect(address).expect("connect"));
    server.join().expect("server");
    connections
}

#[test]
fn loopback_tcp_types_socket_buffers_and_sockets() {
    let _machine = MACHINE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !host_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = dir.path().join("tcp.dprof");
    let collector = dprof(&[
        "collect",
        "--backend",
        "perf",
        "--period",
        "100us",
        // The traffic below runs as fast as loopback allows: 2 M records in 3 s. With one
        // core taken by other work, 64 MiB rings lost 150 k to 300 k of them; 256 MiB hold
        // the whole burst, so nothing is lost to the collector running behind.
        "--ring-size",
        "256M",
    ])
    .args(["--duration", "6s", "-o"])
    .arg(&profile)
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("dprof runs");
    // The partial file appears once the events are open, just before they are enabled.
    let partial = dir.path().join("tcp.dprof.partial");
    let waited = Instant::now();
    while !partial.exists() {
        assert!(
            // Before its events, the collector reads the kernel's memory layout and, on
            // kernels that do not list them, finds the per-CPU section and offsets: a
            // second or two, more on a loaded machine.
            waited.elapsed() < Duration::from_secs(20),
            "collection did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let connections = loopback_traffic(Duration::from_secs(3));
    let out = collector.wait_with_output().expect("dprof ends");
    let stderr = check(&out, "collect");
    check_collect_messages(&stderr);
    assert!(
        stderr.contains("note: page allocations: ")
            && stderr.contains(" typed by their site (page@SITE), "),
        "{stderr}"
    );
    let report = report(&profile);
    check_common(&report);
    // Loopback TCP copies what it sends into page fragments: pages from the page
    // allocator, named by the function that took them for its fragments, allocated and
    // freed while the traffic ran, and sampled.
    let frag_pages = type_named(&report, "page@skb_page_frag_refill")
        .expect("the socket's page fragments are a type");
    assert!(
        count(frag_pages, "allocs") > 0 && count(frag_pages, "samples") > 0,
        "{frag_pages}"
    );
    let skb = type_named(&report, "skbuff_head_cache").expect("skbuff_head_cache is a type");
    assert!(
        count(skb, "allocs") >= connections,
        "{connections} connections: {skb}"
    );
    assert_eq!(skb["struct_name"], "sk_buff");
    let samples: u64 = report["data_profile"]["types"]
        .as_array()
        .expect("types")
        .iter()
        .filter(|t| {
            t["cache"]
                .as_str()
                .is_some_and(|c| c.starts_with("skbuff") || c == "TCP")
        })
        .map(|t| count(t, "samples"))
        .sum();
    assert!(samples > 0, "no sample touched a socket buffer or a socket");
    let tcp = type_named(&report, "TCP").expect("TCP sockets are a type");
    assert!(
        count(tcp, "allocs") >= connections,
        "{connections} connections: {tcp}"
    );
}
