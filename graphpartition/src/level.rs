//! One level of the graph as one worker holds it: its own nodes (by `owner_key`, as every
//! stage owns them), each with its weight (the input nodes it stands for) and its neighbors,
//! undirected and merged, with the input edges each adjacency stands for as its weight.
//!
//! Labels (a cluster while coarsening, a part while refining) live in a vector over
//! [`Level::known`]: this worker's own nodes first, then every neighbor another worker owns.
//! When an own node's label changes, [`Level::spread`] sends it once to each worker that
//! holds it as a neighbor (its readers), never once per edge.
//!
//! Invariant: the adjacency is symmetric across workers (`v` in `N(u)` with weight `w` at
//! `owner(u)` iff `u` in `N(v)` with weight `w` at `owner(v)`), so a node's readers are the
//! owners of its neighbors, and a level built from symmetric entries is symmetric again.

use cluster::hash::owner_key;
use cluster::{IdTable, exchange};
use timely::ExchangeData;
use timely::worker::Worker;

/// The worker that owns `id` among `peers`.
pub fn owner(id: i64, peers: usize) -> usize {
    (owner_key(id) % peers as u64) as usize
}

/// An adjacency entry as levels are built from them: `(node, neighbor, weight)`, at the
/// node's owner.
pub type Entry = (i64, i64, u64);

#[derive(Debug, Default)]
pub struct Level {
    /// Own nodes, sorted; `ids[i]` is `known[i]`.
    pub ids: Vec<i64>,
    pub weights: Vec<u64>,
    /// Own node `i`'s neighbors are `neighbors[at[i]..at[i + 1]]` (indices into `known`) with
    /// `edge_weights` alike.
    at: Vec<usize>,
    neighbors: Vec<u32>,
    edge_weights: Vec<u64>,
    /// Own nodes, then the neighbors other workers own, sorted.
    pub known: Vec<i64>,
    index: IdTable<u32>,
    /// Own node `i`'s readers: the other workers `readers[readers_at[i]..readers_at[i + 1]]`.
    readers_at: Vec<usize>,
    readers: Vec<u32>,
}

impl Level {
    /// The level of this worker (`me` of `peers`) from its own nodes' weights and adjacency
    /// entries (repeats are summed, self-loops dropped). Every entry's node must be own.
    pub fn build(me: usize, peers: usize, mut nodes: Vec<(i64, u64)>, mut entries: Vec<Entry>) -> Level {
        nodes.sort_unstable();
        nodes.dedup_by(|b, a| {
            a.0 == b.0 && {
                a.1 += b.1;
                true
            }
        });
        entries.retain(|(u, v, _)| u != v);
        entries.sort_unstable();
        entries.dedup_by(|b, a| {
            (a.0, a.1) == (b.0, b.1) && {
                a.2 += b.2;
                true
            }
        });
        let (ids, weights): (Vec<i64>, Vec<u64>) = nodes.into_iter().unzip();
        let mut remote: Vec<i64> = entries.iter().map(|e| e.1).filter(|&v| owner(v, peers) != me).collect();
        remote.sort_unstable();
        remote.dedup();
        let known: Vec<i64> = ids.iter().copied().chain(remote).collect();
        let mut index = IdTable::with_capacity(known.len());
        for (i, &id) in known.iter().enumerate() {
            *index.get_or_insert_with(id, || 0).0 = i as u32;
        }
        let mut level = Level { ids, weights, known, index, ..Level::default() };
        level.adjacency(me, peers, &entries);
        level
    }

    /// Fills the adjacency and the readers from sorted, merged entries.
    fn adjacency(&mut self, me: usize, peers: usize, entries: &[Entry]) {
        let n = self.ids.len();
        self.at = Vec::with_capacity(n + 1);
        self.readers_at = Vec::with_capacity(n + 1);
        let mut e = 0;
        let mut workers = Vec::new();
        for &id in &self.ids {
            self.at.push(self.neighbors.len());
            self.readers_at.push(self.readers.len());
            workers.clear();
            while e < entries.len() && entries[e].0 == id {
                let (_, v, w) = entries[e];
                self.neighbors.push(self.index.get(v).expect("every neighbor is known"));
                self.edge_weights.push(w);
                let reader = owner(v, peers);
                if reader != me {
                    workers.push(reader as u32);
                }
                e += 1;
            }
            workers.sort_unstable();
            workers.dedup();
            self.readers.extend_from_slice(&workers);
        }
        self.at.push(self.neighbors.len());
        self.readers_at.push(self.readers.len());
        debug_assert_eq!(e, entries.len(), "an entry of a node this worker does not own");
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Own node `i`'s neighbors: (index into `known`, weight).
    pub fn neighbors(&self, i: usize) -> impl Iterator<Item = (usize, u64)> + '_ {
        let range = self.at[i]..self.at[i + 1];
        self.neighbors[range.clone()].iter().map(|&v| v as usize).zip(self.edge_weights[range].iter().copied())
    }

    /// The index of `id` in `known`.
    pub fn known_index(&self, id: i64) -> Option<usize> {
        self.index.get(id).map(|i| i as usize)
    }

    /// Adjacency entries held (each undirected edge is held at both ends).
    pub fn entries(&self) -> usize {
        self.neighbors.len()
    }

    /// Sends the labels of the own nodes `changed` to their readers and takes the labels other
    /// workers sent into `labels` (indexed as `known`). Every worker calls it together.
    pub fn spread<L: ExchangeData + Copy>(&self, worker: &mut Worker, labels: &mut [L], changed: &[usize]) {
        let mut out: Vec<(u32, i64, L)> = Vec::new();
        for &i in changed {
            let readers = &self.readers[self.readers_at[i]..self.readers_at[i + 1]];
            out.extend(readers.iter().map(|&w| (w, self.ids[i], labels[i])));
        }
        for (_, id, label) in exchange(worker, out, |m| u64::from(m.0)) {
            if let Some(i) = self.known_index(id) {
                labels[i] = label;
            }
        }
    }
}

/// For each own node, the total weight of its neighbors per label, best first: `(label,
/// weight)` sorted by weight descending, then by `tie(label)`. `scratch` is reused.
pub fn label_weights<L: Copy + Ord>(
    level: &Level,
    i: usize,
    labels: &[L],
    tie: impl Fn(L) -> u64,
    scratch: &mut Vec<(L, u64)>,
) {
    scratch.clear();
    scratch.extend(level.neighbors(i).map(|(v, w)| (labels[v], w)));
    scratch.sort_unstable_by_key(|e| e.0);
    scratch.dedup_by(|b, a| {
        a.0 == b.0 && {
            a.1 += b.1;
            true
        }
    });
    scratch.sort_unstable_by_key(|&(l, w)| (std::cmp::Reverse(w), tie(l), l));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_merges_repeats_drops_self_loops_and_knows_its_neighbors() {
        // One worker of one: every node is own.
        let nodes = vec![(3, 1), (1, 1), (2, 1), (1, 1)];
        let entries = vec![(1, 2, 1), (1, 2, 2), (2, 1, 3), (3, 3, 5), (2, 3, 1), (3, 2, 1)];
        let level = Level::build(0, 1, nodes, entries);
        assert_eq!(level.ids, vec![1, 2, 3]);
        assert_eq!(level.weights, vec![2, 1, 1]);
        let of = |i| level.neighbors(i).map(|(v, w)| (level.known[v], w)).collect::<Vec<_>>();
        assert_eq!(of(0), vec![(2, 3)]);
        assert_eq!(of(1), vec![(1, 3), (3, 1)]);
        assert_eq!(of(2), vec![(2, 1)]);
    }

    #[test]
    fn label_weights_sum_by_label_best_first() {
        let entries = vec![(1, 2, 1), (1, 3, 2), (1, 4, 2), (1, 5, 1)];
        let nodes = vec![(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)];
        let level = Level::build(0, 1, nodes, entries);
        // Labels by known index: node 1 -> 9, 2 -> 7, 3 -> 8, 4 -> 7, 5 -> 8.
        let labels = [9u32, 7, 8, 7, 8];
        let mut out = Vec::new();
        label_weights(&level, 0, &labels, u64::from, &mut out);
        assert_eq!(out, vec![(7, 3), (8, 3)]);
    }
}
