//! bloatlab-lab: a bufferbloat testbed in network namespaces.
//!
//! `bloatlab lab` builds client, router, server and witness namespaces joined
//! by veth pairs, puts a rate-limited queue (the bottleneck) on the router's
//! egress or on the sender's own interface, runs the bloatlab engine inside,
//! samples the bottleneck queue, and tears everything down. See docs/lab.md.
//!
//! Library use:
//! ```no_run
//! use bloatlab_lab::{Lab, LabConfig, RunOptions, QueueSpec};
//! let mut cfg = LabConfig::default();
//! cfg.queue = QueueSpec::Fifo { packets: 100 };
//! let mut lab = Lab::build(&cfg)?;            // dropped = torn down
//! let out = lab.run_test(&RunOptions::default())?;
//! println!("{:?}", out.result.lab.unwrap().queues.len());
//! # anyhow::Ok(())
//! ```
pub mod cli;
mod lab;
pub mod nlstats;
mod run;
pub mod sampler;
pub mod signals;
pub mod spec;
pub mod state;
pub mod sys;
pub mod table;

pub use lab::{probe_qdiscs, Host, Lab, LabConfig, QdiscSupport, QueueTarget, FRAME_BYTES, PROBED_QDISCS};
pub use run::{RunOptions, RunOutcome};
pub use spec::{Backend, OnOff, Placement, QueueSpec, Rate, Shaper};
