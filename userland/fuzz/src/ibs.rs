//! The `ibs_decoder` target's body and seeds: the IBS op decoder and every interpretation
//! helper on arbitrary bytes. Nothing may panic except the invariant checks here.

use std::fmt::Write as _;

use dprof_ibs::period::{MAX_PERIOD_EXT, MIN_PERIOD};
use dprof_ibs::{
    encode_period, Caps, CpuModel, DataSrcEncoding, DecodeError, IbsBrTarget, IbsDcLinAd,
    IbsDcPhysAd, IbsFetchCtl, IbsOpCtl, IbsOpData, IbsOpData2, IbsOpData3, IbsOpData4, IbsOpRip,
    IbsOpSample, IcIbsExtdCtl, MemLevel, MemOp, Platform, Register,
};

/// CPU models that switch the kernel's quirks on and off: none known, Zen3 (erratum #1293
/// and unreliable `cache_hit_st`), Zen3 client (unreliable `cache_hit_st`), a later Zen4,
/// and another family.
const CPUS: [Option<CpuModel>; 5] = [
    None,
    Some(CpuModel {
        family: 0x19,
        model: 0x01,
    }),
    Some(CpuModel {
        family: 0x19,
        model: 0x21,
    }),
    Some(CpuModel {
        family: 0x19,
        model: 0x61,
    }),
    Some(CpuModel {
        family: 0x17,
        model: 0x31,
    }),
];

/// Decodes `data` as a raw blob, and also reads it as register values whatever its length,
/// so the interpretation sees arbitrary registers even when the blob is refused; then uses
/// its first word as a period to encode.
///
/// # Panics
/// Only on a bug: a panic in the crate or a broken invariant checked here.
pub fn ibs_decoder(data: &[u8]) {
    match IbsOpSample::decode(data) {
        Ok(sample) => {
            assert_eq!(data.len(), IbsOpSample::raw_len(sample.caps));
            assert_eq!(sample.to_raw().as_bytes(), data, "re-encoding differs");
            assert_eq!(
                sample.br_target.is_some(),
                sample.caps.contains(Caps::BRNTRGT)
            );
            assert_eq!(
                sample.op_data4.is_some(),
                sample.caps.contains(Caps::OPDATA4)
            );
            exercise(&sample);
        }
        Err(e) => {
            let _ = e.to_string();
            match e {
                DecodeError::NoCaps { len } => assert!(len == data.len() && len < 4),
                DecodeError::Length { len, expected, .. } => {
                    assert!(len == data.len() && len != expected);
                }
            }
        }
    }
    exercise(&sample_from_words(data));
    let word = first_word(data);
    for ext in [false, true] {
        check_period(word, ext);
        check_period(word & !0xf, ext);
    }
    for register in Register::ALL {
        check_fields(register, word);
    }
    let _ = IbsFetchCtl(word).fetch_maxcnt();
    let _ = IcIbsExtdCtl(word).itlb_refill_lat();
}

fn first_word(data: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    for (dst, src) in word.iter_mut().zip(data) {
        *dst = *src;
    }
    u64::from_le_bytes(word)
}

/// A sample whose caps and registers are the bytes of `data` in order, zero past its end.
fn sample_from_words(data: &[u8]) -> IbsOpSample {
    let caps = Caps(u32::from_le_bytes(std::array::from_fn(|i| {
        data.get(i).copied().unwrap_or(0)
    })));
    let word = |n: usize| first_word(data.get(4 + 8 * n..).unwrap_or(&[]));
    IbsOpSample {
        caps,
        op_ctl: IbsOpCtl(word(0)),
        op_rip: IbsOpRip(word(1)),
        op_data: IbsOpData(word(2)),
        op_data2: IbsOpData2(word(3)),
        op_data3: IbsOpData3(word(4)),
        dc_lin_ad: IbsDcLinAd(word(5)),
        dc_phys_ad: IbsDcPhysAd(word(6)),
        br_target: caps.contains(Caps::BRNTRGT).then(|| IbsBrTarget(word(7))),
        op_data4: caps.contains(Caps::OPDATA4).then(|| IbsOpData4(word(8))),
    }
}

/// Every field of `register` read through its accessor agrees with its table entry.
fn check_fields(register: Register, raw: u64) {
    for spec in register.fields() {
        let by_table = spec.extract(raw);
        let by_accessor = match register {
            Register::FetchCtl => IbsFetchCtl(raw).field(spec.name),
            Register::OpCtl => IbsOpCtl(raw).field(spec.name),
            Register::OpData => IbsOpData(raw).field(spec.name),
            Register::OpData2 => IbsOpData2(raw).field(spec.name),
            Register::OpData3 => IbsOpData3(raw).field(spec.name),
            Register::IcIbsExtdCtl => IcIbsExtdCtl(raw).field(spec.name),
            _ => None,
        };
        assert_eq!(by_accessor, Some(by_table), "{}", spec.name);
        assert_eq!(by_table & !spec.mask(), 0);
    }
}

fn check_period(period: u64, ext: bool) {
    match encode_period(period, ext) {
        Ok(ctl) => {
            assert_eq!(ctl.period(ext), period, "period {period:#x} round trip");
            assert!((MIN_PERIOD..=MAX_PERIOD_EXT).contains(&period));
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// Every interpretation helper under both tables and every CPU quirk set, with the
/// invariants that hold whatever the registers say.
fn exercise(sample: &IbsOpSample) {
    let mut text = String::new();
    let _ = write!(text, "{}", sample.caps);
    let _ = sample.caps.names().count();
    let ctl = sample.op_ctl;
    for ext in [false, true] {
        let period = ctl.period(ext);
        assert_eq!(period % 16, 0);
        assert!(period <= MAX_PERIOD_EXT);
        if period != 0 {
            // Re-encoding sets exactly the max-count bits the period came from.
            let max_count_bits = if ext { 0x07f0_ffff } else { 0xffff };
            let again = encode_period(period, ext).map(IbsOpCtl::raw);
            assert_eq!(again, Ok(ctl.raw() & max_count_bits));
        }
    }
    let _ = ctl.count(sample.caps);
    let _ = ctl.count_unit();
    for encoding in [DataSrcEncoding::PreZen4, DataSrcEncoding::Zen4] {
        for cpu in CPUS {
            let platform = Platform { encoding, cpu };
            let i = sample.interpret(platform);
            assert_eq!(i.valid, sample.op_ctl.op_val());
            if let MemLevel::Source(source) = i.mem_level {
                assert_eq!(i.mem_op, MemOp::Load);
                assert!(source.kernel_has_entry());
                assert_eq!(i.data_source, Some(source));
            }
            if i.cache_hit_state.is_some() {
                assert_eq!(i.mem_op, MemOp::Load);
            }
            if i.data_source.is_some() {
                assert_eq!(i.mem_op, MemOp::Load);
            }
            if i.linear_address.is_some() {
                assert!(i.valid && sample.op_data3.dc_lin_addr_valid());
            }
            if i.physical_address.is_some() {
                assert!(i.valid && sample.op_data3.dc_phy_addr_valid());
            }
            if i.rip.is_some() {
                assert!(i.valid && !sample.op_data.op_rip_invalid());
            }
            if i.tlb_refill_latency.is_some() {
                assert!(i.tlb.is_some());
            }
            if let Some(width) = i.access_width {
                assert!(width.is_power_of_two());
            }
            if let Some(source) = i.data_source {
                let _ = write!(text, "{source} {}", source.as_str());
                let _ = (source.is_cache(), source.is_remote_node());
            }
            let _ = write!(text, "{} {}", i.mem_level, i.mem_level.as_str());
            if let Some(tlb) = i.tlb {
                let _ = write!(text, "{tlb}");
            }
            let _ = (platform.erratum_1293(), platform.cache_hit_st_reliable());
            let _ = sample.effective_data2(platform);
            let _ = encoding.code(sample.op_data2);
        }
    }
    let _ = DataSrcEncoding::from_caps(sample.caps);
}

/// Seed inputs: well-formed blobs for each blob length and both data-source tables, loads
/// that reach each level, and a few malformed lengths.
#[must_use]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let base = IbsOpSample {
        caps: Caps(0x5f),
        op_ctl: IbsOpCtl(0x0000_0123_0006_1000),
        op_rip: IbsOpRip(0xffff_ffff_8100_0abc),
        op_data: IbsOpData(0x0000_0020_0010_0005),
        op_data2: IbsOpData2(0x13),
        op_data3: IbsOpData3(0x0100_002a_0176_0085),
        dc_lin_ad: IbsDcLinAd(0xffff_8880_1234_5678),
        dc_phys_ad: IbsDcPhysAd(0x1234_5678),
        br_target: None,
        op_data4: None,
    };
    let mut seeds = Vec::new();
    for (name, caps, data2) in [
        ("prezen4-60", 0x5f, 0x13),
        ("prezen4-brtarget-68", 0x1ff, 0x02),
        ("opdata4-68", 0x407, 0x04),
        ("zen4-76", 0xfff, 0x45),
        ("zen4-ext-mem-76", 0xfff, 0x50),
    ] {
        let caps = Caps(caps);
        let sample = IbsOpSample {
            caps,
            op_data2: IbsOpData2(data2),
            br_target: caps
                .contains(Caps::BRNTRGT)
                .then_some(IbsBrTarget(0xffff_ffff_8100_1000)),
            op_data4: caps.contains(Caps::OPDATA4).then_some(IbsOpData4(1)),
            ..base
        };
        seeds.push((name.to_owned(), sample.to_raw().as_bytes().to_vec()));
    }
    let full = seeds[3].1.clone();
    for cut in [0, 3, 4, 59, 61, 75] {
        seeds.push((format!("prefix-{cut}"), full[..cut].to_vec()));
    }
    let mut longer = full;
    longer.extend([0; 8]);
    seeds.push(("too-long".to_owned(), longer));
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_run_through_the_target() {
        let seeds = seeds();
        assert!(seeds.len() >= 10);
        for (name, data) in &seeds {
            let decodes = IbsOpSample::decode(data).is_ok();
            assert_eq!(
                decodes,
                !name.starts_with("prefix") && name != "too-long",
                "{name}"
            );
            ibs_decoder(data);
        }
    }

    /// Cheap random inputs on every `cargo test`, so an obvious panic shows up before anyone
    /// runs the fuzzer.
    #[test]
    fn quick_random_inputs_do_not_panic() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let seeds = seeds();
        for round in 0..5000 {
            let mut data = seeds[round % seeds.len()].1.clone();
            for _ in 0..=next() % 6 {
                if data.is_empty() {
                    break;
                }
                let i = (next() % data.len() as u64) as usize;
                data[i] = next() as u8;
            }
            if next() % 8 == 0 {
                data.truncate((next() % 80) as usize);
            }
            ibs_decoder(&data);
        }
    }
}
