//! What several of the scenario tools share.

/// `struct perf_event_attr` up to `config2` (`PERF_ATTR_SIZE_VER1`, 72 bytes), which the ABI
/// lets callers pass. For breakpoints `config1` is `bp_addr` and `config2` is `bp_len`.
#[repr(C)]
#[derive(Default)]
pub struct PerfEventAttr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
}

impl PerfEventAttr {
    /// Its size, as the `size` field wants it.
    #[must_use]
    pub const fn abi_size() -> u32 {
        std::mem::size_of::<Self>() as u32
    }
}

/// Raw access to /dev/dprof for the guest tools: ioctls with encoded ABI structures.
pub mod dev {
    use std::os::fd::{AsFd, AsRawFd, OwnedFd};

    use dprof_abi as abi;
    use nix::errno::Errno;
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;

    /// Opens /dev/dprof with `flags` (`OFlag::O_RDONLY`, `OFlag::O_WRONLY`, ...); dropping the
    /// descriptor closes it.
    ///
    /// # Errors
    /// The open's errno.
    pub fn open(flags: OFlag) -> nix::Result<OwnedFd> {
        nix::fcntl::open(abi::DEVICE_PATH, flags, Mode::empty())
    }

    /// `ioctl(fd, cmd, arg)`: the errno on failure.
    ///
    /// # Errors
    /// The ioctl's errno.
    ///
    /// # Safety
    /// `arg` is null, an address the kernel must refuse, or a buffer at least as large as the
    /// structure `cmd` encodes (which the kernel may write).
    pub unsafe fn ioctl(fd: impl AsFd, cmd: u32, arg: *mut u8) -> Result<(), Errno> {
        // Raw libc: `cmd` is chosen at run time (every dprof command, and the fuzzer's wrong
        // ones), while nix's ioctl macros fix the request at compile time.
        // SAFETY: per this function's contract.
        let r = unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), libc::c_ulong::from(cmd), arg) };
        Errno::result(r).map(drop)
    }

    /// An ioctl whose argument is the encoded `bytes`.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn ioctl_bytes(fd: impl AsFd, cmd: u32, bytes: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: callers pass the encoded structure of `cmd`, so `bytes` is large enough.
        unsafe { ioctl(fd, cmd, bytes.as_mut_ptr()) }
    }

    /// `write(fd, bytes)`: the count written or the errno.
    ///
    /// # Errors
    /// The write's errno.
    pub fn write(fd: impl AsFd, bytes: &[u8]) -> Result<usize, Errno> {
        nix::unistd::write(fd, bytes)
    }

    /// `IOC_VERSION`.
    ///
    /// # Errors
    /// The ioctl's errno, or EINVAL for an undecodable answer.
    pub fn version(fd: impl AsFd) -> Result<abi::VersionInfo, Errno> {
        let mut bytes = [0u8; abi::VersionInfo::SIZE];
        ioctl_bytes(fd, abi::IOC_VERSION, &mut bytes)?;
        abi::VersionInfo::decode(&bytes).map_err(|_| Errno::EINVAL)
    }

    /// `IOC_CONFIGURE` for software sampling every `period_ns` (plus `extra_events`).
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn configure_samples(
        fd: impl AsFd,
        period_ns: u32,
        extra_events: u32,
    ) -> Result<(), Errno> {
        let config = abi::Config {
            struct_size: abi::Config::SIZE as u32,
            events: abi::EVENT_SAMPLES | extra_events,
            ring_bytes: abi::MIN_RING_BYTES * 4,
            sampler: u32::from(abi::SAMPLER_KIND_SOFTWARE),
            sample_period_ns: period_ns,
            ..abi::Config::default()
        };
        let mut bytes = [0u8; abi::Config::SIZE];
        config.encode(&mut bytes);
        ioctl_bytes(fd, abi::IOC_CONFIGURE, &mut bytes)
    }

    /// A plan of `(kind, name)` points with `flags`, encoded (invalid ones too: the encoder
    /// does not check).
    #[must_use]
    pub fn plan_bytes(points: &[(u32, &str)], flags: u32) -> [u8; abi::CausalPlan::SIZE] {
        plan_bytes_with_arrival(points, flags, 0, None)
    }

    /// [`plan_bytes`] with `arrival` as the plan's arrival field (1 + a point's index; 0:
    /// none), and `latency`'s points (indices of `points`: begin, end) as its latency pair.
    #[must_use]
    pub fn plan_bytes_with_arrival(
        points: &[(u32, &str)],
        flags: u32,
        arrival: u32,
        latency: Option<(usize, usize)>,
    ) -> [u8; abi::CausalPlan::SIZE] {
        let mut plan = abi::CausalPlan {
            struct_size: abi::CausalPlan::SIZE as u32,
            point_count: points.len() as u32,
            flags,
            arrival,
            ..abi::CausalPlan::default()
        };
        for (slot, (kind, name)) in plan.points.iter_mut().zip(points) {
            *slot = abi::ProgressPoint::new(*kind, name.as_bytes());
        }
        if let Some((begin, end)) = latency {
            plan.points[begin].latency = abi::LATENCY_BEGIN;
            plan.points[end].latency = abi::LATENCY_END;
        }
        let mut bytes = [0u8; abi::CausalPlan::SIZE];
        plan.encode(&mut bytes);
        bytes
    }

    /// `IOC_CAUSAL_PLAN`.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn causal_plan(fd: impl AsFd, points: &[(u32, &str)], flags: u32) -> Result<(), Errno> {
        ioctl_bytes(fd, abi::IOC_CAUSAL_PLAN, &mut plan_bytes(points, flags))
    }

    /// `IOC_CAUSAL_SCOPE` with `ranges` (`[start, end)` pairs, which must stay alive during
    /// the call) and `count` as the range count (`ranges.len()` for a truthful one).
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn causal_scope(fd: impl AsFd, ranges: &[(u64, u64)], count: u32) -> Result<(), Errno> {
        let scope = abi::CausalScope {
            struct_size: abi::CausalScope::SIZE as u32,
            range_count: count,
            ranges_ptr: ranges.as_ptr() as u64,
        };
        let mut bytes = [0u8; abi::CausalScope::SIZE];
        scope.encode(&mut bytes);
        ioctl_bytes(fd, abi::IOC_CAUSAL_SCOPE, &mut bytes)
    }

    /// `IOC_PAGE_SITES` with `allocator` and `elsewhere` ranges (which must stay alive during
    /// the call) and `allocator_count` as the allocator's range count.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn page_sites(
        fd: impl AsFd,
        allocator: &[(u64, u64)],
        allocator_count: u32,
        elsewhere: &[(u64, u64)],
    ) -> Result<(), Errno> {
        let sites = abi::PageSites {
            struct_size: abi::PageSites::SIZE as u32,
            allocator_count,
            allocator_ptr: allocator.as_ptr() as u64,
            elsewhere_ptr: if elsewhere.is_empty() {
                0
            } else {
                elsewhere.as_ptr() as u64
            },
            elsewhere_count: elsewhere.len() as u32,
        };
        let mut bytes = [0u8; abi::PageSites::SIZE];
        sites.encode(&mut bytes);
        ioctl_bytes(fd, abi::IOC_PAGE_SITES, &mut bytes)
    }

    /// `IOC_CAUSAL_TYPE`: entry `index` with `ips` (which must stay alive during the call) and
    /// an optional cache name.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn causal_type(fd: impl AsFd, index: u32, ips: &[u64], cache: &str) -> Result<(), Errno> {
        let entry = abi::CausalType {
            struct_size: abi::CausalType::SIZE as u32,
            index,
            ips_ptr: if ips.is_empty() {
                0
            } else {
                ips.as_ptr() as u64
            },
            ip_count: ips.len() as u32,
            ..abi::CausalType::default()
        }
        .with_name(cache.as_bytes());
        let mut bytes = [0u8; abi::CausalType::SIZE];
        entry.encode(&mut bytes);
        ioctl_bytes(fd, abi::IOC_CAUSAL_TYPE, &mut bytes)
    }

    /// `IOC_EXPERIMENT_START`, no arrival delay.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn experiment_start(
        fd: impl AsFd,
        experiment: u32,
        type_index: u32,
        speedup: u32,
    ) -> Result<(), Errno> {
        experiment_start_control(
            fd,
            &abi::ExperimentControl {
                experiment,
                type_index,
                speedup_percent: speedup,
                ..abi::ExperimentControl::default()
            },
        )
    }

    /// `IOC_EXPERIMENT_START` with `control` as it is.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn experiment_start_control(
        fd: impl AsFd,
        control: &abi::ExperimentControl,
    ) -> Result<(), Errno> {
        let mut bytes = [0u8; abi::ExperimentControl::SIZE];
        control.encode(&mut bytes);
        ioctl_bytes(fd, abi::IOC_EXPERIMENT_START, &mut bytes)
    }

    /// An ioctl without argument (`IOC_START`, `IOC_STOP`, `IOC_EXPERIMENT_END`).
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn ioctl_none(fd: impl AsFd, cmd: u32) -> Result<(), Errno> {
        // SAFETY: no argument.
        unsafe { ioctl(fd, cmd, std::ptr::null_mut()) }
    }

    /// Reads every record until `read()` returns 0 (collection stopped and drained) or EAGAIN,
    /// in time order (`read()` hands them out ring by ring, one ring per CPU).
    ///
    /// # Errors
    /// A read error other than EAGAIN, or a record that does not decode.
    pub fn drain(fd: impl AsFd) -> anyhow::Result<Vec<abi::Record>> {
        let fd = fd.as_fd();
        let mut buf = vec![0u8; 1 << 20];
        let mut records = Vec::new();
        loop {
            let n = match nix::unistd::read(fd, &mut buf) {
                Ok(0) | Err(Errno::EAGAIN) => break,
                Ok(n) => n,
                Err(e) => return Err(e.into()),
            };
            let mut off = 0;
            while off < n {
                let (header, record) = abi::Record::decode(&buf[off..n])
                    .map_err(|e| anyhow::anyhow!("record at {off}: {e}"))?;
                off += usize::from(header.size);
                records.push((header.time_ns, record));
            }
        }
        records.sort_by_key(|&(time, _)| time);
        Ok(records.into_iter().map(|(_, record)| record).collect())
    }

    /// The name of an errno for messages: its number, symbol and description.
    #[must_use]
    pub fn errno_str(errno: Errno) -> String {
        format!("{} ({errno})", errno as i32)
    }
}
