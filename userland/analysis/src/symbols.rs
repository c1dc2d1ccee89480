//! Kernel symbols from a `/proc/kallsyms` snapshot: code addresses to `function+0xoffset`, data
//! addresses to the global, static or per-CPU variable they fall in.
//!
//! Parsing takes the text as bytes (no I/O) and skips lines it does not understand. Symbols
//! are split into three tables, each sorted by address for binary search:
//! - **text** (types t, T, w, W): functions, for ips and call sites;
//! - **data** (d, D, b, B, r, R, v, V): variables with a kernel virtual address;
//! - **per-CPU** variables: on x86-64 SMP kernels the per-CPU section is linked at address 0,
//!   so its symbols show in kallsyms with small addresses between `__per_cpu_start` (0) and
//!   `__per_cpu_end`. A CPU's copy lives at its per-CPU base (its `%gs` base in kernel mode)
//!   plus that address, so an address in the per-CPU area resolves as `addr - gs_base`.
//!
//! Sizes are not in kallsyms: each symbol's size is estimated as the distance to the next
//! symbol at a higher address (over all types, so a variable ends where anything else starts).
//! Exact sizes come from a vmlinux (see [`crate::debuginfo`]).

use std::ops::Range;

use crate::percpu_section::PercpuLayout;

/// Code symbols, data symbols and per-CPU symbols, sorted by address.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    text: Vec<Symbol>,
    data: Vec<Symbol>,
    percpu: Vec<Symbol>,
    percpu_range: Option<Range<u64>>,
}

/// What a symbol names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    /// Code (t, T, w, W).
    Text,
    /// Initialized data (d, D, v, V).
    Data,
    /// Read-only data (r, R).
    ReadOnly,
    /// Zero-initialized data (b, B).
    Bss,
    /// An absolute symbol (a, A); kept only inside the per-CPU range, where older kernels put
    /// per-CPU variables.
    Absolute,
}

impl SymbolKind {
    /// The kind of a kallsyms type letter, if dprof keeps such symbols.
    #[must_use]
    pub const fn from_letter(letter: u8) -> Option<Self> {
        match letter.to_ascii_lowercase() {
            b't' | b'w' => Some(Self::Text),
            b'd' | b'v' => Some(Self::Data),
            b'r' => Some(Self::ReadOnly),
            b'b' => Some(Self::Bss),
            b'a' => Some(Self::Absolute),
            _ => None,
        }
    }
}

/// One symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// Start address (for per-CPU symbols: the offset in the per-CPU area).
    pub address: u64,
    /// Name.
    pub name: String,
    /// Module, for symbols of loadable modules.
    pub module: Option<String>,
    /// What it names.
    pub kind: SymbolKind,
    /// Estimated size in bytes: up to the next symbol at a higher address; 0 when unknown
    /// (the last symbol).
    pub size: u64,
}

/// A symbolized code address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location<'a> {
    /// The symbol the address falls in.
    pub symbol: &'a Symbol,
    /// Bytes from the symbol's start.
    pub offset: u64,
}

impl std::fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Rust symbols (`_R...`) read better demangled; others pass through unchanged.
        write!(
            f,
            "{:#}+{:#x}",
            rustc_demangle::demangle(&self.symbol.name),
            self.offset
        )?;
        if let Some(module) = &self.symbol.module {
            write!(f, " [{module}]")?;
        }
        Ok(())
    }
}

/// A data address resolved to a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataLocation<'a> {
    /// The variable (name, start, estimated size, module).
    pub symbol: &'a Symbol,
    /// Bytes from its start; below its estimated size.
    pub offset: u64,
    /// A per-CPU variable: `symbol.address` is an offset in the per-CPU area.
    pub percpu: bool,
}

impl std::fmt::Display for DataLocation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Rust symbols (`_R...`) read better demangled; others pass through unchanged.
        write!(
            f,
            "{:#}+{:#x}",
            rustc_demangle::demangle(&self.symbol.name),
            self.offset
        )?;
        if self.percpu {
            f.write_str(" (per-CPU)")?;
        }
        if let Some(module) = &self.symbol.module {
            write!(f, " [{module}]")?;
        }
        Ok(())
    }
}

/// The name of dprof's own module in kallsyms (`[dprof]`) and `/proc/modules`.
pub const PROFILER_MODULE: &str = "dprof";

/// Addresses further than this past the last code symbol are not attributed to it: kallsyms
/// does not say where the last function ends.
const MAX_LAST_SYMBOL_SIZE: u64 = 1 << 20;

/// Largest per-CPU area taken for a 0-based one (x86-64 reserves far less; beyond this
/// `__per_cpu_start`..`__per_cpu_end` is not an offset range).
const MAX_PERCPU_BYTES: u64 = 1 << 30;

/// One parsed line.
struct Line<'a> {
    address: u64,
    letter: u8,
    name: &'a str,
    module: Option<&'a str>,
}

fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.split_whitespace();
    let address = u64::from_str_radix(fields.next()?, 16).ok()?;
    let kind = fields.next()?;
    let name = fields.next()?;
    let module = fields
        .next()
        .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'));
    let &[letter] = kind.as_bytes() else {
        return None;
    };
    Some(Line {
        address,
        letter,
        name,
        module,
    })
}

/// Whether `name` is a linker-made bound of a section (`__start_SECTION`, `__stop_SECTION`,
/// `_sdata`, `__bss_stop`, ...) rather than a variable.
fn is_section_bound(name: &str) -> bool {
    const BOUNDS: [&str; 12] = [
        "_sdata",
        "_edata",
        "__bss_start",
        "__bss_stop",
        "_end",
        "__init_begin",
        "__init_end",
        "_sinittext",
        "_einittext",
        "__end_rodata",
        "__brk_base",
        "__brk_limit",
    ];
    [
        "__start_",
        "__stop_",
        "__end_",
        "__init_scratch_",
        "__per_cpu_",
    ]
    .iter()
    .any(|p| name.starts_with(p))
        || BOUNDS.contains(&name)
}

/// Fills in each symbol's size from the sorted addresses of all symbols.
fn estimate_sizes(symbols: &mut [Symbol], all_addresses: &[u64]) {
    for s in symbols {
        let next = all_addresses.partition_point(|&a| a <= s.address);
        s.size = all_addresses.get(next).map_or(0, |&n| n - s.address);
    }
}

impl Kallsyms {
    /// Parses kallsyms text. A snapshot whose addresses are all 0 (what non-root readers see)
    /// symbolizes nothing rather than everything wrongly; otherwise symbols at 0 are kept
    /// only when they are per-CPU (`__per_cpu_start` is 0 on x86-64).
    #[must_use]
    pub fn parse(text: &[u8]) -> Self {
        let lines: Vec<Line<'_>> = text.split(|&b| b == b'\n').filter_map(parse_line).collect();
        if lines.iter().all(|l| l.address == 0) {
            return Self::default();
        }
        let find = |name: &str| {
            lines
                .iter()
                .find(|l| l.name == name && l.module.is_none())
                .map(|l| l.address)
        };
        let percpu_range = match (find("__per_cpu_start"), find("__per_cpu_end")) {
            (Some(start), Some(end)) if start < end && end - start <= MAX_PERCPU_BYTES => {
                Some(start..end)
            }
            _ => None,
        };
        // 0-based only: elsewhere per-CPU symbols are ordinary data in .data..percpu.
        let zero_based = percpu_range.as_ref().filter(|r| r.start == 0).cloned();
        let mut text_syms = Vec::new();
        let mut data = Vec::new();
        let mut percpu = Vec::new();
        let mut all_addresses = Vec::with_capacity(lines.len());
        let mut percpu_addresses = Vec::new();
        for l in &lines {
            let Some(kind) = SymbolKind::from_letter(l.letter) else {
                continue;
            };
            let in_percpu = l.module.is_none()
                && kind != SymbolKind::Text
                && zero_based.as_ref().is_some_and(|r| r.contains(&l.address));
            let symbol = Symbol {
                address: l.address,
                name: l.name.to_owned(),
                module: l.module.map(str::to_owned),
                kind,
                size: 0,
            };
            if in_percpu {
                percpu_addresses.push(l.address);
                if !l.name.starts_with("__per_cpu_") {
                    percpu.push(symbol);
                }
                continue;
            }
            if l.address == 0 {
                continue;
            }
            all_addresses.push(l.address);
            match kind {
                SymbolKind::Text => text_syms.push(symbol),
                // A section's bounds end the variable before them but are no variable: on a
                // kernel without CONFIG_KALLSYMS_ALL they are the only data symbols, and
                // naming every access after the nearest one would be wrong.
                SymbolKind::Data | SymbolKind::ReadOnly | SymbolKind::Bss
                    if is_section_bound(l.name) => {}
                SymbolKind::Data | SymbolKind::ReadOnly | SymbolKind::Bss => data.push(symbol),
                SymbolKind::Absolute => {}
            }
        }
        if let Some(r) = &zero_based {
            // The per-CPU area ends at __per_cpu_end.
            percpu_addresses.push(r.end);
        }
        for v in [&mut text_syms, &mut data, &mut percpu] {
            v.sort_by(|a, b| a.address.cmp(&b.address).then_with(|| a.name.cmp(&b.name)));
        }
        all_addresses.sort_unstable();
        all_addresses.dedup();
        percpu_addresses.sort_unstable();
        percpu_addresses.dedup();
        estimate_sizes(&mut text_syms, &all_addresses);
        estimate_sizes(&mut data, &all_addresses);
        estimate_sizes(&mut percpu, &percpu_addresses);
        Self {
            text: text_syms,
            data,
            percpu,
            percpu_range: zero_based,
        }
    }

    /// The code of a loadable module: from its first function to the end of its last (the
    /// next symbol of any module, its size capped like any last symbol's); `None` when no
    /// function of it is listed.
    #[must_use]
    pub fn module_text(&self, module: &str) -> Option<Range<u64>> {
        let mut functions = self
            .text
            .iter()
            .filter(|s| s.module.as_deref() == Some(module));
        let first = functions.next()?;
        let last = functions.next_back().unwrap_or(first);
        let size = match last.size {
            0 => MAX_LAST_SYMBOL_SIZE,
            n => n.min(MAX_LAST_SYMBOL_SIZE),
        };
        Some(first.address..last.address.saturating_add(size))
    }

    /// Number of code symbols.
    #[must_use]
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// Whether there are no code symbols.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Number of data symbols (per-CPU ones not included).
    #[must_use]
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// Number of per-CPU symbols.
    #[must_use]
    pub fn percpu_len(&self) -> usize {
        self.percpu.len()
    }

    /// `__per_cpu_start..__per_cpu_end` when the kernel links its per-CPU section at 0
    /// (x86-64 SMP): offsets in this range are per-CPU variables, at `gs_base + offset` on
    /// each CPU. `None` for other layouts or when the snapshot lacks the symbols.
    #[must_use]
    pub fn percpu_range(&self) -> Option<Range<u64>> {
        self.percpu_range.clone()
    }

    /// Places the static per-CPU section at `section` (its link addresses, as a profile's
    /// header gives them: see [`crate::percpu_section`]) with the variables of `layout`
    /// (from the kernel's BTF), exact sizes included, where the snapshot lists no per-CPU
    /// area of its own. Returns whether it did: a snapshot that has one keeps it.
    pub fn place_percpu_section(&mut self, section: Range<u64>, layout: &PercpuLayout) -> bool {
        if self.percpu_range.is_some() || section.is_empty() {
            return false;
        }
        self.percpu = layout
            .variables
            .iter()
            .filter(|v| v.offset < section.end - section.start)
            .map(|v| Symbol {
                address: section.start + v.offset,
                name: v.name.clone(),
                module: None,
                kind: SymbolKind::Data,
                size: v.size,
            })
            .collect();
        self.percpu_range = Some(section);
        true
    }

    /// Index (for [`Kallsyms::symbol`]) of the code symbol `address` falls in.
    #[must_use]
    pub fn lookup_index(&self, address: u64) -> Option<usize> {
        let after = self.text.partition_point(|s| s.address <= address);
        let index = after.checked_sub(1)?;
        let symbol = self.text.get(index)?;
        let offset = address - symbol.address;
        if after == self.text.len() && offset > MAX_LAST_SYMBOL_SIZE {
            return None;
        }
        Some(index)
    }

    /// The code symbol at `index` (from [`Kallsyms::lookup_index`]).
    #[must_use]
    pub fn symbol(&self, index: usize) -> Option<&Symbol> {
        self.text.get(index)
    }

    /// The code symbol `address` falls in: the last one starting at or below it. Addresses
    /// below the first symbol, or far past the last, have none.
    #[must_use]
    pub fn lookup(&self, address: u64) -> Option<Location<'_>> {
        let symbol = self.text.get(self.lookup_index(address)?)?;
        Some(Location {
            symbol,
            offset: address - symbol.address,
        })
    }

    /// The data symbol (global, static, read-only or bss variable; not per-CPU) `address`
    /// falls in, within its estimated size.
    #[must_use]
    pub fn lookup_data(&self, address: u64) -> Option<DataLocation<'_>> {
        within(&self.data, address).map(|(symbol, offset)| DataLocation {
            symbol,
            offset,
            percpu: false,
        })
    }

    /// The per-CPU variable at `offset` in the per-CPU area (`addr - gs_base` for an address
    /// in a CPU's area), within its estimated size.
    #[must_use]
    pub fn lookup_percpu(&self, offset: u64) -> Option<DataLocation<'_>> {
        within(&self.percpu, offset).map(|(symbol, offset)| DataLocation {
            symbol,
            offset,
            percpu: true,
        })
    }

    /// Data symbols, sorted by address.
    #[must_use]
    pub fn data_symbols(&self) -> &[Symbol] {
        &self.data
    }

    /// Per-CPU symbols, sorted by offset.
    #[must_use]
    pub fn percpu_symbols(&self) -> &[Symbol] {
        &self.percpu
    }

    /// Code symbols, sorted by address.
    #[must_use]
    pub fn text_symbols(&self) -> &[Symbol] {
        &self.text
    }
}

/// Whether the function `name`, without its compiler suffix (`lock_acquire.part.0`), starts
/// with one of `prefixes`.
#[must_use]
pub fn function_has_prefix(name: &str, prefixes: &[&str]) -> bool {
    let base = name.split('.').next().unwrap_or(name);
    prefixes.iter().any(|p| base.starts_with(p))
}

/// Sorted, disjoint address ranges of code: the functions some rule picked out, e.g. the
/// kernel's debugging code or the profiler's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeRanges(Vec<Range<u64>>);

impl CodeRanges {
    /// The ranges of the functions among `text` (code symbols sorted by address, sizes set)
    /// that `pick` keeps; touching or overlapping ones become one.
    #[must_use]
    pub fn of_functions(text: &[Symbol], mut pick: impl FnMut(&Symbol) -> bool) -> Self {
        let mut ranges = Self::default();
        for s in text.iter().filter(|s| s.size != 0 && pick(s)) {
            ranges.insert(s.address..s.address.saturating_add(s.size));
        }
        ranges
    }

    /// Adds `range`, merged with the ranges it touches.
    pub fn insert(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let first = self.0.partition_point(|r| r.end < range.start);
        let last = self.0.partition_point(|r| r.start <= range.end);
        let merged = match self.0.get(first..last) {
            Some(touched) if !touched.is_empty() => {
                touched[0].start.min(range.start)..touched[touched.len() - 1].end.max(range.end)
            }
            _ => range,
        };
        self.0.splice(first..last, [merged]);
    }

    /// Whether no code is in the ranges.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ranges, sorted and disjoint (touching ones merged).
    #[must_use]
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.0
    }

    /// Whether `ip` is in one of the ranges.
    #[inline]
    #[must_use]
    pub fn contains(&self, ip: u64) -> bool {
        let after = self.0.partition_point(|r| r.start <= ip);
        after
            .checked_sub(1)
            .and_then(|i| self.0.get(i))
            .is_some_and(|r| ip < r.end)
    }
}

/// The symbol of `symbols` (sorted) whose `[address, address + size)` holds `address`.
fn within(symbols: &[Symbol], address: u64) -> Option<(&Symbol, u64)> {
    let after = symbols.partition_point(|s| s.address <= address);
    let symbol = symbols.get(after.checked_sub(1)?)?;
    let offset = address - symbol.address;
    (offset < symbol.size).then_some((symbol, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_ranges_merge_what_they_touch_and_keep_the_rest_apart() {
        let mut r = CodeRanges::default();
        assert!(r.is_empty());
        r.insert(0x300..0x400);
        r.insert(0x100..0x200);
        r.insert(0x500..0x500);
        assert!(!r.contains(0x0ff) && r.contains(0x100) && !r.contains(0x200));
        assert!(!r.contains(0x250) && r.contains(0x3ff) && !r.contains(0x400));
        // Touching both: one range from 0x100 to 0x400.
        r.insert(0x200..0x300);
        assert_eq!(r.0.len(), 1);
        assert_eq!(r.0[0], 0x100..0x400);
        r.insert(0x380..0x480);
        r.insert(0x050..0x060);
        assert_eq!(r.0, [0x050..0x060, 0x100..0x480]);
    }

    const TEXT: &[u8] = b"\
ffffffff81000000 T _stext
ffffffff81000100 D some_data
ffffffff81200000 t helper
ffffffff81100000 T main_func
garbage line
0000000000000000 T hidden
ffffffffc0000000 t mod_func\t[mymod]
";

    fn names(symbols: &[Symbol]) -> Vec<&str> {
        symbols.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn parses_code_symbols_sorted() {
        let syms = Kallsyms::parse(TEXT);
        assert_eq!(
            names(&syms.text),
            ["_stext", "main_func", "helper", "mod_func"]
        );
        assert_eq!(names(&syms.data), ["some_data"]);
    }

    #[test]
    fn lookup_gives_function_and_offset() {
        let syms = Kallsyms::parse(TEXT);
        let at = |a| syms.lookup(a).map(|l| l.to_string());
        assert_eq!(at(0xffff_ffff_8110_0042).as_deref(), Some("main_func+0x42"));
        assert_eq!(at(0xffff_ffff_8100_0000).as_deref(), Some("_stext+0x0"));
        assert_eq!(
            at(0xffff_ffff_811f_ffff).as_deref(),
            Some("main_func+0xfffff")
        );
        assert_eq!(
            at(0xffff_ffff_c000_0010).as_deref(),
            Some("mod_func+0x10 [mymod]")
        );
        assert_eq!(at(0xffff_ffff_80ff_ffff), None, "below the first symbol");
        assert_eq!(at(0xffff_ffff_c100_0000), None, "far past the last symbol");
    }

    #[test]
    fn non_root_snapshot_symbolizes_nothing() {
        let syms = Kallsyms::parse(
            b"0000000000000000 T _stext\n0000000000000000 T foo\n\
              0000000000000000 D __per_cpu_start\n0000000000000000 D __per_cpu_end\n",
        );
        assert!(syms.is_empty());
        assert!(syms.lookup(0x10).is_none());
        assert_eq!(syms.percpu_range(), None);
        assert!(syms.lookup_percpu(0).is_none());
    }

    /// The shape of a real x86-64 6.12 snapshot: per-CPU symbols from 0 (some at 0 itself),
    /// text, read-only data, data, bss, and a module.
    const REAL: &[u8] = b"\
0000000000000000 D __per_cpu_start
0000000000000000 D fixed_percpu_data
0000000000001000 D cpu_debug_store
0000000000028580 D pcpu_hot
0000000000029400 D runqueues
000000000002a718 D __per_cpu_end
ffffffff81000000 T _stext
ffffffff81000010 t helper
ffffffff81800000 D __start_rodata
ffffffff8187fdf0 R linux_banner
ffffffff8187ff00 r some_table
ffffffff82000000 D init_task
ffffffff82003000 d jiffies_lock
ffffffff82100000 B jiffies_64
ffffffff82100008 B jiffies
ffffffff82100010 b last_bss
ffffffffc0100000 t mod_func\t[mymod]
ffffffffc0102000 d mod_data\t[mymod]
ffffffffc0102040 b mod_bss\t[mymod]
";

    #[test]
    fn a_percpu_section_from_btf_names_variables_where_kallsyms_lists_none() {
        use crate::percpu_section::{PercpuLayout, PercpuVariable};
        const START: u64 = 0xffff_ffff_83af_9000;
        let layout = PercpuLayout {
            bytes: 0x2000,
            variables: [("cpu_number", 0x30, 4), ("runqueues", 0x1000, 0xc00)]
                .map(|(name, offset, size)| PercpuVariable {
                    name: name.to_owned(),
                    offset,
                    size,
                })
                .to_vec(),
        };
        // A kernel without CONFIG_KALLSYMS_ALL: code and section bounds only.
        let mut syms =
            Kallsyms::parse(b"ffffffff81000000 T _stext\nffffffff82400000 D __start_rodata\n");
        assert_eq!(syms.percpu_range(), None);
        assert!(syms.place_percpu_section(START..START + 0x2000, &layout));
        assert_eq!(syms.percpu_range(), Some(START..START + 0x2000));
        let at = |a| {
            syms.lookup_percpu(a)
                .map(|l| (l.symbol.name.clone(), l.offset, l.percpu))
        };
        assert_eq!(at(START + 0x30), Some(("cpu_number".to_owned(), 0, true)));
        assert_eq!(
            at(START + 0x1140),
            Some(("runqueues".to_owned(), 0x140, true))
        );
        // BTF's exact sizes: past cpu_number's 4 bytes is no variable, not more of it.
        assert_eq!(at(START + 0x34), None);
        assert_eq!(at(START + 0x1c00), None);
        // A snapshot that has its own per-CPU area keeps it.
        let mut zero_based = Kallsyms::parse(REAL);
        let own = zero_based.percpu_range();
        assert!(own.is_some());
        assert!(!zero_based.place_percpu_section(START..START + 0x2000, &layout));
        assert_eq!(zero_based.percpu_range(), own);
    }

    #[test]
    fn section_bounds_are_not_variables() {
        // What a kernel without CONFIG_KALLSYMS_ALL lists: code, and the linker's bounds.
        let syms = Kallsyms::parse(
            b"ffffffff81000000 T _stext\n\
              ffffffff82400000 D __start_rodata\n\
              ffffffff82860120 D __start_ro_after_init\n\
              ffffffff82860200 D jiffies\n\
              ffffffff8396f9b0 D __start_early_lsm_info\n",
        );
        assert_eq!(names(syms.data_symbols()), ["jiffies"]);
        assert!(syms.lookup_data(0xffff_ffff_8240_0010).is_none());
        let jiffies = syms
            .lookup_data(0xffff_ffff_8286_0208)
            .expect("inside jiffies");
        assert_eq!(jiffies.symbol.name, "jiffies");
        // The next bound still ends jiffies.
        assert!(syms.lookup_data(0xffff_ffff_8396_f9b8).is_none());
    }

    #[test]
    fn data_symbols_with_estimated_sizes() {
        let syms = Kallsyms::parse(REAL);
        let at = |a| {
            syms.lookup_data(a)
                .map(|l| (l.symbol.name.as_str(), l.offset, l.symbol.size, l.percpu))
        };
        assert_eq!(
            at(0xffff_ffff_8200_0010),
            Some(("init_task", 0x10, 0x3000, false))
        );
        assert_eq!(at(0xffff_ffff_8210_0008), Some(("jiffies", 0, 8, false)));
        assert_eq!(
            at(0xffff_ffff_8187_fdf4),
            Some(("linux_banner", 4, 0x110, false))
        );
        assert_eq!(
            at(0xffff_ffff_c010_2048),
            None,
            "the last symbol has no size estimate"
        );
        let m = syms
            .lookup_data(0xffff_ffff_c010_2010)
            .expect("module data");
        assert_eq!(m.to_string(), "mod_data+0x10 [mymod]");
        assert_eq!(m.symbol.kind, SymbolKind::Data);
        assert_eq!(at(0xffff_ffff_8100_0020), None, "code is not data");
        // Text lookups ignore data symbols.
        assert_eq!(
            syms.lookup(0xffff_ffff_8100_0020).map(|l| l.to_string()),
            Some("helper+0x10".to_owned())
        );
    }

    #[test]
    fn percpu_symbols_are_offsets_from_zero() {
        let syms = Kallsyms::parse(REAL);
        assert_eq!(syms.percpu_range(), Some(0..0x2a718));
        assert_eq!(
            names(syms.percpu_symbols()),
            [
                "fixed_percpu_data",
                "cpu_debug_store",
                "pcpu_hot",
                "runqueues"
            ]
        );
        let gs_base = 0xffff_8880_7fc0_0000_u64;
        let addr = gs_base + 0x29400 + 0x18;
        let l = syms.lookup_percpu(addr - gs_base).expect("per-CPU");
        assert_eq!(
            (l.symbol.name.as_str(), l.offset, l.symbol.size, l.percpu),
            ("runqueues", 0x18, 0x2a718 - 0x29400, true)
        );
        assert_eq!(l.to_string(), "runqueues+0x18 (per-CPU)");
        assert_eq!(
            syms.lookup_percpu(0x10).map(|l| l.symbol.name.as_str()),
            Some("fixed_percpu_data")
        );
        assert!(syms.lookup_percpu(0x2a718).is_none(), "past __per_cpu_end");
        // Per-CPU offsets are not data addresses.
        assert!(syms.lookup_data(0x29400).is_none());
    }
}
