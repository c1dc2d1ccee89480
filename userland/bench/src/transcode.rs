//! `dprof-bench --transcode IN OUT`: what keeping only the registers a history hit's check
//! reads saves on a profile collected before (`dprof_collect::hit_registers::transcode`, the
//! code from the profile itself), and that the histories report does not change.

use std::io::{BufWriter, Write as _};
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use dprof_analysis::pipeline::{self, Options};
use dprof_analysis::summary::{KindCounts, Summary};
use dprof_format::Profile;

/// Writes `input` anew to `output` with its hits reduced; prints the bytes per record of each
/// kind in both, and whether their histories reports are identical (an error when not).
pub fn run(input: &Path, output: &Path) -> anyhow::Result<()> {
    let before = Profile::open(input).with_context(|| format!("opening {}", input.display()))?;
    let started = Instant::now();
    let file =
        std::fs::File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let out = dprof_collect::hit_registers::transcode(&before, BufWriter::new(file), true)
        .with_context(|| format!("transcoding {}", input.display()))?;
    out.into_inner()
        .map_err(std::io::IntoInnerError::into_error)
        .and_then(|mut f| f.flush())
        .with_context(|| format!("writing {}", output.display()))?;
    let after = Profile::open(output).with_context(|| format!("opening {}", output.display()))?;
    say!(
        "transcoded {} records in {:.1} s: {} ({} bytes of records) -> {} ({} bytes of records)",
        after.record_count(),
        started.elapsed().as_secs_f64(),
        input.display(),
        before.record_bytes(),
        output.display(),
        after.record_bytes()
    );
    for (name, profile) in [("before", &before), ("after", &after)] {
        let summary = Summary::of(profile)?;
        say!(
            "{name:>6}: bytes per record: {}",
            per_kind(&summary.kinds, &summary.kind_bytes)
        );
    }
    let histories = |profile: &Profile| -> anyhow::Result<_> {
        Ok(pipeline::analyze(profile, &Options::default())?.histories)
    };
    let (a, b) = (histories(&before)?, histories(&after)?);
    anyhow::ensure!(
        a == b,
        "the histories reports of {} and {} differ",
        input.display(),
        output.display()
    );
    match a {
        Some(h) => say!(
            "histories reports: identical ({} histories, {} hits: {})",
            h.histories,
            h.hits,
            h.checks
        ),
        None => say!("histories reports: identical (no histories)"),
    }
    Ok(())
}

/// "`history_hit=19.2` ..." for the kinds present, as `dprof dump --summary` prints them.
fn per_kind(n: &KindCounts, b: &KindCounts) -> String {
    let kinds = [
        ("alloc", n.alloc, b.alloc),
        ("free", n.free, b.free),
        ("cache_info", n.cache_info, b.cache_info),
        ("sample", n.sample, b.sample),
        ("history_hit", n.history_hit, b.history_hit),
        (
            "history_other",
            n.history - n.history_hit,
            b.history - b.history_hit,
        ),
    ];
    kinds
        .iter()
        .filter(|(_, count, _)| *count > 0)
        .map(|(name, count, bytes)| format!("{name}={:.1}", *bytes as f64 / *count as f64))
        .collect::<Vec<_>>()
        .join(" ")
}
