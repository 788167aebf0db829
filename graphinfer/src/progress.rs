//! Progress lines for the rounds: nodes done in each phase (a layer, or the write), rate and
//! ETA, for the process. Every worker adds to the same counters; counters are per phase, so a
//! worker that starts a phase early never resets another's count.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Progress {
    names: Vec<String>,
    total: Vec<AtomicU64>,
    done: Vec<AtomicU64>,
    started: Vec<Mutex<Option<Instant>>>,
    last: Mutex<Instant>,
}

impl Progress {
    /// Phases `layer 1/k` ..= `layer k/k`, then `write`.
    pub fn new(hops: usize) -> Self {
        let names: Vec<String> = (1..=hops).map(|l| format!("layer {l}/{hops}")).chain(["write".to_owned()]).collect();
        Progress {
            total: names.iter().map(|_| AtomicU64::new(0)).collect(),
            done: names.iter().map(|_| AtomicU64::new(0)).collect(),
            started: names.iter().map(|_| Mutex::new(None)).collect(),
            names,
            last: Mutex::new(Instant::now()),
        }
    }

    /// The index of the write phase.
    pub fn write_phase(&self) -> usize {
        self.names.len() - 1
    }

    /// A worker's share of phase `p`'s work.
    pub fn add_total(&self, p: usize, n: u64) {
        if let Ok(mut started) = self.started[p].lock() {
            started.get_or_insert_with(Instant::now);
        }
        self.total[p].fetch_add(n, Ordering::Relaxed);
    }

    pub fn advance(&self, p: usize, n: u64) {
        self.done[p].fetch_add(n, Ordering::Relaxed);
    }

    /// Logs phase `p`'s line if `every` has passed since the last line (or when `force`).
    pub fn report(&self, p: usize, every: Duration, force: bool) {
        let Ok(mut last) = self.last.lock() else { return };
        if !force && last.elapsed() < every {
            return;
        }
        *last = Instant::now();
        let seconds = self.started[p].lock().ok().and_then(|s| *s).map_or(0.0, |s| s.elapsed().as_secs_f64()).max(1e-9);
        let (done, total) = (self.done[p].load(Ordering::Relaxed), self.total[p].load(Ordering::Relaxed));
        let rate = done as f64 / seconds;
        let eta =
            if rate > 0.0 { format!("{:.0}s", total.saturating_sub(done) as f64 / rate) } else { "unknown".into() };
        tracing::info!(
            "infer: {}: {done}/{total} nodes ({:.0}%), {:.0} nodes/s, ETA {eta}",
            self.names[p],
            100.0 * done as f64 / total.max(1) as f64,
            rate
        );
    }
}
