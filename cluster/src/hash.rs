//! Fixed, platform-independent hashing: the owner of a node and every sampling priority derive
//! from these, so results never depend on worker count, process count or message order.

use schemas::mix::GAMMA;
pub use schemas::mix::{IdHasher, IdMap, IdSet, mix64};

/// A hash of three words, order-sensitive.
pub fn hash3(a: u64, b: u64, c: u64) -> u64 {
    mix64(mix64(mix64(a ^ GAMMA) ^ b) ^ c)
}

/// The routing key of a node: timely sends a record keyed `k` to worker `k % peers`.
pub fn owner_key(node: i64) -> u64 {
    mix64(node as u64 ^ 0x5851_f42d_4c95_7f2d)
}

/// The routing key of a (possibly re-indexed) reducer: salt 0 is the node's owner, so a node
/// that is not a hub is reduced where it lives.
pub fn reducer_key(node: i64, salt: u64) -> u64 {
    owner_key(node).wrapping_add(salt)
}

/// A hash mapped to the open interval (0, 1). (52 bits: with 53, the largest value plus one
/// half rounds up to exactly 1.0.)
pub fn unit_interval(h: u64) -> f64 {
    ((h >> 12) as f64 + 0.5) / (1u64 << 52) as f64
}

/// What an edge's draw ([`edge_draw`]) decides. Each use hashes apart from the others and from
/// the sampler's keys (`hash3(seed, dst, src)`), so that one seed given to all of them leaves
/// them independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeDraw {
    /// The split `graphflat split-edges` gives an edge.
    Split,
    /// Whether a stage keeps a supervision edge of the link task.
    Supervision,
}

impl EdgeDraw {
    fn salt(self) -> u64 {
        match self {
            EdgeDraw::Split => 0x5b1e_7ed9_e5a1_0001,
            EdgeDraw::Supervision => 0x5b1e_7ed9_e5a1_0002,
        }
    }
}

/// A uniform draw in (0, 1) for the edge `(a, b)` (order-sensitive), a pure function of
/// `(draw, seed, a, b)`: the same on any worker, process or part layout.
///
/// The salt is mixed before the seed joins it: with `seed ^ salt`, two uses whose salts differ
/// in a few bits would draw alike for seeds that differ in the same bits (split-edges' seed 3
/// and a flatten's seed 0 kept exactly the valid edges as supervision). Now two uses draw alike
/// only for seeds that differ by `mix64(salt) ^ mix64(salt')`, a 64-bit pattern no one picks.
pub fn edge_draw(draw: EdgeDraw, seed: u64, a: i64, b: i64) -> f64 {
    unit_interval(hash3(mix64(mix64(draw.salt()) ^ seed), a as u64, b as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_draws_are_uniform_and_apart_by_use() {
        let n = 20_000;
        let below = |draw: EdgeDraw| (0..n).filter(|&i| edge_draw(draw, 7, i, i + 1) < 0.25).count();
        for draw in [EdgeDraw::Split, EdgeDraw::Supervision] {
            let share = below(draw) as f64 / n as f64;
            assert!((share - 0.25).abs() < 0.015, "{draw:?}: {share}");
        }
        let same = (0..n).filter(|&i| edge_draw(EdgeDraw::Split, 7, i, 3) == edge_draw(EdgeDraw::Supervision, 7, i, 3));
        assert_eq!(same.count(), 0);
        assert_ne!(edge_draw(EdgeDraw::Split, 7, 1, 2), edge_draw(EdgeDraw::Split, 7, 2, 1));
    }

    #[test]
    fn edge_draws_of_two_uses_are_independent_for_every_pair_of_small_seeds() {
        // The split and the supervision sample of one graph: below 0.1 in both should be 1%.
        let n = 4_000i64;
        for s in 0..32u64 {
            for t in 0..32u64 {
                let both = (0..n)
                    .filter(|&i| {
                        edge_draw(EdgeDraw::Split, s, i, i * 7 + 1) < 0.1
                            && edge_draw(EdgeDraw::Supervision, t, i, i * 7 + 1) < 0.1
                    })
                    .count();
                assert!(both < 80, "split seed {s}, supervision seed {t}: {both} of {n} edges in both tails");
            }
        }
    }

    #[test]
    fn unit_interval_stays_open() {
        assert!(unit_interval(0) > 0.0);
        assert!(unit_interval(u64::MAX) < 1.0);
    }

    #[test]
    fn owners_spread_evenly() {
        let peers = 4u64;
        let mut counts = [0u32; 4];
        for node in 0..40_000i64 {
            counts[(owner_key(node) % peers) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)), "{counts:?}");
    }
}
