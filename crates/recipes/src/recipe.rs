//! The recipe file format (TOML), its validation, and the built-in recipes.
//!
//! A recipe names fixed `settings`, a `grid` of swept parameters (cross
//! product, first key outermost), repetitions, overrides for `--full`, and a
//! `report` section saying how to tabulate and plot. Every mistake is reported
//! as `FILE:LINE:COL: reason`. See docs/recipes.md for the format.
use crate::params::{self, check_value, spec, toml_scalar_text, RecipeKind, Value};
use serde::Deserialize;
use std::fmt;
use toml::Spanned;

/// The recipes shipped with bloatlab, embedded so `recipe show` works anywhere.
pub const BUILTIN: &[(&str, &str)] = &[
    ("txqueuelen", include_str!("../../../recipes/txqueuelen.toml")),
    ("sendstalls", include_str!("../../../recipes/sendstalls.toml")),
    ("loadlatency", include_str!("../../../recipes/loadlatency.toml")),
    ("pacing", include_str!("../../../recipes/pacing.toml")),
];

/// Tabulations the report section may ask for.
pub const TABLES: &[(&str, &str)] = &[
    ("txqueuelen", "seed 000 style: queue | test | latency min/avg/max/mdev n | goodput | analytic queue delay"),
    ("sendstalls", "seed 001 style: queue | local drops | cwnd reductions | retransmits | goodput"),
    ("loadlatency", "seed 003 style: the four headline numbers and one line per scenario"),
    ("pacing", "seed 004 style: t_ipi | timer | ideal | achieved | achieved/ideal | burst factor"),
    ("generic", "one row per point and phase with the main metrics"),
];

/// A recipe error with its position in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct RecipeError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

impl fmt::Display for RecipeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.msg)
        } else {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.msg)
        }
    }
}
impl std::error::Error for RecipeError {}

/// A table in source order (the `toml` crate is built with `preserve_order`).
#[derive(Debug, Default)]
struct Ordered(Vec<(Spanned<String>, Spanned<toml::Value>)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a table of parameter = value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                let mut v = vec![];
                while let Some((k, val)) = m.next_entry::<Spanned<String>, Spanned<toml::Value>>()? {
                    v.push((k, val));
                }
                Ok(Ordered(v))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecipe {
    name: Spanned<String>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    seeds: Vec<String>,
    #[serde(default)]
    description: String,
    kind: Spanned<String>,
    repeat: Option<Spanned<i64>>,
    shuffle: Option<bool>,
    shuffle_seed: Option<u64>,
    #[serde(default)]
    settings: Ordered,
    #[serde(default)]
    grid: Ordered,
    lab_args: Option<Spanned<Vec<String>>>,
    test_args: Option<Spanned<Vec<String>>>,
    full: Option<RawFull>,
    report: Option<RawReport>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFull {
    repeat: Option<Spanned<i64>>,
    #[serde(default)]
    settings: Ordered,
    #[serde(default)]
    grid: Ordered,
    #[serde(default)]
    note: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReport {
    table: Spanned<String>,
    #[serde(default)]
    title: String,
    x: Option<Spanned<String>>,
    #[serde(default)]
    y: Vec<Spanned<String>>,
    series: Option<Spanned<String>>,
    #[serde(default)]
    logx: bool,
    #[serde(default)]
    logy: bool,
}

/// One swept parameter and its values, in grid order.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReportSpec {
    pub table: String,
    pub title: String,
    pub x: Option<String>,
    pub y: Vec<String>,
    pub series: Option<String>,
    pub logx: bool,
    pub logy: bool,
}

/// A validated recipe.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub name: String,
    pub title: String,
    pub seeds: Vec<String>,
    pub description: String,
    pub kind: RecipeKind,
    pub repeat: u32,
    pub shuffle: bool,
    pub shuffle_seed: Option<u64>,
    pub settings: Vec<(String, Value)>,
    pub grid: Vec<Axis>,
    pub report: ReportSpec,
    /// Whether `--full` overrides were applied.
    pub full: bool,
    /// Human note on what `--full` changes, if the recipe has a [full] section.
    pub full_note: Option<String>,
    /// The recipe text as given (copied into the results folder).
    pub source: String,
    pub origin: String,
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: std::ops::Range<usize>, msg: impl Into<String>) -> RecipeError {
        let (line, col) = line_col(self.text, span.start);
        RecipeError { file: self.file.to_string(), line, col, msg: msg.into() }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let off = offset.min(text.len());
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, col)
}

impl Recipe {
    /// Parse and validate recipe text. `file` names it in error messages.
    pub fn parse(text: &str, file: &str, full: bool) -> Result<Recipe, RecipeError> {
        let cx = Ctx { file, text };
        let raw: RawRecipe = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let mut msg = e.message().trim().to_string();
            if msg.starts_with("unknown field") {
                msg = format!("{msg} (see `bloatlab recipe show txqueuelen` for a complete example)");
            }
            if e.span().is_none() {
                RecipeError { file: file.into(), line: 0, col: 0, msg }
            } else {
                cx.err(span, msg)
            }
        })?;

        let name = raw.name.get_ref().clone();
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(cx.err(raw.name.span(), "name: use letters, digits, '-' and '_' only"));
        }
        let kind = RecipeKind::parse(raw.kind.get_ref()).map_err(|e| cx.err(raw.kind.span(), e))?;

        let mut repeat = 1u32;
        let mut rep_src = raw.repeat.as_ref();
        let (mut fs, mut fg, mut full_note) = (Ordered::default(), Ordered::default(), None);
        let has_full = raw.full.is_some();
        if let Some(f) = raw.full {
            full_note = Some(if f.note.is_empty() { "longer runs and the complete grid".to_string() } else { f.note.clone() });
            if full {
                if f.repeat.is_some() {
                    rep_src = None;
                }
                fs = f.settings;
                fg = f.grid;
                if let Some(r) = &f.repeat {
                    repeat = check_repeat(&cx, r)?;
                }
            } else {
                // validate the overrides even when not applied, so mistakes surface early
                validate_table(&cx, kind, &f.settings, false)?;
                validate_table(&cx, kind, &f.grid, true)?;
                if let Some(r) = &f.repeat {
                    check_repeat(&cx, r)?;
                }
            }
        }
        if let Some(r) = rep_src {
            repeat = check_repeat(&cx, r)?;
        }

        // settings, then [full] overrides
        let mut settings = validate_table(&cx, kind, &raw.settings, false)?
            .into_iter()
            .map(|(k, _, mut v)| (k, v.remove(0)))
            .collect::<Vec<_>>();
        let mut grid: Vec<Axis> = validate_table(&cx, kind, &raw.grid, true)?
            .into_iter()
            .map(|(k, _, v)| Axis { name: k, values: v })
            .collect();
        // a parameter may not be both fixed and swept
        for (k, span) in raw.grid.0.iter().map(|(k, _)| (k.get_ref(), k.span())) {
            if settings.iter().any(|(s, _)| s == k) {
                return Err(cx.err(span, format!("\"{k}\" is both in [settings] and in [grid]; keep one")));
            }
        }
        if full {
            for (k, _, mut v) in validate_table(&cx, kind, &fs, false)? {
                grid.retain(|a| a.name != k);
                match settings.iter_mut().find(|(s, _)| *s == k) {
                    Some(slot) => slot.1 = v.remove(0),
                    None => settings.push((k, v.remove(0))),
                }
            }
            // axes named in [full] come in [full] order, after the base axes it leaves alone
            for (k, _, v) in validate_table(&cx, kind, &fg, true)? {
                settings.retain(|(s, _)| *s != k);
                grid.retain(|a| a.name != k);
                grid.push(Axis { name: k, values: v });
            }
        }

        // Recipes set typed parameters only: argument lists are not parsed here.
        for (list, what) in [(&raw.lab_args, "lab_args"), (&raw.test_args, "test_args")] {
            if let Some(l) = list {
                return Err(cx.err(l.span(), format!(
                    "{what} is not supported: set the options as parameters in [settings] or [grid] \
                     (`bloatlab sweep --list-params` lists them: e.g. shaper = \"tbf\", socket_buffer = \"4m\")"
                )));
            }
        }

        let report = match raw.report {
            None => ReportSpec { table: "generic".into(), ..Default::default() },
            Some(r) => {
                let t = r.table.get_ref().as_str();
                if !TABLES.iter().any(|(n, _)| *n == t) {
                    return Err(cx.err(r.table.span(), format!(
                        "unknown table \"{t}\" (known: {})",
                        TABLES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                    )));
                }
                if (t == "pacing") != (kind == RecipeKind::Pacing) && t != "generic" {
                    return Err(cx.err(r.table.span(), format!("table \"{t}\" does not fit kind = \"{}\"", kind.name())));
                }
                let swept: Vec<&str> = grid.iter().map(|a| a.name.as_str()).collect();
                if let Some(x) = &r.x {
                    if !swept.contains(&x.get_ref().as_str()) && !has_full_grid_key(x.get_ref(), &fg) {
                        return Err(cx.err(x.span(), format!(
                            "plot x \"{}\" is not a swept parameter (the grid has: {})",
                            x.get_ref(), swept.join(", ")
                        )));
                    }
                }
                if let Some(s) = &r.series {
                    if params::spec(kind, s.get_ref()).is_none() {
                        return Err(cx.err(s.span(), params::unknown_param(kind, s.get_ref())));
                    }
                }
                let metrics = crate::rows::metric_names(kind);
                for y in &r.y {
                    if !metrics.contains(&y.get_ref().as_str()) {
                        return Err(cx.err(y.span(), format!(
                            "unknown metric \"{}\" for y (known: {})",
                            y.get_ref(), metrics.join(", ")
                        )));
                    }
                }
                ReportSpec {
                    table: t.to_string(),
                    title: r.title,
                    x: r.x.map(|x| x.into_inner()),
                    y: r.y.into_iter().map(|y| y.into_inner()).collect(),
                    series: r.series.map(|s| s.into_inner()),
                    logx: r.logx,
                    logy: r.logy,
                }
            }
        };

        if kind == RecipeKind::Pacing {
            let has = |k: &str| settings.iter().any(|(s, _)| s == k) || grid.iter().any(|a| a.name == k);
            if !has("ipi") {
                return Err(RecipeError { file: file.into(), line: 0, col: 0, msg: "a pacing recipe needs ipi in [settings] or [grid]".into() });
            }
        }

        Ok(Recipe {
            name,
            title: raw.title,
            seeds: raw.seeds,
            description: raw.description,
            kind,
            repeat,
            shuffle: raw.shuffle.unwrap_or(false),
            shuffle_seed: raw.shuffle_seed,
            settings,
            grid,
            report,
            full: full && has_full,
            full_note: if has_full { full_note } else { None },
            source: text.to_string(),
            origin: file.to_string(),
        })
    }

    /// Number of points (grid cross product x repetitions).
    pub fn point_count(&self) -> usize {
        self.grid.iter().map(|a| a.values.len()).product::<usize>() * self.repeat as usize
    }

    /// Value of a parameter: fixed setting, or None when swept/unset.
    pub fn setting(&self, name: &str) -> Option<&Value> {
        self.settings.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

fn has_full_grid_key(k: &str, fg: &Ordered) -> bool {
    fg.0.iter().any(|(n, _)| n.get_ref() == k)
}

fn check_repeat(cx: &Ctx, r: &Spanned<i64>) -> Result<u32, RecipeError> {
    let v = *r.get_ref();
    if !(1..=1000).contains(&v) {
        return Err(cx.err(r.span(), format!("repeat must be between 1 and 1000, not {v}")));
    }
    Ok(v as u32)
}

/// One checked entry of a [settings] or [grid] table: (name, key span, values).
type TableEntry = (String, std::ops::Range<usize>, Vec<Value>);

/// Check a [settings] or [grid] table: known names, valid values, no duplicates.
/// Returns (name, key span, values) — one value for settings.
fn validate_table(
    cx: &Ctx,
    kind: RecipeKind,
    t: &Ordered,
    is_grid: bool,
) -> Result<Vec<TableEntry>, RecipeError> {
    let mut out = vec![];
    for (k, v) in &t.0 {
        let name = k.get_ref();
        let p = spec(kind, name).ok_or_else(|| cx.err(k.span(), params::unknown_param(kind, name)))?;
        let mut values = vec![];
        match (is_grid, v.get_ref()) {
            (true, toml::Value::Array(items)) => {
                if items.is_empty() {
                    return Err(cx.err(v.span(), format!("{name}: the list of values is empty")));
                }
                // element spans are not kept by toml::Value; locate each element
                // by searching the array's source text, falling back to the array.
                let src = &cx.text[v.span()];
                let mut cursor = 0usize;
                for item in items {
                    let txt = toml_scalar_text(item).map_err(|e| cx.err(v.span(), format!("{name}: {e}")))?;
                    let needle = match item {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let at = src[cursor..].find(&needle).map(|i| i + cursor);
                    let span = match at {
                        Some(i) => {
                            cursor = i + needle.len();
                            v.span().start + i..v.span().start + i + needle.len()
                        }
                        None => v.span(),
                    };
                    let val = check_value(p, &txt).map_err(|e| cx.err(span.clone(), e))?;
                    if values.iter().any(|x: &Value| x.text == val.text) {
                        return Err(cx.err(span, format!("{name}: value \"{}\" is listed twice", val.text)));
                    }
                    values.push(val);
                }
            }
            (true, _) => {
                return Err(cx.err(v.span(), format!(
                    "{name}: a grid entry is a list of values, e.g. {name} = [\"a\", \"b\"] (put single values in [settings])"
                )))
            }
            (false, val) => {
                if name == "scenarios" {
                    // a list of scenarios is one setting
                } else if matches!(val, toml::Value::Array(_)) {
                    return Err(cx.err(v.span(), format!("{name}: [settings] take one value; put lists in [grid]")));
                }
                let txt = toml_scalar_text(val).map_err(|e| cx.err(v.span(), format!("{name}: {e}")))?;
                values.push(check_value(p, &txt).map_err(|e| cx.err(v.span(), e))?);
            }
        }
        if out.iter().any(|(n, _, _): &(String, _, _)| n == name) {
            return Err(cx.err(k.span(), format!("\"{name}\" appears twice")));
        }
        out.push((name.clone(), k.span(), values));
    }
    Ok(out)
}

/// Load a recipe by built-in name or file path.
pub fn load(name_or_path: &str, full: bool) -> anyhow::Result<Recipe> {
    let path = std::path::Path::new(name_or_path);
    let looks_like_file = name_or_path.ends_with(".toml") || name_or_path.contains('/') || path.is_file();
    if looks_like_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read recipe {name_or_path}: {e}"))?;
        return Recipe::parse(&text, name_or_path, full).map_err(|e| anyhow::anyhow!("{e}"));
    }
    match BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        Some((n, text)) => Recipe::parse(text, &format!("<built-in {n}>"), full).map_err(|e| anyhow::anyhow!("{e}")),
        None => anyhow::bail!(
            "no recipe named \"{name_or_path}\" and no such file (built-in recipes: {}; `bloatlab recipe list`)",
            BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ),
    }
}

pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_validate() {
        for (n, text) in BUILTIN {
            for full in [false, true] {
                let r = Recipe::parse(text, n, full).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(&r.name, n);
                assert!(r.point_count() >= 1, "{n}");
                assert!(!r.title.is_empty() && !r.description.is_empty(), "{n}");
            }
        }
    }

    fn err(text: &str) -> RecipeError {
        Recipe::parse(text, "my.toml", false).unwrap_err()
    }

    #[test]
    fn errors_carry_lines() {
        let base = "name = \"x\"\nkind = \"lab\"\n";
        let e = err(&format!("{base}bogus = 1\n"));
        assert_eq!((e.line, e.col), (3, 1));
        assert!(e.msg.contains("unknown field"), "{e}");

        let e = err(&format!("{base}[grid]\nqueue = [\"fifo:1\", \"fifo:zero\"]\n"));
        assert_eq!(e.line, 4);
        assert_eq!(e.col, 21, "{e}");
        assert!(e.msg.contains("whole number"), "{e}");

        let e = err(&format!("{base}[grid]\nqeue = [1]\n"));
        assert_eq!(e.line, 4);
        assert!(e.msg.contains("did you mean \"queue\""), "{e}");

        let e = err(&format!("{base}[settings]\nrate = \"fast\"\n"));
        assert_eq!(e.line, 4);
        assert!(e.to_string().starts_with("my.toml:4:8: rate:"), "{e}");

        let e = err(&format!("{base}[settings]\nqueue = 10\n[grid]\nqueue = [1, 2]\n"));
        assert_eq!(e.line, 6);
        assert!(e.msg.contains("both"), "{e}");

        let e = err(&format!("{base}[grid]\nqueue = \"fifo:1\"\n"));
        assert!(e.msg.contains("list of values"), "{e}");

        let e = err(&format!("{base}[grid]\nqueue = [1, 1]\n"));
        assert!(e.msg.contains("twice"), "{e}");

        let e = err("name = \"x\"\nkind = \"labb\"\n");
        assert_eq!(e.line, 2);

        let e = err(&format!("{base}repeat = 0\n"));
        assert_eq!(e.line, 3);

        let e = err(&format!("{base}[grid]\nqueue = [1]\n[report]\ntable = \"txqueuelen\"\nx = \"rate\"\n"));
        assert_eq!(e.line, 7);
        assert!(e.msg.contains("not a swept parameter"), "{e}");

        let e = err(&format!("{base}[grid]\nqueue = [1]\n[report]\ntable = \"generic\"\ny = [\"latency\"]\n"));
        assert!(e.msg.contains("unknown metric"), "{e}");

        let e = err("name = \"x\"\nkind = \"pacing\"\n[settings]\nrate = \"10mbit\"\n");
        assert_eq!(e.line, 4);

        let e = err("name = \"x\"\nkind = \"lab\"\ntest_args = [\"--cc\", \"x\"]\n");
        assert!(e.msg.contains("not supported") && e.msg.contains("list-params"), "{e}");

        let e = err("name = \"x\"\nkind = \"lab\"\n[settings\n");
        assert_eq!(e.line, 3);
    }

    /// docs/recipes.md documents every parameter, metric and table.
    #[test]
    fn documented() {
        let doc = include_str!("../../../docs/recipes.md");
        for p in crate::params::params() {
            assert!(doc.contains(&format!("`{}`", p.name)), "docs/recipes.md lacks parameter {}", p.name);
        }
        for m in crate::rows::LAB_METRICS.iter().chain(crate::rows::PACING_METRICS) {
            assert!(doc.contains(&format!("`{m}`")), "docs/recipes.md lacks metric {m}");
        }
        for (t, _) in TABLES {
            assert!(doc.contains(t), "docs/recipes.md lacks table {t}");
        }
    }

    #[test]
    fn full_overrides() {
        let t = "name = \"x\"\nkind = \"lab\"\nrepeat = 2\n[settings]\nrate = \"10mbit\"\nduration = \"5s\"\n[grid]\nqueue = [1, 10]\n[full]\nrepeat = 3\nsettings.duration = \"60s\"\ngrid.rate = [\"10mbit\", \"100mbit\"]\n";
        let short = Recipe::parse(t, "t", false).unwrap();
        assert_eq!(short.point_count(), 4);
        assert_eq!(short.setting("duration").unwrap().text, "5s");
        let full = Recipe::parse(t, "t", true).unwrap();
        assert_eq!(full.repeat, 3);
        assert_eq!(full.setting("duration").unwrap().text, "1m");
        assert!(full.setting("rate").is_none());
        assert_eq!(full.grid.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), vec!["queue", "rate"]);
        let t3 = "name = \"x\"\nkind = \"lab\"\n[grid]\nqueue = [1, 10]\n[full]\ngrid.rate = [\"10mbit\"]\ngrid.queue = [1, 10, 100]\n";
        let f3 = Recipe::parse(t3, "t", true).unwrap();
        assert_eq!(f3.grid.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), vec!["rate", "queue"]);
        assert_eq!(full.point_count(), 2 * 2 * 3);
        // grid order is file order
        let t2 = "name = \"x\"\nkind = \"lab\"\n[grid]\nrate = [\"10mbit\"]\nqueue = [1]\ncc = [\"cubic\"]\n";
        let r = Recipe::parse(t2, "t", false).unwrap();
        assert_eq!(r.grid.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), vec!["rate", "queue", "cc"]);
    }
}
