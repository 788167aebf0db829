//! Link records: one per supervision edge, holding the node records of its source, its
//! destination and its negatives (see `schemas::record::LinkRecord`).
//!
//! The worker that owns an edge's source draws its negatives ([`crate::negatives`]) and, batch
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

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use cluster::hash::{IdMap, IdSet};
use cluster::owner_key;
use sampling::NodeStore;
use sampling::supervision::SupervisionEdge;
use schemas::layers::Layers;
use schemas::record::LinkRecord;
use schemas::{FlattenConfig, Record, Split};
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
use crate::round::{Request, rounds};
use crate::write::{RecordStats, write_batches};

/// A supervision edge with its negatives, at the worker that owns its source.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    src: i64,
    dst: i64,
    split: Split,
    negatives: Vec<i64>,
}

impl Task {
    fn endpoints(&self) -> impl Iterator<Item = i64> + '_ {
        [self.src, self.dst].into_iter().chain(self.negatives.iter().copied())
    }
}

/// "Worker `requester` needs `root`'s record in this batch."
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Need {
    root: i64,
    requester: u64,
}

/// Builds this worker's link records and writes them to parts.
#[allow(clippy::too_many_arguments)]
pub fn flatten_links(
    worker: &mut Worker,
    config: &FlattenConfig,
    nodes: NodeStore,
    edges: Vec<SupervisionEdge>,
    layers: Layers,
    schema: SchemaRef,
    output: &PartsOf,
) -> Result<Written<RecordStats>, Error> {
    let link = config.link().expect("a link job");
    let total = cluster::sum(worker.timely, edges.len() as u64);
    if total == 0 && link.supervision_fraction < 1.0 {
        return Err(Error::BadData(format!(
            "{}: supervision_fraction = {} kept none of the edges with a split (train, valid or test), if any \
             has one; raise supervision_fraction (graphflat split-edges writes a split column)",
            config.edges, link.supervision_fraction
        )));
    }
    if total == 0 {
        return Err(Error::BadData(format!(
            "{}: no edge has a split (train, valid or test), so a link job has no supervision edges; \
             graphflat split-edges writes one",
            config.edges
        )));
    }
    let pairs: Vec<(i64, i64)> = edges.iter().map(|e| (e.src, e.dst)).collect();
    let negatives =
        crate::negatives::draw(worker.timely, &nodes, link.negative_sampler, config.seed, &pairs, link.negatives)?;
    worker.clock.lap("negatives");
    let tasks: Vec<Task> = edges
        .into_iter()
        .zip(negatives)
        .map(|(e, negatives)| Task { src: e.src, dst: e.dst, split: e.split, negatives })
        .collect();
    worker.progress.add_total(0, tasks.len() as u64);
    // `batch_size` counts neighborhoods, as for node records: a link record holds 2 + negatives.
    let per_batch = (config.batch_size / (2 + link.negatives)).max(1);
    let batches: Vec<Vec<Task>> = tasks.chunks(per_batch).map(<[Task]>::to_vec).collect();
    let (nodes, layers, progress) = (Rc::new(nodes), Rc::from(vec![layers]), worker.progress.clone());
    let disjoint = link.disjoint_train;
    write_batches(worker, config, schema, output, batches, move |scope, tasks| {
        link_dataflow(scope, tasks, nodes, layers, progress, disjoint)
    })
}

fn link_dataflow<'s>(
    scope: Scope<'s, u64>,
    tasks: StreamVec<'s, u64, Task>,
    nodes: Rc<NodeStore>,
    layers: Rc<[Layers]>,
    progress: Arc<Progress>,
    disjoint_train: bool,
) -> StreamVec<'s, u64, LinkRecord> {
    let me = scope.index() as u64;
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
        .exchange(|n: &Need| owner_key(n.root));
    let records = rounds(scope, dedupe(needs.clone()), nodes, layers, progress);
    let delivered = fan_out(records, needs);
    assemble(tasks, delivered, disjoint_train)
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
                        let mut to = requesters.remove(&record.root).unwrap_or_default();
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
                        entry.2.insert(record.root, record);
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

/// The link record of `task` from its endpoints' records.
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
        .collect();
    LinkRecord { src: task.src, dst: task.dst, split: Some(task.split), negatives: task.negatives, endpoints }
}

/// Removes the edges between `a` and `b`, both directions, from `record`'s message-passing
/// edges. Nodes stay (with their hops and in-degrees as in the whole graph, as GraphInfer sees
/// them); only the edges the model could read the answer from go.
fn hold_out(record: &mut Record, a: i64, b: i64) {
    let ids = &record.node_ids;
    let keep: Vec<bool> = (0..record.num_edges())
        .map(|j| {
            let (s, d) = (ids[record.edge_src[j] as usize], ids[record.edge_dst[j] as usize]);
            !((s == a && d == b) || (s == b && d == a))
        })
        .collect();
    if keep.iter().all(|&k| k) {
        return;
    }
    fn kept<T: Copy>(values: &[T], keep: &[bool]) -> Vec<T> {
        values.iter().zip(keep).filter(|(_, k)| **k).map(|(v, _)| *v).collect()
    }
    let edge_dim = record.edge_dim();
    record.edge_src = kept(&record.edge_src, &keep);
    record.edge_dst = kept(&record.edge_dst, &keep);
    record.edge_weights = kept(&record.edge_weights, &keep);
    record.edge_layers = kept(&record.edge_layers, &keep);
    if record.is_typed() {
        record.edge_relations = kept(&record.edge_relations, &keep);
    }
    if edge_dim > 0 {
        record.edge_features = record
            .edge_features
            .chunks(edge_dim)
            .zip(&keep)
            .filter(|(_, k)| **k)
            .flat_map(|(f, _)| f.iter().copied())
            .collect();
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
}
