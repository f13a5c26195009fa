//! `bloatlab sweep`: lab parameters and test options over lists of values
//! (a cross product), run like a recipe.
use super::recipe::{execute, CommonRunArgs};
use anyhow::Result;
use bloatlab_recipes::params::{self, RecipeKind};
use bloatlab_recipes::sweep::{sweep_recipe, SweepRequest};
use clap::{Args, ValueEnum};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum SweepKind {
    /// Lab runs (`bloatlab lab`, needs root).
    Lab,
    /// The pacing experiment (loopback, no root).
    Pacing,
}

#[derive(Args, Debug)]
#[command(after_help = "Example: bloatlab sweep --set queue=fifo:1,fifo:10,fifo:100,fifo:1000 --set cc=cubic,bbr -- --scenarios 1u0d\n\
Values are separated by commas; join several scenarios of one value with +: --set scenarios=1u0d+0u1d,4u4d.\n\
Parameters: see docs/recipes.md or `bloatlab sweep --list-params`.")]
pub struct SweepArgs {
    /// KEY=V1,V2,... : sweep KEY over the values (cross product over all --set); KEY=V fixes it.
    #[arg(long = "set", value_name = "KEY=VALUES")]
    pub set: Vec<String>,
    /// What each point runs.
    #[arg(long, value_enum, default_value = "lab")]
    pub kind: SweepKind,
    /// Name of the results folder (and of the recipe written into it).
    #[arg(long, default_value = "sweep")]
    pub name: String,
    /// List the parameters a sweep can set and exit.
    #[arg(long)]
    pub list_params: bool,
    /// Draw the plots with a log y axis (points with y <= 0 are left out, and the plot says how many).
    #[arg(long)]
    pub logy: bool,
    #[command(flatten)]
    pub common: CommonRunArgs,
    /// Options for `bloatlab test` in every point (after `--`), e.g. -- --scenarios 1u0d --duration 10s.
    #[arg(last = true, value_name = "TEST_OPTIONS")]
    pub test_args: Vec<String>,
}

pub fn run_sweep(a: SweepArgs) -> Result<i32> {
    if a.list_params {
        return list_params();
    }
    let settings = a.common.settings();
    let r = sweep_recipe(&sweep_request(a)?)?;
    execute(&r, &settings)
}

/// The sweep this command line asks for.
pub fn sweep_request(a: SweepArgs) -> Result<SweepRequest> {
    let kind = match a.kind {
        SweepKind::Lab => RecipeKind::Lab,
        SweepKind::Pacing => RecipeKind::Pacing,
    };
    if kind == RecipeKind::Pacing && !a.test_args.is_empty() {
        anyhow::bail!("options after -- go to `bloatlab test`; a pacing sweep has none");
    }
    let test = super::test::parse_pass_through(&a.test_args, "bloatlab sweep")?;
    Ok(SweepRequest { sets: a.set, kind, name: a.name, logy: a.logy, test, repeat: a.common.repeat })
}

/// `bloatlab sweep --list-params`.
fn list_params() -> Result<i32> {
    for k in [RecipeKind::Lab, RecipeKind::Pacing] {
        println!("{} parameters (--kind {}):", k.name(), k.name());
        for p in params::params().iter().filter(|p| p.kind == k) {
            println!("  {:<16} {}", p.name, p.help);
        }
    }
    println!("In a value, + joins the items of a list (scenarios=1u0d+0u1d) or repeats an option (ping=router+server): commas separate the values swept.");
    Ok(0)
}

