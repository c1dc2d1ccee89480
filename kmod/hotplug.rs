//! CPU hotplug: perf drops a CPU's counters and breakpoints when the CPU goes offline and does
//! not bring them back. The shim's dynamic AP state calls these on the CPU that comes or goes
//! (the hotplug thread, with the hotplug lock held for writing); the sampler and the histories
//! remake what the running collection had on that CPU.

use kernel::ffi::{c_int, c_uint};

use crate::{history, sampler};

/// A CPU came online. Never fails the hotplug: what cannot be made is said in the kernel log.
#[no_mangle]
extern "C" fn dprof_rs_cpu_online(cpu: c_uint) -> c_int {
    sampler::cpu_online(cpu as usize);
    history::cpu_online(cpu as usize);
    0
}

/// A CPU is going offline.
#[no_mangle]
extern "C" fn dprof_rs_cpu_offline(cpu: c_uint) -> c_int {
    sampler::cpu_offline(cpu as usize);
    history::cpu_offline(cpu as usize);
    0
}
