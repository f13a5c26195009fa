//! What `bloatlab report`, `plot`, `export` and `compare` do, on typed
//! requests (the command line is parsed in crates/cli).
use crate::plot::{Format, PlotKind};
use crate::{read_result, Run};
use anyhow::{bail, Context, Result};
use bloatlab_results::TestResult;
use std::path::{Path, PathBuf};

/// Write an HTML report (plus PNG plots) for one result, or a comparison for several.
#[derive(Debug, Clone)]
pub struct ReportRequest {
    /// Result JSON file(s) written by `bloatlab test --json` (or a lab/recipe run).
    pub results: Vec<PathBuf>,
    /// Output directory (default: the directory of the first result).
    pub out: Option<PathBuf>,
    /// Base name of the files written (default: the result's file name
    /// without .json; "compare" for several results).
    pub name: Option<String>,
    /// Image format of the plot files written next to the HTML.
    pub image_format: Format,
    /// Write only the HTML file (it embeds its plots as SVG anyway).
    pub no_images: bool,
    /// Do not print the summary table / comparison to stdout.
    pub quiet: bool,
}

/// Draw one plot of one or more results.
#[derive(Debug, Clone)]
pub struct PlotRequest {
    pub results: Vec<PathBuf>,
    /// What to draw. cdf and box overlay several results; the others take one.
    pub kind: PlotKind,
    /// Image format (default: from the -o extension, else png).
    pub format: Option<Format>,
    /// Output file (default: RESULT.KIND.FORMAT next to the first result).
    pub output: Option<PathBuf>,
}

pub use crate::export::ExportFormat;

/// Export a result's raw samples as CSV or as a flent data file.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    pub result: PathBuf,
    pub format: ExportFormat,
    /// Output file (default: RESULT.csv / RESULT.flent.gz next to the result; "-" = stdout for csv).
    pub output: Option<PathBuf>,
}

/// Print several results side by side with their differences.
#[derive(Debug, Clone)]
pub struct CompareRequest {
    pub results: Vec<PathBuf>,
    /// Also write the comparison as a self-contained HTML file.
    pub html: Option<PathBuf>,
}

/// File name without directory and without a trailing ".json".
pub fn stem_of(p: &Path) -> String {
    let name = p.file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "result".into());
    let name = name.strip_suffix(".json").map(str::to_string).unwrap_or(name);
    if name.is_empty() {
        "result".into()
    } else {
        name
    }
}

fn load_all(paths: &[PathBuf]) -> Result<(Vec<String>, Vec<TestResult>)> {
    let mut labels: Vec<String> = vec![];
    let mut results = vec![];
    for p in paths {
        results.push(read_result(p)?);
        let mut l = stem_of(p);
        if labels.contains(&l) {
            l = format!("{l}#{}", labels.len() + 1);
        }
        labels.push(l);
    }
    Ok((labels, results))
}

fn runs<'a>(labels: &'a [String], results: &'a [TestResult]) -> Vec<Run<'a>> {
    labels.iter().zip(results).map(|(l, r)| Run { label: l, result: r }).collect()
}

fn parent_dir(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The result of `bloatlab rpm --json`, if `path` holds one.
pub fn read_rpm_result(path: &Path) -> Option<bloatlab_results::RpmResult> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    if v.get("schema").is_some() || v.get("stages").is_none() || v.get("method").is_none() {
        return None;
    }
    serde_json::from_value(v).ok()
}

/// Write `DIR/STEM.html` for an RPM result; returns its path.
pub fn write_rpm_report(r: &bloatlab_results::RpmResult, dir: &Path, stem: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let html = dir.join(format!("{stem}.html"));
    std::fs::write(&html, crate::rpm_html(r)?).with_context(|| format!("writing {}", html.display()))?;
    Ok(html)
}

pub fn run_report(a: ReportRequest) -> Result<i32> {
    if let [one] = a.results.as_slice() {
        if let Some(r) = read_rpm_result(one) {
            let dir = a.out.clone().unwrap_or_else(|| parent_dir(one));
            let html = write_rpm_report(&r, &dir, &a.name.clone().unwrap_or_else(|| stem_of(one)))?;
            if !a.quiet {
                print!("{}", crate::rpm_table(&r));
            }
            println!("wrote {}", html.display());
            return Ok(0);
        }
    }
    let (labels, results) = load_all(&a.results)?;
    let rs = runs(&labels, &results);
    let dir = a.out.clone().unwrap_or_else(|| parent_dir(&a.results[0]));
    let stem = a.name.clone().unwrap_or_else(|| if rs.len() == 1 { labels[0].clone() } else { "compare".into() });
    let files = if a.no_images {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let html = dir.join(format!("{stem}.html"));
        crate::write_html(&rs, &html)?;
        crate::ReportFiles { html, images: vec![], skipped: vec![] }
    } else {
        crate::write_report(&rs, &dir, &stem, a.image_format)?
    };
    if !a.quiet {
        if rs.len() == 1 {
            print!("{}", crate::summary_table(&results[0]));
        } else {
            let pairs: Vec<(&str, &TestResult)> = rs.iter().map(|r| (r.label, r.result)).collect();
            print!("{}", crate::compare_table_labeled(&pairs));
        }
        println!();
    }
    println!("wrote {}", files.html.display());
    for i in &files.images {
        println!("wrote {}", i.display());
    }
    for s in &files.skipped {
        eprintln!("bloatlab report: no {s}");
    }
    Ok(0)
}

/// Used by `bloatlab test --report`: write the report next to a result file
/// and return the files written.
pub fn report_after_test(result_path: &Path) -> Result<crate::ReportFiles> {
    let r = read_result(result_path)?;
    let label = stem_of(result_path);
    let rs = [Run { label: &label, result: &r }];
    crate::write_report(&rs, &parent_dir(result_path), &label, Format::Png)
}

pub fn run_plot(a: PlotRequest) -> Result<i32> {
    let (labels, results) = load_all(&a.results)?;
    let rs = runs(&labels, &results);
    let from_ext = a.output.as_deref().and_then(Format::from_path);
    let format = match (a.format, from_ext) {
        (Some(f), Some(e)) if f != e => bail!("--format {} does not match the output file's extension", f.ext()),
        (Some(f), _) => f,
        (None, Some(e)) => e,
        (None, None) => Format::Png,
    };
    let out = a.output.clone().unwrap_or_else(|| {
        parent_dir(&a.results[0]).join(format!("{}.{}.{}", labels[0], a.kind.name(), format.ext()))
    });
    crate::plot_runs(&rs, a.kind, format, &out)?;
    println!("wrote {}", out.display());
    Ok(0)
}

pub fn run_export(a: ExportRequest) -> Result<i32> {
    let r = read_result(&a.result)?;
    let stem = stem_of(&a.result);
    let out = a.output.clone().unwrap_or_else(|| parent_dir(&a.result).join(format!("{stem}.{}", a.format.exporter().extension())));
    crate::export::export(&r, a.format, &out)?;
    if out.as_os_str() != "-" {
        eprintln!("wrote {}", out.display());
    }
    Ok(0)
}

pub fn run_compare(a: CompareRequest) -> Result<i32> {
    let (labels, results) = load_all(&a.results)?;
    let pairs: Vec<(&str, &TestResult)> = labels.iter().map(String::as_str).zip(results.iter()).collect();
    print!("{}", crate::compare_table_labeled(&pairs));
    if let Some(h) = &a.html {
        crate::write_html(&runs(&labels, &results), h)?;
        println!("wrote {}", h.display());
    }
    Ok(0)
}

/// For `bloatlab test --report`: write the HTML report and PNG plots for a
/// result just measured. Next to `json_path` (same base name) when the
/// result was saved there, else `bloatlab-<start time>.html` in the current
/// directory.
pub fn write_test_report(r: &TestResult, json_path: Option<&Path>) -> Result<crate::ReportFiles> {
    let (dir, stem) = match json_path.filter(|p| p.as_os_str() != "-") {
        Some(p) => (parent_dir(p), stem_of(p)),
        None => {
            let t: String = r.metadata.start_time.chars().filter(|c| c.is_ascii_alphanumeric()).take(15).collect();
            (PathBuf::from("."), if t.is_empty() { "bloatlab-report".to_string() } else { format!("bloatlab-{t}") })
        }
    };
    let rs = [Run { label: &stem, result: r }];
    crate::write_report(&rs, &dir, &stem, Format::Png)
}
