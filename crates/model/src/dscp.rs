//! DSCP marks for load flows (RFC 2474 / RFC 4594 class names), so a test
//! can check whether a router's priority queues work (flent's RRUL classes:
//! BE, BK, CS5, EF).
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A differentiated-services code point, 0..=63 (the TOS byte's upper six bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dscp(pub u8);

const NAMES: &[(&str, u8)] = &[
    ("be", 0),
    ("cs0", 0),
    ("bk", 8),
    ("cs1", 8),
    ("le", 1),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("cs2", 16),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("cs3", 24),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("cs4", 32),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("cs5", 40),
    ("va", 44),
    ("ef", 46),
    ("cs6", 48),
    ("cs7", 56),
];

/// Most distinct classes a test marks (the server answers 8 probe streams
/// per test: the unmarked one and one per class).
pub const MAX_CLASSES: usize = 7;

pub const DSCP_FORMS: &str = "accepted forms: BE (0), BK (CS1, 8), CS0..CS7, AF11..AF43, EF (46), VA (44), LE (1), or a number 0..63";

impl Dscp {
    /// Parse a class name (case-insensitive) or a number 0..63.
    pub fn parse(s: &str) -> Result<Dscp, String> {
        let t = s.trim().to_ascii_lowercase();
        if let Some((_, v)) = NAMES.iter().find(|(n, _)| *n == t) {
            return Ok(Dscp(*v));
        }
        match t.parse::<u8>() {
            Ok(v) if v <= 63 => Ok(Dscp(v)),
            Ok(v) => Err(format!("DSCP {v} is out of range (0..63)")),
            Err(_) => Err(format!("`{s}` is not a DSCP class; {DSCP_FORMS}")),
        }
    }

    /// A comma-separated list, e.g. `BE,BK,CS5,EF`.
    pub fn parse_list(s: &str) -> Result<Vec<Dscp>, String> {
        let v = s.split(',').filter(|x| !x.trim().is_empty()).map(Dscp::parse).collect::<Result<Vec<_>, _>>()?;
        if v.is_empty() {
            return Err(format!("no DSCP class given; {DSCP_FORMS}"));
        }
        let n = Dscp::distinct(&v).len();
        if n > MAX_CLASSES {
            return Err(format!("{n} distinct DSCP classes; at most {MAX_CLASSES} (each gets its own probe stream)"));
        }
        Ok(v)
    }

    /// The distinct classes of a list, in the order first given: one probe
    /// stream and one summary row each.
    pub fn distinct(classes: &[Dscp]) -> Vec<Dscp> {
        let mut v: Vec<Dscp> = vec![];
        for c in classes {
            if !v.contains(c) {
                v.push(*c);
            }
        }
        v
    }

    /// The TOS / traffic-class byte: DSCP in the upper six bits, ECN bits 0.
    pub fn tos(self) -> u8 {
        self.0 << 2
    }

    /// The class a flow gets: flows take `classes` in turn (flow i gets
    /// classes[i % n]), per direction; unmarked without classes.
    pub fn for_flow(classes: &[Dscp], i: usize) -> Dscp {
        if classes.is_empty() {
            Dscp(0)
        } else {
            classes[i % classes.len()]
        }
    }
}

impl fmt::Display for Dscp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // the first (preferred) name of the value, upper case; else the number
        match NAMES.iter().find(|(_, v)| *v == self.0) {
            Some((n, _)) => f.write_str(&n.to_ascii_uppercase()),
            None => write!(f, "{}", self.0),
        }
    }
}

impl Serialize for Dscp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dscp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dscp, D::Error> {
        Dscp::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(Dscp::parse("EF").unwrap(), Dscp(46));
        assert_eq!(Dscp::parse("bk").unwrap(), Dscp(8));
        assert_eq!(Dscp::parse("cs5").unwrap().tos(), 0xa0);
        assert_eq!(Dscp::parse("EF").unwrap().tos(), 0xb8);
        assert_eq!(Dscp::parse("10").unwrap().to_string(), "AF11");
        assert_eq!(Dscp(46).to_string(), "EF");
        assert_eq!(Dscp(0).to_string(), "BE");
        assert_eq!(Dscp(63).to_string(), "63");
        assert!(Dscp::parse("64").unwrap_err().contains("out of range"));
        assert!(Dscp::parse("gold").unwrap_err().contains("not a DSCP class"));
        let rrul = Dscp::parse_list("BE,BK,CS5,EF").unwrap();
        assert_eq!(rrul, vec![Dscp(0), Dscp(8), Dscp(40), Dscp(46)]);
        assert_eq!(Dscp::for_flow(&rrul, 5), Dscp(8));
        assert_eq!(Dscp::for_flow(&[], 5), Dscp(0));
        assert_eq!(serde_json::to_string(&Dscp(46)).unwrap(), "\"EF\"");
        assert!(Dscp::parse_list(" , ").is_err());
    }
}
