//! bloatlab-rpm: the IETF "Responsiveness under Working Conditions" method
//! (draft-ietf-ippm-responsiveness-08) on both ends.
//!
//! * [`server`]: the endpoints networkQuality-style clients use, over HTTPS
//!   with HTTP/2 (and HTTP/1.1), sharing `bloatlab server`'s connection
//!   limits, log and shared secret;
//! * [`client`]: `bloatlab rpm URL`, load-generating connections added until
//!   goodput is stable, foreign and self probes, the draft's formula;
//! * [`nq`]: the configuration document (`/.well-known/nq`);
//! * [`tls`]: certificates (given or self-signed) and verification.
//!
//! Everything async runs on a small tokio runtime of its own, beside the
//! blocking threads of the bloatlab protocol.
#![forbid(unsafe_code)]
pub mod client;
pub mod nq;
pub mod pace;
pub mod result;
pub mod server;
pub mod stage;
pub mod tls;

pub use client::{run as run_client, run_until as run_client_until, StageProgress};
pub use stage::TestStages;
pub use server::RpmServer;
