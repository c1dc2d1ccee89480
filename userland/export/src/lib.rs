//! Exports: the report model in other tools' formats. Each takes model values and writes text;
//! none of them knows where the values came from.
//!
//! - [`dot`]: the data flow view for Graphviz;
//! - [`coz`]: the causal view in Coz's profile format, for Coz's viewer.

pub mod coz;
pub mod dot;
