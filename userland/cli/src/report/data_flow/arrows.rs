//! The arrows every text of the data flow view marks steps with.

/// The arrow of a step that stayed on one CPU, and of one that changed CPU (same width).
pub(super) const SAME_CPU: &str = "------->";
pub(super) const CPU_CHANGE: &str = "==cpu==>";
