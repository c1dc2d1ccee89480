//! KFENCE's running totals, which the checks that compare traced objects with SLUB's counters
//! allow for: KFENCE serves a sampled allocation from its own pool, the slab tracepoints fire,
//! and SLUB's counters and /proc/slabinfo never see it.

use std::path::Path;

use anyhow::{Context, Result};

/// KFENCE's running totals (`/sys/kernel/debug/kfence/stats`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KfenceCounts {
    pub(crate) allocs: u64,
    pub(crate) frees: u64,
}

/// The totals of a snapshot of KFENCE's stats; `None` when the kernel has no KFENCE (no
/// snapshot).
pub(crate) fn read_kfence_counts(path: &Path) -> Result<Option<KfenceCounts>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let total = |key: &str| -> Result<u64> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .with_context(|| format!("{}: no {key:?}", path.display()))?;
        line.trim()
            .parse()
            .with_context(|| format!("{}: {key:?} {line:?}", path.display()))
    };
    Ok(Some(KfenceCounts {
        allocs: total("total allocations:")?,
        frees: total("total frees:")?,
    }))
}
