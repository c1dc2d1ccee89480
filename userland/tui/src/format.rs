//! Numbers as the views print them (the same forms as `dprof report`'s text).

/// `n` of `total` as a percentage with one decimal, `-` when `total` is 0.
pub(crate) fn percent(n: u64, total: u64) -> String {
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", n as f64 * 100.0 / total as f64)
    }
}

/// Bytes in binary units: `512 B`, `4 KiB`, `1.5 MiB`.
pub(crate) fn bytes(n: u64) -> String {
    dprof_model::units::format_bytes(n)
}

/// An optional count, `-` when absent.
pub(crate) fn count(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// A count with thousands separators: `1,234,567`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte offset as `+0x70`.
pub(crate) fn offset(o: u64) -> String {
    format!("+{o:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_the_text_report() {
        assert_eq!(percent(1, 3), "33.3%");
        assert_eq!(percent(1, 0), "-");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(4096), "4 KiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(1234), "1,234");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(offset(0x70), "+0x70");
        assert_eq!(count(None), "-");
    }
}
