//! Where the running kernel linked its static per-CPU section, for the profile's header, when
//! kallsyms does not list `__per_cpu_start` (x86-64 since Linux 6.15 without
//! `CONFIG_KALLSYMS_ALL`). The kernel's code is read (from `/proc/kcore`, else through BPF)
//! and its `%gs:` operands placed against the per-CPU variables of its BTF: see
//! [`dprof_analysis::percpu_section`].

use std::path::Path;

use dprof_analysis::decode::gs_operand_addresses;
use dprof_analysis::percpu_section::{locate, Located};
use dprof_format::PercpuSection;

use crate::kernel_btf::KernelBtf;
use crate::perf::KernelMemory;
use crate::system::kallsyms_address;

/// Most bytes of kernel code read: x86-64 kernels have a few tens of MiB.
const MAX_TEXT_BYTES: u64 = 256 << 20;

/// Code read and decoded at a time, from the start: reading stops once the start is sure.
const STEP_BYTES: usize = 2 << 20;

/// Operands on variables' first bytes that make a start sure: eight times the fewest
/// [`locate`] takes, so that the rest of the code need not be read (a second at startup).
const SURE_VOTES: u32 = 64;

/// What the collector learnt about the per-CPU section.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// kallsyms lists the section (`__per_cpu_start`), which the analysis reads itself.
    InKallsyms,
    /// Placed from the kernel's code.
    Located {
        /// The section and the votes for it.
        located: Located,
        /// Bytes of code read and decoded from its start.
        code_bytes: u64,
    },
}

/// The per-CPU section of the running kernel, or why it cannot be placed.
pub(crate) fn find(kallsyms: &[u8], btf: &KernelBtf, kcore: &Path) -> Result<Found, String> {
    if kallsyms_address(kallsyms, "__per_cpu_start").is_some() {
        return Ok(Found::InKallsyms);
    }
    let layout = btf.types()?.percpu_layout();
    let (Some(start), Some(end)) = (
        kallsyms_address(kallsyms, "_stext"),
        kallsyms_address(kallsyms, "_etext"),
    ) else {
        return Err("kallsyms does not give the kernel's code (_stext, _etext)".to_owned());
    };
    if !end
        .checked_sub(start)
        .is_some_and(|n| n > 0 && n <= MAX_TEXT_BYTES)
    {
        return Err(format!(
            "kallsyms gives no plausible kernel code ({start:#x}..{end:#x})"
        ));
    }
    let mut memory = KernelMemory::open(kcore).map_err(|e| e.to_string())?;
    let mut chunk = vec![0u8; STEP_BYTES];
    let mut operands = Vec::new();
    let mut at = start;
    loop {
        let n = usize::try_from((end - at).min(STEP_BYTES as u64)).unwrap_or(STEP_BYTES);
        let read = memory.read(at, &mut chunk[..n]);
        if read < n {
            return Err(format!(
                "only {read} of the {n} bytes of the kernel's code at {at:#x} could be read \
                 from {}",
                memory.describe()
            ));
        }
        operands.extend(gs_operand_addresses(&chunk[..n], at));
        at += n as u64;
        let located = locate(&operands, &layout);
        let sure = matches!(&located, Ok(l) if l.votes >= SURE_VOTES);
        if sure || at >= end {
            return located
                .map(|located| Found::Located {
                    located,
                    code_bytes: at - start,
                })
                .map_err(|e| e.to_string());
        }
    }
}

/// The header's record of a section placed from the code.
pub(crate) fn header_value(found: &Found) -> Option<PercpuSection> {
    match found {
        Found::InKallsyms => None,
        Found::Located { located, .. } => Some(PercpuSection {
            start: located.section.start,
            end: located.section.end,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kcore::tests::fake_kcore;
    use dprof_fixtures::btf::BtfBuilder;

    const TEXT: u64 = 0xffff_ffff_8100_0000;
    const START: u64 = 0xffff_ffff_83af_9000;

    /// BTF with twelve per-CPU counters 64 bytes apart.
    fn btf() -> KernelBtf {
        let mut b = BtfBuilder::new();
        let long = b.int("long", 8);
        let vars: Vec<(u32, u32, u32)> = (0..12)
            .map(|i| (b.var(&format!("counter{i}"), long), 64 * i, 8))
            .collect();
        b.datasec(".data..percpu", 4096, &vars);
        KernelBtf::from_bytes(Some(b.finish()))
    }

    /// A page of code that reads each counter as `mov %gs:ADDRESS,%rax`, then returns; int3
    /// fills the rest (kernel memory is read a page at a time).
    fn code() -> Vec<u8> {
        let mut code = Vec::new();
        for i in 0..12u64 {
            let address = u32::try_from((START + 64 * i) & 0xffff_ffff).expect("32 bits");
            code.extend([0x65, 0x48, 0x8b, 0x04, 0x25]);
            code.extend(address.to_le_bytes());
        }
        code.push(0xc3);
        code.resize(4096, 0xcc);
        code
    }

    fn kallsyms(code_len: usize) -> String {
        format!(
            "{TEXT:016x} T _stext\n{:016x} T _etext\n",
            TEXT + code_len as u64
        )
    }

    #[test]
    fn the_section_is_placed_from_the_code_where_kallsyms_lists_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kcore");
        let code = code();
        std::fs::write(&path, fake_kcore(TEXT, &code)).expect("write");
        let found = find(kallsyms(code.len()).as_bytes(), &btf(), &path).expect("found");
        let Found::Located {
            located,
            code_bytes,
        } = &found
        else {
            panic!("not located: {found:?}");
        };
        assert_eq!(
            (located.votes, located.operands, *code_bytes),
            (12, 12, 4096)
        );
        assert_eq!(
            header_value(&found),
            Some(PercpuSection {
                start: START,
                end: START + 4096
            })
        );
    }

    #[test]
    fn kallsyms_bounds_win_and_missing_inputs_say_what_is_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kcore");
        let code = code();
        std::fs::write(&path, fake_kcore(TEXT, &code)).expect("write");
        let listed = format!(
            "{}0000000000000000 D __per_cpu_start\n",
            kallsyms(code.len())
        );
        let found = find(listed.as_bytes(), &btf(), &path).expect("found");
        assert_eq!(found, Found::InKallsyms);
        assert_eq!(header_value(&found), None);

        let error = |kallsyms: &str, btf: &KernelBtf, kcore: &Path| {
            find(kallsyms.as_bytes(), btf, kcore).expect_err("fails")
        };
        let ok = kallsyms(code.len());
        assert!(error(&ok, &KernelBtf::from_bytes(None), &path).contains("no BTF"));
        assert!(
            error(&ok, &KernelBtf::from_bytes(Some(b"junk".to_vec())), &path)
                .contains("does not parse")
        );
        assert!(error("", &btf(), &path).contains("_stext"));
        // Code past what kcore maps.
        let longer = kallsyms(code.len() + 4096);
        assert!(error(&longer, &btf(), &path)
            .contains("only 4096 of the 8192 bytes of the kernel's code"));
        // Code without per-CPU operands.
        std::fs::write(&path, fake_kcore(TEXT, &[0x90; 4096])).expect("write");
        assert!(error(&kallsyms(4096), &btf(), &path).contains("operands"));
    }
}
