//! Round 0's plan, made once after sampling: which nodes each layer computes, where each
//! aggregation runs, and which rows cross between workers at each layer.
//!
//! - **Needed**: bit `l` of a node says its layer-`l` output is needed (bit 0: its features).
//!   A row needs every layer up to its own (the last for scores, the embedding layer for a
//!   typed graph's rows of other types), as each layer reads a node's own previous row; a node
//!   needed at layer `l` needs the in-neighbors that layer reads ([`LayerRule`]) at `l - 1`.
//!   With `targets = "all"` every bit is set; otherwise the bits travel back from the rows, one
//!   shuffle per layer.
//! - **Hubs**: a node whose layer-`l` in-edges number more than the threshold has them cut into
//!   `salts` runs of consecutive ranks (in sample order, so a typed hub's runs may mix
//!   relations: each in-edge carries its relation and weight); run `s` is aggregated on worker
//!   `reducer_key(node, (l, s))`, and the owner merges the partial states in salt order. The
//!   salt count depends on the in-edge count and the threshold only, never on the number of
//!   workers, so the result is the same bits on any cluster.
//! - **Rows**: each aggregation reads its sources' messages by *row*: a local node's slot, or
//!   `local + i` for the `i`-th remote node this worker reads. Owners learn once who reads each
//!   of their nodes at each layer (subscriptions) and push those messages every round. A local
//!   source's slot came with its in-edge from sampling (`NodeStore::take_source_slots`), so
//!   the plan looks up only the remote ones, by id.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use cluster::IdTable;
use cluster::hash::reducer_key;
use cluster::{all_gather, owner_key, shuffle};
use sampling::NodeStore;
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::Error;
use crate::rule::{LayerRule, Selected};

/// A source row not yet resolved: the node lives on another worker.
const REMOTE: u32 = sampling::REMOTE_SOURCE;

/// Slots ahead of the one whose sources are resolved that have theirs prefetched.
const PREFETCH_SLOTS: usize = 2;

/// Sources of a hub's run ahead of the one looked up that are prefetched.
const PREFETCH_SOURCES: usize = 8;

/// Most reducers a hub's in-edges are cut over at one layer.
const MAX_SALTS: u64 = 64;

/// A run of a hub's in-edges that one worker aggregates at one layer.
#[derive(Debug, Clone)]
pub struct HubTask {
    pub hub: i64,
    pub salt: u32,
    /// The sources' rows, in rank order.
    pub rows: Vec<u32>,
    /// The in-edges' features, `edge_dim` per row (empty when the model reads none).
    pub features: Vec<f32>,
    /// A typed layer: each in-edge's relation and weight (see [`crate::rule::Selected`]);
    /// empty otherwise.
    pub relations: Vec<u8>,
    pub coefs: Vec<f32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TaskMsg {
    hub: i64,
    layer: u32,
    salt: u32,
    sources: Vec<i64>,
    /// Each source's row where it is known: its slot, when the run is aggregated on the hub's
    /// owner and the owner has the source; [`REMOTE`] until resolved.
    rows: Vec<u32>,
    features: Vec<f32>,
    relations: Vec<u8>,
    coefs: Vec<f32>,
}

/// The worker a hub's run is aggregated on.
pub fn reducer(hub: i64, layer: usize, salt: u32) -> u64 {
    reducer_key(hub, ((layer as u64) << 32) | u64::from(salt))
}

/// How many runs a hub's `count` in-edges are cut into. The runs' partial states are
/// floating-point sums, whose bits change with their grouping, so the count depends on the hub
/// alone, never on the worker count: scores are the same bits on any cluster. GraphFlat's
/// sampling split (`sampling::reindex::salts`) may follow the worker count, because its merge
/// is an exact selection (see `docs/graphinfer.md`).
fn salts(count: usize, threshold: u64) -> u32 {
    (count as u64).div_ceil(threshold).clamp(2, MAX_SALTS) as u32
}

/// One worker's plan (see the module doc). Layers are indexed 1..=k; index 0 is unused.
#[derive(Debug, Default)]
pub struct Plan {
    pub needed: Vec<u32>,
    /// Remote nodes this worker reads, by row - local (sorted; shared with each round's consumer).
    pub remote_ids: Rc<Vec<i64>>,
    /// Per slot, the rows of the prefix of its sample holding the in-edges it aggregates
    /// itself (a row stays [`REMOTE`] for a remote source no layer reads).
    offsets: Vec<usize>,
    rows: Vec<u32>,
    /// Per layer: the runs this worker aggregates, sorted by (hub, salt).
    pub tasks: Vec<Vec<HubTask>>,
    /// Per layer: this worker's hubs (slot → salts).
    pub hubs: Vec<BTreeMap<u32, u32>>,
    /// Per layer: (slot, worker) that reads the slot's message.
    pub subscribers: Vec<Vec<(u32, u32)>>,
    /// Per layer: hubs on all workers.
    pub hub_count: Vec<u64>,
}

impl Plan {
    pub fn needs(&self, slot: usize, layer: usize) -> bool {
        self.needed[slot] & (1 << layer) != 0
    }

    /// The rows of `slot`'s in-edges that it aggregates itself, by index in its sample (see
    /// [`LayerRule::selected`]).
    pub fn in_rows(&self, slot: usize) -> &[u32] {
        &self.rows[self.offsets[slot]..self.offsets[slot + 1]]
    }
}

/// Makes the plan for `wanted`: slots of this worker's nodes that get an output row, each with
/// the last layer its row needs (`all`: every node needs every layer). `source_slots` are the
/// sampled in-edges' (see `NodeStore::take_source_slots`). A hub's runs carry their in-edges'
/// features (as the model reads them, see `infer::edge_features`) to their reducers.
pub fn plan(
    worker: &mut Worker,
    nodes: &Rc<NodeStore>,
    source_slots: Vec<u32>,
    rule: &LayerRule,
    wanted: &[(u32, usize)],
    all: bool,
    threshold: u64,
) -> Result<Plan, Error> {
    let k = rule.hops();
    sampling::agree(worker, check_source_slots(nodes, &source_slots))?;
    let needed = needed(worker, nodes, rule, wanted, all);
    let is_hub = |slot: usize, l: usize| {
        threshold > 0 && needed[slot] & (1 << l) != 0 && rule.count(l, nodes.sampled(slot)) as u64 > threshold
    };

    // Hubs: cut each hub's in-edges into runs and send them to their reducers. A run that
    // stays here takes its sources' slots along.
    let (me, peers) = (worker.index() as u64, worker.peers() as u64);
    let mut hubs = vec![BTreeMap::new(); k + 1];
    let mut runs = Vec::new();
    let mut start = 0;
    for slot in 0..nodes.len() {
        let slots = &source_slots[start..start + nodes.sampled(slot).len()];
        start += slots.len();
        for (l, owned) in hubs.iter_mut().enumerate().skip(1) {
            if !is_hub(slot, l) {
                continue;
            }
            let selected: Vec<Selected> = rule.selected(l, nodes.sampled(slot)).collect();
            let count = selected.len();
            let n = salts(count, threshold);
            owned.insert(slot as u32, n);
            for s in 0..n as usize {
                let run = &selected[s * count / n as usize..(s + 1) * count / n as usize];
                let mut task = hub_run(nodes, slot, l, s as u32, run, rule.is_typed());
                if reducer(task.hub, l, task.salt) % peers == me {
                    task.rows = run.iter().map(|s| slots[s.index]).collect();
                }
                runs.push(task);
            }
        }
    }
    let received: Rc<RefCell<Vec<TaskMsg>>> = Rc::default();
    let sink = received.clone();
    shuffle(
        worker,
        |t: &TaskMsg| reducer(t.hub, t.layer as usize, t.salt),
        move |t| sink.borrow_mut().push(t),
        |send| {
            send(runs);
            Ok::<(), Error>(())
        },
    )?;
    let mut received = received.take();
    received.sort_unstable_by_key(|t| (t.layer, t.hub, t.salt));

    // Each node's own prefix of in-edges: the most any layer that it aggregates itself reads.
    let own_prefix: Vec<usize> = (0..nodes.len())
        .map(|slot| {
            let own = (1..=k).filter(|&l| needed[slot] & (1 << l) != 0 && !is_hub(slot, l));
            own.map(|l| rule.window(l, nodes.sampled(slot))).max().unwrap_or(0)
        })
        .collect();
    let (offsets, mut rows) = own_rows(nodes, source_slots, &own_prefix);

    // The remote nodes read here, each with the layers that read it (bit `l`), and the row of
    // every remote node: one table probe per remote in-edge, prefetched a few slots ahead. The
    // table is sized up front so that it never grows (growing rehashes every id into a fresh
    // table twice as large, past the cache at 10M nodes): it holds at most every node of the
    // other workers, and at most one id per remote in-edge.
    let elsewhere = cluster::sum(worker, nodes.len() as u64) - nodes.len() as u64;
    let remote_in_edges = rows.iter().chain(received.iter().flat_map(|t| &t.rows)).filter(|&&r| r == REMOTE).count();
    // Each value: (the layers that read the id, its index among the remote rows, set below).
    let mut reads: IdTable<(u32, u32)> = IdTable::with_capacity(remote_in_edges.min(elsewhere as usize));
    for slot in 0..nodes.len() {
        if slot + PREFETCH_SLOTS < nodes.len() {
            remote_sources(nodes, &rows, &offsets, slot + PREFETCH_SLOTS).for_each(|u| reads.prefetch(u));
        }
        let (sources, local) = (nodes.sampled(slot), &rows[offsets[slot]..offsets[slot + 1]]);
        if !local.contains(&REMOTE) {
            continue;
        }
        for l in (1..=k).filter(|&l| needed[slot] & (1 << l) != 0 && !is_hub(slot, l)) {
            for s in rule.selected(l, sources).filter(|s| local[s.index] == REMOTE) {
                reads.get_or_insert_with(sources[s.index].src, Default::default).0.0 |= 1 << l;
            }
        }
    }
    // A hub run's sources: a slot that came along, else one lookup here, prefetched a few
    // sources ahead.
    for t in &mut received {
        for i in 0..t.sources.len() {
            if t.rows.get(i + PREFETCH_SOURCES) == Some(&REMOTE) {
                nodes.prefetch(t.sources[i + PREFETCH_SOURCES]);
            }
            if t.rows[i] != REMOTE {
                continue;
            }
            match nodes.slot(t.sources[i]) {
                Some(s) => t.rows[i] = s as u32,
                None => reads.get_or_insert_with(t.sources[i], Default::default).0.0 |= 1 << t.layer,
            }
        }
    }
    // Remote rows in id order, each id's index kept in its entry: the same table maps a
    // remote in-edge to its row.
    let mut remote_ids: Vec<i64> = reads.iter().map(|(id, _)| id).collect();
    remote_ids.sort_unstable();
    for (i, &id) in remote_ids.iter().enumerate() {
        reads.get_or_insert_with(id, Default::default).0.1 = i as u32;
    }
    let remote = |id: i64| reads.get(id).map(|(_, i)| i);
    let n = nodes.len() as u32;
    let row = |r: u32, id: i64| match r {
        REMOTE => n + remote(id).expect("every remote source of a hub's run is in `reads`"),
        slot => slot,
    };
    for slot in 0..nodes.len() {
        if slot + PREFETCH_SLOTS < nodes.len() {
            remote_sources(nodes, &rows, &offsets, slot + PREFETCH_SLOTS).for_each(|u| reads.prefetch(u));
        }
        let (sources, local) = (nodes.sampled(slot), &mut rows[offsets[slot]..offsets[slot + 1]]);
        if !local.contains(&REMOTE) {
            continue;
        }
        for (r, e) in local.iter_mut().zip(sources) {
            if *r == REMOTE
                && let Some(i) = remote(e.src)
            {
                *r = n + i;
            }
        }
    }
    let mut tasks: Vec<Vec<HubTask>> = vec![Vec::new(); k + 1];
    for t in received {
        let rows = t.rows.iter().zip(&t.sources).map(|(&r, &u)| row(r, u)).collect();
        let (relations, coefs) = (t.relations, t.coefs);
        tasks[t.layer as usize].push(HubTask {
            hub: t.hub,
            salt: t.salt,
            rows,
            features: t.features,
            relations,
            coefs,
        });
    }

    let subscribers = subscribe(worker, nodes, &reads, k)?;
    let local_hubs: Vec<(u64, usize, u64)> = (1..=k).map(|l| (me, l, hubs[l].len() as u64)).collect();
    let mut hub_count = vec![0u64; k + 1];
    for (_, l, c) in all_gather(worker, local_hubs) {
        hub_count[l] += c;
    }
    Ok(Plan { needed, remote_ids: Rc::new(remote_ids), offsets, rows, tasks, hubs, subscribers, hub_count })
}

/// Every slot's own prefix of in-edges as rows: the sources' slots that came with the sampled
/// in-edges (local, or [`REMOTE`]), cut to `prefix[slot]` each and packed in place, front to
/// back (a slot's rows never move past where its in-edges start). Returns each slot's offset
/// and the rows.
fn own_rows(nodes: &NodeStore, mut rows: Vec<u32>, prefix: &[usize]) -> (Vec<usize>, Vec<u32>) {
    let mut offsets = Vec::with_capacity(prefix.len() + 1);
    let (mut from, mut to) = (0, 0);
    for (slot, &p) in prefix.iter().enumerate() {
        offsets.push(to);
        if from != to {
            rows.copy_within(from..from + p, to);
        }
        from += nodes.sampled(slot).len();
        to += p;
    }
    offsets.push(to);
    rows.truncate(to);
    rows.shrink_to_fit();
    (offsets, rows)
}

/// Sampling kept a source slot per sampled in-edge (the stage asked for them).
fn check_source_slots(nodes: &NodeStore, source_slots: &[u32]) -> Result<(), Error> {
    let sampled: usize = (0..nodes.len()).map(|slot| nodes.sampled(slot).len()).sum();
    if source_slots.len() != sampled {
        let message = format!("{} source slots for {sampled} sampled in-edges", source_slots.len());
        return Err(Error::Internal(message));
    }
    Ok(())
}

/// The sources of `slot`'s own prefix of in-edges that live on other workers (`rows` still
/// [`REMOTE`]).
fn remote_sources<'a>(
    nodes: &'a NodeStore,
    rows: &'a [u32],
    offsets: &'a [usize],
    slot: usize,
) -> impl Iterator<Item = i64> + 'a {
    let (local, sampled) = (&rows[offsets[slot]..offsets[slot + 1]], nodes.sampled(slot));
    local.iter().enumerate().filter(|&(_, &r)| r == REMOTE).map(|(i, _)| sampled[i].src)
}

/// Run `salt` of hub `slot`'s layer-`l` in-edges (`run`, selected by the rule): its sources,
/// their features and, for a typed layer, their relations and weights.
fn hub_run(nodes: &NodeStore, slot: usize, l: usize, salt: u32, run: &[Selected], typed: bool) -> TaskMsg {
    let (sampled, e) = (nodes.sampled(slot), nodes.edge_dim);
    let all = nodes.sampled_features(slot);
    let features = run.iter().flat_map(|s| &all[s.index * e..(s.index + 1) * e]).copied().collect();
    let sources = run.iter().map(|s| sampled[s.index].src).collect();
    let (relations, coefs) = if typed { run.iter().map(|s| (s.relation, s.coef)).unzip() } else { Default::default() };
    let rows = vec![REMOTE; run.len()];
    TaskMsg { hub: nodes.ids[slot], layer: l as u32, salt, sources, rows, features, relations, coefs }
}

/// Bit `l` of each slot: its layer-`l` output is needed (see the module doc).
fn needed(
    worker: &mut Worker,
    nodes: &Rc<NodeStore>,
    rule: &LayerRule,
    wanted: &[(u32, usize)],
    all: bool,
) -> Vec<u32> {
    let k = rule.hops();
    let up_to = |l: usize| (1u32 << (l + 1)) - 1;
    if all {
        return vec![up_to(k); nodes.len()];
    }
    let needed = Rc::new(RefCell::new(vec![0u32; nodes.len()]));
    for &(slot, last) in wanted {
        needed.borrow_mut()[slot as usize] |= up_to(last);
    }
    for l in (1..=k).rev() {
        let mut remote = Vec::new();
        {
            let mut bits = needed.borrow_mut();
            for slot in 0..nodes.len() {
                if bits[slot] & (1 << l) == 0 {
                    continue;
                }
                bits[slot] |= 1 << (l - 1);
                let sampled = nodes.sampled(slot);
                for e in rule.selected(l, sampled).map(|s| &sampled[s.index]) {
                    match nodes.slot(e.src) {
                        Some(s) => bits[s] |= 1 << (l - 1),
                        None => remote.push(e.src),
                    }
                }
            }
        }
        let (sink, store) = (needed.clone(), nodes.clone());
        // Every worker takes part in every shuffle; errors cannot happen here.
        let _ = shuffle(
            worker,
            |&u: &i64| owner_key(u),
            move |u: i64| {
                if let Some(s) = store.slot(u) {
                    sink.borrow_mut()[s] |= 1 << (l - 1);
                }
            },
            |send| {
                send(remote);
                Ok::<(), Error>(())
            },
        );
    }
    needed.take()
}

/// Tells each owner who reads its nodes at each layer; returns this worker's subscribers.
/// `reads` holds each remote node read here with the layers that read it (bit `l`, `l` in
/// `1..=k`) and its remote row.
fn subscribe(
    worker: &mut Worker,
    nodes: &Rc<NodeStore>,
    reads: &IdTable<(u32, u32)>,
    k: usize,
) -> Result<Vec<Vec<(u32, u32)>>, Error> {
    let me = worker.index() as u32;
    let wanted: Vec<(i64, u32, u32)> = reads
        .iter()
        .flat_map(|(id, (layers, _))| (1..=k as u32).filter(move |l| layers & (1 << l) != 0).map(move |l| (id, l, me)))
        .collect();
    let subscribers = Rc::new(RefCell::new(vec![Vec::new(); k + 1]));
    let (sink, store) = (subscribers.clone(), nodes.clone());
    shuffle(
        worker,
        |w: &(i64, u32, u32)| owner_key(w.0),
        move |(id, l, reader): (i64, u32, u32)| {
            if let Some(s) = store.slot(id) {
                sink.borrow_mut()[l as usize].push((s as u32, reader));
            }
        },
        |send| {
            send(wanted);
            Ok::<(), Error>(())
        },
    )?;
    let mut subscribers = subscribers.take();
    subscribers.iter_mut().for_each(|s| s.sort_unstable());
    Ok(subscribers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salt_counts_depend_on_the_hub_only() {
        assert_eq!(salts(101, 100), 2);
        assert_eq!(salts(1_000, 100), 10);
        assert_eq!(salts(1_000_000, 100), MAX_SALTS as u32);
    }
}
