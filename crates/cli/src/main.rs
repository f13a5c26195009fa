//! The `bloatlab` binary: subcommands only; every subcommand lives in its crate.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "bloatlab", version, about = "Measure, reproduce and explain bufferbloat")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve latency-under-load tests (TCP and UDP on one port).
    Server(bloatlab_engine::cli::ServerArgs),
    /// Run a latency-under-load test against a bloatlab server.
    Test(bloatlab_engine::cli::TestArgs),
    /// Write an HTML report with plots for a result, or a comparison of several.
    Report(bloatlab_report::cli::ReportArgs),
    /// Draw one plot (timeseries, throughput, latency, cdf, box, queue, tcp) as PNG or SVG.
    Plot(bloatlab_report::cli::PlotArgs),
    /// Export a result's raw samples as CSV or as a flent data file (.flent.gz).
    Export(bloatlab_report::cli::ExportArgs),
    /// Print several results side by side with their differences.
    Compare(bloatlab_report::cli::CompareArgs),
    /// Bufferbloat testbed in network namespaces (needs root); no options = the demo.
    Lab(Box<bloatlab_lab::cli::LabArgs>),
    /// The seed experiments as recipes: list, show, check, run.
    Recipe(bloatlab_recipes::cli::RecipeArgs),
    /// Run lab parameters over lists of values (cross product) and tabulate.
    Sweep(bloatlab_recipes::cli::SweepArgs),
    /// Internal: the user-space link emulator the lab runs in its router namespace.
    #[command(hide = true)]
    Emulate(Box<bloatlab_emulator::cli::EmulateArgs>),
}

/// `bloatlab test`: measure, print the summary table, optionally write the HTML report.
fn run_test(a: bloatlab_engine::cli::TestArgs) -> anyhow::Result<i32> {
    let (want_report, json) = (a.report, a.json.clone());
    let (code, result) = bloatlab_engine::cli::run_test(a, &bloatlab_report::summary_table)?;
    if let (true, Some(r)) = (want_report, result) {
        let files = bloatlab_report::cli::write_test_report(&r, json.as_deref().map(std::path::Path::new))?;
        eprintln!("bloatlab: report written to {} ({} plots)", files.html.display(), files.images.len());
    }
    Ok(code)
}

fn main() {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Server(a) => bloatlab_engine::cli::run_server(a),
        Cmd::Test(a) => run_test(a),
        Cmd::Report(a) => bloatlab_report::cli::run_report(a),
        Cmd::Plot(a) => bloatlab_report::cli::run_plot(a),
        Cmd::Export(a) => bloatlab_report::cli::run_export(a),
        Cmd::Compare(a) => bloatlab_report::cli::run_compare(a),
        Cmd::Lab(a) => bloatlab_lab::cli::run_lab(*a),
        Cmd::Emulate(a) => bloatlab_emulator::cli::run_emulate(*a),
        Cmd::Recipe(a) => bloatlab_recipes::cli::run_recipe(a),
        Cmd::Sweep(a) => bloatlab_recipes::cli::run_sweep(a),
    };
    match res {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("bloatlab: error: {e:#}");
            std::process::exit(1);
        }
    }
}
