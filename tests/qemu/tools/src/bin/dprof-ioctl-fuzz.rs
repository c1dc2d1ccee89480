//! Hammers /dev/dprof with random ioctl and read calls (guest side of the module-robustness
//! scenario). Every call must either succeed or fail with an errno from the documented set;
//! anything else, or a kernel oops (caught by the harness from the console log), fails the run.
//!
//! Usage: dprof-ioctl-fuzz [CALLS] [SEED]

use std::collections::BTreeMap;
use std::ffi::CString;

use dprof_abi as abi;

/// xorshift64*: deterministic from the seed, so a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A command: mostly ours (right or wrong size/direction), sometimes anything.
fn random_cmd(rng: &mut Rng) -> u32 {
    let known = [
        abi::IOC_VERSION,
        abi::IOC_CONFIGURE,
        abi::IOC_START,
        abi::IOC_STOP,
        abi::IOC_STATUS,
    ];
    match rng.below(4) {
        0 | 1 => known[rng.below(known.len() as u64) as usize],
        2 => {
            let base = known[rng.below(known.len() as u64) as usize] & 0xFFFF;
            base | ((rng.below(4) as u32) << 30) | ((rng.below(1 << 14) as u32) << 16)
        }
        _ => rng.next() as u32,
    }
}

/// A valid configuration, or one with a field broken.
fn random_config(rng: &mut Rng, buf: &mut [u8]) {
    let mut config = abi::Config {
        struct_size: abi::Config::SIZE as u32,
        events: abi::EVENT_SLAB,
        ring_bytes: abi::MIN_RING_BYTES << rng.below(4),
        ..abi::Config::default()
    };
    if rng.below(2) == 0 {
        // A valid sampling setup (10 µs to 10 ms), so that start/stop also run the sampler.
        config.events |= abi::EVENT_SAMPLES;
        config.sampler = u32::from(abi::SAMPLER_KIND_SOFTWARE);
        config.sample_period_ns = abi::MIN_SAMPLE_PERIOD_NS + rng.below(10_000_000) as u32;
        config.sample_user = rng.below(2) as u32;
        if rng.below(3) == 0 {
            // A hardware sampler on a PMU this guest has not (type 0: no hardware PMU under
            // TCG; a type no PMU has) or on the software PMU's cpu-clock, which perf accepts:
            // the module must refuse cleanly or run it without crashing.
            let ibs = rng.below(2) == 0;
            config.sampler = u32::from(if ibs {
                abi::SAMPLER_KIND_IBS
            } else {
                abi::SAMPLER_KIND_PEBS
            });
            config.pmu_type = match rng.below(3) {
                0 => 0,
                1 => 1,
                _ => 1000 + rng.below(1000) as u32,
            };
            config.pmu_config = rng.below(2);
            config.sample_period_ns = if ibs {
                abi::MIN_IBS_PERIOD << rng.below(16)
            } else {
                abi::MIN_PEBS_PERIOD + rng.below(100_000) as u32
            };
        }
    }
    match rng.below(9) {
        0 => config.struct_size = rng.next() as u32,
        3 => config.sampler = rng.next() as u32,
        4 => config.sample_period_ns = rng.next() as u32,
        5 => config.sample_user = rng.next() as u32,
        1 => config.events = rng.next() as u32,
        2 => config.ring_bytes = rng.next() as u32,
        _ => {}
    }
    let mut bytes = [0u8; abi::Config::SIZE];
    config.encode(&mut bytes);
    if rng.below(8) == 0 {
        bytes[rng.below(abi::Config::SIZE as u64) as usize] = rng.next() as u8;
    }
    buf[..bytes.len()].copy_from_slice(&bytes);
}

fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EINVAL => "EINVAL",
        libc::ENOTTY => "ENOTTY",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::ENOENT => "ENOENT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENODEV => "ENODEV",
        _ => "other",
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let calls: u64 = args.get(1).map_or(Ok(10_000), |s| s.parse())?;
    let seed: u64 = args.get(2).map_or(Ok(0x00d0_f00d), |s| s.parse())?;
    let mut rng = Rng(seed | 1);
    let path = CString::new(abi::DEVICE_PATH)?;
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
    anyhow::ensure!(
        fd >= 0,
        "open {}: {}",
        abi::DEVICE_PATH,
        std::io::Error::last_os_error()
    );

    let allowed = [
        libc::EINVAL,
        libc::ENOTTY,
        libc::EFAULT,
        libc::EBUSY,
        libc::EAGAIN,
        libc::ENOMEM,
        // perf refusing a hardware sampler's PMU or configuration at START.
        libc::ENOENT,
        libc::EOPNOTSUPP,
        libc::ENODEV,
    ];
    let mut buffer = vec![0u8; 64 * 1024];
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    for call in 0..calls {
        // Random bytes in our buffer, then maybe a well-formed configuration.
        for b in buffer.iter_mut().take(256) {
            *b = rng.next() as u8;
        }
        let cmd = random_cmd(&mut rng);
        if cmd == abi::IOC_CONFIGURE || rng.below(4) == 0 {
            random_config(&mut rng, &mut buffer);
        }
        if cmd == abi::IOC_STATUS && rng.below(2) == 0 {
            // A status request pointing back into our buffer, with a random length.
            let mut status = abi::Status {
                cpus_ptr: buffer.as_ptr() as u64 + 1024,
                cpus_len: rng.below(8) as u32,
                ..abi::Status::default()
            };
            if rng.below(4) == 0 {
                status.cpus_ptr = rng.next();
                status.cpus_len = rng.next() as u32;
            }
            let mut bytes = [0u8; abi::Status::SIZE];
            status.encode(&mut bytes);
            buffer[..bytes.len()].copy_from_slice(&bytes);
        }
        let arg: u64 = match rng.below(6) {
            0 => 0,
            1 => rng.next(),
            2 => 0xffff_ffff_8100_0000, // kernel text
            3 => 0x1000,                // unmapped
            _ => buffer.as_mut_ptr() as u64,
        };
        let (what, ret) = if rng.below(10) == 0 {
            let len = [0usize, 8, 100, abi::MAX_RECORD_SIZE, buffer.len()][rng.below(5) as usize];
            let ptr = if arg == buffer.as_mut_ptr() as u64 {
                arg
            } else {
                arg & !0xfff
            };
            // SAFETY: the kernel checks the user pointer; a bad one yields EFAULT, and our
            // own buffer is at least `len` bytes long.
            let n = unsafe { libc::read(fd, ptr as *mut libc::c_void, len.min(buffer.len())) };
            ("read".to_string(), n as i64)
        } else {
            // SAFETY: arbitrary ioctls on our own device; pointer arguments are either our
            // buffer or addresses the kernel must reject.
            let r = unsafe { libc::ioctl(fd, libc::c_ulong::from(cmd), arg) };
            (format!("ioctl {cmd:#x}"), i64::from(r))
        };
        let outcome = if ret >= 0 {
            "ok".to_string()
        } else {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            anyhow::ensure!(
                allowed.contains(&errno),
                "call {call} ({what}, arg {arg:#x}): unexpected errno {errno} ({})",
                std::io::Error::from_raw_os_error(errno)
            );
            errno_name(errno).to_string()
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    // SAFETY: closing our descriptor.
    unsafe { libc::close(fd) };
    println!("dprof-ioctl-fuzz: {calls} calls, seed {seed}");
    for (outcome, n) in &outcomes {
        println!("  {outcome}: {n}");
    }
    Ok(())
}
