//! Refinement on the cluster: balanced label propagation over parts. A round: half the nodes
//! (as in coarsening) each find the part their neighbors' edges weigh most in; a node that
//! would cut fewer edges there is a candidate move. Candidates are counted under their
//! [`Move`] key, the counts summed over every worker, and every worker runs the same
//! [`quota::plan`] on the sums: the moves of the accepted keys keep every part within its cap
//! (see `quota`). A part over its cap (the coarsest partition may leave one when heavy
//! clusters made exact balance impossible there) offers forced moves, least loss first.

use cluster::all_gather;
use timely::worker::Worker;

use crate::coarsen::active;
use crate::level::{Level, label_weights};
use crate::quota::{self, Move, SUBS, bucket, loss_bucket};
use crate::rank;

/// The parts asked for and the largest weight a part may have.
#[derive(Debug, Clone, Copy)]
pub struct Balance {
    pub parts: usize,
    pub cap: u64,
}

/// The weight of every part, summed over every worker (`own`: the parts of own nodes).
pub fn sizes(worker: &mut Worker, level: &Level, own: &[u32], parts: usize) -> Vec<u64> {
    let mut local = vec![0u64; parts];
    own.iter().zip(&level.weights).for_each(|(&p, &w)| local[p as usize] += w);
    let all = all_gather(worker, vec![(worker.index(), local)]);
    all.iter().fold(vec![0; parts], |mut sum, (_, s)| {
        sum.iter_mut().zip(s).for_each(|(a, b)| *a += b);
        sum
    })
}

/// A level's parts after refinement, the same on every worker apart from `labels`.
pub struct Refined {
    /// The part of every node this worker knows (indexed as `Level::known`): its own nodes'
    /// first, then its neighbors elsewhere.
    pub labels: Vec<u32>,
    /// Every part's weight, summed over every worker.
    pub sizes: Vec<u64>,
    /// The node weight moved.
    pub moved: u64,
}

impl Refined {
    /// The parts of the level's own nodes.
    pub fn own<'a>(&'a self, level: &Level) -> &'a [u32] {
        &self.labels[..level.len()]
    }
}

/// Refines `own` (the parts of the level's own nodes) in up to `rounds` rounds, and as many
/// more (at most `extra`) as it takes to bring every part within the cap.
pub fn refine(
    worker: &mut Worker,
    level: &Level,
    own: &[u32],
    balance: Balance,
    (rounds, extra): (usize, usize),
    seed: u64,
    depth: usize,
) -> Refined {
    let n = level.len();
    let mut labels = vec![0u32; level.known.len()];
    labels[..n].copy_from_slice(own);
    level.spread(worker, &mut labels, &(0..n).collect::<Vec<_>>());
    let mut sizes = sizes(worker, level, own, balance.parts);
    let (mut moved, mut idle) = (0, 0);
    let mut scratch = Vec::new();
    for round in 0..rounds + extra {
        let over = sizes.iter().any(|&s| s > balance.cap);
        if round >= rounds && !over {
            break;
        }
        let candidates = candidates(level, &labels, &sizes, balance.cap, seed, (depth, round), &mut scratch);
        let demand: Vec<(Move, u64)> = candidates.iter().map(|&(i, m)| (m, level.weights[i])).collect();
        let demand = quota::total(all_gather(worker, quota::total(demand)));
        let (accepted, after) = quota::plan(&sizes, balance.cap, &demand);
        let mut changed = Vec::new();
        for (i, m) in candidates {
            if accepted.binary_search(&m).is_ok() {
                labels[i] = m.to;
                changed.push(i);
            }
        }
        moved += demand.iter().filter(|(m, _)| accepted.binary_search(m).is_ok()).map(|(_, w)| w).sum::<u64>();
        sizes = after;
        level.spread(worker, &mut labels, &changed);
        idle = if accepted.is_empty() { idle + 1 } else { 0 };
        if idle >= 2 && !over {
            break;
        }
    }
    Refined { labels, sizes, moved }
}

/// This round's candidate moves of own nodes: `(node, key)`.
fn candidates(
    level: &Level,
    labels: &[u32],
    sizes: &[u64],
    cap: u64,
    seed: u64,
    (depth, round): (usize, usize),
    scratch: &mut Vec<(u32, u64)>,
) -> Vec<(usize, Move)> {
    let mut out = Vec::new();
    for i in 0..level.len() {
        let id = level.ids[i];
        let p = labels[i];
        let over = sizes[p as usize] > cap;
        if !over && !active(seed, depth, round, id) {
            continue;
        }
        label_weights(level, i, labels, |l| rank(seed, u64::from(l)), scratch);
        let own = scratch.iter().find(|e| e.0 == p).map_or(0, |e| e.1);
        let best = scratch.iter().find(|e| e.0 != p).copied();
        let sub = (rank(seed ^ round as u64, id as u64) % u64::from(SUBS)) as u8;
        let key = match best {
            Some((q, w)) if w > own => Move { forced: false, from: p, to: q, bucket: bucket(w - own), sub },
            _ if over => {
                // Over the cap: to the neighboring part of most edges that has room for the
                // node, or, with none, to the lightest part.
                let weight = level.weights[i];
                let room = |q: u32| q != p && sizes[q as usize] + weight <= cap;
                let lightest = (0..sizes.len() as u32).filter(|&q| room(q)).min_by_key(|&q| (sizes[q as usize], q));
                let (q, w) = match scratch.iter().find(|e| room(e.0)) {
                    Some(&(q, w)) => (q, w),
                    None => match lightest {
                        Some(q) => (q, 0),
                        None => continue,
                    },
                };
                Move { forced: true, from: p, to: q, bucket: loss_bucket(own.saturating_sub(w)), sub }
            }
            _ => continue,
        };
        if key.to != key.from {
            out.push((i, key));
        }
    }
    out
}
