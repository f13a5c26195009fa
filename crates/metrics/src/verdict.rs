//! A use's verdict (good, fair, poor, unknown) and the judged use: the
//! words [`crate::uses`] and [`crate::household`] both speak.
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Good,
    Fair,
    Poor,
    /// The result lacks what the rule needs (no loaded phase, no download).
    Unknown,
}

/// One use, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UseVerdict {
    /// "gaming", "video calls", "streaming", "browsing".
    pub name: String,
    pub verdict: Verdict,
    /// What was measured against the rule, in words with its number.
    pub measured: String,
    /// The rule, with its thresholds and their source.
    pub rule: String,
}

impl Verdict {
    /// "good", "fair", "poor", "unknown" (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Fair => "fair",
            Verdict::Poor => "poor",
            Verdict::Unknown => "unknown",
        }
    }

    pub(crate) fn rank(self) -> u8 {
        match self {
            Verdict::Good => 0,
            Verdict::Fair => 1,
            Verdict::Poor => 2,
            Verdict::Unknown => 3,
        }
    }

    /// The worse of the two.
    pub fn max(self, o: Verdict) -> Verdict {
        if o.rank() > self.rank() { o } else { self }
    }
}
