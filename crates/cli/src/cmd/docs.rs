//! `bloatlab completions SHELL` and `bloatlab man`: shell completions and
//! man pages generated from the clap definitions (clap_complete, clap_mangen).
use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
#[command(after_help = "Install, e.g.: bloatlab completions bash > ~/.local/share/bash-completion/completions/bloatlab\n\
         zsh: bloatlab completions zsh > ~/.zfunc/_bloatlab   fish: bloatlab completions fish > ~/.config/fish/completions/bloatlab.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
#[command(after_help = "Install, e.g.: sudo bloatlab man --out /usr/local/share/man/man1 && man bloatlab-lab")]
pub struct ManArgs {
    /// Write bloatlab.1 and one page per subcommand (bloatlab-lab.1, ...) into DIR;
    /// without it, print bloatlab(1) to stdout.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The command line users see: the internal subcommands (the lab's
/// `emulate` and `job`) left out.
fn public_command() -> clap::Command {
    let base = crate::Cli::command();
    let mut c = clap::Command::new("bloatlab")
        .version(env!("CARGO_PKG_VERSION"))
        .about(base.get_about().cloned().unwrap_or_default());
    for arg in base.get_arguments() {
        c = c.arg(arg.clone());
    }
    for sub in base.get_subcommands().filter(|s| !s.is_hide_set()) {
        c = c.subcommand(sub.clone());
    }
    c
}

pub fn run_completions(a: CompletionsArgs) -> Result<i32> {
    let mut cmd = public_command();
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "bloatlab", &mut buf);
    // a closed pipe (`| head`) ends the output quietly
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&buf).and_then(|_| out.flush());
    Ok(0)
}

pub fn run_man(a: ManArgs) -> Result<i32> {
    let cmd = public_command();
    match a.out {
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut out).context("writing the man page")?;
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let n = write_pages(&cmd, &dir)?;
            eprintln!("wrote {n} man pages to {}", dir.display());
        }
    }
    Ok(0)
}

/// bloatlab.1 and bloatlab-SUB.1 for every visible subcommand (recursively).
fn write_pages(cmd: &clap::Command, dir: &Path) -> Result<usize> {
    let mut n = 0;
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string();
    let path = dir.join(format!("{name}.1"));
    let mut f = std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    clap_mangen::Man::new(cmd.clone()).render(&mut f).with_context(|| format!("writing {}", path.display()))?;
    n += 1;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let sub = sub.clone().display_name(format!("{name}-{}", sub.get_name())).bin_name(format!("{name} {}", sub.get_name()));
        n += write_pages(&sub, dir)?;
    }
    Ok(n)
}
