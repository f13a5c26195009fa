//! Queue observation: each namespace's queues' counters (bloatlab_shape::counters)
//! at a fixed cadence.
use crate::lab::QueueTarget;
use crate::sys;
use bloatlab_results::{QueueSample, QueueSeries};
use bloatlab_shape::counters::Reader;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type Collected = (Vec<(QueueTarget, String, Vec<QueueSample>)>, String);

/// Series being collected, stamped in Unix ns (converted to test time later).
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Collected>>,
    /// Largest bottleneck backlog (packets) of the newest sample; u64::MAX = none yet.
    backlog: Arc<std::sync::atomic::AtomicU64>,
}

impl Sampler {
    pub fn start(targets: Vec<QueueTarget>, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let backlog = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let bl = backlog.clone();
        let handle = std::thread::spawn(move || {
            let mut series: Vec<(QueueTarget, String, Vec<QueueSample>)> =
                targets.iter().map(|t| (t.clone(), String::new(), Vec::new())).collect();
            let mut nss: Vec<String> = targets.iter().map(|t| t.netns.clone()).collect();
            nss.sort();
            nss.dedup();
            let mut readers: Vec<(String, Reader)> = nss
                .iter()
                .map(|ns| {
                    let devs: Vec<String> = targets.iter().filter(|t| &t.netns == ns).map(|t| t.dev.clone()).collect();
                    (ns.clone(), Reader::open(ns, &devs))
                })
                .collect();
            let mut methods: Vec<&str> = readers.iter().map(|(_, r)| r.name()).collect();
            methods.dedup();
            let method = methods.join("+");
            let start = Instant::now();
            let mut tick: u32 = 0;
            loop {
                for (ns, reader) in readers.iter_mut() {
                    // A netlink dump is stamped within it (and retried if
                    // the thread was preempted during it), as the flows'
                    // byte counters are; a `tc` run (fork and exec, always
                    // milliseconds) at the middle of its span.
                    let (t_mid, stats) = if matches!(reader, Reader::Netlink(..)) {
                        bloatlab_host::clock::stamped(sys::unix_ns, || reader.read(ns))
                    } else {
                        let t0 = sys::unix_ns();
                        let s = reader.read(ns);
                        (t0 + (sys::unix_ns() - t0) / 2, s)
                    };
                    let Some(stats) = stats else { continue };
                    for (t, kind, samples) in series.iter_mut().filter(|(t, _, _)| &t.netns == ns) {
                        if let Some((_, s)) = stats.iter().find(|(d, _)| *d == t.dev) {
                            let mut q = s.sample;
                            q.t_ns = t_mid;
                            samples.push(q);
                            if kind.is_empty() {
                                *kind = s.kind.clone();
                            }
                        }
                    }
                }
                let newest = series
                    .iter()
                    .filter(|(t, _, _)| t.role.starts_with("bottleneck"))
                    .filter_map(|(_, _, s)| s.last().map(|q| q.backlog_packets))
                    .max();
                if let Some(b) = newest {
                    bl.store(b, Ordering::Relaxed);
                }
                if st.load(Ordering::SeqCst) {
                    break;
                }
                tick += 1;
                let next = start + interval * tick;
                while Instant::now() < next {
                    if st.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep((next - Instant::now()).min(Duration::from_millis(20)));
                }
            }
            (series, method)
        });
        Sampler { stop, handle: Some(handle), backlog }
    }

    /// The largest bottleneck backlog (packets) in the newest sample, if any.
    pub fn backlog_packets(&self) -> Option<u64> {
        Some(self.backlog.load(Ordering::Relaxed)).filter(|b| *b != u64::MAX)
    }

    /// Stop (after one last sample) and convert stamps to test time: ns since `start_unix_ns`.
    /// Samples taken before the test started are dropped. Also returns how the
    /// queues were read ("netlink" or "tc").
    pub fn finish(mut self, start_unix_ns: u64) -> (Vec<QueueSeries>, String) {
        self.stop.store(true, Ordering::SeqCst);
        let (series, method) = self.handle.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let series = series
            .into_iter()
            .map(|(t, kind, samples)| QueueSeries {
                role: t.role.clone(),
                location: format!("{}/{}", t.netns, t.dev),
                qdisc: kind,
                samples: samples
                    .into_iter()
                    .filter(|s| s.t_ns >= start_unix_ns)
                    .map(|mut s| {
                        s.t_ns -= start_unix_ns;
                        s
                    })
                    .collect(),
            })
            .collect();
        (series, method)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
