//! dprof's terminal browser of the report model (`dprof tui`).
//!
//! State, events and views are kept apart:
//! - [`App`] is the whole state: the report (once loaded), the view shown, each view's
//!   selection, sort and filter, and the help overlay. Each part handles the keys it knows and
//!   says whether it did ([`EventState`]); what none of them takes, the app handles.
//! - [`Event`] is everything that can change the state: keys and resizes from the input thread,
//!   and progress, then the report, from the loader thread. The draw loop ([`run`]) takes one
//!   event at a time from one channel.
//! - Views are pure renderings of the state (`impl Widget for &App`): they cannot change it.
//!
//! The report is made once, by the loader the caller hands to [`run`] (the CLI's analysis of a
//! profile, or a saved JSON report), in a background thread; the browser only navigates it.
//!
//! Views the report has no data for (causal: a profile without causal experiments;
//! miss classification and working set of a report saved without them; data flow of a profile
//! collected without histories) say so and why, instead of showing anything made up (see
//! [`app::Absence`]).
#![forbid(unsafe_code)]

pub mod app;
mod event;
mod event_loop;
mod format;
mod terminal;
mod views;

pub use app::{App, Column, Pane, View};
pub use event::{Event, EventState, LoadEvent};
pub use event_loop::{run, Outcome, TuiError};
pub use views::{MIN_HEIGHT, MIN_WIDTH};
