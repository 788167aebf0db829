//! What a run tells about itself for the job's report (`graphflat report`): its times, sizes,
//! memory and the distributions a person looks at first. A stage keeps them in its manifest
//! (`_SUCCESS`), so the report of an output always describes the run that committed it.

use serde::{Deserialize, Serialize};

/// A run's facts, as its summary printed them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFacts {
    /// From the stage's start to its commit.
    pub seconds: f64,
    /// Workers in all, over every process.
    pub workers: usize,
    /// Peak resident memory of each process (process 0 first) that reported it, in bytes (0:
    /// unknown).
    pub peak_rss: Vec<u64>,
    /// Seconds in each phase (or epoch), in order.
    pub phases: Vec<(String, f64)>,
    /// The summary's own lines, `(label, text)`.
    pub lines: Vec<(String, String)>,
    pub histograms: Vec<Histogram>,
}

/// Counts of values in bins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// What is measured ("in-degree").
    pub name: String,
    /// What is counted ("nodes").
    pub of: String,
    pub bins: Bins,
    pub counts: Vec<u64>,
    /// Values marked on the chart, `(label, value)` (the hub threshold).
    pub marks: Vec<(String, f64)>,
}

/// How a histogram's values fall into bins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bins {
    /// Bin 0 holds 0; bin `i > 0` holds `[2^(i-1), 2^i)`: sizes and degrees, drawn log-log.
    Log2,
    /// `counts.len()` equal bins over `[lo, hi]` (the last one closed): scores.
    Linear { lo: f64, hi: f64 },
    /// One bin per named category (a class).
    Categories(Vec<String>),
}

impl Histogram {
    pub fn new(name: &str, of: &str, bins: Bins, counts: Vec<u64>) -> Self {
        Histogram { name: name.into(), of: of.into(), bins, counts, marks: Vec::new() }
    }

    pub fn with_mark(mut self, label: &str, value: f64) -> Self {
        self.marks.push((label.into(), value));
        self
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The lower bound of bin `i` (the category's index for categories).
    pub fn lower(&self, i: usize) -> f64 {
        match &self.bins {
            Bins::Log2 if i == 0 => 0.0,
            Bins::Log2 => (1u64 << (i - 1).min(63)) as f64,
            Bins::Linear { lo, hi } => lo + (hi - lo) * i as f64 / self.counts.len().max(1) as f64,
            Bins::Categories(_) => i as f64,
        }
    }
}

/// Counts of values in [`Bins::Log2`] bins, as a run adds them up.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Log2Counts(pub Vec<u64>);

impl Log2Counts {
    /// The bin of `value`: 0 for 0, else one more than its highest set bit.
    pub fn bin(value: u64) -> usize {
        (u64::BITS - value.leading_zeros()) as usize
    }

    pub fn add(&mut self, value: u64) {
        let bin = Self::bin(value);
        if self.0.len() <= bin {
            self.0.resize(bin + 1, 0);
        }
        self.0[bin] += 1;
    }

    pub fn merge(&mut self, other: &Log2Counts) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine += theirs;
        }
    }

    /// The sum of every worker's counts.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Log2Counts>) -> Log2Counts {
        let mut total = Log2Counts::default();
        for counts in all {
            total.merge(counts);
        }
        total
    }

    pub fn histogram(self, name: &str, of: &str) -> Histogram {
        Histogram::new(name, of, Bins::Log2, self.0)
    }
}

/// Counts of values in `bins` equal bins over `[lo, hi]`; values outside (and NaN) go to the
/// nearest end.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LinearCounts(pub Vec<u64>);

impl LinearCounts {
    pub fn new(bins: usize) -> Self {
        LinearCounts(vec![0; bins])
    }

    pub fn add(&mut self, value: f64, lo: f64, hi: f64) {
        let n = self.0.len();
        if n == 0 {
            return;
        }
        let at = ((value - lo) / (hi - lo) * n as f64).floor();
        let bin = if at.is_nan() { 0 } else { at.clamp(0.0, (n - 1) as f64) as usize };
        self.0[bin] += 1;
    }

    pub fn merge(&mut self, other: &LinearCounts) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine += theirs;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_bins_hold_their_powers_of_two() {
        let mut counts = Log2Counts::default();
        for v in [0, 1, 2, 3, 4, 7, 8, u64::MAX] {
            counts.add(v);
        }
        assert_eq!(&counts.0[..5], &[1, 1, 2, 2, 1]);
        assert_eq!(counts.0.len(), 65);
        let histogram = counts.clone().histogram("in-degree", "nodes");
        // Every value lies in [lower(bin), lower(bin + 1)).
        for v in [1u64, 2, 3, 5, 1000, 1 << 40] {
            let bin = Log2Counts::bin(v);
            assert!(histogram.lower(bin) <= v as f64 && (v as f64) < histogram.lower(bin + 1), "{v}");
        }
        let mut twice = counts.clone();
        twice.merge(&counts);
        assert_eq!(twice.0.iter().sum::<u64>(), 16);
    }

    #[test]
    fn linear_bins_clamp_the_ends() {
        let mut counts = LinearCounts::new(4);
        for v in [-1.0, 0.0, 0.3, 0.5, 0.99, 1.0, 2.0, f64::NAN] {
            counts.add(v, 0.0, 1.0);
        }
        assert_eq!(counts.0, [3, 1, 1, 3]);
    }
}
