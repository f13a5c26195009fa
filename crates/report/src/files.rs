//! Where reports go and how result files are read for them: file names
//! from result names, the report `bloatlab test --report` writes, RPM
//! result files. The subcommands that use these live in crates/cli.
use crate::plot::Format;
use crate::{read_result, Run};
use anyhow::{Context, Result};
use bloatlab_results::TestResult;
use std::path::{Path, PathBuf};

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

/// Read result files with their labels (file stems, made unique).
pub fn load_all(paths: &[PathBuf]) -> Result<(Vec<String>, Vec<TestResult>)> {
    let mut labels: Vec<String> = vec![];
    let mut results = vec![];
    for p in paths {
        // a tune document: its results before and after
        if let Some(doc) = bloatlab_tune::driver::TuneDoc::read_file(p) {
            let doc = doc.map_err(|e| anyhow::anyhow!(e))?;
            for (what, r) in [("before", doc.before), ("after", doc.after)] {
                if let Some(r) = r {
                    labels.push(format!("{}:{what}", stem_of(p)));
                    results.push(r);
                }
            }
            continue;
        }
        results.push(read_result(p)?);
        let mut l = stem_of(p);
        if labels.contains(&l) {
            l = format!("{l}#{}", labels.len() + 1);
        }
        labels.push(l);
    }
    Ok((labels, results))
}

/// Results with their labels, as plots and tables take them.
pub fn runs<'a>(labels: &'a [String], results: &'a [TestResult]) -> Vec<Run<'a>> {
    labels.iter().zip(results).map(|(l, r)| Run { label: l, result: r }).collect()
}

/// The directory a file is in (`.` for a bare name).
pub fn parent_dir(p: &Path) -> PathBuf {
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

/// Used by `bloatlab test --report`: write the report next to a result file
/// and return the files written.
pub fn report_after_test(result_path: &Path) -> Result<crate::ReportFiles> {
    let r = read_result(result_path)?;
    let label = stem_of(result_path);
    let rs = [Run { label: &label, result: &r }];
    crate::write_report(&rs, &parent_dir(result_path), &label, Format::Png)
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
