//! The real workspace keeps its architecture: no module import cycle, no forbidden dependency.

use std::path::Path;
use std::process::Command;

#[test]
fn workspace_keeps_its_architecture() {
    let workspace_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new(env!("CARGO_BIN_EXE_dprof-archcheck"))
        .arg("all")
        .current_dir(&workspace_root)
        .output()
        .expect("dprof-archcheck runs");
    assert!(
        output.status.success(),
        "dprof-archcheck found violations ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
