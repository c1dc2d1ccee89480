//! Per-task delay counts for causal experiments (causal.rs): Coz's accounting for threads,
//! applied to every task of the system.
//!
//! The module cannot add a field to `task_struct`, so the counts live in a fixed table keyed
//! by the task's address: open addressing, [`TASK_PROBES`] slots probed from the address's
//! hash. A slot belongs to one experiment (its epoch); a slot of an earlier experiment holds
//! nothing the current one needs (every count restarts at the experiment's start), so any
//! task may claim it. Slots are claimed with a compare-and-swap, from any context (the
//! sampler's NMI included); nothing is ever freed while the plan lives.
//!
//! A task's count is written by the sampler on the task's CPU, by the task that wakes it
//! (credit) and by its parent when it is forked. Two claims for the same task at once (a
//! waker and a sampler on another CPU, in the same few instructions) can leave it two slots;
//! lookups then find the first, and the other ages out at the next experiment.

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use kernel::alloc::KVVec;
use kernel::prelude::*;

/// Slots in the table: tasks seen in one experiment (ran while sampled, woken, forked). A
/// task that finds no slot is accounted on its CPU (`EXPERIMENT_TASK_TABLE_FULL`).
const TASK_SLOTS: usize = 8192;
/// Slots probed for a task before the table counts as full.
const TASK_PROBES: usize = 32;

/// One task's delay count in one experiment.
#[repr(align(32))]
pub(crate) struct TaskSlot {
    /// The task_struct's address; 0 for a slot never used.
    task: AtomicUsize,
    /// The experiment `local` belongs to.
    epoch: AtomicU32,
    /// Delay this task has served or been credited (ns), like a CPU's count per CPU.
    pub(crate) local: AtomicU64,
    /// The global count when the task last blocked in this experiment (`sched_switch` out of
    /// a sleeping state); the experiment's start for a task first seen now, which may have
    /// been asleep since; [`NOT_BLOCKED`] once woken.
    pub(crate) blocked_at: AtomicU64,
}

/// `TaskSlot::blocked_at` of a task woken since it last blocked.
pub(crate) const NOT_BLOCKED: u64 = u64::MAX;

pub(crate) struct TaskTable {
    slots: KVVec<TaskSlot>,
}

impl TaskTable {
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVVec::with_capacity(TASK_SLOTS, GFP_KERNEL)?;
        for _ in 0..TASK_SLOTS {
            slots.push(
                TaskSlot {
                    task: AtomicUsize::new(0),
                    epoch: AtomicU32::new(0),
                    local: AtomicU64::new(0),
                    blocked_at: AtomicU64::new(NOT_BLOCKED),
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self { slots })
    }

    fn first_slot(task: usize) -> usize {
        // Fibonacci hashing of the address without its low bits (task_structs are large and
        // aligned), keeping the top bits of the product.
        let bits = TASK_SLOTS.trailing_zeros();
        ((task as u64 >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    /// `task`'s slot in experiment `epoch`, claimed if it has none; a claimed or stale one
    /// starts at `start` (the global count when the experiment began: a task first seen now
    /// owes everything inserted since). None when the probed slots all belong to other tasks
    /// of this experiment.
    pub(crate) fn slot(&self, task: usize, epoch: u32, start: u64) -> Option<&TaskSlot> {
        let probed = || self.probed(task);
        if let Some(slot) = probed().find(|s| s.task.load(Ordering::Acquire) == task) {
            Self::renew(slot, epoch, start);
            return Some(slot);
        }
        for slot in probed() {
            let owner = slot.task.load(Ordering::Acquire);
            if owner != 0 && slot.epoch.load(Ordering::Acquire) == epoch {
                continue;
            }
            if slot
                .task
                .compare_exchange(owner, task, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // The counts first, then the epoch that makes them current.
                slot.local.store(start, Ordering::Relaxed);
                slot.blocked_at.store(start, Ordering::Relaxed);
                slot.epoch.store(epoch, Ordering::Release);
                return Some(slot);
            }
        }
        None
    }

    /// `task`'s slot in experiment `epoch` if it has one; claims nothing.
    pub(crate) fn find(&self, task: usize, epoch: u32) -> Option<&TaskSlot> {
        self.probed(task).find(|s| {
            s.task.load(Ordering::Acquire) == task && s.epoch.load(Ordering::Acquire) == epoch
        })
    }

    /// The slots probed for `task`, in order.
    fn probed(&self, task: usize) -> impl Iterator<Item = &TaskSlot> {
        let mask = TASK_SLOTS - 1;
        let first = Self::first_slot(task);
        (0..TASK_PROBES).filter_map(move |i| self.slots.get((first + i) & mask))
    }

    /// Starts a slot found from an earlier experiment at `start`.
    fn renew(slot: &TaskSlot, epoch: u32, start: u64) {
        if slot.epoch.load(Ordering::Acquire) != epoch {
            slot.local.store(start, Ordering::Relaxed);
            slot.blocked_at.store(start, Ordering::Relaxed);
            slot.epoch.store(epoch, Ordering::Release);
        }
    }
}
