//! dprof library.
