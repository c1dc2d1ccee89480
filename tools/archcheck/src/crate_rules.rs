//! Check 2: each workspace crate depends only on what the architecture allows.
//!
//! [`RULES`] is the one place that states the architecture. Dev-dependencies are free; normal
//! and build dependencies must be allowed by the crate's row. `dprof-fixtures` stays a
//! dev-only crate because no row but the benchmarks', the fuzz targets' and the QEMU tools' allows it.

use std::collections::BTreeSet;

use crate::metadata::Package;
use Allowed::{Any, Only};

/// Where a new crate gets its row.
const THIS_FILE: &str = "tools/archcheck/src/crate_rules.rs";

/// What a crate may depend on.
#[derive(Debug, Clone, Copy)]
pub enum Allowed {
    Any,
    Only(&'static [&'static str]),
}

impl Allowed {
    fn allows(self, name: &str) -> bool {
        match self {
            Any => true,
            Only(names) => names.contains(&name),
        }
    }

    fn describe(self) -> String {
        match self {
            Any => "anything".to_owned(),
            Only([]) => "nothing".to_owned(),
            Only(names) => names.join(", "),
        }
    }
}

/// One crate's row of the architecture table.
#[derive(Debug)]
pub struct Rule {
    pub package: &'static str,
    /// Workspace crates it may use as normal or build dependencies.
    pub workspace: Allowed,
    /// Crates from outside the workspace it may use as normal or build dependencies.
    pub external: Allowed,
    /// Why the crate sits where it does.
    pub why: &'static str,
}

const NOTHING: Allowed = Only(&[]);

/// Every stage of the data path, front ends included; not the test-only crates.
const STAGES: &[&str] = &[
    "dprof-abi",
    "dprof-ibs",
    "dprof-debugreg",
    "dprof-format",
    "dprof-model",
    "dprof-analysis",
    "dprof-collect",
    "dprof-tui",
    "dprof-export",
];

/// The architecture, from the bottom of the data path up.
pub const RULES: &[Rule] = &[
    Rule {
        package: "dprof-abi",
        workspace: NOTHING,
        external: NOTHING,
        why: "the record ABI; the kernel module compiles its wire.rs too",
    },
    Rule {
        package: "dprof-ibs",
        workspace: NOTHING,
        external: NOTHING,
        why: "a no_std decoder of AMD IBS registers",
    },
    Rule {
        package: "dprof-debugreg",
        workspace: NOTHING,
        external: NOTHING,
        why: "a no_std encoder of x86 debug registers, shared with the kernel module",
    },
    Rule {
        package: "dprof-format",
        workspace: Only(&["dprof-abi"]),
        external: Any,
        why: "the profile file: ABI records in and out, no analysis",
    },
    Rule {
        package: "dprof-model",
        workspace: NOTHING,
        external: Only(&["serde", "serde_json"]),
        why: "the report model every front end renders; it knows no producer",
    },
    Rule {
        package: "dprof-analysis",
        workspace: Only(&["dprof-abi", "dprof-ibs", "dprof-format", "dprof-model"]),
        external: Any,
        why: "reads a profile and fills the model; it never reaches back into the collector",
    },
    Rule {
        package: "dprof-collect",
        workspace: Only(&[
            "dprof-abi",
            "dprof-debugreg",
            "dprof-format",
            "dprof-model",
            "dprof-analysis",
        ]),
        external: Any,
        why: "drives /dev/dprof and writes the file; runs the analysis live to plan histories",
    },
    Rule {
        package: "dprof-tui",
        workspace: Only(&["dprof-model"]),
        external: Any,
        why: "a front end: renders the model and nothing else",
    },
    Rule {
        package: "dprof-export",
        workspace: Only(&["dprof-model"]),
        external: NOTHING,
        why: "writes the model in other tools' formats; knows nothing of who filled it",
    },
    Rule {
        package: "dprof-cli",
        workspace: Only(STAGES),
        external: Any,
        why: "the thin binary that wires the stages together",
    },
    Rule {
        package: "dprof-fixtures",
        // Not the analysis: its unit tests use fixtures, and a fixture returning an analysis
        // type would hand them a second, distinct copy of that type.
        workspace: Only(&["dprof-abi", "dprof-format", "dprof-model"]),
        external: Any,
        why: "test profiles and reports; a dev-dependency of everyone else",
    },
    Rule {
        package: "dprof-bench",
        workspace: Only(&[
            "dprof-abi",
            "dprof-analysis",
            "dprof-collect",
            "dprof-fixtures",
            "dprof-format",
            "dprof-model",
        ]),
        external: Any,
        why: "a benchmark binary: runs the analysis on synthetic profiles, like the fuzz targets, \
              and reads the process's CPU clock as the collector does",
    },
    Rule {
        package: "dprof-fuzz",
        workspace: Any,
        external: Any,
        why: "fuzz targets may reach any stage, fixtures included",
    },
    Rule {
        package: "dprof-qemu-tools",
        workspace: Any,
        external: Any,
        why: "test tools run in the guest may reach any stage, fixtures included",
    },
    Rule {
        package: "dprof-archcheck",
        workspace: NOTHING,
        external: Any,
        why: "this checker reads sources and cargo metadata only",
    },
];

/// Checks every package against [`RULES`]; returns the violations, sorted.
pub fn check(packages: &[Package]) -> Vec<String> {
    let workspace: BTreeSet<&str> = packages
        .iter()
        .map(|package| package.name.as_str())
        .collect();
    let mut violations = BTreeSet::new();
    for package in packages {
        let name = &package.name;
        let Some(rule) = RULES.iter().find(|rule| rule.package == name) else {
            violations.insert(format!(
                "{name}: not in the architecture; add it to the table in {THIS_FILE}"
            ));
            continue;
        };
        for dependency in &package.dependencies {
            let kind = match dependency.kind.as_deref() {
                Some("dev") => continue,
                Some(kind) => kind,
                None => "normal",
            };
            let dep = &dependency.name;
            if workspace.contains(dep.as_str()) {
                if !rule.workspace.allows(dep) {
                    violations.insert(format!(
                        "{name} depends on {dep} ({kind}); {name} may depend on: {} ({})",
                        rule.workspace.describe(),
                        rule.why
                    ));
                }
            } else if !rule.external.allows(dep) {
                violations.insert(format!(
                    "{name} depends on external crate {dep} ({kind}); \
                     outside the workspace {name} may use: {} ({})",
                    rule.external.describe(),
                    rule.why
                ));
            }
        }
    }
    violations.into_iter().collect()
}

#[cfg(test)]
mod tests;
