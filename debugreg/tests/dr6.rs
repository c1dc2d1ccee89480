//! DR6 decoding: polarity flip, reserved bits, active-low RTM and BLD, and a cross-check
//! against Linux 6.12's `debug_read_reset_dr6` (`arch/x86/kernel/traps.c`) and
//! `hw_breakpoint_handler` (`arch/x86/kernel/hw_breakpoint.c`).

use dprof_debugreg::{Condition, Dr6, Dr7, Length, Slot, SlotSet};

/// `DR6_RESERVED` from `arch/x86/include/uapi/asm/debugreg.h`.
const DR6_RESERVED: u64 = 0xFFFF_0FF0;
/// `DR6_VOLATILE` from `arch/x86/include/asm/kvm_host.h`.
const DR6_VOLATILE: u64 = 0x0001_e80f;

/// `debug_read_reset_dr6`'s transformation: `dr6 ^= DR6_RESERVED`.
fn kernel_positive(raw: u64) -> u64 {
    raw ^ DR6_RESERVED
}

/// The slots `hw_breakpoint_handler` visits: `dr6 & (DR_TRAP0 << i)` for i in `0..HBP_NUM`.
fn kernel_trapped(dr6: u64) -> Vec<u8> {
    (0..4u8).filter(|i| dr6 & (1 << i) != 0).collect()
}

#[test]
fn reset_value_is_empty() {
    // 0xFFFF0FF0: bits 4..11 and 16..31 read as 1, everything else 0.
    let d = Dr6::from_raw(0xFFFF_0FF0);
    assert_eq!(d, Dr6::EMPTY);
    assert_eq!(d.bits(), 0);
    assert!(d.triggered_slots().is_empty());
    assert!(!d.bd() && !d.bs() && !d.bt() && !d.rtm() && !d.bus_lock());
    assert_eq!(d.unknown_bits(), 0);
    assert_eq!(d.to_raw(), Dr6::RESET_RAW);
}

#[test]
fn single_breakpoint_hits() {
    // B0 = bit 0: 0xFFFF0FF0 | 0x1 = 0xFFFF0FF1.
    let d = Dr6::from_raw(0xFFFF_0FF1);
    assert_eq!(d.bits(), 0x1);
    assert_eq!(d.triggered_slots(), SlotSet::EMPTY.with(Slot::DR0));
    assert!(d.triggered(Slot::DR0));
    assert!(!d.triggered(Slot::DR1));
    // B3 = bit 3: 0xFFFF0FF8.
    let d = Dr6::from_raw(0xFFFF_0FF8);
    assert_eq!(
        d.triggered_slots().iter().collect::<Vec<_>>(),
        vec![Slot::DR3]
    );
}

#[test]
fn several_breakpoints_hit() {
    // B1 | B3 = 0b1010 = 0xA: raw 0xFFFF0FFA.
    let d = Dr6::from_raw(0xFFFF_0FFA);
    assert_eq!(d.triggered_slots().bits(), 0b1010);
    assert_eq!(d.triggered_slots().len(), 2);
    assert_eq!(
        d.triggered_slots().into_iter().collect::<Vec<_>>(),
        vec![Slot::DR1, Slot::DR3]
    );
}

#[test]
fn bd_bs_bt() {
    // BD = bit 13 (0x2000): raw 0xFFFF2FF0.
    let d = Dr6::from_raw(0xFFFF_2FF0);
    assert!(d.bd() && !d.bs() && !d.bt());
    assert_eq!(d.bits(), 0x2000);
    // BS = bit 14 (0x4000): raw 0xFFFF4FF0, with B2 as a data breakpoint merged in: 0xFFFF4FF4.
    let d = Dr6::from_raw(0xFFFF_4FF4);
    assert!(d.bs() && !d.bd() && !d.bt());
    assert_eq!(d.triggered_slots(), SlotSet::EMPTY.with(Slot::DR2));
    assert_eq!(d.bits(), 0x4004);
    // BT = bit 15 (0x8000): raw 0xFFFF8FF0.
    let d = Dr6::from_raw(0xFFFF_8FF0);
    assert!(d.bt() && !d.bd() && !d.bs());
}

#[test]
fn rtm_is_active_low() {
    // #DB inside a transaction clears bit 16: 0xFFFF0FF0 & !0x10000 = 0xFFFE0FF0; with B2,
    // 0xFFFE0FF4. Positive polarity: RTM (0x10000) | B2 (0x4) = 0x10004.
    let d = Dr6::from_raw(0xFFFE_0FF4);
    assert!(d.rtm());
    assert_eq!(d.bits(), 0x1_0004);
    assert_eq!(d.to_raw(), 0xFFFE_0FF4);
    // Outside a transaction (or on a CPU without RTM) the bit reads 1: not RTM.
    assert!(!Dr6::from_raw(0xFFFF_0FF4).rtm());
}

#[test]
fn bus_lock_is_active_low() {
    // Bus lock clears bit 11: 0xFFFF0FF0 & !0x800 = 0xFFFF07F0.
    let d = Dr6::from_raw(0xFFFF_07F0);
    assert!(d.bus_lock());
    assert_eq!(d.bits(), 0x800);
    assert!(d.triggered_slots().is_empty());
}

#[test]
fn unexpected_reserved_bits_are_reported_not_misread() {
    // A reserved bit (7) reading 0 instead of 1: raw 0xFFFF0F70.
    let d = Dr6::from_raw(0xFFFF_0F70);
    assert_eq!(d.unknown_bits(), 0x80);
    assert!(d.triggered_slots().is_empty());
    assert!(!d.bd() && !d.bs() && !d.bt() && !d.rtm() && !d.bus_lock());
    // Bit 12 is reserved and reads 0; if it read 1 it would show up as unknown.
    assert_eq!(Dr6::from_raw(0xFFFF_1FF0).unknown_bits(), 0x1000);
    // Bits 63..32 read 0.
    assert_eq!(Dr6::from_raw(0x1_FFFF_0FF0).unknown_bits(), 1 << 32);
}

#[test]
fn defined_bits_match_kvm() {
    assert_eq!(Dr6::DEFINED, DR6_VOLATILE);
    assert_eq!(Dr6::RESET_RAW, DR6_RESERVED);
    assert_eq!(Dr6::TRAP_BITS, 0xF);
    assert_eq!(Dr6::BUS_LOCK, 0x800); // DR_BUS_LOCK
    assert_eq!(Dr6::BS, 0x4000); // DR_STEP
    assert_eq!(Dr6::BT, 0x8000); // DR_SWITCH
    assert_eq!(Dr6::BD, 1 << 13);
    assert_eq!(Dr6::RTM, 1 << 16);
}

#[test]
fn matches_kernel_for_every_volatile_pattern() {
    // Every combination of the defined bits, as the CPU would report them (active-low bits
    // and reserved-1 bits included via the XOR).
    for pattern in 0..(1u32 << 9) {
        let mut positive = u64::from(pattern & 0xF);
        for (k, bit) in [11u32, 13, 14, 15, 16].into_iter().enumerate() {
            if pattern & (1 << (4 + k)) != 0 {
                positive |= 1 << bit;
            }
        }
        let raw = positive ^ DR6_RESERVED;
        let d = Dr6::from_raw(raw);
        assert_eq!(d.bits(), kernel_positive(raw));
        assert_eq!(d.bits(), positive);
        assert_eq!(Dr6::from_bits(positive), d);
        assert_eq!(d.to_raw(), raw);
        assert_eq!(d.unknown_bits(), 0);
        let ours: Vec<u8> = d.triggered_slots().iter().map(Slot::get).collect();
        assert_eq!(ours, kernel_trapped(d.bits()));
        assert_eq!(d.bd(), positive & (1 << 13) != 0);
        assert_eq!(d.bs(), positive & (1 << 14) != 0);
        assert_eq!(d.bt(), positive & (1 << 15) != 0);
        assert_eq!(d.rtm(), positive & (1 << 16) != 0);
        assert_eq!(d.bus_lock(), positive & (1 << 11) != 0);
    }
}

#[test]
fn triggered_enabled_filters_disabled_slots() {
    // The SDM allows B0..B3 for slots not enabled in DR7.
    let dr7 = Dr7::new()
        .set(Slot::DR1, Condition::Write, Length::Eight)
        .expect("valid")
        .enable_global(Slot::DR1);
    let d = Dr6::from_raw(0xFFFF_0FF3); // B0 | B1
    assert_eq!(d.triggered_slots().bits(), 0b0011);
    assert_eq!(d.triggered_enabled(dr7), SlotSet::EMPTY.with(Slot::DR1));
}
