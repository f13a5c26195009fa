//! Exports of the history's rows (`bloatlab history`): one
//! [`HistoryExporter`] per format, as [`super::Exporter`] is for one result:
//! the terminal table, CSV (through the report's one CSV writer,
//! [`super::csv`]) and the single-file HTML page.
use crate::history::{aggregate, history_table, time, By};
use anyhow::Result;
use bloatlab_results::history::RunRow;

/// A way to show a history.
pub trait HistoryExporter {
    /// The rows `rows` (oldest first), a row per run or per `by`; `what`
    /// says what they are (the database, the target, the range).
    fn render(&self, rows: &[RunRow], by: By, what: &str) -> Result<String>;
}

/// The history's formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryFormat {
    /// The terminal table (failures listed below it).
    Text,
    /// RFC 4180, numbers in base units.
    Csv,
    /// A single-file page: plots over time above the table.
    Html,
}

impl HistoryFormat {
    pub fn exporter(self) -> &'static dyn HistoryExporter {
        match self {
            HistoryFormat::Text => &Text,
            HistoryFormat::Csv => &Csv,
            HistoryFormat::Html => &Html,
        }
    }
}

pub struct Text;
pub struct Csv;
pub struct Html;

impl HistoryExporter for Text {
    fn render(&self, rows: &[RunRow], by: By, _what: &str) -> Result<String> {
        Ok(history_table(rows, by))
    }
}

impl HistoryExporter for Csv {
    fn render(&self, rows: &[RunRow], by: By, _what: &str) -> Result<String> {
        Ok(history_csv(rows, by))
    }
}

impl HistoryExporter for Html {
    fn render(&self, rows: &[RunRow], by: By, what: &str) -> Result<String> {
        crate::html::history_html(rows, by, what)
    }
}

/// CSV (RFC 4180), a row per run or per bucket; numbers in base units
/// (ms, bits/s), empty when absent.
pub(crate) fn history_csv(rows: &[RunRow], by: By) -> String {
    use super::csv::{csv_field as q, num as n, row};
    // ms to the nanosecond, bits/s to the bit, RPM and % to 1/1000
    let (ms, bps, num) = (|v: Option<f64>| n(v, 6), |v: Option<f64>| n(v, 0), |v: Option<f64>| n(v, 3));
    let mut out = String::new();
    if by == By::Run {
        out.push_str("time_utc,unix_ns,monitor_id,target,failure,complete,idle_ms,loaded_ms,added_ms,download_bps,upload_bps,rpm,loss_pct,grade\n");
        for r in rows {
            out.push_str(&row(&[
                time(r.started_unix_ns, by),
                r.started_unix_ns.to_string(),
                q(&r.monitor_id),
                q(&r.target),
                q(r.failure.as_deref().unwrap_or("")),
                (r.failure.is_none() && r.complete).to_string(),
                ms(r.idle_ms),
                ms(r.loaded_ms),
                ms(r.added_ms),
                bps(r.download_bps),
                bps(r.upload_bps),
                num(r.rpm),
                num(r.loss_pct),
                q(r.grade.as_deref().unwrap_or("")),
            ]));
        }
        return out;
    }
    out.push_str("time_utc,unix_ns,target,runs,failed,idle_ms,loaded_ms,added_ms,added_max_ms,download_bps,upload_bps,rpm,loss_max_pct,worst_grade\n");
    for b in aggregate(rows, by) {
        out.push_str(&row(&[
            time(b.start_unix_ns, by),
            b.start_unix_ns.to_string(),
            q(&b.target),
            b.runs.to_string(),
            b.failed.to_string(),
            ms(b.idle_ms),
            ms(b.loaded_ms),
            ms(b.added_ms),
            ms(b.added_max_ms),
            bps(b.download_bps),
            bps(b.upload_bps),
            num(b.rpm),
            num(b.loss_max_pct),
            q(b.worst_grade.as_deref().unwrap_or("")),
        ]));
    }
    out
}

