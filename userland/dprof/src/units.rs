//! Numbers as people read them, shared by the command's text and the terminal browser.

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
