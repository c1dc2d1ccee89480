//! The record check that the writer and the reader share.

use crate::error::RecordProblem;

/// [`check_record_into`] with access samples read in place (see
/// [`dprof_abi::Record::decode_view`]).
#[inline]
pub(crate) fn check_record_view<'a>(
    buf: &'a [u8],
    nr_cpu_ids: u32,
    out: &'a mut dprof_abi::Record,
) -> Result<(dprof_abi::RecordHeader, dprof_abi::RecordView<'a>), RecordProblem> {
    let (header, view) = match dprof_abi::Record::decode_view(buf, out) {
        Ok(found) => found,
        Err(dprof_abi::AbiError::Truncated { needed, available }) => {
            return Err(RecordProblem::Straddles { needed, available })
        }
        Err(other) => return Err(RecordProblem::Abi(other)),
    };
    if header.cpu >= nr_cpu_ids {
        return Err(RecordProblem::Cpu {
            cpu: header.cpu,
            nr_cpu_ids,
        });
    }
    Ok((header, view))
}

/// Checks one record at the start of `buf` the way both the writer and the reader do: a known
/// kind with its exact size, a well-formed payload, whole within `buf`, and a CPU number below
/// the module's `nr_cpu_ids`; decodes it into `out` (left alone on error), for readers that decode
/// millions of records into one place.
#[inline]
pub(crate) fn check_record_into(
    buf: &[u8],
    nr_cpu_ids: u32,
    out: &mut dprof_abi::Record,
) -> Result<(dprof_abi::RecordHeader, usize), RecordProblem> {
    let header = match dprof_abi::Record::decode_into(buf, out) {
        Ok(header) => header,
        // The only way to be short here is a record cut by the end of its chunk.
        Err(dprof_abi::AbiError::Truncated { needed, available }) => {
            return Err(RecordProblem::Straddles { needed, available })
        }
        Err(other) => return Err(RecordProblem::Abi(other)),
    };
    if header.cpu >= nr_cpu_ids {
        return Err(RecordProblem::Cpu {
            cpu: header.cpu,
            nr_cpu_ids,
        });
    }
    Ok((header, usize::from(header.size)))
}
