//! How an instruction touches memory.

/// Whether the instruction reads, writes or both at its memory operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessKind {
    /// Loads only.
    Read,
    /// Stores only.
    Write,
    /// Loads and stores (read-modify-write, xchg, cmpxchg, ...).
    ReadWrite,
}

impl AccessKind {
    /// `read`, `write` or `read_write`, as in JSON.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::ReadWrite => "read_write",
        }
    }
}
