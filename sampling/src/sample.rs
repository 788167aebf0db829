//! Hash-keyed samplers. Every in-edge of a node gets a key from (seed, dst, src, weight); a node
//! keeps the in-edges with the smallest keys. Because a key depends on nothing else, samples
//! taken on disjoint parts of a node's in-edges (re-indexed hubs) merge exactly, and fanouts
//! that differ by layer give nested samples: the edges of a smaller fanout are a prefix of a
//! larger one's.

use std::cmp::Ordering;

use schemas::Sampler;
use serde::{Deserialize, Serialize};

use cluster::hash::{hash3, unit_interval};

/// One in-edge of a node, with its sampling key. Ordered by (key, tie, src, weight): a total
/// order in which smaller is kept first.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Candidate {
    pub key: f64,
    pub tie: u64,
    pub src: i64,
    pub weight: f32,
}

impl Candidate {
    pub fn new(sampler: Sampler, seed: u64, dst: i64, src: i64, weight: f32) -> Self {
        let tie = hash3(seed, dst as u64, src as u64);
        let key = match sampler {
            // Every edge is kept; the key only fixes an order.
            Sampler::All => 0.0,
            Sampler::Uniform => unit_interval(tie),
            // Efraimidis-Spirakis: keeping the smallest -ln(u)/w samples without replacement
            // with probability proportional to w.
            Sampler::Weighted => -unit_interval(tie).ln() / f64::from(weight),
            Sampler::Topk => -f64::from(weight),
        };
        Candidate { key, tie, src, weight }
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key
            .total_cmp(&other.key)
            .then(self.tie.cmp(&other.tie))
            .then(self.src.cmp(&other.src))
            .then(self.weight.total_cmp(&other.weight))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

/// Keeps the `limit` smallest candidates pushed into it, in O(limit) memory: candidates are
/// buffered, and when the buffer holds half as many again as `limit` (at least 8 more) the
/// smallest `limit` are selected in linear time. That is amortized O(1) a push, where a heap
/// costs O(log limit), and with no limit (`sampler = "all"`) a push is a plain append.
#[derive(Debug, Clone)]
pub struct Reservoir {
    limit: usize,
    kept: Vec<Candidate>,
}

impl Reservoir {
    pub fn new(limit: usize) -> Self {
        Reservoir { limit, kept: Vec::new() }
    }

    pub fn push(&mut self, candidate: Candidate) {
        self.kept.push(candidate);
        if self.kept.len() >= self.limit.saturating_add((self.limit / 2).max(8)) {
            self.trim();
        }
    }

    /// Keeps the `limit` smallest. The order is total, so which ones is well defined.
    fn trim(&mut self) {
        if self.kept.len() > self.limit {
            self.kept.select_nth_unstable(self.limit);
            self.kept.truncate(self.limit);
        }
    }

    /// The kept candidates, best first.
    pub fn into_sorted(mut self) -> Vec<Candidate> {
        keep_best(&mut self.kept, self.limit);
        self.kept
    }
}

/// Sorts the `limit` smallest of `candidates` to its front and drops the rest: the best
/// `limit`, best first (the order is total, so which ones is well defined).
pub fn keep_best(candidates: &mut Vec<Candidate>, limit: usize) {
    if candidates.len() > limit {
        candidates.select_nth_unstable(limit);
        candidates.truncate(limit);
    }
    candidates.sort_unstable();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sampler: Sampler, seed: u64, dst: i64, edges: &[(i64, f32)], limit: usize) -> Vec<i64> {
        let mut r = Reservoir::new(limit);
        for &(src, w) in edges {
            r.push(Candidate::new(sampler, seed, dst, src, w));
        }
        r.into_sorted().into_iter().map(|c| c.src).collect()
    }

    #[test]
    fn reservoir_keeps_the_smallest_in_order() {
        let mut r = Reservoir::new(3);
        for (i, key) in [5.0, 1.0, 4.0, 2.0, 3.0].into_iter().enumerate() {
            r.push(Candidate { key, tie: 0, src: i as i64, weight: 1.0 });
        }
        let kept: Vec<f64> = r.into_sorted().iter().map(|c| c.key).collect();
        assert_eq!(kept, vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn partial_samples_merge_exactly() {
        // A hub's in-edges split over 4 reducers, sampled there and merged, equal one sample.
        let edges: Vec<(i64, f32)> = (0..1000).map(|i| (i, 1.0 + (i % 7) as f32)).collect();
        for sampler in [Sampler::Uniform, Sampler::Weighted, Sampler::Topk] {
            let whole = sample(sampler, 3, 42, &edges, 25);
            let mut merged = Reservoir::new(25);
            for part in 0..4 {
                let mut partial = Reservoir::new(25);
                for &(src, w) in edges.iter().filter(|e| e.0 % 4 == part) {
                    partial.push(Candidate::new(sampler, 3, 42, src, w));
                }
                partial.into_sorted().into_iter().for_each(|c| merged.push(c));
            }
            let merged: Vec<i64> = merged.into_sorted().into_iter().map(|c| c.src).collect();
            assert_eq!(whole, merged, "{sampler:?}");
        }
    }

    /// Uniform: over 4000 seeds, each of 20 in-edges is kept at rate 5/20 = 0.25. The standard
    /// error of a rate over 4000 draws is sqrt(0.25 * 0.75 / 4000) = 0.0068; the tolerance is
    /// 5 standard errors (0.034).
    #[test]
    fn uniform_includes_each_edge_at_the_expected_rate() {
        let edges: Vec<(i64, f32)> = (100..120).map(|i| (i, 1.0)).collect();
        let seeds = 4000;
        let mut counts = [0u32; 20];
        for seed in 0..seeds {
            for src in sample(Sampler::Uniform, seed, 7, &edges, 5) {
                counts[(src - 100) as usize] += 1;
            }
        }
        for (i, &c) in counts.iter().enumerate() {
            let rate = f64::from(c) / seeds as f64;
            assert!((rate - 0.25).abs() < 0.034, "edge {i}: rate {rate}");
        }
    }

    /// Weighted with fanout 1: edge i is chosen with probability w_i / sum(w) exactly. Weights
    /// 1, 2, 3, 4 give 0.1, 0.2, 0.3, 0.4; over 10000 seeds the standard error is at most
    /// 0.0049, the tolerance 5 standard errors (0.025).
    #[test]
    fn weighted_favors_heavier_edges_in_proportion() {
        let edges = [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)];
        let seeds = 10_000;
        let mut counts = [0u32; 4];
        for seed in 0..seeds {
            let chosen = sample(Sampler::Weighted, seed, 9, &edges, 1);
            counts[(chosen[0] - 1) as usize] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            let expected = (i + 1) as f64 / 10.0;
            let rate = f64::from(c) / seeds as f64;
            assert!((rate - expected).abs() < 0.025, "weight {}: rate {rate}, expected {expected}", i + 1);
        }
    }

    /// Weighted with fanout 2 of 6: inclusion still rises with weight, monotonically, and the
    /// heaviest edge is included far more often than the lightest.
    #[test]
    fn weighted_inclusion_rises_with_weight() {
        let edges: Vec<(i64, f32)> = (1..=6).map(|i| (i, i as f32)).collect();
        let mut counts = [0u32; 6];
        for seed in 0..6000 {
            for src in sample(Sampler::Weighted, seed, 1, &edges, 2) {
                counts[(src - 1) as usize] += 1;
            }
        }
        assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
        assert!(counts[5] > 3 * counts[0], "{counts:?}");
    }

    #[test]
    fn topk_keeps_exactly_the_heaviest() {
        let edges: Vec<(i64, f32)> = (0..50).map(|i| (i, ((i * 37) % 50) as f32 + 0.5)).collect();
        let mut kept = sample(Sampler::Topk, 1, 0, &edges, 7);
        kept.sort();
        let mut heaviest: Vec<(i64, f32)> = edges.clone();
        heaviest.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut expected: Vec<i64> = heaviest[..7].iter().map(|e| e.0).collect();
        expected.sort();
        assert_eq!(kept, expected);
    }
}
