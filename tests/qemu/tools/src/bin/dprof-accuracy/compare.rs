//! The comparison itself, on what each tool said per instruction: the typed fraction of
//! each over the same kind of samples, and where both typed an instruction, whether they
//! named the same C type.

use std::collections::BTreeMap;

use dprof_abi::SAMPLE_REGS;
use dprof_analysis::decode::{decode_insn, DecodeOutcome, NoAccess};

use crate::vmlinux::KernelCode;

/// A type as one tool named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    /// As the tool shows it (`skbuff_head_cache`, `struct sk_buff`, `global:jiffies`).
    pub shown: String,
    /// The C type, [`normalise`]d; `None` when the tool's type is no C type it knows
    /// (`kmalloc-64@site` with no struct named, user memory): not comparable.
    pub c_type: Option<String>,
}

/// What one tool said about the samples of one instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpTypes {
    /// All samples of the instruction, typed or not.
    pub samples: u64,
    /// Samples typed with a real type, by type. A dprof sample that touched two locations
    /// counts for each (see [`Typed`]).
    pub real: Vec<(Named, u64)>,
    /// Samples typed as the stack: perf's `(stack operation)` and `(stack canary)`, dprof's
    /// `stack` bucket.
    pub stack: u64,
    /// Samples typed as a region that is not one C type (dprof's user memory, vmalloc, ...).
    pub region: u64,
}

impl IpTypes {
    /// Adds `samples` of a real type.
    pub fn add_real(&mut self, named: Named, samples: u64) {
        match self.real.iter_mut().find(|(n, _)| *n == named) {
            Some((_, n)) => *n += samples,
            None => self.real.push((named, samples)),
        }
    }

    fn real_samples(&self) -> u64 {
        self.real.iter().map(|(_, n)| n).sum()
    }

    /// The real type with the most samples (ties: the first named by name order).
    fn main_real(&self) -> Option<&(Named, u64)> {
        self.real
            .iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.shown.cmp(&a.0.shown)))
    }
}

/// One tool's samples by instruction address.
pub type ByIp = BTreeMap<u64, IpTypes>;

/// Where a sampled instruction is, and whether it touches memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A user-mode address.
    User,
    /// A kernel address outside vmlinux's functions (a module: dprof.ko's own probes).
    OutsideVmlinux,
    /// An idle function: the CPU had nothing to do.
    Idle,
    /// No memory operand, or an address computed without access (`lea`, `nop`).
    NoMemoryOperand,
    /// It touches memory.
    Memory,
}

/// Functions where a CPU waits for work: perf's own list (`symbol__is_idle` in
/// tools/perf/util/symbol.c) and the x86 paravirt halt and idle loop around it.
const IDLE_FUNCTIONS: [&str; 17] = [
    "acpi_idle_do_entry",
    "acpi_processor_ffh_cstate_enter",
    "arch_cpu_idle",
    "cpu_idle",
    "cpu_startup_entry",
    "idle_cpu",
    "intel_idle",
    "intel_idle_ibrs",
    "default_idle",
    "native_safe_halt",
    "mwait_idle",
    "mwait_idle_with_hints",
    "poll_idle",
    "pv_native_safe_halt",
    "default_idle_call",
    "do_idle",
    "cpu_idle_poll",
];

/// Start of the kernel half of the x86-64 address space.
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// Where `ip` is: the instruction is decoded from the vmlinux, the same bytes for both
/// tools, so that both fractions have one denominator rule.
pub fn place(code: &dyn KernelCode, ip: u64) -> Place {
    if ip < KERNEL_START {
        return Place::User;
    }
    let Some(function) = code.function(ip) else {
        return Place::OutsideVmlinux;
    };
    if IDLE_FUNCTIONS.contains(&function) {
        return Place::Idle;
    }
    let Some(bytes) = code.code_at(ip) else {
        return Place::OutsideVmlinux;
    };
    let Ok(insn) = decode_insn(bytes, ip) else {
        return Place::NoMemoryOperand;
    };
    match insn.access(&[0; SAMPLE_REGS], 0) {
        DecodeOutcome::None(NoAccess::NoMemoryOperand | NoAccess::AddressOnly) => {
            Place::NoMemoryOperand
        }
        _ => Place::Memory,
    }
}

/// One tool's samples by place, and how many of the memory-operand ones it typed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Typed {
    /// Every sample.
    pub samples: u64,
    /// User-mode samples.
    pub user: u64,
    /// Kernel samples outside vmlinux.
    pub outside_vmlinux: u64,
    /// Samples in idle functions.
    pub idle: u64,
    /// Samples of instructions without a memory operand.
    pub no_memory_operand: u64,
    /// Samples of vmlinux instructions that touch memory, idle left out: the denominator.
    pub memory: u64,
    /// Of them, typed with a real type. An instruction's samples count at most once: with
    /// `push (%rax)` dprof types both the stack and `(%rax)`.
    pub real: u64,
    /// Of them, typed with a real type or the stack.
    pub with_stack: u64,
    /// Of them, typed with a real type, the stack or a region (dprof's user memory,
    /// vmalloc, ...).
    pub with_regions: u64,
}

impl Typed {
    /// `part` of the memory-operand samples, in percent.
    pub fn percent(&self, part: u64) -> f64 {
        if self.memory == 0 {
            0.0
        } else {
            part as f64 * 100.0 / self.memory as f64
        }
    }
}

/// Counts one tool's samples by place and typing.
pub fn typed(by_ip: &ByIp, code: &dyn KernelCode) -> Typed {
    let mut t = Typed::default();
    for (&ip, types) in by_ip {
        t.samples += types.samples;
        match place(code, ip) {
            Place::User => t.user += types.samples,
            Place::OutsideVmlinux => t.outside_vmlinux += types.samples,
            Place::Idle => t.idle += types.samples,
            Place::NoMemoryOperand => t.no_memory_operand += types.samples,
            Place::Memory => {
                let real = types.real_samples();
                t.memory += types.samples;
                t.real += real.min(types.samples);
                t.with_stack += (real + types.stack).min(types.samples);
                t.with_regions += (real + types.stack + types.region).min(types.samples);
            }
        }
    }
    t
}

/// One instruction both tools typed, with different C types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// The instruction.
    pub ip: u64,
    /// Its function.
    pub function: String,
    /// perf's type.
    pub perf: String,
    /// dprof's type, as dprof shows it.
    pub dprof: String,
    /// dprof's type as a C type, when it has one.
    pub dprof_c_type: Option<String>,
    /// Both tools' real-typed samples of the instruction.
    pub samples: u64,
}

/// How often the two tools name the same type where both typed an instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Agreement {
    /// Instructions both typed with a real type.
    pub instructions: usize,
    /// Their samples, both tools' real-typed samples added: the weight of each instruction.
    pub samples: u64,
    /// Of them, where dprof's type has a C type, compared.
    pub compared: u64,
    /// Of the compared, where both name the same C type.
    pub agreed: u64,
    /// Of the agreed, where one named `struct page` and the other a type that overlays it
    /// ([`PAGE_OVERLAYS`]).
    pub agreed_as_page_overlay: u64,
    /// Instructions one tool typed as the stack and the other with a real type (the
    /// samples: both tools' for the instruction), most samples first.
    pub stack_against_real: Vec<Disagreement>,
    /// The compared instructions where the types differ, most samples first; then those
    /// whose dprof type has no C type.
    pub disagreements: Vec<Disagreement>,
    /// Instructions whose dprof type has no C type, most samples first.
    pub not_comparable: Vec<Disagreement>,
}

impl Agreement {
    /// Agreed samples in percent of the compared.
    pub fn percent(&self) -> f64 {
        if self.compared == 0 {
            0.0
        } else {
            self.agreed as f64 * 100.0 / self.compared as f64
        }
    }
}

/// Compares, instruction by instruction, the type each tool gave most of its samples of it:
/// the runs are separate, so samples cannot be paired, but an instruction's operand has one
/// type in a kernel without `void *` games.
pub fn agreement(perf: &ByIp, dprof: &ByIp, code: &dyn KernelCode) -> Agreement {
    let mut out = Agreement::default();
    for (&ip, p) in perf {
        let Some(d) = dprof.get(&ip) else { continue };
        if place(code, ip) != Place::Memory {
            continue;
        }
        let stack_case = |perf: String, dprof: String, samples| Disagreement {
            ip,
            function: code.function(ip).unwrap_or("?").to_owned(),
            perf,
            dprof,
            dprof_c_type: None,
            samples,
        };
        let (Some((p_type, _)), Some((d_type, _))) = (p.main_real(), d.main_real()) else {
            if let (Some((p_type, n)), 1..) = (p.main_real(), d.stack) {
                let case = stack_case(p_type.shown.clone(), "stack".into(), n + d.stack);
                out.stack_against_real.push(case);
            } else if let (Some((d_type, n)), 1..) = (d.main_real(), p.stack) {
                let case = stack_case("(stack)".into(), d_type.shown.clone(), n + p.stack);
                out.stack_against_real.push(case);
            }
            continue;
        };
        let weight = p.real_samples() + d.real_samples();
        out.instructions += 1;
        out.samples += weight;
        let case = Disagreement {
            ip,
            function: code.function(ip).unwrap_or("?").to_owned(),
            perf: p_type.shown.clone(),
            dprof: d_type.shown.clone(),
            dprof_c_type: d_type.c_type.clone(),
            samples: weight,
        };
        match &d_type.c_type {
            None => out.not_comparable.push(case),
            Some(c) => {
                out.compared += weight;
                let perf_c = p_type.c_type.as_deref().unwrap_or_default();
                if c == perf_c {
                    out.agreed += weight;
                } else if PAGE_OVERLAYS.contains(&c.as_str()) && PAGE_OVERLAYS.contains(&perf_c) {
                    out.agreed += weight;
                    out.agreed_as_page_overlay += weight;
                } else {
                    out.disagreements.push(case);
                }
            }
        }
    }
    for list in [
        &mut out.disagreements,
        &mut out.not_comparable,
        &mut out.stack_against_real,
    ] {
        list.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.ip.cmp(&b.ip)));
    }
    out
}

/// Structs that are one `struct page` seen another way: the kernel asserts their layouts
/// overlay it (`FOLIO_MATCH`, `SLAB_MATCH`, `TABLE_MATCH` in `include/linux/mm_types.h` and
/// `mm/slab.h`). dprof names a `vmemmap` address `struct page`; perf names the pointer's type.
pub const PAGE_OVERLAYS: [&str; 4] = ["page", "folio", "slab", "ptdesc"];

/// A type name as both tools' names compare: `struct`, `union`, `enum` and qualifiers
/// dropped, and pointers and arrays reduced to what they point to (`struct sock *` and
/// `sock`, `struct rq[]` and `rq` are one).
pub fn normalise(name: &str) -> String {
    let mut s = name.trim();
    loop {
        let before = s;
        for prefix in ["const ", "volatile ", "struct ", "union ", "enum "] {
            s = s.strip_prefix(prefix).unwrap_or(s).trim_start();
        }
        s = s.trim_end();
        if let Some(rest) = s.strip_suffix('*') {
            s = rest;
        } else if s.ends_with(']') {
            if let Some(open) = s.rfind('[') {
                s = &s[..open];
            }
        } else if let Some(rest) = s.strip_suffix(" const") {
            s = rest;
        }
        if s == before {
            return s.to_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Functions `f` at `BASE` and `default_idle` at `BASE + 0x1000`; the code: `mov
    /// 8(%rdi),%rax` at `BASE`, `lea 8(%rdi),%rax` at +4, `push %rbp` at +8, `mov %rdi,%rax`
    /// at +9, and past them `mov 8(%rdi),%rax` again wherever asked.
    struct Code;

    const BASE: u64 = 0xffff_ffff_8100_0000;
    const CODE: [u8; 12] = [
        0x48, 0x8b, 0x47, 0x08, // mov 0x8(%rdi),%rax
        0x48, 0x8d, 0x47, 0x08, // lea 0x8(%rdi),%rax
        0x55, // push %rbp
        0x48, 0x89, 0xf8, // mov %rdi,%rax
    ];

    impl KernelCode for Code {
        fn function(&self, ip: u64) -> Option<&str> {
            match ip.checked_sub(BASE)? {
                0..=0xfff => Some("f"),
                0x1000..=0x1fff => Some("default_idle"),
                _ => None,
            }
        }
        fn code_at(&self, ip: u64) -> Option<&[u8]> {
            let at = usize::try_from(ip.checked_sub(BASE)?).ok()?;
            CODE.get(at..)
                .or(Some(&CODE[..4]))
                .filter(|c| !c.is_empty())
        }
    }

    fn named(shown: &str, c_type: Option<&str>) -> Named {
        Named {
            shown: shown.into(),
            c_type: c_type.map(normalise),
        }
    }

    #[test]
    fn places_instructions_by_function_and_operand() {
        assert_eq!(place(&Code, 0x40_0000), Place::User);
        assert_eq!(place(&Code, BASE), Place::Memory);
        assert_eq!(place(&Code, BASE + 4), Place::NoMemoryOperand);
        assert_eq!(place(&Code, BASE + 8), Place::Memory);
        assert_eq!(place(&Code, BASE + 9), Place::NoMemoryOperand);
        assert_eq!(place(&Code, BASE + 0x1000), Place::Idle);
        assert_eq!(place(&Code, BASE + 0x9000), Place::OutsideVmlinux);
    }

    #[test]
    fn counts_typed_samples_over_memory_operand_samples_only() {
        let mut by_ip = ByIp::new();
        let mut at = |ip, samples, real: &[(&str, u64)], stack| {
            let e = by_ip.entry(ip).or_default();
            e.samples += samples;
            for (t, n) in real {
                e.add_real(named(t, Some(t)), *n);
            }
            e.stack += stack;
        };
        at(BASE, 10, &[("struct sock", 6)], 0);
        // push (%rax)-like: one sample typed twice counts once.
        at(BASE + 8, 4, &[("struct file", 4)], 4);
        at(BASE + 4, 3, &[], 0);
        at(BASE + 0x1000, 7, &[], 0);
        at(0x40_0000, 2, &[], 0);
        at(BASE + 0x9000, 5, &[], 0);
        // Typed only as a region.
        at(BASE + 0x10, 2, &[], 0);
        if let Some(e) = by_ip.get_mut(&(BASE + 0x10)) {
            e.region = 2;
        }
        let t = typed(&by_ip, &Code);
        assert_eq!(
            (
                t.samples,
                t.user,
                t.outside_vmlinux,
                t.idle,
                t.no_memory_operand
            ),
            (33, 2, 5, 7, 3)
        );
        assert_eq!(
            (t.memory, t.real, t.with_stack, t.with_regions),
            (16, 10, 10, 12)
        );
        assert!((t.percent(t.real) - 62.5).abs() < 0.01);
        assert!(Typed::default().percent(0).abs() < f64::EPSILON);
    }

    #[test]
    fn compares_the_main_type_of_each_instruction_both_typed() {
        let mut perf = ByIp::new();
        let mut dprof = ByIp::new();
        let p = perf.entry(BASE).or_default();
        p.samples = 5;
        p.add_real(named("struct sock", Some("struct sock")), 5);
        let d = dprof.entry(BASE).or_default();
        d.samples = 3;
        d.add_real(named("TCP", Some("sock")), 2);
        d.add_real(named("kmalloc-64@f", None), 1);
        // One both typed, differently; weighted by both tools' samples.
        let p = perf.entry(BASE + 8).or_default();
        p.samples = 4;
        p.add_real(named("long unsigned int", Some("long unsigned int")), 4);
        let d = dprof.entry(BASE + 8).or_default();
        d.samples = 2;
        d.add_real(named("skbuff_head_cache", Some("sk_buff")), 2);
        let a = agreement(&perf, &dprof, &Code);
        assert_eq!(
            (a.instructions, a.samples, a.compared, a.agreed),
            (2, 14, 14, 8)
        );
        assert!((a.percent() - 57.142).abs() < 0.01);
        assert_eq!(a.disagreements.len(), 1);
        let d = &a.disagreements[0];
        assert_eq!(
            (d.ip, d.function.as_str(), d.perf.as_str()),
            (BASE + 8, "f", "long unsigned int")
        );
        assert_eq!(d.dprof_c_type.as_deref(), Some("sk_buff"));
    }

    #[test]
    fn a_folio_is_its_struct_page() {
        let mut perf = ByIp::new();
        let mut dprof = ByIp::new();
        let p = perf.entry(BASE).or_default();
        p.samples = 3;
        p.add_real(named("struct folio", Some("struct folio")), 3);
        let d = dprof.entry(BASE).or_default();
        d.samples = 1;
        d.add_real(named("struct page", Some("struct page")), 1);
        let a = agreement(&perf, &dprof, &Code);
        assert_eq!((a.compared, a.agreed, a.agreed_as_page_overlay), (4, 4, 4));
        assert!(a.disagreements.is_empty());
    }

    #[test]
    fn keeps_types_without_a_c_name_and_stack_answers_apart() {
        let mut perf = ByIp::new();
        let mut dprof = ByIp::new();
        let p = perf.entry(BASE).or_default();
        p.samples = 5;
        p.add_real(named("struct linux_binprm", Some("struct linux_binprm")), 5);
        let d = dprof.entry(BASE).or_default();
        d.samples = 2;
        d.add_real(named("kmalloc-512@alloc_bprm", None), 2);
        let p = perf.entry(BASE + 8).or_default();
        p.samples = 3;
        p.stack = 3;
        let d = dprof.entry(BASE + 8).or_default();
        d.samples = 1;
        d.add_real(named("global:x", Some("int")), 1);
        let a = agreement(&perf, &dprof, &Code);
        assert_eq!(
            (a.instructions, a.compared, a.stack_against_real.len()),
            (1, 0, 1)
        );
        assert_eq!(a.not_comparable.len(), 1);
        assert!(a.percent().abs() < f64::EPSILON);
        let s = &a.stack_against_real[0];
        assert_eq!(
            (s.perf.as_str(), s.dprof.as_str(), s.samples),
            ("(stack)", "global:x", 4)
        );
    }

    #[test]
    fn normalises_c_type_spellings() {
        for (a, b) in [
            ("struct sock", "sock"),
            ("struct sock*", "sock"),
            ("const struct sock *", "sock"),
            ("struct rq[]", "rq"),
            ("struct page [64]", "page"),
            ("long unsigned int", "long unsigned int"),
            ("union bpf_attr", "bpf_attr"),
            ("char const*", "char"),
            ("  atomic_t ", "atomic_t"),
        ] {
            assert_eq!(normalise(a), b, "{a}");
        }
    }
}
