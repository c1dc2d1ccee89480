//! Reading `dprof report --json` the way a user gets it, and looking things up in it: shared by
//! the checks of `dprof-qemu-check.rs`, `causal.rs` and `misses.rs`.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use serde_json::Value;

/// `part / whole` in percent (0 for an empty whole).
pub(super) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The guest kernel's vmlinux, for reports with its DWARF: `VMLINUX`, which the scenarios'
/// `.check` scripts set.
pub(super) fn guest_vmlinux() -> Result<String> {
    std::env::var("VMLINUX").context("VMLINUX must name the guest kernel's vmlinux")
}

/// `dprof report --json` of a profile, as the user would get it.
pub(super) fn report_json(profile: &Path, extra: &[&str]) -> Result<Value> {
    let (json, status) = report_json_with_status(profile, extra)?;
    ensure!(status == Some(0), "dprof report exited with {status:?}");
    Ok(json)
}

/// `dprof report --json --view causal`, and whether it ranked nothing (the exit status 3
/// that `dprof report --help` documents, with the report still printed).
pub(super) fn causal_view_json(profile: &Path) -> Result<(Value, bool)> {
    let (json, status) = report_json_with_status(profile, &["--view", "causal"])?;
    ensure!(
        matches!(status, Some(0 | 3)),
        "dprof report --view causal exited with {status:?}"
    );
    Ok((json, status == Some(3)))
}

/// The report, and the exit status; an error when it printed no JSON.
fn report_json_with_status(profile: &Path, extra: &[&str]) -> Result<(Value, Option<i32>)> {
    let dprof = std::env::var("DPROF").unwrap_or_else(|_| "dprof".to_string());
    let output = std::process::Command::new(&dprof)
        .arg("report")
        .arg("--json")
        .args(extra)
        .arg(profile)
        .output()
        .with_context(|| format!("running {dprof} report"))?;
    let json = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "dprof report failed ({:?}): {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    Ok((json, output.status.code()))
}

pub(super) fn find_type<'a>(report: &'a Value, name: &str) -> Result<&'a Value> {
    report["data_profile"]["types"]
        .as_array()
        .and_then(|types| types.iter().find(|t| t["name"] == name))
        .with_context(|| format!("type {name} is not in the data profile"))
}

/// Samples of a type in a function, by the report's per-type function list.
pub(super) fn type_samples_in(ty: &Value, function: &str) -> u64 {
    ty["functions"].as_array().map_or(0, |fs| {
        fs.iter()
            .filter(|f| {
                f["function"]
                    .as_str()
                    .is_some_and(|n| n.split([' ', '+']).next() == Some(function))
            })
            .filter_map(|f| f["samples"].as_u64())
            .sum()
    })
}

pub(super) fn field_name_at(ty: &Value, offset: u64) -> Option<String> {
    ty["fields"]
        .as_array()?
        .iter()
        .find(|f| f["offset"] == offset)
        .and_then(|f| f["field"].as_str().map(str::to_string))
}
