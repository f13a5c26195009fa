//! bloatlab's user-space link emulator, in the style of mahimahi: packets cross
//! a TUN device into this process, wait in a queue discipline, are serialized
//! at the link rate (fixed or trace-driven), may be lost, are held for the
//! propagation delay (plus jitter) and are written back out.
//!
//! * [`qdisc`]: queue disciplines (pure, unit-tested): pfifo, bfifo, drophead,
//!   CoDel (RFC 8289), FQ-CoDel (RFC 8290), PIE (RFC 8033).
//! * [`link`]: one direction of the link as a discrete-event model.
//! * [`config`]: the configuration (queues, rates and traces are `bloatlab_model`'s).
//! * [`tun`], [`datapath`], [`run`]: the emulator process (TUN devices, direction threads, routing).
//! * [`handle`]: starting and stopping the emulator from the lab ([`start_in_netns`]).
//!
//! See docs/emulator.md.
#![forbid(unsafe_code)]

pub mod config;
pub mod link;
pub mod packet;
pub mod qdisc;
pub mod rng;

pub use config::{DirectionConfig, EmulatorConfig, JitterSpec, LossSpec, QueueSpec, RateSpec, TimerMode};
pub mod datapath;
pub mod handle;
pub mod run;
/// TUN devices: crates/host's (the system calls live there).
pub use bloatlab_host::tun;

pub use handle::{start_in_netns, start_with, EmulatorHandle, EmulatorStats, StartOptions};
pub use run::{run, RunSpec};
