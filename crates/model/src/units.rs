//! One parser and one formatter for every unit bloatlab's command lines,
//! recipes and specs accept. Pure (std only, no I/O, no clock reads).
//!
//! Grammar shared by all parsers: optional surrounding whitespace, a
//! non-negative decimal number (`10`, `1.5`, `.5`, `1e3`), optional
//! whitespace, then a unit, matched case-insensitively. Errors are one line,
//! name the offending text, and list the accepted forms.
//!
//! | kind | units | bare number | conventions |
//! |---|---|---|---|
//! | duration | `ns`, `us`/`µs`, `ms`, `s`/`sec`/`secs`, `m`/`min`/`mins`, `h`, `d` | refused unless 0, everywhere ([`parse_duration_ns`]: `20` could be 20 ms or 20 s) | `m` is minutes |
//! | rate | `bit`/`b`, `kbit`/`k`, `mbit`/`m`, `gbit`/`g`, `tbit`/`t`, `kibit`, `mibit`, `gibit`, `tibit`, optional `/s` | bits per second | decimal SI prefixes as tc; `bps`, `kbps`, `mbps`, ... and `kb`, `mb`, `gb` are refused as ambiguous (tc reads `*bps` as **bytes** per second) |
//! | byte size | `b`, `k`/`kb`/`kib`, `m`/`mb`/`mib`, `g`/`gb`/`gib` | bytes | [`parse_bytes`]: tc's convention, `k` = `kb` = 1024; `kib`/`mib`/`gib` are always binary |
//! | probability | `%` or none | a fraction in 0..=1 | `1%` = `0.01` |
//!
//! Ranges beyond "representable and not negative" are the callers' policy
//! (the lab allows rates from 1kbit to 400gbit, the emulator from 1 bit/s, ...).
use std::time::Duration;

// ------------------------------------------------------------------ numbers

/// Split `"1.5 ms"` into `("1.5", "ms")`: an optional sign, digits and dots,
/// and an exponent (`e3`, `E-2`) only when digits follow it. The unit is
/// trimmed; neither part is lower-cased.
fn split_number(t: &str) -> (&str, &str) {
    let b = t.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    if i > 0 && i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    (&t[..i], t[i..].trim())
}

/// A quantity: (number as written, value, lower-cased unit).
struct Quantity<'a> {
    num: &'a str,
    value: f64,
    unit: String,
}

/// Parse `<number><unit>`; `what` names the kind ("duration", "rate", ...) in errors.
fn quantity<'a>(s: &'a str, what: &str, forms: &str) -> Result<Quantity<'a>, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("empty {what}; {forms}"));
    }
    let (num, unit) = split_number(t);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a {what}; {forms}"))?;
    if !value.is_finite() {
        return Err(format!("`{s}` is not a {what}; {forms}"));
    }
    if value < 0.0 {
        return Err(format!("{what} `{s}` is negative; {forms}"));
    }
    Ok(Quantity { num, value, unit: unit.to_lowercase() })
}

/// `value * mult` rounded to a u64, or an error when it does not fit.
fn scaled(s: &str, what: &str, value: f64, mult: f64, limit: &str) -> Result<u64, String> {
    let v = (value * mult).round();
    if !v.is_finite() || v >= u64::MAX as f64 {
        return Err(format!("{what} `{s}` is too large (at most {limit})"));
    }
    Ok(v as u64)
}

/// `v / div` written exactly: integer part, then the fractional digits
/// without trailing zeros (`div` must be a power of ten).
fn exact_decimal(v: u64, div: u64) -> String {
    let (int, frac) = (v / div, v % div);
    if frac == 0 {
        return int.to_string();
    }
    let width = div.ilog10() as usize;
    let f = format!("{frac:0width$}");
    format!("{int}.{}", f.trim_end_matches('0'))
}

// ---------------------------------------------------------------- durations

/// Accepted duration spellings, for error messages and help.
pub const DURATION_FORMS: &str =
    "accepted forms: 20ms, 1.5s, 500us, 250ns, 2m (minutes), 1h, 7d; a unit is required (0 alone is allowed)";

fn duration_unit_ns(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1.0,
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" | "secs" => 1e9,
        "m" | "min" | "mins" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        _ => return None,
    })
}

/// Parse a duration to nanoseconds: `50us`, `1.5ms`, `10s`, `2m` (minutes),
/// `1h`, `7d`, `250ns`. Case-insensitive. One rule everywhere: a bare
/// number other than 0 is refused (`20` could mean 20 ms or 20 s; a test's
/// length and a link's delay alike).
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let q = quantity(s, "duration", DURATION_FORMS)?;
    let mult = match q.unit.as_str() {
        "" if q.value == 0.0 => 1e9,
        "" => return Err(format!("duration `{s}` needs a unit (`{n}s`? `{n}ms`?); {DURATION_FORMS}", n = q.num)),
        u => duration_unit_ns(u).ok_or_else(|| format!("duration `{s}`: unknown unit `{u}`; {DURATION_FORMS}"))?,
    };
    scaled(s, "duration", q.value, mult, "584 years")
}

/// [`parse_duration_ns`] as a [`Duration`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_duration_ns(s).map(Duration::from_nanos)
}

/// Format nanoseconds compactly and exactly, in the largest unit not above
/// the value: `50us`, `1.5ms`, `15s`, `90s`, `2m` (whole minutes only),
/// `250ns`, `0s`. [`parse_duration_ns`] reads every output back to the same value.
pub fn fmt_duration_ns(ns: u64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    if ns.is_multiple_of(86_400_000_000_000) {
        return format!("{}d", ns / 86_400_000_000_000);
    }
    if ns.is_multiple_of(60_000_000_000) {
        return format!("{}m", ns / 60_000_000_000);
    }
    let (div, unit) = if ns >= 1_000_000_000 {
        (1_000_000_000, "s")
    } else if ns >= 1_000_000 {
        (1_000_000, "ms")
    } else if ns >= 1_000 {
        (1_000, "us")
    } else {
        (1, "ns")
    };
    format!("{}{unit}", exact_decimal(ns, div))
}

/// [`fmt_duration_ns`] of a [`Duration`] (saturating at u64 nanoseconds).
pub fn fmt_duration(d: Duration) -> String {
    fmt_duration_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

// -------------------------------------------------------------------- rates

/// Accepted rate spellings, for error messages and help.
pub const RATE_FORMS: &str = "accepted forms: 10mbit, 1.5mbit, 100kbit, 1gbit, 500000bit or a bare number \
     (bits per second, decimal prefixes as in tc; also 10M, 100k, 1G, 10mbit/s, binary 1mibit)";

/// Parse a rate in bits per second, tc style: `10mbit`, `1.5Mbit`, `100kbit`,
/// `1gbit`, `1tbit`, `10M`, `2.5G`, `10mbit/s`, `500000bit`, bare `500000`
/// (bit/s). Prefixes are decimal (k = 1000) as in tc; `kibit`, `mibit`,
/// `gibit`, `tibit` are binary. `bps`, `kbps`, `mbps`, ... are refused because
/// tc reads them as *bytes* per second while people often mean bits; `kb`,
/// `mb`, `gb` likewise. The result is rounded to whole bit/s; 0 is allowed
/// (callers set their own minimum).
pub fn parse_rate_bps(s: &str) -> Result<u64, String> {
    let q = quantity(s, "rate", RATE_FORMS)?;
    let unit = q.unit.strip_suffix("/s").unwrap_or(&q.unit).trim_end();
    let mult = match unit {
        "" | "b" | "bit" => 1.0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        "t" | "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "tibit" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        u => {
            if let Some(p) = u.strip_suffix("bps") {
                if matches!(p, "" | "k" | "m" | "g" | "t" | "ki" | "mi" | "gi" | "ti") {
                    return Err(format!(
                        "rate `{s}`: `{u}` is ambiguous (tc reads it as bytes per second); \
                         write bits, e.g. `{}{p}bit`; {RATE_FORMS}",
                        q.num
                    ));
                }
            }
            if let Some(p) = u.strip_suffix('b') {
                if matches!(p, "k" | "m" | "g" | "t") {
                    return Err(format!(
                        "rate `{s}`: `{u}` is ambiguous (bits or bytes?); write bits, e.g. `{}{p}bit`; {RATE_FORMS}",
                        q.num
                    ));
                }
            }
            return Err(format!("rate `{s}`: unknown unit `{u}`; {RATE_FORMS}"));
        }
    };
    scaled(s, "rate", q.value, mult, "18 exabit/s")
}

const RATE_UNITS: [(u64, &str); 4] = [
    (1_000_000_000_000, "tbit"),
    (1_000_000_000, "gbit"),
    (1_000_000, "mbit"),
    (1_000, "kbit"),
];

/// Human-and-tc spelling of a rate: the largest unit not above the value,
/// with exact decimals: `10mbit`, `1.5mbit`, `100kbit`, `1gbit`, `999bit`.
/// [`parse_rate_bps`] reads every output back to the same value.
pub fn fmt_rate(bps: u64) -> String {
    for (m, u) in RATE_UNITS {
        if bps >= m {
            return format!("{}{u}", exact_decimal(bps, m));
        }
    }
    format!("{bps}bit")
}

/// Integer tc spelling: a whole number of the largest unit that divides the
/// value (`10mbit`, `1500kbit`, `2gbit`); values no unit divides fall back
/// to [`fmt_rate`] (`1.234567mbit`).
pub fn fmt_rate_tc(bps: u64) -> String {
    for (m, u) in RATE_UNITS {
        if bps >= m && bps.is_multiple_of(m) {
            return format!("{}{u}", bps / m);
        }
    }
    fmt_rate(bps)
}

// --------------------------------------------------------------- byte sizes

/// Accepted byte-size spellings for [`parse_bytes`] (tc's convention).
pub const BYTES_FORMS: &str = "accepted forms: 65536, 1500b, 64k or 64kb (= 65536, as in tc), \
     2m or 2mb (= 2 MiB), 1g, 64kib";

fn bytes(s: &str, k: f64, forms: &str) -> Result<u64, String> {
    let q = quantity(s, "byte size", forms)?;
    let mult = match q.unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => k,
        "m" | "mb" => k * k,
        "g" | "gb" => k * k * k,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        u => return Err(format!("size `{s}`: unknown unit `{u}`; {forms}")),
    };
    scaled(s, "size", q.value, mult, "16 EiB")
}

/// Parse a byte size as tc does: `65536`, `1500b`, `64k` = `64kb` = 65536,
/// `2m` = `2mb` = 2 MiB, `1g`, and the explicit `kib`/`mib`/`gib`. Rounded to
/// whole bytes; 0 is allowed (callers set their own minimum).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    bytes(s, 1024.0, BYTES_FORMS)
}

/// A byte size as [`parse_bytes`] reads it back, in the largest of tc's
/// binary units that divides it exactly: `16m`, `64k`, `1g`, `1500`.
pub fn fmt_bytes(n: u64) -> String {
    for (m, u) in [(1u64 << 30, "g"), (1 << 20, "m"), (1 << 10, "k")] {
        if n >= m && n.is_multiple_of(m) {
            return format!("{}{u}", n / m);
        }
    }
    n.to_string()
}

// ------------------------------------------------------------ probabilities

/// Accepted probability spellings.
pub const PROBABILITY_FORMS: &str = "accepted forms: 1%, 0.5%, 0.01 (a fraction)";

/// Parse a probability: `1%`, `0.5 %`, or a fraction `0.01`; must lie in 0..=1.
pub fn parse_probability(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not a probability; {PROBABILITY_FORMS}"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("probability `{s}` must be between 0% and 100%"));
    }
    Ok(v)
}

// -------------------------------------------------------------------- dates

/// Howard Hinnant's days-to-civil: days since 1970-01-01 to (year, month 1-12, day 1-31),
/// proleptic Gregorian.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Howard Hinnant's civil-to-days: (year, month 1-12, day 1-31) to days
/// since 1970-01-01, proleptic Gregorian.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A UTC date or time as Unix ns: `2026-11-20`, `2026-11-20T08:00Z`,
/// `2026-11-20T08:00:30Z` (the `Z` may be left out; it is UTC either way).
pub fn parse_utc_time(s: &str) -> Result<u64, String> {
    let forms = "a UTC date or time: 2026-11-20, 2026-11-20T08:00Z or 2026-11-20T08:00:30Z";
    let bad = || format!("`{s}` is not {forms}");
    let t = s.trim().trim_end_matches(['Z', 'z']);
    let (date, time) = match t.split_once(['T', 't', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (t, None),
    };
    let num = |x: &str, lo: u32, hi: u32| -> Result<u32, String> {
        let v: u32 = x.parse().map_err(|_| bad())?;
        if x.is_empty() || v < lo || v > hi {
            return Err(bad());
        }
        Ok(v)
    };
    let dp: Vec<&str> = date.split('-').collect();
    if dp.len() != 3 || dp[0].len() != 4 {
        return Err(bad());
    }
    let (y, m, d) = (num(dp[0], 1970, 9999)? as i64, num(dp[1], 1, 12)?, num(dp[2], 1, 31)?);
    if civil_from_days(days_from_civil(y, m, d)) != (y, m, d) {
        return Err(format!("`{s}`: {y}-{m:02} has no day {d}"));
    }
    let mut secs = days_from_civil(y, m, d) * 86_400;
    if let Some(tm) = time {
        let tp: Vec<&str> = tm.split(':').collect();
        if !(2..=3).contains(&tp.len()) {
            return Err(bad());
        }
        secs += num(tp[0], 0, 23)? as i64 * 3600 + num(tp[1], 0, 59)? as i64 * 60;
        if tp.len() == 3 {
            secs += num(tp[2], 0, 59)? as i64;
        }
    }
    Ok(secs as u64 * 1_000_000_000)
}

/// A UTC calendar time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nanos: u32,
}

impl UtcTime {
    /// From seconds since the Unix epoch (negative = before 1970).
    pub fn from_unix_secs(secs: i64) -> UtcTime {
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400) as u32;
        UtcTime { year, month, day, hour: sod / 3600, minute: (sod % 3600) / 60, second: sod % 60, nanos: 0 }
    }

    /// From nanoseconds since the Unix epoch.
    pub fn from_unix_ns(unix_ns: u64) -> UtcTime {
        let mut t = UtcTime::from_unix_secs((unix_ns / 1_000_000_000) as i64);
        t.nanos = (unix_ns % 1_000_000_000) as u32;
        t
    }

    /// `2026-11-22T05:58:16Z`
    pub fn rfc3339_secs(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// `2026-11-22T05:58:16.250Z` (milliseconds truncated, not rounded)
    pub fn rfc3339_millis(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            self.year,
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.second,
            self.nanos / 1_000_000
        )
    }

    /// `20261122T055816Z` (for file and folder names)
    pub fn compact(&self) -> String {
        format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// RFC 3339 UTC rendering of Unix nanoseconds with milliseconds:
/// `2026-11-22T05:58:16.250Z`.
pub fn rfc3339(unix_ns: u64) -> String {
    UtcTime::from_unix_ns(unix_ns).rfc3339_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn numbers_split() {
        assert_eq!(split_number("1.5ms"), ("1.5", "ms"));
        assert_eq!(split_number("10 s"), ("10", "s"));
        assert_eq!(split_number("1e3us"), ("1e3", "us"));
        assert_eq!(split_number("2E-1s"), ("2E-1", "s"));
        assert_eq!(split_number("-5ms"), ("-5", "ms"));
        assert_eq!(split_number("5e"), ("5", "e"));
        assert_eq!(split_number("fast"), ("", "fast"));
        assert_eq!(split_number(".5"), (".5", ""));
        assert_eq!(exact_decimal(1_500_000, 1_000_000), "1.5");
        assert_eq!(exact_decimal(1_000_001, 1_000_000), "1.000001");
        assert_eq!(exact_decimal(7, 1), "7");
    }

    #[test]
    fn durations_every_unit() {
        for (s, ns) in [
            ("20ns", 20),
            ("100us", 100_000),
            ("50us", 50_000),
            ("50µs", 50_000),
            ("50μs", 50_000),
            ("500us", 500_000),
            ("500ms", 500_000_000),
            ("1.5ms", 1_500_000),
            ("20ms", 20_000_000),
            ("5s", 5 * S),
            ("1.5s", 1_500_000_000),
            ("2sec", 2 * S),
            ("3secs", 3 * S),
            ("2m", 120 * S),
            ("2min", 120 * S),
            ("3mins", 180 * S),
            ("1h", 3600 * S),
            ("0.5h", 1800 * S),
            ("7d", 7 * 86400 * S),
            // a bare 0 needs no unit
            ("0", 0),
            ("0.0", 0),
            // case, whitespace, exponents, leading dot
            ("5S", 5 * S),
            ("500MS", 500_000_000),
            (" 5 s ", 5 * S),
            ("1e3us", 1_000_000),
            ("2e-3s", 2_000_000),
            (".5s", S / 2),
            ("+5s", 5 * S),
            // rounding to whole ns: 0.1 s is not exact in binary
            ("0.1s", 100_000_000),
            ("0.3s", 300_000_000),
            ("1.0000000004s", S),
            ("1.0000000006s", S + 1),
        ] {
            assert_eq!(parse_duration_ns(s), Ok(ns), "{s}");
        }
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
    }

    #[test]
    fn durations_refused_with_reasons() {
        let e = |s: &str| parse_duration_ns(s).unwrap_err();
        assert!(e("fast").contains("not a duration") && e("fast").contains("accepted forms"), "{}", e("fast"));
        assert!(e("").contains("empty"));
        assert!(e("5 parsecs").contains("unknown unit `parsecs`"), "{}", e("5 parsecs"));
        assert!(e("10 parsecs").contains("accepted forms"));
        assert!(e("-1s").contains("negative"));
        assert!(e("-5ms").contains("negative"));
        assert!(e("1e30s").contains("too large"));
        assert!(e("600years").contains("unknown unit"));
        assert!(e("5w").contains("unknown unit"));
        assert!(e(".s").contains("not a duration"));
        assert!(e("inf").contains("not a duration"));
        assert!(e("nan").contains("not a duration"));
        assert!(e("1.2.3s").contains("not a duration"));
        assert!(e("5ms5").contains("unknown unit"));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn a_bare_number_is_refused_everywhere_but_zero() {
        for bare in ["20", "1.5", "10", "0.5"] {
            let e = parse_duration_ns(bare).unwrap_err();
            assert!(e.contains("needs a unit") && e.contains(&format!("`{bare}s`? `{bare}ms`?")), "{e}");
        }
        assert!(parse_duration("10").is_err());
        assert!(parse_duration_ns("20 parsecs").is_err());
        assert!(parse_duration_ns("-5ms").unwrap_err().contains("negative"));
    }

    #[test]
    fn durations_formatted_exactly() {
        for (ns, s) in [
            (0, "0s"),
            (1, "1ns"),
            (250, "250ns"),
            (1_000, "1us"),
            (50_000, "50us"),
            (1_500, "1.5us"),
            (1_500_000, "1.5ms"),
            (20_000_000, "20ms"),
            (1_500_000_000, "1.5s"),
            (15 * S, "15s"),
            (90 * S, "90s"),
            (60 * S, "1m"),
            (120 * S, "2m"),
            (7200 * S, "120m"),
            (S + 1, "1.000000001s"),
            (1_000_001, "1.000001ms"),
        ] {
            assert_eq!(fmt_duration_ns(ns), s, "{ns}");
            assert_eq!(parse_duration_ns(s), Ok(ns), "round trip {s}");
        }
        assert_eq!(fmt_duration(Duration::from_millis(100)), "100ms");
    }

    #[test]
    fn rates_every_unit() {
        for (s, bps) in [
            ("10mbit", 10_000_000),
            ("1.5Mbit", 1_500_000),
            ("1.5mbit", 1_500_000),
            ("100kbit", 100_000),
            ("500kbit", 500_000),
            ("1500kbit", 1_500_000),
            ("1gbit", 1_000_000_000),
            ("1.5gbit", 1_500_000_000),
            ("2g", 2_000_000_000),
            ("1G", 1_000_000_000),
            ("2.5G", 2_500_000_000),
            ("10M", 10_000_000),
            ("100k", 100_000),
            ("1tbit", 1_000_000_000_000),
            ("1t", 1_000_000_000_000),
            ("500000bit", 500_000),
            ("500000b", 500_000),
            ("500000", 500_000),
            ("64000", 64_000),
            ("9600", 9_600),
            ("10mbit/s", 10_000_000),
            ("10Mbit/s", 10_000_000),
            ("100Mbit/s", 100_000_000),
            ("10 mbit", 10_000_000),
            ("1kibit", 1024),
            ("1mibit", 1_048_576),
            ("1gibit", 1_073_741_824),
            ("1tibit", 1_099_511_627_776),
            ("1e6", 1_000_000),
            ("0mbit", 0),
            // rounded to whole bit/s
            ("1000.6bit", 1001),
            ("1000.4", 1000),
        ] {
            assert_eq!(parse_rate_bps(s), Ok(bps), "{s}");
        }
    }

    #[test]
    fn rates_refused_with_reasons() {
        let e = |s: &str| parse_rate_bps(s).unwrap_err();
        for amb in ["10mbps", "10Mbps", "10MBps", "10bps", "10kbps", "1gbps", "1tbps", "10mibps", "10mbps/s"] {
            let m = e(amb);
            assert!(m.contains("ambiguous") && m.contains("bytes per second") && m.contains("bit`"), "{amb}: {m}");
        }
        assert!(e("10mbps").contains("`10mbit`"), "{}", e("10mbps"));
        for amb in ["10mb", "10kb", "1gb", "10MB"] {
            assert!(e(amb).contains("ambiguous"), "{amb}: {}", e(amb));
        }
        assert!(e("fast").contains("not a rate"));
        assert!(e("fast").contains("accepted forms"));
        assert!(e("10furlong").contains("unknown unit"));
        assert!(e("10mbyte").contains("unknown unit"));
        assert!(e("-1mbit").contains("negative"));
        assert!(e("1e30gbit").contains("too large"));
        assert!(e("").contains("empty"));
    }

    #[test]
    fn rates_formatted() {
        for (bps, human, tc) in [
            (10_000_000, "10mbit", "10mbit"),
            (1_500_000, "1.5mbit", "1500kbit"),
            (1_000_000_000, "1gbit", "1gbit"),
            (1_500_000_000, "1.5gbit", "1500mbit"),
            (100_000, "100kbit", "100kbit"),
            (1_234_567, "1.234567mbit", "1.234567mbit"),
            (1_500, "1.5kbit", "1.5kbit"),
            (999, "999bit", "999bit"),
            (0, "0bit", "0bit"),
            (1_000_000_000_000, "1tbit", "1tbit"),
        ] {
            assert_eq!(fmt_rate(bps), human, "{bps}");
            assert_eq!(fmt_rate_tc(bps), tc, "{bps}");
            assert_eq!(parse_rate_bps(human), Ok(bps));
            assert_eq!(parse_rate_bps(tc), Ok(bps));
        }
    }

    #[test]
    fn byte_sizes_tc_convention() {
        for (s, b) in [
            ("65536", 65536),
            ("64k", 65536),
            ("64K", 65536),
            ("64kb", 65536),
            ("64KB", 65536),
            ("64kib", 65536),
            ("2m", 2 * 1024 * 1024),
            ("2mb", 2 * 1024 * 1024),
            ("4M", 4 << 20),
            ("1g", 1 << 30),
            ("1gib", 1 << 30),
            ("1500b", 1500),
            ("1.5k", 1536),
            ("0", 0),
            ("64", 64),
        ] {
            assert_eq!(parse_bytes(s), Ok(b), "{s}");
        }
        assert!(parse_bytes("lots").unwrap_err().contains("not a byte size"));
        assert!(parse_bytes("lots").unwrap_err().contains("accepted forms"));
        assert!(parse_bytes("10q").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("-1k").unwrap_err().contains("negative"));
        assert!(parse_bytes("1e30g").unwrap_err().contains("too large"));
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("1%"), Ok(0.01));
        assert_eq!(parse_probability("0.5%"), Ok(0.005));
        assert_eq!(parse_probability("25 %"), Ok(0.25));
        assert_eq!(parse_probability("100%"), Ok(1.0));
        assert_eq!(parse_probability("0%"), Ok(0.0));
        assert_eq!(parse_probability("0.01"), Ok(0.01));
        assert_eq!(parse_probability("0.25"), Ok(0.25));
        assert_eq!(parse_probability("0.5"), Ok(0.5));
        assert_eq!(parse_probability("1"), Ok(1.0));
        assert!(parse_probability("150%").unwrap_err().contains("between 0% and 100%"));
        assert!(parse_probability("1.5").is_err());
        assert!(parse_probability("-1%").is_err());
        assert!(parse_probability("nan").is_err());
        let e = parse_probability("lots").unwrap_err();
        assert!(e.contains("not a probability") && e.contains("1%"), "{e}");
    }

    #[test]
    fn calendar() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20454), (2026, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11016), (2000, 2, 29)); // 2000 is a leap year
        assert_eq!(civil_from_days(11017), (2000, 3, 1));
        for d in [-1, 0, 11016, 11017, 20454, 20777] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(parse_utc_time("2026-11-20").unwrap(), 1_795_132_800 * S);
        assert_eq!(parse_utc_time("2026-11-20T10:00Z").unwrap(), 1_795_168_800 * S);
        assert_eq!(parse_utc_time("2026-11-20T10:00:30").unwrap(), 1_795_168_830 * S);
        assert!(parse_utc_time("2026-02-30").unwrap_err().contains("no day 30"));
        assert!(parse_utc_time("20-11-2026").unwrap_err().contains("UTC date"));
        assert_eq!(civil_from_days(47541), (2100, 3, 1)); // 2100 is not: Feb 28 is the day before
        assert_eq!(civil_from_days(47540), (2100, 2, 28));
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // 2026-11-22T05:58:16.250Z = 1795327096.25 s
        assert_eq!(rfc3339(1_795_327_096_250_000_000), "2026-11-22T05:58:16.250Z");
        // leap day 2024-02-29T12:00:00Z = 1709208000
        assert_eq!(rfc3339(1_709_208_000_000_000_000), "2024-02-29T12:00:00.000Z");
        // milliseconds are truncated
        assert_eq!(rfc3339(1_999_999_999), "1970-01-01T00:00:01.999Z");
        let t = UtcTime::from_unix_secs(1_769_062_502); // 2026-01-22T06:15:02Z
        assert_eq!(t.compact(), "20260122T061502Z");
        assert_eq!(t.rfc3339_secs(), "2026-01-22T06:15:02Z");
        assert_eq!(UtcTime::from_unix_secs(-1).rfc3339_secs(), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn byte_sizes_are_spelled_as_they_are_read() {
        for (n, s) in [(16u64 << 20, "16m"), (65536, "64k"), (1 << 30, "1g"), (1500, "1500"), (0, "0"), (1536 * 1024, "1536k")] {
            assert_eq!(fmt_bytes(n), s);
            assert_eq!(parse_bytes(s).unwrap(), n);
        }
    }
}
