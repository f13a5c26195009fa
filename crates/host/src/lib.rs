//! The OS layer every bloatlab process shares, and the only crate with
//! `unsafe` code: every raw system call sits here behind a safe API.
//! Signal handling ([`signals`]), the one clock and timed sleeps
//! ([`clock`]), network namespaces ([`netns`]), running ip/tc/ethtool
//! ([`cmd`]), processes and signals to them ([`process`]), file locks
//! ([`fs`]), socket options and receive stamps ([`sock`]), readiness waits
//! ([`poll`]), thread scheduling ([`sched`]), huge pages ([`mem`]), qdisc
//! counters over rtnetlink ([`qdisc_stats`]), TUN
//! devices ([`tun`]), and facts about the machine read from /proc and /boot
//! (every result records its conditions).

pub mod clock;
pub mod cmd;
pub mod fs;
pub mod mem;
pub mod netns;
pub mod poll;
pub mod process;
pub mod qdisc_stats;
pub mod sched;
pub mod signals;
pub mod sock;
pub mod tun;

pub use process::is_root;

/// A file's contents without surrounding whitespace, or None when unreadable.
pub fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// `/proc/sys/kernel/hostname` ("" when unreadable).
pub fn hostname() -> String {
    read_trim("/proc/sys/kernel/hostname").unwrap_or_default()
}

/// The running kernel's release, `uname -r` ("" when unreadable).
pub fn kernel_release() -> String {
    read_trim("/proc/sys/kernel/osrelease").unwrap_or_default()
}

/// Process start time (clock ticks since boot, field 22 of /proc/PID/stat):
/// together with the pid it identifies a process across pid reuse.
pub fn proc_start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// `/proc/net/dev` counters of an interface: (rx_packets, rx_drop, tx_packets, tx_drop).
pub fn proc_net_dev(name: &str) -> Option<(u64, u64, u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/net/dev").ok()?;
    for line in text.lines() {
        let Some((n, rest)) = line.split_once(':') else { continue };
        if n.trim() == name {
            let v: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            if v.len() >= 12 {
                return Some((v[1], v[3], v[9], v[11]));
            }
        }
    }
    None
}

/// `/proc/loadavg` as the kernel prints it ("" when unreadable).
pub fn loadavg() -> String {
    read_trim("/proc/loadavg").unwrap_or_default()
}

/// CONFIG_HZ of the running kernel from `/boot/config-<release>`, or "unknown".
pub fn kernel_hz() -> String {
    config_value(&std::fs::read_to_string(format!("/boot/config-{}", kernel_release())).unwrap_or_default(), "CONFIG_HZ")
        .unwrap_or_else(|| "unknown".into())
}

/// `NAME=value` from a kernel config text.
pub fn config_value(config: &str, name: &str) -> Option<String> {
    config.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix('=')).map(str::to_string))
}

/// Logical CPUs this process may use.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// (steal, total) CPU ticks from the first line of a /proc/stat text: steal
/// is the time a hypervisor ran other guests instead of this machine.
pub fn parse_steal(proc_stat: &str) -> (u64, u64) {
    let v: Vec<u64> =
        proc_stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    (v.get(7).copied().unwrap_or(0), v.iter().take(8).sum())
}

/// (steal, total) CPU ticks of this machine now.
pub fn cpu_steal_ticks() -> (u64, u64) {
    parse_steal(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

/// Percent of all CPU time stolen between two [`cpu_steal_ticks`] readings.
pub fn steal_pct(before: (u64, u64), after: (u64, u64)) -> f64 {
    after.0.saturating_sub(before.0) as f64 * 100.0 / after.1.saturating_sub(before.1).max(1) as f64
}

/// Measures the CPU a hypervisor takes from this (virtual) machine over an
/// interval. Anything this machine emulates (links, timers, pacers) stops
/// whenever the VM does, so timing results carry this number.
#[derive(Debug, Clone, Copy)]
pub struct StealMeter {
    start: (u64, u64),
}

impl StealMeter {
    pub fn start() -> StealMeter {
        StealMeter { start: cpu_steal_ticks() }
    }
    /// Percent of all CPU time since [`StealMeter::start`] that was stolen.
    pub fn pct(&self) -> f64 {
        steal_pct(self.start, cpu_steal_ticks())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_from_proc_stat() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let a = parse_steal("cpu  100 0 50 800 0 0 0 50 0 0\ncpu0 1 2 3\n");
        assert_eq!(a, (50, 1000));
        let b = parse_steal("cpu  200 0 100 1600 0 0 0 100 0 0\n");
        assert_eq!(b, (100, 2000));
        assert!((steal_pct(a, b) - 5.0).abs() < 1e-9);
        // a kernel without the steal column, and garbage
        assert_eq!(parse_steal("cpu  1 2 3 4\n"), (0, 10));
        assert_eq!(parse_steal(""), (0, 0));
        assert_eq!(steal_pct((0, 0), (0, 0)), 0.0);
    }

    #[test]
    fn config_values() {
        let c = "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_HZ_PERIODIC=y\n";
        assert_eq!(config_value(c, "CONFIG_HZ").as_deref(), Some("250"));
        assert_eq!(config_value(c, "CONFIG_NO_HZ"), None);
    }

    #[test]
    fn this_machine() {
        assert!(!kernel_release().is_empty());
        assert!(cpus() >= 1);
        let m = StealMeter::start();
        let p = m.pct();
        assert!((0.0..=100.0).contains(&p), "{p}");
    }
}
