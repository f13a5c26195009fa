//! One module per subcommand: each maps its command line to a library
//! configuration, calls the library, and prints. Libraries expose functions
//! and types, never subcommands.
pub mod docs;
pub mod emulate;
pub mod job;
pub mod lab;
pub mod monitor;
pub mod recipe;
pub mod report;
pub mod rpm;
pub mod server;
pub mod sweep;
pub mod test;
pub mod tune;

use anyhow::{anyhow, Result};

/// A client's `--secret-file` (`bloatlab test`, `bloatlab rpm`), defined once.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientSecret {
    /// The server's shared secret (the same file as its --secret-file): answer
    /// its challenge and sign every probe (probes are then at least 64 bytes).
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<std::path::PathBuf>,
}

impl ClientSecret {
    /// The secret, read and checked once, here at the edge.
    pub fn read(&self) -> Result<Option<bloatlab_model::Secret>> {
        self.secret_file.as_deref().map(read_secret).transpose()
    }
}

/// A server's port as a client names it: 1-65535 (as `HOST:PORT` is checked).
pub fn server_port(s: &str) -> Result<u16, String> {
    bloatlab_model::config::parse_port(s)
}

/// Read a `--secret-file` once, here at the edge.
pub fn read_secret(path: &std::path::Path) -> Result<bloatlab_model::Secret> {
    let bytes = std::fs::read(path).map_err(|e| anyhow!("--secret-file {}: {e}", path.display()))?;
    bloatlab_model::Secret::from_file_contents(&bytes, &format!("--secret-file {}", path.display())).map_err(|e| anyhow!(e))
}

