//! Sampled accesses by (type, instruction, offset): what the main pass hands the history
//! passes, so that path traces and the data flow can show what each access cost.

use dprof_model::{MemSource, SourceCount};
use rustc_hash::FxHashMap;

/// What the samples of one (type, instruction, offset) saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessStats {
    /// Samples.
    pub samples: u64,
    /// Read-only samples.
    pub reads: u64,
    /// Write-only samples.
    pub writes: u64,
    /// Read-modify-write samples.
    pub read_writes: u64,
    /// Samples with a hardware hit/miss status.
    pub hw_samples: u64,
    /// Of them, L1 data-cache misses.
    pub misses: u64,
    /// Samples with a latency.
    pub latency_samples: u64,
    /// Sum of their latencies (cycles).
    pub latency_sum: u64,
    /// The hardware samples by where their data came from, in [`MemSource::ALL`] order.
    pub sources: [u64; MemSource::ALL.len()],
}

impl AccessStats {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Self) {
        self.samples += other.samples;
        self.reads += other.reads;
        self.writes += other.writes;
        self.read_writes += other.read_writes;
        self.hw_samples += other.hw_samples;
        self.misses += other.misses;
        self.latency_samples += other.latency_samples;
        self.latency_sum += other.latency_sum;
        for (a, b) in self.sources.iter_mut().zip(other.sources) {
            *a += b;
        }
    }

    /// The sources that served samples, nearest first.
    #[must_use]
    pub fn source_counts(&self) -> Vec<SourceCount> {
        MemSource::ALL
            .iter()
            .zip(self.sources)
            .filter(|&(_, n)| n > 0)
            .map(|(&source, samples)| SourceCount { source, samples })
            .collect()
    }
}

/// Sampled accesses by (type, instruction, offset): what path traces join history hits with
/// (paper section 4.4: same type, offset and ip).
#[derive(Clone, Debug, Default)]
pub struct SampledAccesses {
    /// `(type name, ip)` to `(offset, stats)`.
    by_ip: FxHashMap<(String, u64), Vec<(u64, AccessStats)>>,
    hardware: bool,
}

impl SampledAccesses {
    /// No accesses yet; `hardware`: a hardware sampler took the samples.
    #[must_use]
    pub fn new(hardware: bool) -> Self {
        Self {
            hardware,
            ..Self::default()
        }
    }

    /// The samples of type `type_name` by the instruction at `ip` at offsets in `offsets`,
    /// summed.
    #[must_use]
    pub fn matching(&self, type_name: &str, ip: u64, offsets: std::ops::Range<u64>) -> AccessStats {
        let mut out = AccessStats::default();
        if let Some(list) = self.by_ip.get(&(type_name.to_owned(), ip)) {
            for (offset, stats) in list {
                if offsets.contains(offset) {
                    out.add(stats);
                }
            }
        }
        out
    }

    /// Whether a hardware sampler took the samples (misses and latencies are known).
    #[must_use]
    pub const fn hardware(&self) -> bool {
        self.hardware
    }

    /// Samples per (type name, instruction), over all offsets, in no particular order.
    pub fn samples_by_type_and_ip(&self) -> impl Iterator<Item = (&str, u64, u64)> + '_ {
        self.by_ip.iter().map(|((type_name, ip), list)| {
            let samples = list.iter().map(|(_, stats)| stats.samples).sum();
            (type_name.as_str(), *ip, samples)
        })
    }

    /// Adds the stats of one (type, instruction, offset); stats with hardware samples mark
    /// the whole as [`Self::hardware`].
    pub fn insert(&mut self, type_name: &str, ip: u64, offset: u64, stats: AccessStats) {
        self.hardware |= stats.hw_samples > 0;
        self.by_ip
            .entry((type_name.to_owned(), ip))
            .or_default()
            .push((offset, stats));
    }
}
