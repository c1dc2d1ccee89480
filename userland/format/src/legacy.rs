//! Records as older ABIs laid them out, widened to today's layout as version 1 files are
//! read. (Version 2 needs nothing: its codec stores the words of a record that changed, and
//! the words added since stay zero, as [`HISTORY_START_ABI6_SIZE`] requires.)

use dprof_abi::{RecordHeader, RecordKind, RECORD_HEADER_SIZE};

/// The size of a `HistoryStart` record, header included, up to ABI 6 (format versions 1 and
/// 2): two watched ranges. Its fields are a prefix of today's; the ranges added since are
/// unused, all zero.
pub(crate) const HISTORY_START_ABI6_SIZE: usize = 72;

/// `chunk` (version 1 records, one after another) with every ABI 6 `HistoryStart` grown to
/// today's size, zero-filled; `None` when there is none. Stops at the first header it cannot
/// read, keeping the rest as it is: the record checks that follow report it.
pub(crate) fn widen_history_starts(chunk: &[u8]) -> Option<Vec<u8>> {
    let is_old_start = |header: &RecordHeader| {
        header.kind == RecordKind::HistoryStart as u16
            && usize::from(header.size) == HISTORY_START_ABI6_SIZE
    };
    let mut records = Vec::new();
    let mut pos = 0;
    while let Some(head) = chunk.get(pos..pos + RECORD_HEADER_SIZE) {
        let Ok(header) = RecordHeader::decode(head) else {
            break;
        };
        let size = usize::from(header.size);
        if size < RECORD_HEADER_SIZE || pos + size > chunk.len() {
            break;
        }
        records.push((pos, header));
        pos += size;
    }
    if !records.iter().any(|(_, h)| is_old_start(h)) {
        return None;
    }
    let wide = RecordKind::HistoryStart.record_size();
    let mut out =
        Vec::with_capacity(chunk.len() + records.len() * (wide - HISTORY_START_ABI6_SIZE));
    for &(at, header) in &records {
        let record = &chunk[at..at + usize::from(header.size)];
        if is_old_start(&header) {
            let mut head = [0u8; RECORD_HEADER_SIZE];
            RecordHeader {
                size: u16::try_from(wide).unwrap_or(u16::MAX),
                ..header
            }
            .encode(&mut head);
            out.extend_from_slice(&head);
            out.extend_from_slice(&record[RECORD_HEADER_SIZE..]);
            out.resize(out.len() + wide - HISTORY_START_ABI6_SIZE, 0);
        } else {
            out.extend_from_slice(record);
        }
    }
    out.extend_from_slice(&chunk[pos..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: RecordKind, size: usize) -> [u8; RECORD_HEADER_SIZE] {
        let mut out = [0u8; RECORD_HEADER_SIZE];
        RecordHeader {
            kind: kind as u16,
            size: u16::try_from(size).expect("small"),
            cpu: 1,
            time_ns: 7,
        }
        .encode(&mut out);
        out
    }

    #[test]
    fn an_old_history_start_grows_and_the_rest_is_kept_as_it_is() {
        let mut chunk = header(RecordKind::HistoryStart, HISTORY_START_ABI6_SIZE).to_vec();
        chunk.extend((1..=56).map(|b: u8| b));
        let free = RecordKind::Free.record_size();
        chunk.extend_from_slice(&header(RecordKind::Free, free));
        chunk.resize(chunk.len() + free - RECORD_HEADER_SIZE, 0xee);
        // A cut header at the end: kept for the record checks to report.
        chunk.extend_from_slice(&[1, 2, 3]);

        let wide = widen_history_starts(&chunk).expect("an old start");
        let size = RecordKind::HistoryStart.record_size();
        let head = RecordHeader::decode(&wide[..RECORD_HEADER_SIZE]).expect("header");
        assert_eq!(
            (usize::from(head.size), head.cpu, head.time_ns),
            (size, 1, 7)
        );
        assert_eq!(
            wide[RECORD_HEADER_SIZE..HISTORY_START_ABI6_SIZE],
            chunk[RECORD_HEADER_SIZE..HISTORY_START_ABI6_SIZE]
        );
        assert!(wide[HISTORY_START_ABI6_SIZE..size].iter().all(|&b| b == 0));
        assert_eq!(wide[size..], chunk[HISTORY_START_ABI6_SIZE..]);
        // Nothing to widen: no copy.
        assert_eq!(
            widen_history_starts(&chunk[HISTORY_START_ABI6_SIZE..]),
            None
        );
        assert_eq!(widen_history_starts(&[]), None);
    }
}
