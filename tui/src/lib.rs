//! The dprof terminal browser. Empty until the TUI issue lands.
#![forbid(unsafe_code)]
