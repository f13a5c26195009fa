//! The seed documents' own figures, printed beside ours in the recipe
//! tables and drawn as reference points in the plots.

/// Seed 000 (OLPC bug #10904, XO-1.5 laptop, scp over its wifi): ping
/// latency (min, avg, max, mdev ms; n = 50) by the sender's txqueuelen.
pub const SEED000_SCP: &[(u32, [f64; 4])] = &[(1000, [3.0, 931.0, 1581.0, 338.0]), (10, [17.0, 75.0, 227.0, 55.0]), (1, [2.6, 3.0, 4.9, 0.5])];
/// Seed 000's idle baseline.
pub const SEED000_IDLE: [f64; 4] = [2.6, 3.3, 23.0, 2.9];

/// Seed 002 (netdev, "TxDescriptors -> 1024"): latency builds up to 120 ms
/// at 100 Mbit/s and 1.2 s at 10 Mbit/s behind a 1000-packet txqueue.
pub const SEED002_MAX_MS: &[(u64, u32, f64)] = &[(100_000_000, 1000, 120.0), (10_000_000, 1000, 1200.0)];

/// Seed 003 (bloat list, 100base-TX LAN, standard configurations):
/// upload and download capacity (KiB/s), link responsiveness and flow smoothness (Hz).
pub const SEED003: (f64, f64, f64, f64) = (1018.0, 2181.0, 2.0, 1.0);

/// Seed 004 (CCID-3 on Linux 2.6.20, HZ = 1000): the sender ran at a
/// constant factor of about 3.2 x the idealized rate once t_ipi exceeded
/// the timer granularity, and out of control below it.
pub const SEED004_FACTOR: f64 = 3.2;

/// Seed 001 (UCL LAN txqueuelen tests, 2003): send stalls vanished from a
/// txqueuelen of about 2000 packets up.
pub const SEED001_NO_STALLS_FROM: u32 = 2000;

/// Seed 000 and 002's figures for a FIFO of `packets` at `rate_bps`, as a table cell.
pub fn txqueuelen_cell(packets: Option<u32>, rate_bps: Option<f64>) -> String {
    let Some(n) = packets else { return "-".into() };
    let mut v = vec![];
    if let Some((_, [_, avg, max, _])) = SEED000_SCP.iter().find(|(q, _)| *q == n) {
        v.push(format!("000: avg {avg} ms, max {max} ms"));
    }
    if let Some(r) = rate_bps {
        if let Some((_, _, m)) = SEED002_MAX_MS.iter().find(|(b, q, _)| *q == n && (*b as f64 - r).abs() < 1.0) {
            v.push(format!("002: up to {m} ms"));
        }
    }
    if v.is_empty() {
        "-".into()
    } else {
        v.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn cells() {
        assert_eq!(txqueuelen_cell(Some(1000), Some(10e6)), "000: avg 931 ms, max 1581 ms; 002: up to 1200 ms");
        assert_eq!(txqueuelen_cell(Some(1), Some(10e6)), "000: avg 3 ms, max 4.9 ms");
        assert_eq!(txqueuelen_cell(Some(100), Some(10e6)), "-");
        assert_eq!(txqueuelen_cell(None, None), "-");
    }
}
