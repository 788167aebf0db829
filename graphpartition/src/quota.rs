//! Which moves a refinement round makes, decided the same way on every worker from the
//! round's demand, so that no part ever passes its cap.
//!
//! Each node that would gain by moving from part `p` to part `q` counts its weight under a
//! [`Move`] key: `(p, q)`, its gain's [`bucket`] and a hash of the node into one of
//! [`SUBS`] groups. The keys' weights are summed over every worker (a small table: at most
//! `parts² × 128 × SUBS` keys, usually far fewer) and [`plan`] accepts whole keys, best gain
//! first, while the target part stays within its cap. Because a key is accepted whole and its
//! weight is the exact sum of its nodes' weights, every part's size after the round is known
//! before any node moves, and stays within the cap: the balance holds by construction, not by
//! chance (Spinner's probabilistic migration may overshoot). A move out of a part frees room
//! that a later pass over the keys may fill, so two parts at their caps can still swap nodes.

use serde::{Deserialize, Serialize};

/// Hash groups per (move, bucket): how finely a bucket can be cut when its target is nearly
/// full.
pub const SUBS: u8 = 16;

/// Passes over the keys: each may accept keys that earlier moves made room for.
const PASSES: usize = 4;

/// A group of candidate moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Move {
    /// A move out of a part over its cap, which may lose edges: accepted only while its part
    /// is over the cap, after every gaining move. Its bucket is [`loss_bucket`].
    pub forced: bool,
    pub from: u32,
    pub to: u32,
    pub bucket: u8,
    pub sub: u8,
}

/// A gain's bucket, increasing with the gain: two per power of two (positive gains only).
pub fn bucket(gain: u64) -> u8 {
    debug_assert!(gain > 0);
    let log = 63 - gain.leading_zeros() as u8;
    let half = if log > 0 { ((gain >> (log - 1)) & 1) as u8 } else { 0 };
    2 * log + half
}

/// A forced move's bucket: the smaller the loss (edges to its part minus edges to the
/// target), the higher.
pub fn loss_bucket(loss: u64) -> u8 {
    u8::MAX - bucket(loss + 1)
}

/// Sums per key the demand of every worker (each worker's list, concatenated).
pub fn total(mut demand: Vec<(Move, u64)>) -> Vec<(Move, u64)> {
    demand.sort_unstable();
    demand.dedup_by(|b, a| {
        a.0 == b.0 && {
            a.1 += b.1;
            true
        }
    });
    demand
}

/// The keys accepted from the summed `demand`, sorted, with the parts' sizes after them.
/// A key is accepted when its target stays within `cap` (and, forced, while its part is over
/// the cap); gaining keys are tried first, best bucket first (then by key), in up to
/// [`PASSES`] passes.
pub fn plan(sizes: &[u64], cap: u64, demand: &[(Move, u64)]) -> (Vec<Move>, Vec<u64>) {
    let mut sizes = sizes.to_vec();
    let mut order: Vec<&(Move, u64)> = demand.iter().collect();
    order.sort_unstable_by_key(|(m, _)| (m.forced, std::cmp::Reverse(m.bucket), m.sub, m.from, m.to));
    let mut taken = vec![false; order.len()];
    let mut accepted = Vec::new();
    for _ in 0..PASSES {
        let before = accepted.len();
        for (k, (m, w)) in order.iter().enumerate() {
            let wanted = !m.forced || sizes[m.from as usize] > cap;
            if !taken[k] && wanted && sizes[m.to as usize] + w <= cap {
                sizes[m.to as usize] += w;
                sizes[m.from as usize] -= w;
                taken[k] = true;
                accepted.push(*m);
            }
        }
        if accepted.len() == before {
            break;
        }
    }
    accepted.sort_unstable();
    (accepted, sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(from: u32, to: u32, gain: u64, sub: u8) -> Move {
        Move { forced: false, from, to, bucket: bucket(gain), sub }
    }

    #[test]
    fn forced_moves_go_only_while_their_part_is_over_the_cap() {
        // Part 0 is 3 over: of three forced keys of weight 2, the two least lossy go.
        let forced = |loss, sub| Move { forced: true, from: 0, to: 1, bucket: loss_bucket(loss), sub };
        let demand = total(vec![(forced(0, 0), 2), (forced(5, 1), 2), (forced(1, 2), 2)]);
        let (accepted, sizes) = plan(&[13, 4], 10, &demand);
        assert_eq!(accepted, vec![forced(1, 2), forced(0, 0)]);
        assert_eq!(sizes, vec![9, 8]);
    }

    #[test]
    fn buckets_grow_with_the_gain() {
        let buckets: Vec<u8> = (1..200u64).map(bucket).collect();
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!((bucket(1), bucket(2), bucket(3), bucket(4), bucket(6)), (0, 2, 3, 4, 5));
        assert!(bucket(u64::MAX) < 128);
    }

    #[test]
    fn no_part_passes_its_cap_and_the_best_gains_go_first() {
        // Part 1 has room for 3: the gain-8 key (weight 2) goes, the gain-1 key (weight 2) not.
        let demand = total(vec![(key(0, 1, 1, 0), 2), (key(0, 1, 8, 0), 1), (key(0, 1, 8, 0), 1)]);
        let (accepted, sizes) = plan(&[10, 7], 10, &demand);
        assert_eq!(accepted, vec![key(0, 1, 8, 0)]);
        assert_eq!(sizes, vec![8, 9]);
    }

    #[test]
    fn full_parts_swap_through_a_later_pass() {
        // Part 1 has no room for 0 -> 1 until 1 -> 0 has moved: it goes in the second pass,
        // and then the second 1 -> 0 key fits too.
        let demand = total(vec![(key(0, 1, 16, 0), 3), (key(1, 0, 2, 0), 3), (key(1, 0, 2, 1), 3)]);
        let (accepted, sizes_after) = plan(&[10, 11], 13, &demand);
        assert_eq!(accepted.len(), 3);
        assert_eq!(sizes_after, vec![13, 8]);
    }

    #[test]
    fn a_plan_holds_the_cap_for_any_demand() {
        // Random demands (a fixed generator): sizes stay within the cap and sum to the total.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            let parts = (next() % 6 + 2) as u32;
            let sizes: Vec<u64> = (0..parts).map(|_| next() % 50 + 500).collect();
            let cap = *sizes.iter().max().unwrap() + next() % 5;
            let demand: Vec<(Move, u64)> = (0..next() % 40)
                .map(|_| {
                    let from = (next() % u64::from(parts)) as u32;
                    let to = (from + 1 + (next() % u64::from(parts - 1)) as u32) % parts;
                    (key(from, to, next() % 30 + 1, (next() % 4) as u8), next() % 10 + 1)
                })
                .collect();
            let demand = total(demand);
            // Demand from a part stays below its size (400 at most against 500), as a node
            // demands a move out of its own part only.
            let (_, after) = plan(&sizes, cap, &demand);
            assert!(after.iter().all(|&s| s <= cap), "{sizes:?} -> {after:?} over {cap}");
            assert_eq!(after.iter().sum::<u64>(), sizes.iter().sum::<u64>());
        }
    }
}
