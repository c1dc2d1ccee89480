//! DR7 encoding and decoding: hand-computed values from the SDM layout, round trips, and a
//! cross-check against the Linux 6.12 formulas.

use dprof_debugreg::{encode_dr7, Condition, Dr7, Error, Length, Slot, SlotSet, SlotState, Watch};

/// Every valid (condition, length) pair: execute only with length one.
fn valid_fields() -> Vec<(Condition, Length)> {
    let mut v = vec![(Condition::Execute, Length::One)];
    for c in [Condition::Write, Condition::ReadWrite] {
        for l in Length::ALL {
            v.push((c, l));
        }
    }
    v
}

fn set(dr7: Dr7, slot: Slot, c: Condition, l: Length) -> Dr7 {
    dr7.set(slot, c, l).expect("valid field")
}

// --- Hand-computed values -------------------------------------------------------------------
//
// SDM layout: Ln = bit 2n, Gn = bit 2n+1, LE = 8, GE = 9, bit 10 reads 1, R/Wn = bits
// 16+4n..17+4n, LENn = bits 18+4n..19+4n. R/W: X=00 W=01 RW=11. LEN: 1=00 2=01 8=10 4=11.

#[test]
fn slot0_write_len4_local() {
    // R/W0 = 01 << 16 = 0x0001_0000
    // LEN0 = 11 << 18 = 0x000C_0000
    // L0   = 1 << 0   = 0x0000_0001
    // sum             = 0x000D_0001
    let d = set(Dr7::new(), Slot::DR0, Condition::Write, Length::Four).enable_local(Slot::DR0);
    assert_eq!(d.bits(), 0x000D_0001);
}

#[test]
fn slot1_readwrite_len8_global() {
    // R/W1 = 11 << 20 = 0x0030_0000
    // LEN1 = 10 << 22 = 0x0080_0000
    // G1   = 1 << 3   = 0x0000_0008
    // sum             = 0x00B0_0008
    let d =
        set(Dr7::new(), Slot::DR1, Condition::ReadWrite, Length::Eight).enable_global(Slot::DR1);
    assert_eq!(d.bits(), 0x00B0_0008);
}

#[test]
fn slot2_write_len2_kernel_style() {
    // R/W2 = 01 << 24 = 0x0100_0000
    // LEN2 = 01 << 26 = 0x0400_0000
    // G2   = 1 << 5   = 0x0000_0020
    // GE   = 1 << 9   = 0x0000_0200   (encode_dr7 ORs in DR_GLOBAL_SLOWDOWN)
    // sum             = 0x0500_0220
    let w = Watch::new(0x1002, Length::Two, Condition::Write).expect("aligned");
    assert_eq!(Dr7::new().install(Slot::DR2, w).bits(), 0x0500_0220);
    assert_eq!(
        encode_dr7(Slot::DR2, Condition::Write, Length::Two),
        Ok(0x0500_0220)
    );
}

#[test]
fn slot3_execute_local() {
    // R/W3 = 00, LEN3 = 00: the field is zero; L3 = 1 << 6 = 0x40.
    let d = set(Dr7::new(), Slot::DR3, Condition::Execute, Length::One).enable_local(Slot::DR3);
    assert_eq!(d.bits(), 0x0000_0040);
}

#[test]
fn slot3_readwrite_len4_global() {
    // R/W3 = 11 << 28 = 0x3000_0000
    // LEN3 = 11 << 30 = 0xC000_0000
    // G3   = 1 << 7   = 0x0000_0080
    // sum             = 0xF000_0080
    let d = set(Dr7::new(), Slot::DR3, Condition::ReadWrite, Length::Four).enable_global(Slot::DR3);
    assert_eq!(d.bits(), 0xF000_0080);
}

#[test]
fn four_kernel_breakpoints() {
    // slot0 W/8:  field 10_01 = 0x9 << 16 = 0x0009_0000
    // slot1 RW/4: field 11_11 = 0xF << 20 = 0x00F0_0000
    // slot2 W/1:  field 00_01 = 0x1 << 24 = 0x0100_0000
    // slot3 X/1:  field 00_00            = 0
    // G0..G3 = 0x2|0x8|0x20|0x80 = 0xAA; GE = 0x200
    // sum = 0x01F9_02AA; with bit 10 as read back from the CPU: 0x01F9_06AA
    let mut d = Dr7::new();
    for (slot, c, l) in [
        (Slot::DR0, Condition::Write, Length::Eight),
        (Slot::DR1, Condition::ReadWrite, Length::Four),
        (Slot::DR2, Condition::Write, Length::One),
        (Slot::DR3, Condition::Execute, Length::One),
    ] {
        d = d.install(slot, Watch::new(0x4000, l, c).expect("aligned"));
    }
    assert_eq!(d.bits(), 0x01F9_02AA);
    assert_eq!(d.set_fixed_bit(true).bits(), 0x01F9_06AA);
    assert_eq!(d.enabled_slots(), SlotSet::ALL);

    let read = Dr7::from_bits(0x01F9_06AA).expect("valid");
    assert!(read.fixed_bit());
    assert!(read.global_exact());
    assert!(!read.local_exact());
    assert_eq!(
        read.get(Slot::DR0),
        Some(SlotState {
            condition: Condition::Write,
            length: Length::Eight,
            local: false,
            global: true
        })
    );
    assert_eq!(
        read.get(Slot::DR1),
        Some(SlotState {
            condition: Condition::ReadWrite,
            length: Length::Four,
            local: false,
            global: true
        })
    );
    assert_eq!(
        read.get(Slot::DR2),
        Some(SlotState {
            condition: Condition::Write,
            length: Length::One,
            local: false,
            global: true
        })
    );
    assert_eq!(
        read.get(Slot::DR3),
        Some(SlotState {
            condition: Condition::Execute,
            length: Length::One,
            local: false,
            global: true
        })
    );
}

#[test]
fn exact_bits() {
    assert_eq!(Dr7::new().set_local_exact(true).bits(), 0x100);
    assert_eq!(Dr7::new().set_global_exact(true).bits(), 0x200);
    assert_eq!(
        Dr7::new().set_global_exact(true).set_global_exact(false),
        Dr7::EMPTY
    );
    let d = Dr7::from_bits(0x300).expect("valid");
    assert!(d.local_exact() && d.global_exact());
}

#[test]
fn reset_value_decodes_empty() {
    // What an idle CPU reports, and what hw_breakpoint_disable() writes (DR7_FIXED_1).
    let d = Dr7::from_bits(0x400).expect("valid");
    assert_eq!(d, Dr7::RESET);
    assert!(d.enabled_slots().is_empty());
    for s in Slot::ALL {
        assert_eq!(d.get(s), None);
    }
    // Bit 10 is preserved, not forced.
    assert_eq!(
        Dr7::from_bits(0x000D_0401).expect("valid").bits(),
        0x000D_0401
    );
    assert_eq!(
        Dr7::from_bits(0x000D_0001).expect("valid").bits(),
        0x000D_0001
    );
}

#[test]
fn gd_and_rtm_bits_are_accepted() {
    let d = Dr7::from_bits(Dr7::GENERAL_DETECT | Dr7::RTM | Dr7::FIXED_1).expect("valid");
    assert!(d.general_detect());
    assert!(d.rtm());
    assert_eq!(Dr7::GENERAL_DETECT, 1 << 13);
    assert_eq!(Dr7::RTM, 1 << 11);
}

// --- Round trips ----------------------------------------------------------------------------

#[test]
fn round_trip_every_slot_condition_length_enable() {
    for slot in Slot::ALL {
        for (c, l) in valid_fields() {
            for (local, global) in [(false, false), (true, false), (false, true), (true, true)] {
                for base in [Dr7::EMPTY, Dr7::RESET] {
                    let mut d = set(base, slot, c, l);
                    if local {
                        d = d.enable_local(slot);
                    }
                    if global {
                        d = d.enable_global(slot);
                    }
                    // Independent formula from the SDM layout.
                    let n = u32::from(slot.get());
                    let field = u64::from(l.encoding() << 2 | c.encoding());
                    let expect = base.bits()
                        | (field << (16 + 4 * n))
                        | (u64::from(local) << (2 * n))
                        | (u64::from(global) << (2 * n + 1));
                    assert_eq!(d.bits(), expect, "{slot:?} {c:?} {l:?} {local} {global}");

                    let back = Dr7::from_bits(d.bits()).expect("valid");
                    assert_eq!(back, d);
                    assert_eq!(back.condition(slot), c);
                    assert_eq!(back.length(slot), l);
                    assert_eq!(back.is_local_enabled(slot), local);
                    assert_eq!(back.is_global_enabled(slot), global);
                    let state = back.get(slot);
                    if local || global {
                        assert_eq!(
                            state,
                            Some(SlotState {
                                condition: c,
                                length: l,
                                local,
                                global
                            })
                        );
                        assert_eq!(back.enabled_slots(), SlotSet::EMPTY.with(slot));
                    } else {
                        assert_eq!(state, None);
                        assert!(back.enabled_slots().is_empty());
                    }
                    // Other slots untouched.
                    for other in Slot::ALL.into_iter().filter(|&o| o != slot) {
                        assert_eq!(back.get(other), None);
                        assert_eq!(back.condition(other), Condition::Execute);
                        assert_eq!(back.length(other), Length::One);
                    }
                    // clear() undoes everything that set/enable did.
                    assert_eq!(back.clear(slot), base);
                    // set_watch agrees with set.
                    if let Ok(w) = Watch::new(0, l, c) {
                        assert_eq!(base.set_watch(slot, w), set(base, slot, c, l));
                    }
                }
            }
        }
    }
}

#[test]
fn all_slots_at_once_do_not_interfere() {
    let fields = valid_fields();
    let n = fields.len();
    for a in 0..n {
        for b in 0..n {
            for c in 0..n {
                for e in 0..n {
                    let pick = [fields[a], fields[b], fields[c], fields[e]];
                    let mut d = Dr7::new();
                    for (i, slot) in Slot::ALL.into_iter().enumerate() {
                        d = set(d, slot, pick[i].0, pick[i].1);
                        // Vary the enables per slot: none, L, G, both.
                        match (a + b + c + e + i) % 4 {
                            1 => d = d.enable_local(slot),
                            2 => d = d.enable_global(slot),
                            3 => d = d.enable_local(slot).enable_global(slot),
                            _ => {}
                        }
                    }
                    let back = Dr7::from_bits(d.bits()).expect("valid");
                    for (i, slot) in Slot::ALL.into_iter().enumerate() {
                        assert_eq!(back.condition(slot), pick[i].0);
                        assert_eq!(back.length(slot), pick[i].1);
                        let mode = (a + b + c + e + i) % 4;
                        assert_eq!(back.is_local_enabled(slot), mode & 1 != 0);
                        assert_eq!(back.is_global_enabled(slot), mode & 2 != 0);
                    }
                }
            }
        }
    }
}

#[test]
fn set_replaces_the_old_field() {
    let d = set(Dr7::new(), Slot::DR1, Condition::ReadWrite, Length::Four).enable_global(Slot::DR1);
    let d = set(d, Slot::DR1, Condition::Write, Length::One);
    assert_eq!(d.bits(), 0x0010_0008);
    let d = d.disable(Slot::DR1);
    assert_eq!(d.bits(), 0x0010_0000);
    assert_eq!(d.get(Slot::DR1), None);
}

// --- Errors ----------------------------------------------------------------------------------

#[test]
fn set_rejects_long_execute() {
    for l in [Length::Two, Length::Four, Length::Eight] {
        for slot in Slot::ALL {
            assert_eq!(
                Dr7::new().set(slot, Condition::Execute, l),
                Err(Error::ExecuteLength(l))
            );
            assert_eq!(
                encode_dr7(slot, Condition::Execute, l),
                Err(Error::ExecuteLength(l))
            );
        }
    }
}

#[test]
fn from_bits_single_bits() {
    for bit in 0..64u32 {
        let raw = 1u64 << bit;
        let got = Dr7::from_bits(raw);
        match bit {
            // L/G, LE, GE, bit 10, RTM, GD.
            0..=11 | 13 => assert_eq!(got.map(Dr7::bits), Ok(raw), "bit {bit}"),
            12 | 14 | 15 | 32..=63 => {
                assert_eq!(got, Err(Error::ReservedDr7Bits(raw)), "bit {bit}");
            }
            16..=31 => {
                let slot = Slot::new(((bit - 16) / 4) as u8).expect("slot");
                match (bit - 16) % 4 {
                    // R/W = 01 (write, len 1): fine.
                    0 => assert_eq!(got.map(Dr7::bits), Ok(raw), "bit {bit}"),
                    // R/W = 10: I/O.
                    1 => assert_eq!(
                        got,
                        Err(Error::InvalidDr7Slot {
                            slot,
                            rw: 0b10,
                            len: 0
                        })
                    ),
                    // R/W = 00 with LEN 01 or 10: execute longer than a byte.
                    k => assert_eq!(
                        got,
                        Err(Error::InvalidDr7Slot {
                            slot,
                            rw: 0,
                            len: 1 << (k - 2)
                        })
                    ),
                }
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn from_bits_reports_all_reserved_bits() {
    assert_eq!(
        Dr7::from_bits(0xFFFF_FFFF_FFFF_FFFF),
        Err(Error::ReservedDr7Bits(0xFFFF_FFFF_0000_D000))
    );
}

#[test]
fn invalid_fields_rejected_even_when_disabled() {
    // Slot 2 R/W = 10 but L2/G2 clear: enabling it later would arm an I/O breakpoint.
    assert_eq!(
        Dr7::from_bits(0x0200_0000),
        Err(Error::InvalidDr7Slot {
            slot: Slot::DR2,
            rw: 0b10,
            len: 0
        })
    );
}

// --- Cross-check against Linux 6.12 ----------------------------------------------------------
//
// Re-derived from `arch/x86/kernel/hw_breakpoint.c` (`__encode_dr7`, `encode_dr7`,
// `decode_dr7`, `arch_install_hw_breakpoint`, `arch_uninstall_hw_breakpoint`) with constants
// from `arch/x86/include/asm/hw_breakpoint.h` and `arch/x86/include/uapi/asm/debugreg.h`.

mod kernel {
    pub const X86_BREAKPOINT_LEN_X: u32 = 0x40;
    pub const X86_BREAKPOINT_LEN_1: u32 = 0x40;
    pub const X86_BREAKPOINT_LEN_2: u32 = 0x44;
    pub const X86_BREAKPOINT_LEN_4: u32 = 0x4c;
    pub const X86_BREAKPOINT_LEN_8: u32 = 0x48;
    pub const X86_BREAKPOINT_EXECUTE: u32 = 0x80;
    pub const X86_BREAKPOINT_WRITE: u32 = 0x81;
    pub const X86_BREAKPOINT_RW: u32 = 0x83;

    const DR_CONTROL_SHIFT: u32 = 16;
    const DR_CONTROL_SIZE: u32 = 4;
    const DR_GLOBAL_ENABLE: u64 = 0x2;
    const DR_ENABLE_SIZE: u32 = 2;
    pub const DR_GLOBAL_SLOWDOWN: u64 = 0x200;
    pub const DR7_FIXED_1: u64 = 0x400;
    /// KVM's `DR7_VOLATILE` (`arch/x86/include/asm/kvm_host.h`).
    pub const DR7_VOLATILE: u64 = 0xffff_2bff;

    /// `__encode_dr7`.
    pub fn encode_dr7_inner(drnum: u32, len: u32, ty: u32) -> u64 {
        let mut bp_info = u64::from((len | ty) & 0xf);
        bp_info <<= DR_CONTROL_SHIFT + drnum * DR_CONTROL_SIZE;
        bp_info |= DR_GLOBAL_ENABLE << (drnum * DR_ENABLE_SIZE);
        bp_info
    }

    /// `encode_dr7`.
    pub fn encode_dr7(drnum: u32, len: u32, ty: u32) -> u64 {
        encode_dr7_inner(drnum, len, ty) | DR_GLOBAL_SLOWDOWN
    }

    /// `decode_dr7`: (len, type, enable bits).
    pub fn decode_dr7(dr7: u64, bpnum: u32) -> (u32, u32, u32) {
        let bp_info = (dr7 >> (DR_CONTROL_SHIFT + bpnum * DR_CONTROL_SIZE)) as u32;
        let len = (bp_info & 0xc) | 0x40;
        let ty = (bp_info & 0x3) | 0x80;
        (len, ty, ((dr7 >> (bpnum * DR_ENABLE_SIZE)) & 0x3) as u32)
    }
}

fn kernel_len(l: Length) -> u32 {
    match l {
        Length::One => kernel::X86_BREAKPOINT_LEN_1,
        Length::Two => kernel::X86_BREAKPOINT_LEN_2,
        Length::Four => kernel::X86_BREAKPOINT_LEN_4,
        Length::Eight => kernel::X86_BREAKPOINT_LEN_8,
    }
}

fn kernel_type(c: Condition) -> u32 {
    match c {
        Condition::Execute => kernel::X86_BREAKPOINT_EXECUTE,
        Condition::Write => kernel::X86_BREAKPOINT_WRITE,
        Condition::ReadWrite => kernel::X86_BREAKPOINT_RW,
    }
}

#[test]
fn matches_kernel_encode_dr7() {
    for slot in Slot::ALL {
        for (c, l) in valid_fields() {
            let len = if c == Condition::Execute {
                kernel::X86_BREAKPOINT_LEN_X
            } else {
                kernel_len(l)
            };
            let k = kernel::encode_dr7(u32::from(slot.get()), len, kernel_type(c));
            assert_eq!(encode_dr7(slot, c, l), Ok(k), "{slot:?} {c:?} {l:?}");
            let w = Watch::new(0, l, c).expect("valid");
            assert_eq!(Dr7::new().install(slot, w).bits(), k);
            // GE is what the kernel sets, not LE.
            assert_eq!(k & 0x300, kernel::DR_GLOBAL_SLOWDOWN);
        }
    }
}

#[test]
fn matches_kernel_install_uninstall_sequence() {
    // Mirror per-CPU cpu_dr7 through installs and uninstalls in a fixed pseudo-random order.
    let fields = valid_fields();
    let mut kernel_dr7 = 0u64;
    let mut ours = Dr7::new();
    let mut installed: [Option<(Condition, Length)>; 4] = [None; 4];
    let mut x = 0x1234_5678u32;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let slot = Slot::new((x % 4) as u8).expect("slot");
        let i = slot.index();
        if let Some((c, l)) = installed[i] {
            // arch_uninstall_hw_breakpoint: dr7 &= ~__encode_dr7(i, len, type)
            kernel_dr7 &= !kernel::encode_dr7_inner(i as u32, kernel_len(l), kernel_type(c));
            ours = ours.clear(slot);
            installed[i] = None;
        } else {
            let (c, l) = fields[(x as usize / 4) % fields.len()];
            // arch_install_hw_breakpoint: *dr7 |= encode_dr7(i, len, type)
            kernel_dr7 |= kernel::encode_dr7(i as u32, kernel_len(l), kernel_type(c));
            ours = ours.install(slot, Watch::new(0, l, c).expect("valid"));
            installed[i] = Some((c, l));
        }
        assert_eq!(ours.bits(), kernel_dr7);
    }
    // The kernel never clears GE once set; neither does clear().
    assert!(ours.global_exact());
}

#[test]
fn matches_kernel_decode_dr7_for_every_field_pattern() {
    // All 2^16 patterns of the slot fields, with every enable bit set.
    for high in 0..=0xFFFFu64 {
        let raw = (high << 16) | 0xFF | kernel::DR7_FIXED_1;
        let valid = (0..4).all(|n| {
            let f = (high >> (4 * n)) & 0xF;
            let (rw, len) = (f & 3, f >> 2);
            rw != 0b10 && !(rw == 0 && len != 0)
        });
        match Dr7::from_bits(raw) {
            Ok(d) => {
                assert!(valid, "{raw:#x}");
                for slot in Slot::ALL {
                    let (len, ty, en) = kernel::decode_dr7(raw, u32::from(slot.get()));
                    let st = d.get(slot).expect("enabled");
                    assert_eq!(kernel_len(st.length), len);
                    assert_eq!(kernel_type(st.condition), ty);
                    assert_eq!(u32::from(st.local) | u32::from(st.global) << 1, en);
                }
            }
            Err(Error::InvalidDr7Slot { .. }) => assert!(!valid, "{raw:#x}"),
            Err(e) => panic!("{raw:#x}: {e}"),
        }
    }
}

#[test]
fn reserved_mask_matches_kvm() {
    assert_eq!(
        Dr7::MUST_BE_ZERO,
        !(kernel::DR7_VOLATILE | kernel::DR7_FIXED_1)
    );
    assert_eq!(Dr7::FIXED_1, kernel::DR7_FIXED_1);
    assert_eq!(Dr7::GLOBAL_EXACT, kernel::DR_GLOBAL_SLOWDOWN);
}

#[test]
fn length_encodings_match_kernel_dr_len() {
    // DR_LEN_1 0x0, DR_LEN_2 0x4, DR_LEN_4 0xC, DR_LEN_8 0x8: the LEN bits pre-shifted by 2.
    for (l, dr_len) in [
        (Length::One, 0x0),
        (Length::Two, 0x4),
        (Length::Four, 0xC),
        (Length::Eight, 0x8),
    ] {
        assert_eq!(l.encoding() << 2, dr_len);
        assert_eq!(Length::from_encoding(dr_len >> 2), Ok(l));
    }
    // DR_RW_EXECUTE 0x0, DR_RW_WRITE 0x1, DR_RW_READ 0x3.
    for (c, rw) in [
        (Condition::Execute, 0),
        (Condition::Write, 1),
        (Condition::ReadWrite, 3),
    ] {
        assert_eq!(c.encoding(), rw);
        assert_eq!(Condition::from_encoding(rw), Ok(c));
    }
}

#[test]
fn usable_in_const() {
    const W: Watch = match Watch::new(0x2000, Length::Eight, Condition::ReadWrite) {
        Ok(w) => w,
        Err(_) => panic!("invalid"),
    };
    const D: Dr7 = Dr7::new().install(Slot::DR1, W);
    // RW1 11<<20 | LEN1 10<<22 | G1 0x8 | GE 0x200 = 0x00B0_0208
    assert_eq!(D.bits(), 0x00B0_0208);
}
