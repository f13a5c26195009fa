//! The verdict quotes the graded phase's queue, not a stage that ran after
//! it: an upload scenario fills the 50-packet upload queue (60 ms at 10
//! Mbit/s), then `--rpm=download` fills the 200-packet download queue
//! (242 ms). The download queue's series holds the larger backlog, but the
//! grade is the upload scenario's, so the advice names the upload queue and
//! its figures as the phase's summary recorded them.
mod lab_util;
use lab_util::*;

#[test]
fn the_verdict_quotes_the_graded_phase_and_not_the_rpm_stage() {
    if skip("the_verdict_quotes_the_graded_phase_and_not_the_rpm_stage") {
        return;
    }
    guarded(|| {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("verdict.json");
        let (r, printed) = run_lab_printed(
            &json,
            &["--rate", "10mbit", "--queue-up", "fifo:50", "--queue-down", "fifo:200"],
            &["--scenarios", "1u0d", "--duration", "6s", "--idle", "2s", "--rpm=download", "--ping", "router"],
        );
        assert!(r.rpm.is_some(), "the RPM stage ran");
        // the lab's own table shows the pings and the RPM stage beside the queue figures
        assert!(printed.contains("Pings to other hosts") && printed.contains("icmp 10."), "{printed}");
        assert!(printed.contains("IETF responsiveness") && printed.contains("download"), "{printed}");
        let graded = &r.scenarios[0];
        let q = |p: &bloatlab_results::Phase, role: &str| p.summary.queues.iter().find(|q| q.role == role).cloned().unwrap_or_else(|| panic!("{role}: {:?}", p.summary.queues));
        let up = q(graded, "bottleneck-up");
        let down_in_phase = q(graded, "bottleneck-down");
        // Over the whole test (the RPM stage included) the download queue
        // filled far beyond anything the graded phase saw.
        let lab = r.lab.as_ref().unwrap();
        let down_series = lab.queues.iter().find(|s| s.role == "bottleneck-down").unwrap();
        let down_max = down_series.samples.iter().map(|s| s.backlog_packets).max().unwrap();
        eprintln!("graded 1u0d: up max {} pkts, down max {} pkts; whole test down max {down_max} pkts", up.max_backlog_packets, down_in_phase.max_backlog_packets);
        assert!(up.max_backlog_packets >= 30 && up.max_backlog_packets <= 50, "{up:?}");
        assert!(down_max > 100 && down_max > up.max_backlog_packets, "the RPM download stage filled the download queue: {down_max}");
        assert!(down_in_phase.max_backlog_packets < 20, "{down_in_phase:?}");
        let v = bloatlab_report::verdict(&r);
        eprintln!("{}", v.line());
        assert_eq!(v.worst_scenario.as_deref(), Some("1u0d"));
        // the grade is born once, in the result, with the lab's link rate
        assert_eq!(r.headline.grade.as_deref(), Some(v.grade.as_str()), "the JSON's grade and the verdict's");
        assert!(v.sentence.contains("The upload bottleneck queue"), "{}", v.sentence);
        assert!(v.sentence.contains(&format!("({} packets", up.max_backlog_packets)), "{}", v.sentence);
        assert!(!v.sentence.contains(&format!("({down_max} packets")), "{}", v.sentence);
    });
}
