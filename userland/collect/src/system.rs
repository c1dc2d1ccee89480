//! Facts about the live system for the profile header, read from procfs and sysfs under a
//! root directory ("/" normally), so tests can point them at a fake tree.

use std::path::{Path, PathBuf};

use dprof_format::{
    CacheGeometry, CollectConfig, CpuId, ImageSection, ImageSectionKind, MergedCache, ModuleInfo,
    ProfileHeader,
};

#[cfg(test)]
mod tests;

/// A file of the live system that could not be read or understood.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SystemError {
    /// Reading failed.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The contents are not what the kernel writes there.
    #[error("cannot understand {}: {what}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
}

fn read(root: &Path, rel: &str) -> Result<Vec<u8>, SystemError> {
    let path = root.join(rel);
    std::fs::read(&path).map_err(|source| SystemError::Read { path, source })
}

fn read_text(root: &Path, rel: &str) -> Result<String, SystemError> {
    Ok(String::from_utf8_lossy(&read(root, rel)?).trim().to_owned())
}

/// The kernel release, as `uname -r` prints it.
///
/// # Errors
/// When `proc/sys/kernel/osrelease` cannot be read.
pub fn kernel_release(root: &Path) -> Result<String, SystemError> {
    read_text(root, "proc/sys/kernel/osrelease")
}

/// The kernel's banner, `/proc/version` ("Linux version 6.12.0 (user@host) (gcc ...) #1 SMP
/// ..."), trimmed. It names one build, so a vmlinux can be checked against it.
///
/// # Errors
/// When `proc/version` cannot be read.
pub fn proc_version(root: &Path) -> Result<String, SystemError> {
    read_text(root, "proc/version")
}

/// The running kernel's GNU build id as lower-case hex, from the ELF notes the kernel
/// exports in `sys/kernel/notes`; `None` when that file is missing or holds no build id
/// (kernels built without `--build-id`).
#[must_use]
pub fn kernel_build_id(root: &Path) -> Option<String> {
    let notes = std::fs::read(root.join("sys/kernel/notes")).ok()?;
    dprof_analysis::debuginfo::gnu_build_id(&notes).map(dprof_analysis::debuginfo::hex)
}

/// The kernel's boot command line.
///
/// # Errors
/// When `proc/cmdline` cannot be read.
pub fn boot_cmdline(root: &Path) -> Result<String, SystemError> {
    read_text(root, "proc/cmdline")
}

/// The value of the first `key : value` line of `/proc/cpuinfo` text whose key is `key`.
pub(crate) fn cpuinfo_value<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines().find_map(|line| {
        let (k, value) = line.split_once(':')?;
        (k.trim() == key).then(|| value.trim())
    })
}

/// The first "model name" in `proc/cpuinfo`, or "unknown" (not every architecture has one).
///
/// # Errors
/// When `proc/cpuinfo` cannot be read.
pub fn cpu_model(root: &Path) -> Result<String, SystemError> {
    let text = read_text(root, "proc/cpuinfo")?;
    Ok(cpuinfo_value(&text, "model name")
        .unwrap_or("unknown")
        .to_owned())
}

/// Vendor, family and model of the first CPU in `proc/cpuinfo`; `None` when it does not give
/// all three (not x86).
///
/// # Errors
/// When `proc/cpuinfo` cannot be read.
pub fn cpu_id(root: &Path) -> Result<Option<CpuId>, SystemError> {
    let text = read_text(root, "proc/cpuinfo")?;
    let first_cpu = text.split("\n\n").next().unwrap_or_default();
    let field = |name: &str| cpuinfo_value(first_cpu, name);
    let number = |name: &str| field(name).and_then(|v| v.parse::<u32>().ok());
    Ok(
        match (field("vendor_id"), number("cpu family"), number("model")) {
            (Some(vendor), Some(family), Some(model)) => Some(CpuId {
                vendor: vendor.to_owned(),
                family,
                model,
            }),
            _ => None,
        },
    )
}

/// The number of CPUs online.
///
/// # Errors
/// When `sys/devices/system/cpu/online` cannot be read or is not a CPU list.
pub fn online_cpus(root: &Path) -> Result<u32, SystemError> {
    let rel = "sys/devices/system/cpu/online";
    let text = read_text(root, rel)?;
    cpu_list_len(&text).ok_or_else(|| SystemError::Parse {
        path: root.join(rel),
        what: format!("{text:?} is not a CPU list"),
    })
}

/// The number of CPUs in a kernel CPU list such as "0-3,8,10-11"; `None` if malformed.
#[must_use]
pub fn cpu_list_len(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for range in dprof_model::cache::cpu_list(list)? {
        n = n.checked_add(range.end().checked_sub(*range.start())?.checked_add(1)?)?;
    }
    Some(n)
}

pub use dprof_model::units::parse_cache_size;

/// Entries of `dir` named `prefix` followed by a number, sorted by that number.
fn numbered(dir: &Path, prefix: &str) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let n = name.to_str()?.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    found
}

/// One entry per distinct CPU cache (by level, type and the CPUs sharing it), from
/// `sys/devices/system/cpu/cpu*/cache/index*/`, sorted by level and in CPU order within a
/// level. Caches whose level or type cannot be read are left out; other missing fields are
/// `None` (virtual machines do not always provide them). Empty when sysfs has no cache
/// information at all.
#[must_use]
pub fn cache_geometry(root: &Path) -> Vec<CacheGeometry> {
    let read_field = |dir: &Path, name: &str| -> Option<String> {
        let text = std::fs::read_to_string(dir.join(name)).ok()?;
        Some(text.trim().to_owned())
    };
    let mut caches: Vec<CacheGeometry> = Vec::new();
    for (_, cpu_dir) in numbered(&root.join("sys/devices/system/cpu"), "cpu") {
        for (_, dir) in numbered(&cpu_dir.join("cache"), "index") {
            let (Some(level), Some(cache_type)) = (
                read_field(&dir, "level").and_then(|s| s.parse().ok()),
                read_field(&dir, "type"),
            ) else {
                continue;
            };
            let number = |name| read_field(&dir, name).and_then(|s| s.parse().ok());
            let cache = CacheGeometry {
                level,
                cache_type,
                size_bytes: read_field(&dir, "size").and_then(|s| parse_cache_size(&s)),
                ways: number("ways_of_associativity"),
                line_bytes: number("coherency_line_size"),
                sets: number("number_of_sets"),
                shared_cpu_list: read_field(&dir, "shared_cpu_list").unwrap_or_default(),
            };
            let same = |c: &CacheGeometry| {
                c.level == cache.level
                    && c.cache_type == cache.cache_type
                    && c.shared_cpu_list == cache.shared_cpu_list
            };
            if !caches.iter().any(same) {
                caches.push(cache);
            }
        }
    }
    caches.sort_by_key(|c| c.level);
    caches
}

/// Whether the slab allocator merges caches: true unless the command line has `slab_nomerge`
/// (or its older spelling `slub_nomerge`). Kernels built without `CONFIG_SLAB_MERGE_DEFAULT`
/// do not merge either, which the command line cannot show; this errs towards warning.
#[must_use]
pub fn slab_merging(cmdline: &str) -> bool {
    !cmdline
        .split_whitespace()
        .any(|w| w == "slab_nomerge" || w == "slub_nomerge")
}

/// The slab pools that two or more caches share, from `sys/kernel/slab`: SLUB names a
/// mergeable pool's directory after its geometry (`:a-0000192`) and links every cache name
/// merged into it there. Sorted by pool, aliases sorted. A pool with one name holds one kind
/// of object, so it is left out. Empty when the directory is missing (no sysfs) or nothing is
/// merged (`slab_nomerge`).
#[must_use]
pub fn merged_caches(root: &Path) -> Vec<MergedCache> {
    let Ok(entries) = std::fs::read_dir(root.join("sys/kernel/slab")) else {
        return Vec::new();
    };
    let mut pools: std::collections::BTreeMap<String, Vec<String>> =
        std::collections::BTreeMap::new();
    for entry in entries.filter_map(Result::ok) {
        // Unmerged caches are directories under their own name: only links are aliases.
        if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        let (Ok(alias), Ok(target)) = (
            entry.file_name().into_string(),
            std::fs::read_link(entry.path()),
        ) else {
            continue;
        };
        let Some(pool) = target.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if pool.starts_with(':') {
            pools.entry(pool.to_owned()).or_default().push(alias);
        }
    }
    pools
        .into_iter()
        .filter(|(_, aliases)| aliases.len() > 1)
        .map(|(pool, mut aliases)| {
            aliases.sort();
            MergedCache { pool, aliases }
        })
        .collect()
}

/// The size of the objects of slab cache `name`, from SLUB's sysfs directory (a merged
/// cache's name links to its pool's). `None` without that directory or that cache.
#[must_use]
pub fn slab_object_size(root: &Path, name: &str) -> Option<u32> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    read_text(root, &format!("sys/kernel/slab/{name}/object_size"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The text of `proc/kallsyms` (addresses are zeros unless read as root).
///
/// # Errors
/// When it cannot be read.
pub fn kallsyms(root: &Path) -> Result<Vec<u8>, SystemError> {
    read(root, "proc/kallsyms")
}

/// The address kallsyms text `kallsyms` gives the kernel's own symbol `name` (not a
/// module's); 0 when it hides addresses from this user.
#[must_use]
pub fn kallsyms_address(kallsyms: &[u8], name: &str) -> Option<u64> {
    kallsyms.split(|&b| b == b'\n').find_map(|line| {
        let line = std::str::from_utf8(line).ok()?;
        let mut words = line.split_whitespace();
        let address = words.next()?;
        let _kind = words.next()?;
        (words.next()? == name && words.next().is_none())
            .then(|| u64::from_str_radix(address, 16).ok())
            .flatten()
    })
}

/// The kernel image's ranges in `/proc/iomem` text, by name ("Kernel code", …), at their
/// physical addresses, `[start, end)`. Readers who may not see addresses get zeros, which
/// are left out.
#[must_use]
pub fn iomem_kernel_ranges(iomem: &str) -> Vec<(ImageSectionKind, u64, u64)> {
    iomem
        .lines()
        .filter_map(|line| {
            let (range, name) = line.trim().split_once(" : ")?;
            let kind = ImageSectionKind::from_iomem_name(name)?;
            let (start, last) = range.split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(last, 16).ok()?.checked_add(1)?;
            (start != 0 && start < end).then_some((kind, start, end))
        })
        .collect()
}

/// The kernel image's sections at their link addresses, sorted: `/proc/iomem`'s physical
/// ranges moved by the distance from "Kernel code" to kallsyms' `_text` (the image is mapped
/// in one piece, so one distance holds for every section). Empty when either is hidden from
/// this user or missing.
#[must_use]
pub fn kernel_image(root: &Path, kallsyms: &[u8]) -> Vec<ImageSection> {
    let iomem = std::fs::read_to_string(root.join("proc/iomem")).unwrap_or_default();
    kernel_image_sections(&iomem, kallsyms_address(kallsyms, "_text").unwrap_or(0))
}

fn kernel_image_sections(iomem: &str, text: u64) -> Vec<ImageSection> {
    let ranges = iomem_kernel_ranges(iomem);
    let Some(&(_, code, _)) = ranges.iter().find(|r| r.0 == ImageSectionKind::Code) else {
        return Vec::new();
    };
    if text == 0 {
        return Vec::new();
    }
    let mut sections: Vec<ImageSection> = ranges
        .into_iter()
        .filter_map(|(kind, start, end)| {
            let start = start.checked_sub(code)?.checked_add(text)?;
            let end = end.checked_sub(code)?.checked_add(text)?;
            Some(ImageSection { kind, start, end })
        })
        .collect();
    sections.sort_by_key(|s| s.start);
    // Overlapping sections would give an address two answers: trust none of them.
    if sections.windows(2).any(|w| w[0].end > w[1].start) {
        return Vec::new();
    }
    sections
}

/// The text of `proc/modules`; empty on a kernel built without modules
/// (`CONFIG_MODULES=n`), which has no such file.
///
/// # Errors
/// When it exists and cannot be read.
pub fn modules(root: &Path) -> Result<Vec<u8>, SystemError> {
    match read(root, "proc/modules") {
        Err(SystemError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(Vec::new())
        }
        other => other,
    }
}

/// The kernel's BTF (`sys/kernel/btf/vmlinux`): struct layouts for field names when no
/// vmlinux with debug info is at hand. `None` on kernels built without
/// `CONFIG_DEBUG_INFO_BTF`.
#[must_use]
pub fn kernel_btf(root: &Path) -> Option<Vec<u8>> {
    std::fs::read(root.join("sys/kernel/btf/vmlinux")).ok()
}

/// Gathers a profile header from the system under `root`, for a collection configured as
/// `config` by a module that answered `module`, starting at `created_unix_s`.
///
/// # Errors
/// When a file every Linux system has cannot be read.
pub fn gather_header(
    root: &Path,
    config: CollectConfig,
    module: ModuleInfo,
    created_unix_s: u64,
) -> Result<ProfileHeader, SystemError> {
    let cmdline = boot_cmdline(root)?;
    Ok(ProfileHeader {
        dprof_version: crate::VERSION.to_owned(),
        created_unix_s,
        kernel_release: kernel_release(root)?,
        // Optional: analysis works without them, only the vmlinux check needs them.
        proc_version: proc_version(root).ok(),
        build_id: kernel_build_id(root),
        slab_merging: slab_merging(&cmdline),
        merged_caches: merged_caches(root),
        cmdline,
        cpu_model: cpu_model(root)?,
        cpu_id: cpu_id(root)?,
        online_cpus: online_cpus(root)?,
        caches: cache_geometry(root),
        memory_layout: None,
        percpu_section: None,
        kernel_image: Vec::new(),
        config,
        module,
    })
}

/// CPU time of this process so far, every thread's, ended ones too (ns): what collecting,
/// translating and writing cost, or what an analysis cost.
#[must_use]
pub fn process_cpu_ns() -> Option<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID).ok()?;
    u64::try_from(t.tv_sec())
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(u64::try_from(t.tv_nsec()).ok()?)
}
