//! `--scenarios auto` through the lab, against the analytic truth. Each
//! upload's socket buffer is capped (16 KiB) and the path has 80 ms of
//! round trip, so one flow carries about window / RTT (here ~1.8 Mbit/s)
//! and goodput grows linearly with the flows until the 10 Mbit/s link (9.56
//! Mbit/s of payload) is full: 4 flows cannot fill it (at most ~7 Mbit/s),
//! 8 can, so the ramp must run 1, 2, 4, 8, 16 and say it saturated at 8.
mod lab_util;
use lab_util::*;
use std::process::Command;

#[test]
fn the_ramp_stops_where_the_flows_fill_the_link() {
    if skip("the_ramp_stops_where_the_flows_fill_the_link") {
        return;
    }
    guarded(|| {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("ramp.json");
        let r = run_lab(
            &json,
            &["--rate", "10mbit", "--queue", "fifo:100", "--delay", "40ms"],
            &["--scenarios", "auto-up", "--duration", "4s", "--idle", "1s", "--socket-buffer", "16k"],
        );
        assert_eq!(r.ramp.len(), 1, "one direction ramped");
        let up = &r.ramp[0];
        let flows: Vec<u32> = up.steps.iter().map(|s| s.flows).collect();
        let g: Vec<f64> = up.steps.iter().map(|s| s.goodput_bps / 1e6).collect();
        eprintln!("steps {flows:?}, goodput {g:.2?} Mbit/s; {}", up.stopped);
        let ceiling = 10.0 * 1448.0 / 1514.0;
        // One flow is window-limited: well under the link, and 4 of them too.
        assert!(g[0] * 4.0 < 0.9 * ceiling, "one flow carried {:.2} Mbit/s: not window-limited, the premise failed", g[0]);
        assert_eq!(flows, vec![1, 2, 4, 8, 16], "{}", up.stopped);
        assert_eq!(up.saturated_at, Some(8), "{}", up.stopped);
        // Linear while window-limited (each flow its own window / RTT); at 4
        // flows the link is ~70% busy and its queue adds to the RTT, so a
        // flow carries somewhat less (measured 6.05-7.06 of a linear 7.04).
        assert!((g[1] - 2.0 * g[0]).abs() < 0.15 * 2.0 * g[0], "2 flows: {:.2} Mbit/s, linear growth says {:.2}", g[1], 2.0 * g[0]);
        assert!(g[2] > 0.7 * 4.0 * g[0] && g[2] < 1.1 * 4.0 * g[0], "4 flows: {:.2} Mbit/s, linear growth says {:.2}", g[2], 4.0 * g[0]);
        assert!(g[3] > 0.9 * ceiling && up.capacity_bps / 1e6 <= ceiling * 1.01, "capacity {:.2} vs the link's {ceiling:.2}", up.capacity_bps / 1e6);
        assert!(up.stopped.contains("saturated at 8"), "{}", up.stopped);
        // The steps are ordinary scenarios in the result.
        let names: Vec<&str> = r.scenarios.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["1u0d", "2u0d", "4u0d", "8u0d", "16u0d"]);
        // The summary says where it stopped.
        let o = Command::new(EXE).args(["report", json.to_str().unwrap()]).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("Auto-ramp upload: 1 flow(s)") && text.contains("saturated at 8"), "{text}{}", String::from_utf8_lossy(&o.stderr));
    });
}
