//! Parsing and formatting of the units recipes and sweeps speak:
//! durations ("10s", "500ms", "50us", "2m", bare seconds), rates ("10mbit",
//! "1gbit", "500kbit", "10M"), and human-friendly output.

/// Parse a duration: "50us", "1.5ms", "10s", "2m", "1h", or bare seconds ("10", "0.5").
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{s}\" is not a duration (examples: 50us, 10ms, 1.5s, 2m)"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "s" | "sec" | "secs" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "m" | "min" | "mins" => 60e9,
        "h" => 3600e9,
        other => {
            return Err(format!(
                "\"{s}\": unknown duration unit \"{other}\" (use ns, us, ms, s, m, h)"
            ))
        }
    };
    let ns = v * mult;
    if !ns.is_finite() || ns < 0.0 || ns > 1e15 {
        return Err(format!("\"{s}\" is out of range"));
    }
    Ok(ns.round() as u64)
}

/// Format nanoseconds compactly and losslessly when possible: 50us, 1.5ms, 10s, 2m.
pub fn fmt_duration_ns(ns: u64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    if ns % 60_000_000_000 == 0 {
        return format!("{}m", ns / 60_000_000_000);
    }
    let (div, unit) = if ns >= 1_000_000_000 {
        (1e9, "s")
    } else if ns >= 1_000_000 {
        (1e6, "ms")
    } else if ns >= 1_000 {
        (1e3, "us")
    } else {
        (1.0, "ns")
    };
    let v = ns as f64 / div;
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{unit}")
}

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

/// Parse a rate in bits per second: "10mbit", "100Mbit/s", "1gbit", "500kbit", "10M", "2.5G", "9600" (bit/s).
pub fn parse_rate_bps(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("/s").trim_end_matches("ps");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{s}\" is not a rate (examples: 10mbit, 100mbit, 1gbit)"))?;
    let mult = match unit.trim() {
        "" | "bit" | "b" => 1.0,
        "k" | "kbit" | "kb" => 1e3,
        "m" | "mbit" | "mb" => 1e6,
        "g" | "gbit" | "gb" => 1e9,
        other => {
            return Err(format!(
                "\"{s}\": unknown rate unit \"{other}\" (use kbit, mbit, gbit)"
            ))
        }
    };
    let bps = v * mult;
    if !(bps >= 1000.0 && bps <= 1e12) {
        return Err(format!("\"{s}\": rate must be between 1kbit and 1000gbit"));
    }
    Ok(bps)
}

/// tc-style spelling of a rate: 10mbit, 1gbit, 1500kbit.
pub fn fmt_rate_tc(bps: f64) -> String {
    let b = bps.round() as u64;
    if b % 1_000_000_000 == 0 {
        format!("{}gbit", b / 1_000_000_000)
    } else if b % 1_000_000 == 0 {
        format!("{}mbit", b / 1_000_000)
    } else if b % 1_000 == 0 {
        format!("{}kbit", b / 1_000)
    } else {
        format!("{b}bit")
    }
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
    let secs = now.as_secs() as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86400));
    let sod = secs.rem_euclid(86400);
    let (h, mi, s) = (sod / 3600, (sod % 3600) / 60, sod % 60);
    (
        format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z"),
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
    )
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z.rem_euclid(146097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

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
