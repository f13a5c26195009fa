//! One module per subcommand: each maps its command line to a library
//! configuration, calls the library, and prints. Libraries expose functions
//! and types, never subcommands.
pub mod docs;
pub mod emulate;
pub mod job;
pub mod lab;
pub mod recipe;
pub mod report;
pub mod rpm;
pub mod server;
pub mod sweep;
pub mod test;

use anyhow::{anyhow, Result};

/// Read a `--secret-file` once, here at the edge.
pub fn read_secret(path: &std::path::Path) -> Result<bloatlab_model::Secret> {
    let bytes = std::fs::read(path).map_err(|e| anyhow!("--secret-file {}: {e}", path.display()))?;
    bloatlab_model::Secret::from_file_contents(&bytes, &format!("--secret-file {}", path.display())).map_err(|e| anyhow!(e))
}

