use super::*;

/// A hardware sample body as perf writes it for `HW_SAMPLE_TYPE` (+ RAW when `raw` is given).
fn body(raw: Option<&[u8]>, regs: bool) -> Vec<u8> {
    let mut b = Vec::new();
    let u64s =
        |b: &mut Vec<u8>, v: &[u64]| v.iter().for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
    u64s(&mut b, &[0x77, 0xffff_ffff_8100_1234]); // identifier, ip
    b.extend_from_slice(&10u32.to_le_bytes()); // pid
    b.extend_from_slice(&11u32.to_le_bytes()); // tid
    u64s(&mut b, &[5000, 0xffff_8880_0000_1040]); // time, addr
    b.extend_from_slice(&1u32.to_le_bytes()); // cpu
    b.extend_from_slice(&0u32.to_le_bytes());
    if let Some(raw) = raw {
        // u32 size, then the data padded so that size + data end on 8 bytes.
        let padded = (raw.len() + 4).next_multiple_of(8) - 4;
        b.extend_from_slice(&(padded as u32).to_le_bytes());
        b.extend_from_slice(raw);
        b.resize(b.len() + padded - raw.len(), 0);
    }
    u64s(&mut b, &[230, 0x6810_0142]); // weight, data_src
    if regs {
        u64s(&mut b, &[2]); // PERF_SAMPLE_REGS_ABI_64
                            // ax bx cx dx si di bp sp ip r8..r15, by perf's register numbers.
        let values: Vec<u64> = (0..17).map(|i| 0x1000 + i).collect();
        u64s(&mut b, &values);
    } else {
        u64s(&mut b, &[0]);
    }
    u64s(&mut b, &[0x1_0000_1040]); // phys_addr
    b
}

#[test]
fn pebs_samples_keep_address_source_latency_and_registers() {
    let b = body(None, true);
    let s = parse(&b, 1, false).expect("parses");
    assert_eq!(
        (s.ip, s.pid, s.tid, s.time_ns, s.cpu),
        (0xffff_ffff_8100_1234, 10, 11, 5000, 1)
    );
    assert_eq!(
        (s.addr, s.weight, s.data_src, s.phys_addr),
        (0xffff_8880_0000_1040, 230, 0x6810_0142, 0x1_0000_1040)
    );
    assert!(s.raw.is_empty() && !s.user);
    // In the ABI's order: rax rcx rdx rbx rsp rbp rsi rdi, r8..r15 (perf's ax=0 bx=1 cx=2
    // dx=3 si=4 di=5 bp=6 sp=7 ip=8, r8=16.., here 0x1000 + their place in the record).
    assert_eq!(
        &s.regs[..8],
        &[0x1000, 0x1002, 0x1003, 0x1001, 0x1007, 0x1006, 0x1004, 0x1005]
    );
    assert_eq!(s.regs[8], 0x1009, "r8 follows ip in the record");
    assert_eq!(s.regs[15], 0x1010);
}

#[test]
fn ibs_samples_carry_their_raw_registers() {
    let mut raw = 0u32.to_le_bytes().to_vec(); // caps: the basic registers only
    for r in 0..7u64 {
        raw.extend_from_slice(&(0xa0 + r).to_le_bytes());
    }
    let b = body(Some(&raw), true);
    let s = parse(&b, 2, true).expect("parses");
    assert!(s.user, "misc 2 is user mode");
    let regs = dprof_abi::IbsRegs::from_perf_raw(s.raw).expect("the registers");
    assert_eq!(regs.regs[dprof_abi::IBS_DC_LIN_AD], 0xa5);
    assert_eq!(s.weight, 230);
}

#[test]
fn samples_without_registers_or_cut_short_are_handled() {
    let b = body(None, false);
    let s = parse(&b, 1, false).expect("parses");
    assert_eq!(s.regs, [0; dprof_abi::SAMPLE_REGS]);
    assert_eq!(s.phys_addr, 0x1_0000_1040);
    for cut in 0..b.len() {
        assert!(parse(&b[..cut], 1, false).is_none(), "cut at {cut}");
    }
    // A raw size past the end.
    let mut b = body(Some(&[0; 12]), true);
    b[48..52].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(parse(&b, 1, true).is_none());
}
