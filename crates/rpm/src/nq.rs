//! The configuration document a responsiveness server publishes at
//! `/.well-known/nq`: a version and the URLs of the small object, the large
//! object and the upload sink.
use serde::{Deserialize, Serialize};

pub const WELL_KNOWN: &str = "/.well-known/nq";
/// Where goresponsiveness looks by default (`-path config`).
pub const LEGACY_CONFIG: &str = "/config";
pub const SMALL: &str = "/small";
pub const LARGE: &str = "/large";
pub const UPLOAD: &str = "/slurp";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NqConfig {
    pub version: u32,
    pub urls: NqUrls,
    /// A host to connect to instead of the URLs' host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_endpoint: Option<String>,
}

/// Both spellings clients read: the draft's plain names and the `https_`
/// names older clients (goresponsiveness, macOS networkQuality) use.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NqUrls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small_download_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub large_download_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small_https_download_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub large_https_download_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_upload_url: Option<String>,
}

/// The three URLs a client uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    pub small: String,
    pub large: String,
    pub upload: String,
}

impl NqConfig {
    /// The document a server at `base` (`https://host:port[/prefix]`) publishes.
    pub fn for_base(base: &str) -> NqConfig {
        let u = |p: &str| Some(format!("{base}{p}"));
        NqConfig {
            version: 1,
            urls: NqUrls {
                small_download_url: u(SMALL),
                large_download_url: u(LARGE),
                upload_url: u(UPLOAD),
                small_https_download_url: u(SMALL),
                large_https_download_url: u(LARGE),
                https_upload_url: u(UPLOAD),
            },
            test_endpoint: None,
        }
    }

    /// Parse a document; the URLs must be https (this client measures TLS
    /// handshakes as part of the foreign probes).
    pub fn parse(text: &[u8], source: &str) -> Result<(NqConfig, Endpoints), String> {
        let c: NqConfig =
            serde_json::from_slice(text).map_err(|e| format!("{source}: not a responsiveness configuration ({e})"))?;
        let pick = |a: &Option<String>, b: &Option<String>, name: &str| -> Result<String, String> {
            let v = b.clone().or_else(|| a.clone()).ok_or_else(|| format!("{source}: the configuration has no {name}"))?;
            if !v.starts_with("https://") {
                return Err(format!("{source}: {name} {v:?} is not an https URL"));
            }
            Ok(v)
        };
        let e = Endpoints {
            small: pick(&c.urls.small_download_url, &c.urls.small_https_download_url, "small_https_download_url")?,
            large: pick(&c.urls.large_download_url, &c.urls.large_https_download_url, "large_https_download_url")?,
            upload: pick(&c.urls.upload_url, &c.urls.https_upload_url, "https_upload_url")?,
        };
        Ok((c, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_document_parses_back_with_both_spellings() {
        let c = NqConfig::for_base("https://example.test:4043/nq-ab");
        let text = serde_json::to_vec(&c).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["urls"]["https_upload_url"], "https://example.test:4043/nq-ab/slurp");
        assert_eq!(v["urls"]["small_download_url"], "https://example.test:4043/nq-ab/small");
        let (_, e) = NqConfig::parse(&text, "t").unwrap();
        assert_eq!(e.large, "https://example.test:4043/nq-ab/large");
    }

    #[test]
    fn a_document_with_only_the_old_names_or_plain_http_is_judged() {
        let only_https = br#"{"version":1,"urls":{"small_https_download_url":"https://h/s","large_https_download_url":"https://h/l","https_upload_url":"https://h/u"}}"#;
        assert_eq!(NqConfig::parse(only_https, "t").unwrap().1.upload, "https://h/u");
        let plain = br#"{"version":1,"urls":{"small_download_url":"http://h/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}"#;
        assert!(NqConfig::parse(plain, "t").unwrap_err().contains("not an https URL"));
        let missing = br#"{"version":1,"urls":{}}"#;
        assert!(NqConfig::parse(missing, "t").unwrap_err().contains("no small_https_download_url"));
        assert!(NqConfig::parse(b"<html>", "cfg").unwrap_err().starts_with("cfg: not a responsiveness configuration"));
    }
}
