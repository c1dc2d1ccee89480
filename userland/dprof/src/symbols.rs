//! Kernel symbols from a `/proc/kallsyms` snapshot: address to `function+0xoffset`.
//!
//! Parsing takes the text as bytes (no I/O), skips lines it does not understand, and keeps
//! only code symbols (types t, T, w, W), because what needs symbolizing here are call sites.

/// Code symbols sorted by address.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    symbols: Vec<Symbol>,
}

/// One symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// Start address.
    pub address: u64,
    /// Name.
    pub name: String,
    /// Module, for symbols of loadable modules.
    pub module: Option<String>,
}

/// A symbolized address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location<'a> {
    /// The symbol the address falls in.
    pub symbol: &'a Symbol,
    /// Bytes from the symbol's start.
    pub offset: u64,
}

impl std::fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}+{:#x}", self.symbol.name, self.offset)?;
        if let Some(module) = &self.symbol.module {
            write!(f, " [{module}]")?;
        }
        Ok(())
    }
}

/// Addresses further than this past the last symbol are not attributed to it: kallsyms does
/// not say where the last function ends.
const MAX_LAST_SYMBOL_SIZE: u64 = 1 << 20;

impl Kallsyms {
    /// Parses kallsyms text. Symbols at address 0 (what non-root readers see) are dropped, so
    /// a snapshot taken without root symbolizes nothing rather than everything wrongly.
    #[must_use]
    pub fn parse(text: &[u8]) -> Self {
        let mut symbols: Vec<Symbol> = text
            .split(|&b| b == b'\n')
            .filter_map(|line| {
                let line = std::str::from_utf8(line).ok()?;
                let mut fields = line.split_whitespace();
                let address = u64::from_str_radix(fields.next()?, 16).ok()?;
                let kind = fields.next()?;
                let name = fields.next()?;
                let module = fields
                    .next()
                    .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                    .map(str::to_owned);
                (address != 0 && matches!(kind, "t" | "T" | "w" | "W")).then(|| Symbol {
                    address,
                    name: name.to_owned(),
                    module,
                })
            })
            .collect();
        symbols.sort_by_key(|s| s.address);
        Self { symbols }
    }

    /// Number of code symbols.
    #[must_use]
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The symbol `address` falls in: the last one starting at or below it. Addresses below
    /// the first symbol, or far past the last, have none.
    #[must_use]
    pub fn lookup(&self, address: u64) -> Option<Location<'_>> {
        let after = self.symbols.partition_point(|s| s.address <= address);
        let symbol = self.symbols.get(after.checked_sub(1)?)?;
        let offset = address - symbol.address;
        if after == self.symbols.len() && offset > MAX_LAST_SYMBOL_SIZE {
            return None;
        }
        Some(Location { symbol, offset })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &[u8] = b"\
ffffffff81000000 T _stext
ffffffff81000100 D some_data
ffffffff81200000 t helper
ffffffff81100000 T main_func
garbage line
0000000000000000 T hidden
ffffffffc0000000 t mod_func\t[mymod]
";

    #[test]
    fn parses_code_symbols_sorted() {
        let syms = Kallsyms::parse(TEXT);
        let names: Vec<&str> = syms.symbols.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["_stext", "main_func", "helper", "mod_func"]);
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
        let syms = Kallsyms::parse(b"0000000000000000 T _stext\n0000000000000000 T foo\n");
        assert!(syms.is_empty());
        assert!(syms.lookup(0x10).is_none());
    }
}
