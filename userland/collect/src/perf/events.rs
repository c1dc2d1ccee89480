//! perf events opened by the collector itself: `perf_event_open(2)` per CPU, the attributes of
//! the sampler and of the kmem tracepoints, and the per-CPU ring each CPU's events write to
//! (one mmap per CPU; the CPU's other events are redirected into it with
//! `PERF_EVENT_IOC_SET_OUTPUT`). Records are parsed with `linux-perf-event-reader`, from the
//! same attributes the events were opened with.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};

use linux_perf_event_reader::{Endianness, PerfEventAttr, RecordParseInfo};
use perf_event_open_sys::bindings::{
    perf_event_attr, perf_event_mmap_page, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC,
    PERF_REG_X86_AX, PERF_REG_X86_BP, PERF_REG_X86_BX, PERF_REG_X86_CX, PERF_REG_X86_DI,
    PERF_REG_X86_DX, PERF_REG_X86_IP, PERF_REG_X86_R10, PERF_REG_X86_R11, PERF_REG_X86_R12,
    PERF_REG_X86_R13, PERF_REG_X86_R14, PERF_REG_X86_R15, PERF_REG_X86_R8, PERF_REG_X86_R9,
    PERF_REG_X86_SI, PERF_REG_X86_SP, PERF_SAMPLE_ADDR, PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_CPU,
    PERF_SAMPLE_DATA_SRC, PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_IP, PERF_SAMPLE_PHYS_ADDR,
    PERF_SAMPLE_RAW, PERF_SAMPLE_REGS_INTR, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_WEIGHT,
    PERF_TYPE_SOFTWARE, PERF_TYPE_TRACEPOINT,
};
use perf_event_open_sys::ioctls;

/// The perf register numbers of the general-purpose registers, in the order of
/// [`dprof_abi::AccessSample::regs`] (the hardware encoding: rax, rcx, rdx, rbx, rsp, rbp,
/// rsi, rdi, r8..r15).
pub(crate) const ABI_REG_ORDER: [u32; dprof_abi::SAMPLE_REGS] = [
    PERF_REG_X86_AX,
    PERF_REG_X86_CX,
    PERF_REG_X86_DX,
    PERF_REG_X86_BX,
    PERF_REG_X86_SP,
    PERF_REG_X86_BP,
    PERF_REG_X86_SI,
    PERF_REG_X86_DI,
    PERF_REG_X86_R8,
    PERF_REG_X86_R9,
    PERF_REG_X86_R10,
    PERF_REG_X86_R11,
    PERF_REG_X86_R12,
    PERF_REG_X86_R13,
    PERF_REG_X86_R14,
    PERF_REG_X86_R15,
];

/// The sampler: cpu-clock every `period_ns`, with the interrupted registers, which is what
/// the module's software sampler records. Kernel mode only unless `user`; never the idle
/// task, whose samples touch no data of the workload (the module leaves it out too).
pub(crate) fn cpu_clock(period_ns: u64, user: bool) -> perf_event_attr {
    let mut attr = base_attr();
    attr.type_ = PERF_TYPE_SOFTWARE;
    attr.config = u64::from(PERF_COUNT_SW_CPU_CLOCK);
    attr.__bindgen_anon_1.sample_period = period_ns;
    attr.sample_type = u64::from(
        PERF_SAMPLE_IDENTIFIER
            | PERF_SAMPLE_IP
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_REGS_INTR,
    );
    attr.sample_regs_intr = intr_regs_mask();
    attr.set_exclude_user(u64::from(!user));
    attr.set_exclude_idle(1);
    attr
}

/// What every hardware sample carries, in this order in the record (see `hw_sample.rs`);
/// IBS samples add `PERF_SAMPLE_RAW` (its registers).
pub(crate) const HW_SAMPLE_TYPE: u32 = PERF_SAMPLE_IDENTIFIER
    | PERF_SAMPLE_IP
    | PERF_SAMPLE_TID
    | PERF_SAMPLE_TIME
    | PERF_SAMPLE_ADDR
    | PERF_SAMPLE_CPU
    | PERF_SAMPLE_WEIGHT
    | PERF_SAMPLE_DATA_SRC
    | PERF_SAMPLE_REGS_INTR
    | PERF_SAMPLE_PHYS_ADDR;

/// The registers every sampler asks for: the general-purpose ones and the ip.
pub(crate) fn intr_regs_mask() -> u64 {
    ABI_REG_ORDER
        .iter()
        .chain(&[PERF_REG_X86_IP])
        .fold(0, |mask, &r| mask | (1u64 << r))
}

/// A hardware sampler, as the module opens it: AMD IBS op (`ibs`: its registers in
/// `PERF_SAMPLE_RAW`; it cannot leave out user mode or the hypervisor in hardware) or Intel
/// PEBS load latency (`precise_ip` 2), every `period` events of the PMU `pmu_type`.
pub(crate) fn hardware(
    ibs: bool,
    pmu_type: u32,
    config: u64,
    config1: u64,
    period: u64,
    user: bool,
) -> perf_event_attr {
    let mut attr = base_attr();
    attr.type_ = pmu_type;
    attr.config = config;
    attr.__bindgen_anon_3.config1 = config1;
    attr.__bindgen_anon_1.sample_period = period;
    attr.sample_type = u64::from(HW_SAMPLE_TYPE | if ibs { PERF_SAMPLE_RAW } else { 0 });
    attr.sample_regs_intr = intr_regs_mask();
    if ibs {
        attr.set_exclude_hv(0);
    } else {
        attr.set_precise_ip(2);
        attr.set_exclude_user(u64::from(!user));
    }
    attr
}

/// A tracepoint by its tracefs id, every hit, with its raw record.
pub(crate) fn tracepoint(id: u64) -> perf_event_attr {
    let mut attr = base_attr();
    attr.type_ = PERF_TYPE_TRACEPOINT;
    attr.config = id;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.sample_type = u64::from(
        PERF_SAMPLE_IDENTIFIER
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_RAW,
    );
    attr
}

/// Frames of a page allocation's call chain: enough to climb out of the page allocator and
/// the page fragment allocator.
const PAGE_CHAIN_FRAMES: u16 = 16;

/// A tracepoint with its raw record and the kernel call chain that hit it, for the page
/// allocator's tracepoints, which name no call site.
pub(crate) fn tracepoint_with_kernel_chain(id: u64) -> perf_event_attr {
    let mut attr = tracepoint(id);
    attr.sample_type |= u64::from(PERF_SAMPLE_CALLCHAIN);
    attr.set_exclude_callchain_user(1);
    attr.sample_max_stack = PAGE_CHAIN_FRAMES;
    attr
}

/// What every event shares: disabled until started, `CLOCK_MONOTONIC` times (one clock for all
/// CPUs, as the module's), no hypervisor samples, an id in every record.
fn base_attr() -> perf_event_attr {
    // SAFETY: perf_event_attr is plain data for which all-zero bytes are the defaults.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    attr.set_disabled(1);
    attr.set_exclude_hv(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.set_sample_id_all(1);
    attr
}

/// How records of an event opened with `attr` are parsed.
pub(crate) fn parse_info(attr: &perf_event_attr) -> io::Result<RecordParseInfo> {
    // SAFETY: `attr` is a live perf_event_attr; its bytes are plain data.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            std::ptr::from_ref(attr).cast::<u8>(),
            std::mem::size_of::<perf_event_attr>(),
        )
    };
    let (parsed, _) = PerfEventAttr::parse::<_, byteorder::LittleEndian>(bytes)?;
    Ok(RecordParseInfo::new(&parsed, Endianness::LittleEndian))
}

/// Opens `attr` on `cpu` for every task.
pub(crate) fn open(attr: &perf_event_attr, cpu: u32) -> io::Result<OwnedFd> {
    open_for(attr, -1, cpu as i32)
}

/// Opens `attr` for the calling thread alone, on whichever CPU it runs.
pub(crate) fn open_for_this_thread(attr: &perf_event_attr) -> io::Result<OwnedFd> {
    open_for(attr, 0, -1)
}

/// `perf_event_open(2)` of `attr` for task `pid` (-1: every task; 0: the caller) on `cpu`
/// (-1: every CPU).
fn open_for(attr: &perf_event_attr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    let mut attr = *attr;
    // SAFETY: `attr` is initialised and sized; the kernel only reads it (and may write its
    // size back on E2BIG).
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &raw mut attr,
            pid,
            cpu,
            -1,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: perf_event_open just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The id the kernel puts in `fd`'s records.
pub(crate) fn id(fd: &OwnedFd) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 to the pointer.
    check(unsafe { ioctls::ID(fd.as_raw_fd(), &raw mut id) })?;
    Ok(id)
}

/// Sends `fd`'s records to `ring`'s buffer (both on the same CPU).
pub(crate) fn redirect(fd: &OwnedFd, ring: &OwnedFd) -> io::Result<()> {
    // SAFETY: PERF_EVENT_IOC_SET_OUTPUT takes a descriptor by value.
    check(unsafe { ioctls::SET_OUTPUT(fd.as_raw_fd(), ring.as_raw_fd()) })
}

/// Starts or stops counting on `fd`.
pub(crate) fn enable(fd: &OwnedFd, on: bool) -> io::Result<()> {
    // SAFETY: ENABLE and DISABLE take no pointer.
    check(unsafe {
        if on {
            ioctls::ENABLE(fd.as_raw_fd(), 0)
        } else {
            ioctls::DISABLE(fd.as_raw_fd(), 0)
        }
    })
}

/// One CPU's ring: the mapped metadata page and a power-of-two data area after it.
#[derive(Debug)]
pub(crate) struct Ring {
    base: NonNull<libc::c_void>,
    len: usize,
    data_size: u64,
    page: usize,
    /// A record that wraps the end of the data area, copied whole.
    scratch: Vec<u8>,
}

// SAFETY: the mapping belongs to this value alone, and is only touched through `&mut self`.
unsafe impl Send for Ring {}

/// A record's type and misc fields, and its body after the 8-byte header.
pub(crate) struct RingRecord<'a> {
    pub(crate) kind: u32,
    pub(crate) misc: u16,
    pub(crate) body: &'a [u8],
}

impl Ring {
    /// Maps `data_bytes` (a power of two, a multiple of the page size) of ring for `fd`.
    pub(crate) fn map(fd: &OwnedFd, data_bytes: usize) -> io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| io::Error::other("no page size"))?;
        let len = page + data_bytes;
        // SAFETY: a fresh shared mapping of the perf fd, as perf_event_open(2) describes.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(base).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Self {
            base,
            len,
            data_size: data_bytes as u64,
            page,
            scratch: Vec::new(),
        })
    }

    fn meta(&self) -> *mut perf_event_mmap_page {
        self.base.as_ptr().cast()
    }

    /// Hands every record now in the ring to `each`, then frees their space.
    pub(crate) fn drain(&mut self, mut each: impl FnMut(RingRecord<'_>)) {
        let meta = self.meta();
        // SAFETY: `meta` is the mapped metadata page; data_head is written by the kernel
        // and read here with a volatile load followed by an acquire fence, as documented in
        // perf_event_open(2).
        let head = unsafe { std::ptr::read_volatile(&raw const (*meta).data_head) };
        fence(Ordering::Acquire);
        // SAFETY: data_tail is ours to read and write.
        let mut tail = unsafe { std::ptr::read_volatile(&raw const (*meta).data_tail) };
        // SAFETY: the data area follows the metadata page within the mapping.
        let data = unsafe {
            std::slice::from_raw_parts(
                self.base.as_ptr().cast::<u8>().add(self.page),
                self.data_size as usize,
            )
        };
        while tail < head {
            let at = (tail % self.data_size) as usize;
            // Records are 8-byte aligned and the area a power of two: the header never wraps.
            let Some(h) = data.get(at..at + 8) else { break };
            let kind = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let misc = u16::from_le_bytes([h[4], h[5]]);
            let size = usize::from(u16::from_le_bytes([h[6], h[7]]));
            if size < 8 || (size as u64) > head - tail {
                // A corrupt ring: skip what is left rather than read garbage.
                tail = head;
                break;
            }
            let record = if at + size <= data.len() {
                &data[at..at + size]
            } else {
                let first = data.len() - at;
                self.scratch.clear();
                self.scratch.extend_from_slice(&data[at..]);
                self.scratch.extend_from_slice(&data[..size - first]);
                &self.scratch[..]
            };
            each(RingRecord {
                kind,
                misc,
                body: &record[8..],
            });
            tail += size as u64;
        }
        fence(Ordering::SeqCst);
        // SAFETY: as above; the full fence orders our reads before the kernel may reuse
        // the space.
        unsafe { std::ptr::write_volatile(&raw mut (*meta).data_tail, tail) };
    }

    /// Bytes written and not yet drained.
    pub(crate) fn pending(&self) -> u64 {
        let meta = self.meta();
        // SAFETY: as in `drain`.
        unsafe {
            std::ptr::read_volatile(&raw const (*meta).data_head)
                .saturating_sub(std::ptr::read_volatile(&raw const (*meta).data_tail))
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping was created in `map` with this length and is not used after.
        unsafe {
            libc::munmap(self.base.as_ptr(), self.len);
        }
    }
}
