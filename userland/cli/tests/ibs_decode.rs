//! `dprof ibs-decode` end to end: raw blobs and named registers, text and JSON, the
//! `DataSrc` table choice and the errors a person meets.

use std::process::{Command, Output};

fn dprof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dprof"))
        .arg("ibs-decode")
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("dprof runs")
}

fn stdout_of(args: &[&str]) -> String {
    let out = dprof(args);
    assert!(
        out.status.success(),
        "dprof ibs-decode {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The value printed after `label` on its line (indented `label  value` rows).
fn row(text: &str, label: &str) -> String {
    text.lines()
        .find_map(|line| {
            let rest = line.trim_start().strip_prefix(label)?;
            rest.starts_with("  ").then(|| rest.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no row {label:?} in:\n{text}"))
}

/// One `dprof: error:` line on stderr, exit status 1, nothing on stdout.
fn error_of(args: &[&str]) -> String {
    let out = dprof(args);
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("dprof: error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

// caps 0x5f (no BrTarget, no OpData4, pre-Zen4); IbsOpCtl 0x60010 (op_en, op_val, MaxCnt
// 0x10); IbsOpRip 0xffffffff81000abc; IbsOpData2 3 (DRAM); IbsOpData3 0x60081 (load,
// DC miss, both addresses valid); IbsDcLinAd 0xffff888012345678; IbsDcPhysAd 0x12345678.
const BLOB_60: [&str; 8] = [
    "5f000000",
    "1000060000000000",
    "bc0a0081ffffffff",
    "0000000000000000",
    "0300000000000000",
    "8100060000000000",
    "785634128088ffff",
    "7856341200000000",
];

// caps 0xc27 (ZEN4, OPDATA4, BRNTRGT); IbsOpData 0x2000000000 (retired branch); IbsOpData2
// 0x40 (Zen4 code 8, extension memory); IbsOpData3 0x100081 (load past L2); IbsBrTarget
// 0xffffffff81001000; IbsOpData4 0x8000000000000000.
const BLOB_76: [&str; 10] = [
    "270c0000",
    "1000060000000000",
    "bc0a0081ffffffff",
    "0000000020000000",
    "4000000000000000",
    "8100100000000000",
    "785634128088ffff",
    "7856341200000000",
    "00100081ffffffff",
    "0000000000000080",
];

#[test]
fn blob_text() {
    let text = stdout_of(&BLOB_60);
    assert!(text.starts_with("input: raw blob, 60 bytes\n"), "{text}");
    assert_eq!(
        text.lines().nth(1),
        Some("caps: 0x0000005f AVAIL|FETCHSAM|OPSAM|RDWROPCNT|OPCNT|OPCNTEXT")
    );
    assert_eq!(row(&text, "IbsOpCtl"), "0x0000000000060010");
    assert_eq!(row(&text, "opmaxcnt"), "16 (0x10)");
    assert_eq!(row(&text, "op_val"), "1");
    assert_eq!(row(&text, "IbsOpRip"), "0xffffffff81000abc");
    assert_eq!(row(&text, "data_src_lo"), "3");
    assert_eq!(row(&text, "dc_lin_addr_valid"), "1");
    assert_eq!(
        row(&text, "IbsBrTarget"),
        "not present (caps lacks BRNTRGT)"
    );
    assert_eq!(row(&text, "IbsOpData4"), "not present (caps lacks OPDATA4)");
    assert_eq!(row(&text, "DataSrc table"), "pre-zen4 (caps lacks ZEN4)");
    assert_eq!(row(&text, "rip"), "0xffffffff81000abc");
    assert_eq!(row(&text, "memory op"), "load");
    assert_eq!(row(&text, "data source"), "local node DRAM [code 3]");
    assert_eq!(row(&text, "memory level"), "L2 hit");
    assert_eq!(row(&text, "DC miss"), "yes");
    assert_eq!(row(&text, "L2 miss"), "no");
    assert_eq!(row(&text, "data TLB"), "L1 TLB hit, 4K page");
    assert_eq!(row(&text, "linear address"), "0xffff888012345678");
    assert_eq!(row(&text, "physical address"), "0x12345678");
    assert_eq!(row(&text, "period"), "256 cycles (0x100)");
    assert!(!text.contains("note:"), "{text}");
}

#[test]
fn blob_in_one_argument_or_many() {
    let joined = format!("0x{}", BLOB_60.concat());
    assert_eq!(stdout_of(&[&joined]), stdout_of(&BLOB_60));
}

#[test]
fn zen4_blob_with_optional_registers() {
    let text = stdout_of(&BLOB_76);
    assert!(text.starts_with("input: raw blob, 76 bytes\n"), "{text}");
    assert_eq!(row(&text, "DataSrc table"), "zen4 (caps has ZEN4)");
    assert_eq!(row(&text, "data_src_hi"), "1");
    assert_eq!(
        row(&text, "data source"),
        "local node extension memory (CXL) [code 8]"
    );
    assert_eq!(
        row(&text, "memory level"),
        "local node extension memory (CXL) (past L2)"
    );
    assert_eq!(row(&text, "IbsBrTarget"), "0xffffffff81001000");
    assert_eq!(row(&text, "branch target"), "0xffffffff81001000");
    assert_eq!(row(&text, "IbsOpData4"), "0x8000000000000000");
    assert!(text.contains("Linux 6.12 defines no fields for IbsOpData4"));
    // The addresses are not valid in this sample.
    assert_eq!(row(&text, "linear address"), "-");
}

#[test]
fn registers_by_name() {
    // MaxCnt 0x1234 + OpMaxCntExt 0x5a, cnt_ctl; a load missing the L1 TLB, hitting the L2
    // TLB in a 2M page, with a 24-cycle refill and a 300-cycle miss to remote DRAM:
    // IbsOpData3 bits 0, 2, 6, 7, 17, 20, dc_miss_lat 0x12c, tlb_refill_lat 0x18.
    let text = stdout_of(&[
        "ctl=0x5ae1234",
        "data2=0x13",
        "data3=0x0018012c001200c5",
        "linad=ffff888000200000",
        "--zen4",
    ]);
    assert!(text.starts_with("input: registers by name\n"), "{text}");
    assert_eq!(
        text.lines().nth(1),
        Some("caps: 0x00000045 AVAIL|OPSAM|OPCNTEXT (not given; assumed)")
    );
    assert_eq!(row(&text, "opmaxcnt_ext"), "90 (0x5a)");
    assert_eq!(row(&text, "cnt_ctl"), "1");
    assert_eq!(row(&text, "IbsBrTarget"), "not present (not given)");
    assert_eq!(row(&text, "DataSrc table"), "zen4 (chosen by option)");
    assert_eq!(row(&text, "data source"), "remote node DRAM [code 3]");
    assert_eq!(row(&text, "DC miss latency"), "300 cycles");
    assert_eq!(row(&text, "data TLB"), "L1 TLB miss, L2 TLB hit, 2M page");
    assert_eq!(row(&text, "TLB refill latency"), "24 cycles");
    assert_eq!(row(&text, "linear address"), "0xffff888000200000");
    // ((0x5a << 16) | 0x1234) << 4
    assert_eq!(row(&text, "period"), "94446400 dispatched ops (0x5a12340)");
}

#[test]
fn assumed_table_is_stated() {
    let text = stdout_of(&["ctl=0x60010", "data2=0x02", "data3=0x100081"]);
    assert!(
        text.contains(
            "note: no caps given: assuming the pre-Zen4 DataSrc table (--zen4 for Zen4 and later)"
        ),
        "{text}"
    );
    assert_eq!(row(&text, "DataSrc table"), "pre-zen4 (assumed, see note)");
    assert_eq!(
        row(&text, "data source"),
        "local CCX cache (L3 or another L1/L2) [code 2]"
    );
    assert_eq!(row(&text, "cache hit state"), "M (modified; perf: HITM)");

    // data_src_hi only exists on Zen4: 0x42 is code 10, reserved.
    let text = stdout_of(&["ctl=0x60010", "data2=0x42", "data3=0x100081"]);
    assert!(text.contains("assuming the Zen4 DataSrc table because data_src_hi"));
    assert_eq!(row(&text, "data source"), "reserved code 10 [code 10]");

    // The same register under the Zen4 table is another CCX on the same node.
    let text = stdout_of(&["--zen4", "ctl=0x60010", "data2=0x02", "data3=0x100081"]);
    assert!(!text.contains("note:"), "{text}");
    assert_eq!(
        row(&text, "data source"),
        "another CCX's cache, same node [code 2]"
    );
}

#[test]
fn option_overrides_caps_with_a_note() {
    let mut args = vec!["--pre-zen4"];
    args.extend(BLOB_76);
    let text = stdout_of(&args);
    assert!(text.contains("note: the option overrides caps, which say zen4"));
    assert_eq!(row(&text, "DataSrc table"), "pre-zen4 (chosen by option)");
    // Pre-Zen4 reads only data_src_lo, which is 0 here.
    assert_eq!(row(&text, "data source"), "no valid status [code 0]");
}

#[test]
fn invalid_sample_and_cpu_quirks() {
    let text = stdout_of(&["ctl=0x20010", "rip=0xffffffff81000000"]);
    assert!(text.contains("note: op_val is clear"), "{text}");
    assert_eq!(row(&text, "valid sample"), "no");
    assert_eq!(row(&text, "rip"), "-");

    // Erratum #1293 on family 0x19 model 1: a software prefetch voids IbsOpData2.
    let args = ["caps=0x1ff", "ctl=0x60010", "data2=0x3", "data3=0x200081"];
    let text = stdout_of(&args);
    assert_eq!(row(&text, "memory level"), "L2 hit");
    let mut with_cpu = args.to_vec();
    with_cpu.extend(["--cpu", "25:1"]);
    let text = stdout_of(&with_cpu);
    assert_eq!(row(&text, "memory level"), "not available");
    assert_eq!(row(&text, "L2 miss"), "-");
    assert_eq!(row(&text, "access flags"), "software-prefetch");
}

#[test]
fn json_document() {
    let text = stdout_of(&[
        "--json",
        "caps=0xfff",
        "ctl=0x60010",
        "data=0x2000000000",
        "data2=0x25",
        "data3=0x0000004000120081",
        "linad=0xffff888000001000",
        "brtarget=0xffffffff81001000",
        "data4=0x1",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
    assert_eq!(v["input"], "registers");
    assert_eq!(v["caps"]["raw"], "0xfff");
    assert_eq!(v["caps"]["given"], true);
    assert_eq!(v["caps"]["names"][11], "ZEN4");
    assert_eq!(v["registers"]["IbsOpCtl"]["raw"], "0x60010");
    assert_eq!(v["registers"]["IbsOpCtl"]["fields"]["opmaxcnt"], 16);
    assert_eq!(v["registers"]["IbsOpData2"]["fields"]["cache_hit_st"], 1);
    assert_eq!(v["registers"]["IbsOpData3"]["fields"]["dc_miss_lat"], 64);
    assert_eq!(v["registers"]["IbsOpData4"]["raw"], "0x1");
    assert!(v["registers"]["IbsOpData4"].get("fields").is_none());
    let i = &v["interpretation"];
    assert_eq!(i["data_src_table"], "zen4");
    assert_eq!(i["data_src_table_from"], "caps");
    assert_eq!(i["valid"], true);
    assert_eq!(i["mem_op"], "load");
    // 0x25: data_src_lo 5, cache_hit_st: Zen4 code 5, another node's CCX, line in O state.
    assert_eq!(i["data_source"], "far_cache");
    assert_eq!(i["data_source_code"], 5);
    assert_eq!(i["mem_level"], "far_cache");
    assert_eq!(i["cache_hit_state"], "O");
    assert_eq!(i["dc_miss"], true);
    assert_eq!(i["l2_miss"], true);
    assert_eq!(i["dc_miss_latency"], 64);
    assert_eq!(i["tlb"]["level"], "l1_hit");
    assert_eq!(i["tlb"]["page_size"], "4K");
    assert_eq!(i["tlb_refill_latency"], serde_json::Value::Null);
    assert_eq!(i["linear_address"], "0xffff888000001000");
    assert_eq!(i["physical_address"], serde_json::Value::Null);
    assert_eq!(i["branch_target"], "0xffffffff81001000");
    assert_eq!(i["period"], 256);
    assert_eq!(i["count_unit"], "cycles");
    assert_eq!(i["count"], 256);
    assert_eq!(i["cpu"], serde_json::Value::Null);
    assert_eq!(v["notes"], serde_json::json!([]));
}

#[test]
fn bad_input_is_one_error_line() {
    let missing_brtarget = format!("27000000{}", "00".repeat(56));
    let cases: [(&[&str], &str); 10] = [
        (&["zz"], "'z' in \"zz\" is not a hex digit"),
        (&["070"], "odd number of hex digits (3)"),
        (
            &["07000000", "00"],
            "is 60 bytes (caps + 7 registers of 8), not 5",
        ),
        (&["070000"], "only 3 bytes"),
        (
            &[missing_brtarget.as_str()],
            "is 68 bytes (caps + 8 registers of 8), not 60",
        ),
        (&["ctl=0xzz"], "\"0xzz\" is not a hexadecimal number"),
        (
            &["ctl=1", "07000000"],
            "either one raw blob or NAME=HEX registers",
        ),
        (&["foo=1"], "unknown register \"foo\""),
        (&["ctl=0x10000000000000000"], "does not fit in 64 bits"),
        (&["caps=0x5f", "brtarget=1"], "lacks BRNTRGT (bit 5)"),
    ];
    for (args, want) in cases {
        let stderr = error_of(args);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    assert!(error_of(&["ctl=1", "ctl=2"]).contains("ctl= is given twice"));
    assert!(error_of(&["caps=0x100000000"]).contains("caps word is 32 bits"));
}

#[test]
fn usage_errors_and_help() {
    let out = dprof(&["--zen4", "--pre-zen4", "ctl=1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
    let out = dprof(&[]);
    assert_eq!(out.status.code(), Some(2));
    let out = dprof(&["--cpu", "zen4", "ctl=1"]);
    assert_eq!(out.status.code(), Some(2));

    let help = stdout_of(&["--help"]);
    for want in [
        "Examples:",
        "dprof ibs-decode ctl=0x60010 data3=0x100081 data2=0x13 --zen4",
        "caps= ctl= rip= data= data2= data3= linad= physad= brtarget= data4=",
        "ZEN4 (bit 11)",
        "--json",
        "--pre-zen4",
    ] {
        assert!(help.contains(want), "--help lacks {want:?}:\n{help}");
    }
    // The blob example in --help decodes.
    let text = stdout_of(&BLOB_60);
    assert_eq!(row(&text, "memory op"), "load");
}
