//! Sampling every node's in-edges, with re-indexing for hubs. A node whose in-degree passes the
//! threshold, and what its sample keeps (`is_hub`), has its in-edges spread over several
//! reducers by a salted key (dst, salt); each keeps its best `limit` candidates, and the owner
//! merges the partial samples. Because keys are hash-derived, the merge is exact: the result
//! equals sampling the whole list in one place.
//! Every other node is sampled at its owner, from one counting-sorted array ([`crate::runs`]).
//!
//! Edge features travel with their edges, flat beside them (`edge_dim` values per edge): in
//! the routed bundles, in the owner's runs, with a hub's candidates (each holds its own), and
//! into the store's sampled in-edges. They take no part in the keys; they break the ties of
//! parallel edges (see [`crate::sample::Candidate`]).
//!
//! Asked for ([`SampleSpec::source_slots`]), each in-edge also brings its source's slot at the
//! source's owner, which the reader knows from the map step ([`ReadEdges::slots`]), marked
//! [`ELSEWHERE`] when that owner is not the destination's: in the routed edge, the owner's
//! runs, a hub's candidates, and into the store ([`NodeStore::take_source_slots`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use schemas::Sampler;
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::Error;
use crate::graph::{ELSEWHERE, InEdge, NodeStore};
use crate::load::{ReadEdges, relation_of};
use crate::runs::{Kept, OwnedRuns, keep_best};
use crate::sample::{Candidate, Reservoir};
use cluster::Owners;
use cluster::hash::{IdMap, hash3};
use cluster::{all_gather, shuffle};

/// How sampling runs.
#[derive(Debug, Clone)]
pub struct SampleSpec {
    pub sampler: Sampler,
    pub seed: u64,
    /// In-edges kept per node: the largest fanout (`usize::MAX` for every edge).
    pub limit: usize,
    /// In-degree above which a node is re-indexed; 0 turns re-indexing off.
    pub hub_threshold: u64,
    /// A typed graph: in-edges kept per node and relation, by relation (its largest fanout);
    /// empty for a homogeneous graph, whose one relation keeps `limit`.
    pub relation_limits: Vec<usize>,
    /// Keep each sampled in-edge's source slot ([`NodeStore::take_source_slots`]): 4 bytes an
    /// in-edge, for a caller that reads its sources' rows.
    pub source_slots: bool,
}

impl SampleSpec {
    /// In-edges of `relation` kept per node.
    pub fn limit_of(&self, relation: u8) -> usize {
        self.relation_limits.get(usize::from(relation)).copied().unwrap_or(self.limit)
    }

    fn typed(&self) -> bool {
        !self.relation_limits.is_empty()
    }
}

/// An in-edge on its way to its reducer: the owner of its destination (`salt == OWNED`, `to` the
/// destination's slot there), or one of a hub's salted reducers (`to` the hub's id, `salt` its
/// run). Its sampling key is computed where it is reduced. `source` is its source slot (see
/// [`NodeStore::take_source_slots`]; 0 when nobody asked).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Routed {
    to: i64,
    src: i64,
    weight: f32,
    salt: u32,
    source: u32,
    relation: u8,
}

impl Routed {
    fn in_edge(&self) -> InEdge {
        InEdge { src: self.src, weight: self.weight, relation: self.relation }
    }
}

/// What the router reads of an edge's endpoint: its id, its slot at its owner and its salt
/// count if it is a hub (0 if not). One 16-byte entry an endpoint, so that routing an edge
/// reads two random cache lines, not one per array (at 10M nodes a worker's endpoints take
/// 160 MB, far past the cache).
#[derive(Debug, Clone, Copy)]
struct End {
    id: i64,
    slot: u32,
    salts: u32,
    /// Its routing key (`cluster::Owners::key`), looked up once per endpoint rather than once
    /// per edge: with an owner map, a lookup is a random read of a table the size of the graph.
    key: u64,
}

/// Every endpoint a worker read, indexed as its [`crate::load::Edge`]s name them.
struct Ends(Vec<End>);

impl Ends {
    fn new(ids: Vec<i64>, slots: Vec<u32>, hubs: &IdMap<i64, u32>, owners: &Owners) -> Self {
        let salts = |id| hubs.get(&id).copied().unwrap_or(0);
        let end = |(id, slot)| End { id, slot, salts: salts(id), key: owners.key(id) };
        Ends(ids.into_iter().zip(slots).map(end).collect())
    }

    fn prefetch(&self, edge: &crate::load::Edge) {
        cluster::prefetch::read(&self.0[edge.dst as usize]);
        cluster::prefetch::read(&self.0[edge.src as usize]);
    }
}

/// The `salt` of an in-edge that goes to its destination's owner.
const OWNED: u32 = u32::MAX;

/// In-edges on their way to one reducing worker, with their features (`edge_dim` per edge,
/// aligned with `edges`; empty without edge features).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Bundle {
    to: u32,
    edges: Vec<Routed>,
    features: Vec<f32>,
}

/// In-edges routed per message round: a bundle per reducing worker and chunk.
const CHUNK: usize = 1 << 16;

/// Edges ahead of the one being routed whose endpoints are prefetched (see `cluster::prefetch`).
const PREFETCH_EDGES: usize = 8;

/// What a hub's in-edge carries through its reducers beside its candidate: its source slot (see
/// [`NodeStore::take_source_slots`]) and its features.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct HubEdge {
    source: u32,
    features: Vec<f32>,
}

/// A hub's partial sample at a reducer: its best candidates so far.
type HubRun = Reservoir<HubEdge>;

/// A reducer's partial samples, by (hub, relation, salt).
type HubRuns = IdMap<(i64, u8, u32), HubRun>;

/// A reducer's partial sample of one node's in-edges, each with its features, on its way to
/// the owner.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PartialSample {
    dst: i64,
    relation: u8,
    kept: Vec<Candidate<HubEdge>>,
}

/// Whether a node of `in_degree` is re-indexed: its in-degree passes the threshold (not 0, which
/// turns re-indexing off), and its sample, at most `sample` in-edges over all relations, cannot
/// keep them all. A node whose sample keeps every in-edge (`sampler = "all"`, or fanouts at
/// least its in-degree) gains nothing from salted reducers, which could drop none of them: its
/// owner would receive and merge its whole in-edge list anyway, and sort it a second time.
fn is_hub(in_degree: u64, threshold: u64, sample: u64) -> bool {
    threshold > 0 && in_degree > threshold && in_degree > sample
}

/// How many salted reducers a hub's in-edges are spread over: one per `threshold` in-edges,
/// at least 2 and at most 4 per worker. The count may follow the worker count because the
/// merge is an exact selection: keys depend only on the edge, so the owner keeps the same best
/// `limit` however the in-edges were grouped, and records are the same on any cluster.
/// GraphInfer's hub split (`graphinfer::plan::salts`) cannot do this: it merges floating-point
/// sums, whose bits change with their grouping (see `docs/graphflat.md`).
fn salts(in_degree: u64, threshold: u64, peers: usize) -> u32 {
    in_degree.div_ceil(threshold).clamp(2, 4 * peers as u64) as u32
}

/// Sorts `candidates` by relation, each relation's best first, and keeps each relation's
/// best `limit_of(relation)`.
fn keep_best_by_relation<P>(
    candidates: &mut Vec<Candidate<P>>,
    relation: impl Fn(&Candidate<P>) -> u8,
    limit_of: impl Fn(u8) -> usize,
) {
    candidates.sort_unstable_by(|a, b| relation(a).cmp(&relation(b)).then_with(|| a.cmp(b)));
    let mut rank = 0;
    let mut previous = None;
    candidates.retain(|c| {
        let r = relation(c);
        if previous != Some(r) {
            (previous, rank) = (Some(r), 0);
        }
        rank += 1;
        rank <= limit_of(r)
    });
}

/// What sampling did, for the summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sampled {
    /// Nodes re-indexed (the same on every worker).
    pub hubs: u64,
    /// In-edges this worker's reducers took in: the load re-indexing balances.
    pub reduced_edges: u64,
}

/// Fills every owner's `sampled` in-edges with their features, and its edge feature
/// statistics. Consumes this worker's edges.
pub fn sample_in_edges(
    worker: &mut Worker,
    nodes: &Rc<RefCell<NodeStore>>,
    edges: ReadEdges,
    spec: SampleSpec,
) -> Result<Sampled, Error> {
    room_for_source_slots(worker, &nodes.borrow(), &spec)?;
    // The most in-edges a node keeps, over all relations.
    let sample: u64 =
        (0..spec.relation_limits.len().max(1)).map(|r| spec.limit_of(r as u8) as u64).fold(0, u64::saturating_add);
    let hubs = find_hubs(worker, &nodes.borrow(), &spec, sample);
    let hub_count = hubs.len() as u64;
    let dim = edges.edge_dim;
    let ReadEdges { edges, relations, features, edge_stats, ends, slots, relation_edges, .. } = edges;
    let ends = Ends::new(ends, slots, &hubs, &nodes.borrow().owners);
    let read = Read { edges, relations, features, dim };
    let Reducer { owned, runs, reduced, .. } = reduce_in_edges(worker, nodes, &hubs, &spec, sample, read, &ends)?;
    let merged = merge_hub_samples(worker, nodes, runs.take(), &spec)?;
    // Each node's best `limit` per relation, by relation and best first, kept in place in
    // the owner's runs, which become the store's flat arrays (`runs.rs`).
    let owned = owned.take();
    let kept = keep_samples(&mut nodes.borrow_mut(), owned, merged, &hubs, &spec, dim);
    crate::agree(worker, kept)?;
    let mut store = nodes.borrow_mut();
    store.edge_stats = edge_stats;
    store.relation_edges = relation_edges;
    Ok(Sampled { hubs: hub_count, reduced_edges: reduced.get() })
}

/// Fails on every worker alike when a worker holds more nodes than source slots address.
fn room_for_source_slots(worker: &mut Worker, store: &NodeStore, spec: &SampleSpec) -> Result<(), Error> {
    let held = store.len();
    let room = if spec.source_slots && held >= ELSEWHERE as usize {
        let message = format!("a worker holds {held} nodes, more than the 2^31 its source slots address: add workers");
        Err(Error::Internal(message))
    } else {
        Ok(())
    };
    crate::agree(worker, room)
}

/// Every hub of the graph (the same map on every worker) with its salt count, from each
/// owner's in-degrees; `sample` is the most in-edges a node keeps.
fn find_hubs(worker: &mut Worker, store: &NodeStore, spec: &SampleSpec, sample: u64) -> IdMap<i64, u32> {
    let peers = worker.peers();
    let local_hubs: Vec<(i64, u32)> = (0..store.len())
        .filter(|&s| is_hub(store.in_degree[s], spec.hub_threshold, sample))
        .map(|s| (store.ids[s], salts(store.in_degree[s], spec.hub_threshold, peers)))
        .collect();
    all_gather(worker, local_hubs).into_iter().collect()
}

/// This worker's read edges on their way to sampling: the edges, their relations (typed) and
/// features (`dim` an edge), aligned.
struct Read {
    edges: Vec<crate::load::Edge>,
    relations: Vec<u8>,
    features: Vec<f32>,
    dim: usize,
}

/// A reducing worker's state in round 1: the owner's runs (`OWNED` in-edges, counting-sorted
/// by slot), the hubs' reservoirs by (dst, relation, salt), the first slot whose run
/// overflowed (none can: the loader counted every in-edge at its owner), and the in-edges
/// taken in.
#[derive(Clone)]
struct Reducer {
    owned: Rc<RefCell<OwnedRuns>>,
    runs: Rc<RefCell<HubRuns>>,
    overflow: Rc<RefCell<Option<usize>>>,
    reduced: Rc<Cell<u64>>,
    spec: Rc<SampleSpec>,
    dim: usize,
}

impl Reducer {
    /// Reduces bundle `b`: each owned in-edge into its run, each hub's into its reservoir.
    fn take(&self, b: Bundle) {
        let (sampler, seed, dim) = (self.spec.sampler, self.spec.seed, self.dim);
        self.reduced.set(self.reduced.get() + b.edges.len() as u64);
        let (mut own, mut runs) = (self.owned.borrow_mut(), self.runs.borrow_mut());
        for (i, &r) in b.edges.iter().enumerate() {
            let features = &b.features[i * dim..(i + 1) * dim];
            if r.salt != OWNED {
                let beside = HubEdge { source: r.source, features: features.to_vec() };
                let candidate = Candidate::carrying(sampler, seed, r.to, r.src, r.weight, features, beside);
                let limit = self.spec.limit_of(r.relation);
                runs.entry((r.to, r.relation, r.salt)).or_insert_with(|| Reservoir::new(limit)).push(candidate);
            } else if let Err(slot) = own.push(r.to as usize, r.in_edge(), r.source, features) {
                // The loader counted every in-edge at its owner.
                self.overflow.borrow_mut().get_or_insert(slot);
            }
        }
    }
}

/// Round 1: every in-edge to its reducer. A node that is not a hub is reduced at its owner
/// (`OWNED`, addressed by its slot there), into its run of the owner's counting sort; a hub's
/// runs are reduced by (dst, salt) wherever they land, each into a bounded reservoir. Returns
/// the reducer's state once every worker has routed every edge and no run overflowed.
fn reduce_in_edges(
    worker: &mut Worker,
    nodes: &Rc<RefCell<NodeStore>>,
    hubs: &IdMap<i64, u32>,
    spec: &SampleSpec,
    sample: u64,
    read: Read,
    ends: &Ends,
) -> Result<Reducer, Error> {
    let owned = {
        let store = nodes.borrow();
        // A hub's run is room for its sample, reduced elsewhere, to be kept in place.
        let capacity = (0..store.len()).map(|s| {
            if hubs.contains_key(&store.ids[s]) { store.in_degree[s].min(sample) } else { store.in_degree[s] }
        });
        Rc::new(RefCell::new(OwnedRuns::new(capacity, read.dim, spec.source_slots)))
    };
    let reducer = Reducer {
        owned,
        runs: Rc::default(),
        overflow: Rc::default(),
        reduced: Rc::new(Cell::new(0)),
        spec: Rc::new(spec.clone()),
        dim: read.dim,
    };
    let sink = reducer.clone();
    let router = Router { ends, peers: worker.peers() as u64, seed: spec.seed, source_slots: spec.source_slots };
    shuffle(worker, |b: &Bundle| u64::from(b.to), move |b: Bundle| sink.take(b), |send| router.route(read, send))?;
    let overflow = reducer.overflow.take().map_or(Ok(()), |slot| Err(overflowed(&nodes.borrow(), slot)));
    crate::agree(worker, overflow)?;
    Ok(reducer)
}

/// How an in-edge finds its reducer: its endpoints' entries, the worker count, the seed of
/// the hubs' salts, and whether it carries its source slot.
struct Router<'a> {
    ends: &'a Ends,
    peers: u64,
    seed: u64,
    source_slots: bool,
}

impl Router<'_> {
    /// Sends every edge of `read` to its reducer, a chunk at a time from the end, releasing
    /// the read edges and their features as they go: the edges and the owners' runs are not
    /// held in full at once.
    fn route(&self, read: Read, mut send: impl FnMut(Vec<Bundle>)) -> Result<(), Error> {
        let Read { mut edges, mut relations, mut features, dim } = read;
        while !edges.is_empty() {
            let from = edges.len().saturating_sub(CHUNK);
            let mut bundles: Vec<Bundle> =
                (0..self.peers as u32).map(|to| Bundle { to, edges: Vec::new(), features: Vec::new() }).collect();
            for (i, e) in edges[from..].iter().enumerate() {
                // The endpoints are at random places in their array.
                if let Some(ahead) = edges.get(from + i + PREFETCH_EDGES) {
                    self.ends.prefetch(ahead);
                }
                let (routed, key) = self.routed(e, relation_of(&relations, from + i));
                let bundle = &mut bundles[(key % self.peers) as usize];
                bundle.edges.push(routed);
                bundle.features.extend_from_slice(&features[(from + i) * dim..(from + i + 1) * dim]);
            }
            edges.truncate(from);
            relations.truncate(from);
            features.truncate(from * dim);
            if edges.len() < edges.capacity() / 2 {
                edges.shrink_to_fit();
                relations.shrink_to_fit();
                features.shrink_to_fit();
            }
            send(bundles.into_iter().filter(|b| !b.edges.is_empty()).collect());
        }
        Ok(())
    }

    /// Edge `e` of `relation` as routed, and its reducer's key: its destination's owner, or
    /// one of a hub's salted reducers (each relation of a hub over its own).
    #[inline]
    fn routed(&self, e: &crate::load::Edge, relation: u8) -> (Routed, u64) {
        let (d, s) = (self.ends.0[e.dst as usize], self.ends.0[e.src as usize]);
        let (dst, src, weight, peers) = (d.id, s.id, e.weight, self.peers);
        let source = match self.source_slots {
            false => 0,
            true if peers == 1 || s.key % peers == d.key % peers => s.slot,
            true => s.slot | ELSEWHERE,
        };
        match d.salts {
            0 => (Routed { to: i64::from(d.slot), src, weight, salt: OWNED, source, relation }, d.key),
            salts => {
                let salt = (hash3(self.seed, src as u64, 1) % u64::from(salts)) as u32;
                let reducer = u64::from(salt) | (u64::from(relation) << 32);
                (Routed { to: dst, src, weight, salt, source, relation }, d.key.wrapping_add(reducer))
            }
        }
    }
}

/// Round 2: the hubs' partial samples (`runs`) to their owners, merged there (exactly: keys
/// are hash-derived, so the best of the bests is the best of all). Returns the owner's merged
/// reservoirs by (slot, relation).
fn merge_hub_samples(
    worker: &mut Worker,
    nodes: &Rc<RefCell<NodeStore>>,
    runs: HubRuns,
    spec: &SampleSpec,
) -> Result<IdMap<(usize, u8), HubRun>, Error> {
    let partials: Vec<PartialSample> = runs
        .into_iter()
        .map(|((dst, relation, _), r)| PartialSample { dst, relation, kept: r.into_sorted() })
        .collect();
    let merged: Rc<RefCell<IdMap<(usize, u8), HubRun>>> = Rc::default();
    let (sink, store) = (merged.clone(), nodes.clone());
    let owner_limits = Rc::new(spec.clone());
    let owners = nodes.borrow().owners.clone();
    shuffle(
        worker,
        move |p: &PartialSample| owners.key(p.dst),
        move |p: PartialSample| {
            // The loader checked every endpoint, so the owner has this node.
            if let Some(slot) = store.borrow().slot(p.dst) {
                let mut merged = sink.borrow_mut();
                let limit = owner_limits.limit_of(p.relation);
                let reservoir = merged.entry((slot, p.relation)).or_insert_with(|| Reservoir::new(limit));
                p.kept.into_iter().for_each(|c| reservoir.push(c));
            }
        },
        |send| {
            send(partials);
            Ok::<(), Error>(())
        },
    )?;
    Ok(merged.take())
}

/// Each node's best `limit` per relation, by relation and best first, kept in place in the
/// owner's runs, which become the store's flat arrays (`runs.rs`): a hub's from its merged
/// reservoirs, any other node's from its run.
fn keep_samples(
    store: &mut NodeStore,
    mut owned: OwnedRuns,
    mut merged: IdMap<(usize, u8), HubRun>,
    hubs: &IdMap<i64, u32>,
    spec: &SampleSpec,
    dim: usize,
) -> Result<(), Error> {
    let (sampler, seed, relations) = (spec.sampler, spec.seed, spec.relation_limits.len().max(1));
    let mut at = Vec::with_capacity(store.len() + 1);
    let (mut kept, mut best) = (Kept::default(), Vec::new());
    let mut place = 0;
    for slot in 0..store.len() {
        at.push(place);
        kept.clear();
        if hubs.contains_key(&store.ids[slot]) {
            for relation in 0..relations as u8 {
                let Some(reservoir) = merged.remove(&(slot, relation)) else { continue };
                for c in reservoir.into_sorted() {
                    kept.edges.push(InEdge { src: c.src, weight: c.weight, relation });
                    kept.features.extend_from_slice(&c.payload.features);
                    if spec.source_slots {
                        kept.sources.push(c.payload.source);
                    }
                }
            }
        } else {
            best.clear();
            owned
                .candidates(slot, sampler, seed, store.ids[slot], &mut best)
                .map_err(|slot| overflowed(store, slot))?;
            if spec.typed() {
                keep_best_by_relation(&mut best, |c| owned.relation(c.payload), |r| spec.limit_of(r));
            } else {
                keep_best(&mut best, spec.limit);
            }
            for c in &best {
                kept.edges.push(InEdge { src: c.src, weight: c.weight, relation: owned.relation(c.payload) });
                kept.features.extend_from_slice(owned.features(c.payload));
                kept.sources.extend(owned.source(c.payload));
            }
        }
        place = owned.keep(slot, place, &kept).map_err(|slot| overflowed(store, slot))?;
    }
    at.push(place);
    let Kept { edges, features, sources } = owned.into_kept(place);
    store.set_sampled(at, edges, dim, features, sources);
    Ok(())
}

/// The error of a slot whose in-edges did not fit its run: a bug upstream (see `runs.rs`).
fn overflowed(store: &NodeStore, slot: usize) -> Error {
    let node = store.ids.get(slot).copied();
    Error::Internal(format!("node {node:?} (slot {slot}) received or kept more in-edges than its run holds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_node_whose_sample_drops_in_edges_is_a_hub() {
        assert!(is_hub(11, 10, 5), "past the threshold and the sample");
        assert!(!is_hub(10, 10, 5), "at the threshold");
        assert!(!is_hub(11, 10, 11), "its sample keeps every in-edge");
        assert!(!is_hub(11, 10, u64::MAX), "sampler all");
        assert!(!is_hub(1000, 0, 5), "re-indexing off");
    }

    /// Per relation, the best `limit` by the candidates' order, whatever the arrival order:
    /// the same selection as sampling each relation's in-edges alone.
    #[test]
    fn each_relation_keeps_its_own_best() {
        let edges: Vec<(i64, u8)> = (0..60).map(|i| (i, (i % 3) as u8)).collect();
        let limits = [2usize, 100, 5];
        let mut all: Vec<Candidate<u8>> =
            edges.iter().map(|&(src, r)| Candidate::carrying(Sampler::Uniform, 9, 1, src, 1.0, &[], r)).collect();
        all.reverse();
        keep_best_by_relation(&mut all, |c| c.payload, |r| limits[usize::from(r)]);
        for r in 0..3u8 {
            let mut alone = Reservoir::new(limits[usize::from(r)]);
            edges
                .iter()
                .filter(|e| e.1 == r)
                .for_each(|&(src, _)| alone.push(Candidate::new(Sampler::Uniform, 9, 1, src, 1.0)));
            let expected: Vec<i64> = alone.into_sorted().iter().map(|c| c.src).collect();
            let got: Vec<i64> = all.iter().filter(|c| c.payload == r).map(|c| c.src).collect();
            assert_eq!(got, expected, "relation {r}");
        }
        assert!(all.windows(2).all(|w| w[0].payload <= w[1].payload), "runs by relation");
    }
}
