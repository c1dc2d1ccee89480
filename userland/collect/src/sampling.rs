//! The sampler: which one takes access samples, with what period, settled against what the
//! machine and the module offer.

use dprof_format::{PeriodEvents, PmuEvent, SamplingConfig};

use crate::error::CollectError;
use crate::options::{CollectOptions, Event, Period, SamplerChoice};
use crate::samplers::HardwareSamplers;

/// Returns a [`CollectError::Sampler`] with the sentence given.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(CollectError::Sampler(format!($($arg)*)))
    };
}

/// The software sampler's default period (ns).
const DEFAULT_PERIOD: u32 = dprof_abi::DEFAULT_SAMPLE_PERIOD_NS;

/// IBS's default period: 0x40000 ops. A core retiring ~3e9 ops/s takes at most ~11k samples/s
/// (about 4k of them loads and stores), about the records and NMI time PEBS's default costs;
/// and it is below 0xFFFF0, so CPUs without `IbsOpCntExt` take it too.
const DEFAULT_IBS_PERIOD: u32 = 0x40000;

/// PEBS's default period: 100003 loads. A core running kernel code loads up to ~1e9 times a
/// second, so at most ~10k samples/s per CPU: ~2 MB/s of records and a few % of NMI time. A
/// prime, so that the samples do not fall in step with a loop.
const DEFAULT_PEBS_PERIOD: u32 = 100_003;

/// A sampler, settled: what `IOC_CONFIGURE` and the profile header get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sampling {
    /// `SAMPLER_KIND_*`.
    pub kind: u8,
    /// `software`, `ibs` or `pebs`.
    pub name: &'static str,
    /// Software: ns; IBS: ops or cycles; PEBS: loads.
    pub period: u32,
    /// What `period` counts: `ns`, `ops`, `cycles` or `loads`.
    pub unit: &'static str,
    /// Sample user mode too.
    pub user: bool,
    /// Hardware: the PMU's sysfs name, its type and the event's `config`, `config1`.
    pub pmu: String,
    pub pmu_type: u32,
    pub pmu_config: u64,
    pub pmu_config1: u64,
}

impl Sampling {
    /// The software sampler every `period` ns.
    #[must_use]
    pub fn software(period: u32, user: bool) -> Self {
        Self {
            kind: dprof_abi::SAMPLER_KIND_SOFTWARE,
            name: "software",
            period,
            unit: "ns",
            user,
            pmu: String::new(),
            pmu_type: 0,
            pmu_config: 0,
            pmu_config1: 0,
        }
    }

    /// IBS or PEBS.
    #[must_use]
    pub fn is_hardware(&self) -> bool {
        self.kind != dprof_abi::SAMPLER_KIND_SOFTWARE
    }

    /// What the profile header records: a time for the software sampler; a count of events
    /// and the perf event for hardware samplers (their `period_ns` is 0).
    #[must_use]
    pub fn header_config(&self) -> SamplingConfig {
        let hardware = self.is_hardware();
        SamplingConfig {
            sampler: self.name.to_owned(),
            period_ns: if hardware { 0 } else { self.period },
            user: self.user,
            period_events: hardware.then(|| PeriodEvents {
                count: u64::from(self.period),
                unit: self.unit.to_owned(),
            }),
            pmu: hardware.then(|| PmuEvent {
                pmu: self.pmu.clone(),
                pmu_type: self.pmu_type,
                config: self.pmu_config,
                config1: self.pmu_config1,
            }),
        }
    }
}

/// What will be collected, settled against what the machine and the module offer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub events: Vec<Event>,
    /// With samples: the sampler.
    pub sampling: Option<Sampling>,
    /// A one-line note for the person (why samples are off by default).
    pub note: Option<String>,
    /// With `--sampler auto`: which sampler was picked and why, one line.
    pub pick: Option<String>,
}

/// Decides events and sampler from the arguments, the hardware samplers this machine offers,
/// and the module's `samplers` bits (`None` before the module was asked: every sampler is
/// then assumed, so that what the machine lacks is found before the device is opened).
///
/// # Errors
/// [`CollectError::Sampler`] when the sampler asked for (or, with `auto`, any sampler) cannot
/// be used, or the period does not suit it.
pub fn plan(
    options: &CollectOptions,
    module_samplers: Option<u32>,
    hw: &HardwareSamplers,
) -> Result<Plan, CollectError> {
    let any_sampler =
        dprof_abi::SAMPLER_SOFTWARE | dprof_abi::SAMPLER_IBS | dprof_abi::SAMPLER_PEBS;
    let mut note = None;
    let mut events = match &options.events {
        Some(events) => events.clone(),
        None if module_samplers.is_none_or(|m| m & any_sampler != 0) => {
            vec![Event::Slab, Event::Samples]
        }
        None => {
            note = Some(
                "the module offers no sampler, so only slab events are collected (no access \
                 samples)"
                    .to_owned(),
            );
            vec![Event::Slab]
        }
    };
    events.sort();
    events.dedup();
    if !events.contains(&Event::Samples) {
        return Ok(Plan {
            events,
            sampling: None,
            note,
            pick: None,
        });
    }
    let chooser = Chooser {
        period: options.period.as_ref(),
        user: options.sample_user,
        module: module_samplers,
        hw,
    };
    let (sampling, pick) = match options.sampler {
        SamplerChoice::Software => (chooser.software()?, None),
        SamplerChoice::Ibs => (chooser.ibs()?, None),
        SamplerChoice::Pebs => (chooser.pebs()?, None),
        SamplerChoice::Auto => {
            let (sampling, why) = chooser.auto()?;
            (sampling, Some(why))
        }
    };
    Ok(Plan {
        events,
        sampling: Some(sampling),
        note,
        pick,
    })
}

/// Picks and checks a sampler (see [`plan`]).
struct Chooser<'a> {
    period: Option<&'a Period>,
    user: bool,
    module: Option<u32>,
    hw: &'a HardwareSamplers,
}

impl Chooser<'_> {
    /// Whether the module offers `SAMPLER_*` bit `bit` (assumed before it was asked).
    fn offers(&self, bit: u32) -> bool {
        self.module.is_none_or(|m| m & bit != 0)
    }

    fn module_bits(&self) -> u32 {
        self.module.unwrap_or(0)
    }

    fn software(&self) -> Result<Sampling, CollectError> {
        if !self.offers(dprof_abi::SAMPLER_SOFTWARE) {
            bail!(
                "the module offers no software sampler (samplers {:#x}): rebuild dprof.ko with \
                 it, or collect --events slab",
                self.module_bits()
            );
        }
        let ns = match self.period {
            None => DEFAULT_PERIOD,
            Some(Period::Time { ns, .. }) => *ns,
            Some(Period::Count(n)) => bail!(
                "--period {n} is a count of events, but the software sampler takes the time \
                 between samples, e.g. --period 1ms"
            ),
        };
        Ok(Sampling::software(ns, self.user))
    }

    fn ibs(&self) -> Result<Sampling, CollectError> {
        let caps = match &self.hw.ibs {
            Ok(caps) => caps,
            Err(why) => bail!("cannot sample with IBS: {why}; use --sampler software"),
        };
        if !self.offers(dprof_abi::SAMPLER_IBS) {
            bail!(
                "the module offers no IBS sampler (samplers {:#x}): load a dprof.ko built with \
                 it, or use --sampler software",
                self.module_bits()
            );
        }
        let unit = caps.unit();
        let period = match self.period {
            None => DEFAULT_IBS_PERIOD,
            Some(Period::Time { text, .. }) => bail!(
                "--period {text} is a time, but IBS counts {unit}: give a number, e.g. \
                 --period {DEFAULT_IBS_PERIOD}"
            ),
            Some(Period::Count(n)) => ibs_period(*n)?,
        };
        Ok(Sampling {
            kind: dprof_abi::SAMPLER_KIND_IBS,
            name: "ibs",
            period,
            unit,
            user: self.user,
            pmu: "ibs_op".to_owned(),
            pmu_type: caps.pmu_type,
            pmu_config: caps.config,
            pmu_config1: 0,
        })
    }

    fn pebs(&self) -> Result<Sampling, CollectError> {
        let caps = match &self.hw.pebs {
            Ok(caps) => caps,
            Err(why) => bail!("cannot sample with PEBS: {why}; use --sampler software"),
        };
        if !self.offers(dprof_abi::SAMPLER_PEBS) {
            bail!(
                "the module offers no PEBS sampler (samplers {:#x}): load a dprof.ko built \
                 with it, or use --sampler software",
                self.module_bits()
            );
        }
        let period = match self.period {
            None => DEFAULT_PEBS_PERIOD,
            Some(Period::Time { text, .. }) => bail!(
                "--period {text} is a time, but PEBS counts loads: give a number, e.g. \
                 --period {DEFAULT_PEBS_PERIOD}"
            ),
            Some(Period::Count(n)) => pebs_period(*n)?,
        };
        Ok(Sampling {
            kind: dprof_abi::SAMPLER_KIND_PEBS,
            name: "pebs",
            period,
            unit: "loads",
            user: self.user,
            pmu: caps.pmu.clone(),
            pmu_type: caps.pmu_type,
            pmu_config: caps.config,
            pmu_config1: caps.config1,
        })
    }

    /// IBS, else PEBS, else software; the line says which and why the ones before it were
    /// passed over.
    fn auto(&self) -> Result<(Sampling, String), CollectError> {
        let mut passed: Vec<String> = Vec::new();
        let time = match self.period {
            Some(Period::Time { text, .. }) => Some(text.as_str()),
            _ => None,
        };
        let hardware = [
            ("IBS", dprof_abi::SAMPLER_IBS, self.hw.ibs.as_ref().err()),
            ("PEBS", dprof_abi::SAMPLER_PEBS, self.hw.pebs.as_ref().err()),
        ];
        for (name, bit, missing) in hardware {
            if let Some(why) = missing {
                passed.push(format!("no {name}: {why}"));
            } else if !self.offers(bit) {
                passed.push(format!("no {name}: the module offers no {name} sampler"));
            } else if let Some(text) = time {
                passed.push(format!(
                    "not {name}: --period {text} is a time, and {name} counts events"
                ));
            } else {
                let sampling = if bit == dprof_abi::SAMPLER_IBS {
                    self.ibs()?
                } else {
                    self.pebs()?
                };
                let mut why = vec![self.describe(&sampling)];
                why.extend(passed);
                let line = format!("{} ({})", sampling.name, why.join("; "));
                return Ok((sampling, line));
            }
        }
        if let Some(Period::Count(n)) = self.period {
            bail!(
                "--period {n} is a count of events, for IBS or PEBS, and neither can be used \
                 ({}): give the software sampler a time, e.g. --period 1ms",
                passed.join("; ")
            );
        }
        if !self.offers(dprof_abi::SAMPLER_SOFTWARE) {
            bail!(
                "the module offers no sampler this machine can use (samplers {:#x}; {}): \
                 collect without samples, e.g. --events slab",
                self.module_bits(),
                passed.join("; ")
            );
        }
        let sampling = self.software()?;
        Ok((sampling, format!("software ({})", passed.join("; "))))
    }

    /// The hardware sampler in a few words, for the pick line.
    fn describe(&self, s: &Sampling) -> String {
        match (&self.hw.ibs, &self.hw.pebs) {
            (Ok(ibs), _) if s.kind == dprof_abi::SAMPLER_KIND_IBS => format!(
                "AMD IBS op, ibs_op PMU type {}, every {} {}",
                ibs.pmu_type, s.period, s.unit
            ),
            (_, Ok(pebs)) => format!(
                "Intel PEBS load latency, {} PMU{} type {}, mem-loads {}, every {} {}",
                pebs.pmu,
                pebs.pmu_name
                    .as_ref()
                    .map_or_else(String::new, |n| format!(" ({n})")),
                pebs.pmu_type,
                pebs.event,
                s.period,
                s.unit
            ),
            _ => format!("every {} {}", s.period, s.unit),
        }
    }
}

/// Checks an IBS period: a multiple of 16 within what the ABI accepts (the hardware counts
/// in units of 16).
fn ibs_period(n: u64) -> Result<u32, CollectError> {
    let (min, max) = (
        u64::from(dprof_abi::MIN_IBS_PERIOD),
        u64::from(dprof_abi::MAX_IBS_PERIOD),
    );
    if n < min {
        bail!("--period {n} is below IBS's smallest period, {min}");
    }
    if n > max {
        bail!("--period {n} is above IBS's largest period, {max} ({max:#x})");
    }
    if !n.is_multiple_of(16) {
        let below = n / 16 * 16;
        bail!(
            "--period {n} is not a multiple of 16, which IBS needs (it counts in units of 16): \
             use {below} or {}",
            below + 16
        );
    }
    u32::try_from(n).map_err(|_| CollectError::Sampler(format!("--period {n} is out of range")))
}

/// Checks a PEBS period: at least what the ABI accepts.
fn pebs_period(n: u64) -> Result<u32, CollectError> {
    let min = dprof_abi::MIN_PEBS_PERIOD;
    if n < u64::from(min) {
        bail!(
            "--period {n} is below PEBS's smallest period, {min} loads: shorter ones flood the \
             rings with PEBS records"
        );
    }
    u32::try_from(n).map_err(|_| {
        CollectError::Sampler(format!(
            "--period {n} is above the largest period, {}",
            u32::MAX
        ))
    })
}
