//! Negative destinations of supervision edges, for link records (GraphFlat) and full-graph
//! link training (GraphTrainer): draw `i` of supervision edge `(src, dst)` is a pure function
//! of `(seed, src, dst, i)` and the graph, never of the cluster's shape. On a typed
//! graph only nodes of the link relation's destination type are drawn (the rest weigh 0).
//!
//! A draw picks a node with probability proportional to its weight (1 for `uniform`,
//! in-degree^0.75 for `degree`) in two steps, so that no worker holds every node:
//! 1. nodes fall into [`BUCKETS`] buckets by a fixed hash of their id; every worker knows each
//!    bucket's total weight (one all-gather of 4096 sums), and a draw picks a bucket with
//!    probability proportional to its total by the first hash of `(seed, src, dst, i)`;
//! 2. the bucket's owner, which holds its nodes sorted by id with their cumulative weights,
//!    picks a node with probability proportional to its weight by the second hash.
//!
//! Together, node `v` in bucket `b` is drawn with probability `(W_b / W) (w_v / W_b) = w_v / W`.
//! Sums are added in id order within a bucket and in bucket order across them, so they, and the
//! draws, have the same bits on any number of workers. The tables are built once
//! ([`Negatives::new`]); a trainer that draws afresh every epoch draws with another seed.

use cluster::exchange;
use cluster::hash::{hash3, mix64, unit_interval};
use schemas::NegativeSampler;
use timely::worker::Worker;

use crate::{Error, NodeStore};

/// Buckets of the first step: a draw's first choice is among this many totals.
pub const BUCKETS: u64 = 4096;

/// Salt of the draws' hashes: apart from the sampling keys of in-edges.
const DRAW_SALT: u64 = 0x6e65_6761_7469_7665;

fn bucket_of(node: i64) -> u64 {
    mix64(node as u64 ^ 0x2545_f491_4f6c_dd1d) % BUCKETS
}

/// The draw weight of a node with `in_degree` in-edges.
fn weight(sampler: NegativeSampler, in_degree: u64) -> f64 {
    match sampler {
        NegativeSampler::Uniform => 1.0,
        NegativeSampler::Degree => (in_degree as f64).powf(0.75),
    }
}

/// The two uniform numbers of draw `i` of `(src, dst)`.
fn draw_hashes(seed: u64, src: i64, dst: i64, i: usize) -> (f64, f64) {
    let edge = hash3(seed ^ DRAW_SALT, src as u64, dst as u64);
    (unit_interval(hash3(edge, i as u64, 0)), unit_interval(hash3(edge, i as u64, 1)))
}

/// The first index whose cumulative weight passes `x`, clamped to the last item with weight
/// (rounding can bring `x` up to the total).
fn pick(cumulative: &[f64], x: f64) -> usize {
    let last = cumulative.partition_point(|&c| c < cumulative[cumulative.len() - 1]);
    cumulative.partition_point(|&c| c <= x).min(last)
}

/// The buckets this worker owns: for each, its nodes sorted by id and their cumulative weights.
struct OwnedBuckets {
    /// (bucket, id, weight), sorted by (bucket, id).
    nodes: Vec<(u64, i64, f64)>,
    /// Cumulative weight within each node's bucket, aligned with `nodes`.
    cumulative: Vec<f64>,
}

impl OwnedBuckets {
    fn new(mut nodes: Vec<(u64, i64, f64)>) -> Self {
        nodes.sort_by_key(|n| (n.0, n.1));
        let mut cumulative = Vec::with_capacity(nodes.len());
        for (i, &(bucket, _, w)) in nodes.iter().enumerate() {
            let before = if i > 0 && nodes[i - 1].0 == bucket { cumulative[i - 1] } else { 0.0 };
            cumulative.push(before + w);
        }
        OwnedBuckets { nodes, cumulative }
    }

    /// (bucket, total weight bits) of every owned bucket with weight.
    fn totals(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (i, &(bucket, _, _)) in self.nodes.iter().enumerate() {
            let last_of_bucket = self.nodes.get(i + 1).is_none_or(|next| next.0 != bucket);
            if last_of_bucket && self.cumulative[i] > 0.0 {
                out.push((bucket, self.cumulative[i].to_bits()));
            }
        }
        out
    }

    /// The node of `bucket` whose cumulative weight first passes `u` times the bucket's total.
    fn draw(&self, bucket: u64, u: f64) -> i64 {
        let start = self.nodes.partition_point(|n| n.0 < bucket);
        let end = self.nodes.partition_point(|n| n.0 <= bucket);
        let cumulative = &self.cumulative[start..end];
        self.nodes[start + pick(cumulative, u * cumulative[cumulative.len() - 1])].1
    }
}

/// A draw on its way to a bucket's owner and back: (requester, edge index, draw, bucket, u or id).
type Query = (u64, u64, u32, u64, u64);

/// How negatives are drawn: the sampler, the seed, and on a typed graph the node type they
/// are drawn from (the link relation's destination type; `None`: every node).
#[derive(Debug, Clone, Copy)]
pub struct Draw {
    pub sampler: NegativeSampler,
    pub seed: u64,
    pub of_type: Option<u8>,
}

/// The draws' tables on this worker, built once for any number of [`Negatives::draw`] calls:
/// the buckets it owns and every bucket's total.
pub struct Negatives {
    owned: OwnedBuckets,
    /// Buckets with weight, ascending, and their cumulative totals.
    bucket_ids: Vec<u64>,
    cumulative: Vec<f64>,
    of_type: bool,
    sampler: NegativeSampler,
}

impl Negatives {
    /// The tables of `nodes` (this worker's) under `sampler`, among `of_type`'s nodes only
    /// when given. Every worker calls this at the same point.
    pub fn new(worker: &mut Worker, nodes: &NodeStore, sampler: NegativeSampler, of_type: Option<u8>) -> Negatives {
        let mine: Vec<(u64, i64, u64)> = (0..nodes.len())
            .filter(|&slot| of_type.is_none_or(|t| nodes.node_type(slot) == t))
            .map(|slot| {
                let id = nodes.ids[slot];
                (bucket_of(id), id, weight(sampler, nodes.in_degree[slot]).to_bits())
            })
            .collect();
        let owned: Vec<(u64, i64, f64)> =
            exchange(worker, mine, |n| n.0).into_iter().map(|(b, id, w)| (b, id, f64::from_bits(w))).collect();
        let owned = OwnedBuckets::new(owned);
        // Each bucket's total, from its one owner, added in bucket order.
        let totals = cluster::all_gather(worker, owned.totals());
        let mut bucket_ids = Vec::with_capacity(totals.len());
        let mut cumulative: Vec<f64> = Vec::with_capacity(totals.len());
        for &(bucket, bits) in &totals {
            bucket_ids.push(bucket);
            cumulative.push(cumulative.last().copied().unwrap_or(0.0) + f64::from_bits(bits));
        }
        Negatives { owned, bucket_ids, cumulative, of_type: of_type.is_some(), sampler }
    }

    /// Whether some node has weight (the same on every worker).
    pub fn can_draw(&self) -> bool {
        !self.cumulative.is_empty()
    }

    /// Draws `count` negative destinations for each of this worker's `edges` (src, dst) with
    /// `seed`. Every worker calls this at the same point, each with its own edges.
    pub fn draw(
        &self,
        worker: &mut Worker,
        seed: u64,
        edges: &[(i64, i64)],
        count: usize,
    ) -> Result<Vec<Vec<i64>>, Error> {
        let peers = worker.peers() as u64;
        if count > 0 && !edges.is_empty() && self.cumulative.is_empty() {
            return Err(Error::BadData(format!(
                "no node can be drawn as a negative: every node{} has weight 0 under negative_sampler = \"{}\"",
                if self.of_type { " of the link relation's destination type" } else { "" },
                self.sampler.name()
            )));
        }
        let me = worker.index() as u64;
        let mut queries: Vec<Query> = Vec::with_capacity(edges.len() * count);
        if let Some(&total) = self.cumulative.last() {
            for (e, &(src, dst)) in edges.iter().enumerate() {
                for i in 0..count {
                    let (first, second) = draw_hashes(seed, src, dst, i);
                    let bucket = self.bucket_ids[pick(&self.cumulative, first * total)];
                    queries.push((me, e as u64, i as u32, bucket, second.to_bits()));
                }
            }
        }
        let answered: Vec<Query> = exchange(worker, queries, |q| q.3)
            .into_iter()
            .map(|(who, e, i, bucket, u)| (who, e, i, bucket, self.owned.draw(bucket, f64::from_bits(u)) as u64))
            .collect();
        let mut negatives = vec![vec![0i64; count]; edges.len()];
        for (_, e, i, _, id) in exchange(worker, answered, move |q| q.0 % peers) {
            negatives[e as usize][i as usize] = id as i64;
        }
        Ok(negatives)
    }
}

/// Draws `count` negative destinations for each of this worker's `edges` (src, dst), once.
/// Every worker calls this at the same point, each with its own edges.
pub fn draw(
    worker: &mut Worker,
    nodes: &NodeStore,
    Draw { sampler, seed, of_type }: Draw,
    edges: &[(i64, i64)],
    count: usize,
) -> Result<Vec<Vec<i64>>, Error> {
    Negatives::new(worker, nodes, sampler, of_type).draw(worker, seed, edges, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_skips_empty_items_and_clamps() {
        let cumulative = [0.0, 2.0, 2.0, 5.0, 5.0];
        assert_eq!(pick(&cumulative, 0.1), 1);
        assert_eq!(pick(&cumulative, 2.0), 3);
        assert_eq!(pick(&cumulative, 4.99), 3);
        assert_eq!(pick(&cumulative, 5.0), 3, "rounding up to the total stays on the last item with weight");
    }

    #[test]
    fn a_bucket_draws_in_proportion_to_weight() {
        let owned = OwnedBuckets::new(vec![(7, 30, 3.0), (7, 10, 1.0), (2, 5, 1.0), (7, 20, 0.0)]);
        assert_eq!(owned.totals(), vec![(2, 1.0f64.to_bits()), (7, 4.0f64.to_bits())]);
        let mut counts = [0u32; 3];
        for k in 0..4000 {
            let id = owned.draw(7, (k as f64 + 0.5) / 4000.0);
            counts[(id / 10 - 1) as usize] += 1;
        }
        assert_eq!(counts, [1000, 0, 3000], "ids 10, 20 (weight 0), 30");
    }
}
