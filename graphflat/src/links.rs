//! Link records: one per supervision edge, holding the node records of its source, its
//! destination and its negatives (see `schemas::record::LinkRecord`).
//!
//! The worker that owns an edge's source draws its negatives ([`sampling::negatives`]) and, batch
//! by batch, asks for the records of every endpoint. The dataflow per batch:
//! 1. `Need { root, requester }` goes to the owner of `root`, which starts `root`'s record once
//!    per batch however many edges and workers need it (`Dedupe`);
//! 2. the k rounds ([`crate::round`]) build those records, as for node records;
//! 3. `FanOut` sends each finished record to every worker that needed it;
//! 4. `Assemble`, at the requester, builds each edge's link record from its endpoints' records
//!    (held out of its own edge first with `disjoint_train`).
//!
//! An endpoint's neighborhood is therefore exactly its node record with the same settings, and a
//! batch holds the records of `batch_size / (2 + negatives)` edges (`batch_size` neighborhoods),
//! so memory is bounded as for node records.
//!
//! On a typed graph the supervision edges are the link relation's, ids are typed keys
//! (`schemas::typed`) until a record is assembled, negatives are nodes of the relation's
//! destination type, and each endpoint's neighborhood is its typed node record.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use cluster::hash::{IdMap, IdSet};
use sampling::NodeStore;
use sampling::digest::{Digest, Hasher};
use sampling::supervision::SupervisionEdge;
use schemas::layers::Layers;
use schemas::record::LinkRecord;
use schemas::{FlattenConfig, Record, Split, typed};
use serde::{Deserialize, Serialize};
use stage::{Progress, Worker, Written};
use tables::parts::PartsOf;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Exchange as _};
use timely::dataflow::{Scope, StreamVec};

use arrow_schema::SchemaRef;

use crate::error::Error;
use crate::record::{self, Gathered, Scratch};
use crate::round::{Answered, Request, rounds};
use crate::sink::LinkRows;
use crate::write::{RecordStats, write_batches};

/// A supervision edge with its negatives, at the worker that owns its source.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    pub src: i64,
    dst: i64,
    split: Split,
    negatives: Vec<i64>,
}

impl Task {
    /// The nodes whose records its link record holds: its source, destination and negatives.
    pub fn endpoints(&self) -> impl Iterator<Item = i64> + '_ {
        [self.src, self.dst].into_iter().chain(self.negatives.iter().copied())
    }
}

/// "Worker `requester` needs `root`'s record in this batch."
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Need {
    root: i64,
    requester: u64,
}

/// This worker's tasks: its supervision edges (those whose source it owns, sorted by source,
/// destination and split), each with its negatives. Every worker calls it at the same point.
pub fn tasks(
    worker: &mut Worker,
    config: &FlattenConfig,
    nodes: &NodeStore,
    edges: Vec<SupervisionEdge>,
) -> Result<Vec<Task>, Error> {
    let link = config.link().expect("a link job");
    let total = cluster::sum(worker.timely, edges.len() as u64);
    let table = supervision_table(config);
    if total == 0 && link.supervision_fraction < 1.0 {
        return Err(Error::BadData(format!(
            "{table}: supervision_fraction = {} kept none of the edges with a split (train, valid or test), if any \
             has one; raise supervision_fraction (graphflat split-edges writes a split column)",
            link.supervision_fraction
        )));
    }
    if total == 0 {
        return Err(Error::BadData(format!(
            "{table}: no edge has a split (train, valid or test), so a link job has no supervision edges; \
             graphflat split-edges writes one"
        )));
    }
    let pairs: Vec<(i64, i64)> = edges.iter().map(|e| (e.src, e.dst)).collect();
    // A typed graph draws negatives among the link relation's destination type.
    let of_type = config.typed().zip(link.relation).map(|((graph, _), r)| graph.relations[usize::from(r)].dst);
    let draw = sampling::negatives::Draw { sampler: link.negative_sampler, seed: config.seed, of_type };
    let negatives = sampling::negatives::draw(worker.timely, nodes, draw, &pairs, link.negatives)?;
    worker.clock.lap("negatives");
    Ok(edges
        .into_iter()
        .zip(negatives)
        .map(|(e, negatives)| Task { src: e.src, dst: e.dst, split: e.split, negatives })
        .collect())
}

/// The digest of the tasks each node of `nodes` is the source of, by slot (`None` for a node
/// that is none's), from this worker's `tasks` (each at its source's owner, a source's tasks
/// together): their destinations, splits and negatives in order. A link record is a function
/// of its task and its endpoints' node records, so the digests say which sources' records a
/// change of the supervision edges, or of their negatives' draws, reaches.
pub fn task_digests(nodes: &NodeStore, tasks: &[Task]) -> Vec<Option<Digest>> {
    debug_assert!(tasks.is_sorted_by_key(|t| t.src), "a source's tasks lie together");
    let mut digests = vec![None; nodes.len()];
    for group in tasks.chunk_by(|a, b| a.src == b.src) {
        let src = group[0].src;
        let slot = nodes.slot(src).expect("a task's source is a node this worker owns");
        let mut h = Hasher::new();
        h.word(group.len() as u64);
        for task in group {
            h.words([task.dst as u64, task.split as u64].into_iter());
            h.words(task.negatives.iter().map(|&n| n as u64));
        }
        digests[slot] = Some(h.finish());
    }
    digests
}

/// Builds the link records of `tasks` and writes them to parts; `layers` holds each relation's
/// rule (one for a homogeneous graph).
pub fn write_links(
    worker: &mut Worker,
    config: &FlattenConfig,
    nodes: NodeStore,
    tasks: Vec<Task>,
    layers: Vec<Layers>,
    schema: SchemaRef,
    output: &PartsOf,
) -> Result<Written<RecordStats>, Error> {
    let link = config.link().expect("a link job");
    worker.progress.add_total(0, tasks.len() as u64);
    // `batch_size` counts neighborhoods, as for node records: a link record holds 2 + negatives.
    let per_batch = (config.batch_size / (2 + link.negatives)).max(1);
    let batches: Vec<Vec<Task>> = tasks.chunks(per_batch).map(<[Task]>::to_vec).collect();
    drop(tasks);
    let (nodes, layers, progress) = (Rc::new(nodes), Rc::from(layers), worker.progress.clone());
    let disjoint = link.disjoint_train;
    let answered = Answered::default();
    let counted = answered.clone();
    let mut written =
        write_batches(worker, config, schema, output, batches, LinkRows::default(), move |scope, tasks| {
            link_dataflow(scope, tasks, nodes, layers, progress, disjoint, counted)
        })?;
    (written.own.answered, written.own.exchanged) = answered.counts();
    Ok(written)
}

fn link_dataflow<'s>(
    scope: Scope<'s, u64>,
    tasks: StreamVec<'s, u64, Task>,
    nodes: Rc<NodeStore>,
    layers: Rc<[Layers]>,
    progress: Arc<Progress>,
    disjoint_train: bool,
    answered: Answered,
) -> StreamVec<'s, u64, LinkRecord> {
    let me = scope.index() as u64;
    let owners = nodes.owners.clone();
    let needs = tasks
        .clone()
        .unary(Pipeline, "Needs", move |_, _| {
            move |input, output| {
                input.for_each(|cap, data| {
                    let mut session = output.session(&cap);
                    let mut asked: IdSet<i64> = IdSet::default();
                    for task in data.iter() {
                        for root in task.endpoints().filter(|&r| asked.insert(r)) {
                            session.give(Need { root, requester: me });
                        }
                    }
                });
            }
        })
        .exchange(move |n: &Need| owners.key(n.root));
    let typed = record::edge_widths(&nodes);
    let records = assembled(rounds(scope, dedupe(needs.clone()), nodes, layers, progress, answered, false), typed);
    let delivered = fan_out(records, needs);
    assemble(tasks, delivered, disjoint_train)
}

/// The table whose edges with a split are the supervision edges, as errors name it.
fn supervision_table(config: &FlattenConfig) -> String {
    let typed = config.typed().zip(config.link_relation.as_deref());
    let table = typed.and_then(|((graph, _), name)| {
        let r = graph.relations.iter().position(|r| r.name == name)?;
        let table = graph.tables.iter().find(|t| usize::from(t.forward) == r)?;
        Some(format!("relation {name} ({})", table.table))
    });
    table.unwrap_or_else(|| config.edges.clone())
}

/// A finished record's root as the rounds key it: its typed key on a typed graph.
fn key_of(record: &Record) -> i64 {
    match record.node_types.first() {
        Some(&t) => typed::pack(t, record.root).expect("a root read from the graph's tables"),
        None => record.root,
    }
}

/// One round-0 request per root and batch, at the root's owner.
fn dedupe<'s>(needs: StreamVec<'s, u64, Need>) -> StreamVec<'s, u64, Request> {
    needs.unary_frontier(Pipeline, "Dedupe", |_, _| {
        let mut started: HashMap<u64, IdSet<i64>> = HashMap::new();
        move |(input, frontier), output| {
            input.for_each(|cap, data| {
                let seen = started.entry(cap.least().copied().unwrap_or_default()).or_default();
                let mut session = output.session(&cap);
                for need in data.drain(..) {
                    if seen.insert(need.root) {
                        session.give(Request { root: need.root, node: need.root, hop: 0 });
                    }
                }
            });
            started.retain(|t, _| frontier.less_equal(t));
        }
    })
}

/// Each endpoint's record, assembled from what the rounds gathered.
fn assembled<'s>(gathered: StreamVec<'s, u64, Gathered>, typed: Option<Vec<usize>>) -> StreamVec<'s, u64, Record> {
    gathered.unary::<CapacityContainerBuilder<Vec<Record>>, _, _, _>(Pipeline, "AssembleEndpoints", move |_, _| {
        let mut scratch = Scratch::default();
        move |input, output| {
            input.for_each(|cap, data| {
                let mut session = output.session(&cap);
                for g in data.drain(..) {
                    session.give(record::assemble(g, typed.as_deref(), &mut scratch));
                }
            });
        }
    })
}

/// Each finished record, to every worker that needed it in its batch (once each).
fn fan_out<'s>(
    records: StreamVec<'s, u64, Record>,
    needs: StreamVec<'s, u64, Need>,
) -> StreamVec<'s, u64, (u64, Record)> {
    records.binary_frontier::<_, CapacityContainerBuilder<Vec<(u64, Record)>>, _, _, _, _>(
        needs,
        Pipeline,
        Pipeline,
        "FanOut",
        |_, _| {
            type Pending = (Capability<u64>, Vec<Record>, IdMap<i64, Vec<u64>>);
            let mut pending: HashMap<u64, Pending> = HashMap::new();
            move |(records, records_frontier), (needs, needs_frontier), output| {
                records.for_each(|cap, data| {
                    let Some(cap) = cap.retain_least(0) else { return };
                    pending.entry(*cap.time()).or_insert_with(|| (cap, Vec::new(), IdMap::default())).1.append(data);
                });
                needs.for_each(|cap, data| {
                    let Some(cap) = cap.retain_least(0) else { return };
                    let entry = pending.entry(*cap.time()).or_insert_with(|| (cap, Vec::new(), IdMap::default()));
                    for need in data.drain(..) {
                        entry.2.entry(need.root).or_default().push(need.requester);
                    }
                });
                let done: Vec<u64> = pending
                    .keys()
                    .copied()
                    .filter(|t| !records_frontier.less_equal(t) && !needs_frontier.less_equal(t))
                    .collect();
                for time in done {
                    let (cap, records, mut requesters) = pending.remove(&time).expect("listed above");
                    let mut session = output.session(&cap);
                    for record in records {
                        let mut to = requesters.remove(&key_of(&record)).unwrap_or_default();
                        to.sort_unstable();
                        to.dedup();
                        for requester in to {
                            session.give((requester, record.clone()));
                        }
                    }
                }
            }
        },
    )
}

/// At each requester, once its batch's records are all in: one link record per task.
fn assemble<'s>(
    tasks: StreamVec<'s, u64, Task>,
    delivered: StreamVec<'s, u64, (u64, Record)>,
    disjoint_train: bool,
) -> StreamVec<'s, u64, LinkRecord> {
    tasks.binary_frontier::<_, CapacityContainerBuilder<Vec<LinkRecord>>, _, _, _, _>(
        delivered,
        Pipeline,
        Exchange::new(|d: &(u64, Record)| d.0),
        "Assemble",
        move |_, _| {
            type Pending = (Capability<u64>, Vec<Task>, IdMap<i64, Record>);
            let mut pending: HashMap<u64, Pending> = HashMap::new();
            move |(tasks, tasks_frontier), (delivered, delivered_frontier), output| {
                tasks.for_each(|cap, data| {
                    let Some(cap) = cap.retain_least(0) else { return };
                    pending.entry(*cap.time()).or_insert_with(|| (cap, Vec::new(), IdMap::default())).1.append(data);
                });
                delivered.for_each(|cap, data| {
                    let Some(cap) = cap.retain_least(0) else { return };
                    let entry = pending.entry(*cap.time()).or_insert_with(|| (cap, Vec::new(), IdMap::default()));
                    for (_, record) in data.drain(..) {
                        entry.2.insert(key_of(&record), record);
                    }
                });
                let done: Vec<u64> = pending
                    .keys()
                    .copied()
                    .filter(|t| !tasks_frontier.less_equal(t) && !delivered_frontier.less_equal(t))
                    .collect();
                for time in done {
                    let (cap, tasks, records) = pending.remove(&time).expect("listed above");
                    let mut session = output.session(&cap);
                    for task in tasks {
                        session.give(link_record(task, &records, disjoint_train));
                    }
                }
            }
        },
    )
}

/// The link record of `task` from its endpoints' records (a typed graph's keys become plain
/// ids: the link relation says their types).
fn link_record(task: Task, records: &IdMap<i64, Record>, disjoint_train: bool) -> LinkRecord {
    let endpoints = task
        .endpoints()
        .map(|id| {
            let mut record = records.get(&id).cloned().expect("every endpoint's record was asked for in its batch");
            record.label = None;
            record.split = None;
            if disjoint_train && task.split == Split::Train {
                hold_out(&mut record, task.src, task.dst);
            }
            Arc::new(record)
        })
        .collect::<Vec<Arc<Record>>>();
    let typed = endpoints.first().is_some_and(|e| e.is_typed());
    let plain = |key: i64| if typed { typed::unpack(key).1 } else { key };
    LinkRecord {
        src: plain(task.src),
        dst: plain(task.dst),
        split: Some(task.split),
        negatives: task.negatives.iter().map(|&n| plain(n)).collect(),
        endpoints,
    }
}

/// Removes the edges between `a` and `b` (keys as [`key_of`] makes them), both directions and
/// of any relation, from `record`'s message-passing edges. Nodes stay (with their hops and
/// in-degrees as in the whole graph, as GraphInfer sees them); only the edges the model could
/// read the answer from go.
fn hold_out(record: &mut Record, a: i64, b: i64) {
    let key = |i: i32| {
        let i = i as usize;
        match record.node_types.get(i) {
            Some(&t) => typed::pack(t, record.node_ids[i]).expect("ids read from the graph's tables"),
            None => record.node_ids[i],
        }
    };
    let keep: Vec<bool> = (0..record.num_edges())
        .map(|j| {
            let (s, d) = (key(record.edge_src[j]), key(record.edge_dst[j]));
            !((s == a && d == b) || (s == b && d == a))
        })
        .collect();
    if keep.iter().all(|&k| k) {
        return;
    }
    fn kept<T: Copy>(values: &[T], keep: &[bool]) -> Vec<T> {
        values.iter().zip(keep).filter(|(_, k)| **k).map(|(v, _)| *v).collect()
    }
    // Each edge's features: a typed record's at their offsets, a homogeneous one's `edge_dim` wide.
    let features: Vec<&[f32]> = if record.edge_feature_at.is_empty() {
        record.edge_features.chunks(record.edge_dim().max(1)).collect()
    } else {
        record.edge_feature_at.windows(2).map(|w| &record.edge_features[w[0] as usize..w[1] as usize]).collect()
    };
    let (mut edge_features, mut edge_feature_at) = (Vec::new(), Vec::new());
    if !record.edge_feature_at.is_empty() {
        edge_feature_at.push(0);
    }
    for (f, _) in features.iter().zip(&keep).filter(|(_, k)| **k) {
        edge_features.extend_from_slice(f);
        if !record.edge_feature_at.is_empty() {
            edge_feature_at.push(edge_features.len() as u32);
        }
    }
    record.edge_features = edge_features;
    record.edge_feature_at = edge_feature_at;
    record.edge_src = kept(&record.edge_src, &keep);
    record.edge_dst = kept(&record.edge_dst, &keep);
    record.edge_weights = kept(&record.edge_weights, &keep);
    record.edge_layers = kept(&record.edge_layers, &keep);
    if record.is_typed() {
        record.edge_relations = kept(&record.edge_relations, &keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_out_removes_both_directions_and_keeps_the_rest() {
        let mut record = Record {
            root: 1,
            node_ids: vec![1, 2, 3],
            hops: vec![0, 1, 1],
            in_degrees: vec![2, 1, 0],
            features: vec![0.0; 3],
            edge_src: vec![1, 2, 0],
            edge_dst: vec![0, 0, 1],
            edge_weights: vec![0.5, 0.25, 0.125],
            edge_layers: vec![3, 3, 1],
            edge_features: vec![1.0, 1.5, 2.0, 2.5, 3.0, 3.5],
            ..Record::default()
        };
        hold_out(&mut record, 2, 1);
        assert_eq!((record.edge_src, record.edge_dst), (vec![2], vec![0]), "only 3 -> 1 is left");
        assert_eq!(record.edge_weights, vec![0.25]);
        assert_eq!(record.edge_layers, vec![3]);
        assert_eq!(record.edge_features, vec![2.0, 2.5]);
        assert_eq!(record.node_ids, vec![1, 2, 3], "nodes stay");
    }

    #[test]
    fn hold_out_on_a_typed_record_goes_by_type_and_id() {
        // User 1 (type 1, the root), item 2 and user 2 (types 0 and 1): only the edges between
        // user 1 and item 2 go, of either relation, each keeping its own features.
        let mut record = Record {
            root: 1,
            node_ids: vec![1, 2, 2],
            node_types: vec![1, 0, 1],
            feature_at: vec![0, 1, 2, 3],
            hops: vec![0, 1, 1],
            in_degrees: vec![3, 0, 0],
            features: vec![0.0; 3],
            edge_src: vec![1, 1, 2],
            edge_dst: vec![0, 0, 0],
            edge_weights: vec![1.0; 3],
            edge_layers: vec![3; 3],
            edge_relations: vec![0, 1, 2],
            edge_features: vec![1.0, 2.0, 3.0, 4.0],
            edge_feature_at: vec![0, 2, 2, 4],
            ..Record::default()
        };
        let key = |t: u8, id: i64| typed::pack(t, id).unwrap();
        hold_out(&mut record, key(1, 1), key(0, 2));
        assert_eq!((record.edge_src, record.edge_relations), (vec![2], vec![2]), "user 2 -> user 1 stays");
        assert_eq!((record.edge_features, record.edge_feature_at), (vec![3.0, 4.0], vec![0, 2]));
    }
}
