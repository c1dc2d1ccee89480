//! `dprof-qemu-check selftest-causal DIR`: the `causal` workload of `dprof_selftest.ko`
//! (`kmod/selftest/causal.rs`), whose critical path is known by construction: a chain on
//! CPU 0 accesses `dprof_selftest_causal_x` for about 30% of each round, a worker on CPU 1
//! accesses `dprof_selftest_causal_y` for about 60% and then waits for the round's end.
//!
//! The plain data profile counts samples by time, so it must rank Y above X: Y's samples at
//! least [`MIN_Y_OVER_X`] times X's. Each type's samples come from its own access function.
//! The workload counted its rounds (`causal_rounds` in debugfs).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::{find_type, report_json, type_samples_in};

/// Y's samples over X's in the data profile: by construction about 60% / 30% = 2; 1.5 leaves
/// room for the host's load on the guest's two CPUs.
const MIN_Y_OVER_X: f64 = 1.5;
/// Share of a type's samples that must come from its access function.
const MIN_OWN_FUNCTION_PERCENT: f64 = 90.0;
/// Samples X needs for the comparison to mean anything.
const MIN_SAMPLES: u64 = 100;

pub(crate) fn check(dir: &Path) -> Result<String> {
    let mut report = String::new();
    let mut failures = Vec::new();
    let rounds_text = std::fs::read_to_string(dir.join("causal-data.rounds"))
        .context("reading causal-data.rounds")?;
    let rounds: u64 = rounds_text
        .trim()
        .parse()
        .with_context(|| format!("causal_rounds read {rounds_text:?}, not a number"))?;
    writeln!(report, "rounds: {rounds}")?;
    if rounds == 0 {
        failures.push("the workload counted no round".to_string());
    }
    if let Ok(summary) = std::fs::read_to_string(dir.join("causal-data.summary")) {
        writeln!(report, "workload: {}", summary.trim())?;
    }

    // Type names come from the caches; field names from the DWARF of the guest kernel and of
    // dprof_selftest.ko.
    let vmlinux =
        std::env::var("VMLINUX").context("VMLINUX must name the guest kernel's vmlinux")?;
    let json = report_json(
        &dir.join("causal-data.dprof"),
        &["--vmlinux", &vmlinux, "--debug-dir", &dir.to_string_lossy()],
    )?;
    let mut samples = [0u64; 2];
    for (i, (type_name, function)) in [
        ("dprof_selftest_causal_x", "dprof_selftest_causal_x_touch"),
        ("dprof_selftest_causal_y", "dprof_selftest_causal_y_touch"),
    ]
    .into_iter()
    .enumerate()
    {
        let ty = find_type(&json, type_name)?;
        let total = ty["samples"].as_u64().unwrap_or(0);
        let own = type_samples_in(ty, function);
        let pct = if total == 0 {
            0.0
        } else {
            100.0 * own as f64 / total as f64
        };
        writeln!(
            report,
            "{type_name}: {total} samples, {own} in {function} ({pct:.1}%)"
        )?;
        if pct < MIN_OWN_FUNCTION_PERCENT {
            failures.push(format!(
                "{pct:.1}% of {type_name}'s samples are in {function}, want >= {MIN_OWN_FUNCTION_PERCENT}%"
            ));
        }
        samples[i] = total;
    }
    let [x, y] = samples;
    let ratio = y as f64 / x.max(1) as f64;
    writeln!(report, "Y / X samples: {ratio:.2}")?;
    if x < MIN_SAMPLES {
        failures.push(format!("only {x} samples of dprof_selftest_causal_x"));
    }
    if ratio < MIN_Y_OVER_X {
        failures.push(format!(
            "the data profile does not rank Y well above X: {y} / {x} samples = {ratio:.2}, want >= {MIN_Y_OVER_X}"
        ));
    }
    if failures.is_empty() {
        writeln!(report, "selftest-causal: all checks passed")?;
        Ok(report)
    } else {
        bail!("{report}\nFAILED:\n  {}", failures.join("\n  "))
    }
}
