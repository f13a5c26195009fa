//! `bloatlab lab` with no arguments: the default demo finishes in under a
//! minute and shows the 1000-packet FIFO's latency beside the 10-packet one's.
mod lab_util;
use lab_util::*;
use std::process::Command;
use std::time::Instant;

/// A markdown table row's cells.
fn cells(line: &str) -> Vec<&str> {
    line.trim().trim_start_matches('|').trim_end_matches('|').split('|').map(str::trim).collect()
}

/// The "added" column (ms) of the table row for `queue`.
fn added_ms(table: &str, queue: &str) -> f64 {
    let header = cells(table.lines().find(|l| l.starts_with("| queue ")).expect("table header"));
    let col = header.iter().position(|h| *h == "added").expect("added column");
    let row = cells(
        table
            .lines()
            .find(|l| l.starts_with('|') && cells(l)[0] == queue)
            .unwrap_or_else(|| panic!("no row for {queue} in\n{table}")),
    );
    row[col].trim_end_matches(" ms").parse().unwrap_or_else(|_| panic!("added `{}`", row[col]))
}

#[test]
fn lab_default_demo_under_a_minute() {
    if skip("lab_default_demo_under_a_minute") {
        return;
    }
    guarded(move || {
        let t = Instant::now();
        let out = Command::new(EXE).arg("lab").output().unwrap();
        let elapsed = t.elapsed().as_secs_f64();
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!("{}{stdout}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success());
        assert!(elapsed < 60.0, "the demo took {elapsed:.1} s");
        let big = added_ms(&stdout, "fifo:1000");
        let small = added_ms(&stdout, "fifo:10");
        // 1000 packets at 10 Mbit/s hold 1211 ms; 10 packets 12.1 ms.
        assert!(big > 250.0, "fifo:1000 added only {big} ms");
        assert!(small < 15.0, "fifo:10 added {small} ms");
        assert!(stdout.contains("1211 ms") && stdout.contains("12.1 ms"), "analytic column missing");
    });
}
