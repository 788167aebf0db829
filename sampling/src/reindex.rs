//! Sampling every node's in-edges, with re-indexing for hubs. A node whose in-degree passes the
//! threshold has its in-edges spread over several reducers by a salted key (dst, salt); each
//! keeps its best `limit` candidates, and the owner merges the partial samples. Because keys are
//! hash-derived, the merge is exact: the result equals sampling the whole list in one place.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use schemas::Sampler;
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::Error;
use cluster::{all_gather, shuffle};
use crate::graph::{InEdge, NodeStore};
use cluster::hash::{hash3, owner_key, reducer_key};
use crate::load::Edge;
use crate::sample::{Candidate, Reservoir};

/// How sampling runs.
#[derive(Debug, Clone, Copy)]
pub struct SampleSpec {
    pub sampler: Sampler,
    pub seed: u64,
    /// In-edges kept per node: the largest fanout (`usize::MAX` for every edge).
    pub limit: usize,
    /// In-degree above which a node is re-indexed; 0 turns re-indexing off.
    pub hub_threshold: u64,
}

/// An in-edge on its way to a (possibly salted) reducer.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Routed {
    dst: i64,
    salt: u32,
    candidate: Candidate,
}

/// A reducer's partial sample of one node's in-edges, on its way to the owner.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PartialSample {
    dst: i64,
    kept: Vec<Candidate>,
}

/// How many salted reducers a hub's in-edges are spread over: one per `threshold` in-edges,
/// at least 2 and at most 4 per worker.
fn salts(in_degree: u64, threshold: u64, peers: usize) -> u32 {
    in_degree.div_ceil(threshold).clamp(2, 4 * peers as u64) as u32
}

/// What sampling did, for the summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sampled {
    /// Nodes re-indexed (the same on every worker).
    pub hubs: u64,
    /// In-edges this worker's reducers took in: the load re-indexing balances.
    pub reduced_edges: u64,
}

/// Fills every owner's `sampled` in-edges. Consumes this worker's edges.
pub fn sample_in_edges(
    worker: &mut Worker,
    nodes: &Rc<RefCell<NodeStore>>,
    edges: Vec<Edge>,
    spec: SampleSpec,
) -> Result<Sampled, Error> {
    let peers = worker.peers();
    let local_hubs: Vec<(i64, u32)> = if spec.hub_threshold == 0 {
        Vec::new()
    } else {
        let store = nodes.borrow();
        (0..store.len())
            .filter(|&s| store.in_degree[s] > spec.hub_threshold)
            .map(|s| (store.ids[s], salts(store.in_degree[s], spec.hub_threshold, peers)))
            .collect()
    };
    let hubs: HashMap<i64, u32> = all_gather(worker, local_hubs).into_iter().collect();
    let hub_count = hubs.len() as u64;

    // Round 1: every in-edge to its reducer; reducers keep their best `limit`.
    let reducers: Rc<RefCell<HashMap<(i64, u32), Reservoir>>> = Rc::default();
    let reduced = Rc::new(std::cell::Cell::new(0u64));
    let (sink, count) = (reducers.clone(), reduced.clone());
    let limit = spec.limit;
    shuffle(
        worker,
        |r: &Routed| reducer_key(r.dst, u64::from(r.salt)),
        move |r: Routed| {
            count.set(count.get() + 1);
            sink.borrow_mut().entry((r.dst, r.salt)).or_insert_with(|| Reservoir::new(limit)).push(r.candidate)
        },
        |send| {
            for chunk in edges.chunks(1 << 16) {
                send(
                    chunk
                        .iter()
                        .map(|e| {
                            let salt = hubs
                                .get(&e.dst)
                                .map_or(0, |&s| (hash3(spec.seed, e.src as u64, 1) % u64::from(s)) as u32);
                            Routed {
                                dst: e.dst,
                                salt,
                                candidate: Candidate::new(spec.sampler, spec.seed, e.dst, e.src, e.weight),
                            }
                        })
                        .collect(),
                );
            }
            Ok::<(), Error>(())
        },
    )?;
    drop(edges);

    // Round 2: partial samples to the owner, merged there. For a node that is not a hub the
    // reducer is the owner, so this crosses no wire.
    let partials: Vec<PartialSample> =
        reducers.take().into_iter().map(|((dst, _), r)| PartialSample { dst, kept: r.into_sorted() }).collect();
    let merged: Rc<RefCell<HashMap<i64, Reservoir>>> = Rc::default();
    let sink = merged.clone();
    shuffle(
        worker,
        |p: &PartialSample| owner_key(p.dst),
        move |p: PartialSample| {
            let mut merged = sink.borrow_mut();
            let reservoir = merged.entry(p.dst).or_insert_with(|| Reservoir::new(limit));
            p.kept.into_iter().for_each(|c| reservoir.push(c));
        },
        |send| {
            send(partials);
            Ok::<(), Error>(())
        },
    )?;

    let mut store = nodes.borrow_mut();
    for (dst, reservoir) in merged.take() {
        // The loader checked every endpoint, so the owner has this node.
        if let Some(slot) = store.slot(dst) {
            store.sampled[slot] =
                reservoir.into_sorted().into_iter().map(|c| InEdge { src: c.src, weight: c.weight }).collect();
        }
    }
    Ok(Sampled { hubs: hub_count, reduced_edges: reduced.get() })
}
