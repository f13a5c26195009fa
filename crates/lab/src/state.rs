//! Ownership records of running and left-over labs, and `bloatlab lab cleanup`.
//!
//! Each lab writes `/run/bloatlab/lab-<id>.json` (namespaces created, child
//! processes started) and holds an exclusive `flock` on `/run/bloatlab/lab-<id>.lock`
//! while its owner process lives. `cleanup` only removes labs whose lock is free,
//! so it never disturbs a lab another bloatlab is running.
use crate::sys;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use bloatlab_host::process::Signal;
use std::path::PathBuf;

pub const STATE_DIR: &str = "/run/bloatlab";
/// Every lab namespace is `blab-<6 hex>-<role>`.
pub const PREFIX: &str = "blab-";
pub const ROLES: &[&str] = &["client", "router", "server", "witness", "home", "probe"];

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ChildRec {
    pub pid: u32,
    /// /proc/PID/stat start time, to survive pid reuse.
    pub start: Option<u64>,
    pub what: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct LabRecord {
    pub id: String,
    pub owner_pid: u32,
    pub created_unix_ns: u64,
    pub namespaces: Vec<String>,
    pub children: Vec<ChildRec>,
    pub keep: bool,
    /// The lab's temporary directory (logs), removed by cleanup.
    #[serde(default)]
    pub run_dir: Option<String>,
    /// A congestion control this lab added to the host's
    /// net.ipv4.tcp_allowed_congestion_control (so its namespaces could default
    /// to it); taken out again when the last lab that added it goes.
    #[serde(default)]
    pub allowed_cc_added: Option<String>,
}

const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// The host's allowed congestion controls (what a non-initial namespace may default to).
pub fn allowed_cc() -> Vec<String> {
    std::fs::read_to_string(ALLOWED_CC).unwrap_or_default().split_whitespace().map(String::from).collect()
}

/// Make `cc` allowed as a namespace default; true when this call added it.
pub fn allow_cc(cc: &str) -> Result<bool> {
    let mut v = allowed_cc();
    if v.iter().any(|x| x == cc) {
        return Ok(false);
    }
    v.push(cc.to_string());
    std::fs::write(ALLOWED_CC, v.join(" ")).with_context(|| format!("add {cc} to net.ipv4.tcp_allowed_congestion_control"))?;
    Ok(true)
}

/// Take `cc` out of the allowed list again when lab `id` added it and no
/// other lab on the machine (running or kept) did.
pub fn release_cc(id: &str, cc: &str) {
    let others = std::fs::read_dir(STATE_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("lab-")?.strip_suffix(".json").map(String::from))
        .filter(|other| other != id)
        .filter_map(|other| read_record(&other))
        .any(|r| r.allowed_cc_added.as_deref() == Some(cc));
    if !others {
        let v: Vec<String> = allowed_cc().into_iter().filter(|x| x != cc).collect();
        if !v.is_empty() {
            let _ = std::fs::write(ALLOWED_CC, v.join(" "));
        }
    }
}

/// The owner's handle: the held lock and the record it keeps up to date.
pub struct Ownership {
    pub rec: LabRecord,
    _lock: File,
}

fn state_path(id: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("lab-{id}.json"))
}
fn lock_path(id: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("lab-{id}.lock"))
}

fn open_lock(id: &str) -> Result<File> {
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("create {STATE_DIR}"))?;
    let p = lock_path(id);
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&p)
        .with_context(|| format!("open {}", p.display()))
}

fn try_flock(f: &File) -> bool {
    bloatlab_host::fs::try_lock(f)
}

impl Ownership {
    /// Claim id `id`: fails when a live lab holds it or its namespaces exist.
    pub fn claim(id: &str) -> Result<Ownership> {
        let f = open_lock(id)?;
        if !try_flock(&f) {
            anyhow::bail!("lab id {id} is in use by another running bloatlab lab");
        }
        let existing: Vec<String> = sys::netns_list()?
            .into_iter()
            .filter(|n| n.starts_with(&format!("{PREFIX}{id}-")))
            .collect();
        if !existing.is_empty() {
            anyhow::bail!(
                "namespaces of lab id {id} already exist ({}); remove them with `bloatlab lab cleanup --id {id}` or pick another id",
                existing.join(", ")
            );
        }
        let o = Ownership {
            rec: LabRecord {
                id: id.to_string(),
                owner_pid: std::process::id(),
                created_unix_ns: sys::unix_ns(),
                ..Default::default()
            },
            _lock: f,
        };
        o.save()?;
        Ok(o)
    }

    pub fn save(&self) -> Result<()> {
        let p = state_path(&self.rec.id);
        let tmp = p.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&self.rec)?)?;
        std::fs::rename(&tmp, &p)?;
        Ok(())
    }

    /// Forget the record (after a complete teardown).
    pub fn remove_files(&self) {
        let _ = std::fs::remove_file(state_path(&self.rec.id));
        let _ = std::fs::remove_file(lock_path(&self.rec.id));
    }
}

/// Split `blab-<id>-<role>` into (id, role).
pub fn parse_ns_name(n: &str) -> Option<(String, String)> {
    let rest = n.strip_prefix(PREFIX)?;
    let (id, role) = rest.split_once('-')?;
    if valid_id(id) && ROLES.contains(&role) {
        Some((id.to_string(), role.to_string()))
    } else {
        None
    }
}

/// Lab ids are 6 lowercase hex digits.
pub fn valid_id(id: &str) -> bool {
    id.len() == 6 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[derive(Debug, Default)]
pub struct CleanupReport {
    pub removed: Vec<String>,
    pub skipped_in_use: Vec<String>,
    pub skipped_kept: Vec<String>,
    pub lines: Vec<String>,
}

/// Every lab id on this machine with its namespaces: namespaces named
/// blab-<id>-<role>, and ids with a file (record or lock) in the state directory.
fn discover() -> Result<std::collections::BTreeMap<String, Vec<String>>> {
    let mut found: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for n in sys::netns_list()? {
        if let Some((id, _)) = parse_ns_name(&n) {
            found.entry(id).or_default().push(n);
        }
    }
    if let Ok(rd) = std::fs::read_dir(STATE_DIR) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_prefix("lab-").and_then(|s| s.split('.').next()) {
                if valid_id(id) {
                    found.entry(id.to_string()).or_default();
                }
            }
        }
    }
    Ok(found)
}

/// Which labs `cleanup` may remove.
#[derive(Debug, Clone, Default)]
pub struct CleanupSelection {
    /// Only these labs (kept ones included).
    pub ids: Vec<String>,
    /// Every lab whose owner is gone, kept ones included.
    pub all: bool,
    /// Say what would be removed, remove nothing.
    pub dry_run: bool,
}

/// Remove labs whose owning process is gone: left-overs of killed runs, and
/// labs kept with `--keep` only when named (`ids`) or with `all`. A lab whose
/// owner still runs is never touched.
pub fn cleanup(sel: &CleanupSelection) -> Result<CleanupReport> {
    let mut rep = CleanupReport::default();
    let found = discover()?;
    for (id, nss) in found {
        if !sel.ids.is_empty() && !sel.ids.contains(&id) {
            continue;
        }
        let lock = open_lock(&id)?;
        if !try_flock(&lock) {
            let owner = read_record(&id).map(|r| r.owner_pid).unwrap_or(0);
            rep.lines.push(format!(
                "lab {id}: in use by a running bloatlab lab (pid {owner}); left alone"
            ));
            rep.skipped_in_use.push(id);
            continue;
        }
        let rec = read_record(&id);
        let kept = rec.as_ref().is_some_and(|r| r.keep);
        if kept && sel.ids.is_empty() && !sel.all {
            rep.lines.push(format!(
                "lab {id}: kept with --keep ({} namespaces); left alone (remove it with --id {id}, or every lab with --all)",
                nss.len()
            ));
            rep.skipped_kept.push(id);
            continue;
        }
        if sel.dry_run {
            rep.lines.push(format!(
                "lab {id}: would remove {} namespace{}{}",
                nss.len(),
                if nss.len() == 1 { "" } else { "s" },
                if kept { " (kept with --keep)" } else { " (left over: its bloatlab lab is gone)" }
            ));
            continue;
        }
        let mut killed = 0;
        if let Some(r) = &rec {
            killed = stop_children(&r.children);
            if let Some(cc) = &r.allowed_cc_added {
                release_cc(&id, cc);
            }
        }
        let mut others = Vec::new();
        for ns in &nss {
            for pid in sys::netns_pids(ns) {
                others.push(format!("{pid} in {ns}"));
            }
        }
        let mut errs = Vec::new();
        for ns in &nss {
            if let Err(e) = sys::run(&["ip", "netns", "del", ns]) {
                errs.push(format!("{e:#}"));
            }
        }
        if let Some(d) = rec.as_ref().and_then(|r| r.run_dir.clone()) {
            // Only a directory this lab created: <tmp>/bloatlab-lab-<id>-XXXX.
            let p = std::path::Path::new(&d);
            let ours = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("bloatlab-lab-{id}-")));
            if ours && p.is_dir() {
                let _ = std::fs::remove_dir_all(p);
            }
        }
        let _ = std::fs::remove_file(state_path(&id));
        let _ = std::fs::remove_file(lock_path(&id));
        let mut line = format!(
            "lab {id}: removed {} namespace{}{}",
            nss.len(),
            if nss.len() == 1 { "" } else { "s" },
            if killed > 0 { format!(", stopped {killed} bloatlab process(es)") } else { String::new() }
        );
        if !others.is_empty() {
            line.push_str(&format!(
                "; processes bloatlab did not start still run inside ({}), the namespaces vanish when they exit",
                others.join(", ")
            ));
        }
        for e in errs {
            line.push_str(&format!("; {e}"));
        }
        rep.lines.push(line);
        rep.removed.push(id);
    }
    Ok(rep)
}

/// One lab as `bloatlab lab list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LabStatus {
    pub id: String,
    /// "running" (its bloatlab lab process holds the lock), "kept" (left up
    /// with --keep) or "leftover" (its owner died).
    pub state: String,
    pub owner_pid: Option<u32>,
    pub namespaces: Vec<String>,
    pub run_dir: Option<String>,
    /// The processes the lab started that still run (a kept lab's servers and emulator).
    pub processes: Vec<ProcessStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessStatus {
    pub pid: u32,
    pub what: String,
    pub running: bool,
}

/// Every lab on this machine: namespaces named blab-<id>-<role> or a record in /run/bloatlab.
pub fn list() -> Result<Vec<LabStatus>> {
    let found = discover()?;
    let mut out = Vec::new();
    for (id, nss) in found {
        let rec = read_record(&id);
        // Probe the lock without creating files for labs that have none.
        let running = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(lock_path(&id))
            .map(|f| {
                let free = try_flock(&f);
                if free {
                    // release the probe lock
                    bloatlab_host::fs::unlock(&f);
                }
                !free
            })
            .unwrap_or(false);
        let state = if running {
            "running"
        } else if rec.as_ref().is_some_and(|r| r.keep) {
            "kept"
        } else {
            "leftover"
        };
        let processes = rec
            .as_ref()
            .map(|r| {
                r.children
                    .iter()
                    .map(|c| ProcessStatus {
                        pid: c.pid,
                        what: c.what.clone(),
                        running: c.start.is_some() && sys::proc_start_time(c.pid) == c.start,
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(LabStatus {
            id,
            state: state.into(),
            owner_pid: rec.as_ref().map(|r| r.owner_pid),
            namespaces: nss,
            run_dir: rec.and_then(|r| r.run_dir),
            processes,
        });
    }
    Ok(out)
}

fn read_record(id: &str) -> Option<LabRecord> {
    serde_json::from_slice(&std::fs::read(state_path(id)).ok()?).ok()
}

/// SIGTERM the recorded children, SIGKILL what survives 2 s. Returns how many were signalled.
pub fn stop_children(children: &[ChildRec]) -> usize {
    let mut n = 0;
    for c in children {
        if sys::kill_if_same(c.pid, c.start, Signal::Term) {
            n += 1;
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let alive: Vec<&ChildRec> = children
            .iter()
            .filter(|c| c.start.is_some() && sys::proc_start_time(c.pid) == c.start && !is_zombie(c.pid))
            .collect();
        if alive.is_empty() {
            break;
        }
        if std::time::Instant::now() > deadline {
            for c in alive {
                sys::kill_if_same(c.pid, c.start, Signal::Kill);
            }
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    n
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names() {
        assert_eq!(parse_ns_name("blab-1a2b3c-router"), Some(("1a2b3c".into(), "router".into())));
        assert_eq!(parse_ns_name("blab-1a2b3c-other"), None);
        assert_eq!(parse_ns_name("blab-XYZ123-client"), None);
        assert_eq!(parse_ns_name("myns"), None);
        assert!(valid_id("00ff99"));
        assert!(!valid_id("00ff9"));
    }
}
