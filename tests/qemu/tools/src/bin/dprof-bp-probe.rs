//! Does this machine's debug-register emulation report data breakpoints for accesses that do
//! not touch the watched bytes? Real x86 CPUs never do; QEMU's TCG does for some unaligned
//! stores in the watched page. The history checks use the answer to tell a decoder error (a
//! mismatch on a machine that is exact) from the emulator's.
//!
//! Watches 8 bytes of a page-aligned buffer (read/write, user mode, through perf), then makes
//! 1000 unaligned 2-byte stores 0x79 and 0x179 bytes after them (outside) and 1000 8-byte
//! stores onto them (inside), and prints `outside=N inside=M`.

use std::arch::asm;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::raw::c_long;

use dprof_qemu_tools::PerfEventAttr;

#[repr(C, align(4096))]
struct Page([u8; 4096]);

const PERF_TYPE_BREAKPOINT: u32 = 5;
const HW_BREAKPOINT_RW: u32 = 3;
/// `exclude_kernel` (bit 5) and `exclude_hv` (bit 6) of the attr flags.
const EXCLUDE_KERNEL_HV: u64 = (1 << 5) | (1 << 6);

fn count(fd: impl AsFd) -> anyhow::Result<u64> {
    let mut value = [0u8; 8];
    let n = nix::unistd::read(fd, &mut value)?;
    anyhow::ensure!(n == 8, "reading the breakpoint counter failed");
    Ok(u64::from_ne_bytes(value))
}

fn main() -> anyhow::Result<()> {
    let mut page = Box::new(Page([0; 4096]));
    let watched = page.0.as_mut_ptr().wrapping_add(0x100);
    let attr = PerfEventAttr {
        kind: PERF_TYPE_BREAKPOINT,
        size: PerfEventAttr::abi_size(),
        flags: EXCLUDE_KERNEL_HV,
        bp_type: HW_BREAKPOINT_RW,
        config1: watched as u64, // bp_addr
        config2: 8,              // bp_len
        ..PerfEventAttr::default()
    };
    // Raw syscall: nix has no perf_event_open wrapper.
    // SAFETY: perf_event_open with a valid attr, this thread, any CPU, no group.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            std::ptr::from_ref(&attr),
            0 as c_long,
            -1 as c_long,
            -1 as c_long,
            0 as c_long,
        )
    };
    anyhow::ensure!(
        fd >= 0,
        "perf_event_open: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: perf_event_open returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(i32::try_from(fd)?) };
    for i in 0..1000u16 {
        // SAFETY: both stores stay inside the 4096-byte page (0x100 + 0x17a < 4096).
        unsafe {
            asm!("mov word ptr [{p} + 0x79], {v:x}", "mov word ptr [{p} + 0x179], {v:x}",
                 p = in(reg) watched, v = in(reg) i, options(nostack));
        }
    }
    let outside = count(&fd)?;
    for i in 0..1000u64 {
        // SAFETY: the 8 watched bytes lie inside the page.
        unsafe {
            asm!("mov qword ptr [{p}], {v}", p = in(reg) watched, v = in(reg) i, options(nostack));
        };
    }
    let inside = count(&fd)? - outside;
    println!("outside={outside} inside={inside}");
    Ok(())
}
