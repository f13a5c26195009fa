//! Shell completions and man pages are generated from the clap definitions.
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_bloatlab");

#[test]
fn completions_for_every_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = Command::new(EXE).args(["completions", shell]).output().unwrap();
        assert!(o.status.success(), "{shell}: {}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        for sub in ["server", "test", "lab", "recipe", "sweep", "report"] {
            assert!(text.contains(sub), "{shell} completions lack `{sub}`");
        }
        if shell == "bash" {
            // internal subcommands are not offered at the top level
            let top = text.lines().find(|l| l.trim_start().starts_with("opts=\"") && l.contains(" server ")).unwrap();
            assert!(top.contains(" lab ") && !top.contains("emulate") && !top.contains(" job "), "{top}");
        }
    }
    let o = Command::new(EXE).args(["completions", "tcsh"]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("possible values"));
}

#[test]
fn man_pages_for_the_command_and_each_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(EXE).args(["man", "--out"]).arg(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for page in ["bloatlab.1", "bloatlab-test.1", "bloatlab-lab.1", "bloatlab-lab-cleanup.1", "bloatlab-recipe-run.1", "bloatlab-sweep.1"] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{page} is not a man page");
    }
    let lab = std::fs::read_to_string(dir.path().join("bloatlab-lab.1")).unwrap();
    assert!(lab.contains("queue") && lab.contains("10mbit"), "bloatlab-lab.1 lacks the options");
    assert!(!dir.path().join("bloatlab-emulate.1").exists() && !dir.path().join("bloatlab-job.1").exists());
    let o = Command::new(EXE).arg("man").output().unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains(".TH"));
}
