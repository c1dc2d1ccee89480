//! Writes the seed corpus of a fuzz target into the directory given:
//! `write_seeds DIR [TARGET]`, TARGET being `profile_reader` (the default), `profile_blocks`
//! or `ibs_decoder`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: write_seeds DIR [profile_reader|profile_blocks|ibs_decoder]");
        return ExitCode::from(2);
    };
    let target = args.next();
    let seeds = match target.as_ref().and_then(|t| t.to_str()) {
        None | Some("profile_reader") => dprof_fuzz::seeds(),
        Some("profile_blocks") => dprof_fuzz::blocks::seeds(),
        Some("ibs_decoder") => dprof_fuzz::ibs::seeds(),
        Some(other) => {
            eprintln!(
                "write_seeds: unknown target {other:?}; use profile_reader, profile_blocks or \
                 ibs_decoder"
            );
            return ExitCode::from(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("write_seeds: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for (name, bytes) in seeds {
        let path = dir.join(format!("seed-{name}"));
        if let Err(e) = std::fs::write(&path, bytes) {
            eprintln!("write_seeds: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
