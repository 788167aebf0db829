//! Coarsening on the cluster: size-constrained label propagation groups nodes into clusters
//! of at most `limit` weight (ParHIP's coarsening, Meyerhenke, Sanders and Schulz, 2017), and
//! each cluster becomes one node of the next level, owned where its id is owned.
//!
//! A round: half the nodes (by a seeded hash, alternating, so that two neighbors seldom move
//! at once) each ask to join the cluster their neighbors' edges weigh most in, if it weighs
//! more than their own's. A cluster's weight is kept at the owner of its id, which takes the
//! asks in order of gain (then seeded hash) while the cluster stays within `limit`, and tells
//! the node and the owner of the cluster it left. Every decision is made where all its inputs
//! meet, in an order that does not depend on arrival, so the clusters, and every level, are
//! the same on any cluster shape.

use std::cmp::Reverse;

use cluster::hash::{IdMap, IdSet, owner_key};
use cluster::{exchange, sum};
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::level::{Entry, Level, label_weights};
use crate::rank;

/// A level's clustering has settled when a round moves fewer than one node in this many.
const SETTLED: u64 = 200;
/// The most rounds a level's clustering takes, in multiples of `rounds`.
const MORE: usize = 4;

/// A coarser level and, for each own node of the finer one, its cluster (a node of it).
pub struct Coarsened {
    pub level: Level,
    pub cluster_of: Vec<i64>,
    /// The clustering's rounds.
    pub rounds: usize,
}

/// An ask to join a cluster: `(cluster, node, weight, gain, the cluster it leaves)`, sent to
/// the cluster's owner.
type Ask = (i64, i64, u64, u64, i64);

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Answer {
    /// To the node's owner: it joined the cluster.
    Joined { node: i64, cluster: i64 },
    /// To the owner of the cluster a node left: its weight is gone.
    Left { cluster: i64, weight: u64 },
    /// To the node's owner: the cluster is too heavy to take it (it asks elsewhere next).
    Refused { node: i64, cluster: i64 },
}

/// Whether node `id` moves in `round` (half of the nodes each round, alternating).
pub fn active(seed: u64, depth: usize, round: usize, id: i64) -> bool {
    (rank(seed ^ depth as u64, id as u64) & 1) as usize == round & 1
}

/// Clusters `level`'s nodes and contracts each cluster to a node. The rounds go on while they
/// still move nodes: until two rounds in a row (one of each half) move fewer than one node in
/// [`SETTLED`], and at least `rounds`, at most [`MORE`] times `rounds`.
pub fn coarsen(worker: &mut Worker, level: &Level, limit: u64, rounds: usize, seed: u64, depth: usize) -> Coarsened {
    let nodes = sum(worker, level.len() as u64);
    let (mut quiet, mut ran) = (0, 0);
    let mut labels: Vec<i64> = level.known.clone();
    let mut weight_of: IdMap<i64, u64> = level.ids.iter().copied().zip(level.weights.iter().copied()).collect();
    // (node, cluster) pairs where the cluster refused the node: it asks its next best.
    let mut refused: IdSet<(i64, i64)> = IdSet::default();
    let mut scratch = Vec::new();
    for round in 0..rounds * MORE {
        ran = round + 1;
        let mut asks: Vec<Ask> = Vec::new();
        for i in 0..level.len() {
            let id = level.ids[i];
            if !active(seed, depth, round, id) {
                continue;
            }
            label_weights(level, i, &labels, |l| rank(seed, l as u64), &mut scratch);
            let own = scratch.iter().find(|e| e.0 == labels[i]).map_or(0, |e| e.1);
            let open = |c: i64| c != labels[i] && !refused.contains(&(id, c));
            if let Some(&(best, w)) = scratch.iter().find(|e| open(e.0))
                && w > own
            {
                asks.push((best, id, level.weights[i], w - own, labels[i]));
            }
        }
        let answers = decide(exchange(worker, asks, |a| owner_key(a.0)), &mut weight_of, limit, seed);
        let route = |a: &Answer| match a {
            Answer::Joined { node, .. } | Answer::Refused { node, .. } => owner_key(*node),
            Answer::Left { cluster, .. } => owner_key(*cluster),
        };
        let mut changed = Vec::new();
        for answer in exchange(worker, answers, route) {
            match answer {
                Answer::Joined { node, cluster } => {
                    let i = level.known_index(node).expect("a node asks from its owner");
                    labels[i] = cluster;
                    changed.push(i);
                }
                Answer::Left { cluster, weight } => {
                    let w = weight_of.get_mut(&cluster).expect("a cluster with members has a weight");
                    *w -= weight;
                    if *w == 0 {
                        weight_of.remove(&cluster);
                    }
                }
                Answer::Refused { node, cluster } => {
                    refused.insert((node, cluster));
                }
            }
        }
        let joined = sum(worker, changed.len() as u64);
        level.spread(worker, &mut labels, &changed);
        quiet = if joined * SETTLED < nodes { quiet + 1 } else { 0 };
        if quiet >= 2 && round + 1 >= rounds {
            break;
        }
    }
    Coarsened { rounds: ran, ..contract(worker, level, &labels) }
}

/// At a cluster's owner: the asks it takes (best gain first, then by seeded hash) while the
/// cluster stays within `limit`.
fn decide(mut asks: Vec<Ask>, weight_of: &mut IdMap<i64, u64>, limit: u64, seed: u64) -> Vec<Answer> {
    asks.sort_unstable_by_key(|a| (a.0, Reverse(a.3), rank(seed, a.1 as u64), a.1));
    let mut answers = Vec::new();
    for (cluster, node, weight, _, from) in asks {
        let w = weight_of.entry(cluster).or_insert(0);
        if *w + weight <= limit {
            *w += weight;
            answers.push(Answer::Joined { node, cluster });
            answers.push(Answer::Left { cluster: from, weight });
        } else {
            answers.push(Answer::Refused { node, cluster });
        }
    }
    answers
}

/// Each cluster as one node (the sum of its weights) and each pair of clusters joined by
/// edges as one edge (the sum of theirs), at the owner of the cluster's id.
fn contract(worker: &mut Worker, level: &Level, labels: &[i64]) -> Coarsened {
    let n = level.len();
    let nodes: Vec<(i64, u64)> = (0..n).map(|i| (labels[i], level.weights[i])).collect();
    let mut entries: Vec<Entry> = Vec::with_capacity(level.entries());
    for i in 0..n {
        let c = labels[i];
        entries.extend(level.neighbors(i).filter(|&(v, _)| labels[v] != c).map(|(v, w)| (c, labels[v], w)));
    }
    let nodes = exchange(worker, nodes, |n| owner_key(n.0));
    let entries = exchange(worker, entries, |e| owner_key(e.0));
    let level = Level::build(worker.index(), worker.peers(), nodes, entries);
    Coarsened { level, cluster_of: labels[..n].to_vec(), rounds: 0 }
}

/// Each own node's part from its cluster's (`coarse_parts`, by own node of `coarse`).
pub fn project(worker: &mut Worker, cluster_of: &[i64], coarse: &Level, coarse_parts: &[u32]) -> Vec<u32> {
    let me = worker.index() as u64;
    let mut wanted = cluster_of.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    let asks: Vec<(i64, u64)> = wanted.into_iter().map(|c| (c, me)).collect();
    let answers: Vec<(u64, i64, u32)> = exchange(worker, asks, |a| owner_key(a.0))
        .into_iter()
        .map(|(c, from)| {
            let i = coarse.known_index(c).expect("a cluster is a node of the coarser level, at its owner");
            (from, c, coarse_parts[i])
        })
        .collect();
    let parts: IdMap<i64, u32> = exchange(worker, answers, |a| a.0).into_iter().map(|(_, c, p)| (c, p)).collect();
    cluster_of.iter().map(|c| parts[c]).collect()
}
