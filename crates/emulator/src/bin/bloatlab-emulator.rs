//! Standalone entry point of the link emulator: `bloatlab-emulator emulate ...`
//! (the same as the hidden `bloatlab emulate`). Integration tests use it.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "bloatlab-emulator", version, about = "bloatlab's user-space link emulator")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the emulator between interfaces of a (router) network namespace.
    Emulate(bloatlab_emulator::cli::EmulateArgs),
}

fn main() {
    let Cmd::Emulate(a) = Cli::parse().cmd;
    match bloatlab_emulator::cli::run_emulate(a) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("bloatlab emulate: error: {e:#}");
            std::process::exit(1);
        }
    }
}
