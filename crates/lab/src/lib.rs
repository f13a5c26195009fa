//! bloatlab-lab: a bufferbloat testbed in network namespaces.
//!
//! `bloatlab lab` builds client, router, server and witness namespaces joined
//! by veth pairs, puts a rate-limited queue (the bottleneck) on the router's
//! egress or on the sender's own interface, runs the bloatlab engine inside
//! (children get typed [`bloatlab_model::Job`]s), samples the bottleneck
//! queue, and tears everything down. See docs/lab.md.
//!
//! Library use:
//! ```no_run
//! use bloatlab_lab::{Session, RunOptions};
//! use bloatlab_model::{LabConfig, QueueSpec};
//! let cfg = LabConfig { queue: QueueSpec::Fifo { packets: 100 }, ..Default::default() };
//! let mut s = Session::new();                 // dropped = torn down
//! let out = s.run(&cfg, &RunOptions::default())?;
//! println!("{:?}", out.result.lab.unwrap().queues.len());
//! # anyhow::Ok(())
//! ```
#![forbid(unsafe_code)]
mod lab;
pub mod progress;
mod run;
pub mod sampler;
mod session;
pub mod tune;
pub use bloatlab_host::signals;
pub mod state;
pub mod sys;

pub use lab::{backend, emulator_config, kernel_support, probe_qdiscs, validate, Host, Lab, QdiscSupport, QueueTarget, PROBED_QDISCS};
pub use run::{check_test_options, lab_test_config, phase_queues, LabProgress, ProgressFn, RunOptions, RunOutcome};
pub use session::Session;
