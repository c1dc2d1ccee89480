//! Records as older ABIs laid them out, widened to today's layout as version 1 files are
//! read. (Versions 2 and up need nothing: their codec stores the words of a record that
//! changed, and the words added since stay zero, as the sizes below require.)

use dprof_abi::{RecordHeader, RecordKind, RECORD_HEADER_SIZE};

/// The size of a `HistoryStart` record, header included, up to ABI 6 (format versions 1 and
/// 2): two watched ranges. Its fields are a prefix of today's; the ranges added since are
/// unused, all zero.
pub(crate) const HISTORY_START_ABI6_SIZE: usize = 72;

/// The size of an `ExperimentEnd` record, header included, up to ABI 8: without the
/// latency pair's in-flight weighing and the capped pauses. Its fields are a prefix of
/// today's; the three added since are zero when nothing was weighed or capped.
pub(crate) const EXPERIMENT_END_ABI8_SIZE: usize = 280;

/// The records that grew since version 1, with their size then.
const GROWN: [(RecordKind, usize); 2] = [
    (RecordKind::HistoryStart, HISTORY_START_ABI6_SIZE),
    (RecordKind::ExperimentEnd, EXPERIMENT_END_ABI8_SIZE),
];

/// `chunk` (version 1 records, one after another) with every record of an older ABI's size
/// ([`GROWN`]) grown to today's size, zero-filled; `None` when there is none. Stops at the
/// first header it cannot read, keeping the rest as it is: the record checks that follow
/// report it.
pub(crate) fn widen_old_records(chunk: &[u8]) -> Option<Vec<u8>> {
    let grown_kind = |header: &RecordHeader| {
        GROWN
            .iter()
            .find(|&&(kind, old)| header.kind == kind as u16 && usize::from(header.size) == old)
            .map(|&(kind, _)| kind)
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
    let growth: usize = records
        .iter()
        .filter_map(|(_, h)| grown_kind(h).map(|kind| kind.record_size() - usize::from(h.size)))
        .sum();
    if growth == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(chunk.len() + growth);
    for &(at, header) in &records {
        let record = &chunk[at..at + usize::from(header.size)];
        if let Some(kind) = grown_kind(&header) {
            let wide = kind.record_size();
            let mut head = [0u8; RECORD_HEADER_SIZE];
            RecordHeader {
                size: u16::try_from(wide).unwrap_or(u16::MAX),
                ..header
            }
            .encode(&mut head);
            out.extend_from_slice(&head);
            out.extend_from_slice(&record[RECORD_HEADER_SIZE..]);
            out.resize(out.len() + wide - record.len(), 0);
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

        let wide = widen_old_records(&chunk).expect("an old start");
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
        assert_eq!(widen_old_records(&chunk[HISTORY_START_ABI6_SIZE..]), None);
        assert_eq!(widen_old_records(&[]), None);
    }

    #[test]
    fn an_old_experiment_end_grows_to_a_valid_record_with_nothing_weighed_or_capped() {
        let end = dprof_abi::ExperimentEnd {
            point_count: 1,
            ..Default::default()
        };
        let mut payload = [0u8; dprof_abi::ExperimentEnd::SIZE];
        end.encode(&mut payload);
        let mut chunk = header(RecordKind::ExperimentEnd, EXPERIMENT_END_ABI8_SIZE).to_vec();
        chunk.extend_from_slice(&payload[..EXPERIMENT_END_ABI8_SIZE - RECORD_HEADER_SIZE]);
        // An ExperimentEnd that is already today's size stays as it is.
        let size = RecordKind::ExperimentEnd.record_size();
        chunk.extend_from_slice(&header(RecordKind::ExperimentEnd, size));
        chunk.extend_from_slice(&payload);

        let wide = widen_old_records(&chunk).expect("an old end");
        assert_eq!(wide.len(), 2 * size);
        for record in wide.chunks_exact(size) {
            let head = RecordHeader::decode(&record[..RECORD_HEADER_SIZE]).expect("header");
            assert_eq!(usize::from(head.size), size);
            match dprof_abi::Record::decode(record).expect("a valid record") {
                (_, dprof_abi::Record::ExperimentEnd(end)) => assert_eq!(
                    (
                        end.in_flight_delay,
                        end.capped_pauses,
                        end.max_owed_after_pause_ns
                    ),
                    (0, 0, 0)
                ),
                other => panic!("{other:?}"),
            }
        }
    }
}
