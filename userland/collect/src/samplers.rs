//! Which hardware memory samplers this machine offers, read from procfs and sysfs under a root
//! directory ("/" normally, a fake tree in tests), and why not when it offers none.
//!
//! - AMD IBS op: the `ibs_op` PMU (`/sys/bus/event_source/devices/ibs_op/type`). Its
//!   `format/cnt_ctl` (Linux 6.12 `arch/x86/events/amd/ibs.c`: present with `IBS_CAPS_OPCNT`)
//!   makes the period count dispatched ops instead of cycles; `caps/zen4_ibs_extensions`
//!   marks Zen 4's data-source encoding.
//! - Intel PEBS load latency: the core PMU (`cpu`, or `cpu_core` on hybrid CPUs) and its
//!   `events/mem-loads` (e.g. `event=0xcd,umask=0x1,ldlat=3`), encoded into `config` and
//!   `config1` through the PMU's `format/*` files, the way perf does it.
//!
//! Each "why not" is one sentence naming what is missing; the collector adds what to use
//! instead.

use std::path::Path;

use crate::system::cpuinfo_value;

#[cfg(test)]
mod tests;

/// Where perf PMUs appear in sysfs, relative to the root.
const PMU_DIR: &str = "sys/bus/event_source/devices";

/// The AMD IBS op sampler, as this machine offers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IbsCaps {
    /// The `ibs_op` PMU's dynamic perf type.
    pub pmu_type: u32,
    /// `perf_event_attr.config`: `cnt_ctl` set when the PMU has it, so the period counts
    /// dispatched ops (every op equally likely to be tagged) rather than cycles.
    pub config: u64,
    /// Whether the period counts ops (`cnt_ctl` available) or cycles.
    pub counts_ops: bool,
    /// Zen 4 extensions (`caps/zen4_ibs_extensions`): the 5-bit data-source encoding.
    pub zen4: bool,
}

impl IbsCaps {
    /// What one unit of the period is: "ops" or "cycles".
    #[must_use]
    pub const fn unit(&self) -> &'static str {
        if self.counts_ops {
            "ops"
        } else {
            "cycles"
        }
    }
}

/// The Intel PEBS load-latency sampler, as this machine offers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PebsCaps {
    /// The core PMU's directory name: `cpu`, or `cpu_core` on hybrid CPUs.
    pub pmu: String,
    /// Its perf type.
    pub pmu_type: u32,
    /// `caps/pmu_name` (e.g. `skylake`), when the PMU has it.
    pub pmu_name: Option<String>,
    /// The `mem-loads` event as sysfs spells it.
    pub event: String,
    /// `perf_event_attr.config` of the event.
    pub config: u64,
    /// `perf_event_attr.config1` of the event (the load-latency threshold).
    pub config1: u64,
}

/// One sampler's detection: what it offers, or why not (one sentence, no advice).
pub type Detection<T> = Result<T, String>;

/// What this machine offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HardwareSamplers {
    /// AMD IBS op.
    pub ibs: Detection<IbsCaps>,
    /// Intel PEBS load latency.
    pub pebs: Detection<PebsCaps>,
}

/// Looks for IBS and PEBS under `root`. Never fails: anything unreadable is a reason.
#[must_use]
pub fn detect(root: &Path) -> HardwareSamplers {
    let cpu = CpuInfo::read(root);
    HardwareSamplers {
        ibs: detect_ibs(root, &cpu),
        pebs: detect_pebs(root, &cpu),
    }
}

/// What `/proc/cpuinfo` says that matters here.
#[derive(Debug, Default)]
struct CpuInfo {
    /// `vendor_id` of the first CPU, when there is one.
    vendor: Option<String>,
    /// `flags` of the first CPU.
    flags: Vec<String>,
}

impl CpuInfo {
    fn read(root: &Path) -> Self {
        let Ok(text) = std::fs::read_to_string(root.join("proc/cpuinfo")) else {
            return Self::default();
        };
        Self {
            vendor: cpuinfo_value(&text, "vendor_id").map(str::to_owned),
            flags: cpuinfo_value(&text, "flags")
                .map(|f| f.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
        }
    }

    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    fn vendor_text(&self) -> &str {
        self.vendor
            .as_deref()
            .unwrap_or("unknown (no vendor_id in /proc/cpuinfo)")
    }

    fn under_hypervisor(&self) -> bool {
        self.has_flag("hypervisor")
    }
}

fn detect_ibs(root: &Path, cpu: &CpuInfo) -> Detection<IbsCaps> {
    // Hygon's Dhyana is a Zen 1 and has IBS too (the kernel treats it as AMD).
    let amd = matches!(cpu.vendor.as_deref(), Some("AuthenticAMD" | "HygonGenuine"));
    if !amd {
        return Err(format!(
            "IBS needs an AMD CPU, and this one is {}",
            cpu.vendor_text()
        ));
    }
    let dir = root.join(PMU_DIR).join("ibs_op");
    if !dir.is_dir() {
        return Err(if cpu.under_hypervisor() {
            "this AMD CPU runs under a hypervisor that does not pass IBS through (no \
             /sys/bus/event_source/devices/ibs_op)"
                .to_owned()
        } else if !cpu.has_flag("ibs") {
            "this AMD CPU has no IBS (no ibs flag in /proc/cpuinfo)".to_owned()
        } else {
            "the kernel registered no ibs_op PMU although the CPU has the ibs flag (no \
             /sys/bus/event_source/devices/ibs_op; the kernel log says why, e.g. an invalid \
             IBS interrupt offset from the firmware)"
                .to_owned()
        });
    }
    let pmu_type = pmu_type(root, "ibs_op")?;
    let formats = Formats::read(root, "ibs_op")?;
    let counts_ops = formats.get("cnt_ctl").is_some();
    let config = if counts_ops {
        formats.encode_term("cnt_ctl", 1)?.0
    } else {
        0
    };
    let zen4 = std::fs::read_to_string(dir.join("caps/zen4_ibs_extensions"))
        .is_ok_and(|v| v.trim() == "1");
    Ok(IbsCaps {
        pmu_type,
        config,
        counts_ops,
        zen4,
    })
}

fn detect_pebs(root: &Path, cpu: &CpuInfo) -> Detection<PebsCaps> {
    if cpu.vendor.as_deref() != Some("GenuineIntel") {
        return Err(format!(
            "PEBS needs an Intel CPU, and this one is {}",
            cpu.vendor_text()
        ));
    }
    let devices = root.join(PMU_DIR);
    // Hybrid CPUs have cpu_core (P-cores) and cpu_atom (E-cores) instead of cpu; the module
    // opens one event per CPU of one PMU type, so only the big cores' PMU is tried.
    let Some(pmu) = ["cpu", "cpu_core"]
        .into_iter()
        .find(|p| devices.join(p).is_dir())
    else {
        return Err(if cpu.under_hypervisor() {
            "this Intel CPU runs under a hypervisor that exposes no core PMU (no \
             /sys/bus/event_source/devices/cpu)"
                .to_owned()
        } else {
            "the kernel exposes no core PMU (no /sys/bus/event_source/devices/cpu)".to_owned()
        });
    };
    let events = devices.join(pmu).join("events");
    let Ok(event) = std::fs::read_to_string(events.join("mem-loads")) else {
        let why = if cpu.under_hypervisor() {
            "the hypervisor does not virtualize PEBS"
        } else {
            "this CPU or kernel has no PEBS load-latency event"
        };
        return Err(format!(
            "the {pmu} PMU has no mem-loads event (no /sys/bus/event_source/devices/{pmu}/\
             events/mem-loads): {why}"
        ));
    };
    if events.join("mem-loads-aux").exists() {
        return Err(format!(
            "the {pmu} PMU's mem-loads event needs the mem-loads-aux event as its group \
             leader on this CPU, and dprof.ko opens single events (the in-kernel perf API has \
             no groups)"
        ));
    }
    let event = event.trim().to_owned();
    let pmu_type = pmu_type(root, pmu)?;
    let formats = Formats::read(root, pmu)?;
    let (config, config1, _) = formats
        .encode_event(&event)
        .map_err(|e| format!("cannot encode the {pmu} PMU's mem-loads event ({event:?}): {e}"))?;
    let pmu_name = std::fs::read_to_string(devices.join(pmu).join("caps/pmu_name"))
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    Ok(PebsCaps {
        pmu: pmu.to_owned(),
        pmu_type,
        pmu_name,
        event,
        config,
        config1,
    })
}

/// The perf type of PMU `pmu`.
fn pmu_type(root: &Path, pmu: &str) -> Detection<u32> {
    let rel = format!("{PMU_DIR}/{pmu}/type");
    let text =
        std::fs::read_to_string(root.join(&rel)).map_err(|e| format!("cannot read /{rel}: {e}"))?;
    text.trim()
        .parse()
        .map_err(|_| format!("/{rel} holds {:?}, not a PMU type number", text.trim()))
}

/// Which `perf_event_attr` field a format term goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigField {
    /// `config`.
    Config,
    /// `config1`.
    Config1,
    /// `config2`.
    Config2,
}

/// A PMU format: the field and the bit ranges a term's value is spread over, low bits first
/// (`config:0-7`, `config1:0-15`, `config:24`, `config:0-7,32-35`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// The field.
    pub field: ConfigField,
    /// Inclusive bit ranges.
    pub ranges: Vec<(u32, u32)>,
}

impl Format {
    /// Parses a `format/*` file's contents.
    ///
    /// # Errors
    /// One sentence saying what is wrong.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        let (field, bits) = spec
            .split_once(':')
            .ok_or_else(|| format!("format {spec:?} has no `field:bits`"))?;
        let field = match field {
            "config" => ConfigField::Config,
            "config1" => ConfigField::Config1,
            "config2" => ConfigField::Config2,
            other => return Err(format!("format {spec:?} names an unknown field {other:?}")),
        };
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u32>(), hi.trim().parse::<u32>()) else {
                return Err(format!("format {spec:?} has a bad bit range {part:?}"));
            };
            if lo > hi || hi > 63 {
                return Err(format!("format {spec:?} has a bad bit range {part:?}"));
            }
            ranges.push((lo, hi));
        }
        Ok(Self { field, ranges })
    }

    /// Bits available for a value.
    #[must_use]
    pub fn width(&self) -> u32 {
        self.ranges.iter().map(|(lo, hi)| hi - lo + 1).sum()
    }

    /// `value` spread over the ranges, low bits first, as perf's `pmu_format_value` does.
    ///
    /// # Errors
    /// When `value` does not fit.
    pub fn place(&self, value: u64) -> Result<u64, String> {
        let width = self.width();
        if width < 64 && value >> width != 0 {
            return Err(format!("{value:#x} does not fit in {width} bits"));
        }
        let mut out = 0u64;
        let mut rest = value;
        for &(lo, hi) in &self.ranges {
            let n = hi - lo + 1;
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            out |= (rest & mask) << lo;
            rest = if n == 64 { 0 } else { rest >> n };
        }
        Ok(out)
    }
}

/// A PMU's `format/*` files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Formats {
    terms: Vec<(String, Format)>,
}

impl Formats {
    /// Formats from `(term, spec)` pairs.
    ///
    /// # Errors
    /// The first spec that does not parse.
    pub fn from_specs<'a>(
        specs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, String> {
        let mut terms = Vec::new();
        for (name, spec) in specs {
            terms.push((name.to_owned(), Format::parse(spec)?));
        }
        Ok(Self { terms })
    }

    /// Reads `PMU/format/*` (a PMU without a format directory has no terms).
    fn read(root: &Path, pmu: &str) -> Detection<Self> {
        let dir = root.join(PMU_DIR).join(pmu).join("format");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(Self::default());
        };
        let mut specs = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let spec = std::fs::read_to_string(entry.path())
                .map_err(|e| format!("cannot read /{PMU_DIR}/{pmu}/format/{name}: {e}"))?;
            specs.push((name, spec));
        }
        specs.sort();
        Self::from_specs(specs.iter().map(|(n, s)| (n.as_str(), s.as_str())))
            .map_err(|e| format!("the {pmu} PMU's {e}"))
    }

    /// The format of `term`.
    #[must_use]
    pub fn get(&self, term: &str) -> Option<&Format> {
        self.terms.iter().find(|(n, _)| n == term).map(|(_, f)| f)
    }

    /// `(config, config1, config2)` with only `term = value` set.
    ///
    /// # Errors
    /// An unknown term, or a value that does not fit.
    pub fn encode_term(&self, term: &str, value: u64) -> Result<(u64, u64, u64), String> {
        let format = self
            .get(term)
            .ok_or_else(|| format!("the PMU has no format for {term:?}"))?;
        let bits = format
            .place(value)
            .map_err(|e| format!("{term}={value:#x}: {e}"))?;
        Ok(match format.field {
            ConfigField::Config => (bits, 0, 0),
            ConfigField::Config1 => (0, bits, 0),
            ConfigField::Config2 => (0, 0, bits),
        })
    }

    /// `(config, config1, config2)` of an event spec such as `event=0xcd,umask=0x1,ldlat=3`
    /// (a term without a value is 1).
    ///
    /// # Errors
    /// An unknown term, a bad number, or a value that does not fit.
    pub fn encode_event(&self, event: &str) -> Result<(u64, u64, u64), String> {
        let mut out = (0u64, 0u64, 0u64);
        for term in event
            .trim()
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let (name, value) = match term.split_once('=') {
                Some((n, v)) => (n.trim(), parse_number(v.trim())?),
                None => (term, 1),
            };
            let (c, c1, c2) = self.encode_term(name, value)?;
            out = (out.0 | c, out.1 | c1, out.2 | c2);
        }
        Ok(out)
    }
}

/// A sysfs number: `0x`-prefixed hex or decimal.
fn parse_number(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| format!("{s:?} is not a number"))
}
