//! `--web-results DIR`: finished browser results kept on disk, each under a
//! random id its permalink names (`/r/ID`). Bounded: at most `max_count`
//! results and `max_bytes` in all (the oldest go first), and at most
//! `per_source_per_hour` stored per source (an IPv4 address or an IPv6 /64).
//! The client's address is kept only with `--web-results-keep-addresses`,
//! in a side file `ID.source`.
use bloatlab_model::WebResults;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Store {
    cfg: WebResults,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Kept results, oldest first: (id, bytes on disk).
    kept: VecDeque<(String, u64)>,
    bytes: u64,
    /// Recent stores per source.
    recent: HashMap<IpAddr, VecDeque<Instant>>,
}

/// A permalink id: 16 lowercase hex digits.
pub fn valid_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Store {
    /// Open (creating) the directory and index what it holds.
    pub fn open(cfg: WebResults) -> Result<Store, String> {
        std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("--web-results {}: {e}", cfg.dir.display()))?;
        let mut found = vec![];
        let rd = std::fs::read_dir(&cfg.dir).map_err(|e| format!("--web-results {}: {e}", cfg.dir.display()))?;
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(id) = name.strip_suffix(".json") else { continue };
            if !valid_id(id) {
                continue;
            }
            let Ok(md) = e.metadata() else { continue };
            let side = std::fs::metadata(cfg.dir.join(format!("{id}.source"))).map(|m| m.len()).unwrap_or(0);
            found.push((md.modified().ok(), id.to_string(), md.len() + side));
        }
        found.sort();
        let mut st = State::default();
        for (_, id, len) in found {
            st.bytes += len;
            st.kept.push_back((id, len));
        }
        // writable?
        let probe = cfg.dir.join(".bloatlab-write-test");
        std::fs::write(&probe, b"").map_err(|e| format!("--web-results {}: cannot write there: {e}", cfg.dir.display()))?;
        let _ = std::fs::remove_file(&probe);
        let s = Store { cfg, state: Mutex::new(st) };
        s.evict(&mut s.state.lock().unwrap());
        Ok(s)
    }

    fn path(&self, id: &str, ext: &str) -> PathBuf {
        self.cfg.dir.join(format!("{id}.{ext}"))
    }

    fn evict(&self, st: &mut State) {
        while st.kept.len() as u64 > self.cfg.max_count as u64 || st.bytes > self.cfg.max_bytes {
            let Some((id, len)) = st.kept.pop_front() else { break };
            let _ = std::fs::remove_file(self.path(&id, "json"));
            let _ = std::fs::remove_file(self.path(&id, "source"));
            st.bytes = st.bytes.saturating_sub(len);
        }
    }

    /// Keep `json` (a result document); returns its id. Refused: the
    /// source's hourly allowance is used, or the result alone is larger
    /// than the store.
    pub fn save(&self, json: &[u8], source: IpAddr) -> Result<String, String> {
        let src = bloatlab_serve::source_of(source);
        let mut st = self.state.lock().unwrap();
        let now = Instant::now();
        let hour = Duration::from_secs(3600);
        let recent = st.recent.entry(src).or_default();
        while recent.front().is_some_and(|t| now.duration_since(*t) > hour) {
            recent.pop_front();
        }
        if recent.len() as u32 >= self.cfg.per_source_per_hour {
            return Err(format!(
                "your address stored {} results in the last hour, this server's limit: this one is not kept (download it instead)",
                recent.len()
            ));
        }
        if json.len() as u64 > self.cfg.max_bytes {
            return Err("the result is larger than this server keeps".into());
        }
        recent.push_back(now);
        // forget sources with nothing recent (the map stays small)
        st.recent.retain(|_, v| v.back().is_some_and(|t| now.duration_since(*t) <= hour));
        use rand::Rng;
        let mut rng = rand::rng();
        let id: String = (0..8).map(|_| format!("{:02x}", rng.random::<u8>())).collect();
        let tmp = self.path(&id, "tmp");
        std::fs::write(&tmp, json).and_then(|_| std::fs::rename(&tmp, self.path(&id, "json"))).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("could not keep the result: {e}")
        })?;
        let mut len = json.len() as u64;
        if self.cfg.keep_addresses {
            let a = source.to_string();
            if std::fs::write(self.path(&id, "source"), &a).is_ok() {
                len += a.len() as u64;
            }
        }
        st.bytes += len;
        st.kept.push_back((id.clone(), len));
        self.evict(&mut st);
        Ok(id)
    }

    /// A kept result's JSON.
    pub fn load(&self, id: &str) -> Option<Vec<u8>> {
        if !valid_id(id) {
            return None;
        }
        std::fs::read(self.path(id, "json")).ok()
    }

    pub fn count(&self) -> usize {
        self.state.lock().unwrap().kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_keeps_its_bounds_and_rate_limits_a_source() {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = WebResults::new(d.path().to_path_buf());
        cfg.max_count = 3;
        cfg.per_source_per_hour = 5;
        let s = Store::open(cfg.clone()).unwrap();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let ids: Vec<String> = (0..5).map(|i| s.save(format!("{{\"n\":{i}}}").as_bytes(), a).unwrap()).collect();
        assert_eq!(s.count(), 3, "max_count");
        assert!(s.load(&ids[0]).is_none() && s.load(&ids[4]).is_some(), "the oldest went first");
        let e = s.save(b"{}", a).unwrap_err();
        assert!(e.contains("5 results in the last hour"), "{e}");
        s.save(b"{}", b).unwrap();
        assert!(s.load("../../etc/passwd").is_none());
        // reopened, it finds what it kept, and addresses were not written
        let s2 = Store::open(cfg).unwrap();
        assert_eq!(s2.count(), 3);
        assert!(std::fs::read_dir(d.path()).unwrap().flatten().all(|e| !e.file_name().to_string_lossy().ends_with(".source")));
    }
}
