//! The fuzz targets' bodies and their seed corpora, apart from libFuzzer so that the
//! workspace build and tests exercise them without C++ or a fuzzer main. The profile reader's
//! are here, the IBS decoder's in [`ibs`].

pub mod blocks;
pub mod ibs;

use dprof_analysis::btf::Btf;
use dprof_analysis::summary::Summary;
use dprof_analysis::symbols::Kallsyms;
use dprof_fixtures::profile::example_profile;
use dprof_format::Profile;

/// Runs [`check_profile`] on `data`, and again with every section's CRC-32 made right:
/// random bytes almost never carry a correct CRC, and without the repair the fuzzer would
/// hardly get past the checksums to the JSON, record and End checks behind them. The repair
/// lives here so the library needs no fuzzing-only code path.
pub fn profile_reader(data: &[u8]) {
    check_profile(data);
    let fixed = with_fixed_crcs(data);
    if fixed != data {
        check_profile(&fixed);
    }
}

/// `data` with the CRC-32 of each section that lies within it recomputed.
#[must_use]
pub fn with_fixed_crcs(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut pos = dprof_format::FILE_HEADER_SIZE;
    loop {
        let Some(len) = out
            .get(pos + 8..pos + 16)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .and_then(|l| usize::try_from(l).ok())
        else {
            return out;
        };
        let start = pos + dprof_format::SECTION_HEADER_SIZE;
        let Some(end) = start.checked_add(len).filter(|&e| e <= out.len()) else {
            return out;
        };
        let crc = crc32fast::hash(&out[start..end]);
        out[pos + 4..pos + 8].copy_from_slice(&crc.to_le_bytes());
        pos = end;
    }
}

/// Everything a reader of an untrusted profile does: open it and, when it opens, parse its
/// BTF and name a few fields, walk every record (which checks them), symbolize call sites,
/// and summarize it.
///
/// # Panics
/// Only on a bug the fuzzer is looking for: a panic in the library, an iterator that
/// disagrees with the End section or goes on after an error, a summary that disagrees with
/// the iterator, or an error without an offset inside the input.
pub fn check_profile(data: &[u8]) {
    let profile = match Profile::from_bytes(data) {
        Ok(profile) => profile,
        Err(e) => return check_error(&e, data),
    };
    if let Some(Ok(btf)) = profile.btf().map(Btf::parse) {
        for offset in [0, 8, 0x10, 0x18, 0x78, 0x80, 0x98, 0xa8, u64::MAX] {
            let _ = btf.field_at("sk_buff", offset);
        }
    }
    let kallsyms = Kallsyms::parse(profile.kallsyms());
    let mut n = 0u64;
    let mut records = profile.records();
    let mut error = None;
    for item in records.by_ref() {
        match item {
            Ok((_, record)) => {
                n += 1;
                if let dprof_abi::Record::Alloc(a) = record {
                    let _ = kallsyms.lookup(a.call_site).map(|l| l.to_string());
                }
            }
            Err(e) => {
                check_error(&e, data);
                error = Some(e.to_string());
                break;
            }
        }
    }
    // An error ends the iteration.
    assert!(
        records.next().is_none(),
        "records after the end or an error"
    );
    match (&error, Summary::of(&profile)) {
        (None, Ok(summary)) => {
            // A profile read to the end yields exactly the records the End section counts.
            assert_eq!(
                n,
                profile.record_count(),
                "record iterator disagrees with End"
            );
            assert_eq!(summary.records, n);
            let _ = serde_json::to_string(&summary);
        }
        (Some(first), Err(again)) => {
            assert_eq!(
                *first,
                again.to_string(),
                "a second pass finds another error"
            );
        }
        (first, again) => panic!(
            "the iterator and the summary disagree: {first:?} vs {:?}",
            again.map(|s| s.records)
        ),
    }
}

/// Every error about the bytes names an offset within them.
fn check_error(e: &dprof_format::ProfileError, data: &[u8]) {
    let offset = e.offset().expect("byte errors carry an offset");
    assert!(
        offset <= data.len() as u64,
        "offset {offset} past the end: {e}"
    );
    let _ = e.to_string();
}

/// Seed inputs: the example profile, a profile without records, and prefixes and a bit flip
/// of the example so the fuzzer starts next to every error path.
#[must_use]
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let example = example_profile();
    let mut seeds = vec![
        ("example".to_owned(), example.clone()),
        (
            "version-1".to_owned(),
            include_bytes!("../../format/tests/data/v1-example.dprof").to_vec(),
        ),
        (
            "btf".to_owned(),
            dprof_fixtures::data_profile::profile_with_btf(&dprof_fixtures::btf::example()),
        ),
    ];
    if let Ok(profile) = Profile::from_bytes(&example) {
        let mut enc = dprof_format::ProfileEncoder::new(
            Vec::new(),
            profile.header(),
            profile.kallsyms(),
            profile.modules(),
        );
        if let Ok(enc) = enc.as_mut() {
            let _ = enc.records(&[]);
        }
        if let Ok(bytes) = enc.and_then(|e| e.finish(profile.stop())) {
            seeds.push(("no-records".to_owned(), bytes));
        }
    }
    for cut in [15, 40, example.len() / 2, example.len() - 1] {
        if let Some(prefix) = example.get(..cut) {
            seeds.push((format!("prefix-{cut}"), prefix.to_vec()));
        }
    }
    let mut flipped = example.clone();
    if let Some(b) = flipped.get_mut(example.len() / 3) {
        *b ^= 0x10;
    }
    seeds.push(("flipped".to_owned(), flipped));
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_run_through_the_target() {
        let seeds = seeds();
        assert!(seeds.len() >= 6);
        assert!(Profile::from_bytes(&seeds[0].1).is_ok());
        assert!(Profile::from_bytes(&seeds[1].1).is_ok_and(|p| p.version() == 1));
        assert!(Profile::from_bytes(&seeds[2].1).is_ok_and(|p| p.btf().is_some()));
        assert!(Profile::from_bytes(&seeds[3].1).is_ok());
        let flipped = &seeds.last().expect("seeds").1;
        assert!(Profile::from_bytes(flipped)
            .and_then(|p| p.validate())
            .is_err());
        assert_eq!(with_fixed_crcs(&seeds[0].1), seeds[0].1);
        for (_, data) in &seeds {
            profile_reader(data);
        }
    }

    /// A few thousand cheap mutations on every `cargo test`, so an obvious panic shows up
    /// before anyone runs the fuzzer.
    #[test]
    fn quick_mutations_do_not_panic() {
        let example = example_profile();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3000 {
            let mut data = example.clone();
            for _ in 0..=next() % 4 {
                let len = data.len().max(1) as u64;
                let i = (next() % len) as usize;
                match next() % 4 {
                    0 => {
                        if let Some(b) = data.get_mut(i) {
                            *b ^= 1 << (next() % 8);
                        }
                    }
                    1 => data.truncate(i),
                    2 => {
                        if let Some(b) = data.get_mut(i) {
                            *b = next() as u8;
                        }
                    }
                    _ => {
                        let j = (next() % len) as usize;
                        let piece: Vec<u8> = example.iter().skip(j).take(64).copied().collect();
                        let at = i.min(data.len());
                        data.splice(at..at, piece);
                    }
                }
            }
            profile_reader(&data);
        }
    }
}
