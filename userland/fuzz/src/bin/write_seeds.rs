//! Writes the seed corpus of the `profile_reader` fuzz target into the directory given.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: write_seeds DIR");
        return ExitCode::from(2);
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("write_seeds: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for (name, bytes) in dprof_fuzz::seeds() {
        let path = dir.join(format!("seed-{name}"));
        if let Err(e) = std::fs::write(&path, bytes) {
            eprintln!("write_seeds: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
