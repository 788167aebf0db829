//! What a stage reports at the end: every worker's [`WorkerStats`], gathered on every worker
//! into the job's [`Summary`]. The common facts (graph, phases, bytes, memory) are the
//! skeleton's; a stage adds its own per-worker facts (`X`) and the lines they make ([`Details`]).

use schemas::facts::{Histogram, Log2Counts, RunFacts};
use serde::{Deserialize, Serialize};
use tables::commit::{PartEntry, Stage};
use tables::staging::StagedPart;

/// What a body wrote on one worker, with its own facts `X`.
#[derive(Debug, Clone, Default)]
pub struct Written<X> {
    /// Rows written: the targets done.
    pub targets: u64,
    pub bytes: u64,
    pub parts: u32,
    /// This worker's finished parts, for the commit.
    pub entries: Vec<StagedPart>,
    /// This worker's finished parts of each extra output, in `Declared::extras` order.
    pub extra_entries: Vec<Vec<StagedPart>>,
    /// Parts of the version this run replaces that its manifest lists again, untouched (a
    /// refresh's): committed without a copy (`tables::commit::check_carried`).
    pub carried: Vec<PartEntry>,
    pub own: X,
}

/// What one worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WorkerStats<X> {
    pub worker: usize,
    /// Nodes and message-passing edges this worker loaded.
    pub nodes: u64,
    pub edges: u64,
    /// In-edges this worker's sampling reducers took in.
    pub reduced_edges: u64,
    pub targets: u64,
    pub bytes: u64,
    pub parts: u32,
    pub entries: Vec<StagedPart>,
    pub extra_entries: Vec<Vec<StagedPart>>,
    pub carried: Vec<PartEntry>,
    pub peak_rss: u64,
    /// In-degrees of this worker's nodes (message-passing edges).
    pub in_degrees: Log2Counts,
    pub own: X,
}

/// A stage's own lines in the summary.
pub trait Details: Sized {
    /// `(label, text)` pairs, shown after the phases.
    fn lines(&self, summary: &Summary<Self>) -> Vec<(&'static str, String)>;

    /// The stage's own distributions, for the report.
    fn histograms(&self) -> Vec<Histogram> {
        Vec::new()
    }
}

/// The job's summary, the same on every worker.
#[derive(Debug, Clone)]
pub struct Summary<D> {
    pub stage: Stage,
    pub workers: usize,
    /// The whole job, set by [`crate::execute`].
    pub seconds: f64,
    pub nodes: u64,
    pub edges: u64,
    /// Nodes re-indexed by the sampling (the same on every worker).
    pub hubs_reindexed: u64,
    /// In-edges taken in by the busiest sampling reducer over the mean: 1.0 is perfect balance.
    pub reducer_skew: f64,
    pub targets: u64,
    pub bytes: u64,
    pub parts: u64,
    /// Largest peak resident memory of any process.
    pub peak_rss: u64,
    /// Each worker's process's peak resident memory, in worker order.
    pub peak_rss_by_worker: Vec<u64>,
    /// In-degrees of every node.
    pub in_degrees: Log2Counts,
    /// Seconds in each phase.
    pub phases: Vec<(String, f64)>,
    pub details: D,
}

impl<D> Summary<D> {
    /// The common facts of every worker's stats; `details` are the stage's own.
    pub fn gather<X>(stage: Stage, all: &[WorkerStats<X>], hubs: u64, phases: Vec<(String, f64)>, details: D) -> Self {
        let sum = |f: fn(&WorkerStats<X>) -> u64| all.iter().map(f).sum::<u64>();
        let reducer_skew = {
            let max = all.iter().map(|s| s.reduced_edges).max().unwrap_or(0) as f64;
            let mean = sum(|s| s.reduced_edges) as f64 / all.len().max(1) as f64;
            if mean > 0.0 { max / mean } else { 1.0 }
        };
        Summary {
            stage,
            workers: all.len(),
            seconds: 0.0,
            nodes: sum(|s| s.nodes),
            edges: sum(|s| s.edges),
            hubs_reindexed: hubs,
            reducer_skew,
            targets: sum(|s| s.targets),
            bytes: sum(|s| s.bytes),
            parts: sum(|s| u64::from(s.parts)),
            peak_rss: all.iter().map(|s| s.peak_rss).max().unwrap_or(0),
            peak_rss_by_worker: all.iter().map(|s| s.peak_rss).collect(),
            in_degrees: Log2Counts::sum(all.iter().map(|s| &s.in_degrees)),
            phases,
            details,
        }
    }

    /// Targets done per second over the whole job.
    pub fn rate(&self) -> f64 {
        self.targets as f64 / self.seconds.max(1e-9)
    }

    /// The facts the manifest keeps for the report: `threads` workers a process, nodes with more
    /// in-edges than `hub_threshold` (0: none) re-indexed.
    pub fn facts(&self, seconds: f64, threads: usize, hub_threshold: u64) -> RunFacts
    where
        D: Details,
    {
        let threads = threads.max(1);
        let processes = self.workers.div_ceil(threads);
        let peak_rss = (0..processes)
            .map(|p| self.peak_rss_by_worker.iter().skip(p * threads).take(threads).copied().max().unwrap_or(0))
            .collect();
        let mut in_degrees = self.in_degrees.clone().histogram("in-degree", "nodes");
        if hub_threshold > 0 {
            in_degrees = in_degrees.with_mark("hub threshold", hub_threshold as f64);
        }
        let mut histograms = vec![in_degrees];
        histograms.extend(self.details.histograms());
        RunFacts {
            seconds,
            workers: self.workers,
            peak_rss,
            phases: self.phases.clone(),
            lines: self.details.lines(self).into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            histograms,
        }
    }

    /// Seconds of the named phase (0 if it did not run).
    pub fn phase(&self, name: &str) -> f64 {
        self.phases.iter().find(|p| p.0 == name).map_or(0.0, |p| p.1)
    }
}

impl<D: Details> std::fmt::Display for Summary<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = |f: &mut std::fmt::Formatter<'_>, label: &str, text: String| {
            writeln!(f, "  {:<14}{text}", format!("{label}:"))
        };
        let workers = if self.workers == 1 { "worker" } else { "workers" };
        writeln!(f, "{} finished in {:.2}s on {} {workers}", self.stage.name(), self.seconds, self.workers)?;
        line(
            f,
            "graph",
            format!(
                "{} nodes, {} edges, {} hubs re-indexed (busiest sampling reducer {:.2}x the mean)",
                self.nodes, self.edges, self.hubs_reindexed, self.reducer_skew
            ),
        )?;
        let phases: Vec<String> = self.phases.iter().map(|(name, s)| format!("{name} {s:.2}s")).collect();
        line(f, "phases", phases.join(", "))?;
        for (label, text) in self.details.lines(self) {
            line(f, label, text)?;
        }
        let seconds = self.seconds.max(1e-9);
        line(
            f,
            "written",
            format!(
                "{:.1} MB in {} part files ({:.1} MB/s)",
                self.bytes as f64 / 1e6,
                self.parts,
                self.bytes as f64 / 1e6 / seconds
            ),
        )?;
        write!(f, "  {:<14}{:.0} MB (largest process)", "peak memory:", self.peak_rss as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(u64);

    impl Details for Count {
        fn lines(&self, summary: &Summary<Self>) -> Vec<(&'static str, String)> {
            vec![("records", format!("{} targets, {} own", summary.targets, self.0))]
        }
    }

    #[test]
    fn gathers_sums_maxima_and_the_reducer_skew() {
        let worker = |w: usize, reduced: u64, rss: u64| WorkerStats {
            worker: w,
            nodes: 10,
            edges: 20,
            reduced_edges: reduced,
            targets: 3,
            bytes: 1000,
            parts: 1,
            peak_rss: rss,
            ..WorkerStats::<()>::default()
        };
        let all = [worker(0, 30, 5), worker(1, 10, 9)];
        let summary = Summary::gather(Stage::Flatten, &all, 4, vec![("map".into(), 0.5)], Count(7));
        assert_eq!((summary.nodes, summary.edges, summary.targets, summary.bytes, summary.parts), (20, 40, 6, 2000, 2));
        assert_eq!((summary.peak_rss, summary.workers, summary.hubs_reindexed), (9, 2, 4));
        assert!((summary.reducer_skew - 1.5).abs() < 1e-12);
        assert_eq!(summary.phase("map"), 0.5);
        let text = summary.to_string();
        assert!(text.contains("\n  graph:        20 nodes, 40 edges, 4 hubs re-indexed"), "{text}");
        assert!(text.contains("\n  records:      6 targets, 7 own\n"), "{text}");
        assert!(text.contains("\n  phases:       map 0.50s\n"), "{text}");
    }
}
