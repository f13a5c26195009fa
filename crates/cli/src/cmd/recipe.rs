//! `bloatlab recipe list|show|check|run|table`: the seed experiments as
//! recipes. The run itself (shared with `bloatlab sweep`) is the recipes
//! crate's runner; this module prints.
use anyhow::{anyhow, bail, Result};
use bloatlab_recipes::params::RecipeKind;
use bloatlab_recipes::recipe::{self, Recipe, BUILTIN};
use bloatlab_recipes::runner::{self, RunOptions};
use bloatlab_report::fmt::hms as fmt_hms;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

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

/// How to run a recipe or sweep.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Parent folder of the results folder (NAME-UTCSTAMP is created inside).
    pub out: PathBuf,
    /// Run every point N times (repetitions interleaved).
    pub repeat: Option<u32>,
    pub shuffle: bool,
    pub seed: Option<u64>,
    /// Print the points without running them.
    pub dry_run: bool,
    /// Do not print the table at the end (it is still written to table.md).
    pub quiet: bool,
}

impl CommonRunArgs {
    pub fn settings(&self) -> RunSettings {
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
        RecipeCmd::List => list(),
        RecipeCmd::Show { recipe } => show(&recipe),
        RecipeCmd::Check { recipes } => check(&recipes),
        RecipeCmd::Table { dir } => table(&dir),
        RecipeCmd::Run(r) => run(&r.recipe, r.full, &r.set, &r.common.settings()),
    }
}

/// Print to stdout; a closed pipe (`| head`) ends the output quietly.
fn out(s: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|_| o.flush());
}

/// `bloatlab recipe list`.
pub fn list() -> Result<i32> {
    {
        {
            let mut rows = vec![];
            for (name, text) in BUILTIN {
                let short = Recipe::parse(text, name, false).map_err(|e| anyhow!("{e}"))?;
                let full = Recipe::parse(text, name, true).map_err(|e| anyhow!("{e}"))?;
                let est = |r: &Recipe| {
                    let pts = runner::plan(r, false, 0);
                    let s: f64 = pts.iter().map(|p| runner::estimate_point_s(r, p)).sum();
                    format!("{} pts, ~{}", pts.len(), fmt_hms(s))
                };
                rows.push(vec![
                    name.to_string(),
                    short.seeds.join(", "),
                    short.kind.name().to_string() + if short.kind == RecipeKind::Lab { " (root)" } else { "" },
                    est(&short),
                    est(&full),
                    short.title.clone(),
                ]);
            }
            out(&format!(
                "{}\nbloatlab recipe show NAME prints one; bloatlab recipe run NAME|FILE runs it.\n",
                bloatlab_recipes::tables::md_table(&["recipe", "seeds", "kind", "default run", "--full", "what"], &rows)
            ));
            Ok(0)
        }
    }
}

/// `bloatlab recipe show NAME|FILE`.
pub fn show(name: &str) -> Result<i32> {
    {
        {
            if let Some(t) = recipe::builtin_text(name) {
                out(t);
                return Ok(0);
            }
            let text = std::fs::read_to_string(name).map_err(|_| {
                anyhow!(
                    "no recipe named \"{name}\" and no such file (built-in recipes: {})",
                    BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                )
            })?;
            out(&text);
            Ok(0)
        }
    }
}

/// `bloatlab recipe check NAME|FILE...`.
pub fn check(recipes: &[String]) -> Result<i32> {
    {
        {
            let mut bad = 0;
            for r in recipes {
                for full in [false, true] {
                    match recipe::load(r, full) {
                        Ok(x) => {
                            if !full {
                                println!("{r}: ok ({} kind, {} point(s); --full: {})", x.kind.name(), x.point_count(), recipe::load(r, true).map(|f| f.point_count().to_string()).unwrap_or_else(|_| "?".into()));
                            }
                        }
                        Err(e) => {
                            eprintln!("{e:#}");
                            bad += 1;
                            break;
                        }
                    }
                }
            }
            Ok(if bad > 0 { 1 } else { 0 })
        }
    }
}

/// `bloatlab recipe table DIR`.
pub fn table(dir: &Path) -> Result<i32> {
    {
        {
            let t = runner::retabulate(dir)?;
            out(&format!("{t}\n"));
            Ok(0)
        }
    }
}

/// `bloatlab recipe run NAME|FILE [--full] [--set K=V,...]`.
pub fn run(name: &str, full: bool, sets: &[String], settings: &RunSettings) -> Result<i32> {
    {
        {
            let mut r = recipe::load(name, full)?;
            bloatlab_recipes::sweep::apply_sets(&mut r, sets)?;
            execute(&r, settings)
        }
    }
}

/// Run (or with --dry-run, list) a recipe's points and print its table.
pub fn execute(r: &Recipe, c: &RunSettings) -> Result<i32> {
    let mut r = r.clone();
    if let Some(n) = c.repeat {
        if !(1..=1000).contains(&n) {
            bail!("--repeat must be between 1 and 1000");
        }
        r.repeat = n;
    }
    let shuffle = c.shuffle || r.shuffle;
    let seed = c.seed.or(r.shuffle_seed).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    if shuffle {
        eprintln!("shuffled order, seed {seed} (repeat the order with --seed {seed})");
    }
    if r.kind == RecipeKind::Lab && !c.dry_run {
        if !bloatlab_host::is_root() {
            bail!("recipe {} runs lab points, which need root (network namespaces); the pacing recipe runs without root", r.name);
        }
    }
    let opts = RunOptions {
        out_root: c.out.clone(),
        shuffle,
        seed,
        dry_run: c.dry_run,
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let rep = runner::run(&r, &opts)?;
    if c.dry_run {
        return Ok(0);
    }
    if !c.quiet {
        out(&format!("{}\n", rep.table));
    }
    let failed = rep.outcomes.iter().filter(|o| !o.ok).count();
    eprintln!(
        "results: {} ({} of {} point(s) ok{})",
        rep.dir.display(),
        rep.outcomes.len() - failed,
        runner::plan(&r, false, 0).len(),
        if rep.interrupted { ", interrupted" } else { "" }
    );
    Ok(if rep.interrupted {
        130
    } else if failed > 0 {
        1
    } else {
        0
    })
}
