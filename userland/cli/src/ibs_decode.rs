//! `dprof ibs-decode`: AMD IBS op registers, field by field, and what they say.

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::process::ExitCode;

use anyhow::bail;
use dprof_ibs::{
    CacheHitState, Caps, CountUnit, CpuModel, DataSource, DataSrcEncoding, FieldSpec, IbsBrTarget,
    IbsDcLinAd, IbsDcPhysAd, IbsOpCtl, IbsOpData, IbsOpData2, IbsOpData3, IbsOpData4, IbsOpRip,
    IbsOpSample, Interpretation, MemLevel, Platform, Register, TlbOutcome,
};
use serde_json::{json, Map, Value};

/// Decode an AMD IBS op sample: every register field, then what the sample means.
///
/// The input is either one raw blob or register values by name.
///
/// A raw blob is the PERF_SAMPLE_RAW data perf records for the ibs_op PMU, in hex, bytes
/// in order: a 4-byte little-endian caps word, then IbsOpCtl, IbsOpRip, IbsOpData,
/// IbsOpData2, IbsOpData3, IbsDcLinAd, IbsDcPhysAd as little-endian u64s, then IbsBrTarget
/// if caps has BRNTRGT (bit 5) and IbsOpData4 if caps has OPDATA4 (bit 10): 60, 68 or 76
/// bytes. It may be split over several arguments (as `xxd -p` prints it) and may start with
/// 0x.
///
/// Registers by name are NAME=HEX arguments, each a 64-bit value (0x optional):
///   caps= ctl= rip= data= data2= data3= linad= physad= brtarget= data4=
/// Registers not given are zero. Without caps=, brtarget= and data4= are taken as present
/// and the extended MaxCnt (OPCNTEXT) as supported.
///
/// The DataSrc field of IbsOpData2 has two encodings. Like the kernel, dprof uses the Zen4
/// table when caps has ZEN4 (bit 11) and the older one otherwise; --zen4 or --pre-zen4
/// overrides that. Without caps and without either option it assumes pre-Zen4 unless
/// data_src_hi is non-zero (only Zen4 defines it), and says so.
///
/// Examples:
///   dprof ibs-decode ctl=0x60010 data3=0x100081 data2=0x13 --zen4
///   dprof ibs-decode 5f000000 1000060000000000 bc0a0081ffffffff 0000000000000000 \
///     0300000000000000 8100060000000000 785634128088ffff 7856341200000000
///
/// Output: the caps word, each register with its fields (named as in Linux's
/// asm/amd-ibs.h), then the interpretation: memory op, data source, memory level as perf
/// would report it, cache-hit state, DC/L2 miss, DC miss latency, data TLB level and page
/// size, TLB refill latency, access width, the addresses the valid bits allow, and the
/// sampling period. --json prints the same as one JSON document, addresses as "0x..."
/// strings.
///
/// Input that is not hex, or a blob whose length does not match its caps word, is refused
/// with one line and exit status 1.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[expect(
    clippy::doc_markdown,
    reason = "this is --help text, where backticks would show"
)]
pub struct IbsDecodeArgs {
    /// A raw blob in hex (possibly split over several arguments), or NAME=HEX registers.
    #[arg(value_name = "HEX", required = true)]
    input: Vec<String>,
    /// Read DataSrc with the Zen4 (5-bit) table.
    #[arg(long, conflicts_with = "pre_zen4")]
    zen4: bool,
    /// Read DataSrc with the pre-Zen4 (3-bit) table.
    #[arg(long)]
    pre_zen4: bool,
    /// CPU family and model, e.g. 0x19:0x01 or 25:1 (decimal as in /proc/cpuinfo), for
    /// the erratum and cache_hit_st quirks the kernel applies per model.
    #[arg(long, value_name = "FAMILY:MODEL", value_parser = parse_cpu)]
    cpu: Option<CpuModel>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_cpu(text: &str) -> Result<CpuModel, String> {
    let (family, model) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not FAMILY:MODEL"))?;
    let number = |s: &str| {
        match s.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => s.parse(),
        }
        .map_err(|_| format!("{s:?} is not a number (decimal, or hex with 0x)"))
    };
    Ok(CpuModel {
        family: number(family)?,
        model: number(model)?,
    })
}

/// Where the `DataSrc` table choice came from.
enum EncodingSource {
    Flag,
    Caps,
    Assumed,
}

impl EncodingSource {
    fn as_str(&self) -> &'static str {
        match self {
            EncodingSource::Flag => "option",
            EncodingSource::Caps => "caps",
            EncodingSource::Assumed => "assumed",
        }
    }
}

struct Decoded {
    sample: IbsOpSample,
    from_blob: bool,
    caps_given: bool,
    platform: Platform,
    encoding_source: EncodingSource,
    notes: Vec<String>,
}

const REGISTER_NAMES: [&str; 10] = [
    "caps", "ctl", "rip", "data", "data2", "data3", "linad", "physad", "brtarget", "data4",
];

pub fn run(args: &IbsDecodeArgs) -> anyhow::Result<ExitCode> {
    let decoded = decode(args)?;
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&json_of(&decoded))?;
        s.push('\n');
        s
    } else {
        text_of(&decoded)
    };
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // `dprof ibs-decode ... | head` is not an error.
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn decode(args: &IbsDecodeArgs) -> anyhow::Result<Decoded> {
    let named = args.input.iter().filter(|a| a.contains('=')).count();
    let (sample, from_blob, caps_given) = if named == 0 {
        (sample_from_blob(&args.input)?, true, true)
    } else if named == args.input.len() {
        let (sample, caps_given) = sample_from_registers(&args.input)?;
        (sample, false, caps_given)
    } else {
        bail!("give either one raw blob or NAME=HEX registers, not both");
    };
    let mut notes = Vec::new();
    let from_caps = DataSrcEncoding::from_caps(sample.caps);
    let flag = if args.zen4 {
        Some(DataSrcEncoding::Zen4)
    } else if args.pre_zen4 {
        Some(DataSrcEncoding::PreZen4)
    } else {
        None
    };
    let (encoding, encoding_source) = match flag {
        Some(encoding) => {
            if caps_given && encoding != from_caps {
                notes.push(format!(
                    "the option overrides caps, which say {}",
                    from_caps.as_str()
                ));
            }
            (encoding, EncodingSource::Flag)
        }
        None if caps_given => (from_caps, EncodingSource::Caps),
        None if sample.op_data2.data_src_hi() != 0 => {
            notes.push(
                "no caps given: assuming the Zen4 DataSrc table because data_src_hi is \
                 non-zero (--pre-zen4 to override)"
                    .to_owned(),
            );
            (DataSrcEncoding::Zen4, EncodingSource::Assumed)
        }
        None => {
            notes.push(
                "no caps given: assuming the pre-Zen4 DataSrc table (--zen4 for Zen4 and later)"
                    .to_owned(),
            );
            (DataSrcEncoding::PreZen4, EncodingSource::Assumed)
        }
    };
    if !sample.is_valid() {
        notes.push(
            "op_val is clear: the registers hold no valid sample (perf drops such samples)"
                .to_owned(),
        );
    }
    let unknown = sample.caps.unknown_bits();
    if caps_given && unknown != 0 {
        notes.push(format!("caps bits {unknown:#x} have no name in Linux 6.12"));
    }
    Ok(Decoded {
        sample,
        from_blob,
        caps_given,
        platform: Platform {
            encoding,
            cpu: args.cpu,
        },
        encoding_source,
        notes,
    })
}

fn sample_from_blob(input: &[String]) -> anyhow::Result<IbsOpSample> {
    let mut nibbles = Vec::new();
    for arg in input {
        let digits = arg
            .strip_prefix("0x")
            .or_else(|| arg.strip_prefix("0X"))
            .unwrap_or(arg);
        for c in digits.chars() {
            let Some(nibble) = c.to_digit(16) else {
                bail!(
                    "{c:?} in {arg:?} is not a hex digit; give a raw blob in hex or NAME=HEX \
                     registers"
                );
            };
            nibbles.push(nibble as u8);
        }
    }
    if !nibbles.len().is_multiple_of(2) {
        bail!(
            "the blob has an odd number of hex digits ({}), so it is not whole bytes",
            nibbles.len()
        );
    }
    let bytes: Vec<u8> = nibbles
        .chunks_exact(2)
        .map(|pair| (pair[0] << 4) | pair[1])
        .collect();
    Ok(IbsOpSample::decode(&bytes)?)
}

fn parse_hex_u64(name: &str, value: &str) -> anyhow::Result<u64> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("{name}={value}: {value:?} is not a hexadecimal number");
    }
    let Ok(n) = u64::from_str_radix(digits, 16) else {
        bail!("{name}={value}: the value does not fit in 64 bits");
    };
    Ok(n)
}

/// The sample the NAME=HEX arguments describe, and whether caps was among them.
fn sample_from_registers(input: &[String]) -> anyhow::Result<(IbsOpSample, bool)> {
    let mut values: [Option<u64>; REGISTER_NAMES.len()] = [None; REGISTER_NAMES.len()];
    for arg in input {
        let (name, value) = arg.split_once('=').unwrap_or((arg, ""));
        let Some(index) = REGISTER_NAMES.iter().position(|&n| n == name) else {
            bail!(
                "unknown register {name:?}; the names are {}",
                REGISTER_NAMES.join(", ")
            );
        };
        if values[index].is_some() {
            bail!("{name}= is given twice");
        }
        values[index] = Some(parse_hex_u64(name, value)?);
    }
    let get = |name: &str| {
        REGISTER_NAMES
            .iter()
            .position(|&n| n == name)
            .and_then(|i| values[i])
    };
    let caps = match get("caps") {
        Some(caps) => {
            let Ok(caps) = u32::try_from(caps) else {
                bail!("caps={caps:#x}: the caps word is 32 bits");
            };
            let caps = Caps(caps);
            for (name, bit, bit_name) in [
                ("brtarget", Caps::BRNTRGT, "BRNTRGT (bit 5)"),
                ("data4", Caps::OPDATA4, "OPDATA4 (bit 10)"),
            ] {
                if get(name).is_some() && !caps.contains(bit) {
                    bail!("{name}= is given but caps {:#x} lacks {bit_name}", caps.0);
                }
            }
            Some(caps)
        }
        None => None,
    };
    let caps_given = caps.is_some();
    let caps = caps.unwrap_or_else(|| {
        let mut caps = Caps::AVAIL | Caps::OPSAM | Caps::OPCNTEXT;
        if get("brtarget").is_some() {
            caps = caps | Caps::BRNTRGT;
        }
        if get("data4").is_some() {
            caps = caps | Caps::OPDATA4;
        }
        caps
    });
    let reg = |name: &str| get(name).unwrap_or(0);
    let sample = IbsOpSample {
        caps,
        op_ctl: IbsOpCtl(reg("ctl")),
        op_rip: IbsOpRip(reg("rip")),
        op_data: IbsOpData(reg("data")),
        op_data2: IbsOpData2(reg("data2")),
        op_data3: IbsOpData3(reg("data3")),
        dc_lin_ad: IbsDcLinAd(reg("linad")),
        dc_phys_ad: IbsDcPhysAd(reg("physad")),
        br_target: caps
            .contains(Caps::BRNTRGT)
            .then(|| IbsBrTarget(reg("brtarget"))),
        op_data4: caps
            .contains(Caps::OPDATA4)
            .then(|| IbsOpData4(reg("data4"))),
    };
    Ok((sample, caps_given))
}

/// Each register in blob order with its value, `None` when the blob has no such register.
fn registers(sample: &IbsOpSample) -> [(Register, Option<u64>); 9] {
    [
        (Register::OpCtl, Some(sample.op_ctl.raw())),
        (Register::OpRip, Some(sample.op_rip.raw())),
        (Register::OpData, Some(sample.op_data.raw())),
        (Register::OpData2, Some(sample.op_data2.raw())),
        (Register::OpData3, Some(sample.op_data3.raw())),
        (Register::DcLinAd, Some(sample.dc_lin_ad.raw())),
        (Register::DcPhysAd, Some(sample.dc_phys_ad.raw())),
        (Register::BrTarget, sample.br_target.map(IbsBrTarget::raw)),
        (Register::OpData4, sample.op_data4.map(IbsOpData4::raw)),
    ]
}

fn why_absent(d: &Decoded, register: Register) -> &'static str {
    match register {
        _ if !d.caps_given => "not given",
        Register::BrTarget => "caps lacks BRNTRGT",
        Register::OpData4 => "caps lacks OPDATA4",
        _ => "not in the blob",
    }
}

fn encoding_reason(d: &Decoded) -> String {
    match d.encoding_source {
        EncodingSource::Flag => "chosen by option".to_owned(),
        EncodingSource::Caps if d.sample.caps.contains(Caps::ZEN4) => "caps has ZEN4".to_owned(),
        EncodingSource::Caps => "caps lacks ZEN4".to_owned(),
        EncodingSource::Assumed => "assumed, see note".to_owned(),
    }
}

fn yes_no(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

fn or_dash<T>(value: Option<T>, show: impl Fn(T) -> String) -> String {
    value.map_or_else(|| "-".to_owned(), show)
}

fn addr(value: u64) -> String {
    format!("{value:#x}")
}

fn field_text(spec: &FieldSpec, value: u64) -> String {
    if spec.width == 1 || value < 10 {
        value.to_string()
    } else {
        format!("{value} ({value:#x})")
    }
}

fn mem_level_text(level: MemLevel) -> String {
    match level {
        MemLevel::Source(source) => format!("{source} (past L2)"),
        other => other.to_string(),
    }
}

fn period_text(i: &Interpretation) -> String {
    let unit = match i.count_unit {
        CountUnit::Cycles => "cycles",
        CountUnit::DispatchedOps => "dispatched ops",
    };
    format!("{} {unit} ({:#x})", i.period, i.period)
}

fn text_of(d: &Decoded) -> String {
    let s = &d.sample;
    let mut out = String::new();
    let input = if d.from_blob {
        format!("raw blob, {} bytes", IbsOpSample::raw_len(s.caps))
    } else {
        "registers by name".to_owned()
    };
    let _ = writeln!(out, "input: {input}");
    let caps_note = if d.caps_given {
        ""
    } else {
        " (not given; assumed)"
    };
    let _ = writeln!(out, "caps: {}{caps_note}", s.caps);
    for note in &d.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for (register, value) in registers(s) {
        let _ = writeln!(out);
        let Some(value) = value else {
            let _ = writeln!(
                out,
                "{:<13}not present ({})",
                register.name(),
                why_absent(d, register)
            );
            continue;
        };
        let _ = writeln!(out, "{:<13}{value:#018x}", register.name());
        for spec in register.fields() {
            let _ = writeln!(
                out,
                "  {:<26}{}",
                spec.name,
                field_text(spec, spec.extract(value))
            );
        }
        let reserved = value & register.reserved_mask();
        if reserved != 0 {
            let _ = writeln!(out, "  {:<26}{reserved:#x}", "(reserved bits set)");
        }
        if register == Register::OpData4 {
            let _ = writeln!(out, "  (Linux 6.12 defines no fields for IbsOpData4)");
        }
    }
    interpretation_text(d, &mut out);
    out
}

/// The interpretation rows of the text output.
fn interpretation_text(d: &Decoded, out: &mut String) {
    let s = &d.sample;
    let i = s.interpret(d.platform);
    let p = d.platform;
    let mut rows: Vec<(&str, String)> = vec![
        (
            "DataSrc table",
            format!("{} ({})", p.encoding.as_str(), encoding_reason(d)),
        ),
        ("valid sample", yes_no(Some(i.valid)).to_owned()),
        (
            "rip",
            or_dash(i.rip, addr)
                + if s.op_data.op_rip_invalid() {
                    " (op_rip_invalid)"
                } else {
                    ""
                },
        ),
        ("memory op", i.mem_op.as_str().to_owned()),
        (
            "data source",
            or_dash(i.data_source, |src| {
                format!("{src} [code {}]", p.encoding.code(s.effective_data2(p)))
            }),
        ),
        ("memory level", mem_level_text(i.mem_level)),
        (
            "cache hit state",
            or_dash(i.cache_hit_state, |h| match h {
                CacheHitState::Modified => "M (modified; perf: HITM)".to_owned(),
                CacheHitState::Owned => "O (owned)".to_owned(),
            }),
        ),
        ("DC miss", yes_no(i.dc_miss).to_owned()),
        ("L2 miss", yes_no(i.l2_miss).to_owned()),
        (
            "DC miss latency",
            or_dash(i.dc_miss_latency, |n| format!("{n} cycles")),
        ),
        ("data TLB", or_dash(i.tlb, |t: TlbOutcome| t.to_string())),
        (
            "TLB refill latency",
            or_dash(i.tlb_refill_latency, |n| format!("{n} cycles")),
        ),
        (
            "access width",
            or_dash(i.access_width, |n| format!("{n} bytes")),
        ),
        (
            "access flags",
            or_dash(Some(flag_names(s)).filter(|f| !f.is_empty()), |f| {
                f.join(" ")
            }),
        ),
        ("linear address", or_dash(i.linear_address, addr)),
        ("physical address", or_dash(i.physical_address, addr)),
        ("branch target", or_dash(i.branch_target, addr)),
        ("period", period_text(&i)),
    ];
    if let Some(count) = s.op_ctl.count(s.caps).filter(|&c| c != i.period) {
        rows.push(("current count", count.to_string()));
    }
    let _ = writeln!(out, "\ninterpretation:");
    for (label, value) in rows {
        let _ = writeln!(out, "  {label:<20}{value}");
    }
}

/// The `IbsOpData3` access attributes that are set, for a memory op.
fn flag_names(s: &IbsOpSample) -> Vec<&'static str> {
    let d3 = s.op_data3;
    if matches!(s.mem_op(), dprof_ibs::MemOp::NotMemory) {
        return Vec::new();
    }
    [
        (d3.dc_locked_op(), "locked"),
        (d3.dc_mis_acc(), "misaligned"),
        (d3.dc_uc_mem_acc(), "uncacheable"),
        (d3.dc_wc_mem_acc(), "write-combining"),
        (d3.sw_pf(), "software-prefetch"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect()
}

fn json_of(d: &Decoded) -> Value {
    let s = &d.sample;
    let i = s.interpret(d.platform);
    let p = d.platform;
    let mut regs = Map::new();
    for (register, value) in registers(s) {
        let entry = value.map_or(Value::Null, |value| {
            let fields: Map<String, Value> = register
                .fields()
                .iter()
                .map(|f| (f.name.to_owned(), json!(f.extract(value))))
                .collect();
            let mut entry = json!({ "raw": addr(value) });
            if !fields.is_empty() {
                entry["fields"] = Value::Object(fields);
            }
            entry
        });
        regs.insert(register.name().to_owned(), entry);
    }
    let tlb = i.tlb.map(|t| match t {
        TlbOutcome::L1Hit(size) => json!({ "level": "l1_hit", "page_size": size.as_str() }),
        TlbOutcome::L2Hit(size) => json!({ "level": "l2_hit", "page_size": size.as_str() }),
        TlbOutcome::L2Miss => json!({ "level": "l2_miss", "page_size": null }),
    });
    let mem_level = match i.mem_level {
        MemLevel::Source(source) => source.as_str(),
        other => other.as_str(),
    };
    json!({
        "input": if d.from_blob { "blob" } else { "registers" },
        "caps": {
            "raw": format!("{:#x}", s.caps.0),
            "names": s.caps.names().collect::<Vec<_>>(),
            "given": d.caps_given,
        },
        "notes": d.notes,
        "registers": regs,
        "interpretation": {
            "data_src_table": p.encoding.as_str(),
            "data_src_table_from": d.encoding_source.as_str(),
            "cpu": p.cpu.map(|c| json!({ "family": c.family, "model": c.model })),
            "valid": i.valid,
            "mem_op": i.mem_op.as_str(),
            "data_source": i.data_source.map(DataSource::as_str),
            "data_source_code": i.data_source.map(|_| p.encoding.code(s.effective_data2(p))),
            "mem_level": mem_level,
            "cache_hit_state": i.cache_hit_state.map(CacheHitState::as_str),
            "dc_miss": i.dc_miss,
            "l2_miss": i.l2_miss,
            "dc_miss_latency": i.dc_miss_latency,
            "tlb": tlb,
            "tlb_refill_latency": i.tlb_refill_latency,
            "access_width": i.access_width,
            "access_flags": flag_names(s),
            "rip": i.rip.map(addr),
            "linear_address": i.linear_address.map(addr),
            "physical_address": i.physical_address.map(addr),
            "branch_target": i.branch_target.map(addr),
            "period": i.period,
            "count": s.op_ctl.count(s.caps),
            "count_unit": match i.count_unit {
                CountUnit::Cycles => "cycles",
                CountUnit::DispatchedOps => "dispatched_ops",
            },
        },
    })
}
