//! `bloatlab tune`'s decisions, kept free of I/O so they can be tested on
//! their own: the search for a shaper rate ([`search`]), what a shaper
//! installs, removes and keeps ([`plan`]), and what was there before and
//! how it is put back ([`state`]); [`apply`] runs them on an interface.
#![forbid(unsafe_code)]
pub mod apply;
pub mod driver;
pub mod local;
pub mod plan;
pub mod meter;
pub mod search;
pub mod shaper;
pub mod state;
