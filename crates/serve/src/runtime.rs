//! The one tokio runtime of a process: every asynchronous listener (the
//! RPM endpoints, the browser test, the monitor's `/metrics`) runs its
//! accept loops and connections here, on one worker thread per CPU (at
//! least two). It lives as long as the process.
use std::sync::OnceLock;

static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();

/// The process's runtime, started on first use.
pub fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    RUNTIME
        .get_or_init(|| {
            let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name("serve")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the serving runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Run `fut` on the process's runtime.
pub fn spawn<F>(fut: F) -> Result<(), String>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    runtime()?.spawn(fut);
    Ok(())
}
