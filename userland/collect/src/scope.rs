//! `dprof causal --scope`: which kernel functions may be code units of causal experiments.
//!
//! A scope is a list of patterns separated by commas; a function is in scope when one of them
//! matches it:
//!
//! - `GLOB` matches functions by name (`tcp_*`, `*_sendmsg`, `ext4_da_write_begin`);
//! - `[GLOB]` matches every function of the modules whose name matches (`[ext4]`, `[nf_*]`);
//!   the core kernel's module name is `vmlinux` (`[vmlinux]`).
//!
//! In a glob `*` matches any run of characters and `?` one character; there are no character
//! classes (a `[` only opens a module pattern). An empty scope holds every function. The
//! functions of dprof's own module are never in scope: its handlers insert the delays.

use dprof_analysis::symbols::{Symbol, PROFILER_MODULE};

/// The module name of the core kernel's functions (kallsyms lists them without one).
pub const CORE_KERNEL: &str = "vmlinux";

/// One `--scope` pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScopePattern {
    /// Functions whose name matches the glob.
    Function(String),
    /// Functions of the modules whose name matches the glob.
    Module(String),
}

impl ScopePattern {
    /// Whether a function named `name` in `module` ([`CORE_KERNEL`] for the core kernel)
    /// matches.
    #[must_use]
    pub fn matches(&self, name: &str, module: &str) -> bool {
        match self {
            Self::Function(glob) => glob_matches(glob, name),
            Self::Module(glob) => glob_matches(glob, module),
        }
    }
}

impl std::fmt::Display for ScopePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Function(glob) => f.write_str(glob),
            Self::Module(glob) => write!(f, "[{glob}]"),
        }
    }
}

/// The functions experiments on code may speed up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    patterns: Vec<ScopePattern>,
}

impl Scope {
    /// A scope of these patterns (none: every function).
    #[must_use]
    pub const fn new(patterns: Vec<ScopePattern>) -> Self {
        Self { patterns }
    }

    /// Whether no pattern limits it.
    #[must_use]
    pub fn is_everything(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns as `--scope` takes them, for the profile header.
    #[must_use]
    pub fn patterns(&self) -> Vec<String> {
        self.patterns.iter().map(ToString::to_string).collect()
    }

    /// Whether the code symbol `symbol` is in scope.
    #[must_use]
    pub fn holds(&self, symbol: &Symbol) -> bool {
        let module = module_of(symbol);
        module != PROFILER_MODULE
            && (self.patterns.is_empty()
                || self
                    .patterns
                    .iter()
                    .any(|p| p.matches(&symbol.name, module)))
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.patterns().join(","))
    }
}

/// The module a code symbol belongs to: its loadable module, or [`CORE_KERNEL`].
#[must_use]
pub fn module_of(symbol: &Symbol) -> &str {
    symbol.module.as_deref().unwrap_or(CORE_KERNEL)
}

/// Parses `--scope`: patterns separated by commas (see the module's doc).
///
/// # Errors
/// A sentence saying why `s` is not a scope.
pub fn parse_scope(s: &str) -> Result<Scope, String> {
    let mut patterns = Vec::new();
    for item in s.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(
                "an empty pattern (give function globs or [module] globs separated by commas)"
                    .to_owned(),
            );
        }
        let (pattern, glob) = match item.strip_prefix('[') {
            Some(rest) => {
                let glob = rest.strip_suffix(']').ok_or_else(|| {
                    format!("`{item}`: a module pattern is [GLOB], closed by `]`")
                })?;
                (ScopePattern::Module(glob.to_owned()), glob)
            }
            None => (ScopePattern::Function(item.to_owned()), item),
        };
        if glob.is_empty() {
            return Err(format!("`{item}`: the glob is empty"));
        }
        if let Some(bad) = glob
            .chars()
            .find(|&c| matches!(c, '[' | ']') || !c.is_ascii_graphic())
        {
            return Err(format!(
                "`{item}`: `{bad}` cannot be in a glob (only `*` and `?` are special; \
                 [GLOB] names modules)"
            ));
        }
        patterns.push(pattern);
    }
    Ok(Scope::new(patterns))
}

/// Whether `text` matches `glob`, where `*` matches any run of characters and `?` one.
#[must_use]
pub fn glob_matches(glob: &str, text: &str) -> bool {
    let (glob, text): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    let (mut g, mut t) = (0, 0);
    // The last `*` seen, and the text position it has been tried up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, t));
                g += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                g += 1;
                t += 1;
            }
            _ => match star {
                // Let the last `*` take one more character, and retry from there.
                Some((star_g, star_t)) => {
                    g = star_g + 1;
                    t = star_t + 1;
                    star = Some((star_g, star_t + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, module: Option<&str>) -> Symbol {
        Symbol {
            address: 0xffff_ffff_8100_0000,
            name: name.to_owned(),
            module: module.map(str::to_owned),
            kind: dprof_analysis::symbols::SymbolKind::Text,
            size: 16,
        }
    }

    #[test]
    fn globs_match_runs_and_single_characters() {
        for (glob, text, expected) in [
            ("tcp_*", "tcp_sendmsg", true),
            ("tcp_*", "udp_sendmsg", false),
            ("*_sendmsg", "udp_sendmsg", true),
            ("*send*", "tcp_sendmsg_locked", true),
            ("tcp_?endmsg", "tcp_sendmsg", true),
            ("tcp_?endmsg", "tcp_endmsg", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("*", "", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
        ] {
            assert_eq!(glob_matches(glob, text), expected, "{glob} ~ {text}");
        }
    }

    #[test]
    fn scopes_hold_functions_by_name_or_module() {
        let scope = parse_scope("tcp_*, [ext4],[nf_*]").expect("a scope");
        assert_eq!(scope.to_string(), "tcp_*,[ext4],[nf_*]");
        assert!(scope.holds(&function("tcp_sendmsg", None)));
        assert!(scope.holds(&function("ext4_da_write_begin", Some("ext4"))));
        assert!(scope.holds(&function("nft_do_chain", Some("nf_tables"))));
        assert!(!scope.holds(&function("udp_sendmsg", None)));
        assert!(!scope.holds(&function("jbd2_journal_stop", Some("jbd2"))));
        // The core kernel is `vmlinux`.
        let core = parse_scope("[vmlinux]").expect("a scope");
        assert!(core.holds(&function("udp_sendmsg", None)));
        assert!(!core.holds(&function("ext4_da_write_begin", Some("ext4"))));
        // Everything, except the profiler's own module.
        let all = Scope::default();
        assert!(all.is_everything());
        assert!(all.holds(&function("ext4_da_write_begin", Some("ext4"))));
        assert!(!all.holds(&function("dprof_on_sample", Some(PROFILER_MODULE))));
        assert!(!parse_scope("[dprof]")
            .expect("a scope")
            .holds(&function("dprof_on_sample", Some(PROFILER_MODULE))));
    }

    #[test]
    fn bad_scopes_are_refused_with_the_reason() {
        for (bad, why) in [
            ("tcp_*,,udp_*", "an empty pattern"),
            ("[ext4", "closed by `]`"),
            ("[]", "the glob is empty"),
            ("tcp_[a-z]*", "`[` cannot be in a glob"),
            ("two words", "` ` cannot be in a glob"),
        ] {
            let err = parse_scope(bad).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
