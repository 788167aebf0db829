//! The k reduce rounds, as one timely dataflow over batches of targets (one batch per epoch).
//!
//! What crosses the wire, per round `d` (0 ..= k):
//! - `Request { root, node, hop: d }` to the owner of `node`: "root's record reaches `node` at hop d";
//! - `Reply` back to the owner of `root`: the node's features and in-degree, and (for d < k) its
//!   sampled in-edges with the layers each serves and, when the edge table has them, their
//!   features (flat, `edge_dim` per edge).
//!
//! The owner of a root merges replies into the record in progress; every in-edge source it has
//! not seen yet is at hop d + 1 and becomes a request of the next round. After round k the
//! record is complete. Rounds are unrolled operators, so records of several batches can be in
//! different rounds at once, and a batch's state is dropped as soon as it is written.

use std::collections::HashMap;

use cluster::hash::{IdMap, IdSet};
use std::rc::Rc;
use std::sync::Arc;

use schemas::{Label, Split};
use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::core::OkErr;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, ToStream};
use timely::dataflow::{Scope, StreamVec};

use crate::record::{GatheredEdge, GatheredNode, assemble};
use cluster::owner_key;
use sampling::NodeStore;
use schemas::Record;
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

/// What a node contributes to a record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply {
    root: i64,
    node: i64,
    hop: u8,
    in_degree: u64,
    /// The root's label (only replies about the root itself carry it).
    label: Option<Label>,
    split: Option<Split>,
    features: Vec<f32>,
    /// The in-edges the record needs at this hop.
    edges: Vec<NeededEdge>,
    /// Their features, `edge_dim` per edge of `edges` (empty without edge features).
    edge_features: Vec<f32>,
}

/// A record in progress, held by the owner of its root between rounds.
#[derive(Debug, Clone, Default)]
pub struct Partial {
    root: i64,
    label: Option<Label>,
    split: Option<Split>,
    nodes: Vec<GatheredNode>,
    edges: Vec<GatheredEdge>,
    /// `edge_dim` features per edge of `edges`.
    edge_features: Vec<f32>,
    seen: IdSet<i64>,
}

/// Round `hop`'s expand step, at the owner of each requested node.
fn expand<'s>(
    requests: StreamVec<'s, u64, Request>,
    nodes: Rc<NodeStore>,
    layers: Rc<[Layers]>,
    progress: Arc<Progress>,
    hop: usize,
) -> StreamVec<'s, u64, Reply> {
    requests.unary(Exchange::new(|r: &Request| owner_key(r.node)), &format!("Expand{hop}"), move |_, _| {
        move |input, output| {
            input.for_each(|cap, data| {
                let mut session = output.session(&cap);
                progress.count(hop, data.len() as u64);
                for r in data.drain(..) {
                    // Requests name only nodes that exist: targets and checked edge sources.
                    let Some(slot) = nodes.slot(r.node) else { continue };
                    let (edges, edge_features) = needed_edges(&nodes, slot, &layers, hop);
                    session.give(Reply {
                        root: r.root,
                        node: r.node,
                        hop: r.hop,
                        in_degree: nodes.in_degree[slot],
                        label: if r.hop == 0 { nodes.labels[slot].clone() } else { None },
                        split: nodes.splits[slot],
                        features: nodes.features(slot).to_vec(),
                        edges,
                        edge_features,
                    });
                }
            });
        }
    })
}

/// The in-edges of `slot` a record needs at `hop`, with their features: of each relation's
/// run, the prefix whose ranks serve a layer (each relation has its own fanouts).
fn needed_edges(nodes: &NodeStore, slot: usize, layers: &[Layers], hop: usize) -> (Vec<NeededEdge>, Vec<f32>) {
    let (mut edges, mut features) = (Vec::new(), Vec::new());
    let (all, dim) = (nodes.sampled_features(slot), nodes.edge_dim);
    let mut start = 0;
    for (relation, run) in nodes.sampled_runs(slot) {
        let rule = &layers[usize::from(relation)];
        let kept = run.iter().enumerate().take_while(|(rank, _)| rule.mask(*rank, hop) != 0).count();
        edges.extend(run[..kept].iter().enumerate().map(|(rank, e)| (e.src, e.weight, rule.mask(rank, hop), relation)));
        features.extend_from_slice(&all[start * dim..(start + kept) * dim]);
        start += run.len();
    }
    (edges, features)
}

/// What a merge step emits: the record in progress, or a request for the next round.
type Step = Result<Partial, Request>;

/// Round `hop`'s merge step, at the owner of each root: waits for the batch's replies of this
/// round, folds them into the records, and emits the records and next round's requests.
fn merge<'s>(
    partials: StreamVec<'s, u64, Partial>,
    replies: StreamVec<'s, u64, Reply>,
    hops: usize,
    hop: usize,
) -> StreamVec<'s, u64, Step> {
    partials.binary_frontier::<_, CapacityContainerBuilder<Vec<Step>>, _, _, _, _>(
        replies,
        Pipeline,
        Exchange::new(|r: &Reply| owner_key(r.root)),
        &format!("Merge{hop}"),
        move |_, _| {
            // Per epoch: the capability to emit at it, records so far, and this round's replies.
            type Pending = (Capability<u64>, Vec<Partial>, Vec<Reply>);
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
                    let mut records: IdMap<i64, Partial> = parts.into_iter().map(|p| (p.root, p)).collect();
                    for reply in replies {
                        let record = records.entry(reply.root).or_insert_with(|| Partial {
                            root: reply.root,
                            seen: IdSet::from_iter([reply.root]),
                            ..Partial::default()
                        });
                        if hop == 0 {
                            record.label = reply.label;
                            record.split = reply.split;
                        }
                        record.edge_features.extend_from_slice(&reply.edge_features);
                        for &(src, weight, mask, relation) in &reply.edges {
                            record.edges.push((reply.node, src, weight, mask, relation));
                            if hop < hops && record.seen.insert(src) {
                                session.give(Err(Request { root: reply.root, node: src, hop: hop as u8 + 1 }));
                            }
                        }
                        record.nodes.push(GatheredNode {
                            id: reply.node,
                            hop: reply.hop,
                            in_degree: reply.in_degree,
                            features: reply.features,
                        });
                    }
                    for (_, record) in records {
                        session.give(Ok(record));
                    }
                }
            }
        },
    )
}

/// Builds the rounds: batch requests (`root`, `root`, 0) in, finished records out, at the
/// owner of each root. `layers` holds each relation's rule (one for a homogeneous graph).
pub fn rounds<'s>(
    scope: Scope<'s, u64>,
    targets: StreamVec<'s, u64, Request>,
    nodes: Rc<NodeStore>,
    layers: Rc<[Layers]>,
    progress: Arc<Progress>,
) -> StreamVec<'s, u64, Record> {
    let hops = layers[0].hops();
    // A typed graph's relation edge widths: each edge keeps its relation's features only.
    let typed = nodes.is_typed().then(|| nodes.relation_edges.dims.clone());
    let mut partials: StreamVec<'s, u64, Partial> = Vec::<Partial>::new().to_stream(scope);
    let mut requests = targets;
    for hop in 0..=hops {
        let replies = expand(requests, nodes.clone(), layers.clone(), progress.clone(), hop);
        let (next_partials, next_requests) = merge(partials, replies, hops, hop).ok_err(|step| step);
        partials = next_partials;
        requests = next_requests;
    }
    partials.unary::<CapacityContainerBuilder<Vec<Record>>, _, _, _>(Pipeline, "Assemble", move |_, _| {
        move |input, output| {
            input.for_each(|cap, data| {
                let mut session = output.session(&cap);
                for p in data.drain(..) {
                    session.give(assemble(
                        p.root,
                        p.label,
                        p.split,
                        p.nodes,
                        p.edges,
                        p.edge_features,
                        typed.as_deref(),
                    ));
                }
            });
        }
    })
}
