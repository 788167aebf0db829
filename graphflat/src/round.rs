//! The k reduce rounds, as one timely dataflow over batches of targets (one batch per epoch).
//!
//! What crosses the wire, per round `d` (0 ..= k):
//! - `Request { root, node, hop: d }` to the owner of `node`: "root's record reaches `node` at hop d";
//! - [`Replies`] back to the owners of the roots: per node asked, its features and in-degree,
//!   and (for d < k) its sampled in-edges with the layers each serves and, when the edge table
//!   has them, their features (flat, `edge_dim` per edge).
//!
//! The owner of a root merges replies into the record in progress; every in-edge source it has
//! not seen yet is at hop d + 1 and becomes a request of the next round. After round k the
//! record is complete. Rounds are unrolled operators, so records of several batches can be in
//! different rounds at once, and a batch's state is dropped as soon as it is written.
//!
//! Replies travel in batches: each container of requests an owner answers becomes one
//! [`Replies`] per destination worker, whose features, edges and edge features sit in three
//! flat buffers. The features buffer becomes a shared block that the records it answered refer
//! to (`crate::record::Gathered`) until they are laid out: a node asked for costs one copy of
//! its features into the reply and one into the batch's columns, never an allocation of its
//! own (a 1M-node job asks for 18M nodes), and a record in progress never grows a feature
//! buffer (reallocating those was a tenth of the worker's time in the 1M flatten).

use std::cell::Cell;
use std::collections::HashMap;
use std::ops::Range;

use cluster::hash::{IdMap, IdSet};
use std::rc::Rc;
use std::sync::Arc;

use schemas::{Label, Split};
use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::core::OkErr;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Capability, ToStream};
use timely::dataflow::{Scope, StreamVec};

use crate::record::{Block, Gathered, GatheredNode};
use sampling::NodeStore;
use schemas::layers::Layers;
use stage::Progress;

/// "Record `root` reaches `node` at `hop`."
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub root: i64,
    pub node: i64,
    pub hop: u8,
}

/// An in-edge a record needs: (src, weight, layer mask, relation).
type NeededEdge = (i64, f32, u32, u8);

/// What one node contributes to one record; its features and edges are in [`Replies`]' buffers,
/// up to the ends it records.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Reply {
    root: i64,
    node: i64,
    hop: u8,
    in_degree: u64,
    /// The root's label (only replies about the root itself carry it).
    label: Option<Label>,
    split: Option<Split>,
    /// The end of its features in `Replies::features`.
    features_end: usize,
    /// The end of its in-edges in `Replies::edges`.
    edges_end: usize,
    /// The end of its original string in `Replies::keys` (a graph keyed by strings).
    key_end: usize,
    /// The end of its in-neighbors in `Replies::neighbors` (a root's, with `root_neighbors`).
    neighbors_end: usize,
}

/// The replies one owner sends one worker for one container of requests: reply `i`'s features
/// are `features[replies[i - 1].features_end..replies[i].features_end]`, its edges likewise,
/// and its edges' features `edge_dim` per edge (empty without edge features).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Replies {
    /// The worker that merges them (timely sends key `k` to worker `k % peers`).
    to: u64,
    edge_dim: usize,
    replies: Vec<Reply>,
    features: Vec<f32>,
    edges: Vec<NeededEdge>,
    edge_features: Vec<f32>,
    /// Each reply's node's original string, one after another (a graph keyed by strings).
    keys: String,
    /// With `root_neighbors`, each round-0 reply's every in-neighbor, one after another.
    neighbors: Vec<i64>,
}

/// One reply with its slices of its [`Replies`]' buffers; its features and string stay in the
/// shared `block`, at `features` and `key`.
struct Answer<'a> {
    reply: Reply,
    block: &'a Block,
    features: Range<usize>,
    key: Range<usize>,
    edges: &'a [NeededEdge],
    edge_features: &'a [f32],
    neighbors: &'a [i64],
}

impl Replies {
    /// Hands each reply, in order, to `f` with its features, in-edges and their features.
    fn each(self, mut f: impl FnMut(Answer)) {
        let Replies { edge_dim, replies, features, edges, edge_features, keys, neighbors, .. } = self;
        let block = Block { features: Arc::new(features), keys: Arc::new(keys) };
        let (mut features_from, mut edges_from, mut key_from, mut neighbors_from) = (0, 0, 0, 0);
        for reply in replies {
            let (features_end, edges_end, key_end) = (reply.features_end, reply.edges_end, reply.key_end);
            let neighbors_end = reply.neighbors_end;
            f(Answer {
                reply,
                block: &block,
                features: features_from..features_end,
                key: key_from..key_end,
                edges: &edges[edges_from..edges_end],
                edge_features: &edge_features[edges_from * edge_dim..edges_end * edge_dim],
                neighbors: &neighbors[neighbors_from..neighbors_end],
            });
            (features_from, edges_from, key_from, neighbors_from) = (features_end, edges_end, key_end, neighbors_end);
        }
    }
}

/// The most in-edges [`Partial::reserve_next`] makes room for at once; past them a record grows
/// by doubling.
const RESERVED_EDGES: usize = 1 << 16;

/// Nodes a record in progress has room for before its set of seen nodes grows.
const SEEN_CAPACITY: usize = 32;

/// A record in progress, held by the owner of its root between rounds.
#[derive(Debug, Clone, Default)]
pub struct Partial {
    gathered: Gathered,
    seen: IdSet<i64>,
    /// Nodes requested this round: the next round's replies.
    asked: usize,
}

impl Partial {
    fn new(root: i64) -> Self {
        // Room for a typical record's nodes: a set grown from empty rehashes four times.
        let mut seen = IdSet::with_capacity_and_hasher(SEEN_CAPACITY, Default::default());
        seen.insert(root);
        Partial { gathered: Gathered { root, ..Gathered::default() }, seen, asked: 0 }
    }

    /// Makes room for the next round's replies, once, instead of growing by doubling as they
    /// arrive: a node for each node asked, and, when that round's nodes bring in-edges
    /// (`edges`), in-edges at the rate so far, at most [`RESERVED_EDGES`] more. The rate after
    /// round 0 is the root's own in-degree: a hub's would reserve its degree squared.
    fn reserve_next(&mut self, edges: bool) {
        let record = &mut self.gathered;
        let nodes = record.nodes.len().max(1);
        record.nodes.reserve(self.asked);
        if edges {
            let more = (self.asked * record.edges.len().div_ceil(nodes)).min(RESERVED_EDGES);
            let per_edge = record.edge_features.len().checked_div(record.edges.len()).unwrap_or(0);
            record.edges.reserve(more);
            record.edge_features.reserve(more * per_edge);
        }
        self.asked = 0;
    }

    /// Folds a round-`hop` answer into the record; `request` gets each in-edge source not seen
    /// yet (hop `hop + 1`, while `hop < hops`).
    fn add(&mut self, answer: Answer, hop: usize, hops: usize, mut request: impl FnMut(Request)) {
        let Answer { reply, block, features, key, edges, edge_features, neighbors } = answer;
        let record = &mut self.gathered;
        if hop == 0 {
            record.label = reply.label;
            record.split = reply.split;
            record.root_neighbors = neighbors.to_vec();
        }
        record.edge_features.extend_from_slice(edge_features);
        for &(src, weight, mask, relation) in edges {
            record.edges.push((reply.node, src, weight, mask, relation));
            if hop < hops && self.seen.insert(src) {
                self.asked += 1;
                request(Request { root: reply.root, node: src, hop: hop as u8 + 1 });
            }
        }
        // Replies of one container arrive together: a record refers to its block once.
        if !record.blocks.last().is_some_and(|last| Arc::ptr_eq(&last.features, &block.features)) {
            record.blocks.push(block.clone());
        }
        record.nodes.push(GatheredNode {
            id: reply.node,
            hop: reply.hop,
            in_degree: reply.in_degree,
            block: (record.blocks.len() - 1) as u32,
            features,
            key,
        });
    }
}

/// Requests ahead of the one being answered whose store rows are asked for (see
/// [`answer`]): enough that the misses of consecutive requests overlap.
const PREFETCH_AHEAD: usize = 8;

/// The node rows this worker answered, in every round: all of them, and those it sent to
/// another worker (the rows a partition that keeps neighbors together saves).
#[derive(Debug, Clone, Default)]
pub struct Answered(Rc<Cell<(u64, u64)>>);

impl Answered {
    /// (rows answered, rows sent to another worker).
    pub fn counts(&self) -> (u64, u64) {
        self.0.get()
    }

    fn add(&self, all: u64, elsewhere: u64) {
        let (a, e) = self.0.get();
        self.0.set((a + all, e + elsewhere));
    }
}

/// Round `hop`'s expand step, at the owner of each requested node.
fn expand<'s>(
    requests: StreamVec<'s, u64, Request>,
    nodes: Rc<NodeStore>,
    layers: Rc<[Layers]>,
    progress: Arc<Progress>,
    (hop, neighbors): (usize, bool),
    answered: Answered,
) -> StreamVec<'s, u64, Replies> {
    let (me, peers) = (requests.scope().index() as u64, requests.scope().peers() as u64);
    let owners = nodes.owners.clone();
    requests.unary(Exchange::new(move |r: &Request| owners.key(r.node)), &format!("Expand{hop}"), move |_, _| {
        move |input, output| {
            input.for_each(|cap, data| {
                progress.count(hop, data.len() as u64);
                let out = answer(&nodes, &layers, (hop, neighbors), peers, data);
                let elsewhere = out.iter().filter(|r| r.to != me).map(|r| r.replies.len() as u64).sum();
                answered.add(out.iter().map(|r| r.replies.len() as u64).sum(), elsewhere);
                let mut session = output.session(&cap);
                out.into_iter().filter(|r| !r.replies.is_empty()).for_each(|r| session.give(r));
            });
        }
    })
}

/// Answers a container of requests: one [`Replies`] per worker that merges them.
///
/// Requests name nodes in no order, so each one's index entry, features and sampled in-edges
/// are cache misses (the store spans hundreds of megabytes). The slots are looked up first,
/// each index line asked for [`PREFETCH_AHEAD`] requests before its lookup, and each node's
/// rows asked for as many requests before they are copied, so the misses overlap.
fn answer(
    nodes: &NodeStore,
    layers: &[Layers],
    (hop, neighbors): (usize, bool),
    peers: u64,
    data: &mut Vec<Request>,
) -> Vec<Replies> {
    // The last hop's nodes contribute no in-edges: no layer aggregates beyond hop k.
    let edges = hop < layers[0].hops();
    data.iter().take(PREFETCH_AHEAD).for_each(|r| nodes.prefetch(r.node));
    let slots: Vec<Option<usize>> = (0..data.len())
        .map(|i| {
            if let Some(ahead) = data.get(i + PREFETCH_AHEAD) {
                nodes.prefetch(ahead.node);
            }
            nodes.slot(data[i].node)
        })
        .collect();
    // Room for an even share of the features, which grow by reallocation otherwise.
    let share = data.len().div_ceil(peers as usize);
    let mut out: Vec<Replies> = (0..peers)
        .map(|to| Replies {
            to,
            edge_dim: nodes.edge_dim,
            replies: Vec::with_capacity(share),
            features: Vec::with_capacity(share * nodes.dim),
            ..Replies::default()
        })
        .collect();
    slots.iter().take(PREFETCH_AHEAD).flatten().for_each(|&slot| nodes.prefetch_row(slot, edges));
    for (i, r) in data.drain(..).enumerate() {
        if let Some(&Some(ahead)) = slots.get(i + PREFETCH_AHEAD) {
            nodes.prefetch_row(ahead, edges);
        }
        if let Some(&Some(ahead)) = slots.get(i + PREFETCH_AHEAD / 2) {
            if edges {
                nodes.prefetch_edges(ahead);
            }
            nodes.prefetch_key(ahead);
        }
        // Requests name only nodes that exist: targets and checked edge sources.
        let Some(slot) = slots[i] else { continue };
        let to = &mut out[(nodes.owners.key(r.root) % peers) as usize];
        to.features.extend_from_slice(nodes.features(slot));
        if let Some(key) = nodes.key(slot) {
            to.keys.push_str(key);
        }
        if edges {
            push_needed_edges(nodes, slot, layers, hop, &mut to.edges, &mut to.edge_features);
        }
        // The root's every in-neighbor: the store keeps them all (sample limit `all`).
        if neighbors && hop == 0 {
            to.neighbors.extend(nodes.sampled(slot).iter().map(|e| e.src));
        }
        to.replies.push(Reply {
            root: r.root,
            node: r.node,
            hop: r.hop,
            in_degree: nodes.in_degree[slot],
            label: if r.hop == 0 { nodes.labels[slot].clone() } else { None },
            split: nodes.splits[slot],
            features_end: to.features.len(),
            edges_end: to.edges.len(),
            key_end: to.keys.len(),
            neighbors_end: to.neighbors.len(),
        });
    }
    out
}

/// Pushes the in-edges of `slot` a record needs at `hop`, with their features: of each
/// relation's run, the prefix whose ranks serve a layer (each relation has its own fanouts).
fn push_needed_edges(
    nodes: &NodeStore,
    slot: usize,
    layers: &[Layers],
    hop: usize,
    edges: &mut Vec<NeededEdge>,
    features: &mut Vec<f32>,
) {
    let (all, dim) = (nodes.sampled_features(slot), nodes.edge_dim);
    let mut start = 0;
    for (relation, run) in nodes.sampled_runs(slot) {
        let rule = &layers[usize::from(relation)];
        let kept = run.iter().enumerate().take_while(|(rank, _)| rule.mask(*rank, hop) != 0).count();
        edges.extend(run[..kept].iter().enumerate().map(|(rank, e)| (e.src, e.weight, rule.mask(rank, hop), relation)));
        features.extend_from_slice(&all[start * dim..(start + kept) * dim]);
        start += run.len();
    }
}

/// What a merge step emits: the record in progress, or a request for the next round.
type Step = Result<Partial, Request>;

/// Round `hop`'s merge step, at the owner of each root: waits for the batch's replies of this
/// round, folds them into the records, and emits the records and next round's requests.
fn merge<'s>(
    partials: StreamVec<'s, u64, Partial>,
    replies: StreamVec<'s, u64, Replies>,
    hops: usize,
    hop: usize,
) -> StreamVec<'s, u64, Step> {
    partials.binary_frontier::<_, CapacityContainerBuilder<Vec<Step>>, _, _, _, _>(
        replies,
        Pipeline,
        Exchange::new(|r: &Replies| r.to),
        &format!("Merge{hop}"),
        move |_, _| {
            // Per epoch: the capability to emit at it, records so far, and this round's replies.
            type Pending = (Capability<u64>, Vec<Partial>, Vec<Replies>);
            let mut pending: HashMap<u64, Pending> = HashMap::new();
            move |(parts, parts_frontier), (replies, replies_frontier), output| {
                parts.for_each(|cap, data| {
                    let Some(cap) = cap.retain_least(0) else { return };
                    pending.entry(*cap.time()).or_insert_with(|| (cap, Vec::new(), Vec::new())).1.append(data);
                });
                replies.for_each(|cap, data| {
                    let Some(cap) = cap.retain_least(0) else { return };
                    pending.entry(*cap.time()).or_insert_with(|| (cap, Vec::new(), Vec::new())).2.append(data);
                });
                let done: Vec<u64> = pending
                    .keys()
                    .copied()
                    .filter(|t| !parts_frontier.less_equal(t) && !replies_frontier.less_equal(t))
                    .collect();
                for time in done {
                    let (cap, parts, replies) = pending.remove(&time).expect("listed above");
                    let mut session = output.session(&cap);
                    let mut records: IdMap<i64, Partial> = parts.into_iter().map(|p| (p.gathered.root, p)).collect();
                    for batch in replies {
                        batch.each(|answer| {
                            let root = answer.reply.root;
                            let record = records.entry(root).or_insert_with(|| Partial::new(root));
                            record.add(answer, hop, hops, |r| session.give(Err(r)));
                        });
                    }
                    for (_, mut record) in records {
                        // The next round's nodes bring in-edges unless they are the last hop's.
                        record.reserve_next(hop + 1 < hops);
                        session.give(Ok(record));
                    }
                }
            }
        },
    )
}

/// Builds the rounds: batch requests (`root`, `root`, 0) in, each record's gathered pieces
/// out (to be assembled: `crate::record`), at the owner of each root. `layers` holds each
/// relation's rule (one for a homogeneous graph); with `root_neighbors` each record gets its
/// root's every in-neighbor (the store must keep every in-edge).
pub fn rounds<'s>(
    scope: Scope<'s, u64>,
    targets: StreamVec<'s, u64, Request>,
    nodes: Rc<NodeStore>,
    layers: Rc<[Layers]>,
    progress: Arc<Progress>,
    answered: Answered,
    root_neighbors: bool,
) -> StreamVec<'s, u64, Gathered> {
    let hops = layers[0].hops();
    let mut partials: StreamVec<'s, u64, Partial> = Vec::<Partial>::new().to_stream(scope);
    let mut requests = targets;
    for hop in 0..=hops {
        let at = (hop, root_neighbors);
        let replies = expand(requests, nodes.clone(), layers.clone(), progress.clone(), at, answered.clone());
        let (next_partials, next_requests) = merge(partials, replies, hops, hop).ok_err(|step| step);
        partials = next_partials;
        requests = next_requests;
    }
    // The set of seen nodes is dropped here, where it was allocated.
    partials.map(|p| p.gathered)
}
