use std::fs;
use std::path::Path;

use super::*;
use crate::metadata;

/// A workspace whose packages are `(directory, Cargo.toml [dependencies] lines)`.
fn workspace(packages: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let members: Vec<String> = packages
        .iter()
        .map(|(name, _)| format!("{name:?}"))
        .collect();
    let root = format!(
        "[workspace]\nresolver = \"2\"\nmembers = [{}]\n",
        members.join(", ")
    );
    fs::write(dir.path().join("Cargo.toml"), root).expect("write");
    for (name, dependencies) in packages {
        let package = dir.path().join(name);
        fs::create_dir_all(package.join("src")).expect("mkdir");
        let manifest = format!(
            "[package]\nname = {name:?}\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{dependencies}\n"
        );
        fs::write(package.join("Cargo.toml"), manifest).expect("write");
        fs::write(package.join("src/lib.rs"), "").expect("write");
    }
    dir
}

fn violations(dir: &Path) -> Vec<String> {
    check(&metadata::load(dir).expect("cargo metadata").packages)
}

#[test]
fn forbidden_workspace_dependency_is_reported() {
    let dir = workspace(&[
        ("dprof-model", ""),
        (
            "dprof-collect",
            "dprof-model = { path = \"../dprof-model\" }",
        ),
        (
            "dprof-tui",
            "dprof-model = { path = \"../dprof-model\" }\n\
             dprof-collect = { path = \"../dprof-collect\" }",
        ),
    ]);
    assert_eq!(
        violations(dir.path()),
        [
            "dprof-tui depends on dprof-collect (normal); dprof-tui may depend on: dprof-model \
          (a front end: renders the model and nothing else)"
        ]
    );
}

#[test]
fn dev_dependencies_are_free() {
    let dir = workspace(&[
        ("dprof-model", ""),
        (
            "dprof-fixtures",
            "dprof-model = { path = \"../dprof-model\" }",
        ),
        (
            "dprof-tui",
            "[dev-dependencies]\ndprof-fixtures = { path = \"../dprof-fixtures\" }",
        ),
    ]);
    assert_eq!(violations(dir.path()), Vec::<String>::new());
}

#[test]
fn forbidden_external_dependency_of_the_model_is_reported() {
    let dir = workspace(&[("dprof-model", "serde = \"1\"\nrustc-hash = \"2\"")]);
    assert_eq!(
        violations(dir.path()),
        [
            "dprof-model depends on external crate rustc-hash (normal); \
          outside the workspace dprof-model may use: serde, serde_json \
          (the report model every front end renders; it knows no producer)"
        ]
    );
}

#[test]
fn unknown_package_is_reported() {
    let dir = workspace(&[("dprof-newstage", "")]);
    assert_eq!(
        violations(dir.path()),
        [format!(
            "dprof-newstage: not in the architecture; add it to the table in {THIS_FILE}"
        )]
    );
}

#[test]
fn fixtures_is_a_normal_dependency_only_of_bench_fuzz_and_qemu_tools() {
    let allowing: Vec<&str> = RULES
        .iter()
        .filter(|rule| rule.workspace.allows("dprof-fixtures"))
        .map(|rule| rule.package)
        .collect();
    assert_eq!(allowing, ["dprof-bench", "dprof-fuzz", "dprof-qemu-tools"]);
}

#[test]
fn every_allowed_workspace_crate_has_a_row() {
    for rule in RULES {
        if let Only(names) = rule.workspace {
            for name in names {
                assert!(
                    RULES.iter().any(|other| other.package == *name),
                    "{}: {name} has no row",
                    rule.package
                );
            }
        }
    }
}
