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

/// `dprof report --json` of a profile, as the user would get it.
pub(super) fn report_json(profile: &Path, extra: &[&str]) -> Result<Value> {
    let dprof = std::env::var("DPROF").unwrap_or_else(|_| "dprof".to_string());
    let output = std::process::Command::new(&dprof)
        .arg("report")
        .arg("--json")
        .args(extra)
        .arg(profile)
        .output()
        .with_context(|| format!("running {dprof} report"))?;
    ensure!(
        output.status.success(),
        "dprof report failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(serde_json::from_slice(&output.stdout)?)
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
