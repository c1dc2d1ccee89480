//! What several of the scenario tools share.

/// `struct perf_event_attr` up to `config2` (`PERF_ATTR_SIZE_VER1`, 72 bytes), which the ABI
/// lets callers pass. For breakpoints `config1` is `bp_addr` and `config2` is `bp_len`.
#[repr(C)]
#[derive(Default)]
pub struct PerfEventAttr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
}

impl PerfEventAttr {
    /// Its size, as the `size` field wants it.
    #[must_use]
    pub const fn abi_size() -> u32 {
        std::mem::size_of::<Self>() as u32
    }
}
