//! The accept loop every listener shares: accept, take a unit of the
//! connection quota (total and per source) before any work, let the
//! listener admit the connection or refuse it with a reason. Asynchronous
//! listeners ([`accept_loop`]: the RPM endpoints, the browser test,
//! `/metrics`) spawn the connection's future; a refused connection is
//! closed at once (nothing has been negotiated to tell it in), the log says
//! why, at most one line a second ([`crate::Log::refused`]). The bloatlab
//! protocol's threads ([`accept_blocking`]) hand a refused connection to
//! the protocol, which tells the peer why.
use crate::log::Log;
use crate::quota::{full_reason, Permit, Quota};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Serve `l` for as long as the process lives: `admit` gets each
/// connection that took its quota unit (the permit, to hold for as long as
/// the connection lives) and returns the future serving it, or why not.
pub async fn accept_loop<A, F>(l: TcpListener, conns: Arc<Quota>, log: Arc<Log>, admit: A)
where
    A: Fn(TcpStream, SocketAddr, Permit) -> Result<F, String>,
    F: Future<Output = ()> + Send + 'static,
{
    loop {
        let (tcp, peer) = match l.accept().await {
            Ok(x) => x,
            Err(_) => {
                // Out of descriptors or similar: let connections close first.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let permit = match conns.take(peer.ip()) {
            Ok(p) => p,
            Err(f) => {
                log.refused(peer, full_reason(f, "connections"));
                continue;
            }
        };
        match admit(tcp, peer, permit) {
            Ok(fut) => {
                tokio::spawn(fut);
            }
            Err(reason) => log.refused(peer, reason),
        }
    }
}

/// Start an accept loop on the process's runtime for each of `listeners`,
/// and the log's refusal flush beside them.
pub fn serve_all<A, F>(listeners: Vec<std::net::TcpListener>, conns: Arc<Quota>, log: Arc<Log>, admit: A) -> Result<(), String>
where
    A: Fn(TcpStream, SocketAddr, Permit) -> Result<F, String> + Clone + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let rt = crate::runtime::runtime()?;
    let _enter = rt.enter();
    for l in listeners {
        let l = TcpListener::from_std(l).map_err(|e| format!("cannot serve a listener: {e}"))?;
        rt.spawn(accept_loop(l, conns.clone(), log.clone(), admit.clone()));
    }
    rt.spawn(crate::log::flush_refusals(log));
    Ok(())
}

/// What a blocking listener's `admit` gives back when it refuses: the
/// connection, and why.
pub type Refusal = (std::net::TcpStream, String);

/// The accept loop of a listener served by threads (the bloatlab protocol):
/// for as long as the process lives, each connection takes its unit of
/// `conns` (else `refuse` gets it, with `full`'s wording of the limit), then
/// `admit` (which starts its thread, or refuses it too).
pub fn accept_blocking<F, R, A>(l: std::net::TcpListener, conns: Arc<Quota>, full: F, refuse: R, admit: A)
where
    F: Fn(crate::Full) -> String,
    R: Fn(std::net::TcpStream, SocketAddr, String),
    A: Fn(std::net::TcpStream, SocketAddr, Permit) -> Result<(), Refusal>,
{
    loop {
        let (s, peer) = match l.accept() {
            Ok(x) => x,
            // Out of descriptors or memory: let connections wait in the backlog.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        match conns.take(peer.ip()) {
            Ok(permit) => {
                if let Err((s, why)) = admit(s, peer, permit) {
                    refuse(s, peer, why);
                }
            }
            Err(f) => refuse(s, peer, full(f)),
        }
    }
}
