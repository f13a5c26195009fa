//! Running `ip` and `tc` through crates/host (errors name the command and
//! what it printed), in a network namespace when given one (`-n NS`).

/// Run `argv` (`ip ...` or `tc ...`), in `netns` when given.
pub fn run_in(netns: Option<&str>, argv: &[String]) -> Result<String, String> {
    let v: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
    run(netns, &v)
}

/// [`run_in`] with borrowed words.
pub fn run(netns: Option<&str>, argv: &[&str]) -> Result<String, String> {
    let mut v: Vec<&str> = argv.to_vec();
    if let Some(ns) = netns {
        if !v.is_empty() {
            v.splice(1..1, ["-n", ns]);
        }
    }
    bloatlab_host::cmd::run(&v)
}

/// Run each command in order; the first that fails stops it, with its error.
pub fn run_all(netns: Option<&str>, cmds: &[Vec<String>]) -> Result<(), String> {
    for c in cmds {
        run_in(netns, c)?;
    }
    Ok(())
}

/// Run each command, ignoring failures (a removal of what may not be there).
pub fn run_each_quietly(netns: Option<&str>, cmds: &[Vec<String>]) {
    for c in cmds {
        let _ = run_in(netns, c);
    }
}

/// Whether a network device of that name exists.
pub fn device_exists(netns: Option<&str>, dev: &str) -> bool {
    run(netns, &["ip", "link", "show", "dev", dev]).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_goes_after_the_tool() {
        // `echo -n ns1 x`: the words as `ip -n ns1 ...` would get them
        assert_eq!(run(Some("ns1"), &["echo", "x"]).unwrap(), "ns1 x");
        assert_eq!(run(None, &["sh", "-c", "echo hi"]).unwrap(), "hi\n");
        let e = run_all(None, &[vec!["sh".into(), "-c".into(), "exit 0".into()], vec!["sh".into(), "-c".into(), "echo bad >&2; exit 2".into()]]).unwrap_err();
        assert!(e.contains("bad"), "{e}");
    }
}
