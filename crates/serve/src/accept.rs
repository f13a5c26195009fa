//! The accept loop every asynchronous listener shares: accept, take a unit
//! of the connection quota (total and per source) before any work, let the
//! listener admit the connection or refuse it with a reason, spawn its
//! future. A refused connection is closed at once (nothing has been
//! negotiated to tell it in); the log says why, at most one line a second
//! ([`crate::Log::refused`]).
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
