//! Table formatting for recipes and sweeps (three significant digits, human
//! rates, elapsed times). Parsing is the model's (`bloatlab_model::units`).

pub use bloatlab_model::units::fmt_duration_ns;

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
    let t = bloatlab_model::units::UtcTime::from_unix_secs(now.as_secs() as i64);
    (t.compact(), t.rfc3339_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_model::units::civil_from_days;

    #[test]
    fn formats() {
        assert_eq!(fmt_duration_sig3(999_970), "1.00ms");
        assert_eq!(fmt_duration_sig3(49_987), "50.0us");
        assert_eq!(fmt_duration_sig3(50_001_875), "50.0ms");
        assert_eq!(fmt_rate_human(9.412e6), "9.41 Mbit/s");
        assert_eq!(sig3(1234.0), "1234");
        assert_eq!(sig3(12.345), "12.3");
        assert_eq!(sig3(0.012345), "0.0123");
        assert_eq!(sig3(0.99997), "1.00");
        assert_eq!(sig3(-0.00326), "-0.00326");
        assert_eq!(sig3(99.97), "100");
        assert_eq!(fmt_hms(3723.0), "1h02m03s");
    }

    #[test]
    fn civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20454), (2026, 1, 1));
    }
}
