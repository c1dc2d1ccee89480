//! The IBS registers as typed 64-bit values.
//!
//! Each register with a bitfield union in Linux 6.12's `asm/amd-ibs.h` gets one accessor per
//! named bitfield, spelled as in the header (`opmaxcnt`, not `op_max_cnt`). The accessors do
//! not carry their own shifts: each looks its [`FieldSpec`] up by name in the register's
//! `FIELDS` table at compile time, and that table is what `tests/kernel_header.rs` compares
//! with the header. Reserved bitfields have no entry.
//!
//! The 6.12 header has no union for `IbsOpData4`, `IbsDcLinAd`, `IbsDcPhysAd`,
//! `IbsBrTarget` or `IbsOpRip`: they are whole 64-bit values here (addresses, or raw bits
//! for `IbsOpData4`).

/// Where one named bitfield lives in a 64-bit register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldSpec {
    pub register: Register,
    /// The bitfield's name in `asm/amd-ibs.h`.
    pub name: &'static str,
    /// Position of the least significant bit.
    pub shift: u32,
    /// Number of bits, 1 to 64.
    pub width: u32,
}

impl FieldSpec {
    /// The field's bits, right-aligned.
    #[must_use]
    pub const fn mask(self) -> u64 {
        if self.width >= 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        }
    }

    /// The field's bits in place within the register.
    #[must_use]
    pub const fn mask_in_place(self) -> u64 {
        self.mask() << self.shift
    }

    /// The field's value in `raw`.
    #[must_use]
    pub const fn extract(self, raw: u64) -> u64 {
        (raw >> self.shift) & self.mask()
    }

    /// `raw` with this field set to `value`, or `None` when `value` does not fit.
    #[must_use]
    pub const fn insert(self, raw: u64, value: u64) -> Option<u64> {
        if value & !self.mask() != 0 {
            return None;
        }
        Some((raw & !self.mask_in_place()) | (value << self.shift))
    }
}

/// The IBS MSRs dprof knows, fetch side included so the header check covers every union.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Register {
    FetchCtl,
    OpCtl,
    OpRip,
    OpData,
    OpData2,
    OpData3,
    DcLinAd,
    DcPhysAd,
    BrTarget,
    IcIbsExtdCtl,
    OpData4,
}

impl Register {
    /// Every register, in MSR order.
    pub const ALL: [Register; 11] = [
        Register::FetchCtl,
        Register::OpCtl,
        Register::OpRip,
        Register::OpData,
        Register::OpData2,
        Register::OpData3,
        Register::DcLinAd,
        Register::DcPhysAd,
        Register::BrTarget,
        Register::IcIbsExtdCtl,
        Register::OpData4,
    ];

    /// The register's name as AMD's manuals and perf's dump print it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Register::FetchCtl => "IbsFetchCtl",
            Register::OpCtl => "IbsOpCtl",
            Register::OpRip => "IbsOpRip",
            Register::OpData => "IbsOpData",
            Register::OpData2 => "IbsOpData2",
            Register::OpData3 => "IbsOpData3",
            Register::DcLinAd => "IbsDcLinAd",
            Register::DcPhysAd => "IbsDcPhysAd",
            Register::BrTarget => "IbsBrTarget",
            Register::IcIbsExtdCtl => "IcIbsExtdCtl",
            Register::OpData4 => "IbsOpData4",
        }
    }

    /// The MSR number (`MSR_AMD64_IBS*` in `asm/msr-index.h`).
    #[must_use]
    pub const fn msr(self) -> u32 {
        match self {
            Register::FetchCtl => 0xc001_1030,
            Register::OpCtl => 0xc001_1033,
            Register::OpRip => 0xc001_1034,
            Register::OpData => 0xc001_1035,
            Register::OpData2 => 0xc001_1036,
            Register::OpData3 => 0xc001_1037,
            Register::DcLinAd => 0xc001_1038,
            Register::DcPhysAd => 0xc001_1039,
            Register::BrTarget => 0xc001_103b,
            Register::IcIbsExtdCtl => 0xc001_103c,
            Register::OpData4 => 0xc001_103d,
        }
    }

    /// The `union` in `asm/amd-ibs.h` that lays the register out, if the header has one.
    #[must_use]
    pub const fn header_union(self) -> Option<&'static str> {
        match self {
            Register::FetchCtl => Some("ibs_fetch_ctl"),
            Register::OpCtl => Some("ibs_op_ctl"),
            Register::OpData => Some("ibs_op_data"),
            Register::OpData2 => Some("ibs_op_data2"),
            Register::OpData3 => Some("ibs_op_data3"),
            Register::IcIbsExtdCtl => Some("ic_ibs_extd_ctl"),
            Register::OpRip
            | Register::DcLinAd
            | Register::DcPhysAd
            | Register::BrTarget
            | Register::OpData4 => None,
        }
    }

    /// The register's named bitfields, in bit order; empty for whole-value registers.
    #[must_use]
    pub const fn fields(self) -> &'static [FieldSpec] {
        match self {
            Register::FetchCtl => IbsFetchCtl::FIELDS,
            Register::OpCtl => IbsOpCtl::FIELDS,
            Register::OpRip => IbsOpRip::FIELDS,
            Register::OpData => IbsOpData::FIELDS,
            Register::OpData2 => IbsOpData2::FIELDS,
            Register::OpData3 => IbsOpData3::FIELDS,
            Register::DcLinAd => IbsDcLinAd::FIELDS,
            Register::DcPhysAd => IbsDcPhysAd::FIELDS,
            Register::BrTarget => IbsBrTarget::FIELDS,
            Register::IcIbsExtdCtl => IcIbsExtdCtl::FIELDS,
            Register::OpData4 => IbsOpData4::FIELDS,
        }
    }

    /// The field called `name`, if the register has one.
    #[must_use]
    pub fn field(self, name: &str) -> Option<FieldSpec> {
        self.fields().iter().copied().find(|f| f.name == name)
    }

    /// The bits no named field covers (the header's `reserved*`), as a mask. Zero for
    /// whole-value registers.
    #[must_use]
    pub const fn reserved_mask(self) -> u64 {
        let fields = self.fields();
        if fields.is_empty() {
            return 0;
        }
        let mut covered = 0u64;
        let mut i = 0;
        while i < fields.len() {
            covered |= fields[i].mask_in_place();
            i += 1;
        }
        !covered
    }
}

/// Every named field of every register, register by register.
pub fn all_fields() -> impl Iterator<Item = &'static FieldSpec> {
    Register::ALL.into_iter().flat_map(Register::fields)
}

/// The field called `name` in `fields`. Only used in constant context, where a missing name
/// stops the build.
pub(crate) const fn find_field(fields: &[FieldSpec], name: &str) -> FieldSpec {
    let mut i = 0;
    while i < fields.len() {
        if str_eq(fields[i].name, name) {
            return fields[i];
        }
        i += 1;
    }
    panic!("accessor without a FIELDS entry");
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Converts an extracted field to the accessor's type, checking at compile time that the
/// field fits it.
macro_rules! field_value {
    (bool, $spec:expr, $bits:expr) => {{
        const _: () = assert!($spec.width == 1, "a flag accessor needs a 1-bit field");
        $bits != 0
    }};
    ($ty:ident, $spec:expr, $bits:expr) => {{
        const _: () = assert!($spec.width <= $ty::BITS, "field wider than its accessor");
        $bits as $ty
    }};
}

/// Defines a register newtype, its `FIELDS` table and one accessor per field that reads its
/// position from the table.
macro_rules! ibs_register {
    (
        $(#[$doc:meta])*
        $ty:ident = $reg:ident {
            $(
                $(#[$fdoc:meta])*
                $field:ident : $shift:literal , $width:literal -> $ret:ident ;
            )*
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $ty(pub u64);

        impl $ty {
            /// Which register this is.
            pub const REGISTER: Register = Register::$reg;

            /// The named bitfields, in bit order (what the accessors read).
            pub const FIELDS: &'static [FieldSpec] = &[
                $(
                    FieldSpec {
                        register: Register::$reg,
                        name: stringify!($field),
                        shift: $shift,
                        width: $width,
                    },
                )*
            ];

            /// The register's 64 bits.
            #[must_use]
            pub const fn raw(self) -> u64 {
                self.0
            }

            /// The field called `name` through its accessor, widened to `u64` (flags are 0 or
            /// 1); `None` for a name the register does not have.
            #[must_use]
            pub fn field(self, name: &str) -> Option<u64> {
                $(
                    if name == stringify!($field) {
                        return Some(u64::from(self.$field()));
                    }
                )*
                let _ = name;
                None
            }

            $(
                $(#[$fdoc])*
                #[must_use]
                pub const fn $field(self) -> $ret {
                    const SPEC: FieldSpec = find_field($ty::FIELDS, stringify!($field));
                    field_value!($ret, SPEC, SPEC.extract(self.0))
                }
            )*
        }
    };
}

ibs_register! {
    /// MSR 0xc0011030, IBS fetch control (`union ibs_fetch_ctl`).
    IbsFetchCtl = FetchCtl {
        /// Instruction fetch max. count (bits 0-15), in units of 16.
        fetch_maxcnt: 0, 16 -> u16;
        /// Instruction fetch count (bits 16-31).
        fetch_cnt: 16, 16 -> u16;
        /// Instruction fetch latency (bits 32-47).
        fetch_lat: 32, 16 -> u16;
        /// Instruction fetch enable (bit 48).
        fetch_en: 48, 1 -> bool;
        /// Instruction fetch valid (bit 49).
        fetch_val: 49, 1 -> bool;
        /// Instruction fetch complete (bit 50).
        fetch_comp: 50, 1 -> bool;
        /// I-cache miss (bit 51).
        ic_miss: 51, 1 -> bool;
        /// Physical address valid (bit 52).
        phy_addr_valid: 52, 1 -> bool;
        /// I-cache L1TLB page size, needs `phy_addr_valid` (bits 53-54).
        l1tlb_pgsz: 53, 2 -> u8;
        /// The fetch missed in the L1TLB (bit 55).
        l1tlb_miss: 55, 1 -> bool;
        /// The fetch missed in the L2TLB (bit 56).
        l2tlb_miss: 56, 1 -> bool;
        /// Random tagging enable (bit 57).
        rand_en: 57, 1 -> bool;
        /// L2 miss for the sampled fetch, needs `fetch_comp` (bit 58).
        fetch_l2_miss: 58, 1 -> bool;
        /// Collect L3 miss samples only (bit 59).
        l3_miss_only: 59, 1 -> bool;
        /// Op cache miss for the sampled fetch (bit 60).
        fetch_oc_miss: 60, 1 -> bool;
        /// L3 cache miss for the sampled fetch (bit 61).
        fetch_l3_miss: 61, 1 -> bool;
    }
}

ibs_register! {
    /// MSR 0xc0011033, IBS execution control (`union ibs_op_ctl`).
    IbsOpCtl = OpCtl {
        /// Periodic op max. count, low 16 bits, in units of 16 (bits 0-15).
        opmaxcnt: 0, 16 -> u16;
        /// Collect L3 miss samples only (bit 16; Zen4).
        l3_miss_only: 16, 1 -> bool;
        /// Op sampling enable (bit 17).
        op_en: 17, 1 -> bool;
        /// Op sample valid (bit 18): the other op registers hold a sample.
        op_val: 18, 1 -> bool;
        /// Periodic op counter control (bit 19): 0 counts cycles, 1 dispatched ops.
        cnt_ctl: 19, 1 -> bool;
        /// Upper 7 bits of the periodic op max. count (bits 20-26; `IBS_CAPS_OPCNTEXT`).
        opmaxcnt_ext: 20, 7 -> u8;
        /// Periodic op counter current count (bits 32-58).
        opcurcnt: 32, 27 -> u32;
    }
}

ibs_register! {
    /// MSR 0xc0011035, IBS op data 1 (`union ibs_op_data`).
    IbsOpData = OpData {
        /// Op completion to retire count (bits 0-15).
        comp_to_ret_ctr: 0, 16 -> u16;
        /// Op tag to retire count (bits 16-31).
        tag_to_ret_ctr: 16, 16 -> u16;
        /// Return op (bit 34).
        op_return: 34, 1 -> bool;
        /// Taken branch op (bit 35).
        op_brn_taken: 35, 1 -> bool;
        /// Mispredicted branch op (bit 36).
        op_brn_misp: 36, 1 -> bool;
        /// Branch op retired (bit 37).
        op_brn_ret: 37, 1 -> bool;
        /// `IbsOpRip` is invalid (bit 38).
        op_rip_invalid: 38, 1 -> bool;
        /// Fused branch op (bit 39).
        op_brn_fuse: 39, 1 -> bool;
        /// Microcode op (bit 40).
        op_microcode: 40, 1 -> bool;
    }
}

ibs_register! {
    /// MSR 0xc0011036, IBS op data 2 (`union ibs_op_data2`): where a load's data came from.
    IbsOpData2 = OpData2 {
        /// Data source, low 3 bits (bits 0-2).
        data_src_lo: 0, 3 -> u8;
        /// Destination node: the data came from another node (bit 4).
        rmt_node: 4, 1 -> bool;
        /// Cache hit state: 0 = M, 1 = O (bit 5).
        cache_hit_st: 5, 1 -> bool;
        /// Data source, high 2 bits (bits 6-7; Zen4).
        data_src_hi: 6, 2 -> u8;
    }
}

ibs_register! {
    /// MSR 0xc0011037, IBS op data 3 (`union ibs_op_data3`): the load/store side.
    IbsOpData3 = OpData3 {
        /// Load op (bit 0).
        ld_op: 0, 1 -> bool;
        /// Store op (bit 1).
        st_op: 1, 1 -> bool;
        /// Data cache L1TLB miss (bit 2).
        dc_l1tlb_miss: 2, 1 -> bool;
        /// Data cache L2TLB miss (bit 3; the header's comment says "hit in 2M page").
        dc_l2tlb_miss: 3, 1 -> bool;
        /// Data cache L1TLB hit in a 2M page (bit 4).
        dc_l1tlb_hit_2m: 4, 1 -> bool;
        /// Data cache L1TLB hit in a 1G page (bit 5).
        dc_l1tlb_hit_1g: 5, 1 -> bool;
        /// Data cache L2TLB hit in a 2M page (bit 6).
        dc_l2tlb_hit_2m: 6, 1 -> bool;
        /// Data cache miss (bit 7).
        dc_miss: 7, 1 -> bool;
        /// Misaligned access (bit 8).
        dc_mis_acc: 8, 1 -> bool;
        /// Write-combining memory access (bit 13).
        dc_wc_mem_acc: 13, 1 -> bool;
        /// Uncacheable memory access (bit 14).
        dc_uc_mem_acc: 14, 1 -> bool;
        /// Locked operation (bit 15).
        dc_locked_op: 15, 1 -> bool;
        /// DC miss with no MAB allocated: it hit an outstanding miss (bit 16).
        dc_miss_no_mab_alloc: 16, 1 -> bool;
        /// `IbsDcLinAd` is valid (bit 17).
        dc_lin_addr_valid: 17, 1 -> bool;
        /// `IbsDcPhysAd` is valid (bit 18).
        dc_phy_addr_valid: 18, 1 -> bool;
        /// Data cache L2TLB hit in a 1G page (bit 19).
        dc_l2_tlb_hit_1g: 19, 1 -> bool;
        /// L2 cache miss (bit 20).
        l2_miss: 20, 1 -> bool;
        /// Software prefetch (bit 21).
        sw_pf: 21, 1 -> bool;
        /// Load/store size, encoded: 0 none, else 2^(n-1) bytes (bits 22-25).
        op_mem_width: 22, 4 -> u8;
        /// Outstanding memory requests on DC fill (bits 26-31).
        op_dc_miss_open_mem_reqs: 26, 6 -> u8;
        /// Data cache miss latency in cycles (bits 32-47).
        dc_miss_lat: 32, 16 -> u16;
        /// L1 TLB refill latency in cycles (bits 48-63).
        tlb_refill_lat: 48, 16 -> u16;
    }
}

ibs_register! {
    /// MSR 0xc001103c, IBS fetch control extended (`union ic_ibs_extd_ctl`).
    IcIbsExtdCtl = IcIbsExtdCtl {
        /// ITLB refill latency for the sampled fetch (bits 0-15).
        itlb_refill_lat: 0, 16 -> u16;
    }
}

ibs_register! {
    /// MSR 0xc0011034, the sampled op's linear instruction address.
    IbsOpRip = OpRip {}
}

ibs_register! {
    /// MSR 0xc0011038, the data linear address of the sampled load/store.
    IbsDcLinAd = DcLinAd {}
}

ibs_register! {
    /// MSR 0xc0011039, the data physical address of the sampled load/store.
    IbsDcPhysAd = DcPhysAd {}
}

ibs_register! {
    /// MSR 0xc001103b, the target of the sampled branch (`IBS_CAPS_BRNTRGT`).
    IbsBrTarget = BrTarget {}
}

ibs_register! {
    /// MSR 0xc001103d, IBS op data 4 (`IBS_CAPS_OPDATA4`). Linux 6.12's header defines no
    /// fields for it, so only its raw bits are offered.
    IbsOpData4 = OpData4 {}
}
