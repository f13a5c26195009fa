//! Running the system's tools (ip, tc, ethtool) with errors that name the
//! command and say what it printed.
use std::process::{Command, Stdio};

/// Run a command, returning its stdout; on failure the error names the
/// command and its stderr (or its exit status).
pub fn run(argv: &[&str]) -> Result<String, String> {
    let (prog, args) = argv.split_first().ok_or("empty command")?;
    let out = Command::new(prog).args(args).stdin(Stdio::null()).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("`{prog}` is not installed (bloatlab's lab needs iproute2 and ethtool: apt-get install iproute2 ethtool)")
        } else {
            format!("cannot run `{prog}`: {e}")
        }
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        return Err(format!("`{}` failed: {}", argv.join(" "), if err.is_empty() { out.status.to_string() } else { err.to_string() }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True when the command exists on PATH.
pub fn have(cmd: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file())).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn errors_name_the_command() {
        assert_eq!(run(&["sh", "-c", "echo hi"]).unwrap(), "hi\n");
        assert!(run(&["sh", "-c", "echo oops >&2; exit 3"]).unwrap_err().contains("oops"));
        assert!(run(&["sh", "-c", "exit 3"]).unwrap_err().contains("exit status: 3"));
        assert!(run(&["no-such-tool-here"]).unwrap_err().contains("not installed"));
        assert!(have("sh") && !have("no-such-tool-here"));
    }
}
