//! RPM targets (`https://HOST[:PORT]/.well-known/nq`): the IETF
//! responsiveness test (`bloatlab rpm`'s client, download then upload,
//! [`bloatlab_model::MonitorConfig::rpm_config`]) as a run of the monitor.
//! The run is a result of `bloatlab test`'s schema whose `rpm` holds the
//! whole RPM result (stages, intervals, probes) and whose headline carries
//! what those stages measured: the worst stage's RPM and each direction's
//! goodput. There are no UDP probes: no idle or loaded latency, no grade.
use bloatlab_model::RpmConfig;
use bloatlab_results::{Headline, Metadata, RpmResult, TestResult, SCHEMA_NAME, SCHEMA_VERSION};
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
        Ok(r) => Ran { result: Some(result_of(r)), error: None },
        Err(e) => Ran { result: None, error: Some(e) },
    }
}

/// The result document of an RPM run.
pub fn result_of(r: RpmResult) -> TestResult {
    use bloatlab_model::RpmDirection as D;
    let goodput = |d: D| r.stages.iter().filter(|s| s.direction == d).map(|s| s.goodput_bps).fold(0.0, f64::max);
    let headline = Headline {
        download_capacity_bps: goodput(D::Download),
        upload_capacity_bps: goodput(D::Upload),
        rpm: r.stages.iter().filter_map(|s| s.rpm).reduce(f64::min),
        ..Headline::default()
    };
    let metadata = Metadata {
        bloatlab_version: r.bloatlab_version.clone(),
        start_time: r.start_time.clone(),
        start_unix_ns: r.start_unix_ns,
        command: r.command.clone(),
        server_address: r.server_address.clone(),
        client: r.client.clone(),
        probe_timestamps: format!("no UDP probes: the IETF responsiveness method against {} ({})", r.url, r.method.specification),
        ..Metadata::default()
    };
    TestResult {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        complete: true,
        incomplete_reason: None,
        metadata,
        idle: None,
        scenarios: vec![],
        headline,
        lab: None,
        rpm: Some(r),
        ramp: vec![],
        client: Default::default(),
        household: None,
        monitor: None,
    }
}
