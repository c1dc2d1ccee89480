use super::*;

/// A perf.data as `perf record` lays it out: header, data section, feature table and feature
/// sections (the attribute section left empty: readers take the event descriptions).
#[derive(Default)]
pub(crate) struct PerfData {
    /// Records of the data section, each with its 8-byte header.
    pub(crate) records: Vec<u8>,
    /// Feature sections by feature bit.
    pub(crate) features: Vec<(usize, Vec<u8>)>,
}

impl PerfData {
    /// Appends a record of `kind` with `misc` and `body` (padded to 8 bytes).
    pub(crate) fn record(&mut self, kind: u32, misc: u16, body: &[u8]) {
        let size = (8 + body.len()).next_multiple_of(8);
        self.records.extend_from_slice(&kind.to_le_bytes());
        self.records.extend_from_slice(&misc.to_le_bytes());
        self.records
            .extend_from_slice(&u16::try_from(size).expect("small").to_le_bytes());
        self.records.extend_from_slice(body);
        self.records
            .resize(self.records.len() + size - 8 - body.len(), 0);
    }

    /// Sets feature section `bit`.
    pub(crate) fn feature(&mut self, bit: usize, bytes: Vec<u8>) {
        self.features.retain(|(b, _)| *b != bit);
        self.features.push((bit, bytes));
        self.features.sort_by_key(|(b, _)| *b);
    }

    /// The file.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let data_offset = FILE_HEADER_SIZE;
        let data_size = self.records.len() as u64;
        let mut out = MAGIC.to_vec();
        for v in [FILE_HEADER_SIZE, 128, 0, 0, data_offset, data_size, 0, 0] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let mut bits = [0u8; 32];
        for (bit, _) in &self.features {
            bits[bit / 8] |= 1 << (bit % 8);
        }
        out.extend_from_slice(&bits);
        out.extend_from_slice(&self.records);
        let mut offset = data_offset + data_size + 16 * self.features.len() as u64;
        for (_, section) in &self.features {
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&(section.len() as u64).to_le_bytes());
            offset += section.len() as u64;
        }
        for (_, section) in &self.features {
            out.extend_from_slice(section);
        }
        out
    }
}

/// perf's `perf_header_string`: a length, then the bytes with a NUL, padded to 4.
pub(crate) fn header_string(s: &str) -> Vec<u8> {
    let len = (s.len() + 1).next_multiple_of(4);
    let mut out = u32::try_from(len).expect("short").to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out.resize(4 + len, 0);
    out
}

/// An `EVENT_DESC` section: each event's attribute bytes, name and ids.
pub(crate) fn event_desc(events: &[(Vec<u8>, &str, Vec<u64>)]) -> Vec<u8> {
    let attr_size = events.first().map_or(128, |(a, _, _)| a.len());
    let mut out = u32::try_from(events.len())
        .expect("few")
        .to_le_bytes()
        .to_vec();
    out.extend_from_slice(&u32::try_from(attr_size).expect("small").to_le_bytes());
    for (attr, name, ids) in events {
        out.extend_from_slice(attr);
        out.extend_from_slice(&u32::try_from(ids.len()).expect("few").to_le_bytes());
        out.extend_from_slice(&header_string(name));
        for id in ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    out
}

fn minimal() -> PerfData {
    let mut p = PerfData::default();
    p.feature(
        EVENT_DESC,
        event_desc(&[(vec![0u8; 128], "cpu-clock", vec![1])]),
    );
    p
}

fn what(err: ImportError) -> String {
    match err {
        ImportError::Corrupt { what } => what,
        other => panic!("not a corrupt file: {other}"),
    }
}

#[test]
fn a_whole_file_passes() {
    check(&minimal().bytes()).expect("whole");
}

#[test]
fn other_files_are_not_perf_data_and_other_layouts_are_named() {
    assert!(matches!(check(b""), Err(ImportError::NotPerfData)));
    assert!(matches!(check(b"PERF"), Err(ImportError::NotPerfData)));
    assert!(matches!(
        check(b"DPROF\0\r\n and more"),
        Err(ImportError::NotPerfData)
    ));
    let mut big = minimal().bytes();
    big[..8].copy_from_slice(b"2ELIFREP");
    assert!(matches!(check(&big), Err(ImportError::BigEndian)));
    let mut pipe = b"PERFILE2".to_vec();
    pipe.extend_from_slice(&16u64.to_le_bytes());
    assert!(matches!(check(&pipe), Err(ImportError::Pipe)));
}

#[test]
fn every_cut_is_refused() {
    let bytes = minimal().bytes();
    for cut in 8..bytes.len() {
        let err = check(&bytes[..cut]).expect_err("cut");
        assert!(matches!(err, ImportError::Corrupt { .. }), "{cut}: {err}");
    }
}

#[test]
fn sizes_beyond_the_file_are_refused_before_anything_is_allocated() {
    let bytes = minimal().bytes();
    // The data section's size.
    let mut huge = bytes.clone();
    huge[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(what(check(&huge).expect_err("huge")).contains("data section"));
    // A feature section's size.
    let mut huge = bytes.clone();
    let table = usize::try_from(FILE_HEADER_SIZE).expect("small");
    huge[table + 8..table + 16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(what(check(&huge).expect_err("huge")).contains("feature section 12"));
    // The event count of the event descriptions.
    let mut p = PerfData::default();
    let mut desc = event_desc(&[(vec![0u8; 128], "cpu-clock", vec![1])]);
    desc[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    p.feature(EVENT_DESC, desc);
    assert!(what(check(&p.bytes()).expect_err("many")).contains("event descriptions"));
    // An id count.
    let mut p = PerfData::default();
    let mut desc = event_desc(&[(vec![0u8; 128], "cpu-clock", vec![1])]);
    desc[8 + 128..8 + 132].copy_from_slice(&u32::MAX.to_le_bytes());
    p.feature(EVENT_DESC, desc);
    assert!(what(check(&p.bytes()).expect_err("many")).contains("ids"));
}

#[test]
fn a_file_without_event_descriptions_is_refused() {
    let p = PerfData::default();
    assert!(what(check(&p.bytes()).expect_err("none")).contains("EVENT_DESC"));
}
