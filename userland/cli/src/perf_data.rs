//! perf.data where a profile is expected: `dprof report`, `dprof tui` and `dprof dump` take a
//! perf.data from `perf record`, known by its magic, and convert it into a profile first, on
//! this machine, whose running kernel must be the one that recorded it.

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use dprof_collect::perf::{import_perf_data, PERF_DATA_MAGIC};
use dprof_format::{Profile, ProfileError};

/// Whether `file` starts with perf.data's magic; false when it cannot be read (opening it as a
/// profile then says why).
pub fn is_perf_data(file: &Path) -> bool {
    let mut head = Vec::with_capacity(PERF_DATA_MAGIC.len());
    std::fs::File::open(file)
        .and_then(|f| f.take(PERF_DATA_MAGIC.len() as u64).read_to_end(&mut head))
        .is_ok_and(|_| head == PERF_DATA_MAGIC)
}

/// Opens `file` as a profile: a perf.data is converted first, saying so on one line; anything
/// else is opened as a dprof profile, its errors made by `on_error`.
pub fn open(
    file: &Path,
    on_error: impl FnOnce(ProfileError) -> anyhow::Error,
) -> anyhow::Result<Profile> {
    if !is_perf_data(file) {
        return Profile::open(file).map_err(on_error);
    }
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let imported = import_perf_data(&bytes, Path::new("/"), Path::new("/proc/kcore"))
        .with_context(|| file.display().to_string())?;
    drop(bytes);
    for note in &imported.notes {
        eprintln!("dprof: note: {note}");
    }
    let lost = if imported.lost > 0 {
        format!(", {} lost by perf", imported.lost)
    } else {
        String::new()
    };
    eprintln!(
        "dprof: converted {} ({} samples, {} slab events{lost})",
        file.display(),
        imported.samples,
        imported.slab_events
    );
    Profile::from_vec(imported.profile).map_err(on_error)
}
