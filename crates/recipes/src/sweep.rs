//! Recipes made or changed on the command line: `bloatlab sweep`'s
//! `--set KEY=V1,V2` values and test options become a recipe (written into
//! its results folder so the run can be repeated), and `recipe run --set`
//! overrides a loaded one. Values are checked by the parameter table.
use crate::params::{self, check_value, RecipeKind};
use crate::recipe::{self, Axis, Recipe};
use anyhow::{anyhow, bail, Result};
use bloatlab_model::TestOverrides;

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
    /// Run every point N times (repetitions interleaved).
    pub repeat: Option<u32>,
}

/// Parse "KEY=V1,V2" into (key, values) checked against the parameter table.
fn parse_set(kind: RecipeKind, s: &str) -> Result<(String, Vec<params::Value>)> {
    let (k, v) = s.split_once('=').ok_or_else(|| anyhow!("--set {s}: expected KEY=VALUE[,VALUE...]"))?;
    let k = k.trim().replace('-', "_");
    let spec = params::spec(kind, &k).ok_or_else(|| anyhow!("--set {s}: {}", params::unknown_param(kind, &k)))?;
    let mut vals: Vec<params::Value> = vec![];
    for raw in bloatlab_model::options::split_values(v) {
        let val = check_value(spec, &raw).map_err(|e| anyhow!("--set {s}: {e}"))?;
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
pub fn apply_sets(r: &mut Recipe, sets: &[String]) -> Result<()> {
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
    if let Some(n) = a.repeat {
        r.repeat = n;
    }
    r.source = recipe_text(&r);
    // the written recipe must parse back: catches any divergence early
    Recipe::parse(&r.source, "<sweep>", false).map_err(|e| anyhow!("internal: generated recipe does not parse: {e}\n{}", r.source))?;
    Ok(r)
}

