//! bloatlab measurement engine: `bloatlab server` and `bloatlab test`.
//!
//! Threads and blocking sockets throughout: one thread per connection on the
//! server, per flow on the client, and dedicated threads for probes, so probe
//! timestamps are taken the moment the kernel hands a datagram over. See
//! `docs/engine.md`.
#![forbid(unsafe_code)]
pub mod client;
pub mod conn;
pub mod flow;
pub mod ping;
pub mod udpflow;
pub mod watch;
pub mod probe;
pub mod server;
pub mod summarize;
pub mod sys;
