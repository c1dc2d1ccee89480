//! Reading kernel memory through BPF, for kernels without `/proc/kcore`
//! (`CONFIG_PROC_KCORE=n`, as on many cloud and microVM kernels).
//!
//! A sleepable `BPF_PROG_TYPE_SYSCALL` program, run on demand with `BPF_PROG_TEST_RUN`, copies
//! one page of kernel memory with `bpf_probe_read_kernel` into a one-entry array map, which
//! userland then reads. The program is sixteen instructions, written out below rather than
//! compiled: the project cannot assume clang with a BPF target, and loaders such as libbpf or
//! aya would bring an ELF object toolchain for a program this small. The kernel's verifier
//! checks it like any other; `bpf_probe_read_kernel` never faults, so an unmapped address only
//! gives an error code. A second program, run once, gives the calling thread's `task_struct`
//! (`bpf_get_current_task`): where kallsyms lacks `__per_cpu_offset`, the perf backend finds
//! each CPU's per-CPU offset from it (see [`super::gs_bases`]).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Bytes one run reads: a page, so that a read never spans a mapped and an unmapped page.
pub(crate) const CHUNK: usize = 4096;

// bpf(2) commands, map and program types, flags and helpers (include/uapi/linux/bpf.h).
const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_LOOKUP_ELEM: i64 = 1;
const BPF_PROG_LOAD: i64 = 5;
const BPF_PROG_TEST_RUN: i64 = 10;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_PROG_TYPE_SYSCALL: u32 = 31;
const BPF_F_SLEEPABLE: u32 = 1 << 4;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_GET_CURRENT_TASK: i32 = 35;
const HELPER_PROBE_READ_KERNEL: i32 = 113;

/// Why kernel memory cannot be read through BPF here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BpfError {
    /// bpf(2) refused a request.
    #[error("bpf({what}) failed")]
    Syscall {
        /// The request.
        what: &'static str,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The verifier refused the reader program.
    #[error("the kernel's BPF verifier refused the memory reader: {log}")]
    Verifier {
        /// The last line of the verifier's log.
        log: String,
    },
}

/// One BPF instruction: opcode, registers, offset, immediate.
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    dst: u8,
    src: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Self {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    fn encode(self) -> u64 {
        let [o0, o1] = self.off.to_le_bytes();
        let [i0, i1, i2, i3] = self.imm.to_le_bytes();
        u64::from_le_bytes([
            self.code,
            (self.src << 4) | (self.dst & 0xf),
            o0,
            o1,
            i0,
            i1,
            i2,
            i3,
        ])
    }
}

// Opcodes (class | size/op | mode/source).
const MOV64_REG: u8 = 0x07 | 0xb0 | 0x08; // BPF_ALU64 | BPF_MOV | BPF_X
const MOV64_IMM: u8 = 0x07 | 0xb0; // BPF_ALU64 | BPF_MOV | BPF_K
const ADD64_IMM: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
const LDX_DW: u8 = 0x01 | 0x18 | 0x60; // BPF_LDX | BPF_DW | BPF_MEM
const ST_W: u8 = 0x02 | 0x60; // BPF_ST | BPF_W | BPF_MEM
const STX_DW: u8 = 0x03 | 0x18 | 0x60; // BPF_STX | BPF_DW | BPF_MEM
const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_DW | BPF_IMM
const JNE_IMM: u8 = 0x05 | 0x50; // BPF_JMP | BPF_JNE | BPF_K
const CALL: u8 = 0x05 | 0x80; // BPF_JMP | BPF_CALL
const EXIT: u8 = 0x05 | 0x90; // BPF_JMP | BPF_EXIT

/// `r0 = &map[0]` (key 0 on the stack), or the program ends returning -2 when the map has
/// no entry 0. Clobbers r1 to r5, as any call does.
fn entry_0(map_fd: i32) -> [Insn; 9] {
    [
        Insn::new(ST_W, 10, 0, -4, 0), // key = 0, on the stack
        Insn::new(LD_IMM64, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), // r1 = &map
        Insn::new(0, 0, 0, 0, 0),      //   (second half of the load)
        Insn::new(MOV64_REG, 2, 10, 0, 0), // r2 = &key
        Insn::new(ADD64_IMM, 2, 0, 0, -4),
        Insn::new(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM), // r0 = &map[0]
        Insn::new(JNE_IMM, 0, 0, 2, 0),                   // found: go on
        Insn::new(MOV64_IMM, 0, 0, 0, -2),
        Insn::new(EXIT, 0, 0, 0, 0),
    ]
}

/// The reader: `ctx` holds the address; the page goes to entry 0 of the map; the program
/// returns `bpf_probe_read_kernel`'s result (0, or a negative errno), or -2 when the map has
/// no entry 0.
fn program(map_fd: i32) -> Vec<Insn> {
    let chunk = CHUNK as i32;
    let mut insns = vec![
        Insn::new(MOV64_REG, 6, 1, 0, 0), // r6 = ctx
        Insn::new(LDX_DW, 7, 6, 0, 0),    // r7 = *(u64 *)ctx: the address
    ];
    insns.extend(entry_0(map_fd));
    insns.extend([
        Insn::new(MOV64_REG, 1, 0, 0, 0),     // r1 = &map[0]
        Insn::new(MOV64_IMM, 2, 0, 0, chunk), // r2 = CHUNK
        Insn::new(MOV64_REG, 3, 7, 0, 0),     // r3 = the address
        Insn::new(CALL, 0, 0, 0, HELPER_PROBE_READ_KERNEL),
        Insn::new(EXIT, 0, 0, 0, 0),
    ]);
    insns
}

#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
}

#[repr(C)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// bpf(2) with `attr`, returning its non-negative result.
fn bpf<T>(cmd: i64, attr: &mut T, what: &'static str) -> Result<i64, BpfError> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of `union bpf_attr` for
    // `cmd`, of the size passed; the kernel reads it (and writes only within that size).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_mut(attr),
            std::mem::size_of::<T>(),
        )
    };
    if ret < 0 {
        return Err(BpfError::Syscall {
            what,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(ret)
}

fn owned_fd(fd: i64) -> OwnedFd {
    // SAFETY: bpf(2) just returned this descriptor, and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// A loaded reader program and its map.
#[derive(Debug)]
pub(crate) struct BpfReader {
    map: OwnedFd,
    prog: OwnedFd,
    page: Box<[u8; CHUNK]>,
}

/// A one-entry array map of `value_size`-byte values.
fn array_map(value_size: u32) -> Result<OwnedFd, BpfError> {
    let mut create = MapCreateAttr {
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size,
        max_entries: 1,
        map_flags: 0,
    };
    Ok(owned_fd(bpf(
        BPF_MAP_CREATE,
        &mut create,
        "BPF_MAP_CREATE",
    )?))
}

/// Loads `program` as a sleepable syscall program; a refusal gives the verifier's last word.
fn load_program(program: &[Insn]) -> Result<OwnedFd, BpfError> {
    let insns: Vec<u64> = program.iter().map(|i| i.encode()).collect();
    let mut log = vec![0u8; 64 * 1024];
    let license = c"GPL";
    let mut load = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_SYSCALL,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        kern_version: 0,
        prog_flags: BPF_F_SLEEPABLE,
    };
    match bpf(BPF_PROG_LOAD, &mut load, "BPF_PROG_LOAD") {
        Ok(fd) => Ok(owned_fd(fd)),
        Err(e) => {
            let text =
                String::from_utf8_lossy(log.split(|&b| b == 0).next().unwrap_or(&[])).into_owned();
            match text.lines().rev().find(|l| !l.trim().is_empty()) {
                Some(last) => Err(BpfError::Verifier {
                    log: last.to_owned(),
                }),
                None => Err(e),
            }
        }
    }
}

/// Runs `prog` once with `ctx`; returns the program's return value.
fn test_run(prog: &OwnedFd, ctx: &mut [u64]) -> Result<u32, BpfError> {
    let mut run = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        retval: 0,
        data_size_in: 0,
        data_size_out: 0,
        data_in: 0,
        data_out: 0,
        repeat: 0,
        duration: 0,
        ctx_size_in: std::mem::size_of_val(ctx) as u32,
        ctx_size_out: 0,
        ctx_in: ctx.as_mut_ptr() as u64,
        ctx_out: 0,
        flags: 0,
        cpu: 0,
        batch_size: 0,
        _pad: 0,
    };
    bpf(BPF_PROG_TEST_RUN, &mut run, "BPF_PROG_TEST_RUN")?;
    Ok(run.retval)
}

/// Copies entry 0 of `map` into `value`, which must be the map's value size.
fn lookup(map: &OwnedFd, value: &mut [u8]) -> Result<(), BpfError> {
    let key = 0u32;
    let mut lookup = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: std::ptr::from_ref(&key) as u64,
        value: value.as_mut_ptr() as u64,
        flags: 0,
    };
    bpf(BPF_MAP_LOOKUP_ELEM, &mut lookup, "BPF_MAP_LOOKUP_ELEM").map(|_| ())
}

/// The program behind [`current_task`]: `bpf_get_current_task()` into entry 0 of the map.
fn current_task_program(map_fd: i32) -> Vec<Insn> {
    let mut insns = entry_0(map_fd).to_vec();
    insns.extend([
        Insn::new(MOV64_REG, 6, 0, 0, 0), // r6 = &map[0], kept across the call
        Insn::new(CALL, 0, 0, 0, HELPER_GET_CURRENT_TASK),
        Insn::new(STX_DW, 6, 0, 0, 0), // map[0] = the task
        Insn::new(MOV64_IMM, 0, 0, 0, 0),
        Insn::new(EXIT, 0, 0, 0, 0),
    ]);
    insns
}

/// The address of the calling thread's `task_struct`, from a throwaway program run once
/// (`bpf_get_current_task`, which syscall programs may call since they came, in 5.14).
pub(crate) fn current_task() -> Result<u64, BpfError> {
    let map = array_map(8)?;
    let prog = load_program(&current_task_program(map.as_raw_fd()))?;
    let mut ctx = [0u64; 2];
    test_run(&prog, &mut ctx)?;
    let mut value = [0u8; 8];
    lookup(&map, &mut value)?;
    Ok(u64::from_le_bytes(value))
}

impl BpfReader {
    /// Loads the reader (needs `CAP_BPF` and `CAP_PERFMON`, or root).
    pub(crate) fn load() -> Result<Self, BpfError> {
        let map = array_map(CHUNK as u32)?;
        let prog = load_program(&program(map.as_raw_fd()))?;
        Ok(Self {
            map,
            prog,
            page: Box::new([0; CHUNK]),
        })
    }

    /// The [`CHUNK`] bytes at `address` (a multiple of [`CHUNK`]), or `None` when the kernel
    /// cannot read them.
    pub(crate) fn read_chunk(&mut self, address: u64) -> Option<&[u8; CHUNK]> {
        let mut ctx = [address, 0u64];
        if test_run(&self.prog, &mut ctx).ok()? != 0 {
            return None;
        }
        lookup(&self.map, &mut self.page[..]).ok()?;
        Some(&self.page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether BPF may be used here; with `DPROF_TEST_REQUIRE_EXTERNAL` (scripts/test, as
    /// root) it must be.
    fn bpf_allowed() -> bool {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return true;
        }
        assert!(
            std::env::var_os("DPROF_TEST_REQUIRE_EXTERNAL").is_none(),
            "the BPF tests need root"
        );
        eprintln!("skipped: the BPF tests need root");
        false
    }

    #[test]
    fn each_thread_has_its_own_task_and_the_reader_reads_it() {
        if !bpf_allowed() {
            return;
        }
        let task = current_task().expect("the task program runs");
        assert_eq!(task >> 63, 1, "{task:#x} is no kernel address");
        assert_eq!(current_task().expect("runs again"), task);
        let other = std::thread::spawn(current_task)
            .join()
            .expect("the thread ends")
            .expect("runs in another thread");
        assert_ne!(other, task);
        assert_eq!(other >> 63, 1, "{other:#x} is no kernel address");
        let mut reader = BpfReader::load().expect("the reader loads");
        let page = reader
            .read_chunk(task & !(CHUNK as u64 - 1))
            .expect("the task's page reads");
        assert!(page.iter().any(|&b| b != 0));
        // An address nothing maps is refused, not read.
        assert!(reader.read_chunk(0x10_0000).is_none());
    }
}
