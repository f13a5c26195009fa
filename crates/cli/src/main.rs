//! The `bloatlab` binary: the only place that parses arguments. Each
//! subcommand's flags live in a module here and become the model's typed
//! configurations (or a library crate's typed request), which the library
//! crates run.
#![forbid(unsafe_code)]
mod cmd;
mod options;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "bloatlab", version, about = "Measure, reproduce and explain bufferbloat")]
pub(crate) struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
    /// Serve latency-under-load tests (TCP and UDP on one port).
    Server(cmd::server::ServerArgs),
    /// Run a latency-under-load test against a bloatlab server.
    Test(Box<cmd::test::TestArgs>),
    /// Measure responsiveness (RPM) the IETF way against an HTTPS responsiveness server.
    Rpm(Box<cmd::rpm::RpmArgs>),
    /// Write an HTML report with plots for a result, or a comparison of several.
    Report(cmd::report::ReportArgs),
    /// Draw one plot (timeseries, throughput, latency, cdf, box, queue, tcp) as PNG or SVG.
    Plot(cmd::report::PlotArgs),
    /// Export a result's raw samples as CSV or as a flent data file (.flent.gz).
    Export(cmd::report::ExportArgs),
    /// Print several results side by side with their differences.
    Compare(cmd::report::CompareArgs),
    /// Bufferbloat testbed in network namespaces (needs root); no options = the demo.
    Lab(Box<cmd::lab::LabArgs>),
    /// Shape the line on this router: find the highest rate that keeps latency under load low, verify it before and after.
    Tune(Box<cmd::tune::TuneArgs>),
    /// The seed experiments as recipes: list, show, check, run.
    Recipe(cmd::recipe::RecipeArgs),
    /// Run lab parameters over lists of values (cross product) and tabulate.
    Sweep(cmd::sweep::SweepArgs),
    /// Test servers and RPM servers on a schedule, probe hosts between, for days; keep every result (SQLite or PostgreSQL).
    Monitor(Box<cmd::monitor::MonitorArgs>),
    /// What `bloatlab monitor` kept: a row per run, or per hour or day.
    History(cmd::monitor::HistoryArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(cmd::docs::CompletionsArgs),
    /// Write the man pages (bloatlab(1), bloatlab-lab(1), ...).
    Man(cmd::docs::ManArgs),
    /// Internal: the user-space link emulator the lab runs in its router namespace.
    #[command(hide = true)]
    Emulate(Box<cmd::emulate::EmulateArgs>),
    /// Internal: run the job (a JSON server or test configuration) a lab wrote for this process.
    #[command(hide = true)]
    Job {
        /// The job file.
        file: PathBuf,
    },
}

/// A clap value parser for a type spelled by a fixed list of words (the
/// model's enums): the words show in `--help`, the type parses them.
pub(crate) fn choice<T>(words: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(words).map(|s| s.parse::<T>().ok().expect("every listed word parses"))
}

fn main() {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Server(a) => cmd::server::run_server(a),
        Cmd::Test(a) => cmd::test::run(*a),
        Cmd::Rpm(a) => cmd::rpm::run_rpm(*a),
        Cmd::Report(a) => cmd::report::run_report(a),
        Cmd::Plot(a) => cmd::report::run_plot(a),
        Cmd::Export(a) => cmd::report::run_export(a),
        Cmd::Compare(a) => cmd::report::run_compare(a),
        Cmd::Lab(a) => cmd::lab::run_lab(*a),
        Cmd::Emulate(a) => cmd::emulate::run_emulate(*a),
        Cmd::Tune(a) => cmd::tune::run_tune(*a),
        Cmd::Recipe(a) => cmd::recipe::run_recipe(a),
        Cmd::Sweep(a) => cmd::sweep::run_sweep(a),
        Cmd::Monitor(a) => cmd::monitor::run_monitor(*a),
        Cmd::History(a) => cmd::monitor::run_history(a),
        Cmd::Job { file } => cmd::job::run_job(&file, &bloatlab_report::summary_table),
        Cmd::Completions(a) => cmd::docs::run_completions(a),
        Cmd::Man(a) => cmd::docs::run_man(a),
    };
    match res {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("bloatlab: error: {e:#}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    //! One grammar for scenarios and queues: `bloatlab test`, `bloatlab lab`
    //! and recipes/sweeps accept and refuse exactly the same spellings.
    use super::*;
    use bloatlab_recipes::params::{check_value, spec, RecipeKind};

    fn test_accepts(scenarios: &str) -> bool {
        let cli = Cli::try_parse_from(["bloatlab", "test", "h", "--scenarios", scenarios]);
        matches!(cli, Ok(Cli { cmd: Cmd::Test(a) }) if a.config().is_ok())
    }

    fn lab_accepts(args: &[&str]) -> bool {
        let mut v = vec!["bloatlab", "lab"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v) {
            Ok(Cli { cmd: Cmd::Lab(a) }) => cmd::lab::resolve(&a.run).is_ok(),
            _ => false,
        }
    }

    fn recipe_accepts(param: &str, value: &str) -> bool {
        check_value(spec(RecipeKind::Lab, param).unwrap(), value).is_ok()
    }

    #[test]
    fn test_lab_and_recipes_share_the_scenario_grammar() {
        for s in ["1u0d", "0u1d", "4u4d", "32u32d", "0U32D", "1u0d,0u1d", " 2u3d "] {
            assert!(test_accepts(s), "test refuses {s}");
            assert!(lab_accepts(&["--", "--scenarios", s]), "lab refuses {s}");
            assert!(recipe_accepts("scenarios", s), "recipes refuse {s}");
        }
        for s in ["0u0d", "33u0d", "64u0d", "0u64d", "1up", "u1d", "1u", "x", "1u0d,40u0d", "-1u0d"] {
            assert!(!test_accepts(s), "test accepts {s}");
            assert!(!lab_accepts(&["--", "--scenarios", s]), "lab accepts {s}");
            assert!(!recipe_accepts("scenarios", s), "recipes accept {s}");
        }
    }

    #[test]
    fn lab_recipes_and_emulator_share_the_queue_grammar() {
        let emulate_accepts = |q: &str| {
            matches!(Cli::try_parse_from(["bloatlab", "emulate", "--print-config", "--queue", q]),
                Ok(Cli { cmd: Cmd::Emulate(a) }) if a.link.to_config().is_ok())
        };
        for q in ["fifo:1000", "pfifo:10", "fifo:limit=5", "100", "bfifo:64k", "bfifo:65536", "drophead:50", "codel", "codel:target=10ms", "fq_codel", "fq_codel:quantum=300,flows=64", "pie", "pie:target=20ms,noecn"] {
            assert!(lab_accepts(&["--queue-up", q, "--queue-down", "fifo:10"]), "lab refuses {q}");
            // in the lab's comma list too (one run each): a queue keeps its own parameters
            assert!(lab_accepts(&["--queue", &format!("fifo:10,{q}")]), "lab refuses the list fifo:10,{q}");
            assert!(recipe_accepts("queue", q), "recipes refuse {q}");
            assert!(emulate_accepts(q), "emulate refuses {q}");
        }
        for q in ["fifo", "fifo:0", "fifo:x", "bfifo", "bfifo:10", "drophead", "red", "sfq", "cake", "codel:bogus=1", "codel:target=200ms", "fq_codel:flows=100000", ""] {
            assert!(!lab_accepts(&["--queue-up", q, "--queue-down", "fifo:10"]), "lab accepts {q}");
            assert!(!recipe_accepts("queue", q), "recipes accept {q}");
            assert!(!emulate_accepts(q), "emulate accepts {q}");
        }
    }

    #[test]
    fn a_negative_value_is_explained_not_taken_for_a_flag() {
        // clap alone would call -20ms an unknown flag and suggest `-- -20ms`,
        // which for `lab` means the test's options
        for args in [&["bloatlab", "lab", "--delay", "-20ms"][..], &["bloatlab", "test", "h", "--duration", "-5s"]] {
            let e = Cli::try_parse_from(args).err().expect("refused").to_string();
            assert!(e.contains("is negative") && !e.contains("use '--"), "{args:?}: {e}");
        }
    }

}
