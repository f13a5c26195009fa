//! `bloatlab report`, `plot`, `export` and `compare` on a result file: what
//! each writes, and a clear error for a file that is not a result.
use std::path::Path;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_bloatlab");

fn run(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(EXE).args(args).output().unwrap();
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
}

#[test]
fn report_plot_export_compare() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/small.json");
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    std::fs::copy(&fixture, &a).unwrap();
    // the same run without its lab section
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("lab");
    std::fs::write(&b, v.to_string()).unwrap();
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());

    let (ok, out, err) = run(&["report", a_s, "-q"]);
    assert!(ok, "{err}");
    assert!(out.contains("wrote") && dir.path().join("a.html").exists() && dir.path().join("a.timeseries.png").exists(), "{out}");
    let cmp = dir.path().join("cmp");
    let (ok, _, err) = run(&["report", a_s, b_s, "-q", "--out", cmp.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(cmp.join("compare.html").exists() && cmp.join("compare.cdf.png").exists() && cmp.join("compare.b.timeseries.png").exists());
    let ts = dir.path().join("ts.svg");
    assert!(run(&["plot", a_s, "--kind", "timeseries", "-o", ts.to_str().unwrap()]).0);
    assert!(std::fs::read_to_string(&ts).unwrap().starts_with("<svg"));
    let (ok, _, err) = run(&["plot", a_s, "--kind", "cdf", "--format", "png", "-o", dir.path().join("x.svg").to_str().unwrap()]);
    assert!(!ok && err.contains("does not match"), "{err}");
    assert!(run(&["export", a_s, "--format", "csv"]).0);
    assert!(std::fs::read_to_string(dir.path().join("a.csv")).unwrap().starts_with("phase,kind,t_s"));
    assert!(run(&["export", a_s, "--format", "flent"]).0);
    assert!(dir.path().join("a.flent.gz").exists());
    let (ok, out, _) = run(&["compare", a_s, b_s, "--html", dir.path().join("c.html").to_str().unwrap()]);
    assert!(ok && out.contains("a") && dir.path().join("c.html").exists(), "{out}");
    // Bad input: a clear error naming the file.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"something-else\"}").unwrap();
    let (ok, _, err) = run(&["report", bad.to_str().unwrap(), "--no-images", "-q"]);
    assert!(!ok && err.contains("bad.json") && err.contains("not a bloatlab result"), "{err}");
}
