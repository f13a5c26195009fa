//! Parsing and formatting of the units recipes and sweeps speak:
//! durations ("10s", "500ms", "50us", "2m", bare seconds), rates ("10mbit",
//! "1gbit", "500kbit", "10M"), and human-friendly output. The parsers are
//! crates/units' (one for the whole workspace); this module adds the recipes'
//! ranges and table formatting.

/// Parse a duration: "50us", "1.5ms", "10s", "2m", "1h", or bare seconds ("10", "0.5"); at most 1e15 ns (11.6 days).
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let ns = bloatlab_units::parse_duration_ns(s)?;
    if ns > 1_000_000_000_000_000 {
        return Err(format!("\"{s}\" is out of range (at most 11 days)"));
    }
    Ok(ns)
}

/// Format nanoseconds compactly and exactly: 50us, 1.5ms, 10s, 2m.
pub use bloatlab_units::fmt_duration_ns;

/// A duration with three significant digits for tables: "49.9us", "1.02ms", "50.0ms".
pub fn fmt_duration_sig3(ns: u64) -> String {
    let v = ns as f64;
    // thresholds at x.5 below the unit so 999.97us prints as 1.00ms
    if v >= 999.5e6 {
        format!("{}s", sig3(v / 1e9))
    } else if v >= 999.5e3 {
        format!("{}ms", sig3(v / 1e6))
    } else if v >= 999.5 {
        format!("{}us", sig3(v / 1e3))
    } else {
        format!("{ns}ns")
    }
}

/// Parse a rate in bits per second: "10mbit", "100Mbit/s", "1gbit", "500kbit", "10M", "2.5G", "9600" (bit/s);
/// 1kbit ..= 1000gbit. The same units as the lab and tc (bloatlab-units); "10mbps" and "10mb" are
/// refused as ambiguous, since tc reads "mbps" as megaBYTES per second.
pub fn parse_rate_bps(s: &str) -> Result<f64, String> {
    let bps = bloatlab_units::parse_rate_bps(s)? as f64;
    if !(1000.0..=1e12).contains(&bps) {
        return Err(format!("\"{s}\": rate must be between 1kbit and 1000gbit"));
    }
    Ok(bps)
}

/// tc-style spelling of a rate: 10mbit, 1gbit, 1500kbit.
pub fn fmt_rate_tc(bps: f64) -> String {
    bloatlab_units::fmt_rate_tc(bps.round() as u64)
}

/// Human rate with three significant digits: "9.41 Mbit/s".
pub fn fmt_rate_human(bps: f64) -> String {
    if !bps.is_finite() {
        return "-".into();
    }
    let (v, u) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    format!("{} {u}", sig3(v))
}

/// Three significant digits, no exponent: 1234 -> "1234", 12.345 -> "12.3", 0.01234 -> "0.0123".
pub fn sig3(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if v.abs() >= 99.5 {
        return format!("{v:.0}");
    }
    // round to three significant digits first, then pick the decimals from
    // the rounded magnitude (0.99997 -> "1.00", not "1.000")
    let mag = v.abs().log10().floor() as i32;
    let scale = 10f64.powi(mag - 2);
    let r = (v / scale).round() * scale;
    let mag = r.abs().log10().floor() as i32;
    let decimals = (2 - mag).clamp(0, 9) as usize;
    format!("{r:.decimals$}")
}

/// Milliseconds for tables: "0.52", "931", "1581".
pub fn fmt_ms(v: f64) -> String {
    sig3(v)
}

/// Seconds as "1h02m03s" / "4m05s" / "12s".
pub fn fmt_hms(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, (s % 3600) / 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// UTC timestamp for folder names and metadata: (compact "20260122T061502Z", RFC 3339).
pub fn utc_now_strings() -> (String, String) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let t = bloatlab_units::UtcTime::from_unix_secs(now.as_secs() as i64);
    (t.compact(), t.rfc3339_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_units::civil_from_days;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("50us").unwrap(), 50_000);
        assert_eq!(parse_duration_ns("1.5ms").unwrap(), 1_500_000);
        assert_eq!(parse_duration_ns("10").unwrap(), 10_000_000_000);
        assert_eq!(parse_duration_ns("2m").unwrap(), 120_000_000_000);
        assert!(parse_duration_ns("10 parsecs").is_err());
        assert!(parse_duration_ns("").is_err());
        assert_eq!(fmt_duration_ns(50_000), "50us");
        assert_eq!(fmt_duration_ns(1_500_000), "1.5ms");
        assert_eq!(fmt_duration_ns(120_000_000_000), "2m");
        assert_eq!(fmt_duration_ns(15_000_000_000), "15s");
        assert_eq!(fmt_duration_sig3(999_970), "1.00ms");
        assert_eq!(fmt_duration_sig3(49_987), "50.0us");
        assert_eq!(fmt_duration_sig3(50_001_875), "50.0ms");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate_bps("10mbit").unwrap(), 10e6);
        assert_eq!(parse_rate_bps("100Mbit/s").unwrap(), 100e6);
        assert_eq!(parse_rate_bps("1G").unwrap(), 1e9);
        assert_eq!(parse_rate_bps("1500kbit").unwrap(), 1.5e6);
        assert!(parse_rate_bps("fast").is_err());
        assert!(parse_rate_bps("10mbyte").is_err());
        // ambiguous spellings (tc reads "mbps" as megabytes/s) are refused, as in the lab
        for amb in ["10mbps", "10Mb", "500kbps", "1gb/s"] {
            assert!(parse_rate_bps(amb).is_err(), "{amb}");
        }
        assert!(parse_rate_bps("999bit").unwrap_err().contains("between 1kbit and 1000gbit"));
        assert!(parse_rate_bps("2tbit").is_err());
        assert!(parse_rate_bps("fast").unwrap_err().contains("not a rate"));
        assert!(parse_duration_ns("12d").is_err());
        assert!(parse_duration_ns("300h").unwrap_err().contains("out of range"));
        assert_eq!(fmt_rate_tc(10e6), "10mbit");
        assert_eq!(fmt_rate_tc(1.5e6), "1500kbit");
        assert_eq!(fmt_rate_human(9.412e6), "9.41 Mbit/s");
        assert_eq!(sig3(1234.0), "1234");
        assert_eq!(sig3(12.345), "12.3");
        assert_eq!(sig3(0.012345), "0.0123");
        assert_eq!(sig3(0.99997), "1.00");
        assert_eq!(sig3(-0.00326), "-0.00326");
        assert_eq!(sig3(99.97), "100");
    }

    #[test]
    fn civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20454), (2026, 1, 1));
    }
}
