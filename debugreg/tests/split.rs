//! The range splitter: aligned, disjoint, exact and minimal, checked exhaustively.

use dprof_debugreg::{split_range, Condition, Error, Length, Watch};

fn split(address: u64, len: u64) -> Vec<Watch> {
    split_range(address, len, Condition::Write)
        .expect("in range")
        .collect()
}

fn spans(ws: &[Watch]) -> Vec<(u64, u64)> {
    ws.iter()
        .map(|w| (w.address(), w.length().bytes()))
        .collect()
}

/// Fewest aligned 1/2/4/8-byte chunks that tile `[address, address + len)`, by dynamic
/// programming over every choice (not just the greedy one).
fn minimal_count(address: u64, len: u64) -> u64 {
    let n = usize::try_from(len).expect("small");
    let mut best = vec![u64::MAX; n + 1];
    best[n] = 0;
    for i in (0..n).rev() {
        for size in [1u64, 2, 4, 8] {
            let at = address + i as u64;
            let end = i + size as usize;
            if at.is_multiple_of(size) && end <= n && best[end] != u64::MAX {
                best[i] = best[i].min(1 + best[end]);
            }
        }
    }
    best[0]
}

#[test]
fn example_six_bytes_at_two() {
    // 2..4 as 2 bytes, 4..8 as 4 bytes.
    assert_eq!(spans(&split(2, 6)), vec![(2, 2), (4, 4)]);
}

#[test]
fn more_examples() {
    assert_eq!(spans(&split(0, 8)), vec![(0, 8)]);
    assert_eq!(spans(&split(0, 16)), vec![(0, 8), (8, 8)]);
    assert_eq!(spans(&split(1, 7)), vec![(1, 1), (2, 2), (4, 4)]);
    assert_eq!(spans(&split(3, 3)), vec![(3, 1), (4, 2)]);
    assert_eq!(spans(&split(6, 4)), vec![(6, 2), (8, 2)]);
    // 16 bytes at 1 need five watches: more than the four slots.
    let five = split(1, 16);
    assert_eq!(spans(&five), vec![(1, 1), (2, 2), (4, 4), (8, 8), (16, 1)]);
    assert_eq!(split_range(1, 16, Condition::Write).expect("ok").len(), 5);
    assert!(split(0x1000, 0).is_empty());
    for w in split(2, 6) {
        assert_eq!(w.condition(), Condition::Write);
    }
}

#[test]
fn property_offsets_and_lengths() {
    // Object bases with different alignments, so the absolute address is what matters.
    for base in [0u64, 0x1000, 0xffff_8880_0123_4560, 0x7] {
        for offset in 0..64u64 {
            for len in 1..=16u64 {
                let start = base + offset;
                let end = start + len;
                let it = split_range(start, len, Condition::ReadWrite).expect("in range");
                let predicted = it.count_remaining();
                assert_eq!(it.len() as u64, predicted);
                let ws: Vec<Watch> = it.collect();
                // Aligned, right condition.
                for w in &ws {
                    assert_eq!(w.address() % w.length().bytes(), 0);
                    assert_eq!(w.condition(), Condition::ReadWrite);
                }
                // Contiguous in ascending order from start to end: disjoint and exact cover.
                let mut cursor = start;
                for w in &ws {
                    assert_eq!(w.address(), cursor, "{start:#x}+{len}");
                    cursor += w.length().bytes();
                }
                assert_eq!(cursor, end, "{start:#x}+{len}");
                // Minimal.
                assert_eq!(
                    ws.len() as u64,
                    minimal_count(start, len),
                    "{start:#x}+{len}"
                );
                assert_eq!(ws.len() as u64, predicted);
                // Every byte of the range is covered by exactly one watch; neighbours by none.
                for b in start..end {
                    assert_eq!(ws.iter().filter(|w| w.covers(b, 1)).count(), 1);
                }
                assert!(!ws
                    .iter()
                    .any(|w| w.covers(start.wrapping_sub(1), 1) && start > 0));
                assert!(!ws.iter().any(|w| w.covers(end, 1)));
            }
        }
    }
}

#[test]
fn count_for_long_ranges() {
    for offset in 0..16u64 {
        for len in [17u64, 100, 1000, 4096, 4099] {
            let it = split_range(offset, len, Condition::Write).expect("ok");
            let predicted = it.count_remaining();
            let ws: Vec<Watch> = it.collect();
            assert_eq!(ws.len() as u64, predicted);
            assert_eq!(ws.iter().map(|w| w.length().bytes()).sum::<u64>(), len);
            if len <= 1000 {
                assert_eq!(predicted, minimal_count(offset, len));
            }
        }
    }
    // The count is computed without iterating, even for huge ranges.
    let it = split_range(1, 1 << 40, Condition::Write).expect("ok");
    // 1, 2, 4 bytes to reach 8 (7 bytes), then (2^40 - 8) / 8 eights, then the last byte.
    assert_eq!(it.count_remaining(), 3 + ((1u64 << 40) - 8) / 8 + 1);
}

#[test]
fn size_hint_tracks_progress() {
    let mut it = split_range(1, 16, Condition::Write).expect("ok");
    for left in (0..5usize).rev() {
        assert!(it.next().is_some());
        assert_eq!(it.len(), left);
    }
    assert!(it.next().is_none());
    assert!(it.next().is_none());
}

#[test]
fn execute_splits_into_single_bytes() {
    let ws: Vec<Watch> = split_range(0x1002, 6, Condition::Execute)
        .expect("ok")
        .collect();
    assert_eq!(ws.len(), 6);
    for (i, w) in ws.iter().enumerate() {
        assert_eq!(w.address(), 0x1002 + i as u64);
        assert_eq!(w.length(), Length::One);
    }
    assert_eq!(
        split_range(0, 1 << 40, Condition::Execute)
            .expect("ok")
            .count_remaining(),
        1 << 40
    );
}

#[test]
fn top_of_address_space() {
    assert_eq!(spans(&split(u64::MAX, 1)), vec![(u64::MAX, 1)]);
    assert_eq!(spans(&split(u64::MAX - 7, 8)), vec![(u64::MAX - 7, 8)]);
    assert_eq!(
        spans(&split(u64::MAX - 15, 16)),
        vec![(u64::MAX - 15, 8), (u64::MAX - 7, 8)]
    );
    assert_eq!(
        split_range(u64::MAX, 2, Condition::Write),
        Err(Error::RangeOverflow {
            address: u64::MAX,
            len: 2
        })
    );
    assert_eq!(
        split_range(8, u64::MAX, Condition::Write),
        Err(Error::RangeOverflow {
            address: 8,
            len: u64::MAX
        })
    );
    // Whole address space from 0 is exactly representable.
    let it = split_range(0, u64::MAX, Condition::Write).expect("ok");
    assert_eq!(it.count_remaining(), u64::MAX / 8 + 3);
}
