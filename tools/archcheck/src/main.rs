//! `dprof-archcheck [modules|crates|all]`: guards dprof's architecture.
//!
//! - `modules`: no import cycle among the modules of any crate, the kernel modules included.
//! - `crates`: each workspace crate depends only on the crates its row in
//!   `src/crate_rules.rs` allows.
//!
//! Exits 0 when clean; 1 with a report when a rule is broken or a module file is missing or does
//! not parse; 2 when it cannot run at all (no `cargo metadata`, bad arguments).

mod crate_rules;
mod metadata;
mod module_graph;

use std::process::ExitCode;

use anyhow::{bail, Result};

use metadata::Metadata;
use module_graph::CrateRoot;

/// The kernel modules are built by Kbuild, not Cargo: their roots, relative to the workspace.
const KERNEL_CRATE_ROOTS: &[(&str, &str)] = &[
    ("dprof.ko", "kmod/dprof_main.rs"),
    ("dprof_selftest.ko", "kmod/selftest/selftest_main.rs"),
];

/// Cargo target kinds that are crate roots; tests, examples and benches are left out.
const ROOT_TARGET_KINDS: &[&str] = &[
    "lib",
    "rlib",
    "dylib",
    "cdylib",
    "staticlib",
    "proc-macro",
    "bin",
];

const USAGE: &str = "usage: dprof-archcheck [modules|crates|all]";

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("dprof-archcheck: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs the checks asked for; `Ok(false)` when one found a violation.
fn run() -> Result<bool> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (modules, crates) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] | ["all"] => (true, true),
        ["modules"] => (true, false),
        ["crates"] => (false, true),
        ["-h" | "--help"] => {
            println!("{USAGE}");
            return Ok(true);
        }
        _ => bail!("unexpected arguments {args:?}; {USAGE}"),
    };
    let metadata = metadata::load(&std::env::current_dir()?)?;
    let mut clean = true;
    if modules {
        clean &= check_modules(&metadata)?;
    }
    if crates {
        clean &= check_crates(&metadata);
    }
    Ok(clean)
}

fn check_modules(metadata: &Metadata) -> Result<bool> {
    let root = &metadata.workspace_root;
    let mut crates: Vec<CrateRoot> = metadata
        .packages
        .iter()
        .flat_map(|package| {
            package
                .targets
                .iter()
                .filter(|target| {
                    target
                        .kind
                        .iter()
                        .any(|kind| ROOT_TARGET_KINDS.contains(&kind.as_str()))
                })
                .map(|target| CrateRoot {
                    name: format!(
                        "{} ({} {})",
                        package.name,
                        target.kind.join(","),
                        target.name
                    ),
                    root_file: target.src_path.clone(),
                })
        })
        .collect();
    for (name, file) in KERNEL_CRATE_ROOTS {
        let root_file = root.join(file);
        if !root_file.is_file() {
            bail!(
                "{name}'s root {file} is missing; update KERNEL_CRATE_ROOTS in {}",
                file!()
            );
        }
        crates.push(CrateRoot {
            name: (*name).to_owned(),
            root_file,
        });
    }

    let report = module_graph::check(&crates, root);
    for problem in &report.problems {
        println!("not checked: {problem}");
    }
    for cycle in &report.cycles {
        println!("{cycle}");
    }
    let count = report.cycles.len();
    println!(
        "modules: {count} import cycle{} in {} crates ({} modules), {} file problem{}",
        if count == 1 { "" } else { "s" },
        crates.len(),
        report.modules_checked,
        report.problems.len(),
        if report.problems.len() == 1 { "" } else { "s" },
    );
    if count > 0 {
        println!(
            "  A parent and a child that import each other are a cycle: \
             move what they share into a sibling module."
        );
    }
    Ok(count == 0 && report.problems.is_empty())
}

fn check_crates(metadata: &Metadata) -> bool {
    let violations = crate_rules::check(&metadata.packages);
    for violation in &violations {
        println!("{violation}");
    }
    let count = violations.len();
    println!(
        "crates: {count} dependency rule violation{} in {} packages",
        if count == 1 { "" } else { "s" },
        metadata.packages.len()
    );
    count == 0
}
