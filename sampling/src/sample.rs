//! Hash-keyed samplers. Every in-edge of a node gets a key from (seed, dst, src, weight); a node
//! keeps the in-edges with the smallest keys. Because a key depends on nothing else, samples
//! taken on disjoint parts of a node's in-edges (re-indexed hubs) merge exactly, and fanouts
//! that differ by layer give nested samples: the edges of a smaller fanout are a prefix of a
//! larger one's.
//!
//! Parallel edges (the same src, dst and weight) share a key; their features, when the edge
//! table has them, break the tie, so which of them a node keeps, and in which order, depends only
//! on the edges' content and never on the order they arrived in.

use std::cmp::Ordering;

use schemas::Sampler;
use serde::{Deserialize, Serialize};

use cluster::hash::{hash3, mix64, unit_interval};

/// One in-edge of a node, with its sampling key and a payload that takes no part in the order
/// (the edge's features on a hub's reducers, its place in the owner's runs, nothing in tests).
/// Ordered by (key, tie, src, weight, features): a total order over the edge's content, in
/// which smaller is kept first. `features` is [`feature_hash`] of the edge's features (0
/// without): candidates that compare equal are edges of equal content (up to a 64-bit hash
/// collision), interchangeable, so it does not matter which of them a selection keeps.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Candidate<P = ()> {
    pub key: f64,
    pub tie: u64,
    pub src: i64,
    pub weight: f32,
    pub features: u64,
    pub payload: P,
}

impl Candidate {
    /// The candidate of an in-edge without features.
    pub fn new(sampler: Sampler, seed: u64, dst: i64, src: i64, weight: f32) -> Self {
        Candidate::carrying(sampler, seed, dst, src, weight, &[], ())
    }
}

impl<P> Candidate<P> {
    /// The candidate of an in-edge with `features` (empty: none), carrying `payload`. The key
    /// does not depend on the features: a graph without them samples as one with them.
    pub fn carrying(
        sampler: Sampler,
        seed: u64,
        dst: i64,
        src: i64,
        weight: f32,
        features: &[f32],
        payload: P,
    ) -> Self {
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
        Candidate { key, tie, src, weight, features: feature_hash(features), payload }
    }

    /// The same candidate without its payload.
    pub fn bare(&self) -> Candidate {
        let Candidate { key, tie, src, weight, features, .. } = *self;
        Candidate { key, tie, src, weight, features, payload: () }
    }
}

/// A 64-bit hash of an edge's feature bits, the last tie-break of [`Candidate`]'s order; 0 for
/// an edge without features.
pub fn feature_hash(features: &[f32]) -> u64 {
    if features.is_empty() {
        return 0;
    }
    features.iter().fold(mix64(features.len() as u64), |h, v| mix64(h ^ u64::from(v.to_bits())))
}

impl<P> Ord for Candidate<P> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key
            .total_cmp(&other.key)
            .then(self.tie.cmp(&other.tie))
            .then(self.src.cmp(&other.src))
            .then(self.weight.total_cmp(&other.weight))
            .then(self.features.cmp(&other.features))
    }
}

impl<P> PartialOrd for Candidate<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<P> PartialEq for Candidate<P> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<P> Eq for Candidate<P> {}

/// Keeps the `limit` smallest candidates pushed into it, in O(limit) memory: candidates are
/// buffered, and when the buffer holds half as many again as `limit` (at least 8 more) the
/// smallest `limit` are selected in linear time. That is amortized O(1) a push, where a heap
/// costs O(log limit), and with no limit (`sampler = "all"`) a push is a plain append.
#[derive(Debug, Clone)]
pub struct Reservoir<P = ()> {
    limit: usize,
    kept: Vec<Candidate<P>>,
}

impl<P> Reservoir<P> {
    pub fn new(limit: usize) -> Self {
        Reservoir { limit, kept: Vec::new() }
    }

    pub fn push(&mut self, candidate: Candidate<P>) {
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
    pub fn into_sorted(mut self) -> Vec<Candidate<P>> {
        keep_best(&mut self.kept, self.limit);
        self.kept
    }
}

/// Sorts the `limit` smallest of `candidates` to its front and drops the rest: the best
/// `limit`, best first (the order is total, so which ones is well defined).
pub fn keep_best<P>(candidates: &mut Vec<Candidate<P>>, limit: usize) {
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
            r.push(Candidate { key, tie: 0, src: i as i64, weight: 1.0, features: 0, payload: () });
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

    /// A hub's in-edges, some of them parallel (same src and weight) with different features.
    fn edges_with_features() -> Vec<(i64, f32, Vec<f32>)> {
        (0..600).map(|i| (i % 150, 1.0 + (i % 3) as f32, vec![i as f32, -(i as f32) * 0.5])).collect()
    }

    fn sample_with_features(
        sampler: Sampler,
        edges: &[(i64, f32, Vec<f32>)],
        limit: usize,
    ) -> Vec<Candidate<Vec<f32>>> {
        let mut r = Reservoir::new(limit);
        for (src, w, f) in edges {
            r.push(Candidate::carrying(sampler, 3, 42, *src, *w, f, f.clone()));
        }
        r.into_sorted()
    }

    /// The kept edges as (src, weight bits, features bits), best first.
    fn content(kept: &[Candidate<Vec<f32>>]) -> Vec<(i64, u32, Vec<u32>)> {
        kept.iter().map(|c| (c.src, c.weight.to_bits(), c.payload.iter().map(|v| v.to_bits()).collect())).collect()
    }

    #[test]
    fn partial_samples_with_features_merge_exactly_whatever_the_grouping() {
        let edges = edges_with_features();
        for sampler in [Sampler::All, Sampler::Uniform, Sampler::Weighted, Sampler::Topk] {
            for limit in [1, 25, 1000] {
                let whole = content(&sample_with_features(sampler, &edges, limit));
                for parts in [2, 3, 7] {
                    let mut merged = Reservoir::new(limit);
                    for part in 0..parts {
                        let share: Vec<_> = edges.iter().skip(part).step_by(parts).rev().cloned().collect();
                        sample_with_features(sampler, &share, limit).into_iter().for_each(|c| merged.push(c));
                    }
                    assert_eq!(content(&merged.into_sorted()), whole, "{sampler:?}, limit {limit}, {parts} parts");
                }
            }
        }
    }

    #[test]
    fn parallel_edges_are_ordered_by_their_features() {
        // Three edges 5 -> 42 of weight 1, alike but for their features, in every arrival order.
        let parallel: Vec<(i64, f32, Vec<f32>)> =
            [[1.0, 2.0], [1.0, -2.0], [0.5, 2.0]].iter().map(|f| (5, 1.0, f.to_vec())).collect();
        for sampler in [Sampler::All, Sampler::Uniform, Sampler::Weighted, Sampler::Topk] {
            for limit in [1, 2, 3] {
                let first = content(&sample_with_features(sampler, &parallel, limit));
                assert_eq!(first.len(), limit);
                for order in [[2, 1, 0], [1, 0, 2], [0, 2, 1]] {
                    let shuffled: Vec<_> = order.iter().map(|&i| parallel[i].clone()).collect();
                    assert_eq!(content(&sample_with_features(sampler, &shuffled, limit)), first, "{sampler:?}");
                }
            }
        }
        assert_eq!(feature_hash(&[]), 0);
        assert_ne!(feature_hash(&[0.0]), feature_hash(&[-0.0]), "the hash is of the bits");
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
