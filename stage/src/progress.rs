//! Progress lines for a stage's long phases: items done of the total, rate and ETA, for the
//! process. Every worker of the process adds to the same counters. Counters are per phase, so a
//! worker that starts a phase early never resets another's count; a phase's rate is measured
//! from when its first worker announced its share.
//!
//! A line reads `flatten: rounds: 1200/10000 records (12%), 3.1 MB written, 8000 records/s,
//! ETA 1s; requests per round [10000, 40000, 0]`: the bytes appear once a body counts some,
//! the tally (a labelled counter per index) when the stage declared one.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Progress {
    stage: &'static str,
    /// What is counted: `records`, `nodes`.
    unit: &'static str,
    names: Vec<String>,
    total: Vec<AtomicU64>,
    done: Vec<AtomicU64>,
    started: Vec<Mutex<Option<Instant>>>,
    bytes: AtomicU64,
    tally: Option<(&'static str, Vec<AtomicU64>)>,
    last: Mutex<Instant>,
}

impl Progress {
    /// Progress of `stage` through the named phases, counting `unit`.
    pub fn new(stage: &'static str, unit: &'static str, phases: Vec<String>) -> Self {
        let counters = || phases.iter().map(|_| AtomicU64::new(0)).collect();
        Progress {
            stage,
            unit,
            total: counters(),
            done: counters(),
            started: phases.iter().map(|_| Mutex::new(None)).collect(),
            names: phases,
            bytes: AtomicU64::new(0),
            tally: None,
            last: Mutex::new(Instant::now()),
        }
    }

    /// Adds a labelled counter per index (`requests per round`), shown at the end of each line.
    pub fn with_tally(mut self, label: &'static str, len: usize) -> Self {
        self.tally = Some((label, (0..len).map(|_| AtomicU64::new(0)).collect()));
        self
    }

    /// The stage's name, for log lines.
    pub fn stage(&self) -> &'static str {
        self.stage
    }

    /// The index of the last phase.
    pub fn last_phase(&self) -> usize {
        self.names.len() - 1
    }

    /// A worker's share of phase `p`'s work; starts the phase's clock.
    pub fn add_total(&self, p: usize, n: u64) {
        if let Ok(mut started) = self.started[p].lock() {
            started.get_or_insert_with(Instant::now);
        }
        self.total[p].fetch_add(n, Ordering::Relaxed);
    }

    pub fn advance(&self, p: usize, n: u64) {
        self.done[p].fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes written, added as they are.
    pub fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds `n` to the tally's counter `i` (ignored without a tally).
    pub fn count(&self, i: usize, n: u64) {
        if let Some(counter) = self.tally.as_ref().and_then(|(_, counters)| counters.get(i)) {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Logs phase `p`'s line if `every` has passed since the last line (or when `force`).
    pub fn report(&self, p: usize, every: Duration, force: bool) {
        let Ok(mut last) = self.last.lock() else { return };
        if !force && last.elapsed() < every {
            return;
        }
        *last = Instant::now();
        tracing::info!("{}", self.line(p));
    }

    /// Phase `p`'s line, as [`Progress::report`] logs it.
    pub fn line(&self, p: usize) -> String {
        let seconds = self.started[p].lock().ok().and_then(|s| *s).map_or(0.0, |s| s.elapsed().as_secs_f64()).max(1e-9);
        let (done, total) = (self.done[p].load(Ordering::Relaxed), self.total[p].load(Ordering::Relaxed));
        let rate = done as f64 / seconds;
        let eta =
            if rate > 0.0 { format!("{:.0}s", total.saturating_sub(done) as f64 / rate) } else { "unknown".into() };
        let bytes = match self.bytes.load(Ordering::Relaxed) {
            0 => String::new(),
            b => format!(", {:.1} MB written", b as f64 / 1e6),
        };
        let tally = self.tally.as_ref().map_or(String::new(), |(label, counters)| {
            let counts: Vec<String> = counters.iter().map(|c| c.load(Ordering::Relaxed).to_string()).collect();
            format!("; {label} [{}]", counts.join(", "))
        });
        format!(
            "{}: {}: {done}/{total} {unit} ({:.0}%){bytes}, {rate:.0} {unit}/s, ETA {eta}{tally}",
            self.stage,
            self.names[p],
            100.0 * done as f64 / total.max(1) as f64,
            unit = self.unit,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_counts_every_worker_and_shows_bytes_and_the_tally() {
        let progress = Progress::new("flatten", "records", vec!["rounds".into()]).with_tally("requests per round", 2);
        progress.add_total(0, 30);
        progress.add_total(0, 10);
        progress.advance(0, 10);
        progress.count(1, 7);
        progress.count(5, 1);
        let line = progress.line(0);
        assert!(line.starts_with("flatten: rounds: 10/40 records (25%), "), "{line}");
        assert!(line.ends_with("; requests per round [0, 7]"), "{line}");
        assert!(!line.contains("written"), "{line}");
        progress.add_bytes(2_500_000);
        assert!(progress.line(0).contains(", 2.5 MB written, "));
    }
}
