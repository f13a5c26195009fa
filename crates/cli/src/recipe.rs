//! `bloatlab recipe ...` and `bloatlab sweep ...` command lines, mapped to
//! the recipes crate's typed requests.
use anyhow::Result;
use bloatlab_recipes::app::{self, RunSettings, SweepRequest};
use bloatlab_recipes::params::RecipeKind;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(after_help = "Recipes are the seed experiments as TOML files (docs/recipes.md). Copy one with \
`bloatlab recipe show txqueuelen > my.toml`, edit it, run it with `bloatlab recipe run my.toml`.")]
pub struct RecipeArgs {
    #[command(subcommand)]
    pub cmd: RecipeCmd,
}

#[derive(Subcommand, Debug)]
pub enum RecipeCmd {
    /// List the built-in recipes.
    List,
    /// Print a recipe (built-in name or file) to stdout, ready to copy and edit.
    Show {
        /// Built-in recipe name (see `recipe list`) or a recipe file.
        recipe: String,
    },
    /// Check recipe files (or built-in names) without running anything.
    Check {
        #[arg(required = true)]
        recipes: Vec<String>,
    },
    /// Run a recipe and write a results folder.
    Run(RunArgs),
    /// Print the table of a results folder again (and redraw its CSV, table.md and plots).
    Table {
        /// A results folder written by `recipe run` or `sweep`.
        dir: PathBuf,
    },
}

#[derive(Args, Debug, Clone)]
pub struct CommonRunArgs {
    /// Parent folder of the results folder (NAME-UTCSTAMP is created inside).
    #[arg(long, default_value = "bloatlab-results", value_name = "DIR")]
    pub out: PathBuf,
    /// Run every point N times (repetitions interleaved: all points, then again).
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Run the points in a random order (reproducible with --seed).
    #[arg(long)]
    pub shuffle: bool,
    /// Seed of the shuffled order.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Print the points (and what each runs) without running them.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not print the table at the end (it is still written to table.md).
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Built-in recipe name or recipe file.
    pub recipe: String,
    /// The complete run the recipe describes in [full] (longer runs, bigger grid).
    #[arg(long)]
    pub full: bool,
    /// Override a parameter: KEY=VALUE fixes it, KEY=V1,V2,... sweeps it (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUES")]
    pub set: Vec<String>,
    #[command(flatten)]
    pub common: CommonRunArgs,
}

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

impl CommonRunArgs {
    fn settings(&self) -> RunSettings {
        RunSettings {
            out: self.out.clone(),
            repeat: self.repeat,
            shuffle: self.shuffle,
            seed: self.seed,
            dry_run: self.dry_run,
            quiet: self.quiet,
        }
    }
}

pub fn run_recipe(a: RecipeArgs) -> Result<i32> {
    match a.cmd {
        RecipeCmd::List => app::list(),
        RecipeCmd::Show { recipe } => app::show(&recipe),
        RecipeCmd::Check { recipes } => app::check(&recipes),
        RecipeCmd::Table { dir } => app::table(&dir),
        RecipeCmd::Run(r) => app::run(&r.recipe, r.full, &r.set, &r.common.settings()),
    }
}

pub fn run_sweep(a: SweepArgs) -> Result<i32> {
    if a.list_params {
        return app::list_params();
    }
    app::sweep(&sweep_request(a)?)
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
    let test = crate::test::parse_pass_through(&a.test_args, "bloatlab sweep")?;
    Ok(SweepRequest { sets: a.set, kind, name: a.name, logy: a.logy, test, run: a.common.settings() })
}
