//! dprof library: the profile file, the `/dev/dprof` client, symbols and summaries.
//!
//! The profile side ([`profile`], [`symbols`], [`summary`], [`hardware`]) does no device I/O
//! and reads profiles from bytes, so analysis never needs the machine a profile came from. The
//! collector side ([`device`], [`system`], [`samplers`]) talks to the module and the live
//! system; nothing in the profile side depends on it.

pub mod analysis;
pub mod cache;
pub mod causal_analysis;
pub mod debuginfo;
pub mod decode;
pub mod device;
pub mod hardware;
pub mod histories;
pub mod kcore;
pub mod profile;
pub mod report;
pub mod resolve;
pub mod samplers;
pub mod summary;
pub mod symbols;
pub mod system;
pub mod units;
pub mod views;

/// Version of this library, written into every profile.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
