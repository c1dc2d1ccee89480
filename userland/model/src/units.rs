//! Numbers as people read and write them, shared by the command's text and arguments, the
//! terminal browser and the profile header (sysfs writes cache sizes the way people do).

use std::time::Duration;

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

/// Parses "4M", "4MiB", "64K", "1G" or a plain byte count (binary units).
///
/// # Errors
/// A sentence for the user when `s` is not a size or does not fit in 64 bits.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size: use a number with K, M or G, e.g. 4M"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return Err(format!("{s:?} has an unknown unit: use K, M or G, e.g. 4M")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// Parses "10s", "500ms", "1.5s", "2m", "1h" or a plain number of seconds.
///
/// # Errors
/// A sentence for the user when `s` is not a duration, is zero or is out of range.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration: use e.g. 10s, 500ms, 2m"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{s:?} has an unknown unit: use ms, s, m or h")),
    };
    let d = Duration::try_from_secs_f64(n * scale).map_err(|_| format!("{s:?} is out of range"))?;
    if d.is_zero() {
        return Err(format!("{s:?} is zero"));
    }
    Ok(d)
}

/// Seconds with nanosecond precision: "1.500000000 s".
#[must_use]
pub fn format_ns(ns: u64) -> String {
    format!("{}.{:09} s", ns / 1_000_000_000, ns % 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn bytes_take_the_largest_unit_reached() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(4 << 20), "4 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(3 << 40), "3 TiB");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("M").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m").map(|d| d.as_secs()), Ok(120));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5y").is_err());
    }

    #[test]
    fn byte_display() {
        assert_eq!(format_bytes(4 << 20), "4 MiB");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(2_205_696), "2.1 MiB");
        assert_eq!(format_bytes(u64::MAX), "16777216.0 TiB");
        assert_eq!(format_ns(1_500_000_000), "1.500000000 s");
    }
}
