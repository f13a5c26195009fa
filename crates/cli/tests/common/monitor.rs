//! `bloatlab monitor` as a child process whose lines arrive on a channel
//! (its tests: monitor.rs, monitor_postgres.rs).
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A port nothing listens on.
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A monitor whose stdout lines arrive on a channel.
pub fn monitor(args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = Command::new(super::exe()).arg("monitor").args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, rx) = channel();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx2.send(format!("stderr: {l}"));
        }
    });
    (child, rx)
}

/// Lines until one satisfies `f` (all of them, that one last).
pub fn until(rx: &Receiver<String>, within: Duration, seen: &mut Vec<String>, f: impl Fn(&str) -> bool) -> String {
    let end = Instant::now() + within;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                eprintln!("monitor: {l}");
                seen.push(l.clone());
                if f(&l) {
                    return l;
                }
            }
            Err(_) => panic!("no such line within {within:?}; seen:\n{}", seen.join("\n")),
        }
    }
}
