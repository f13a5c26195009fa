//! The serving stack every listener of bloatlab rests on (docs/design.md):
//!
//! * [`quota`]: admission before any work (a total and a per-source limit,
//!   fair handshake slots) and the refusal log's rate limit;
//! * [`log`]: one JSON line per event, refusals at most one line a second
//!   with their count;
//! * [`socket`]: listening sockets (dual stack, reuse), the keepalive a
//!   vanished peer is found by, the 5 s handshake deadline;
//! * [`runtime`]: the one tokio runtime of a process;
//! * [`accept`]: the accept loop (accept, take the connection quota, admit
//!   or refuse with the reason logged, spawn);
//! * [`tls`]: the HTTPS listeners' certificate and handshakes (fair slots,
//!   a deadline, refusals logged);
//! * [`http`]: one hyper connection (HTTP/1.1, or HTTP/2 within its bounds)
//!   driven within its limits (a first request in time, closed when idle, a
//!   lifetime), ended with the reason.
//!
//! The bloatlab protocol server (engine, threads), the RPM endpoints, the
//! browser test and the monitor's `/metrics` (tokio, hyper) plug their
//! handlers into it; none of them builds its own admission, log or runtime.
#![forbid(unsafe_code)]
pub mod accept;
pub mod http;
pub mod log;
pub mod quota;
pub mod runtime;
pub mod socket;
pub mod tls;

pub use log::{log_line, Log};
pub use quota::{full_reason, source_of, Full, Permit, Quota};
pub use socket::{listener, make_socket, watch_peer, HELLO_DEADLINE};
