//! Counters every worker of a process updates, and the lines that report them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Process-wide counters for the flatten rounds.
#[derive(Debug)]
pub struct Progress {
    pub started: Instant,
    /// Targets this process's workers will flatten.
    pub targets: AtomicU64,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    /// Requests served per round (hop 0 ..= k).
    pub requests: Vec<AtomicU64>,
    last_report: AtomicU64,
}

impl Progress {
    pub fn new(hops: usize) -> Self {
        Progress {
            started: Instant::now(),
            targets: AtomicU64::new(0),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            requests: (0..=hops).map(|_| AtomicU64::new(0)).collect(),
            last_report: AtomicU64::new(0),
        }
    }

    /// Logs a progress line at most every `every`; returns whether it did.
    pub fn report(&self, every: Duration, force: bool) -> bool {
        let elapsed = self.started.elapsed();
        let last = self.last_report.load(Ordering::Relaxed);
        if !force && elapsed.as_millis() as u64 - last < every.as_millis() as u64 {
            return false;
        }
        self.last_report.store(elapsed.as_millis() as u64, Ordering::Relaxed);
        let records = self.records.load(Ordering::Relaxed);
        let targets = self.targets.load(Ordering::Relaxed).max(1);
        let bytes = self.bytes.load(Ordering::Relaxed);
        let secs = elapsed.as_secs_f64().max(1e-9);
        let rate = records as f64 / secs;
        let eta = if rate > 0.0 {
            format!("{:.0}s", targets.saturating_sub(records) as f64 / rate)
        } else {
            "unknown".into()
        };
        let rounds: Vec<String> = self.requests.iter().map(|r| r.load(Ordering::Relaxed).to_string()).collect();
        tracing::info!(
            "flatten: {records}/{targets} records ({:.0}%), {:.1} MB written, {:.0} records/s, ETA {}; requests per round [{}]",
            100.0 * records as f64 / targets as f64,
            bytes as f64 / 1e6,
            rate,
            eta,
            rounds.join(", ")
        );
        true
    }
}
