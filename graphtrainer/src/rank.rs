//! Ranking metrics of a link model on one split, from every positive's score and its own
//! negatives' scores (see docs/graphtrainer.md, "Link prediction"):
//!
//! - **AUC**: over all positive and all negative scores of the split, the share of
//!   (positive, negative) pairs where the positive scores higher, ties counting 1/2;
//! - **MRR**: the mean over positives of `1 / rank`, the positive ranked among itself and its
//!   own negatives, ties counting 1/2 (OGB's `0.5 (optimistic + pessimistic) + 1`);
//! - **Hits@K** (OGB's): the share of positives scoring above the K-th highest negative score
//!   of the split (1 when the split has fewer than K negatives).
//!
//! Every metric is NaN when the split has no positive or no negative. Each is a function of
//! the multiset of records alone, computed from integer counts (MRR's sum runs over the
//! distinct ranks in order), so the result does not depend on the order in which workers
//! deliver the records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One split's ranking metrics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RankScores {
    pub auc: f64,
    pub mrr: f64,
    pub hits10: f64,
    pub hits50: f64,
}

impl RankScores {
    pub const NONE: RankScores = RankScores { auc: f64::NAN, mrr: f64::NAN, hits10: f64::NAN, hits50: f64::NAN };

    /// Each metric with its name in `metrics.jsonl` (after the split's prefix).
    pub fn named(&self) -> [(&'static str, f64); 4] {
        [("auc", self.auc), ("mrr", self.mrr), ("hits@10", self.hits10), ("hits@50", self.hits50)]
    }

    /// The metrics of `records`: each positive's score with its own negatives' scores.
    pub fn of(records: &[(f32, Vec<f32>)]) -> RankScores {
        let mut negatives: Vec<f32> = records.iter().flat_map(|(_, n)| n.iter().copied()).collect();
        if records.is_empty() || negatives.is_empty() {
            return RankScores::NONE;
        }
        negatives.sort_by(f32::total_cmp);
        let positives = records.len() as f64;
        RankScores {
            auc: auc(records, &negatives),
            mrr: mrr(records) / positives,
            hits10: hits(records, &negatives, 10),
            hits50: hits(records, &negatives, 50),
        }
    }
}

/// `sorted`: every negative, ascending.
fn auc(records: &[(f32, Vec<f32>)], sorted: &[f32]) -> f64 {
    // Twice the wins: 2 per negative below, 1 per tie.
    let twice: u128 = records
        .iter()
        .map(|&(p, _)| {
            let (below, up_to) = (sorted.partition_point(|&n| n < p), sorted.partition_point(|&n| n <= p));
            (below + up_to) as u128
        })
        .sum();
    twice as f64 / (2.0 * records.len() as f64 * sorted.len() as f64)
}

/// The sum of reciprocal ranks.
fn mrr(records: &[(f32, Vec<f32>)]) -> f64 {
    // Twice the rank, 2 + 2 (negatives above) + (ties), is an integer: count positives by it.
    let mut by_rank: BTreeMap<u64, u64> = BTreeMap::new();
    for (p, own) in records {
        let above = own.iter().filter(|&&n| n > *p).count() as u64;
        let ties = own.iter().filter(|&&n| n == *p).count() as u64;
        *by_rank.entry(2 + 2 * above + ties).or_default() += 1;
    }
    by_rank.iter().map(|(&twice, &count)| count as f64 * 2.0 / twice as f64).sum()
}

/// `sorted`: every negative, ascending.
fn hits(records: &[(f32, Vec<f32>)], sorted: &[f32], k: usize) -> f64 {
    if sorted.len() < k {
        return 1.0;
    }
    let kth = sorted[sorted.len() - k];
    records.iter().filter(|&&(p, _)| p > kth).count() as f64 / records.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definitions, pair by pair.
    fn naive(records: &[(f32, Vec<f32>)]) -> RankScores {
        let all: Vec<f32> = records.iter().flat_map(|(_, n)| n.clone()).collect();
        let mut wins = 0.0;
        for (p, _) in records {
            for n in &all {
                wins += if p > n {
                    1.0
                } else if p == n {
                    0.5
                } else {
                    0.0
                };
            }
        }
        let mut rr = 0.0;
        for (p, own) in records {
            let rank = 1.0
                + own
                    .iter()
                    .map(|n| {
                        if n > p {
                            1.0
                        } else if n == p {
                            0.5
                        } else {
                            0.0
                        }
                    })
                    .sum::<f64>();
            rr += 1.0 / rank;
        }
        let hits = |k: usize| {
            let mut desc = all.clone();
            desc.sort_by(|a, b| b.total_cmp(a));
            if desc.len() < k {
                return 1.0;
            }
            records.iter().filter(|(p, _)| *p > desc[k - 1]).count() as f64 / records.len() as f64
        };
        let n = records.len() as f64;
        RankScores { auc: wins / (n * all.len() as f64), mrr: rr / n, hits10: hits(10), hits50: hits(50) }
    }

    #[test]
    fn metrics_match_their_definitions_with_ties() {
        let mut s = gnn::rng::Stream::new(&[5]);
        // Scores on a coarse grid, so that ties are frequent.
        let mut draw = || (s.next_u64() % 9) as f32 / 4.0 - 1.0;
        for (records, negatives) in [(3, 2), (40, 1), (30, 3), (7, 0)] {
            let set: Vec<(f32, Vec<f32>)> =
                (0..records).map(|_| (draw(), (0..negatives).map(|_| draw()).collect())).collect();
            let (got, want) = (RankScores::of(&set), naive(&set));
            if negatives == 0 {
                assert!(got.auc.is_nan() && got.mrr.is_nan());
                continue;
            }
            for (g, w) in
                [(got.auc, want.auc), (got.mrr, want.mrr), (got.hits10, want.hits10), (got.hits50, want.hits50)]
            {
                assert!((g - w).abs() < 1e-12, "{records} x {negatives}: {got:?} vs {want:?}");
            }
            // The order of the records changes nothing, bit for bit.
            let reversed: Vec<_> = set.iter().rev().cloned().collect();
            assert_eq!(format!("{:?}", RankScores::of(&reversed)), format!("{got:?}"));
        }
        // A perfect ranking.
        let perfect = RankScores::of(&[(2.0, vec![1.0]), (3.0, vec![0.0])]);
        assert_eq!((perfect.auc, perfect.mrr, perfect.hits10), (1.0, 1.0, 1.0));
    }
}
