//! `bloatlab report`, `plot`, `export` and `compare`: their command lines,
//! and what each does with the report crate's functions.
use crate::choice;
use anyhow::{bail, Context, Result};
use bloatlab_report::files::{load_all, parent_dir, read_rpm_result, runs, stem_of, write_rpm_report};
use bloatlab_report::{read_result, ExportFormat, Format, PlotKind};
use bloatlab_results::TestResult;
use clap::Args;
use std::path::PathBuf;

/// Write an HTML report (plus PNG plots) for one result, or a comparison for several.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result JSON file(s) written by `bloatlab test --json` (or a lab/recipe run).
    #[arg(required = true, value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// Output directory (default: the directory of the first result).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Base name of the files written (default: the result's file name
    /// without .json; "compare" for several results).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Image format of the plot files written next to the HTML.
    #[arg(long, default_value = "png", value_parser = choice::<Format>(&Format::NAMES))]
    pub image_format: Format,
    /// Write only the HTML file (it embeds its plots as SVG anyway).
    #[arg(long)]
    pub no_images: bool,
    /// Do not print the summary table / comparison to stdout.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Draw one plot of one or more results.
#[derive(Debug, Args)]
pub struct PlotArgs {
    #[arg(required = true, value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// What to draw. cdf and box overlay several results; the others take one.
    #[arg(long, short = 'k', default_value = "timeseries", value_parser = choice::<PlotKind>(&PlotKind::NAMES))]
    pub kind: PlotKind,
    /// Image format (default: from the -o extension, else png).
    #[arg(long, short = 'f', value_parser = choice::<Format>(&Format::NAMES))]
    pub format: Option<Format>,
    /// Output file (default: RESULT.KIND.FORMAT next to the first result).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}


/// Export a result's raw samples as CSV or as a flent data file.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[arg(value_name = "RESULT.json")]
    pub result: PathBuf,
    #[arg(long, short = 'f', value_parser = choice::<ExportFormat>(&ExportFormat::NAMES))]
    pub format: ExportFormat,
    /// Output file (default: RESULT.csv / RESULT.flent.gz next to the result; "-" = stdout for csv).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Print several results side by side with their differences.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Two or more results; a `bloatlab tune --json` document counts as
    /// its two, before and after.
    #[arg(required = true, num_args = 1.., value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// Also write the comparison as a self-contained HTML file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// `bloatlab report`.
pub fn run_report(a: ReportArgs) -> Result<i32> {
    if let [one] = a.results.as_slice() {
        if let Some(doc) = bloatlab_tune::driver::TuneDoc::read_file(one) {
            let doc = doc.map_err(|e| anyhow::anyhow!(e))?;
            let dir = a.out.clone().unwrap_or_else(|| parent_dir(one));
            let html = bloatlab_report::tune::write_tune_report(&doc, &dir)?;
            if !a.quiet {
                print!("{}", bloatlab_report::tune::tune_table(&doc));
            }
            println!("wrote {}", html.display());
            return Ok(0);
        }
        if let Some(r) = read_rpm_result(one) {
            let dir = a.out.clone().unwrap_or_else(|| parent_dir(one));
            let html = write_rpm_report(&r, &dir, &a.name.clone().unwrap_or_else(|| stem_of(one)))?;
            if !a.quiet {
                print!("{}", bloatlab_report::rpm_table(&r));
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
        bloatlab_report::write_html(&rs, &html)?;
        bloatlab_report::ReportFiles { html, images: vec![], skipped: vec![] }
    } else {
        bloatlab_report::write_report(&rs, &dir, &stem, a.image_format)?
    };
    if !a.quiet {
        if rs.len() == 1 {
            print!("{}", bloatlab_report::summary_table(&results[0]));
        } else {
            let pairs: Vec<(&str, &TestResult)> = rs.iter().map(|r| (r.label, r.result)).collect();
            print!("{}", bloatlab_report::compare_table_labeled(&pairs));
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

/// `bloatlab plot`.
pub fn run_plot(a: PlotArgs) -> Result<i32> {
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
    bloatlab_report::plot_runs(&rs, a.kind, format, &out)?;
    println!("wrote {}", out.display());
    Ok(0)
}

/// `bloatlab export`.
pub fn run_export(a: ExportArgs) -> Result<i32> {
    let r = read_result(&a.result)?;
    let stem = stem_of(&a.result);
    let out = a.output.clone().unwrap_or_else(|| parent_dir(&a.result).join(format!("{stem}.{}", a.format.exporter().extension())));
    bloatlab_report::export(&r, a.format, &out)?;
    if out.as_os_str() != "-" {
        eprintln!("wrote {}", out.display());
    }
    Ok(0)
}

/// `bloatlab compare`.
pub fn run_compare(a: CompareArgs) -> Result<i32> {
    let (labels, results) = load_all(&a.results)?;
    if results.len() < 2 {
        anyhow::bail!("compare needs two results or more (or a tune document, which holds two)");
    }
    let pairs: Vec<(&str, &TestResult)> = labels.iter().map(String::as_str).zip(results.iter()).collect();
    print!("{}", bloatlab_report::compare_table_labeled(&pairs));
    if let Some(h) = &a.html {
        bloatlab_report::write_html(&runs(&labels, &results), h)?;
        println!("wrote {}", h.display());
    }
    Ok(0)
}

