//! Code as the unit of causal experiments (`dprof causal --units functions|modules`): which
//! functions and modules are candidates (`--scope`), the most sampled of them in the
//! profiling phase, and the instructions the module tests samples against.
//!
//! The module's type test is "the sampled ip is one of the entry's instructions", so a
//! function is every instruction start from its kallsyms address to the next symbol,
//! decoded one after the other from its live code (read through `/proc/kcore`: run-time
//! patching included). The entry names no slab cache, so no data address is matched. A
//! module is its functions in scope, most sampled first, until the next one does not fit in
//! the [`MAX_CAUSAL_TYPE_IPS`] instructions one entry takes; the functions left out are
//! counted in the profile and said.
//!
//! In the profiling phase samples count for a function as they fall on it: a helper such as
//! `memcpy` is a function of its own (the recorded samples carry no call chain). In the
//! experiments, with a `--scope`, the module counts a kernel sample outside the scope for the
//! first function in scope on its call chain ([`scope_ranges`]), as Coz does, so that a
//! helper the scope leaves out is sped up with its caller in scope.

use std::collections::BTreeMap;

use dprof_abi::{Record, MAX_CAUSAL_TYPE_IPS, MAX_SCOPE_RANGES, SAMPLE_USER};
use dprof_analysis::decode::instruction_boundaries;
use dprof_analysis::symbols::{CodeRanges, Kallsyms, Symbol};
use dprof_format::{CausalTypeSpec, CausalUnit};

use crate::error::CollectError;
use crate::options::Selection;
use crate::scope::{glob_matches, module_of, Scope, CORE_KERNEL};

#[cfg(test)]
mod tests;

/// A unit needs this many samples in the profiling phase for the automatic choice to pick it.
pub(crate) const MIN_PLAN_SAMPLES: u64 = 20;

/// Longest function read: kallsyms gives no size, only the next symbol's address, and a
/// function that seems longer than this is a gap before the next symbol, not code.
const MAX_FUNCTION_BYTES: u64 = 256 << 10;

/// Functions of the idle task (pid 0) whose samples are not counted: the idle loop waits for
/// work, and no speedup of it shortens anything. Interrupt work done on an idle CPU counts.
const IDLE_LOOP_GLOBS: [&str; 3] = ["*idle*", "*halt*", "*mwait*"];

/// An entry of the type table chosen for experiments, with the instructions the module
/// tests samples against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ChosenUnit {
    pub(crate) spec: CausalTypeSpec,
    pub(crate) ips: Vec<u64>,
}

/// The scope's code as the module takes it (`IOC_CAUSAL_SCOPE`): every function in scope,
/// from its kallsyms address to the next symbol (functions kallsyms does not end are left
/// out, as they are as units), merged where they touch. `None` for a scope of every function,
/// where every sample is in scope.
///
/// # Errors
/// [`CollectError::Usage`] when the ranges are more than the module takes.
pub(crate) fn scope_ranges(
    scope: &Scope,
    symbols: &Kallsyms,
) -> Result<Option<Vec<(u64, u64)>>, CollectError> {
    if scope.is_everything() {
        return Ok(None);
    }
    let code = CodeRanges::of_functions(symbols.text_symbols(), |s| {
        s.size <= MAX_FUNCTION_BYTES && scope.holds(s)
    });
    let ranges: Vec<(u64, u64)> = code.ranges().iter().map(|r| (r.start, r.end)).collect();
    if ranges.len() > MAX_SCOPE_RANGES as usize {
        return Err(CollectError::Usage(format!(
            "--scope `{scope}` holds {} separate runs of code, more than the {MAX_SCOPE_RANGES} \
             the module takes: name fewer functions, or whole modules (`[NAME]`)",
            ranges.len()
        )));
    }
    Ok(Some(ranges))
}

/// Returns a [`CollectError::CausalTypes`] with the sentence given.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(CollectError::CausalTypes(format!($($arg)*)))
    };
}

/// Every instruction start of `code`, the bytes at `address`: the instructions decoded one
/// after the other from the first byte, up to the first bytes that are not an instruction,
/// less the padding at the end (`int3`, or the zeros between a module's sections, which
/// decode as `add [rax], al`): kallsyms ends a function at the next symbol, and what lies
/// between is never run.
#[must_use]
pub fn instruction_starts(code: &[u8], address: u64) -> Vec<u64> {
    let mut boundaries = instruction_boundaries(code, address);
    while let Some(&(ip, len)) = boundaries.last() {
        let start = usize::try_from(ip - address).unwrap_or(usize::MAX);
        let bytes = code.get(start..start.saturating_add(usize::from(len)));
        if !matches!(bytes, Some([0xcc] | [0, 0])) {
            break;
        }
        boundaries.pop();
    }
    boundaries.into_iter().map(|(ip, _)| ip).collect()
}

/// The profiling phase's samples per code symbol (index in `symbols`' code symbols), from
/// its records: kernel-mode samples, except the idle task's in the idle loop.
///
/// # Errors
/// [`CollectError::BadRecord`] for a record that does not decode.
pub(crate) fn samples_by_function(
    records: &[u8],
    symbols: &Kallsyms,
) -> Result<BTreeMap<usize, u64>, CollectError> {
    let mut samples: BTreeMap<usize, u64> = BTreeMap::new();
    let mut pos = 0;
    while let Some(rest) = records.get(pos..).filter(|r| !r.is_empty()) {
        let (header, record) = Record::decode(rest).map_err(CollectError::BadRecord)?;
        pos += usize::from(header.size).max(dprof_abi::RECORD_ALIGN);
        let Record::AccessSample(sample) = record else {
            continue;
        };
        if sample.flags & SAMPLE_USER != 0 {
            continue;
        }
        let Some(index) = symbols.lookup_index(sample.ip) else {
            continue;
        };
        let idle_loop = sample.pid == 0
            && symbols.symbol(index).is_some_and(|s| {
                IDLE_LOOP_GLOBS
                    .iter()
                    .any(|glob| glob_matches(glob, &s.name))
            });
        if !idle_loop {
            *samples.entry(index).or_default() += 1;
        }
    }
    Ok(samples)
}

/// Checks the named units and the scope against `symbols` before anything is opened.
///
/// # Errors
/// [`CollectError::Usage`] for a scope with types, a scope that holds no function, a named
/// function or module kallsyms does not list, or a named function outside the scope.
pub(crate) fn check_units(
    unit: CausalUnit,
    selection: &Selection,
    scope: &Scope,
    symbols: &Kallsyms,
) -> Result<(), CollectError> {
    let usage = |s: String| Err(CollectError::Usage(s));
    // Non-root readers of /proc/kallsyms see no address, and dprof sees no function.
    let hint = if symbols.is_empty() {
        " (it lists none with an address: run as root)"
    } else {
        ""
    };
    if unit == CausalUnit::Type {
        if !scope.is_everything() {
            return usage(format!(
                "--scope `{scope}` limits functions and modules, not types: give --units \
                 functions or --units modules with it"
            ));
        }
        return Ok(());
    }
    let functions = symbols.text_symbols();
    if !functions.iter().any(|s| scope.holds(s)) {
        return usage(format!(
            "--scope `{scope}` matches no kernel function in /proc/kallsyms{hint}"
        ));
    }
    let Selection::Named(names) = selection else {
        return Ok(());
    };
    for name in names {
        match unit {
            CausalUnit::Function => {
                let mut same_name = functions.iter().filter(|s| s.name == *name).peekable();
                if same_name.peek().is_none() {
                    return usage(format!(
                        "no kernel function named `{name}` in /proc/kallsyms{hint} (--functions)"
                    ));
                }
                if !same_name.any(|s| scope.holds(s)) {
                    return usage(format!("function `{name}` is outside --scope `{scope}`"));
                }
            }
            CausalUnit::Module | CausalUnit::Type => {
                if !functions.iter().any(|s| module_of(s) == name) {
                    return usage(format!(
                        "no module named `{name}` in /proc/kallsyms{hint} (--modules; the core \
                         kernel is `{CORE_KERNEL}`)"
                    ));
                }
                if !functions
                    .iter()
                    .any(|s| module_of(s) == name && scope.holds(s))
                {
                    return usage(format!(
                        "no function of module `{name}` is in --scope `{scope}`"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A function: its name, its module (`None`: the core kernel), and its code symbols (more
/// than one when static functions share the name).
#[derive(Clone, Debug)]
struct Function<'k> {
    name: &'k str,
    module: Option<&'k str>,
    symbols: Vec<&'k Symbol>,
    samples: u64,
}

/// The functions in scope by (module, name), with their samples.
fn functions_in_scope<'k>(
    symbols: &'k Kallsyms,
    scope: &Scope,
    samples: &BTreeMap<usize, u64>,
) -> Vec<Function<'k>> {
    let mut by_name: BTreeMap<(Option<&str>, &str), Function<'k>> = BTreeMap::new();
    for (index, symbol) in symbols.text_symbols().iter().enumerate() {
        if !scope.holds(symbol) {
            continue;
        }
        let module = symbol.module.as_deref();
        let f = by_name
            .entry((module, &symbol.name))
            .or_insert_with(|| Function {
                name: &symbol.name,
                module,
                symbols: Vec::new(),
                samples: 0,
            });
        f.symbols.push(symbol);
        f.samples += samples.get(&index).copied().unwrap_or(0);
    }
    by_name.into_values().collect()
}

/// Reads and decodes a function's code; `Err` says why it has no instructions.
fn instructions_of(
    f: &Function<'_>,
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Result<Vec<u64>, String> {
    let mut ips = Vec::new();
    for symbol in &f.symbols {
        if symbol.size == 0 || symbol.size > MAX_FUNCTION_BYTES {
            return Err(format!(
                "kallsyms does not say where it ends (the next symbol is {})",
                if symbol.size == 0 {
                    "missing".to_owned()
                } else {
                    format!("{} KiB further", symbol.size >> 10)
                }
            ));
        }
        let len = usize::try_from(symbol.size).unwrap_or(usize::MAX);
        let code = read(symbol.address, len).ok_or_else(|| {
            format!(
                "its code at {:#x} cannot be read from /proc/kcore",
                symbol.address
            )
        })?;
        ips.extend(instruction_starts(&code, symbol.address));
    }
    if ips.is_empty() {
        return Err("its first bytes do not decode as an instruction".to_owned());
    }
    ips.sort_unstable();
    ips.dedup();
    Ok(ips)
}

/// `tcp_sendmsg`, `ext4_da_write_begin [ext4]`.
fn function_label(name: &str, module: Option<&str>) -> String {
    module.map_or_else(|| name.to_owned(), |m| format!("{name} [{m}]"))
}

/// No `unit` (function, module) in `scope` had enough samples in the profiling phase, of
/// `total` kernel samples; `ranked`: the sampled ones, most first.
fn too_few_samples(
    unit: &str,
    scope: impl std::fmt::Display,
    total: u64,
    ranked: &[(String, u64)],
) -> CollectError {
    CollectError::CausalTypes(format!(
        "no {unit} in --scope `{scope}` had {MIN_PLAN_SAMPLES} samples or more in the \
         profiling phase ({total} kernel samples; most sampled in scope: {}): make --plan-time \
         longer, --period shorter, or widen --scope",
        most_sampled(ranked)
    ))
}

/// The most sampled names of `ranked`, for an error message.
fn most_sampled(ranked: &[(String, u64)]) -> String {
    if ranked.is_empty() {
        return "none".to_owned();
    }
    ranked
        .iter()
        .take(8)
        .map(|(name, n)| format!("{name} ({n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Picks the functions and gives each its instructions: the `top` most sampled in scope, or
/// the named ones. Returns them and notes for the person.
///
/// # Errors
/// [`CollectError::CausalTypes`] when no function is left to experiment on.
pub(crate) fn choose_functions(
    selection: &Selection,
    top: usize,
    scope: &Scope,
    symbols: &Kallsyms,
    samples: &BTreeMap<usize, u64>,
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Result<(Vec<ChosenUnit>, Vec<String>), CollectError> {
    let mut functions = functions_in_scope(symbols, scope, samples);
    functions.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| (a.module, a.name).cmp(&(b.module, b.name)))
    });
    let mut notes = Vec::new();
    let picked: Vec<&Function<'_>> = match selection {
        Selection::Auto => {
            let picked: Vec<&Function<'_>> = functions
                .iter()
                .filter(|f| f.samples >= MIN_PLAN_SAMPLES)
                .take(top)
                .collect();
            if picked.is_empty() {
                let ranked: Vec<(String, u64)> = functions
                    .iter()
                    .filter(|f| f.samples > 0)
                    .map(|f| (function_label(f.name, f.module), f.samples))
                    .collect();
                return Err(too_few_samples(
                    "function",
                    scope,
                    samples.values().sum(),
                    &ranked,
                ));
            }
            picked
        }
        // Every function of each name in scope (static functions may share one).
        Selection::Named(names) => names
            .iter()
            .flat_map(|name| functions.iter().filter(move |f| f.name == name))
            .collect(),
    };
    let mut chosen = Vec::new();
    for f in picked {
        let label = function_label(f.name, f.module);
        let mut ips = match instructions_of(f, read) {
            Ok(ips) => ips,
            Err(why) => {
                notes.push(format!("function {label} is left out: {why}"));
                continue;
            }
        };
        if ips.len() > MAX_CAUSAL_TYPE_IPS as usize {
            notes.push(format!(
                "function {label} has {} instructions; its first {MAX_CAUSAL_TYPE_IPS} are \
                 sped up",
                ips.len()
            ));
            ips.truncate(MAX_CAUSAL_TYPE_IPS as usize);
        }
        if f.samples == 0 {
            notes.push(format!(
                "function {label} was never sampled in the profiling phase: its experiments \
                 may insert no delay"
            ));
        }
        chosen.push(ChosenUnit {
            spec: CausalTypeSpec {
                unit: CausalUnit::Function,
                name: f.name.to_owned(),
                module: f.module.map(str::to_owned),
                functions: Vec::new(),
                functions_left_out: 0,
                cache: None,
                ips: ips.len() as u32,
                plan_samples: f.samples,
            },
            ips,
        });
    }
    if chosen.is_empty() {
        bail!("no function is left to experiment on: {}", notes.join("; "));
    }
    Ok((chosen, notes))
}

/// Picks the modules and gives each the instructions of its functions in scope, most sampled
/// first, until the next one does not fit in one entry. Returns them and notes for the
/// person, which say what each module's entry holds.
///
/// # Errors
/// [`CollectError::CausalTypes`] when no module is left to experiment on.
pub(crate) fn choose_modules(
    selection: &Selection,
    top: usize,
    scope: &Scope,
    symbols: &Kallsyms,
    samples: &BTreeMap<usize, u64>,
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Result<(Vec<ChosenUnit>, Vec<String>), CollectError> {
    let functions = functions_in_scope(symbols, scope, samples);
    let mut modules: BTreeMap<&str, Vec<&Function<'_>>> = BTreeMap::new();
    for f in &functions {
        modules
            .entry(f.module.unwrap_or(CORE_KERNEL))
            .or_default()
            .push(f);
    }
    let total = |fs: &[&Function<'_>]| fs.iter().map(|f| f.samples).sum::<u64>();
    let mut ranked: Vec<(&str, u64)> = modules
        .iter()
        .map(|(&name, fs)| (name, total(fs)))
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let names: Vec<&str> = match selection {
        Selection::Auto => {
            let names: Vec<&str> = ranked
                .iter()
                .filter(|&&(_, n)| n >= MIN_PLAN_SAMPLES)
                .take(top)
                .map(|&(name, _)| name)
                .collect();
            if names.is_empty() {
                let sampled_modules: Vec<(String, u64)> = ranked
                    .iter()
                    .filter(|&&(_, n)| n > 0)
                    .map(|&(name, n)| (format!("[{name}]"), n))
                    .collect();
                return Err(too_few_samples(
                    "module",
                    scope,
                    samples.values().sum(),
                    &sampled_modules,
                ));
            }
            names
        }
        Selection::Named(names) => names
            .iter()
            .map(String::as_str)
            .filter(|name| modules.contains_key(name))
            .collect(),
    };
    let mut notes = Vec::new();
    let mut chosen = Vec::new();
    for name in names {
        let Some(fs) = modules.get_mut(name) else {
            continue;
        };
        match module_unit(name, fs, read) {
            Ok((unit, note)) => {
                chosen.push(unit);
                notes.extend(note);
            }
            Err(why) => notes.push(why),
        }
    }
    if chosen.is_empty() {
        bail!("no module is left to experiment on: {}", notes.join("; "));
    }
    Ok((chosen, notes))
}

/// A module's entry: its functions `fs`, most sampled first (the never-sampled ones in
/// address order), until the next one does not fit; and a note when some are left out. `Err`
/// says why the module has none.
fn module_unit(
    name: &str,
    fs: &mut [&Function<'_>],
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Result<(ChosenUnit, Option<String>), String> {
    fs.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.symbols[0].address.cmp(&b.symbols[0].address))
    });
    let mut ips: Vec<u64> = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    let mut listed_samples = 0;
    let mut unreadable = 0;
    let mut next = 0;
    while let Some(f) = fs.get(next) {
        let Ok(code) = instructions_of(f, read) else {
            unreadable += 1;
            next += 1;
            continue;
        };
        if ips.len() + code.len() > MAX_CAUSAL_TYPE_IPS as usize {
            break;
        }
        ips.extend(code);
        listed.push(f.name.to_owned());
        listed_samples += f.samples;
        next += 1;
    }
    if listed.is_empty() {
        return Err(format!(
            "module [{name}] is left out: none of its functions in scope could be read and \
             decoded"
        ));
    }
    let left_out = fs.len() - next;
    let module_samples: u64 = fs.iter().map(|f| f.samples).sum();
    ips.sort_unstable();
    ips.dedup();
    let mut missing = Vec::new();
    if left_out > 0 {
        missing.push(format!(
            "{left_out} more did not fit in the {MAX_CAUSAL_TYPE_IPS} instructions one entry \
             takes"
        ));
    }
    if unreadable > 0 {
        missing.push(format!("{unreadable} could not be read or decoded"));
    }
    let note = (!missing.is_empty()).then(|| {
        format!(
            "module [{name}]: its {} most sampled functions in scope are sped up ({} \
             instructions, {listed_samples} of its {module_samples} samples in the profiling \
             phase); {}",
            listed.len(),
            ips.len(),
            missing.join(", and ")
        )
    });
    let unit = ChosenUnit {
        spec: CausalTypeSpec {
            unit: CausalUnit::Module,
            name: name.to_owned(),
            module: None,
            functions: listed,
            functions_left_out: u32::try_from(left_out + unreadable).unwrap_or(u32::MAX),
            cache: None,
            ips: ips.len() as u32,
            plan_samples: module_samples,
        },
        ips,
    };
    Ok((unit, note))
}
