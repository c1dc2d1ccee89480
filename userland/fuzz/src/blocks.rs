//! The format version 2 record decoder on arbitrary coded records: the fuzzer's bytes become
//! the records of one Block section of an otherwise well-formed profile (header, a code table,
//! right CRCs and counts), so that every input reaches the codec instead of stopping at the
//! framing that [`crate::profile_reader`] already covers.

use dprof_fixtures::profile::{example_header, example_profile};
use dprof_format::{
    Profile, SectionKind, StopInfo, StopReason, BLOCK_HEADER_SIZE, FORMAT_VERSION, MAGIC,
};

/// The profile around `data`: its first two bytes are the number of records the block
/// declares, the third its CPU, the rest the coded records.
#[must_use]
pub fn profile_around(data: &[u8]) -> Vec<u8> {
    let records = u32::from(u16::from_le_bytes([
        data.first().copied().unwrap_or(1),
        data.get(1).copied().unwrap_or(0),
    ]))
    .max(1);
    let cpu = u32::from(data.get(2).copied().unwrap_or(0) % 4);
    let coded = data.get(3..).unwrap_or_default();
    let mut block = Vec::with_capacity(BLOCK_HEADER_SIZE + coded.len());
    block.extend_from_slice(&cpu.to_le_bytes());
    block.extend_from_slice(&records.to_le_bytes());
    block.extend_from_slice(&0u64.to_le_bytes());
    block.extend_from_slice(coded);
    // Two instructions: mov 0x10(%rdi),%rax and push %rbx.
    let mut code = Vec::new();
    code.extend_from_slice(&0u32.to_le_bytes());
    code.extend_from_slice(&2u32.to_le_bytes());
    for (ip, bytes) in [
        (0xffff_ffff_8120_0060u64, &[0x48u8, 0x8b, 0x47, 0x10][..]),
        (0xffff_ffff_8120_0070, &[0x53][..]),
    ] {
        code.extend_from_slice(&ip.to_le_bytes());
        code.push(bytes.len() as u8);
        code.extend_from_slice(bytes);
    }
    let stop = StopInfo {
        reason: StopReason::DurationElapsed,
        ended_unix_s: 0,
        elapsed_ns: 0,
        device: None,
    };
    let mut end = Vec::new();
    for v in [u64::from(records), block.len() as u64, 1] {
        end.extend_from_slice(&v.to_le_bytes());
    }
    let sections: [(SectionKind, Vec<u8>); 7] = [
        (
            SectionKind::Header,
            serde_json::to_vec(&example_header()).unwrap_or_default(),
        ),
        (SectionKind::Kallsyms, Vec::new()),
        (SectionKind::Modules, Vec::new()),
        (SectionKind::Code, code),
        (SectionKind::Block, block),
        (
            SectionKind::Stop,
            serde_json::to_vec(&stop).unwrap_or_default(),
        ),
        (SectionKind::End, end),
    ];
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for (kind, payload) in sections {
        out.extend_from_slice(&(kind as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&payload);
    }
    out
}

/// The target: the profile around `data`, read as any profile is.
pub fn profile_blocks(data: &[u8]) {
    crate::check_profile(&profile_around(data));
}

/// Seeds: the coded records of the example profile's blocks, one seed per block, with the
/// count and CPU its header gives.
#[must_use]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let example = example_profile();
    let mut seeds = Vec::new();
    if Profile::from_bytes(&example).is_err() {
        return seeds;
    }
    let mut pos = dprof_format::FILE_HEADER_SIZE;
    while let Some(head) = example.get(pos..pos + dprof_format::SECTION_HEADER_SIZE) {
        let kind = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let len = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default()) as usize;
        let payload_at = pos + dprof_format::SECTION_HEADER_SIZE;
        if kind == SectionKind::Block as u32 {
            if let Some(block) = example.get(payload_at..payload_at + len) {
                let mut seed = block[4..6].to_vec();
                seed.push(block[0]);
                seed.extend_from_slice(&block[BLOCK_HEADER_SIZE..]);
                seeds.push((format!("block-{}", seeds.len()), seed));
            }
        }
        pos = payload_at + len;
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_the_example_blocks_and_read_back() {
        let seeds = seeds();
        assert!(!seeds.is_empty());
        for (name, seed) in &seeds {
            let profile = Profile::from_vec(profile_around(seed)).expect("frames");
            // The example's samples name its code table, not this one: some records read,
            // and whatever does not is an error, not a panic.
            let _ = profile.validate();
            profile_blocks(seed);
            assert!(!name.is_empty());
        }
    }

    #[test]
    fn quick_mutations_of_coded_records_do_not_panic() {
        let seeds = seeds();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..3000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let (_, seed) = &seeds[(state % seeds.len() as u64) as usize];
            let mut data = seed.clone();
            let at = (state >> 8) as usize % data.len().max(1);
            if let Some(b) = data.get_mut(at) {
                *b ^= (state >> 32) as u8 | 1;
            }
            profile_blocks(&data);
        }
    }
}
