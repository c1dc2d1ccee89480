//! How every text of the data flow view marks its steps: the arrows, and the instruction.

/// The arrow of a step that stayed on one CPU, and of one that changed CPU (same width).
pub(super) const SAME_CPU: &str = "------->";
pub(super) const CPU_CHANGE: &str = "==cpu==>";

/// A step's instruction: `function+offset`, saying so when only the trap ip is known.
pub(super) fn instruction_label(function: &str, offset: u64, found: bool) -> String {
    if found {
        format!("{function}+{offset:#x}")
    } else {
        format!("{function}+{offset:#x} (trap; no code)")
    }
}
