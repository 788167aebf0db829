//! The coarsest level's partition: every worker sends its nodes (weight and neighbors) to
//! worker 0, which partitions the whole level with [`crate::sequential`] and sends each node's
//! part back to its owner. The coarsening stops at `coarse_nodes` nodes, so what worker 0
//! holds here is bounded by that, not by the graph. Worker 0 sorts the nodes by id before it
//! numbers them: the partition is the same on any cluster shape.

use cluster::exchange;
use cluster::hash::{IdMap, owner_key};
use timely::worker::Worker;

use crate::level::Level;
use crate::refine::Balance;
use crate::sequential::{self, Csr};

/// A node as it travels to worker 0: `(id, weight, [(neighbor, edge weight)])`.
type Row = (i64, u64, Vec<(i64, u64)>);

/// The part of each own node of `level` (as `level.ids`).
pub fn initial(worker: &mut Worker, level: &Level, balance: Balance, seed: u64) -> Vec<u32> {
    let rows: Vec<Row> = (0..level.len())
        .map(|i| (level.ids[i], level.weights[i], level.neighbors(i).map(|(v, w)| (level.known[v], w)).collect()))
        .collect();
    let rows = exchange(worker, rows, |_| 0);
    let parts: Vec<(i64, u32)> = if worker.index() == 0 { partition(rows, balance, seed) } else { Vec::new() };
    let parts: IdMap<i64, u32> = exchange(worker, parts, |(id, _)| owner_key(*id)).into_iter().collect();
    level.ids.iter().map(|id| parts[id]).collect()
}

/// Worker 0's part of the work: the level as compressed rows, numbered by id, partitioned.
fn partition(mut rows: Vec<Row>, balance: Balance, seed: u64) -> Vec<(i64, u32)> {
    rows.sort_unstable_by_key(|r| r.0);
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let number = |id: i64| ids.binary_search(&id).expect("a neighbor is a node of the level") as u32;
    let mut g = Csr { at: vec![0], ..Csr::default() };
    for (_, weight, neighbors) in &rows {
        for &(v, w) in neighbors {
            g.adj.push(number(v));
            g.ew.push(w);
        }
        g.at.push(g.adj.len());
        g.vw.push(*weight);
    }
    let part = sequential::partition(&g, balance.parts, balance.cap, seed);
    ids.into_iter().zip(part).collect()
}
