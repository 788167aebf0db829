//! Split hubs: a node with more in-edges than `hub_threshold` has them cut into runs of
//! consecutive in-edges (round 0's order), as GraphInfer cuts them: run `s` of hub `h` is
//! reduced on the worker of routing key `owners.reducer_key(h, s)` (run 0 at the hub's owner,
//! run `s` that many workers further), so a hub's edges and their work spread over the
//! cluster instead of landing on one worker.
//!
//! GCN and GraphSAGE (mean) layers read a node's in-edges only through one sum, `Σ c_e x_src`
//! (GCN transforms the rows first, which is the same sum times the weights). A run's part of
//! it, its *partial* `Σ_{e in run} c_e (m_src ⊙ x_src)` over the source rows after dropout
//! (`m`), is summed by the run's reducer ([`Hubs::forward`]) and sent to the hub's owner, which
//! reads it as the input row of one *virtual* in-edge of coefficient 1 (input row
//! `own + halo + v`, never masked again). Backward ([`Hubs::backward`]), the owner sends the
//! gradient `g` of each virtual row to its reducer, which adds `c_e (m_src ⊙ g)` to each source
//! row's gradient before its halo's gradients go to their owners. So the step is the same
//! full-batch gradient, with a hub's sum grouped by runs.
//!
//! Typed graphs' layers (R-GCN, heterogeneous GraphSAGE) read one mean per relation: a run is
//! cut further into its *pieces*, one per relation it holds, each its own partial (weighed by
//! the mean over the hub's in-edges of that relation) and its own virtual in-edge of that
//! relation ([`pieces`]). On a homogeneous graph a run is one piece.
//!
//! The runs depend on the hub and the threshold alone, never on the worker count; a piece's
//! partial sums its edges in their order, and the owner adds the partials in piece order. GAT
//! (a softmax over the in-edges) and GINE (a ReLU per edge) are not one linear sum: their runs
//! ([`Weighting::Layer`]) carry their edges' features and run the layer's per-edge part at the
//! reducer, with no virtual row (`crate::full::pieces`).
//!
//! Partials and their gradients always cross exactly (stale copies are the halo's): they are
//! few, one row per piece, and those that leave their owner are counted in the exchange's bytes.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use sampling::{ELSEWHERE, NodeStore};

use crate::full::halo::Source;

/// How a virtual edge's partial weighs each in-edge (the layer's coefficients,
/// `gnn::LayerEdges::new`'s formulas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weighting {
    /// GCN: `1 / sqrt((d_dst + 1)(d_src + 1))`, from the whole graph's in-degrees.
    Gcn,
    /// The mean: `1 / in-edges of the destination`.
    Mean,
    /// No coefficient: the pieces run the layer itself on their edges (GAT, GINE;
    /// `crate::full::pieces`).
    Layer,
}

/// A piece of a run, from the hub's owner to its reducer (sent once).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunTask {
    to: u32,
    owner: u32,
    /// The piece's virtual row at the owner.
    at: u32,
    /// The hub's in-degree (GCN) and its in-edge count of the piece's relation (the mean).
    degree: f32,
    count: u32,
    /// Each in-edge's source: its id, its owner and its slot there.
    sources: Vec<(i64, u32, u32)>,
    /// The hub and the place of the piece's first edge among its in-edges (GAT's attention
    /// dropout is keyed by them).
    hub: i64,
    first: u32,
    /// The pieces that run the layer: their edges' features, as the layer reads them.
    features: Vec<f32>,
}

/// A reducer's answer to a run's owner: where the run is among the reducer's runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Placed {
    to: u32,
    at: u32,
    run: u32,
}

/// A partial (forward, `at` a virtual row of `to`) or its gradient (backward, `at` a run of
/// `to`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Partial {
    to: u32,
    at: u32,
    values: Vec<f32>,
}

/// A run this worker reduces.
#[derive(Debug, Clone)]
pub(super) struct Run {
    pub(super) owner: u32,
    pub(super) at: u32,
    /// Its in-edges in [`Hubs::coefs`] and [`Hubs::distinct_at`].
    pub(super) edges: Range<usize>,
    /// Its hub and the place of its first edge among the hub's in-edges.
    pub(super) hub: i64,
    pub(super) first: u32,
}

/// One worker's split hubs: those it owns (their virtual rows) and the runs it reduces.
#[derive(Debug, Default)]
pub struct Hubs {
    /// Per own slot, its virtual rows (empty: not a split hub).
    virtual_of: Vec<Range<u32>>,
    /// Per virtual row here, the reducer of its run and the run's place there.
    pub(super) reducers: Vec<(u32, u32)>,
    /// The runs this worker reduces, by (owner, virtual row).
    pub(super) runs: Vec<Run>,
    /// Pieces that run the layer (GAT, GINE): no virtual row or edge; the own hubs' slots, in
    /// slot order, their self-loop features (the mean of their in-edges', `edge_dim` each),
    /// and the run edges' features.
    pub(super) layered: bool,
    pub(super) hub_slots: Vec<u32>,
    pub(super) fills: Vec<f32>,
    pub(super) features: Vec<f32>,
    pub(super) edge_dim: usize,
    /// Each run edge's source and its hub's degrees, then (after [`Hubs::place`]) its
    /// coefficient and its input row.
    sources: Vec<Source>,
    degrees: Vec<(f32, u32)>,
    coefs: Vec<f32>,
    /// The input rows the runs read, ascending, and each run edge's place among them.
    pub(super) distinct: Vec<u32>,
    pub(super) distinct_at: Vec<u32>,
    threshold: u64,
    me: u32,
    /// Hubs split on this worker, on all, their pieces (partials) on all, and the partials
    /// that cross between workers (the others are reduced at their hub's owner).
    pub split: u64,
    pub split_everywhere: u64,
    pub partials_everywhere: u64,
    pub crossing_everywhere: u64,
}

/// The in-edge ranges `count` in-edges are cut into, at most `threshold` each and at least 2
/// (the count depends on the hub alone, as GraphInfer's).
pub fn runs(count: usize, threshold: u64) -> impl Iterator<Item = Range<usize>> {
    let n = (count as u64).div_ceil(threshold.max(1)).max(2) as usize;
    let size = count.div_ceil(n);
    (0..n).map(move |s| (s * size).min(count)..((s + 1) * size).min(count)).filter(|r| !r.is_empty())
}

/// A hub's virtual rows, from its in-edges' relations (all 0 on a homogeneous graph): per run
/// in run order, one piece per relation the run holds, ascending, as (the run's index, the
/// run's in-edges, the relation). A piece sums the run's in-edges of its relation.
pub fn pieces(relations: &[u8], threshold: u64) -> Vec<(usize, Range<usize>, u8)> {
    let mut pieces = Vec::new();
    for (s, run) in runs(relations.len(), threshold).enumerate() {
        let mut held: Vec<u8> = relations[run.clone()].to_vec();
        held.sort_unstable();
        held.dedup();
        pieces.extend(held.into_iter().map(|r| (s, run.clone(), r)));
    }
    pieces
}

/// The mean of `rows` (`width` each; none: zeros).
fn mean_rows(rows: &[f32], width: usize) -> Vec<f32> {
    let mut mean = vec![0.0f32; width];
    let count = rows.len() / width.max(1);
    let c = 1.0 / count.max(1) as f32;
    rows.chunks(width.max(1)).for_each(|r| mean.iter_mut().zip(r).for_each(|(m, v)| *m += v * c));
    mean
}

/// Each relation's in-edge count among `relations` (the mean's denominator of a piece).
pub fn counts(relations: &[u8]) -> [u32; 256] {
    let mut counts = [0u32; 256];
    relations.iter().for_each(|&r| counts[usize::from(r)] += 1);
    counts
}

impl Hubs {
    /// Cuts the hubs of this worker's nodes (more in-edges than `threshold`; 0: no hub is
    /// split) into runs and sends each to its reducer; with [`Weighting::Layer`], each with
    /// its edges' features (`nodes.edge_dim` each). `source_slots` is aligned with the in-edges
    /// (`NodeStore::take_source_slots`). Every worker calls it in step, with the same
    /// arguments.
    pub fn cut(
        worker: &mut Worker,
        nodes: &NodeStore,
        source_slots: &[u32],
        (threshold, weighting): (u64, Weighting),
    ) -> Hubs {
        let own = nodes.len();
        let layered = weighting == Weighting::Layer;
        let edge_dim = if layered { nodes.edge_dim } else { 0 };
        let mut hubs = Hubs { virtual_of: vec![0..0; own], layered, edge_dim, ..Hubs::default() };
        if threshold == 0 {
            return hubs;
        }
        hubs.threshold = threshold;
        let (me, peers) = (worker.index() as u32, worker.peers() as u64);
        hubs.me = me;
        let mut tasks = Vec::new();
        let mut e = 0;
        for slot in 0..own {
            let edges = nodes.sampled(slot);
            let first = e;
            e += edges.len();
            if edges.len() as u64 <= threshold {
                continue;
            }
            hubs.cut_hub(nodes, (slot, first), source_slots, peers, &mut tasks);
        }
        let received = cluster::exchange(worker, tasks, |t: &RunTask| u64::from(t.to));
        let placed = hubs.take_runs(received);
        for p in cluster::exchange(worker, placed, |p: &Placed| u64::from(p.to)) {
            hubs.reducers[p.at as usize].1 = p.run;
        }
        hubs.split_everywhere = cluster::sum(worker, hubs.split);
        hubs.partials_everywhere = cluster::sum(worker, hubs.runs.len() as u64);
        hubs.crossing_everywhere = cluster::sum(worker, hubs.rows_sent() as u64);
        hubs
    }

    /// Cuts hub `slot` (its in-edges `first..` in the store's order, `source_slots` aligned
    /// with them) into runs, each a task for its reducer among `peers`: its sources and
    /// (layered) features. Keeps the hub's virtual rows and, layered, its slot and mean rows.
    fn cut_hub(
        &mut self,
        nodes: &NodeStore,
        (slot, first): (usize, usize),
        source_slots: &[u32],
        peers: u64,
        tasks: &mut Vec<RunTask>,
    ) {
        let (edges, me, edge_dim) = (nodes.sampled(slot), self.me, self.edge_dim);
        let hub = nodes.ids[slot];
        let from = self.reducers.len() as u32;
        let relations: Vec<u8> = edges.iter().map(|e| e.relation).collect();
        let counts = counts(&relations);
        for (salt, run, relation) in pieces(&relations, self.threshold) {
            let to = (nodes.owners.reducer_key(hub, salt as u64) % peers) as u32;
            let at = self.reducers.len() as u32;
            self.reducers.push((to, 0));
            let sources = edges[run.clone()].iter().zip(&source_slots[first + run.start..first + run.end]);
            let sources = sources.filter(|(edge, _)| edge.relation == relation);
            let sources = sources.map(|(edge, &s)| (edge.src, nodes.owners.of(edge.src) as u32, s & !ELSEWHERE));
            let degree = nodes.in_degree[slot] as f32;
            let count = counts[usize::from(relation)];
            let features = match self.layered {
                true => nodes.sampled_features(slot)[run.start * edge_dim..run.end * edge_dim].to_vec(),
                false => Vec::new(),
            };
            let (sources, first) = (sources.collect(), run.start as u32);
            tasks.push(RunTask { to, owner: me, at, degree, count, sources, hub, first, features });
        }
        self.virtual_of[slot] = from..self.reducers.len() as u32;
        if self.layered {
            self.hub_slots.push(slot as u32);
            self.fills.extend(mean_rows(nodes.sampled_features(slot), edge_dim));
        }
        self.split += 1;
    }

    /// Takes the runs sent here to reduce, in (owner, virtual row) order; returns where each
    /// landed, for its owner.
    fn take_runs(&mut self, mut received: Vec<RunTask>) -> Vec<Placed> {
        received.sort_unstable_by_key(|t| (t.owner, t.at));
        let mut placed = Vec::with_capacity(received.len());
        for (run, task) in received.into_iter().enumerate() {
            let start = self.sources.len();
            let sources = task.sources.iter().map(|&(id, owner, slot)| Source { id, owner: owner as usize, slot });
            self.sources.extend(sources);
            self.degrees.extend(std::iter::repeat_n((task.degree, task.count), task.sources.len()));
            self.features.extend(task.features);
            let edges = start..self.sources.len();
            self.runs.push(Run { owner: task.owner, at: task.at, edges, hub: task.hub, first: task.first });
            placed.push(Placed { to: task.owner, at: task.at, run: run as u32 });
        }
        placed
    }

    /// Whether some worker split a hub: then every pass exchanges partials, on every worker.
    pub fn active(&self) -> bool {
        self.split_everywhere > 0
    }

    /// In-edges a hub has at most without being split (0: none is).
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// The pieces a split hub's in-edges (their relations) are cut into: its virtual rows
    /// ([`pieces`]).
    pub fn pieces_of(&self, relations: &[u8]) -> Vec<(usize, Range<usize>, u8)> {
        pieces(relations, self.threshold)
    }

    /// Whether own slot `slot` is a split hub (its in-edges are its runs').
    pub fn is_hub(&self, slot: usize) -> bool {
        self.virtual_of.get(slot).is_some_and(|r| !r.is_empty())
    }

    /// Own slot `slot`'s virtual rows (0-based among the virtual rows), in piece order.
    pub fn virtual_rows_of(&self, slot: usize) -> Range<u32> {
        self.virtual_of.get(slot).cloned().unwrap_or(0..0)
    }

    /// Virtual rows this worker reads: its hubs' runs (none when the pieces run the layer).
    pub fn virtual_rows(&self) -> usize {
        if self.layered { 0 } else { self.reducers.len() }
    }

    /// Whether the pieces run the layer (GAT, GINE; `crate::full::pieces`), not partial sums.
    pub fn layered(&self) -> bool {
        self.layered
    }

    /// In-edges of the runs this worker reduces.
    pub fn run_edges(&self) -> usize {
        self.sources.len().max(self.distinct_at.len())
    }

    /// The sources of the runs this worker reduces, in run order (the halo plan reads them).
    pub fn run_sources(&self) -> impl Iterator<Item = Source> + '_ {
        self.sources.iter().copied()
    }

    /// Each run edge's input row (`rows`, aligned with [`Hubs::run_sources`]) and its
    /// coefficient, from its source's in-degree `degree(row)`.
    pub fn place(&mut self, rows: Vec<i64>, degree: impl Fn(usize) -> f32, weighting: Weighting) {
        self.coefs = rows
            .iter()
            .zip(&self.degrees)
            .map(|(&row, &(d, count))| match weighting {
                Weighting::Gcn => 1.0 / ((d + 1.0) * (degree(row as usize) + 1.0)).sqrt(),
                Weighting::Mean => 1.0 / count as f32,
                Weighting::Layer => 1.0,
            })
            .collect();
        self.distinct = rows.iter().map(|&r| r as u32).collect();
        self.distinct.sort_unstable();
        self.distinct.dedup();
        let place = |row: i64| self.distinct.binary_search(&(row as u32)).expect("a run's row") as u32;
        self.distinct_at = rows.iter().map(|&r| place(r)).collect();
        self.sources = Vec::new();
        self.degrees = Vec::new();
    }

    /// The partials of the runs reduced here over the input rows `x` (`width` each), each
    /// source row first multiplied by its dropout mask (`mask`, from [`Hubs::mask_rows`];
    /// `None`: no dropout), sent to their hubs' owners: returns this worker's virtual rows.
    /// Every worker calls it in step.
    pub fn forward(&self, worker: &mut Worker, x: &[f32], width: usize, mask: Option<&[f32]>) -> Vec<f32> {
        // Each source row masked once, however many runs read it.
        let mut masked = Vec::with_capacity(self.distinct.len() * width);
        for (i, &row) in self.distinct.iter().enumerate() {
            let at = masked.len();
            masked.extend_from_slice(&x[row as usize * width..(row as usize + 1) * width]);
            if let Some(mask) = mask {
                let m = &mask[i * width..(i + 1) * width];
                masked[at..].iter_mut().zip(m).for_each(|(v, m)| *v *= m);
            }
        }
        let mut out = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            let mut sum = vec![0.0f32; width];
            for e in run.edges.clone() {
                let (c, at) = (self.coefs[e], self.distinct_at[e] as usize * width);
                sum.iter_mut().zip(&masked[at..at + width]).for_each(|(s, v)| *s += c * v);
            }
            out.push(Partial { to: run.owner, at: run.at, values: sum });
        }
        let mut virtual_rows = vec![0.0; self.virtual_rows() * width];
        for p in cluster::exchange(worker, out, |p: &Partial| u64::from(p.to)) {
            let at = p.at as usize * width;
            virtual_rows[at..at + width].copy_from_slice(&p.values);
        }
        virtual_rows
    }

    /// Sends the gradients of this worker's virtual rows (`grads`, `width` each) to their
    /// reducers, and adds to `x_grads` (this worker's input rows `[own | halo]`) each run
    /// edge's share of its run's gradient, times the mask its forward pass read. Every worker
    /// calls it in step.
    pub fn backward(
        &self,
        worker: &mut Worker,
        grads: &[f32],
        width: usize,
        mask: Option<&[f32]>,
        x_grads: &mut [f32],
    ) {
        let out = self.reducers.iter().enumerate().map(|(v, &(to, run))| Partial {
            to,
            at: run,
            values: grads[v * width..(v + 1) * width].to_vec(),
        });
        let mut received = cluster::exchange(worker, out.collect(), |p: &Partial| u64::from(p.to));
        // Run order: the sums into a source row have one order on every run of a shape.
        received.sort_unstable_by_key(|p| p.at);
        // Each source row's share summed over its runs, then masked once (the mask is linear).
        let mut shares = vec![0.0f32; self.distinct.len() * width];
        for p in received {
            for e in self.runs[p.at as usize].edges.clone() {
                let (c, at) = (self.coefs[e], self.distinct_at[e] as usize * width);
                shares[at..at + width].iter_mut().zip(&p.values).for_each(|(s, g)| *s += c * g);
            }
        }
        for (i, (&row, share)) in self.distinct.iter().zip(shares.chunks_mut(width.max(1))).enumerate() {
            if let Some(mask) = mask {
                share.iter_mut().zip(&mask[i * width..(i + 1) * width]).for_each(|(s, m)| *s *= m);
            }
            let at = row as usize * width;
            x_grads[at..at + width].iter_mut().zip(share.iter()).for_each(|(x, s)| *x += s);
        }
    }

    /// The dropout mask of the rows the runs read, `width` each, out of a layer's `mask` (every
    /// input row's): what [`Hubs::forward`] and [`Hubs::backward`] read.
    pub fn mask_rows(&self, mask: &[f32], width: usize) -> Vec<f32> {
        let mut rows = Vec::with_capacity(self.distinct.len() * width);
        for &row in &self.distinct {
            rows.extend_from_slice(&mask[row as usize * width..(row as usize + 1) * width]);
        }
        rows
    }

    /// Partials this worker sends another worker each forward pass (run 0 stays at its owner).
    pub fn rows_sent(&self) -> usize {
        self.runs.iter().filter(|r| r.owner != self.me).count()
    }

    /// Partials' gradients this worker sends another worker each backward pass.
    pub fn grads_sent(&self) -> usize {
        self.reducers.iter().filter(|(to, _)| *to != self.me).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_every_in_edge_once_in_order_and_depend_on_the_count_alone() {
        for (count, threshold) in [(5, 4), (8, 4), (9, 4), (100, 7), (3, 1), (1000, 999)] {
            let cut: Vec<Range<usize>> = runs(count, threshold).collect();
            assert!(cut.len() >= 2, "{count}/{threshold}: a hub is split");
            assert_eq!(cut.first().unwrap().start, 0);
            assert_eq!(cut.last().unwrap().end, count);
            assert!(cut.windows(2).all(|w| w[0].end == w[1].start), "{cut:?}");
            assert!(cut.iter().all(|r| r.len() as u64 <= threshold.max(count.div_ceil(2) as u64)), "{cut:?}");
        }
    }

    #[test]
    fn pieces_hold_each_in_edge_once_with_its_relation_and_are_runs_on_one_relation() {
        let relations = [2u8, 0, 2, 1, 1, 0, 2, 2, 0];
        let pieces = pieces(&relations, 4);
        // Runs 0..3, 3..6 and 6..9, holding relations {0, 2}, {0, 1} and {0, 2}, ascending.
        let held: Vec<(usize, u8)> = pieces.iter().map(|(s, _, r)| (*s, *r)).collect();
        assert_eq!(held, [(0, 0), (0, 2), (1, 0), (1, 1), (2, 0), (2, 2)]);
        let mut seen = vec![0; relations.len()];
        for (_, run, r) in &pieces {
            run.clone().filter(|&e| relations[e] == *r).for_each(|e| seen[e] += 1);
        }
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
        assert_eq!(counts(&relations)[..3], [3, 2, 4]);
        // One relation: a piece per run.
        let runs: Vec<Range<usize>> = runs(9, 4).collect();
        assert_eq!(super::pieces(&[0; 9], 4).into_iter().map(|(_, run, _)| run).collect::<Vec<_>>(), runs);
    }
}
