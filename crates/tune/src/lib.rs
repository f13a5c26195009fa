//! `bloatlab tune`'s decisions, kept free of I/O so they can be tested on
//! their own: the search for a shaper rate ([`search`]) and what a shaper
//! installs, removes and keeps ([`plan`]).
#![forbid(unsafe_code)]
pub mod plan;
pub mod search;
