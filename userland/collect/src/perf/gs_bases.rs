//! Each CPU's per-CPU offset (its kernel `%gs` base), where kallsyms does not list the
//! `__per_cpu_offset` array (kernels without `CONFIG_KALLSYMS_ALL`).
//!
//! A CPU's run queue is its copy of the per-CPU variable `runqueues`: at its per-CPU offset
//! plus the variable's address. A running task reaches its CPU's run queue through its
//! scheduling entity (`task->se.cfs_rq->rq`, with `CONFIG_FAIR_GROUP_SCHED`). So the
//! collector moves its own thread to each CPU in turn, reads that path from its own
//! `task_struct` (found through BPF), checks that the run queue says it is that CPU's
//! (`rq->cpu`), and takes the run queue's address less `runqueues`'s. Offsets come from the
//! kernel's BTF, `runqueues`'s address from the per-CPU section (see
//! [`crate::percpu_section`]).

use dprof_analysis::btf::Btf;
use dprof_format::PercpuSection;

use super::memory::KernelMemory;

/// Where the run queue is, from a task: the BTF offsets of the members on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunqueuePath {
    /// `task_struct.se` plus `sched_entity.cfs_rq`.
    task_cfs_rq: u64,
    /// `cfs_rq.rq`.
    cfs_rq_rq: u64,
    /// `rq.cpu`.
    rq_cpu: u64,
    /// The address of `runqueues` in the per-CPU section.
    runqueues: u64,
}

impl RunqueuePath {
    /// The path on this kernel, or which member or variable its BTF lacks.
    pub(crate) fn from_btf(btf: &Btf, section: PercpuSection) -> Result<Self, String> {
        let member = |s: &str, m: &str| {
            btf.member_offset(s, m)
                .ok_or_else(|| format!("the kernel's BTF has no {s}.{m}"))
        };
        let runqueues = btf
            .percpu_layout()
            .variables
            .iter()
            .find(|v| v.name == "runqueues")
            .map(|v| section.start + v.offset)
            .ok_or("the kernel's BTF has no per-CPU variable runqueues")?;
        Ok(Self {
            task_cfs_rq: member("task_struct", "se")? + member("sched_entity", "cfs_rq")?,
            cfs_rq_rq: member("cfs_rq", "rq")?,
            rq_cpu: member("rq", "cpu")?,
            runqueues,
        })
    }
}

/// Each CPU of `cpus` with its per-CPU offset: `move_to(cpu)` puts the calling thread, whose
/// `task_struct` is at `task`, on `cpu`.
///
/// # Errors
/// What could not be read, or a run queue that belongs to another CPU than the thread was
/// moved to.
pub(crate) fn find(
    path: RunqueuePath,
    task: u64,
    cpus: &[u32],
    memory: &mut KernelMemory,
    mut move_to: impl FnMut(u32) -> Result<(), String>,
) -> Result<Vec<(u32, u64)>, String> {
    let mut bases = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        move_to(cpu)?;
        // Read as it is now: the task's run queue changed with the move.
        let read = |memory: &mut KernelMemory, at: u64, what: &str| {
            memory
                .u64_now(at)
                .ok_or_else(|| format!("cannot read {what} at {at:#x}"))
        };
        let cfs_rq = read(memory, task + path.task_cfs_rq, "the task's cfs_rq")?;
        let rq = read(memory, cfs_rq + path.cfs_rq_rq, "the cfs_rq's rq")?;
        let rq_cpu = read(memory, rq + path.rq_cpu, "the rq's cpu")? & 0xffff_ffff;
        if rq_cpu != u64::from(cpu) {
            return Err(format!(
                "on CPU {cpu}, the task's run queue {rq:#x} is CPU {rq_cpu}'s"
            ));
        }
        bases.push((cpu, rq.wrapping_sub(path.runqueues)));
    }
    Ok(bases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kcore::tests::fake_kcore;

    const MEMORY: u64 = 0xffff_8880_0000_0000;
    const TASK: u64 = MEMORY + 0x100;
    const RUNQUEUES: u64 = 0xffff_ffff_83b0_0000;

    fn path() -> RunqueuePath {
        RunqueuePath {
            task_cfs_rq: 0x40,
            cfs_rq_rq: 0x10,
            rq_cpu: 0x20,
            runqueues: RUNQUEUES,
        }
    }

    /// A page with the task on `cpu`: each CPU's run queue at a page of its own, with its
    /// `cfs_rq` inside, and `rq->cpu` saying `claimed`.
    fn page_on(cpu: u64, claimed: u64) -> Vec<u8> {
        let mut page = vec![0u8; 4096];
        let put = |page: &mut Vec<u8>, at: u64, value: u64| {
            let at = (at - MEMORY) as usize;
            page[at..at + 8].copy_from_slice(&value.to_le_bytes());
        };
        let rq = MEMORY + 0x800 + 0x100 * cpu;
        let cfs_rq = rq + 0x80;
        put(&mut page, TASK + 0x40, cfs_rq);
        put(&mut page, cfs_rq + 0x10, rq);
        put(&mut page, rq + 0x20, claimed);
        page
    }

    #[test]
    fn each_cpu_run_queue_gives_its_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kcore = dir.path().join("kcore");
        std::fs::write(&kcore, fake_kcore(MEMORY, &page_on(0, 0))).expect("write");
        let mut memory = KernelMemory::open(&kcore).expect("opens");
        let mut moved = Vec::new();
        let bases = find(path(), TASK, &[0, 1, 2], &mut memory, |cpu| {
            moved.push(cpu);
            let page = page_on(u64::from(cpu), u64::from(cpu));
            std::fs::write(&kcore, fake_kcore(MEMORY, &page)).map_err(|e| e.to_string())
        })
        .expect("found");
        assert_eq!(moved, [0, 1, 2]);
        let rq = |cpu: u64| MEMORY + 0x800 + 0x100 * cpu;
        assert_eq!(
            bases,
            [0, 1, 2].map(|cpu| (cpu as u32, rq(cpu).wrapping_sub(RUNQUEUES)))
        );
    }

    #[test]
    fn a_run_queue_of_another_cpu_or_unreadable_memory_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kcore = dir.path().join("kcore");
        // The move did not happen: the task stays on CPU 0's run queue.
        std::fs::write(&kcore, fake_kcore(MEMORY, &page_on(0, 0))).expect("write");
        let mut memory = KernelMemory::open(&kcore).expect("opens");
        let error = find(path(), TASK, &[0, 1], &mut memory, |_| Ok(())).expect_err("fails");
        assert!(error.contains("on CPU 1, the task's run queue"), "{error}");
        assert!(error.ends_with("is CPU 0's"), "{error}");
        // A task pointer that kcore does not map.
        let error =
            find(path(), 0xffff_c900_0000_0000, &[0], &mut memory, |_| Ok(())).expect_err("fails");
        assert!(
            error.starts_with("cannot read the task's cfs_rq"),
            "{error}"
        );
        // A CPU the thread cannot be moved to.
        let error = find(path(), TASK, &[5], &mut memory, |cpu| {
            Err(format!("CPU {cpu} is offline"))
        })
        .expect_err("fails");
        assert_eq!(error, "CPU 5 is offline");
    }
}
