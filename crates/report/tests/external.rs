//! Tests against real outside tools: flent loads and plots our `.flent.gz`,
//! headless Chromium renders the HTML report. Each skips with a printed
//! reason when its tool is missing (CI installs them: `pip install flent
//! matplotlib`, `apt-get install chromium`).
mod common;

use bloatlab_report::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Run a command with a deadline; kill the child (by its own handle) if it hangs.
fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Option<(bool, String, String)> {
    let out_dir = tempfile::tempdir().ok()?;
    let (o, e) = (out_dir.path().join("out"), out_dir.path().join("err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&o).ok()?)
        .stderr(std::fs::File::create(&e).ok()?)
        .spawn()
        .ok()?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = std::fs::read_to_string(&o).unwrap_or_default();
    let err = std::fs::read_to_string(&e).unwrap_or_default();
    Some((status.is_some_and(|s| s.success()), out, err))
}

fn python() -> Option<PathBuf> {
    which("python3").or_else(|| which("python"))
}

fn py_has(py: &Path, module: &str) -> bool {
    Command::new(py).args(["-c", &format!("import {module}")]).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// `pip install PKG`, retried with --break-system-packages on an
/// "externally managed" (PEP 668) system Python, as .ci/run does.
fn pip_install(py: &Path, pkg: &str) -> Option<(bool, String, String)> {
    let r = run_with_timeout(Command::new(py).args(["-m", "pip", "install", "--quiet", pkg]), Duration::from_secs(300));
    if r.as_ref().is_some_and(|x| x.0) {
        return r;
    }
    run_with_timeout(Command::new(py).args(["-m", "pip", "install", "--quiet", "--break-system-packages", pkg]), Duration::from_secs(300))
}

/// flent importable (installing it from PyPI if needed); None = skip.
fn ensure_flent(py: &Path) -> Result<(), String> {
    if py_has(py, "flent") {
        return Ok(());
    }
    let r = pip_install(py, "flent");
    if py_has(py, "flent") {
        Ok(())
    } else {
        Err(format!("flent is not installed and `pip install flent` failed: {:?}", r.map(|x| x.2)))
    }
}

#[test]
fn flent_loads_and_plots_export() {
    let Some(py) = python() else {
        bloatlab_testkit::cannot_run("flent test", "no python3 on PATH");
        return;
    };
    if let Err(why) = ensure_flent(&py) {
        bloatlab_testkit::cannot_run("flent test", &why);
        return;
    }
    let r = common::small();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("small.flent.gz");
    export_flent(&r, &f).unwrap();

    // 1. flent's own loader (Python API): series, x axis, raw values, times.
    let script = r#"
import sys, json
from flent import resultset
r = resultset.load(sys.argv[1])
raw = [v for _, v in r.raw_series('Ping (ms) UDP BE') if v is not None]
print(json.dumps({
  'name': r.meta('NAME'), 'series': sorted(r.series_names), 'n_x': len(r.x_values),
  'ping_raw_n': len(raw), 'ping_raw_mean': sum(raw) / len(raw),
  't0': r.t0, 'step': r.meta('STEP_SIZE'),
  'up_streams': r.meta('TEST_PARAMETERS')['upload_streams'],
}))
"#;
    let (ok, out, err) = run_with_timeout(Command::new(&py).args(["-c", script]).arg(&f), Duration::from_secs(120)).unwrap();
    assert!(ok, "flent could not load our export:\n{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    eprintln!("flent resultset.load: {v}");
    assert_eq!(v["name"], "rrul_be_nflows");
    let names: Vec<&str> = v["series"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    for s in ["Ping (ms) UDP BE", "Ping (ms) avg", "TCP upload sum", "TCP download sum", "TCP upload BE::1", "TCP upload BE::2", "TCP download BE::2", "TCP totals"] {
        assert!(names.contains(&s), "series {s} missing from {names:?}");
    }
    let received: Vec<f64> = r.idle.iter().chain(r.scenarios.iter()).flat_map(|p| p.probes.iter()).filter_map(|p| p.rtt_ns.map(|x| x as f64 / 1e6)).collect();
    assert_eq!(v["ping_raw_n"].as_u64().unwrap() as usize, received.len());
    let mean = received.iter().sum::<f64>() / received.len() as f64;
    assert!((v["ping_raw_mean"].as_f64().unwrap() - mean).abs() < 0.01, "flent mean {} vs ours {mean}", v["ping_raw_mean"]);
    assert!((v["t0"].as_f64().unwrap() - common::START_UNIX_NS as f64 / 1e9).abs() < 1e-3, "T0 {}", v["t0"]);
    assert_eq!(v["up_streams"], "2");

    // 2. The flent command line: summary.
    let flent_cmd = |args: &[&str]| {
        let mut c = Command::new(&py);
        c.args(["-m", "flent"]).args(args);
        run_with_timeout(&mut c, Duration::from_secs(180)).unwrap()
    };
    let fs = f.to_str().unwrap();
    let (ok, out, err) = flent_cmd(&["-i", fs, "-f", "summary"]);
    assert!(ok, "flent -f summary failed: {err}");
    eprintln!("flent -i small.flent.gz -f summary:\n{out}");
    assert!(out.contains("Summary of rrul_be_nflows test run"), "{out}");
    let line = out.lines().find(|l| l.trim_start().starts_with("TCP upload sum")).expect("TCP upload sum row");
    let avg: f64 = line.split(':').nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(avg > 5.0 && avg < 10.5, "TCP upload sum avg {avg} Mbit/s");

    // 3. A flent plot to PNG (needs matplotlib).
    if !py_has(&py, "matplotlib") {
        let _ = pip_install(&py, "matplotlib");
    }
    if !py_has(&py, "matplotlib") {
        bloatlab_testkit::cannot_run("flent plot part", "matplotlib unavailable (pip install matplotlib)");
        return;
    }
    for plot in ["totals", "ping_cdf"] {
        let png = dir.path().join(format!("{plot}.png"));
        let (ok, _, err) = flent_cmd(&["-i", fs, "-p", plot, "-o", png.to_str().unwrap()]);
        assert!(ok, "flent -p {plot} failed: {err}");
        let img = image::open(&png).unwrap().to_rgb8();
        let ink = img.pixels().filter(|p| p.0.iter().any(|c| *c < 200)).count() as f64 / (img.width() * img.height()) as f64;
        assert!(ink > 0.01, "flent {plot} plot is blank");
        if let Some(d) = std::env::var_os("REPORT_SAMPLES_DIR") {
            let _ = std::fs::copy(&png, PathBuf::from(d).join(format!("flent_{plot}.png")));
        }
    }
}

use bloatlab_testkit::chrome::chromium;

fn chromium_cmd(bin: &Path, profile: &Path) -> Command {
    let mut c = Command::new(bin);
    c.args(bloatlab_testkit::chrome::HEADLESS_FLAGS).arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Load `html` in headless Chromium at 1280 px wide with `script` (which
/// appends a `<pre id="layout-check">` of its findings) and return them.
fn layout_check(bin: &Path, html: &Path, script: &str, height: u32) -> String {
    let page = std::fs::read_to_string(html).unwrap().replace("</body>", script);
    std::fs::write(html, page).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let mut c = chromium_cmd(bin, profile.path());
    c.arg(format!("--window-size=1280,{height}")).arg("--virtual-time-budget=5000").arg("--dump-dom").arg(format!("file://{}", html.display()));
    let (ok, dom, err) = run_with_timeout(&mut c, Duration::from_secs(120)).expect("could not start chromium");
    assert!(ok, "chromium --dump-dom failed: {err}");
    let found = dom.split("<pre id=\"layout-check\">").nth(1).and_then(|s| s.split("</pre>").next()).expect("the layout check ran");
    found.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"")
}

#[test]
fn chromium_renders_html_report() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("screenshot test", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let r = common::small();
    let dir = tempfile::tempdir().unwrap();
    let files = write_report(&[Run { label: "small", result: &r }], dir.path(), "small", Format::Png).unwrap();
    let url = format!("file://{}", files.html.display());
    let shot = dir.path().join("shot.png");

    let profile = tempfile::tempdir().unwrap();
    let mut c = chromium_cmd(&bin, profile.path());
    c.arg(format!("--screenshot={}", shot.display())).arg("--window-size=1280,2000").arg(&url);
    let (ok, _, err) = run_with_timeout(&mut c, Duration::from_secs(120)).expect("could not start chromium");
    if !ok || !shot.exists() {
        panic!("chromium screenshot failed: {err}");
    }
    let img = image::open(&shot).unwrap().to_rgb8();
    assert_eq!((img.width(), img.height()), (1280, 2000));
    let n = (img.width() * img.height()) as f64;
    let ink = img.pixels().filter(|p| p.0.iter().any(|c| *c < 250)).count() as f64 / n;
    // The grade badge (D: #d1242f) is rendered near the top.
    let badge = img.enumerate_pixels().filter(|(_, y, p)| *y < 400 && p.0 == [0xd1, 0x24, 0x2f]).count();
    eprintln!("screenshot: {:.1}% non-white pixels, {badge} grade-badge pixels", ink * 100.0);
    assert!(ink > 0.05 && ink < 0.9, "screenshot looks blank or broken ({ink})");
    assert!(badge > 1000, "grade badge not rendered ({badge} pixels)");
    if let Some(d) = std::env::var_os("REPORT_SAMPLES_DIR") {
        let _ = std::fs::copy(&shot, PathBuf::from(d).join("screenshot.png"));
    }

    // The DOM after rendering has the title, the table and the plots.
    let profile = tempfile::tempdir().unwrap();
    let mut c = chromium_cmd(&bin, profile.path());
    c.arg("--dump-dom").arg(&url);
    let (ok, dom, err) = run_with_timeout(&mut c, Duration::from_secs(120)).expect("could not start chromium");
    assert!(ok, "chromium --dump-dom failed: {err}");
    assert!(dom.contains("<title>bloatlab report — lab — 2026-11-22T06:00:00Z</title>"), "title missing from DOM");
    assert!(dom.contains("<table class=\"summary\">") && dom.contains("<td>2u2d</td>"), "summary table missing from DOM");
    assert!(dom.contains("Verdict") || dom.contains("added latency under load"));
    assert!(dom.matches("<svg").count() >= 5, "inline plots missing from DOM");
}

/// Rendered in Chromium, nothing spills out of its card and no two axis
/// labels of an inline plot overlap, even with loopback-sized numbers.
#[test]
fn chromium_layout_has_no_overflow_or_overlapping_labels() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("layout test", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let mut r = common::small();
    // loopback-sized numbers make the widest cards
    r.headline.upload_capacity_bps = 26_586e6;
    r.headline.download_capacity_bps = 26_312e6;
    r.headline.rpm = Some(3_886_500.0);
    r.headline.idle_latency_ms = Some(0.017);
    r.headline.loaded_latency_ms = Some(0.015);
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("layout.html");
    bloatlab_report::write_html(&[Run { label: "small", result: &r }], &html).unwrap();
    // A script measures the laid-out page and writes what it found into the DOM.
    let check = r#"<script>
window.addEventListener('load', () => {
  const bad = [];
  for (const c of document.querySelectorAll('.card')) {
    const box = c.getBoundingClientRect();
    for (const e of c.querySelectorAll('*')) {
      const r = e.getBoundingClientRect();
      if (r.right > box.right + 0.5 || r.bottom > box.bottom + 0.5) bad.push('card overflow: ' + c.textContent.trim());
    }
  }
  const overlaps = [];
  for (const svg of document.querySelectorAll('svg')) {
    const texts = [...svg.querySelectorAll('text')].map(t => ({s: t.textContent, r: t.getBoundingClientRect()})).filter(t => t.s.trim() && t.r.width > 0);
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i].r, b = texts[j].r;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 2 && h > 2) overlaps.push(texts[i].s + ' / ' + texts[j].s);
    }
  }
  const pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = 'overflow=' + bad.length + ' overlaps=' + overlaps.length + '\n' + bad.concat(overlaps).slice(0, 20).join('\n');
  document.body.appendChild(pre);
});
</script></body>"#;
    let found = layout_check(&bin, &html, check, 2000);
    eprintln!("layout check: {found}");
    assert!(found.starts_with("overflow=0 overlaps=0"), "{found}");
}

/// The whole report as a reader sees it at 1280 px in Chromium, with every
/// section filled (pings, DSCP classes, an IETF RPM result, one 5 s probe):
/// no plot text under 10 px, nothing wider than its box (no table or
/// formula cut off behind a scrollbar), no legend or label over a data
/// point, and no box of the box plot flattened by the one late probe.
#[test]
fn chromium_report_at_1280_px_reads_well() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("1280 px report test", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let r = common::everything();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("everything.html");
    bloatlab_report::write_html(&[Run { label: "everything", result: &r }], &html).unwrap();
    let check = r#"<script>
window.addEventListener('load', () => {
  const out = [];
  let minText = 1e9, minWhat = '';
  for (const svg of document.querySelectorAll('svg')) {
    const vb = svg.viewBox.baseVal;
    const scale = svg.getBoundingClientRect().width / (vb && vb.width ? vb.width : svg.width.baseVal.value);
    const pts = [];
    for (const p of svg.querySelectorAll('polyline')) {
      for (const xy of p.getAttribute('points').trim().split(/\s+/)) { const [x, y] = xy.split(',').map(Number); pts.push([x, y]); }
    }
    for (const c of svg.querySelectorAll('circle')) pts.push([+c.getAttribute('cx'), +c.getAttribute('cy')]);
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      const px = parseFloat(t.getAttribute('font-size')) * scale;
      if (px < minText) { minText = px; minWhat = t.textContent; }
      const tr = t.getBoundingClientRect(), sr = svg.getBoundingClientRect();
      if (tr.right > sr.right + 1 || tr.left < sr.left - 1) out.push('text cut at the plot edge: "' + t.textContent + '"');
      const b = t.getBBox();
      const over = pts.filter(([x, y]) => x > b.x + 1 && x < b.x + b.width - 1 && y > b.y + 1 && y < b.y + b.height - 1).length;
      if (over > 2) out.push('text over data: "' + t.textContent + '" covers ' + over + ' points');
    }
  }
  out.push('min-text=' + minText.toFixed(1) + ' (' + minWhat + ')');
  for (const e of document.querySelectorAll('pre, table, .scroll, figure, section, .card, p, main')) {
    if (e.scrollWidth > e.clientWidth + 1) out.push('overflow: <' + e.tagName.toLowerCase() + ' class=' + e.className + '> ' + e.scrollWidth + ' > ' + e.clientWidth + ': ' + e.textContent.slice(0, 60));
  }
  if (document.documentElement.scrollWidth > window.innerWidth) out.push('page wider than the window: ' + document.documentElement.scrollWidth);
  const boxes = [...document.querySelectorAll('figure.plot-box svg rect[opacity="0.45"]')].map(r => r.getBoundingClientRect().height);
  out.push('boxes=' + boxes.map(h => h.toFixed(0)).join(','));
  const pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = out.join('\n');
  document.body.appendChild(pre);
});
</script></body>"#;
    let found = layout_check(&bin, &html, check, 4000);
    eprintln!("layout at 1280 px:\n{found}");
    let problems: Vec<&str> = found.lines().filter(|l| l.starts_with("overflow") || l.starts_with("page wider") || l.starts_with("text over data") || l.starts_with("text cut")).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let min: f64 = found.lines().find_map(|l| l.strip_prefix("min-text=")).and_then(|v| v.split(' ').next()).unwrap().parse().unwrap();
    assert!(min >= 10.0, "plot text of {min:.1} px at 1280 px (the smallest: {found})");
    let boxes: Vec<f64> = found.lines().find_map(|l| l.strip_prefix("boxes=")).unwrap().split(',').filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    assert!(boxes.len() >= 3, "box plot boxes: {boxes:?}");
    // the loaded phases' boxes (p25-p75 of a bloated queue) stay boxes, not lines
    assert!(boxes.iter().filter(|h| **h >= 8.0).count() >= 2, "boxes flattened: {boxes:?}");
}
