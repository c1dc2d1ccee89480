//! Runs the hand-computed vectors in `tests/vectors.txt` (its header describes the format)
//! and checks that together they exercise every named field with a non-zero value, every
//! code of both data-source tables, and both decode errors.

use std::collections::{BTreeMap, BTreeSet};

use dprof_ibs::{
    encode_period, CacheHitState, Caps, CountUnit, CpuModel, DataSource, DataSrcEncoding,
    DecodeError, IbsFetchCtl, IbsOpCtl, IbsOpData, IbsOpData2, IbsOpData3, IbsOpSample,
    IcIbsExtdCtl, MemLevel, MemOp, PageSize, PeriodError, Platform, Register, TlbOutcome,
};

const VECTORS: &str = include_str!("vectors.txt");

#[derive(Debug, Default)]
struct Vector {
    name: String,
    line: usize,
    caps: Option<u32>,
    registers: BTreeMap<String, u64>,
    blob: Option<Vec<u8>>,
    fetch_ctl: Option<u64>,
    extd_ctl: Option<u64>,
    cpu: Option<CpuModel>,
    period: Option<(u64, bool)>,
    expects: Vec<Expect>,
}

#[derive(Debug)]
struct Expect {
    line: usize,
    kind: String,
    pairs: Vec<(String, String)>,
}

const OP_REGISTERS: [&str; 9] = [
    "ctl", "rip", "data", "data2", "data3", "linad", "physad", "brtarget", "data4",
];

fn number(text: &str, what: &str) -> u64 {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|e| panic!("{what}: bad number {text:?}: {e}"))
}

fn hex_bytes(text: &str, what: &str) -> Vec<u8> {
    assert!(
        text.len().is_multiple_of(2),
        "{what}: odd number of hex digits"
    );
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .unwrap_or_else(|e| panic!("{what}: bad hex {text:?}: {e}"))
        })
        .collect()
}

fn parse(text: &str) -> Vec<Vector> {
    let mut vectors = Vec::new();
    let mut current: Option<Vector> = None;
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let keyword = words.next().expect("non-empty line");
        let args: Vec<&str> = words.collect();
        let at = format!("vectors.txt:{line_no}");
        if keyword == "vector" {
            assert!(current.is_none(), "{at}: vector inside a vector");
            assert_eq!(args.len(), 1, "{at}: vector NAME");
            current = Some(Vector {
                name: args[0].to_owned(),
                line: line_no,
                ..Vector::default()
            });
            continue;
        }
        let v = current
            .as_mut()
            .unwrap_or_else(|| panic!("{at}: {keyword} outside a vector"));
        match keyword {
            "end" => vectors.push(current.take().expect("inside a vector")),
            "caps" => v.caps = Some(u32::try_from(number(args[0], &at)).expect("caps is 32-bit")),
            r if OP_REGISTERS.contains(&r) => {
                assert_eq!(args.len(), 1, "{at}: {r} HEX");
                let old = v.registers.insert(r.to_owned(), number(args[0], &at));
                assert!(old.is_none(), "{at}: {r} given twice");
            }
            "blob" => {
                let blob = v.blob.get_or_insert_with(Vec::new);
                if args[0] != "-" {
                    blob.extend(hex_bytes(args[0], &at));
                }
            }
            "zeros" => {
                let n = usize::try_from(number(args[0], &at)).expect("small");
                v.blob.get_or_insert_with(Vec::new).extend(vec![0; n]);
            }
            "fetch_ctl" => v.fetch_ctl = Some(number(args[0], &at)),
            "extd_ctl" => v.extd_ctl = Some(number(args[0], &at)),
            "cpu" => {
                v.cpu = Some(CpuModel {
                    family: u32::try_from(number(args[0], &at)).expect("family"),
                    model: u32::try_from(number(args[1], &at)).expect("model"),
                });
            }
            "period" => {
                let ext = match args[1] {
                    "ext" => true,
                    "noext" => false,
                    other => panic!("{at}: period VALUE ext|noext, not {other}"),
                };
                v.period = Some((number(args[0], &at), ext));
            }
            "expect" => {
                let (kind, pairs) = match args.first() {
                    Some(first) if !first.contains('=') => (first.to_string(), &args[1..]),
                    _ => ("decode".to_owned(), &args[..]),
                };
                let pairs = pairs
                    .iter()
                    .map(|p| {
                        let (k, v) = p
                            .split_once('=')
                            .unwrap_or_else(|| panic!("{at}: expected key=value, got {p:?}"));
                        (k.to_owned(), v.to_owned())
                    })
                    .collect();
                v.expects.push(Expect {
                    line: line_no,
                    kind,
                    pairs,
                });
            }
            other => panic!("{at}: unknown keyword {other:?}"),
        }
    }
    assert!(current.is_none(), "vectors.txt ends inside a vector");
    vectors
}

/// The blob a register-form vector stands for, serialized here independently of the
/// crate's encoder.
fn blob_of(v: &Vector) -> Vec<u8> {
    if let Some(blob) = &v.blob {
        assert!(
            v.registers.is_empty() && v.caps.is_none(),
            "{}: blob and registers both given",
            v.name
        );
        return blob.clone();
    }
    let caps = v.caps.unwrap_or(0);
    let reg = |name: &str| v.registers.get(name).copied().unwrap_or(0);
    let mut out = caps.to_le_bytes().to_vec();
    for name in ["ctl", "rip", "data", "data2", "data3", "linad", "physad"] {
        out.extend(reg(name).to_le_bytes());
    }
    for (name, bit) in [("brtarget", 5), ("data4", 10)] {
        if caps & (1 << bit) != 0 {
            out.extend(reg(name).to_le_bytes());
        } else {
            assert!(
                !v.registers.contains_key(name),
                "{}: {name} given but caps lacks bit {bit}",
                v.name
            );
        }
    }
    out
}

fn option<T>(value: Option<T>, show: impl Fn(T) -> String) -> String {
    value.map_or_else(|| "-".to_owned(), show)
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn flag(b: bool) -> String {
    u8::from(b).to_string()
}

/// The vector file's token for a data source, written out here rather than taken from the
/// crate's `as_str`, so the two are compared.
fn source_token(source: DataSource) -> String {
    match source {
        DataSource::NoStatus => "no-status".into(),
        DataSource::LocalCcxCache => "local-ccx".into(),
        DataSource::NearCcxCache => "near-ccx".into(),
        DataSource::FarCache => "far-cache".into(),
        DataSource::Dram { remote: false } => "dram".into(),
        DataSource::Dram { remote: true } => "remote-dram".into(),
        DataSource::Pmem { remote: false } => "pmem".into(),
        DataSource::Pmem { remote: true } => "remote-pmem".into(),
        DataSource::ExtensionMemory { remote: false } => "ext-mem".into(),
        DataSource::ExtensionMemory { remote: true } => "remote-ext-mem".into(),
        DataSource::Io => "io".into(),
        DataSource::PeerAgentMemory => "peer-agent".into(),
        DataSource::Reserved(code) => format!("reserved({code})"),
    }
}

fn level_token(level: MemLevel) -> String {
    match level {
        MemLevel::Uncached => "uncached".into(),
        MemLevel::L1 => "l1".into(),
        MemLevel::L2 => "l2".into(),
        MemLevel::Source(s) => format!("src:{}", source_token(s)),
        MemLevel::MissBuffer => "mab".into(),
        MemLevel::NotAvailable => "na".into(),
    }
}

fn tlb_token(tlb: TlbOutcome) -> String {
    let size = |s: PageSize| match s {
        PageSize::Size4K => "4k",
        PageSize::Size2M => "2m",
        PageSize::Size1G => "1g",
        PageSize::Conflicting => "both",
    };
    match tlb {
        TlbOutcome::L1Hit(s) => format!("l1-{}", size(s)),
        TlbOutcome::L2Hit(s) => format!("l2-{}", size(s)),
        TlbOutcome::L2Miss => "l2-miss".into(),
    }
}

/// The observed value of one `expect interp` key.
fn interp_value(sample: &IbsOpSample, platform: Platform, key: &str) -> String {
    let i = sample.interpret(platform);
    match key {
        "valid" => flag(i.valid),
        "encoding" => match i.platform.encoding {
            DataSrcEncoding::PreZen4 => "pre-zen4".into(),
            DataSrcEncoding::Zen4 => "zen4".into(),
        },
        "op" => match i.mem_op {
            MemOp::Load => "load".into(),
            MemOp::Store => "store".into(),
            MemOp::NotMemory => "none".into(),
        },
        "src" => option(i.data_source, source_token),
        "level" => level_token(i.mem_level),
        "hit" => option(i.cache_hit_state, |h| match h {
            CacheHitState::Modified => "M".into(),
            CacheHitState::Owned => "O".into(),
        }),
        "dc_miss" => option(i.dc_miss, flag),
        "l2_miss" => option(i.l2_miss, flag),
        "dc_lat" => option(i.dc_miss_latency, |n| n.to_string()),
        "tlb" => option(i.tlb, tlb_token),
        "refill" => option(i.tlb_refill_latency, |n| n.to_string()),
        "width" => option(i.access_width, |n| n.to_string()),
        "rip" => option(i.rip, hex),
        "linad" => option(i.linear_address, hex),
        "physad" => option(i.physical_address, hex),
        "brtarget" => option(i.branch_target, hex),
        "period" => hex(i.period),
        "unit" => match i.count_unit {
            CountUnit::Cycles => "cycles".into(),
            CountUnit::DispatchedOps => "ops".into(),
        },
        "count" => option(sample.op_ctl.count(sample.caps), hex),
        "len" => IbsOpSample::raw_len(sample.caps).to_string(),
        other => panic!("unknown interp key {other}"),
    }
}

/// The expected text normalized like [`interp_value`]'s output (numbers to one spelling).
fn normalize(key: &str, want: &str) -> String {
    let numeric_hex = ["rip", "linad", "physad", "brtarget", "period", "count"];
    let numeric_dec = ["dc_lat", "refill", "width", "len"];
    if want == "-" {
        want.to_owned()
    } else if numeric_hex.contains(&key) {
        hex(number(want, key))
    } else if numeric_dec.contains(&key) {
        number(want, key).to_string()
    } else {
        want.to_owned()
    }
}

struct Coverage {
    /// (register, field) pairs seen with a non-zero expected value.
    nonzero_fields: BTreeSet<(Register, &'static str)>,
    /// Data-source tokens seen per encoding.
    sources: BTreeSet<(String, String)>,
    errors: BTreeSet<String>,
    checks: usize,
}

fn check_fields(
    at: &str,
    register: Register,
    lookup: impl Fn(&str) -> Option<u64>,
    pairs: &[(String, String)],
    coverage: &mut Coverage,
) {
    for (field, want) in pairs {
        let spec = register
            .field(field)
            .unwrap_or_else(|| panic!("{at}: {} has no field {field}", register.name()));
        let want = number(want, at);
        let got = lookup(field).expect("the accessor exists for every FIELDS entry");
        assert_eq!(got, want, "{at}: {}.{field}", register.name());
        if want != 0 {
            coverage.nonzero_fields.insert((register, spec.name));
        }
        coverage.checks += 1;
    }
}

fn check_raw(at: &str, s: &IbsOpSample, pairs: &[(String, String)], coverage: &mut Coverage) {
    for (name, want) in pairs {
        let got = match name.as_str() {
            "caps" => u64::from(s.caps.0),
            "ctl" => s.op_ctl.raw(),
            "rip" => s.op_rip.raw(),
            "data" => s.op_data.raw(),
            "data2" => s.op_data2.raw(),
            "data3" => s.op_data3.raw(),
            "linad" => s.dc_lin_ad.raw(),
            "physad" => s.dc_phys_ad.raw(),
            "brtarget" => s
                .br_target
                .unwrap_or_else(|| panic!("{at}: no brtarget"))
                .raw(),
            "data4" => s.op_data4.unwrap_or_else(|| panic!("{at}: no data4")).raw(),
            other => panic!("{at}: unknown register {other}"),
        };
        assert_eq!(hex(got), hex(number(want, at)), "{at}: raw {name}");
        coverage.checks += 1;
    }
}

fn check_present(at: &str, s: &IbsOpSample, pairs: &[(String, String)], coverage: &mut Coverage) {
    for (name, want) in pairs {
        let got = match name.as_str() {
            "brtarget" => s.br_target.is_some(),
            "data4" => s.op_data4.is_some(),
            other => panic!("{at}: unknown optional register {other}"),
        };
        assert_eq!(flag(got), *want, "{at}: {name} present");
        coverage.checks += 1;
    }
}

fn check_interp(
    at: &str,
    s: &IbsOpSample,
    platform: Platform,
    pairs: &[(String, String)],
    coverage: &mut Coverage,
) {
    for (key, want) in pairs {
        let got = interp_value(s, platform, key);
        assert_eq!(got, normalize(key, want), "{at}: interp {key}");
        if key == "src" && want != "-" {
            coverage
                .sources
                .insert((interp_value(s, platform, "encoding"), want.clone()));
        }
        coverage.checks += 1;
    }
}

fn check_decode_error(
    at: &str,
    decoded: Option<&Result<IbsOpSample, DecodeError>>,
    pairs: &[(String, String)],
    coverage: &mut Coverage,
) {
    let err = match decoded {
        Some(Err(e)) => *e,
        other => panic!("{at}: expected a decode error, got {other:?}"),
    };
    let fields: BTreeMap<&str, &str> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    match (fields.get("error").copied(), err) {
        (Some("no-caps"), DecodeError::NoCaps { len }) => {
            assert_eq!(len as u64, number(fields["len"], at), "{at}: len");
        }
        (Some("length"), DecodeError::Length { len, expected, .. }) => {
            assert_eq!(len as u64, number(fields["len"], at), "{at}: len");
            assert_eq!(
                expected as u64,
                number(fields["expected"], at),
                "{at}: expected"
            );
        }
        (want, got) => panic!("{at}: wanted error {want:?}, got {got:?}"),
    }
    coverage.errors.insert(fields["error"].to_owned());
    coverage.checks += 1;
}

fn check_encode(
    at: &str,
    period: Option<(u64, bool)>,
    pairs: &[(String, String)],
    coverage: &mut Coverage,
) {
    let (period, ext) = period.unwrap_or_else(|| panic!("{at}: no period"));
    let got = encode_period(period, ext);
    for (key, want) in pairs {
        match (key.as_str(), got) {
            ("ctl", Ok(ctl)) => {
                assert_eq!(hex(ctl.raw()), hex(number(want, at)), "{at}");
                // And back: the register reads as the same period.
                assert_eq!(ctl.period(ext), period, "{at}: period read back");
            }
            ("error", Err(e)) => {
                let kind = match e {
                    PeriodError::NotMultipleOf16 { .. } => "not-multiple",
                    PeriodError::TooSmall { .. } => "too-small",
                    PeriodError::TooLarge { .. } => "too-large",
                };
                assert_eq!(kind, want, "{at}");
            }
            (key, got) => panic!("{at}: wanted {key}={want}, got {got:?}"),
        }
        coverage.checks += 1;
    }
}

fn run_vector(v: &Vector, coverage: &mut Coverage) {
    let has_op_input = v.blob.is_some() || v.caps.is_some() || !v.registers.is_empty();
    let blob = has_op_input.then(|| blob_of(v));
    let decoded = blob.as_deref().map(IbsOpSample::decode);
    let decode_error = v.expects.iter().any(|e| e.kind == "decode");
    match (&decoded, &blob) {
        // Encoding again gives back the very bytes.
        (Some(Ok(sample)), Some(blob)) => {
            assert_eq!(sample.to_raw().as_bytes(), blob, "{}: round trip", v.name);
        }
        (Some(Err(e)), _) if !decode_error => panic!("{}: does not decode: {e}", v.name),
        _ => {}
    }
    let sample = || match &decoded {
        Some(Ok(s)) => *s,
        _ => panic!("{}: expectations about a sample without one", v.name),
    };
    let platform = || Platform {
        cpu: v.cpu,
        ..Platform::from_caps(sample().caps)
    };
    for Expect { line, kind, pairs } in &v.expects {
        let at = &format!("vectors.txt:{line} ({})", v.name);
        let (register, value) = match kind.as_str() {
            "ctl" => (Register::OpCtl, sample().op_ctl.raw()),
            "data" => (Register::OpData, sample().op_data.raw()),
            "data2" => (Register::OpData2, sample().op_data2.raw()),
            "data3" => (Register::OpData3, sample().op_data3.raw()),
            "fetch_ctl" => (Register::FetchCtl, v.fetch_ctl.expect("fetch_ctl given")),
            "extd_ctl" => (Register::IcIbsExtdCtl, v.extd_ctl.expect("extd_ctl given")),
            "raw" => {
                check_raw(at, &sample(), pairs, coverage);
                continue;
            }
            "present" => {
                check_present(at, &sample(), pairs, coverage);
                continue;
            }
            "interp" => {
                check_interp(at, &sample(), platform(), pairs, coverage);
                continue;
            }
            "decode" => {
                check_decode_error(at, decoded.as_ref(), pairs, coverage);
                continue;
            }
            "encode" => {
                check_encode(at, v.period, pairs, coverage);
                continue;
            }
            other => panic!("{at}: unknown expectation kind {other}"),
        };
        // Through the typed register's by-name lookup, which calls the accessors.
        let lookup = |field: &str| match register {
            Register::OpCtl => IbsOpCtl(value).field(field),
            Register::OpData => IbsOpData(value).field(field),
            Register::OpData2 => IbsOpData2(value).field(field),
            Register::OpData3 => IbsOpData3(value).field(field),
            Register::FetchCtl => IbsFetchCtl(value).field(field),
            Register::IcIbsExtdCtl => IcIbsExtdCtl(value).field(field),
            _ => None,
        };
        check_fields(at, register, lookup, pairs, coverage);
    }
}

#[test]
fn vectors() {
    let vectors = parse(VECTORS);
    let mut coverage = Coverage {
        nonzero_fields: BTreeSet::new(),
        sources: BTreeSet::new(),
        errors: BTreeSet::new(),
        checks: 0,
    };
    let mut names = BTreeSet::new();
    for v in &vectors {
        assert!(names.insert(v.name.clone()), "duplicate vector {}", v.name);
        assert!(
            !v.expects.is_empty(),
            "vectors.txt:{}: {} expects nothing",
            v.line,
            v.name
        );
        run_vector(v, &mut coverage);
    }
    eprintln!("{} vectors, {} checks", vectors.len(), coverage.checks);
    assert!(vectors.len() >= 40, "only {} vectors", vectors.len());

    // Every named field of the op and fetch registers was seen non-zero somewhere.
    let missing: Vec<_> = dprof_ibs::registers::all_fields()
        .filter(|f| !coverage.nonzero_fields.contains(&(f.register, f.name)))
        .map(|f| format!("{}.{}", f.register.name(), f.name))
        .collect();
    assert!(
        missing.is_empty(),
        "fields never checked non-zero: {missing:?}"
    );

    // Every defined code of both tables, and a reserved one of each.
    let want_sources = [
        ("pre-zen4", "local-ccx"),
        ("pre-zen4", "dram"),
        ("pre-zen4", "remote-dram"),
        ("pre-zen4", "far-cache"),
        ("pre-zen4", "io"),
        ("pre-zen4", "no-status"),
        ("pre-zen4", "reserved(1)"),
        ("zen4", "local-ccx"),
        ("zen4", "near-ccx"),
        ("zen4", "dram"),
        ("zen4", "remote-dram"),
        ("zen4", "far-cache"),
        ("zen4", "pmem"),
        ("zen4", "remote-pmem"),
        ("zen4", "io"),
        ("zen4", "ext-mem"),
        ("zen4", "remote-ext-mem"),
        ("zen4", "peer-agent"),
        ("zen4", "reserved(4)"),
    ];
    for (encoding, source) in want_sources {
        assert!(
            coverage
                .sources
                .contains(&(encoding.to_owned(), source.to_owned())),
            "no vector for {source} with {encoding}"
        );
    }
    for error in ["no-caps", "length"] {
        assert!(
            coverage.errors.contains(error),
            "no vector for error {error}"
        );
    }
}

/// The crate's machine-readable names agree with the vector tokens where they overlap.
#[test]
fn stable_names() {
    for (source, token) in [
        (DataSource::LocalCcxCache, "local_ccx_cache"),
        (DataSource::Dram { remote: true }, "remote_dram"),
        (DataSource::ExtensionMemory { remote: false }, "ext_mem"),
    ] {
        assert_eq!(source.as_str(), token);
    }
    assert_eq!(Caps(0x821).to_string(), "0x00000821 AVAIL|BRNTRGT|ZEN4");
}
