use super::*;

/// Tracing data as perf 6.1 writes it, little-endian, holding `events` (system, format text).
pub(crate) fn build(events: &[(&str, &str)]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(b"0.6\0");
    out.extend_from_slice(&[0, 8]);
    out.extend_from_slice(&4096u32.to_le_bytes());
    for (name, body) in [
        (&b"header_page\0"[..], &b"field: u64 timestamp;"[..]),
        (&b"header_event\0"[..], &b"# compressed entry header"[..]),
    ] {
        out.extend_from_slice(name);
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(body);
    }
    // One ftrace format, skipped by the reader.
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&5u64.to_le_bytes());
    out.extend_from_slice(b"ftrac");
    let mut systems: Vec<&str> = events.iter().map(|(s, _)| *s).collect();
    systems.dedup();
    out.extend_from_slice(&(systems.len() as u32).to_le_bytes());
    for system in systems {
        out.extend_from_slice(system.as_bytes());
        out.push(0);
        let texts: Vec<&str> = events
            .iter()
            .filter(|(s, _)| *s == system)
            .map(|(_, t)| *t)
            .collect();
        out.extend_from_slice(&(texts.len() as u32).to_le_bytes());
        for text in texts {
            out.extend_from_slice(&(text.len() as u64).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
    }
    // kallsyms (empty, as perf writes it now) and printk formats, not read.
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out
}

#[test]
fn every_event_format_is_found_with_its_system() {
    let data = build(&[
        ("kmem", "name: kfree\nID: 7\n"),
        ("kmem", "name: kmalloc\nID: 8\n"),
        ("sched", "name: sched_switch\nID: 9\n"),
    ]);
    let formats = event_formats(&data).expect("parses");
    let got: Vec<(&str, &str)> = formats
        .iter()
        .map(|f| (f.system.as_str(), f.text.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("kmem", "name: kfree\nID: 7\n"),
            ("kmem", "name: kmalloc\nID: 8\n"),
            ("sched", "name: sched_switch\nID: 9\n"),
        ]
    );
}

#[test]
fn cut_or_foreign_tracing_data_is_refused_with_where() {
    let data = build(&[("kmem", "name: kfree\nID: 7\n")]);
    // Every cut inside the event formats is noticed, none panics.
    let formats_start = data.len() - 8 - 18 - 8 - 4 - 5 - 4;
    for cut in [10, 20, 30, formats_start, data.len() - 12] {
        let err = event_formats(&data[..cut]).expect_err("cut");
        assert!(
            err.contains("left") || err.contains("no end") || err.contains("where perf"),
            "{cut}: {err}"
        );
    }
    assert!(event_formats(b"not tracing data")
        .expect_err("foreign")
        .contains("magic"));
    // A size beyond the section.
    let mut huge = data.clone();
    let at = huge.len() - 8 - 18 - 8;
    huge[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let err = event_formats(&huge).expect_err("huge");
    assert!(err.contains("an event format"), "{err}");
}
