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
