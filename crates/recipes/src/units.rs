//! Time stamps for recipe folders. Numbers are formatted by
//! `bloatlab_report::fmt` (the one formatter), parsed by `bloatlab_model::units`.

pub use bloatlab_model::units::fmt_duration_ns;

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
    use bloatlab_model::units::civil_from_days;

    #[test]
    fn civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20454), (2026, 1, 1));
    }
}
