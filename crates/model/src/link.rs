//! What a link does to packets besides rate and queue: random loss and
//! delay variation. One definition for the lab's `--loss`/`--jitter`, the
//! emulator and the kernel's netem.

use crate::units::{parse_duration_ns, parse_probability};
use serde::{Deserialize, Serialize};

fn fmt_pct(p: f64) -> String {
    format!("{}%", (p * 100.0 * 1e6).round() / 1e6)
}

/// Random loss, applied to packets as they leave the bottleneck ("lost on the wire").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LossSpec {
    #[default]
    None,
    /// Independent loss with probability `p`.
    Bernoulli { p: f64 },
    /// Gilbert-Elliott: Good->Bad with probability `p`, Bad->Good with `r`
    /// (per packet); loss probability `loss_good` in Good, `loss_bad` in Bad.
    GilbertElliott { p: f64, r: f64, loss_good: f64, loss_bad: f64 },
}

impl std::str::FromStr for LossSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<LossSpec, String> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("ge:").or_else(|| lower.strip_prefix("gilbert:")).or_else(|| lower.strip_prefix("gemodel:")) {
            let (mut p, mut r, mut good, mut bad) = (None, None, 0.0, 1.0);
            for part in rest.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                let (k, v) = part.split_once('=').ok_or_else(|| format!("Gilbert-Elliott parameter \"{part}\" needs key=value (p, r, good, bad)"))?;
                let v = parse_probability(v)?;
                match k.trim() {
                    "p" => p = Some(v),
                    "r" => r = Some(v),
                    "good" | "loss_good" | "k" => good = v,
                    "bad" | "loss_bad" | "h" => bad = v,
                    other => return Err(format!("unknown Gilbert-Elliott parameter \"{other}\" (p, r, good, bad)")),
                }
            }
            let p = p.ok_or_else(|| "Gilbert-Elliott loss needs p= (Good->Bad probability)".to_string())?;
            let r = r.ok_or_else(|| "Gilbert-Elliott loss needs r= (Bad->Good probability)".to_string())?;
            if r == 0.0 && p > 0.0 {
                return Err("Gilbert-Elliott r must be > 0 (otherwise the link never leaves the Bad state)".into());
            }
            return Ok(LossSpec::GilbertElliott { p, r, loss_good: good, loss_bad: bad });
        }
        let v = lower.strip_prefix("bernoulli:").unwrap_or(&lower);
        let p = parse_probability(v).map_err(|e| format!("{e} (or ge:p=1%,r=25%,good=0%,bad=100%)"))?;
        Ok(if p == 0.0 { LossSpec::None } else { LossSpec::Bernoulli { p } })
    }
}

impl LossSpec {
    /// Long-run loss rate.
    pub fn mean_loss(&self) -> f64 {
        match self {
            LossSpec::None => 0.0,
            LossSpec::Bernoulli { p } => *p,
            LossSpec::GilbertElliott { p, r, loss_good, loss_bad } => {
                if p + r == 0.0 {
                    *loss_good
                } else {
                    let pi_bad = p / (p + r);
                    (1.0 - pi_bad) * loss_good + pi_bad * loss_bad
                }
            }
        }
    }
    pub fn describe(&self) -> String {
        match self {
            LossSpec::None => "none".into(),
            LossSpec::Bernoulli { p } => fmt_pct(*p),
            LossSpec::GilbertElliott { p, r, loss_good, loss_bad } => format!(
                "ge:p={},r={},good={},bad={}",
                fmt_pct(*p),
                fmt_pct(*r),
                fmt_pct(*loss_good),
                fmt_pct(*loss_bad)
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum JitterDist {
    /// Uniform in [-amount, +amount] (netem's default).
    #[default]
    Uniform,
    /// Normal with standard deviation `amount`.
    Normal,
}

/// Per-packet delay variation added to the propagation delay (the total never goes below 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JitterSpec {
    pub amount_ns: u64,
    pub dist: JitterDist,
    /// Release each packet at its own time even if that overtakes earlier
    /// packets; false keeps packet order (a packet never leaves before its predecessor).
    pub reorder: bool,
}

impl JitterSpec {
    /// Parse `5ms`, `uniform:5ms` or `normal:5ms`.
    pub fn parse(s: &str, reorder: bool) -> Result<JitterSpec, String> {
        let t = s.trim().to_ascii_lowercase();
        let (dist, amount) = if let Some(a) = t.strip_prefix("normal:") {
            (JitterDist::Normal, a)
        } else if let Some(a) = t.strip_prefix("uniform:") {
            (JitterDist::Uniform, a)
        } else {
            (JitterDist::Uniform, t.as_str())
        };
        Ok(JitterSpec { amount_ns: parse_duration_ns(amount)?, dist, reorder })
    }
}


impl JitterSpec {
    /// The spelling [`JitterSpec::parse`] reads back: "5ms" or "normal:5ms".
    pub fn spec(&self) -> String {
        let a = crate::units::fmt_duration_ns(self.amount_ns);
        match self.dist {
            JitterDist::Uniform => a,
            JitterDist::Normal => format!("normal:{a}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_and_jitter_parse_and_spell_back() {
        assert_eq!("1%".parse::<LossSpec>().unwrap(), LossSpec::Bernoulli { p: 0.01 });
        assert_eq!("0%".parse::<LossSpec>().unwrap(), LossSpec::None);
        let ge: LossSpec = "ge:p=1%,r=25%".parse().unwrap();
        assert_eq!(ge, LossSpec::GilbertElliott { p: 0.01, r: 0.25, loss_good: 0.0, loss_bad: 1.0 });
        assert_eq!(ge.describe().parse::<LossSpec>().unwrap(), ge);
        assert!((ge.mean_loss() - 0.01 / 0.26).abs() < 1e-12);
        assert!("ge:p=1%".parse::<LossSpec>().unwrap_err().contains("r="));
        assert!("lots".parse::<LossSpec>().is_err());
        let j = JitterSpec::parse("normal:5ms", false).unwrap();
        assert_eq!((j.dist, j.amount_ns), (JitterDist::Normal, 5_000_000));
        assert_eq!(JitterSpec::parse(&j.spec(), false).unwrap(), j);
        assert_eq!(JitterSpec::parse("2ms", false).unwrap().spec(), "2ms");
        assert!(JitterSpec::parse("5", false).is_err(), "a unit is required");
    }
}
