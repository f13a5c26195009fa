//! Shared-secret authentication (irtt's model): an HMAC-SHA256 answer to the
//! server's per-connection challenge, and an HMAC on every UDP probe and its
//! reply, plus the replay window that keeps a captured probe from being
//! answered twice.
use bloatlab_model::Secret;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of the server's challenge, sent in its handshake.
pub const NONCE_LEN: usize = 16;
/// Bytes of a probe's HMAC (HMAC-SHA256 truncated to 128 bits, RFC 2104 section 5).
pub const PROBE_MAC_LEN: usize = 16;

const CONTROL_LABEL: &[u8] = b"bloatlab-v2 control";
const PROBE_LABEL: &[u8] = b"bloatlab-v2 probe";
const RPM_PATH_LABEL: &[u8] = b"bloatlab-v2 rpm path";

fn mac(secret: &Secret) -> HmacSha256 {
    HmacSha256::new_from_slice(secret.bytes()).expect("HMAC takes keys of any length")
}

/// The client's answer to a challenge, hex (the `auth` message).
pub fn answer_challenge(secret: &Secret, nonce: &[u8; NONCE_LEN]) -> String {
    let mut m = mac(secret);
    m.update(CONTROL_LABEL);
    m.update(nonce);
    m.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// Check an answer in constant time.
pub fn check_answer(secret: &Secret, nonce: &[u8; NONCE_LEN], answer_hex: &str) -> bool {
    if answer_hex.len() != 64 || !answer_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    let bytes: Vec<u8> = (0..64).step_by(2).map(|i| u8::from_str_radix(&answer_hex[i..i + 2], 16).unwrap_or(0)).collect();
    let mut m = mac(secret);
    m.update(CONTROL_LABEL);
    m.update(nonce);
    m.verify_slice(&bytes).is_ok()
}

/// The path prefix under which a server with a shared secret serves its
/// RPM (HTTPS) endpoints: `/nq-` and 32 hex digits of an HMAC of a fixed
/// label. HTTP clients such as networkQuality cannot answer a challenge, so
/// the secret grants a URL instead (a capability); whoever holds the
/// secret derives it, nobody else can.
pub fn rpm_path_prefix(secret: &Secret) -> String {
    let mut m = mac(secret);
    m.update(RPM_PATH_LABEL);
    let full = m.finalize().into_bytes();
    format!("/nq-{}", full[..16].iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// HMAC of a probe's 48-byte header.
pub fn probe_mac(secret: &Secret, header: &[u8]) -> [u8; PROBE_MAC_LEN] {
    let mut m = mac(secret);
    m.update(PROBE_LABEL);
    m.update(header);
    let full = m.finalize().into_bytes();
    let mut out = [0u8; PROBE_MAC_LEN];
    out.copy_from_slice(&full[..PROBE_MAC_LEN]);
    out
}

/// Check a probe's HMAC in constant time.
pub fn check_probe_mac(secret: &Secret, header: &[u8], tag: &[u8]) -> bool {
    let mut m = mac(secret);
    m.update(PROBE_LABEL);
    m.update(header);
    tag.len() == PROBE_MAC_LEN && m.verify_truncated_left(tag).is_ok()
}

/// Which sequence numbers of one probe stream were answered: the highest
/// seen and a 64-bit window below it (IPsec's anti-replay window, RFC 4303
/// section 3.4.3). A probe more than 64 behind the highest is refused too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    /// Highest sequence number seen + 1 (0 = none yet).
    top: u64,
    /// Bit i set: sequence number top-1-i was seen.
    seen: u64,
}

impl ReplayWindow {
    /// True the first time `seq` is offered (and records it), false for a replay or a too-old probe.
    pub fn accept(&mut self, seq: u32) -> bool {
        let s = seq as u64 + 1;
        if s > self.top {
            let shift = s - self.top;
            self.seen = if shift >= 64 { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.top = s;
            return true;
        }
        let back = self.top - s;
        if back >= 64 {
            return false;
        }
        let bit = 1u64 << back;
        if self.seen & bit != 0 {
            return false;
        }
        self.seen |= bit;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> Secret {
        Secret::from_file_contents(s.as_bytes(), "t").unwrap()
    }

    #[test]
    fn the_rpm_path_is_fixed_per_secret_and_differs_between_secrets() {
        let a = Secret::from_file_contents(b"0123456789abcdef", "a").unwrap();
        let b = Secret::from_file_contents(b"0123456789abcdeg", "b").unwrap();
        let pa = rpm_path_prefix(&a);
        assert_eq!(pa, rpm_path_prefix(&a));
        assert_ne!(pa, rpm_path_prefix(&b));
        assert_eq!(pa.len(), 4 + 32);
        assert!(pa.starts_with("/nq-") && pa[4..].bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn challenge_answers_check_only_with_the_same_secret_and_nonce() {
        let a = secret("0123456789abcdef");
        let b = secret("0123456789abcdeF");
        let n1 = [7u8; NONCE_LEN];
        let mut n2 = n1;
        n2[15] = 8;
        let ans = answer_challenge(&a, &n1);
        assert_eq!(ans.len(), 64);
        assert!(check_answer(&a, &n1, &ans));
        assert!(!check_answer(&b, &n1, &ans));
        assert!(!check_answer(&a, &n2, &ans));
        assert!(!check_answer(&a, &n1, &ans[..62]));
        assert!(!check_answer(&a, &n1, &"zz".repeat(32)));
        assert!(!check_answer(&a, &n1, ""));
    }

    /// RFC 4231 test case 2 (key "Jefe"): our HMAC is standard HMAC-SHA256.
    #[test]
    fn hmac_is_rfc4231() {
        let mut m = HmacSha256::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let hex: String = m.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn probe_macs() {
        let a = secret("0123456789abcdef");
        let h = [3u8; 48];
        let t = probe_mac(&a, &h);
        assert!(check_probe_mac(&a, &h, &t));
        let mut h2 = h;
        h2[20] ^= 1;
        assert!(!check_probe_mac(&a, &h2, &t));
        assert!(!check_probe_mac(&a, &h, &t[..8]));
        assert!(!check_probe_mac(&secret("another secret!!"), &h, &t));
    }

    #[test]
    fn replay_window_by_hand() {
        let mut w = ReplayWindow::default();
        assert!(w.accept(0));
        assert!(!w.accept(0));
        assert!(w.accept(5));
        assert!(w.accept(3)); // late, inside the window
        assert!(!w.accept(3));
        assert!(!w.accept(5));
        assert!(w.accept(100)); // jump: 5 is now 95 behind, outside the window
        assert!(!w.accept(5));
        assert!(w.accept(37)); // 63 behind: the window's last slot
        assert!(!w.accept(36)); // 64 behind: too old
        assert!(w.accept(u32::MAX));
        assert!(!w.accept(u32::MAX));
        assert!(w.accept(u32::MAX - 63));
        assert!(!w.accept(u32::MAX - 64));
    }
}
