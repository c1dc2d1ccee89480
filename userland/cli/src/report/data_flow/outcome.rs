//! What the samples of a step say, the same in every text of the data flow view: the
//! pairwise path traces' steps and the merged whole-object paths' steps.

use dprof_model::histories::SampleMatch;

/// A step's `sampled` column: its outcome, or `-` when no sample matched it.
pub(super) fn sampled_cell(s: Option<&SampleMatch>) -> String {
    s.map_or_else(|| "-".to_owned(), step_outcome)
}

/// What the samples of one step (of a path trace or of a merged path) say: with a hardware
/// sampler, the misses, where the data came from (each level's share of the hardware
/// samples) and the mean latency; with the software sampler, that it saw no outcome.
fn step_outcome(s: &SampleMatch) -> String {
    let Some(misses) = s.misses else {
        return format!("{} samples, no miss data (software sampler)", s.samples);
    };
    let mut text = format!("{} samples, {misses} misses", s.samples);
    if s.hw_samples > 0 && !s.sources.is_empty() {
        let shares: Vec<String> = s
            .sources
            .iter()
            .map(|c| {
                format!(
                    "{} {:.0}%",
                    c.source.name(),
                    c.samples as f64 * 100.0 / s.hw_samples as f64
                )
            })
            .collect();
        text = format!("{text} ({})", shares.join(", "));
    }
    if let Some(l) = s.mean_latency_cycles {
        text = format!("{text}, {l:.0} cycles");
    }
    text
}

#[cfg(test)]
mod tests {
    use dprof_model::histories::SampleMatch;
    use dprof_model::{MemSource, SourceCount};

    use super::step_outcome;

    #[test]
    fn a_step_says_where_its_data_came_from_or_that_no_outcome_was_sampled() {
        let software = SampleMatch {
            samples: 8,
            hw_samples: 0,
            misses: None,
            miss_rate: None,
            mean_latency_cycles: None,
            sources: Vec::new(),
        };
        assert_eq!(
            step_outcome(&software),
            "8 samples, no miss data (software sampler)"
        );
        let hardware = SampleMatch {
            samples: 10,
            hw_samples: 8,
            misses: Some(2),
            miss_rate: Some(0.25),
            mean_latency_cycles: Some(41.6),
            sources: vec![
                SourceCount {
                    source: MemSource::L1,
                    samples: 6,
                },
                SourceCount {
                    source: MemSource::Dram,
                    samples: 2,
                },
            ],
        };
        assert_eq!(
            step_outcome(&hardware),
            "10 samples, 2 misses (L1 75%, DRAM 25%), 42 cycles"
        );
    }
}
