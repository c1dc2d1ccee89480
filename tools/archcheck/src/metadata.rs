//! The parts of `cargo metadata --format-version 1 --no-deps` that the checks read.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Metadata {
    pub workspace_root: PathBuf,
    /// With `--no-deps`, exactly the workspace members.
    pub packages: Vec<Package>,
}

#[derive(Debug, Deserialize)]
pub struct Package {
    pub name: String,
    pub dependencies: Vec<Dependency>,
    pub targets: Vec<Target>,
}

#[derive(Debug, Deserialize)]
pub struct Dependency {
    /// The package's name, also when the dependency is renamed in Cargo.toml.
    pub name: String,
    /// `None` for a normal dependency, else `"dev"` or `"build"`.
    pub kind: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Target {
    pub name: String,
    /// `"lib"`, `"bin"`, `"test"`, ...
    pub kind: Vec<String>,
    pub src_path: PathBuf,
}

/// Runs `cargo metadata` for the workspace that contains `dir`.
pub fn load(dir: &Path) -> Result<Metadata> {
    // `cargo run` and `cargo test` say which cargo they are; prefer it to whatever is on PATH.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(dir)
        .output()
        .with_context(|| format!("cannot run {}", cargo.to_string_lossy()))?;
    if !output.status.success() {
        bail!(
            "`cargo metadata` failed in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout).context("cannot parse the output of `cargo metadata`")
}
