//! `perf report --stdio -n -t '|' -s addr,sym,type` text: one row per instruction address
//! and data type, with its samples.

use anyhow::{bail, Context, Result};

/// What perf calls a sample it could not type.
pub const UNKNOWN: &str = "(unknown)";
/// perf's pseudo-types for stack accesses: `push`/`pop`/`call`/`ret`, and the stack
/// protector's canary (`%gs:` reads of `__stack_chk_guard`).
pub const STACK_PSEUDO_TYPES: [&str; 2] = ["(stack operation)", "(stack canary)"];

/// One row: the samples of one instruction that perf gave one data type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The instruction's address.
    pub ip: u64,
    /// perf's privilege level column said `[k]`: a kernel sample.
    pub kernel: bool,
    /// Samples.
    pub samples: u64,
    /// perf's data type (`struct sk_buff`, `long unsigned int`, `(unknown)`, ...).
    pub type_name: String,
}

/// Columns the rows need, by their header name.
const COLUMNS: [&str; 4] = ["Samples", "Address", "Symbol", "Data Type"];

/// Parses the report. The header line (`# Overhead|Samples|Address|Symbol|Data Type`) says
/// where each column is, so the order of `-s` keys does not matter; comment lines and blank
/// lines are skipped.
///
/// # Errors
/// No header naming the four columns (the report was not made with `-n -t '|' -s
/// addr,sym,type`), or a row that does not parse, named by its line number.
pub fn parse(text: &str) -> Result<Vec<Row>> {
    let mut positions: Option<[usize; 4]> = None;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if let Some(comment) = line.strip_prefix('#') {
            let names: Vec<&str> = comment.split('|').map(str::trim).collect();
            if names.contains(&"Data Type") {
                let mut found = [0; 4];
                for (slot, wanted) in found.iter_mut().zip(COLUMNS) {
                    *slot = names.iter().position(|n| *n == wanted).with_context(|| {
                        format!(
                            "line {number}: perf's header has no {wanted:?} column: make the \
                             report with `perf report --stdio -n -t '|' -s addr,sym,type`"
                        )
                    })?;
                }
                positions = Some(found);
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let Some([samples_at, address_at, symbol_at, type_at]) = positions else {
            bail!(
                "line {number}: a row before perf's column header: make the report with \
                 `perf report --stdio -n -t '|' -s addr,sym,type`"
            );
        };
        let fields: Vec<&str> = line.split('|').map(str::trim).collect();
        let field = |at: usize, what: &str| {
            fields
                .get(at)
                .copied()
                .with_context(|| format!("line {number}: no {what} column in {line:?}"))
        };
        let samples = field(samples_at, "Samples")?;
        let samples = samples
            .parse()
            .with_context(|| format!("line {number}: samples {samples:?} is not a count"))?;
        let address = field(address_at, "Address")?;
        let ip = address
            .strip_prefix("0x")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .with_context(|| format!("line {number}: address {address:?} is not 0x-hex"))?;
        let symbol = field(symbol_at, "Symbol")?;
        let type_name = field(type_at, "Data Type")?;
        if type_name.is_empty() {
            bail!("line {number}: an empty data type in {line:?}");
        }
        rows.push(Row {
            ip,
            kernel: symbol.starts_with("[k]"),
            samples,
            type_name: type_name.to_owned(),
        });
    }
    if positions.is_none() {
        bail!(
            "no column header in perf's report: make it with `perf report --stdio -n -t '|' \
             -s addr,sym,type` (is the report empty?)"
        );
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_rows_of_a_captured_report() {
        let rows = parse(include_str!("../../../testdata/accuracy/perf-report.txt"))
            .expect("the captured report parses");
        assert!(rows.len() > 10, "{} rows", rows.len());
        assert!(rows.iter().all(|r| r.kernel && r.samples > 0));
        assert_eq!(
            rows[0],
            Row {
                ip: 0xffff_ffff_8152_6b56,
                kernel: true,
                samples: 23733,
                type_name: UNKNOWN.into()
            }
        );
        // Whole names, pseudo-types included: `-w` kept perf from cutting the column.
        for name in [
            "struct mmu_gather",
            "(stack operation)",
            "(stack canary)",
            "struct pid*",
        ] {
            assert!(rows.iter().any(|r| r.type_name == name), "{name}");
        }
    }

    #[test]
    fn finds_the_columns_by_their_header_in_any_order() {
        let text = "# Data Type|Symbol|Overhead|Address|Samples\n\
                    struct sock|[k] tcp_v4_rcv|1.00%|0xffffffff81000010|3\n\
                    (unknown)|[.] main|2.00%|0x401000|5\n";
        assert_eq!(
            parse(text).expect("the report parses"),
            vec![
                Row {
                    ip: 0xffff_ffff_8100_0010,
                    kernel: true,
                    samples: 3,
                    type_name: "struct sock".into()
                },
                Row {
                    ip: 0x40_1000,
                    kernel: false,
                    samples: 5,
                    type_name: UNKNOWN.into()
                },
            ]
        );
    }

    #[test]
    fn says_how_to_make_the_report_without_a_header() {
        let e = parse("# Overhead  Samples  Symbol\n 1.0% 3 [k] f\n")
            .expect_err("a bad report is an error");
        assert!(format!("{e:#}").contains("-s addr,sym,type"), "{e:#}");
        let e = parse("").expect_err("a bad report is an error");
        assert!(format!("{e:#}").contains("no column header"), "{e:#}");
        let e =
            parse("# Overhead|Samples|Symbol|Data Type\n").expect_err("a bad report is an error");
        assert!(format!("{e:#}").contains("no \"Address\" column"), "{e:#}");
    }

    #[test]
    fn names_the_line_of_a_bad_row() {
        let header = "# Overhead|Samples|Address|Symbol|Data Type\n";
        for (row, expected) in [
            (
                " 1%|x|0xffffffff81000000|[k] f|int",
                "line 2: samples \"x\"",
            ),
            (" 1%|3|ffffffff81000000|[k] f|int", "line 2: address"),
            (" 1%|3|0xffffffff81000000", "line 2: no Symbol column"),
            (
                " 1%|3|0xffffffff81000000|[k] f|",
                "line 2: an empty data type",
            ),
        ] {
            let e = parse(&format!("{header}{row}\n")).expect_err("a bad report is an error");
            assert!(format!("{e:#}").contains(expected), "{row}: {e:#}");
        }
    }
}
