//! What `bloatlab recipe ...` and `bloatlab sweep ...` do, on typed
//! requests (the command line is parsed in crates/cli).
use crate::params::{self, check_value, RecipeKind};
use crate::recipe::{self, Axis, Recipe, BUILTIN};
use crate::runner::{self, RunOptions};
use crate::units::fmt_hms;
use anyhow::{anyhow, bail, Result};
use bloatlab_model::TestOverrides;
use std::path::{Path, PathBuf};

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

/// A `bloatlab sweep`.
#[derive(Debug, Clone)]
pub struct SweepRequest {
    /// `KEY=V1,V2,...`: sweep KEY over the values; `KEY=V` fixes it.
    pub sets: Vec<String>,
    pub kind: RecipeKind,
    /// Name of the results folder and of the recipe written into it.
    pub name: String,
    pub logy: bool,
    /// The test options given after `--` (become settings of the sweep's recipe).
    pub test: TestOverrides,
    pub run: RunSettings,
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
                crate::tables::md_table(&["recipe", "seeds", "kind", "default run", "--full", "what"], &rows)
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
            apply_sets(&mut r, sets)?;
            execute(&r, settings)
        }
    }
}

/// Parse "KEY=V1,V2" into (key, values) checked against the parameter table.
fn parse_set(kind: RecipeKind, s: &str) -> Result<(String, Vec<params::Value>)> {
    let (k, v) = s.split_once('=').ok_or_else(|| anyhow!("--set {s}: expected KEY=VALUE[,VALUE...]"))?;
    let k = k.trim().replace('-', "_");
    let spec = params::spec(kind, &k).ok_or_else(|| anyhow!("--set {s}: {}", params::unknown_param(kind, &k)))?;
    let mut vals: Vec<params::Value> = vec![];
    for raw in v.split(',') {
        let val = check_value(spec, raw).map_err(|e| anyhow!("--set {s}: {e}"))?;
        if vals.iter().any(|x| x.text == val.text) {
            bail!("--set {s}: value \"{}\" is listed twice", val.text);
        }
        vals.push(val);
    }
    if k == "scenarios" && vals.len() > 1 {
        eprintln!(
            "note: --set {s} sweeps the scenarios as {} separate points; join them with + to run them in one test ({})",
            vals.len(),
            vals.iter().map(|v| v.text.as_str()).collect::<Vec<_>>().join("+")
        );
    }
    Ok((k, vals))
}

/// Apply `--set` overrides to a loaded recipe: one value fixes, several sweep.
fn apply_sets(r: &mut Recipe, sets: &[String]) -> Result<()> {
    for s in sets {
        let (k, vals) = parse_set(r.kind, s)?;
        r.settings.retain(|(n, _)| *n != k);
        if vals.len() == 1 {
            r.grid.retain(|a| a.name != k);
            r.settings.push((k, vals.into_iter().next().unwrap()));
        } else {
            match r.grid.iter_mut().find(|a| a.name == k) {
                Some(a) => a.values = vals,
                None => r.grid.push(Axis { name: k, values: vals }),
            }
        }
    }
    if !sets.is_empty() {
        r.source = recipe_text(r);
    }
    Ok(())
}

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A recipe file equivalent to `r` (written into the results folder of a sweep
/// or of a recipe run with --set, so the run can be repeated with `recipe run`).
pub fn recipe_text(r: &Recipe) -> String {
    let mut t = String::new();
    t.push_str(&format!("# written by bloatlab {} for a run of \"{}\"\n", env!("CARGO_PKG_VERSION"), r.name));
    t.push_str(&format!("name = {}\ntitle = {}\n", q(&r.name), q(&r.title)));
    if !r.seeds.is_empty() {
        t.push_str(&format!("seeds = [{}]\n", r.seeds.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ")));
    }
    if !r.description.is_empty() {
        t.push_str(&format!("description = {}\n", q(&r.description)));
    }
    t.push_str(&format!("kind = {}\nrepeat = {}\nshuffle = {}\n", q(r.kind.name()), r.repeat, r.shuffle));
    if let Some(s) = r.shuffle_seed {
        t.push_str(&format!("shuffle_seed = {s}\n"));
    }
    let list = |v: &[String]| v.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ");
    t.push_str("\n[settings]\n");
    for (k, v) in &r.settings {
        t.push_str(&format!("{k} = {}\n", q(&v.text.replace(',', "+"))));
    }
    t.push_str("\n[grid]\n");
    for a in &r.grid {
        let vals: Vec<String> = a.values.iter().map(|v| v.text.replace(',', "+")).collect();
        t.push_str(&format!("{} = [{}]\n", a.name, list(&vals)));
    }
    let rp = &r.report;
    t.push_str(&format!("\n[report]\ntable = {}\n", q(&rp.table)));
    if !rp.title.is_empty() {
        t.push_str(&format!("title = {}\n", q(&rp.title)));
    }
    if let Some(x) = &rp.x {
        if r.grid.iter().any(|a| &a.name == x) {
            t.push_str(&format!("x = {}\n", q(x)));
            if !rp.y.is_empty() {
                t.push_str(&format!("y = [{}]\n", list(&rp.y)));
            }
        }
    }
    if let Some(s) = &rp.series {
        t.push_str(&format!("series = {}\n", q(s)));
    }
    t.push_str(&format!("logx = {}\nlogy = {}\n", rp.logx, rp.logy));
    t
}

/// `bloatlab sweep --list-params`.
pub fn list_params() -> Result<i32> {
    for k in [RecipeKind::Lab, RecipeKind::Pacing] {
        println!("{} parameters (--kind {}):", k.name(), k.name());
        for p in params::params().iter().filter(|p| p.kind == k) {
            println!("  {:<16} {}", p.name, p.help);
        }
    }
    println!("In a value, + joins the items of a list (scenarios=1u0d+0u1d) or repeats an option (ping=router+server): commas separate the values swept.");
    Ok(0)
}

/// `bloatlab sweep`: a recipe made of `--set` values, run like one.
pub fn sweep(a: &SweepRequest) -> Result<i32> {
    let r = sweep_recipe(a)?;
    execute(&r, &a.run)
}

/// The recipe a `bloatlab sweep` runs: its `--set` values and the test
/// options after `--` as settings and grid, checked.
pub fn sweep_recipe(a: &SweepRequest) -> Result<Recipe> {
    let kind = a.kind;
    if a.sets.is_empty() {
        bail!("nothing to sweep: give at least one --set KEY=V1,V2,... (see --list-params)");
    }
    if kind == RecipeKind::Pacing && !a.test.is_empty() {
        bail!("options after -- go to `bloatlab test`; a pacing sweep has none");
    }
    if a.name.is_empty() || !a.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("--name: use letters, digits, '-' and '_' only");
    }
    let mut settings = vec![];
    let mut grid: Vec<Axis> = vec![];
    for s in &a.sets {
        let (k, vals) = parse_set(kind, s)?;
        if settings.iter().any(|(n, _): &(String, _)| *n == k) || grid.iter().any(|x| x.name == k) {
            bail!("--set {s}: {k} is set twice");
        }
        if vals.len() == 1 {
            settings.push((k, vals.into_iter().next().unwrap()));
        } else {
            grid.push(Axis { name: k, values: vals });
        }
    }
    for (k, v) in params::overrides_as_values(&a.test).map_err(|e| anyhow!("after --: {e}"))? {
        if settings.iter().any(|(n, _): &(String, _)| *n == k) || grid.iter().any(|x| x.name == k) {
            bail!("{k} is set both with --set and after --; keep one");
        }
        settings.push((k, v));
    }
    let x = grid.iter().find(|a| a.values.iter().all(|v| v.num.is_some())).map(|a| a.name.clone());
    let logx = x.as_ref().map(|x| {
        let ax = grid.iter().find(|a| &a.name == x).unwrap();
        let (lo, hi) = ax.values.iter().filter_map(|v| v.num).fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
        lo > 0.0 && hi / lo >= 20.0
    });
    let mut r = Recipe {
        name: a.name.clone(),
        title: if grid.is_empty() {
            format!(
                "bloatlab sweep, one point: {}",
                settings.iter().map(|(k, v): &(String, params::Value)| format!("{k}={}", v.text)).collect::<Vec<_>>().join(", ")
            )
        } else {
            format!("bloatlab sweep over {}", grid.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(" x "))
        },
        seeds: vec![],
        description: String::new(),
        kind,
        repeat: 1,
        shuffle: false,
        shuffle_seed: None,
        settings,
        grid,
        report: recipe::ReportSpec {
            table: if kind == RecipeKind::Pacing { "pacing".into() } else { "generic".into() },
            title: String::new(),
            x,
            y: if kind == RecipeKind::Pacing {
                vec!["achieved_mbps".into()]
            } else {
                vec!["latency_p50_ms".into(), "upload_mbps".into(), "download_mbps".into()]
            },
            series: None,
            logx: logx.unwrap_or(false),
            logy: a.logy,
        },
        full: false,
        full_note: None,
        source: String::new(),
        origin: "sweep".into(),
    };
    if let Some(n) = a.run.repeat {
        r.repeat = n;
    }
    r.source = recipe_text(&r);
    // the written recipe must parse back: catches any divergence early
    Recipe::parse(&r.source, "<sweep>", false).map_err(|e| anyhow!("internal: generated recipe does not parse: {e}\n{}", r.source))?;
    Ok(r)
}

fn execute(r: &Recipe, c: &RunSettings) -> Result<i32> {
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
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
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
