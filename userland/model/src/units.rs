//! Numbers as people read and write them, shared by the command's text, the terminal browser
//! and the profile header (sysfs writes cache sizes the way people do).

/// "4 MiB", "1.5 KiB", "512 B": the largest unit the value reaches, one decimal unless exact.
#[must_use]
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut scale = 1u64;
    while unit + 1 < UNITS.len() && n / scale >= 1024 {
        scale *= 1024;
        unit += 1;
    }
    if n.is_multiple_of(scale) {
        format!("{} {}", n / scale, UNITS[unit])
    } else {
        #[allow(clippy::cast_precision_loss, reason = "display only")]
        let value = n as f64 / scale as f64;
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A size such as "32K", "1024K", "16M" or "512" (as sysfs writes cache sizes), in bytes.
#[must_use]
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let mult = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::format_bytes;

    #[test]
    fn bytes_take_the_largest_unit_reached() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(4 << 20), "4 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(3 << 40), "3 TiB");
    }
}
