use std::fmt::Write as _;

use dprof_abi::{Record, SAMPLE_USER};
use dprof_analysis::symbols::Kallsyms;
use dprof_fixtures::data_profile as example;
use dprof_fixtures::profile::software_sample;

use super::*;
use crate::scope::parse_scope;

/// `push rbp; mov rbp, rsp; mov eax, [rdi + 8]; pop rbp; ret`: 1 + 3 + 3 + 1 + 1 bytes.
const SMALL_FUNCTION: [u8; 9] = [0x55, 0x48, 0x89, 0xe5, 0x8b, 0x47, 0x08, 0x5d, 0xc3];

#[test]
fn instruction_starts_are_each_instructions_first_byte() {
    let at = 0xffff_ffff_8100_0000;
    assert_eq!(
        instruction_starts(&SMALL_FUNCTION, at),
        [at, at + 1, at + 4, at + 7, at + 8]
    );
    // An instruction cut by the end of the bytes is not one; nothing decodes from nothing.
    assert_eq!(instruction_starts(&SMALL_FUNCTION[..6], at), [at, at + 1]);
    assert!(instruction_starts(&[], at).is_empty());
    // Padding up to the next symbol is not the function's: int3, and the zeros between a
    // module's sections (`add [rax], al`); a last instruction that ends in zeros is kept.
    let mut padded = SMALL_FUNCTION.to_vec();
    padded.extend_from_slice(&[0xcc; 7]);
    padded.extend_from_slice(&[0; 6]);
    assert_eq!(
        instruction_starts(&padded, at),
        [at, at + 1, at + 4, at + 7, at + 8]
    );
    // `mov eax, [rdi + 8]; jmp +0x100` (e9 00 01 00 00), then zeros.
    let jump = [0x8b, 0x47, 0x08, 0xe9, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00];
    assert_eq!(instruction_starts(&jump, at), [at, at + 3]);
}

/// Two core-kernel networking functions, the idle loop, a helper, and a module's two
/// functions; each 0x100 bytes long (up to the next symbol).
const KALLSYMS: &str = "\
ffffffff81100000 T tcp_sendmsg
ffffffff81100100 T tcp_write_xmit
ffffffff81100200 T memcpy_orig
ffffffff81100300 T default_idle
ffffffff81100400 t init_once
ffffffff81100500 T _etext_marker
ffffffffc0000000 t ext4_da_write_begin\t[ext4]
ffffffffc0000100 t ext4_file_write_iter\t[ext4]
ffffffffc0000200 t init_once\t[ext4]
ffffffffc0000300 t dprof_on_sample\t[dprof]
ffffffffc0000400 t dprof_end\t[dprof]
";

const TCP_SENDMSG: u64 = 0xffff_ffff_8110_0000;
const TCP_WRITE_XMIT: u64 = 0xffff_ffff_8110_0100;
const MEMCPY: u64 = 0xffff_ffff_8110_0200;
const DEFAULT_IDLE: u64 = 0xffff_ffff_8110_0300;
const EXT4_WRITE_BEGIN: u64 = 0xffff_ffff_c000_0000;
const EXT4_WRITE_ITER: u64 = 0xffff_ffff_c000_0100;
const DPROF: u64 = 0xffff_ffff_c000_0300;

/// The records of a synthetic profiling phase: `n` samples at `ip` (+ 0x10) each, of pid
/// `pid`, user mode when `user`.
fn plan_records(samples: &[(u64, u32, u32, bool)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; dprof_abi::MAX_RECORD_SIZE];
    let mut time = 1_000;
    for &(ip, n, pid, user) in samples {
        for _ in 0..n {
            let mut sample = software_sample(ip + 0x10, &SMALL_FUNCTION[..1], &[], 0);
            sample.pid = pid;
            sample.tid = pid;
            if user {
                sample.flags = SAMPLE_USER;
            }
            time += 1_000;
            let size = Record::AccessSample(sample).encode(0, time, &mut buf);
            bytes.extend_from_slice(&buf[..size]);
        }
    }
    bytes
}

/// The phase: `tcp_write_xmit` 60 samples, `tcp_sendmsg` 40, `ext4_da_write_begin` 50,
/// `ext4_file_write_iter` 25, memcpy 30, the idle loop 500 (pid 0) and dprof's handler 90,
/// plus 70 user-mode samples and an interrupt on an idle CPU in `tcp_sendmsg` (pid 0,
/// counted).
fn plan() -> Vec<u8> {
    plan_records(&[
        (TCP_WRITE_XMIT, 60, 7, false),
        (TCP_SENDMSG, 39, 7, false),
        (TCP_SENDMSG, 1, 0, false),
        (EXT4_WRITE_BEGIN, 50, 9, false),
        (EXT4_WRITE_ITER, 25, 9, false),
        (MEMCPY, 30, 7, false),
        (DEFAULT_IDLE, 500, 0, false),
        (DPROF, 90, 7, false),
        (0x40_1000, 70, 7, true),
    ])
}

/// Reads the code of [`KALLSYMS`]'s functions: each is [`SMALL_FUNCTION`] padded with
/// `int3` to 0x100 bytes; ext4's `init_once` cannot be read.
fn read_code(address: u64, len: usize) -> Option<Vec<u8>> {
    if address == 0xffff_ffff_c000_0200 {
        return None;
    }
    let mut code = vec![0xcc; len];
    code[..SMALL_FUNCTION.len()].copy_from_slice(&SMALL_FUNCTION);
    Some(code)
}

fn names(chosen: &[ChosenUnit]) -> Vec<String> {
    chosen.iter().map(|c| c.spec.label()).collect()
}

#[test]
fn samples_count_for_the_function_they_fall_in_except_the_idle_loop() {
    let symbols = Kallsyms::parse(KALLSYMS.as_bytes());
    let samples = samples_by_function(&plan(), &symbols).expect("records decode");
    let by_name: BTreeMap<String, u64> = samples
        .iter()
        .map(|(&i, &n)| (symbols.symbol(i).expect("a symbol").label(), n))
        .collect();
    assert_eq!(
        by_name,
        BTreeMap::from([
            ("tcp_write_xmit".to_owned(), 60),
            ("tcp_sendmsg".to_owned(), 40),
            ("ext4_da_write_begin [ext4]".to_owned(), 50),
            ("ext4_file_write_iter [ext4]".to_owned(), 25),
            ("memcpy_orig".to_owned(), 30),
            ("dprof_on_sample [dprof]".to_owned(), 90),
        ])
    );
    // The data-profile example: every kernel sample of a function is counted, the user-mode
    // ones are not.
    let mut bytes = Vec::new();
    let mut buf = [0u8; dprof_abi::MAX_RECORD_SIZE];
    for (cpu, time, record) in example::records().iter().flatten() {
        let size = record.encode(*cpu, *time, &mut buf);
        bytes.extend_from_slice(&buf[..size]);
    }
    let symbols = Kallsyms::parse(example::KALLSYMS.as_bytes());
    let samples = samples_by_function(&bytes, &symbols).expect("records decode");
    let count = |name: &str| {
        samples
            .iter()
            .filter(|(&i, _)| symbols.symbol(i).is_some_and(|s| s.name == name))
            .map(|(_, &n)| n)
            .sum::<u64>()
    };
    assert_eq!((count("tcp_sendmsg"), count("tcp_recvmsg")), (3, 5));
}

/// "name [module]" for the test's tables.
trait Label {
    fn label(&self) -> String;
}

impl Label for dprof_analysis::symbols::Symbol {
    fn label(&self) -> String {
        function_label(&self.name, self.module.as_deref())
    }
}

#[test]
fn the_automatic_choice_takes_the_most_sampled_functions_in_scope() {
    let symbols = Kallsyms::parse(KALLSYMS.as_bytes());
    let samples = samples_by_function(&plan(), &symbols).expect("records decode");
    // Everything: dprof's own handler and the idle loop are never candidates.
    let (chosen, notes) = choose_functions(
        &Selection::Auto,
        3,
        &Scope::default(),
        &symbols,
        &samples,
        &read_code,
    )
    .expect("three functions");
    assert_eq!(
        names(&chosen),
        [
            "tcp_write_xmit",
            "ext4_da_write_begin [ext4]",
            "tcp_sendmsg"
        ]
    );
    assert!(notes.is_empty(), "{notes:?}");
    // Each is every instruction of its code, up to the int3 padding before the next symbol.
    let first = &chosen[0];
    assert_eq!(
        first.ips,
        instruction_starts(&SMALL_FUNCTION, TCP_WRITE_XMIT)
    );
    assert_eq!(first.ips.len(), 5);
    assert_eq!(
        first.spec,
        CausalTypeSpec {
            unit: CausalUnit::Function,
            name: "tcp_write_xmit".to_owned(),
            module: None,
            functions: Vec::new(),
            functions_left_out: 0,
            cache: None,
            ips: first.ips.len() as u32,
            plan_samples: 60,
        }
    );
    assert_eq!(chosen[1].spec.module.as_deref(), Some("ext4"));
    // Within `tcp_*` and ext4, memcpy is out of scope.
    let scope = parse_scope("tcp_*,[ext4]").expect("a scope");
    let (chosen, _) = choose_functions(&Selection::Auto, 6, &scope, &symbols, &samples, &read_code)
        .expect("four functions");
    assert_eq!(
        names(&chosen),
        [
            "tcp_write_xmit",
            "ext4_da_write_begin [ext4]",
            "tcp_sendmsg",
            "ext4_file_write_iter [ext4]"
        ]
    );
}

#[test]
fn named_functions_are_taken_sampled_or_not_and_unreadable_ones_are_said() {
    let symbols = Kallsyms::parse(KALLSYMS.as_bytes());
    let samples = samples_by_function(&plan(), &symbols).expect("records decode");
    let named = Selection::Named(vec!["memcpy_orig".to_owned(), "init_once".to_owned()]);
    let (chosen, notes) =
        choose_functions(&named, 6, &Scope::default(), &symbols, &samples, &read_code)
            .expect("memcpy and the core kernel's init_once");
    assert_eq!(names(&chosen), ["memcpy_orig", "init_once"]);
    assert_eq!(chosen[0].spec.plan_samples, 30);
    assert_eq!(
        notes,
        [
            "function init_once was never sampled in the profiling phase: its experiments may \
             insert no delay",
            "function init_once [ext4] is left out: its code at 0xffffffffc0000200 cannot be \
             read from /proc/kcore"
        ]
    );
}

#[test]
fn too_few_samples_in_scope_is_a_clear_error() {
    let symbols = Kallsyms::parse(KALLSYMS.as_bytes());
    let samples = samples_by_function(
        &plan_records(&[(MEMCPY, 12, 7, false), (TCP_SENDMSG, 3, 7, false)]),
        &symbols,
    )
    .expect("records decode");
    let scope = parse_scope("memcpy*,tcp_*").expect("a scope");
    let err = choose_functions(&Selection::Auto, 6, &scope, &symbols, &samples, &read_code)
        .expect_err("too few")
        .to_string();
    assert_eq!(
        err,
        "no function in --scope `memcpy*,tcp_*` had 20 samples or more in the profiling phase \
         (15 kernel samples; most sampled in scope: memcpy_orig (12), tcp_sendmsg (3)): make \
         --plan-time longer, --period shorter, or widen --scope"
    );
    let err = choose_modules(&Selection::Auto, 6, &scope, &symbols, &samples, &read_code)
        .expect_err("too few")
        .to_string();
    assert!(
        err.starts_with("no module in --scope `memcpy*,tcp_*` had 20 samples or more"),
        "{err}"
    );
}

#[test]
fn modules_take_their_most_sampled_functions_up_to_the_cap() {
    let symbols = Kallsyms::parse(KALLSYMS.as_bytes());
    let samples = samples_by_function(&plan(), &symbols).expect("records decode");
    let (chosen, notes) = choose_modules(
        &Selection::Auto,
        6,
        &Scope::default(),
        &symbols,
        &samples,
        &read_code,
    )
    .expect("two modules");
    // vmlinux: 60 + 40 + 30 samples; ext4: 75. dprof is never a candidate.
    assert_eq!(names(&chosen), ["[vmlinux]", "[ext4]"]);
    let core = &chosen[0].spec;
    assert_eq!(core.plan_samples, 130);
    // The never-sampled ones after the sampled ones, in address order.
    assert_eq!(
        core.functions,
        [
            "tcp_write_xmit",
            "tcp_sendmsg",
            "memcpy_orig",
            "default_idle",
            "init_once"
        ]
    );
    // `_etext_marker` ends 1 GiB further, at the next symbol: no code is that long.
    assert_eq!(core.functions_left_out, 1);
    let ext4 = &chosen[1].spec;
    assert_eq!(
        ext4.functions,
        ["ext4_da_write_begin", "ext4_file_write_iter"]
    );
    assert_eq!(ext4.functions_left_out, 1, "init_once cannot be read");
    assert_eq!(ext4.ips as usize, chosen[1].ips.len());
    assert!(chosen[1].ips.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        notes[1],
        "module [ext4]: its 2 most sampled functions in scope are sped up (10 instructions, 75 \
         of its 75 samples in the profiling phase); 1 could not be read or decoded"
    );
    // Named, in scope.
    let scope = parse_scope("tcp_*,[ext4]").expect("a scope");
    let (chosen, _) = choose_modules(
        &Selection::Named(vec!["vmlinux".to_owned()]),
        6,
        &scope,
        &symbols,
        &samples,
        &read_code,
    )
    .expect("vmlinux");
    assert_eq!(chosen[0].spec.functions, ["tcp_write_xmit", "tcp_sendmsg"]);
    assert_eq!(chosen[0].spec.functions_left_out, 0);
}

#[test]
fn a_module_larger_than_one_entry_keeps_its_most_sampled_functions() {
    // 40 functions of 0x1000 bytes of one-byte instructions (nop): 4096 each, so 4 fit.
    let mut kallsyms = String::new();
    let mut phase = Vec::new();
    for i in 0..40u64 {
        let address = 0xffff_ffff_8200_0000 + i * 0x1000;
        writeln!(kallsyms, "{address:x} T big_{i:02}").expect("a string");
        // Later functions are sampled more.
        phase.push((address, u32::try_from(i).expect("small"), 7, false));
    }
    kallsyms.push_str("ffffffff82028000 T end_marker\n");
    let symbols = Kallsyms::parse(kallsyms.as_bytes());
    let samples = samples_by_function(&plan_records(&phase), &symbols).expect("decode");
    let nops = |_: u64, len: usize| Some(vec![0x90; len]);
    let (chosen, notes) = choose_modules(
        &Selection::Auto,
        1,
        &Scope::default(),
        &symbols,
        &samples,
        &nops,
    )
    .expect("vmlinux");
    let spec = &chosen[0].spec;
    assert_eq!(spec.functions, ["big_39", "big_38", "big_37", "big_36"]);
    assert_eq!(spec.ips, MAX_CAUSAL_TYPE_IPS);
    assert_eq!(
        spec.functions_left_out,
        36 + 1,
        "36 that do not fit, and end_marker"
    );
    assert_eq!(
        notes,
        [format!(
            "module [vmlinux]: its 4 most sampled functions in scope are sped up (16384 \
             instructions, {} of its {} samples in the profiling phase); 37 more did not fit in \
             the 16384 instructions one entry takes",
            39 + 38 + 37 + 36,
            (0..40).sum::<u64>()
        )]
    );
}

#[test]
fn scopes_and_names_are_checked_against_kallsyms() {
    let symbols = Kallsyms::parse(KALLSYMS.as_bytes());
    let check = |unit, selection: &Selection, scope: &str| {
        let scope = if scope.is_empty() {
            Scope::default()
        } else {
            parse_scope(scope).expect("a scope")
        };
        check_units(unit, selection, &scope, &symbols).map_err(|e| e.to_string())
    };
    let named = |names: &[&str]| Selection::Named(names.iter().map(|&n| n.to_owned()).collect());
    assert_eq!(
        check(CausalUnit::Function, &Selection::Auto, "tcp_*"),
        Ok(())
    );
    assert_eq!(
        check(CausalUnit::Function, &Selection::Auto, "nfs_*,[xfs]"),
        Err("--scope `nfs_*,[xfs]` matches no kernel function in /proc/kallsyms".to_owned())
    );
    // The profiler's own functions are never in scope.
    assert!(check(CausalUnit::Module, &Selection::Auto, "[dprof]").is_err());
    assert_eq!(
        check(CausalUnit::Type, &Selection::Auto, "tcp_*"),
        Err(
            "--scope `tcp_*` limits functions and modules, not types: give --units functions \
             or --units modules with it"
                .to_owned()
        )
    );
    assert_eq!(
        check(
            CausalUnit::Function,
            &named(&["tcp_sendmsg", "no_such_fn"]),
            ""
        ),
        Err("no kernel function named `no_such_fn` in /proc/kallsyms (--functions)".to_owned())
    );
    assert_eq!(
        check(CausalUnit::Function, &named(&["memcpy_orig"]), "tcp_*"),
        Err("function `memcpy_orig` is outside --scope `tcp_*`".to_owned())
    );
    assert_eq!(
        check(CausalUnit::Module, &named(&["vmlinux", "ext4"]), ""),
        Ok(())
    );
    assert_eq!(
        check(CausalUnit::Module, &named(&["xfs"]), ""),
        Err(
            "no module named `xfs` in /proc/kallsyms (--modules; the core kernel is `vmlinux`)"
                .to_owned()
        )
    );
    assert_eq!(
        check(CausalUnit::Module, &named(&["ext4"]), "tcp_*"),
        Err("no function of module `ext4` is in --scope `tcp_*`".to_owned())
    );
    // Read without root, kallsyms has no address: the error says so.
    let hidden = Kallsyms::parse(b"0000000000000000 T tcp_sendmsg\n");
    let err = check_units(
        CausalUnit::Function,
        &Selection::Auto,
        &Scope::default(),
        &hidden,
    )
    .expect_err("nothing listed");
    assert!(err.to_string().contains("run as root"), "{err}");
}

/// The module's scope is the code of every function in scope, touching functions merged;
/// dprof's own module is never in it, and a scope of everything sends none.
#[test]
fn the_scope_goes_to_the_module_as_merged_code_ranges() {
    let symbols = Kallsyms::parse(KALLSYMS.as_bytes());
    let ranges = |s: &str| scope_ranges(&parse_scope(s).expect("a scope"), &symbols).expect("fits");
    // tcp_sendmsg and tcp_write_xmit touch: one range; ext4's three functions another.
    assert_eq!(
        ranges("tcp_*,[ext4]"),
        Some(vec![(TCP_SENDMSG, MEMCPY), (EXT4_WRITE_BEGIN, DPROF),])
    );
    // memcpy_orig left out: the ranges on either side of it stay apart.
    assert_eq!(
        ranges("tcp_sendmsg,default_idle"),
        Some(vec![
            (TCP_SENDMSG, TCP_WRITE_XMIT),
            (DEFAULT_IDLE, DEFAULT_IDLE + 0x100),
        ])
    );
    // dprof's own functions match `*` but are never in scope.
    let all_named = ranges("*");
    assert!(
        all_named
            .as_ref()
            .is_some_and(|r| r.iter().all(|&(start, end)| !(start..end).contains(&DPROF))),
        "{all_named:x?}"
    );
    assert_eq!(
        scope_ranges(&Scope::default(), &symbols).expect("fits"),
        None
    );
}
