//! Load scenarios `NuMd` (N uploads, M downloads): one grammar and one limit
//! for `bloatlab test`, the lab, recipes, sweeps and the wire protocol.
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Most load flows per direction in one scenario.
pub const MAX_FLOWS_PER_DIRECTION: u32 = 32;

/// One load scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scenario {
    pub uploads: u32,
    pub downloads: u32,
}

impl Scenario {
    pub fn new(uploads: u32, downloads: u32) -> Scenario {
        Scenario { uploads, downloads }
    }

    /// Parse one scenario name `NuMd` (case-insensitive, surrounding blanks
    /// allowed): 0..=32 flows each way, not both 0.
    pub fn parse(s: &str) -> Result<Scenario, String> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || {
            format!(
                "\"{s}\" is not a scenario: expected NuMd (N uploads, M downloads, 0..{MAX_FLOWS_PER_DIRECTION} each), e.g. 1u0d or 4u4d"
            )
        };
        let (u, rest) = t.split_once('u').ok_or_else(bad)?;
        let d = rest.strip_suffix('d').ok_or_else(bad)?;
        if u.is_empty() || d.is_empty() || !u.bytes().chain(d.bytes()).all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let (u, d): (u32, u32) = (u.parse().map_err(|_| bad())?, d.parse().map_err(|_| bad())?);
        if u > MAX_FLOWS_PER_DIRECTION || d > MAX_FLOWS_PER_DIRECTION {
            return Err(format!("\"{s}\": at most {MAX_FLOWS_PER_DIRECTION} flows per direction"));
        }
        if u == 0 && d == 0 {
            return Err(format!("\"{s}\": a scenario needs at least one flow (the idle baseline is measured before the scenarios)"));
        }
        Ok(Scenario { uploads: u, downloads: d })
    }

    /// Parse a list separated by `,` or `+` (`1u0d,0u1d`, `1u0d+0u1d`); at least one.
    pub fn parse_list(s: &str) -> Result<Vec<Scenario>, String> {
        let v = s
            .split([',', '+'])
            .filter(|x| !x.trim().is_empty())
            .map(Scenario::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if v.is_empty() {
            return Err("no scenarios given (e.g. 1u0d,0u1d,4u4d)".into());
        }
        Ok(v)
    }

    /// `NuMd`.
    pub fn name(&self) -> String {
        format!("{}u{}d", self.uploads, self.downloads)
    }

    pub fn flows(&self) -> u32 {
        self.uploads + self.downloads
    }
}

/// `1u0d,0u1d`.
pub fn list_name(v: &[Scenario]) -> String {
    v.iter().map(Scenario::name).collect::<Vec<_>>().join(",")
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}u{}d", self.uploads, self.downloads)
    }
}

impl std::str::FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Scenario, String> {
        Scenario::parse(s)
    }
}

impl Serialize for Scenario {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Scenario {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scenario, D::Error> {
        let s = String::deserialize(d)?;
        Scenario::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Scenario::parse("4u2d").unwrap(), Scenario::new(4, 2));
        assert_eq!(Scenario::parse(" 0U32D ").unwrap(), Scenario::new(0, 32));
        assert_eq!(Scenario::parse("1u0d").unwrap().name(), "1u0d");
        assert_eq!(Scenario::parse_list("1u0d, 4u4d").unwrap(), vec![Scenario::new(1, 0), Scenario::new(4, 4)]);
        assert_eq!(Scenario::parse_list("1u0d+0U1D").unwrap(), vec![Scenario::new(1, 0), Scenario::new(0, 1)]);
        assert_eq!(list_name(&Scenario::parse_list("1u0d+0u1d").unwrap()), "1u0d,0u1d");
        for (bad, why) in [
            ("0u0d", "at least one flow"),
            ("33u0d", "at most 32"),
            ("0u64d", "at most 32"),
            ("1up", "not a scenario"),
            ("u1d", "not a scenario"),
            ("1u d", "not a scenario"),
            ("+1u0d", "not a scenario"),
            ("1u-1d", "not a scenario"),
            ("", "not a scenario"),
        ] {
            let e = Scenario::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(Scenario::parse_list(" , ").unwrap_err().contains("no scenarios"));
        assert!(Scenario::parse_list("1u0d,40u0d").is_err());
        let j = serde_json::to_string(&Scenario::new(2, 3)).unwrap();
        assert_eq!(j, "\"2u3d\"");
        assert_eq!(serde_json::from_str::<Scenario>(&j).unwrap(), Scenario::new(2, 3));
        assert!(serde_json::from_str::<Scenario>("\"99u0d\"").is_err());
    }
}

/// `--scenarios auto` (or `auto-up`, `auto-down`): instead of a fixed list,
/// per direction, scenarios of 1, 2, 4, ... flows until doubling the flows
/// adds less than `growth` goodput, or `max_flows` ran.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ramp {
    pub up: bool,
    pub down: bool,
    /// Least relative goodput gain from doubling the flows that counts as
    /// still growing (0.05 = 5%).
    pub growth: f64,
    pub max_flows: u32,
}

/// A ramp stops once doubling the flows gains less than this.
pub const RAMP_GROWTH: f64 = 0.05;

impl Ramp {
    /// `auto` (uploads, then downloads), `auto-up`, `auto-down`; None for
    /// anything else (a scenario list).
    pub fn parse(s: &str) -> Option<Ramp> {
        let (up, down) = match s.trim().to_ascii_lowercase().as_str() {
            "auto" => (true, true),
            "auto-up" => (true, false),
            "auto-down" => (false, true),
            _ => return None,
        };
        Some(Ramp { up, down, growth: RAMP_GROWTH, max_flows: MAX_FLOWS_PER_DIRECTION })
    }

    pub fn name(&self) -> &'static str {
        match (self.up, self.down) {
            (true, true) => "auto",
            (true, false) => "auto-up",
            _ => "auto-down",
        }
    }

    /// The most scenarios a ramp can run: 1, 2, 4, ... up to `max_flows`
    /// per direction.
    pub fn max_steps(&self) -> usize {
        let per = (self.max_flows.max(1) as f64).log2().ceil() as usize + 1;
        per * (usize::from(self.up) + usize::from(self.down))
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.up || self.down) {
            return Err("a ramp needs a direction (auto, auto-up, auto-down)".into());
        }
        if !(self.growth > 0.0 && self.growth < 1.0) {
            return Err("the ramp's growth threshold must be above 0 and below 1".into());
        }
        if self.max_flows < 2 || self.max_flows > MAX_FLOWS_PER_DIRECTION {
            return Err(format!("the ramp's flow limit must be 2..{MAX_FLOWS_PER_DIRECTION}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod ramp_tests {
    use super::*;

    #[test]
    fn ramp_names_parse_and_count_their_steps() {
        let r = Ramp::parse("AUTO").unwrap();
        assert!(r.up && r.down && r.growth == 0.05 && r.max_flows == 32);
        // 1, 2, 4, 8, 16, 32 per direction
        assert_eq!(r.max_steps(), 12);
        assert_eq!(Ramp::parse("auto-down").unwrap().max_steps(), 6);
        assert_eq!(Ramp::parse("auto-up").unwrap().name(), "auto-up");
        assert_eq!(Ramp::parse("1u0d"), None);
        assert!(Ramp { max_flows: 1, ..r }.validate().is_err());
    }
}
