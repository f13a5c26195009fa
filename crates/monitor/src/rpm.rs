//! RPM targets (`https://HOST[:PORT]/.well-known/nq`): the IETF
//! responsiveness test (`bloatlab rpm`'s client, download then upload,
//! [`bloatlab_model::MonitorConfig::rpm_config`]) as a run of the monitor.
//! The run is a result of `bloatlab test`'s schema
//! ([`bloatlab_rpm::result::test_result`]) whose `rpm` holds the whole RPM
//! result and whose headline carries what those stages measured: the worst
//! stage's RPM and each direction's goodput. There are no UDP probes: no
//! idle or loaded latency, no grade.
use bloatlab_model::RpmConfig;
use bloatlab_results::TestResult;
use std::sync::atomic::AtomicBool;

/// A loaded run's outcome: a result, or why there is none.
pub struct Ran {
    pub result: Option<TestResult>,
    pub error: Option<String>,
}

/// Run the RPM test of `cfg` (named `name` in the command line kept). A
/// stop abandons it (within 100 ms): a failed run, "interrupted".
pub fn run(cfg: &RpmConfig, name: &str, stop: &AtomicBool) -> Ran {
    if let Err(e) = cfg.validate() {
        return Ran { result: None, error: Some(e) };
    }
    match bloatlab_rpm::run_client_until(cfg, vec!["monitor".into(), name.to_string()], &|_| {}, stop) {
        Ok(r) => Ran { result: Some(bloatlab_rpm::result::test_result(r)), error: None },
        Err(e) => Ran { result: None, error: Some(e) },
    }
}
