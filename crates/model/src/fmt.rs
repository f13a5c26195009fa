//! Number formatting, one set for every output: terminal tables, live
//! lines, the verdict, HTML, recipes. Three significant digits (a rate in
//! the unit its size needs), never more decimals than the measurement
//! resolves.

/// Three significant digits, no exponent, rounded before the decimals are
/// picked: 1234 -> "1234", 98.76 -> "98.8", 9.412 -> "9.41", 0.05234 ->
/// "0.0523", 0.99997 -> "1.00", 99.97 -> "100".
pub fn sig3(v: f64) -> String {
    sig3_max(v, 9)
}

/// A count-like figure (RPM, Hz above 100) as an integer with three
/// significant digits: 3431726 -> "3430000", 11420 -> "11400", 270.4 ->
/// "270", 52.3 -> "52". Its input is at best three digits good (60000 / a
/// round trip measured to the microsecond), so the rest are zeros.
pub fn int3(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v.abs() < 1000.0 {
        return format!("{v:.0}");
    }
    let mag = v.abs().log10().floor() as i32;
    let scale = 10f64.powi(mag - 2);
    format!("{:.0}", (v / scale).round() * scale)
}

/// [`sig3`] with at most `max_decimals` decimals: the resolution the
/// measurement has (a microsecond clock gives milliseconds 3 decimals).
pub fn sig3_max(v: f64, max_decimals: i32) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if v.abs() >= 99.5 {
        return format!("{v:.0}");
    }
    let mag = v.abs().log10().floor() as i32;
    let scale = 10f64.powi(mag - 2);
    let r = (v / scale).round() * scale;
    let mag = r.abs().log10().floor() as i32;
    let decimals = (2 - mag).clamp(0, max_decimals.max(0)) as usize;
    let s = format!("{r:.decimals$}");
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        "0".into() // below the resolution: no "-0.000"
    } else {
        s
    }
}

/// A plain number without trailing zeros: 3.0 -> "3", 0.25 -> "0.25", 1.5 -> "1.5".
pub fn trim_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

pub fn opt_sig3(v: Option<f64>) -> String {
    v.map(sig3).unwrap_or_else(|| "-".into())
}

/// Milliseconds: three significant digits, at most 3 decimals (the
/// microsecond the probes resolve): "1211", "12.1", "0.146", "0.052".
pub fn ms(v: f64) -> String {
    sig3_max(v, 3)
}

pub fn opt_ms(v: Option<f64>) -> String {
    v.map(ms).unwrap_or_else(|| "-".into())
}

/// A unit of rate, picked so a value (or a column's largest value) reads
/// with at most 3 integer digits: 139.9 Gbit/s, not 139850 Mbit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    Bit,
    Kbit,
    Mbit,
    Gbit,
}

impl RateUnit {
    /// The unit for a value in bits/s.
    pub fn fit(bps: f64) -> RateUnit {
        let a = if bps.is_finite() { bps.abs() } else { 0.0 };
        // at x.5 below the next unit, so 999.7 Mbit/s reads 1.00 Gbit/s
        if a >= 999.5e6 {
            RateUnit::Gbit
        } else if a >= 999.5e3 {
            RateUnit::Mbit
        } else if a >= 999.5 {
            RateUnit::Kbit
        } else {
            RateUnit::Bit
        }
    }

    /// The unit for a column: the one its largest value needs (Mbit/s
    /// when the column is empty or all zero).
    pub fn fit_all(bps: impl IntoIterator<Item = f64>) -> RateUnit {
        let max = bps
            .into_iter()
            .filter(|v| v.is_finite())
            .fold(0.0, |a: f64, b| a.max(b.abs()));
        if max == 0.0 {
            RateUnit::Mbit
        } else {
            RateUnit::fit(max)
        }
    }

    pub fn divisor(self) -> f64 {
        match self {
            RateUnit::Bit => 1.0,
            RateUnit::Kbit => 1e3,
            RateUnit::Mbit => 1e6,
            RateUnit::Gbit => 1e9,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RateUnit::Bit => "bit/s",
            RateUnit::Kbit => "kbit/s",
            RateUnit::Mbit => "Mbit/s",
            RateUnit::Gbit => "Gbit/s",
        }
    }

    /// The number alone, three significant digits in this unit.
    pub fn num(self, bps: f64) -> String {
        sig3(bps / self.divisor())
    }
}

/// A rate with its unit: "9.41 Mbit/s", "140 Gbit/s", "512 kbit/s".
pub fn rate(bps: f64) -> String {
    if !bps.is_finite() {
        return "-".into();
    }
    let u = RateUnit::fit(bps);
    format!("{} {}", u.num(bps), u.name())
}

/// A duration from nanoseconds, three significant digits with its unit:
/// "49.9us", "1.02ms", "50.0ms", "1.50s".
pub fn duration_ns(ns: u64) -> String {
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

/// Seconds as "1h02m03s" / "4m05s" / "12s".
pub fn hms(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, (s % 3600) / 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Signed difference with [`ms`]'s precision rules, e.g. "+12.3", "-0.520".
pub fn signed(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let s = sig3_max(v, 3);
    if s == "0" {
        return s; // below the resolution: no sign
    }
    if v > 0.0 {
        format!("+{s}")
    } else {
        s
    }
}

/// Relative change in percent, "+3.1%"; "-" when the base is zero or missing.
pub fn pct_change(base: f64, new: f64) -> String {
    if !base.is_finite() || !new.is_finite() || base == 0.0 {
        return "-".into();
    }
    let p = (new - base) / base.abs() * 100.0;
    if p.abs() >= 1000.0 {
        // a change of 10x or more reads better as a factor; past 1000x (a
        // near-zero base, e.g. loopback latency) a ratio means nothing and
        // the absolute difference beside it says it all
        let ratio = new / base;
        return if ratio > 0.0 && ratio < 1000.0 {
            format!("{ratio:.0}x")
        } else {
            "-".into()
        };
    }
    let s = if p.abs() >= 100.0 {
        format!("{p:+.0}%")
    } else {
        format!("{p:+.1}%")
    };
    if s == "+0.0%" || s == "-0.0%" {
        "0%".into()
    } else {
        s
    }
}

/// Human duration for sentences: 850 -> "850 ms", 1234 -> "1.2 s".
pub fn human_ms(v: f64) -> String {
    if v >= 999.5 {
        format!("{} s", sig3(v / 1000.0))
    } else {
        // the same digits as the headline's `signed`: 27.6 ms, 0.007 ms
        format!("{} ms", ms(v))
    }
}

/// Human byte count: "1.5 MB" (decimal units).
pub fn human_bytes(b: f64) -> String {
    if b >= 999.5e12 {
        format!("{} PB", sig3(b / 1e15))
    } else if b >= 999.5e9 {
        format!("{} TB", sig3(b / 1e12))
    } else if b >= 999.5e6 {
        format!("{} GB", sig3(b / 1e9))
    } else if b >= 999.5e3 {
        format!("{} MB", sig3(b / 1e6))
    } else if b >= 999.5 {
        format!("{} kB", sig3(b / 1e3))
    } else {
        format!("{b:.0} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sig3_rules() {
        assert_eq!(sig3(1234.4), "1234");
        assert_eq!(sig3(98.76), "98.8");
        assert_eq!(sig3(9.412), "9.41");
        assert_eq!(sig3(0.5234), "0.523");
        assert_eq!(sig3(0.012345), "0.0123");
        assert_eq!(sig3(0.99997), "1.00");
        assert_eq!(sig3(99.97), "100");
        assert_eq!(sig3(-0.00326), "-0.00326");
        assert_eq!(sig3(0.0), "0");
        assert_eq!(int3(3431726.0), "3430000");
        assert_eq!(int3(11420.0), "11400");
        assert_eq!(int3(270.4), "270");
        assert_eq!(int3(52.3), "52");
        assert_eq!(ms(1211.2), "1211");
        assert_eq!(ms(12.11), "12.1");
        assert_eq!(ms(0.146), "0.146");
        assert_eq!(ms(0.0523), "0.052");
        assert_eq!(ms(-0.0001), "0", "below the microsecond: no -0.000");
        assert_eq!(signed(12.34), "+12.3");
        assert_eq!(signed(-0.52), "-0.520");
        assert_eq!(signed(0.0002), "0");
        assert_eq!(pct_change(10.0, 11.0), "+10.0%");
        assert_eq!(pct_change(0.0, 11.0), "-");
        assert_eq!(pct_change(10.0, 250.0), "25x");
        assert_eq!(
            pct_change(0.004, 95.0),
            "-",
            "a ratio of a near-zero base means nothing"
        );
        assert_eq!(pct_change(10.0, -250.0), "-");
        assert_eq!(pct_change(10.0, 100.0), "+900%");
        assert_eq!(human_ms(1234.0), "1.23 s");
        assert_eq!(human_ms(0.007), "0.007 ms");
    }
    #[test]
    fn rates_scale_their_unit() {
        assert_eq!(rate(9.412e6), "9.41 Mbit/s");
        assert_eq!(rate(139.85e9), "140 Gbit/s");
        assert_eq!(rate(999.7e6), "1.00 Gbit/s");
        assert_eq!(rate(512e3), "512 kbit/s");
        let u = RateUnit::fit_all([9.4e6, 23.3e9]);
        assert_eq!((u.name(), u.num(9.4e6)), ("Gbit/s", "0.00940".to_string()));
        assert_eq!(RateUnit::fit_all([]), RateUnit::Mbit);
        assert_eq!(duration_ns(999_970), "1.00ms");
        assert_eq!(duration_ns(49_987), "50.0us");
        assert_eq!(hms(3723.0), "1h02m03s");
    }
}
