//! `bloatlab tune`'s decisions, kept free of I/O so they can be tested on
//! their own: the search for a shaper rate ([`search`]).
#![forbid(unsafe_code)]
pub mod search;
