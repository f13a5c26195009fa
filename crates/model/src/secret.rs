//! The shared secret of an authenticated server (`--secret-file` on both
//! ends). Read once at the edge; its bytes never appear in a `Debug` print
//! and are hex in a serialized config.
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Fewer bytes than this is refused: a short secret is guessable offline
/// from one captured challenge.
pub const SECRET_MIN_BYTES: usize = 16;
/// More is pointless for HMAC-SHA256 (keys past 64 bytes are hashed) and
/// guards against naming the wrong file (a log, an image).
pub const SECRET_MAX_BYTES: usize = 1024;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A secret from a file's contents: the bytes with surrounding whitespace
    /// (a trailing newline) removed. `what` names the file in errors.
    pub fn from_file_contents(bytes: &[u8], what: &str) -> Result<Secret, String> {
        let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
        let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map(|i| i + 1).unwrap_or(start);
        let s = &bytes[start..end.max(start)];
        if s.len() < SECRET_MIN_BYTES {
            return Err(format!(
                "{what}: the secret has {} bytes; use at least {SECRET_MIN_BYTES} (e.g. `head -c 32 /dev/urandom | base64 > FILE`)",
                s.len()
            ));
        }
        if s.len() > SECRET_MAX_BYTES {
            return Err(format!("{what}: {} bytes is not a secret file (at most {SECRET_MAX_BYTES} bytes)", s.len()));
        }
        Ok(Secret(s.to_vec()))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let h = String::deserialize(d)?;
        if h.len() % 2 != 0 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom("a secret is an even number of hex digits"));
        }
        let v: Vec<u8> = (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex checked")).collect();
        Secret::from_file_contents(&v, "secret").map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_refuses_short_and_hides_bytes() {
        let s = Secret::from_file_contents(b"  0123456789abcdefXYZ\n", "f").unwrap();
        assert_eq!(s.bytes(), b"0123456789abcdefXYZ");
        assert_eq!(format!("{s:?}"), "Secret(19 bytes)");
        let e = Secret::from_file_contents(b"short\n", "/etc/bl").unwrap_err();
        assert!(e.starts_with("/etc/bl: the secret has 5 bytes; use at least 16"), "{e}");
        assert!(Secret::from_file_contents(b"\n\n", "f").is_err());
        assert!(Secret::from_file_contents(&[b'a'; 2000], "f").unwrap_err().contains("not a secret file"));
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, "\"3031323334353637383961626364656658595a\"");
        assert_eq!(serde_json::from_str::<Secret>(&j).unwrap(), s);
        assert!(serde_json::from_str::<Secret>("\"abc\"").is_err());
        assert!(serde_json::from_str::<Secret>("\"0011\"").is_err());
    }
}
