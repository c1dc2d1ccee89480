//! The `/dev/dprof` client: open, ioctls and reads, with errors that say what to do.
//!
//! The ioctl arguments are encoded with the ABI's own `encode`/`decode` into byte arrays, and
//! the request numbers are exactly `dprof_abi::IOC_*`, so this file holds no second copy of
//! any layout.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use dprof_abi::{Config, CpuStatus, Status, VersionInfo, ABI_VERSION};

use crate::histories::ModulePlan;

/// The ioctls, through `nix`: one function per `dprof_abi::IOC_*` request, its argument the
/// byte array the ABI encodes it into. The request numbers are the ABI's own (the `_bad`
/// macros take them as they are instead of computing them again).
mod sys {
    use dprof_abi::{CausalPlan, CausalScope, CausalType, Config, ExperimentControl};
    use dprof_abi::{HistoryPlan, Status, VersionInfo, IOC_CAUSAL_PLAN, IOC_CAUSAL_SCOPE};
    use dprof_abi::{PageSites, IOC_PAGE_SITES, IOC_STATUS, IOC_STOP, IOC_VERSION};
    use dprof_abi::{IOC_CAUSAL_TYPE, IOC_CONFIGURE};
    use dprof_abi::{IOC_EXPERIMENT_END, IOC_EXPERIMENT_START, IOC_HISTORY_PLAN, IOC_START};

    nix::ioctl_read_bad!(version, IOC_VERSION, [u8; VersionInfo::SIZE]);
    nix::ioctl_write_ptr_bad!(configure, IOC_CONFIGURE, [u8; Config::SIZE]);
    nix::ioctl_none_bad!(start, IOC_START);
    nix::ioctl_none_bad!(stop, IOC_STOP);
    nix::ioctl_readwrite_bad!(status, IOC_STATUS, [u8; Status::SIZE]);
    nix::ioctl_write_ptr_bad!(history_plan, IOC_HISTORY_PLAN, [u8; HistoryPlan::SIZE]);
    nix::ioctl_write_ptr_bad!(causal_plan, IOC_CAUSAL_PLAN, [u8; CausalPlan::SIZE]);
    nix::ioctl_write_ptr_bad!(causal_type, IOC_CAUSAL_TYPE, [u8; CausalType::SIZE]);
    nix::ioctl_write_ptr_bad!(causal_scope, IOC_CAUSAL_SCOPE, [u8; CausalScope::SIZE]);
    nix::ioctl_write_ptr_bad!(
        experiment_start,
        IOC_EXPERIMENT_START,
        [u8; ExperimentControl::SIZE]
    );
    nix::ioctl_none_bad!(experiment_end, IOC_EXPERIMENT_END);
    nix::ioctl_write_ptr_bad!(page_sites, IOC_PAGE_SITES, [u8; PageSites::SIZE]);
}

/// `[start, end)` pairs as the module reads them: little-endian u64s, one after the other.
fn range_bytes(ranges: &[(u64, u64)]) -> Vec<u8> {
    ranges
        .iter()
        .flat_map(|&(start, end)| [start.to_le_bytes(), end.to_le_bytes()])
        .flatten()
        .collect()
}

/// Why talking to the device failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// No device node.
    #[error("{} does not exist: load the module with `insmod dprof.ko`", path.display())]
    Missing {
        /// The device path.
        path: PathBuf,
    },
    /// Another process holds the device.
    #[error("another collector has {} open", path.display())]
    Busy {
        /// The device path.
        path: PathBuf,
    },
    /// Not allowed to open it.
    #[error("{} needs root", path.display())]
    Permission {
        /// The device path.
        path: PathBuf,
    },
    /// Opening failed otherwise.
    #[error("cannot open {}", path.display())]
    Open {
        /// The device path.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The module speaks another ABI.
    #[error("module ABI version {module}, this dprof expects {expected}: rebuild one of them")]
    AbiMismatch {
        /// The module's version.
        module: u32,
        /// [`ABI_VERSION`].
        expected: u32,
    },
    /// The module refused the configuration.
    #[error(
        "the module refused the configuration (events {events:#x}, {ring_bytes} ring bytes per \
         CPU; the ring size must be a power of two the module accepts)"
    )]
    ConfigRefused {
        /// `Config.events`.
        events: u32,
        /// `Config.ring_bytes`.
        ring_bytes: u32,
        /// What the module said.
        #[source]
        source: io::Error,
    },
    /// An ioctl failed.
    #[error("ioctl {request} on {} failed", path.display())]
    Ioctl {
        /// Which request ("VERSION", "START", ...).
        request: &'static str,
        /// The device path.
        path: PathBuf,
        /// What the module said.
        #[source]
        source: io::Error,
    },
    /// The module refused the history plan.
    #[error("the module refused the history plan: {why}")]
    HistoryPlanRefused {
        /// The reason, from the errno.
        why: &'static str,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// An ioctl answer that does not decode.
    #[error("the module's answer to ioctl {request} does not decode: {problem}")]
    BadAnswer {
        /// Which request.
        request: &'static str,
        /// What the ABI decoder said.
        problem: dprof_abi::AbiError,
    },
    /// The module refused the causal plan or a type of its table.
    #[error("the module refused {what}: {why}")]
    CausalRefused {
        /// What was refused ("progress point kprobe:foo", "the type table entry for X").
        what: String,
        /// The reason, from the errno.
        why: &'static str,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// A user progress point could not be signalled.
    #[error("cannot signal progress point `{name}` through {}: {why}", path.display())]
    Progress {
        /// The point's name.
        name: String,
        /// The device path.
        path: PathBuf,
        /// The reason, from the errno.
        why: &'static str,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// `read()` failed.
    #[error("reading {} failed", path.display())]
    Read {
        /// The device path.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
}

/// What a read brought.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// This many bytes of whole records.
    Data(usize),
    /// Nothing yet (EAGAIN): try again later.
    Empty,
    /// End of data: collection stopped and the rings are drained (a 0-byte read).
    Drained,
}

/// An open `/dev/dprof`.
#[derive(Debug)]
pub struct Device {
    file: File,
    path: PathBuf,
}

impl Device {
    /// Opens [`dprof_abi::DEVICE_PATH`].
    ///
    /// # Errors
    /// [`DeviceError::Missing`], [`DeviceError::Busy`], [`DeviceError::Permission`] or
    /// [`DeviceError::Open`].
    pub fn open() -> Result<Self, DeviceError> {
        Self::open_path(Path::new(dprof_abi::DEVICE_PATH))
    }

    /// Opens the device at `path`, non-blocking so that an empty ring reads as EAGAIN.
    ///
    /// # Errors
    /// As [`Device::open`].
    pub fn open_path(path: &Path) -> Result<Self, DeviceError> {
        let path = path.to_path_buf();
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(file) => Ok(Self { file, path }),
            Err(e) => Err(match e.raw_os_error() {
                Some(libc::ENOENT | libc::ENXIO | libc::ENODEV) => DeviceError::Missing { path },
                Some(libc::EBUSY) => DeviceError::Busy { path },
                Some(libc::EACCES | libc::EPERM) => DeviceError::Permission { path },
                _ => DeviceError::Open { path, source: e },
            }),
        }
    }

    /// The device path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs one ioctl `call` (one of [`sys`]'s) on the device; `request` names it in the error.
    fn ioctl(
        &self,
        request: &'static str,
        call: impl FnOnce(RawFd) -> nix::Result<libc::c_int>,
    ) -> Result<(), DeviceError> {
        call(self.file.as_raw_fd())
            .map(drop)
            .map_err(|errno| DeviceError::Ioctl {
                request,
                path: self.path.clone(),
                source: io::Error::from(errno),
            })
    }

    /// What the module is and can do (`IOC_VERSION`), whatever its ABI version.
    ///
    /// # Errors
    /// [`DeviceError::Ioctl`] or [`DeviceError::BadAnswer`].
    pub fn version(&self) -> Result<VersionInfo, DeviceError> {
        let mut buf = [0u8; VersionInfo::SIZE];
        self.ioctl("VERSION", |fd| {
            // SAFETY: `buf` is a live buffer of exactly the size the request encodes, which the
            // module reads or writes and does not keep.
            unsafe { sys::version(fd, &raw mut buf) }
        })?;
        VersionInfo::decode(&buf).map_err(|problem| DeviceError::BadAnswer {
            request: "VERSION",
            problem,
        })
    }

    /// [`Device::version`], failing unless the module's ABI version is [`ABI_VERSION`].
    ///
    /// # Errors
    /// [`DeviceError::AbiMismatch`] or as [`Device::version`].
    pub fn checked_version(&self) -> Result<VersionInfo, DeviceError> {
        let version = self.version()?;
        if version.abi_version == ABI_VERSION {
            Ok(version)
        } else {
            Err(DeviceError::AbiMismatch {
                module: version.abi_version,
                expected: ABI_VERSION,
            })
        }
    }

    /// Configures the next collection (`IOC_CONFIGURE`).
    ///
    /// # Errors
    /// [`DeviceError::ConfigRefused`] when the module says EINVAL, else
    /// [`DeviceError::Ioctl`].
    pub fn configure(&self, config: &Config) -> Result<(), DeviceError> {
        let mut buf = [0u8; Config::SIZE];
        config.encode(&mut buf);
        match self.ioctl("CONFIGURE", |fd| {
            // SAFETY: `buf` is a live buffer of exactly the size the request encodes, which the
            // module reads or writes and does not keep.
            unsafe { sys::configure(fd, &raw const buf) }
        }) {
            Err(DeviceError::Ioctl { source, .. })
                if source.raw_os_error() == Some(libc::EINVAL) =>
            {
                Err(DeviceError::ConfigRefused {
                    events: config.events,
                    ring_bytes: config.ring_bytes,
                    source,
                })
            }
            other => other,
        }
    }

    /// Hands the module the history plan (`IOC_HISTORY_PLAN`), after a configuration with
    /// `EVENT_HISTORIES`.
    ///
    /// # Errors
    /// [`DeviceError::HistoryPlanRefused`] with the module's reason, else
    /// [`DeviceError::Ioctl`].
    pub fn history_plan(&self, plan: &ModulePlan) -> Result<(), DeviceError> {
        let mut targets = Vec::with_capacity(plan.targets.len() * dprof_abi::HistoryTarget::SIZE);
        for t in &plan.targets {
            let mut bytes = [0u8; dprof_abi::HistoryTarget::SIZE];
            t.encode(&mut bytes);
            targets.extend_from_slice(&bytes);
        }
        let limits = dprof_abi::HistoryPlan {
            target_count: u32::try_from(plan.targets.len()).unwrap_or(u32::MAX),
            targets_ptr: targets.as_ptr() as u64,
            ..plan.limits
        };
        let mut buf = [0u8; dprof_abi::HistoryPlan::SIZE];
        limits.encode(&mut buf);
        match self.ioctl("HISTORY_PLAN", |fd| {
            // SAFETY: `buf` is a live buffer of exactly the size the request encodes, and
            // `targets` the live array its pointer names; the module reads both during the
            // call and keeps neither.
            unsafe { sys::history_plan(fd, &raw const buf) }
        }) {
            Err(DeviceError::Ioctl { source, .. }) => {
                let why = match source.raw_os_error() {
                    Some(libc::ENOENT) => "a planned slab cache does not exist in this kernel",
                    Some(libc::EINVAL) => {
                        "a watched range lies beyond its type's objects, or the plan is malformed"
                    }
                    // 524 is the kernel-internal ENOTSUPP.
                    Some(libc::EOPNOTSUPP | 524) => "the module cannot list slab caches here",
                    _ => "the module refused it",
                };
                Err(DeviceError::HistoryPlanRefused { why, source })
            }
            other => other,
        }
    }

    /// Hands the module the causal session's progress points (`IOC_CAUSAL_PLAN`), after a
    /// configuration with the samples event and before [`Device::start`]. `labels` name the
    /// plan's points (`kind:name`) in plan order, for the error.
    ///
    /// # Errors
    /// [`DeviceError::CausalRefused`], naming the points, else [`DeviceError::Ioctl`].
    pub fn causal_plan(
        &self,
        plan: &dprof_abi::CausalPlan,
        labels: &[String],
    ) -> Result<(), DeviceError> {
        let mut buf = [0u8; dprof_abi::CausalPlan::SIZE];
        plan.encode(&mut buf);
        match self.ioctl("CAUSAL_PLAN", |fd| {
            // SAFETY: `buf` is a live buffer of exactly the size the request encodes, which the
            // module reads or writes and does not keep.
            unsafe { sys::causal_plan(fd, &raw const buf) }
        }) {
            Err(DeviceError::Ioctl { source, .. }) => {
                let why = match source.raw_os_error() {
                    Some(libc::ENOENT) => {
                        "a kprobe's function or a tracepoint does not exist in this kernel \
                         (only built-in tracepoints can be used; check /proc/kallsyms and \
                         /sys/kernel/tracing/events)"
                    }
                    Some(libc::EINVAL) => "the plan is malformed or comes at the wrong time",
                    Some(libc::EBUSY) => "this session already has a causal plan",
                    Some(libc::EOPNOTSUPP | 524) => {
                        "this kernel cannot attach such a point (no kprobes or tracepoints), \
                         or lacks the scheduler tracepoints of per-task delay accounting \
                         (try --delay-accounting cpu)"
                    }
                    _ => "it said no",
                };
                Err(DeviceError::CausalRefused {
                    what: format!("the progress points {}", labels.join(", ")),
                    why,
                    source,
                })
            }
            other => other,
        }
    }

    /// Sets the causal session's scope (`IOC_CAUSAL_SCOPE`): `ranges`, `[start, end)` code
    /// ranges sorted and disjoint, after [`Device::causal_plan`] and before
    /// [`Device::start`].
    ///
    /// # Errors
    /// [`DeviceError::CausalRefused`], else [`DeviceError::Ioctl`].
    pub fn causal_scope(&self, ranges: &[(u64, u64)]) -> Result<(), DeviceError> {
        let range_bytes = range_bytes(ranges);
        let scope = dprof_abi::CausalScope {
            struct_size: dprof_abi::CausalScope::SIZE as u32,
            range_count: u32::try_from(ranges.len()).unwrap_or(u32::MAX),
            ranges_ptr: range_bytes.as_ptr() as u64,
        };
        let mut buf = [0u8; dprof_abi::CausalScope::SIZE];
        scope.encode(&mut buf);
        match self.ioctl("CAUSAL_SCOPE", |fd| {
            // SAFETY: `buf` and the ranges it points to are live buffers the module reads
            // during the call and does not keep.
            unsafe { sys::causal_scope(fd, &raw const buf) }
        }) {
            Err(DeviceError::Ioctl { source, .. }) => Err(DeviceError::CausalRefused {
                what: format!("the scope ({} code ranges)", ranges.len()),
                why: match source.raw_os_error() {
                    Some(libc::EINVAL) => {
                        "the ranges are not sorted and disjoint, or come at the wrong time"
                    }
                    _ => "it said no",
                },
                source,
            }),
            other => other,
        }
    }

    /// Records the page allocator's allocations and frees (`IOC_PAGE_SITES`), their sites
    /// found past the `allocator`'s code and left out when `elsewhere`'s: both `[start, end)`
    /// code ranges, sorted and disjoint. After [`Device::configure`] with slab events, before
    /// [`Device::start`].
    ///
    /// # Errors
    /// [`DeviceError::Ioctl`].
    pub fn page_sites(
        &self,
        allocator: &[(u64, u64)],
        elsewhere: &[(u64, u64)],
    ) -> Result<(), DeviceError> {
        let (allocator_bytes, elsewhere_bytes) = (range_bytes(allocator), range_bytes(elsewhere));
        let count = |r: &[(u64, u64)]| u32::try_from(r.len()).unwrap_or(u32::MAX);
        let sites = dprof_abi::PageSites {
            struct_size: dprof_abi::PageSites::SIZE as u32,
            allocator_count: count(allocator),
            allocator_ptr: allocator_bytes.as_ptr() as u64,
            elsewhere_ptr: if elsewhere.is_empty() {
                0
            } else {
                elsewhere_bytes.as_ptr() as u64
            },
            elsewhere_count: count(elsewhere),
        };
        let mut buf = [0u8; dprof_abi::PageSites::SIZE];
        sites.encode(&mut buf);
        self.ioctl("PAGE_SITES", |fd| {
            // SAFETY: `buf` and the ranges it points to are live buffers the module reads
            // during the call and does not keep.
            unsafe { sys::page_sites(fd, &raw const buf) }
        })
    }

    /// Sets entry `index` of the causal type table (`IOC_CAUSAL_TYPE`): the instructions
    /// that access the type and, for hardware data addresses, its slab cache (may be empty).
    ///
    /// # Errors
    /// [`DeviceError::CausalRefused`], naming the type, else [`DeviceError::Ioctl`].
    pub fn causal_type(
        &self,
        index: u32,
        type_name: &str,
        cache: &str,
        ips: &[u64],
    ) -> Result<(), DeviceError> {
        let ip_bytes: Vec<u8> = ips.iter().flat_map(|ip| ip.to_le_bytes()).collect();
        let entry = dprof_abi::CausalType {
            struct_size: dprof_abi::CausalType::SIZE as u32,
            index,
            ips_ptr: if ips.is_empty() {
                0
            } else {
                ip_bytes.as_ptr() as u64
            },
            ip_count: u32::try_from(ips.len()).unwrap_or(u32::MAX),
            ..dprof_abi::CausalType::default()
        }
        .with_name(cache.as_bytes());
        let mut buf = [0u8; dprof_abi::CausalType::SIZE];
        entry.encode(&mut buf);
        match self.ioctl("CAUSAL_TYPE", |fd| {
            // SAFETY: `buf` is a live buffer of exactly the size the request encodes, and the
            // instruction list it points to (`ip_bytes`) outlives the call; the module does
            // not keep either.
            unsafe { sys::causal_type(fd, &raw const buf) }
        }) {
            Err(DeviceError::Ioctl { source, .. }) => {
                let why = match source.raw_os_error() {
                    Some(libc::ENOENT) => "its slab cache does not exist in this kernel",
                    Some(libc::EINVAL) => {
                        "too many instructions, or no causal plan, or an experiment is running"
                    }
                    Some(libc::EFAULT) => "the instruction list could not be read",
                    _ => "it said no",
                };
                Err(DeviceError::CausalRefused {
                    what: format!("the type table entry for {type_name}"),
                    why,
                    source,
                })
            }
            other => other,
        }
    }

    /// Starts an experiment (`IOC_EXPERIMENT_START`).
    ///
    /// # Errors
    /// [`DeviceError::Ioctl`].
    pub fn experiment_start(
        &self,
        control: &dprof_abi::ExperimentControl,
    ) -> Result<(), DeviceError> {
        let mut buf = [0u8; dprof_abi::ExperimentControl::SIZE];
        control.encode(&mut buf);
        self.ioctl("EXPERIMENT_START", |fd| {
            // SAFETY: `buf` is a live buffer of exactly the size the request encodes, which the
            // module reads or writes and does not keep.
            unsafe { sys::experiment_start(fd, &raw const buf) }
        })
    }

    /// Ends the running experiment (`IOC_EXPERIMENT_END`); its record follows in the rings.
    ///
    /// # Errors
    /// [`DeviceError::Ioctl`].
    pub fn experiment_end(&self) -> Result<(), DeviceError> {
        self.ioctl("EXPERIMENT_END", |fd| {
            // SAFETY: the request takes no argument.
            unsafe { sys::experiment_end(fd) }
        })
    }

    /// Starts collecting (`IOC_START`).
    ///
    /// # Errors
    /// [`DeviceError::Ioctl`].
    pub fn start(&self) -> Result<(), DeviceError> {
        self.ioctl("START", |fd| {
            // SAFETY: the request takes no argument.
            unsafe { sys::start(fd) }
        })
    }

    /// Stops collecting (`IOC_STOP`); what is in the rings can still be read.
    ///
    /// # Errors
    /// [`DeviceError::Ioctl`].
    pub fn stop(&self) -> Result<(), DeviceError> {
        self.ioctl("STOP", |fd| {
            // SAFETY: the request takes no argument.
            unsafe { sys::stop(fd) }
        })
    }

    /// The counters (`IOC_STATUS`), with up to `capacity` per-CPU entries (the module fills
    /// `min(capacity, nr_cpu_ids)`).
    ///
    /// # Errors
    /// [`DeviceError::Ioctl`] or [`DeviceError::BadAnswer`].
    pub fn status(&self, capacity: usize) -> Result<(Status, Vec<CpuStatus>), DeviceError> {
        let mut cpus = vec![0u8; capacity.saturating_mul(CpuStatus::SIZE)];
        let mut buf = [0u8; Status::SIZE];
        Status {
            cpus_ptr: if capacity == 0 {
                0
            } else {
                cpus.as_mut_ptr() as u64
            },
            cpus_len: u32::try_from(capacity).unwrap_or(u32::MAX),
            ..Status::default()
        }
        .encode(&mut buf);
        self.ioctl("STATUS", |fd| {
            // SAFETY: `buf` is a live buffer of exactly the size the request encodes, and the
            // per-CPU array it points to (`cpus`, `capacity` entries) outlives the call; the
            // module writes both and keeps neither.
            unsafe { sys::status(fd, &raw mut buf) }
        })?;
        let bad = |problem| DeviceError::BadAnswer {
            request: "STATUS",
            problem,
        };
        let status = Status::decode(&buf).map_err(bad)?;
        let filled = capacity.min(status.nr_cpus as usize);
        let cpus = cpus
            .chunks_exact(CpuStatus::SIZE)
            .take(filled)
            .map(CpuStatus::decode)
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        Ok((status, cpus))
    }

    /// Reads whole records into `buf`.
    ///
    /// # Errors
    /// [`DeviceError::Read`] for anything but EAGAIN and EINTR.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<ReadOutcome, DeviceError> {
        loop {
            return match self.file.read(buf) {
                Ok(0) => Ok(ReadOutcome::Drained),
                Ok(n) => Ok(ReadOutcome::Data(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(ReadOutcome::Empty),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => Err(DeviceError::Read {
                    path: self.path.clone(),
                    source,
                }),
            };
        }
    }
}

/// A write-only handle on `/dev/dprof` for signalling user progress points. Write-only
/// opens do not take the collector's exclusive slot, so a workload can signal while
/// `dprof causal` collects.
#[derive(Debug)]
pub struct ProgressSignal {
    file: File,
    path: PathBuf,
}

impl ProgressSignal {
    /// Opens [`dprof_abi::DEVICE_PATH`] write-only.
    ///
    /// # Errors
    /// [`DeviceError::Missing`], [`DeviceError::Permission`] or [`DeviceError::Open`].
    pub fn open() -> Result<Self, DeviceError> {
        Self::open_path(Path::new(dprof_abi::DEVICE_PATH))
    }

    /// Opens the device at `path` write-only.
    ///
    /// # Errors
    /// As [`ProgressSignal::open`].
    pub fn open_path(path: &Path) -> Result<Self, DeviceError> {
        let path = path.to_path_buf();
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(file) => Ok(Self { file, path }),
            Err(e) => Err(match e.raw_os_error() {
                Some(libc::ENOENT | libc::ENXIO | libc::ENODEV) => DeviceError::Missing { path },
                Some(libc::EACCES | libc::EPERM) => DeviceError::Permission { path },
                _ => DeviceError::Open { path, source: e },
            }),
        }
    }

    /// Counts one visit of the user progress point `name` in the running causal session.
    ///
    /// # Errors
    /// [`DeviceError::Progress`]: no causal session with a user point of that name (ENOENT),
    /// a name the module cannot take (EINVAL), or another failure.
    pub fn signal(&mut self, name: &str) -> Result<(), DeviceError> {
        use std::io::Write;
        let error = |source: io::Error, path: &Path| {
            let why = match source.raw_os_error() {
                Some(libc::ENOENT) => {
                    "no running `dprof causal` session has a user progress point of that name"
                }
                Some(libc::EINVAL) => "the name is empty, too long or not printable ASCII",
                _ => "the module refused the write",
            };
            DeviceError::Progress {
                name: name.to_owned(),
                path: path.to_path_buf(),
                why,
                source,
            }
        };
        match self.file.write(name.as_bytes()) {
            Ok(n) if n == name.len() => Ok(()),
            Ok(_) => Err(error(
                io::Error::new(io::ErrorKind::WriteZero, "short write"),
                &self.path,
            )),
            Err(e) => Err(error(e, &self.path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_signal_on_a_missing_device_says_to_load_the_module() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = ProgressSignal::open_path(&dir.path().join("dprof")).expect_err("no device");
        assert!(matches!(err, DeviceError::Missing { .. }), "{err}");
    }

    #[test]
    fn missing_device_says_to_load_the_module() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Device::open_path(&dir.path().join("dprof")).expect_err("no device there");
        assert!(matches!(err, DeviceError::Missing { .. }));
        assert!(err
            .to_string()
            .ends_with("does not exist: load the module with `insmod dprof.ko`"));
    }

    #[test]
    fn a_regular_file_is_not_a_device() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("dprof");
        std::fs::write(&path, b"").expect("write");
        let dev = Device::open_path(&path).expect("a file opens");
        let err = dev.version().expect_err("a file has no ioctls");
        assert!(err.to_string().starts_with("ioctl VERSION on "), "{err}");
    }

    #[test]
    fn abi_mismatch_names_both_versions() {
        let err = DeviceError::AbiMismatch {
            module: 2,
            expected: 1,
        };
        assert_eq!(
            err.to_string(),
            "module ABI version 2, this dprof expects 1: rebuild one of them"
        );
    }
}
