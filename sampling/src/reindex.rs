//! Sampling every node's in-edges, with re-indexing for hubs. A node whose in-degree passes the
//! threshold has its in-edges spread over several reducers by a salted key (dst, salt); each
//! keeps its best `limit` candidates, and the owner merges the partial samples. Because keys are
//! hash-derived, the merge is exact: the result equals sampling the whole list in one place.

use std::cell::RefCell;
use std::rc::Rc;

use schemas::Sampler;
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::Error;
use cluster::{all_gather, shuffle};
use crate::graph::{InEdge, NodeStore};
use cluster::hash::{IdMap, hash3, owner_key, reducer_key};
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

/// In-edges on their way to one reducing worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Bundle {
    to: u32,
    edges: Vec<Routed>,
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
    let hubs: IdMap<i64, u32> = all_gather(worker, local_hubs).into_iter().collect();
    let hub_count = hubs.len() as u64;

    // Round 1: every in-edge to its reducer; reducers keep their best `limit`. A node that is
    // not a hub is reduced at its owner (salt 0 routes there), straight into a reservoir by
    // slot; a hub's runs are reduced by (dst, salt) wherever they land.
    let slots = nodes.borrow().len();
    let owned: Rc<RefCell<Vec<Reservoir>>> = Rc::new(RefCell::new((0..slots).map(|_| Reservoir::new(spec.limit)).collect()));
    let runs: Rc<RefCell<IdMap<(i64, u32), Reservoir>>> = Rc::default();
    let reduced = Rc::new(std::cell::Cell::new(0u64));
    let (own_sink, run_sink, store, count) = (owned.clone(), runs.clone(), nodes.clone(), reduced.clone());
    let is_hub = Rc::new(hubs.clone());
    let limit = spec.limit;
    // Edges cross in bundles, one per reducing worker and chunk: one timely item per bundle
    // instead of one per edge.
    let peers = worker.peers() as u64;
    shuffle(
        worker,
        |b: &Bundle| u64::from(b.to),
        move |b: Bundle| {
            count.set(count.get() + b.edges.len() as u64);
            let store = store.borrow();
            let (mut own, mut runs) = (own_sink.borrow_mut(), run_sink.borrow_mut());
            for r in b.edges {
                match if is_hub.contains_key(&r.dst) { None } else { store.slot(r.dst) } {
                    Some(slot) => own[slot].push(r.candidate),
                    None => runs.entry((r.dst, r.salt)).or_insert_with(|| Reservoir::new(limit)).push(r.candidate),
                }
            }
        },
        |send| {
            for chunk in edges.chunks(1 << 16) {
                let mut bundles: Vec<Bundle> = (0..peers as u32).map(|to| Bundle { to, edges: Vec::new() }).collect();
                for e in chunk {
                    let salt = hubs.get(&e.dst).map_or(0, |&s| (hash3(spec.seed, e.src as u64, 1) % u64::from(s)) as u32);
                    let to = (reducer_key(e.dst, u64::from(salt)) % peers) as usize;
                    let candidate = Candidate::new(spec.sampler, spec.seed, e.dst, e.src, e.weight);
                    bundles[to].edges.push(Routed { dst: e.dst, salt, candidate });
                }
                send(bundles.into_iter().filter(|b| !b.edges.is_empty()).collect());
            }
            Ok::<(), Error>(())
        },
    )?;
    drop(edges);

    // Round 2: the hubs' partial samples to their owners, merged there (exactly: keys are
    // hash-derived, so the best of the bests is the best of all).
    let partials: Vec<PartialSample> =
        runs.take().into_iter().map(|((dst, _), r)| PartialSample { dst, kept: r.into_sorted() }).collect();
    let (sink, store) = (owned.clone(), nodes.clone());
    shuffle(
        worker,
        |p: &PartialSample| owner_key(p.dst),
        move |p: PartialSample| {
            // The loader checked every endpoint, so the owner has this node.
            if let Some(slot) = store.borrow().slot(p.dst) {
                let reservoir = &mut sink.borrow_mut()[slot];
                p.kept.into_iter().for_each(|c| reservoir.push(c));
            }
        },
        |send| {
            send(partials);
            Ok::<(), Error>(())
        },
    )?;

    let mut store = nodes.borrow_mut();
    for (slot, reservoir) in owned.take().into_iter().enumerate() {
        store.sampled[slot] = reservoir.into_sorted().into_iter().map(|c| InEdge { src: c.src, weight: c.weight }).collect();
    }
    Ok(Sampled { hubs: hub_count, reduced_edges: reduced.get() })
}
