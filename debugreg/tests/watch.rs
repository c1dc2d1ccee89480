//! Slots, lengths, conditions, watches and the overlap rule.

use dprof_debugreg::{covers, Condition, Error, Length, Slot, SlotSet, Watch};

#[test]
fn slots() {
    for i in 0..4u8 {
        let s = Slot::new(i).expect("valid");
        assert_eq!(s.get(), i);
        assert_eq!(s.index(), usize::from(i));
        assert_eq!(Slot::ALL[usize::from(i)], s);
    }
    for i in [4u8, 5, 7, 8, 255] {
        assert_eq!(Slot::new(i), Err(Error::BadSlot(i)));
    }
}

#[test]
fn slot_sets() {
    let s = SlotSet::EMPTY.with(Slot::DR3).with(Slot::DR0);
    assert_eq!(s.bits(), 0b1001);
    assert_eq!(s.len(), 2);
    assert_eq!(s.iter().len(), 2);
    assert_eq!(s.first(), Some(Slot::DR0));
    assert_eq!(s.complement().bits(), 0b0110);
    assert_eq!(s.complement().first(), Some(Slot::DR1));
    assert_eq!(s.without(Slot::DR0).bits(), 0b1000);
    assert!(s.contains(Slot::DR3) && !s.contains(Slot::DR1));
    assert_eq!(
        s.into_iter().collect::<Vec<_>>(),
        vec![Slot::DR0, Slot::DR3]
    );
    assert_eq!(SlotSet::from_mask(0xFF), SlotSet::ALL);
    assert_eq!(SlotSet::ALL.complement().first(), None);
    assert_eq!(SlotSet::ALL.iter().collect::<Vec<_>>(), Slot::ALL.to_vec());
}

#[test]
fn lengths() {
    for l in Length::ALL {
        assert_eq!(Length::from_bytes(l.bytes()), Ok(l));
        assert_eq!(Length::from_encoding(l.encoding()), Ok(l));
    }
    for bytes in [0u64, 3, 5, 6, 7, 9, 16, 32, u64::MAX] {
        assert_eq!(Length::from_bytes(bytes), Err(Error::BadLength(bytes)));
    }
    assert_eq!(Length::from_encoding(4), Err(Error::FieldOutOfRange(4)));
    // 8 bytes is 0b10 on x86-64, 4 bytes 0b11.
    assert_eq!(Length::Eight.encoding(), 0b10);
    assert_eq!(Length::Four.encoding(), 0b11);
}

#[test]
fn conditions() {
    for c in Condition::ALL {
        assert_eq!(Condition::from_encoding(c.encoding()), Ok(c));
    }
    assert_eq!(Condition::from_encoding(0b10), Err(Error::IoCondition));
    assert_eq!(Condition::from_encoding(7), Err(Error::FieldOutOfRange(7)));
}

#[test]
fn watch_alignment_exhaustive() {
    for address in 0..64u64 {
        for l in Length::ALL {
            for c in [Condition::Write, Condition::ReadWrite] {
                let got = Watch::new(address, l, c);
                if address % l.bytes() == 0 {
                    let w = got.expect("aligned");
                    assert_eq!((w.address(), w.length(), w.condition()), (address, l, c));
                    assert_eq!(w.last_byte(), address + l.bytes() - 1);
                } else {
                    assert_eq!(got, Err(Error::Misaligned { address, length: l }));
                }
            }
        }
    }
}

#[test]
fn watch_examples() {
    assert!(Watch::new(0xffff_8880_0000_1008, Length::Eight, Condition::Write).is_ok());
    assert_eq!(
        Watch::new(0x1004, Length::Eight, Condition::Write),
        Err(Error::Misaligned {
            address: 0x1004,
            length: Length::Eight
        })
    );
    assert_eq!(
        Watch::new(0x1001, Length::Two, Condition::ReadWrite),
        Err(Error::Misaligned {
            address: 0x1001,
            length: Length::Two
        })
    );
    assert_eq!(
        Watch::with_bytes(0x1000, 3, Condition::Write),
        Err(Error::BadLength(3))
    );
    assert_eq!(
        Watch::with_bytes(0x1000, 0, Condition::Write),
        Err(Error::BadLength(0))
    );
    assert_eq!(
        Watch::with_bytes(0x1000, 4, Condition::Write),
        Watch::new(0x1000, Length::Four, Condition::Write)
    );
    // Top of the address space: no overflow in last_byte.
    let top = Watch::new(u64::MAX - 7, Length::Eight, Condition::Write).expect("aligned");
    assert_eq!(top.last_byte(), u64::MAX);
}

#[test]
fn execute_must_be_one_byte() {
    assert!(Watch::new(0x1003, Length::One, Condition::Execute).is_ok());
    for l in [Length::Two, Length::Four, Length::Eight] {
        // Rejected even when aligned: the length, not the alignment, is the problem.
        assert_eq!(
            Watch::new(0x1000, l, Condition::Execute),
            Err(Error::ExecuteLength(l))
        );
    }
    // perf's bp_len for execute breakpoints is sizeof(long) = 8, but DR7 uses LEN = 00.
    assert_eq!(
        Watch::with_bytes(0x1000, 8, Condition::Execute),
        Err(Error::ExecuteLength(Length::Eight))
    );
}

#[test]
fn covers_examples() {
    // Watched bytes 0x1000..=0x1003.
    let w = Watch::new(0x1000, Length::Four, Condition::Write).expect("aligned");
    assert!(!w.covers(0x0FFF, 1)); // ends just before
    assert!(w.covers(0x0FFF, 2)); // straddles the start
    assert!(w.covers(0x1000, 1));
    assert!(w.covers(0x1003, 1)); // last watched byte
    assert!(w.covers(0x1003, 8)); // starts on the last byte
    assert!(!w.covers(0x1004, 1)); // just after
    assert!(!w.covers(0x0FF8, 8)); // 0xFF8..=0xFFF
    assert!(w.covers(0x0FF9, 8)); // 0xFF9..=0x1000
    assert!(w.covers(0x0F00, 0x1000)); // contains the watch
    assert!(!w.covers(0x1000, 0)); // zero-size access touches nothing
    assert!(covers(w, 0x1002, 2));
    // Read-only accesses still overlap by address; the condition is not covers' concern.
    let top = Watch::new(u64::MAX - 7, Length::Eight, Condition::ReadWrite).expect("aligned");
    assert!(top.covers(u64::MAX, 16)); // clamped at 2^64, no overflow
    assert!(top.covers(u64::MAX - 8, 2));
    assert!(!top.covers(u64::MAX - 8, 1));
}

#[test]
fn covers_matches_byte_sets() {
    // Brute force: a data watch covers an access iff their byte sets intersect.
    for l in Length::ALL {
        let w = Watch::new(32, l, Condition::ReadWrite).expect("aligned");
        let watched: Vec<u64> = (32..32 + l.bytes()).collect();
        for address in 0..64u64 {
            for size in 0..=16u64 {
                let hit = (address..address + size).any(|b| watched.contains(&b));
                assert_eq!(w.covers(address, size), hit, "{l:?} {address} {size}");
            }
        }
    }
}

#[test]
fn execute_covers_only_instruction_start() {
    let w = Watch::new(0x1004, Length::One, Condition::Execute).expect("valid");
    assert!(w.covers(0x1004, 3)); // instruction starts on the watched byte
    assert!(!w.covers(0x1002, 5)); // spans it but starts before: no trigger
    assert!(!w.covers(0x1005, 1));
    assert!(!w.covers(0x1004, 0));
}

#[test]
fn error_display() {
    let cases = [
        (Error::BadSlot(4), "slot 4"),
        (Error::BadLength(3), "length 3"),
        (
            Error::Misaligned {
                address: 0x1001,
                length: Length::Two,
            },
            "0x1001",
        ),
        (Error::ExecuteLength(Length::Eight), "not 8"),
        (Error::IoCondition, "I/O"),
        (Error::FieldOutOfRange(5), "0x5"),
        (Error::ReservedDr7Bits(1 << 32), "0x100000000"),
        (
            Error::InvalidDr7Slot {
                slot: Slot::DR2,
                rw: 0b10,
                len: 0,
            },
            "R/W=0b10",
        ),
        (
            Error::RangeOverflow {
                address: u64::MAX,
                len: 2,
            },
            "overflows",
        ),
    ];
    for (e, needle) in cases {
        let text = e.to_string();
        assert!(text.contains(needle), "{text:?} lacks {needle:?}");
    }
    // Usable as a std error.
    let boxed: Box<dyn std::error::Error> = Box::new(Error::IoCondition);
    assert!(!boxed.to_string().is_empty());
}
