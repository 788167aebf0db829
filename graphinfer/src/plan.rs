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
//!   `owners.reducer_key(node, (l, s))`, and the owner merges the partial states in salt order. The
//!   salt count depends on the in-edge count and the threshold only, never on the number of
//!   workers, so the result is the same bits on any cluster.
//! - **Rows**: each aggregation reads its sources' messages by *row*: a local node's slot, or
//!   `local + i` for the `i`-th remote node this worker reads, numbered as the plan first reads
//!   them. Every sampled in-edge came with its source's slot at its owner
//!   (`NodeStore::take_source_slots`), so the plan finds a remote source by (owner, slot) with
//!   one direct access (`RemoteRows`), never by id. Owners learn once who reads each of their
//!   nodes at each layer and into which row (subscriptions), and push those messages every
//!   round straight to their rows.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use cluster::IdTable;
use cluster::{Owners, all_gather, shuffle};
use sampling::{ELSEWHERE, NodeStore};
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::Error;
use crate::rule::{LayerRule, Selected};

/// The row of an in-edge no layer reads whose source lives on another worker.
const UNREAD: u32 = u32::MAX;

/// Slots ahead of the one whose remote sources are resolved that have theirs prefetched.
const PREFETCH_SLOTS: usize = 2;

/// Sources of a hub's run ahead of the one resolved that are prefetched.
const PREFETCH_SOURCES: usize = 8;

/// Subscriptions a worker sends at a time.
const SEND_BATCH: usize = 4096;

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
    /// Each source's slot at its owner, as the hub's owner got it from sampling (see
    /// `NodeStore::take_source_slots`).
    slots: Vec<u32>,
    features: Vec<f32>,
    relations: Vec<u8>,
    coefs: Vec<f32>,
}

/// A worker that reads a node's message at one layer: the node's slot at its owner, the
/// reader, and the reader's row for it (see `RemoteRows`). Sorted by slot, so an owner sends
/// its messages in slot order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Subscriber {
    pub slot: u32,
    pub reader: u32,
    pub row: u32,
}

/// The routing key of the worker a hub's run is aggregated on.
pub fn reducer(owners: &Owners, hub: i64, layer: usize, salt: u32) -> u64 {
    owners.reducer_key(hub, ((layer as u64) << 32) | u64::from(salt))
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
    /// How many remote nodes this worker reads: rows `local..local + remote_rows`.
    pub remote_rows: usize,
    /// Per slot, the rows of the prefix of its sample holding the in-edges it aggregates
    /// itself ([`UNREAD`] for a remote source no layer reads).
    offsets: Vec<usize>,
    rows: Vec<u32>,
    /// Per layer: the runs this worker aggregates, sorted by (hub, salt).
    pub tasks: Vec<Vec<HubTask>>,
    /// Per layer: this worker's hubs (slot → salts).
    pub hubs: Vec<BTreeMap<u32, u32>>,
    /// Per layer: who reads each slot's message, and into which of its rows.
    pub subscribers: Vec<Vec<Subscriber>>,
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

    let (hubs, runs) = cut_hub_runs(nodes, &source_slots, rule, threshold, is_hub);
    let received = send_hub_runs(worker, nodes, runs)?;

    // Each node's own prefix of in-edges: the most any layer that it aggregates itself reads.
    // Layer `l` of `slot` is aggregated here: needed, and not a hub's.
    let aggregates = |slot: usize, l: usize| needed[slot] & (1 << l) != 0 && !is_hub(slot, l);
    let own_prefix = |slot: usize| {
        let own = (1..=k).filter(|&l| aggregates(slot, l));
        own.map(|l| rule.window(l, nodes.sampled(slot))).max().unwrap_or(0)
    };
    let (offsets, mut rows) = own_rows(nodes, source_slots, own_prefix);

    // The remote nodes read here, each given its row at its first in-edge, found by its owner
    // and its slot there (see `RemoteRows`).
    let owner = Owner { me: worker.index() as u32, owners: nodes.owners.clone() };
    let remote_in_edges =
        rows.iter().chain(received.iter().flat_map(|t| &t.slots)).filter(|&&r| r & ELSEWHERE != 0).count();
    let counts = all_gather(worker, vec![(owner.me, nodes.len() as u64)]);
    // Resolving is local and can fail on one worker only (a slot past its owner's nodes): every
    // worker agrees on the outcome before the next collective.
    let resolved = RemoteRows::new(&owner, nodes.len(), &counts, remote_in_edges).and_then(|mut remote| {
        resolve_own(nodes, rule, aggregates, &offsets, &mut rows, &owner, &mut remote)?;
        let tasks = resolve_hub_runs(received, k, &owner, &mut remote)?;
        Ok((remote, tasks))
    });
    let (remote, tasks) = sampling::agree(worker, resolved)?;

    let subscribers = subscribe(worker, &remote, k)?;
    let hub_count = count_hubs(worker, owner.me, &hubs);
    Ok(Plan { needed, remote_rows: remote.len(), offsets, rows, tasks, hubs, subscribers, hub_count })
}

/// Per layer, this worker's hubs (slot → salts), and the runs their in-edges are cut into
/// (`salts` runs of about `threshold` in-edges each, in sample order), each source with its
/// slot at its owner. `is_hub(slot, l)`: layer `l` of `slot` is needed and reads more in-edges
/// than `threshold`.
fn cut_hub_runs(
    nodes: &NodeStore,
    source_slots: &[u32],
    rule: &LayerRule,
    threshold: u64,
    is_hub: impl Fn(usize, usize) -> bool,
) -> (Vec<BTreeMap<u32, u32>>, Vec<TaskMsg>) {
    let mut hubs = vec![BTreeMap::new(); rule.hops() + 1];
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
                runs.push(hub_run(nodes, (slot, slots), l, s as u32, run, rule.is_typed()));
            }
        }
    }
    (hubs, runs)
}

/// Sends every hub run to its reducer; returns the runs this worker reduces, sorted by
/// (layer, hub, salt), the order their partial states are merged in.
fn send_hub_runs(worker: &mut Worker, nodes: &NodeStore, runs: Vec<TaskMsg>) -> Result<Vec<TaskMsg>, Error> {
    let received: Rc<RefCell<Vec<TaskMsg>>> = Rc::default();
    let sink = received.clone();
    let owners = nodes.owners.clone();
    shuffle(
        worker,
        move |t: &TaskMsg| reducer(&owners, t.hub, t.layer as usize, t.salt),
        move |t| sink.borrow_mut().push(t),
        |send| {
            send(runs);
            Ok::<(), Error>(())
        },
    )?;
    let mut received = received.take();
    received.sort_unstable_by_key(|t| (t.layer, t.hub, t.salt));
    Ok(received)
}

/// Per layer (1..=k; index 0 unused), the hubs of every worker.
fn count_hubs(worker: &mut Worker, me: u32, hubs: &[BTreeMap<u32, u32>]) -> Vec<u64> {
    let local: Vec<(u32, usize, u64)> = (1..hubs.len()).map(|l| (me, l, hubs[l].len() as u64)).collect();
    let mut count = vec![0u64; hubs.len()];
    for (_, l, c) in all_gather(worker, local) {
        count[l] += c;
    }
    count
}

/// Turns the own in-edges' source slots into rows (`rows`, each slot's at `offsets`): a local
/// source keeps its slot, a remote one that a layer reads (`aggregates(slot, l)`: the slot
/// aggregates layer `l` itself) gets its remote row, any other remote one [`UNREAD`].
fn resolve_own(
    nodes: &NodeStore,
    rule: &LayerRule,
    aggregates: impl Fn(usize, usize) -> bool,
    offsets: &[usize],
    rows: &mut [u32],
    owner: &Owner,
    remote: &mut RemoteRows,
) -> Result<(), Error> {
    let mut layers = Vec::new();
    for slot in 0..nodes.len() {
        if slot + PREFETCH_SLOTS < nodes.len() {
            let ahead = slot + PREFETCH_SLOTS;
            let raw = &rows[offsets[ahead]..offsets[ahead + 1]];
            for (&r, e) in raw.iter().zip(nodes.sampled(ahead)).filter(|(r, _)| *r & ELSEWHERE != 0) {
                remote.prefetch(owner.of(e.src), r & !ELSEWHERE);
            }
        }
        let (sources, local) = (nodes.sampled(slot), &mut rows[offsets[slot]..offsets[slot + 1]]);
        if local.iter().all(|&r| r & ELSEWHERE == 0) {
            continue;
        }
        // The layers that read each in-edge, so that a remote source is looked up once.
        layers.clear();
        layers.resize(local.len(), 0u32);
        for l in (1..=rule.hops()).filter(|&l| aggregates(slot, l)) {
            rule.selected(l, sources).for_each(|s| layers[s.index] |= 1 << l);
        }
        for ((row, e), &bits) in local.iter_mut().zip(sources).zip(&layers) {
            if *row & ELSEWHERE != 0 {
                *row = if bits == 0 { UNREAD } else { remote.read(owner.of(e.src), *row & !ELSEWHERE, bits)? };
            }
        }
    }
    Ok(())
}

/// The hubs' runs this worker aggregates, by layer (`1..=k`), each source's row resolved: the
/// slot of one this worker owns, else its remote row (prefetched a few sources ahead).
fn resolve_hub_runs(
    received: Vec<TaskMsg>,
    k: usize,
    owner: &Owner,
    remote: &mut RemoteRows,
) -> Result<Vec<Vec<HubTask>>, Error> {
    let mut tasks: Vec<Vec<HubTask>> = vec![Vec::new(); k + 1];
    for t in received {
        let hub_owner = owner.of(t.hub);
        // Where source `i` lives: its owner (the hub's unless marked) and its slot there.
        let at = |i: usize| {
            let raw = t.slots[i];
            (if raw & ELSEWHERE == 0 { hub_owner } else { owner.of(t.sources[i]) }, raw & !ELSEWHERE)
        };
        let mut rows = Vec::with_capacity(t.slots.len());
        for i in 0..t.slots.len() {
            if i + PREFETCH_SOURCES < t.slots.len() {
                let (w, slot) = at(i + PREFETCH_SOURCES);
                if w != owner.me {
                    remote.prefetch(w, slot);
                }
            }
            let (w, slot) = at(i);
            rows.push(if w == owner.me { slot } else { remote.read(w, slot, 1 << t.layer)? });
        }
        let (relations, coefs) = (t.relations, t.coefs);
        let task = HubTask { hub: t.hub, salt: t.salt, rows, features: t.features, relations, coefs };
        tasks[t.layer as usize].push(task);
    }
    Ok(tasks)
}

/// Every slot's own prefix of in-edges, still as the source slots that came with the sampled
/// in-edges (see `NodeStore::take_source_slots`), cut to `prefix(slot)` each and packed in
/// place, front to back (a slot's rows never move past where its in-edges start). Returns
/// each slot's offset and the slots, which become rows in place.
fn own_rows(nodes: &NodeStore, mut rows: Vec<u32>, prefix: impl Fn(usize) -> usize) -> (Vec<usize>, Vec<u32>) {
    let mut offsets = Vec::with_capacity(nodes.len() + 1);
    let (mut from, mut to) = (0, 0);
    for slot in 0..nodes.len() {
        let p = prefix(slot);
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

/// Run `salt` of hub `slot`'s layer-`l` in-edges (`run`, selected by the rule; `slots` the
/// hub's source slots): its sources, their slots, their features and, for a typed layer, their
/// relations and weights.
fn hub_run(
    nodes: &NodeStore,
    (slot, slots): (usize, &[u32]),
    l: usize,
    salt: u32,
    run: &[Selected],
    typed: bool,
) -> TaskMsg {
    let (sampled, e) = (nodes.sampled(slot), nodes.edge_dim);
    let all = nodes.sampled_features(slot);
    let features = run.iter().flat_map(|s| &all[s.index * e..(s.index + 1) * e]).copied().collect();
    let sources = run.iter().map(|s| sampled[s.index].src).collect();
    let (relations, coefs) = if typed { run.iter().map(|s| (s.relation, s.coef)).unzip() } else { Default::default() };
    let slots = run.iter().map(|s| slots[s.index]).collect();
    TaskMsg { hub: nodes.ids[slot], layer: l as u32, salt, sources, slots, features, relations, coefs }
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
        let owners = nodes.owners.clone();
        // Every worker takes part in every shuffle; errors cannot happen here.
        let _ = shuffle(
            worker,
            move |&u: &i64| owners.key(u),
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

/// The worker that owns a node (`cluster::Owners`), and this worker.
struct Owner {
    me: u32,
    owners: Owners,
}

impl Owner {
    fn of(&self, id: i64) -> u32 {
        self.owners.of(id) as u32
    }
}

/// The remote nodes one worker reads, found by their owner and slot there, and their rows:
/// the `i`-th node first read here has row `local + i`, for the life of the plan. Each also
/// carries the layers that read it (bit `l`), which its owner learns at subscription.
struct RemoteRows {
    /// The worker's node count: rows below it are its own slots.
    local: u32,
    len: u32,
    /// Every worker's first entry among the other workers' nodes, worker by worker (this
    /// worker's range empty), and one past the last: a slot is checked against its owner's.
    starts: Vec<usize>,
    index: RemoteIndex,
}

/// Where a remote node's row and layers are kept: `(i + 1, layers)` for the `i`-th remote row,
/// `(0, 0)` for a node not read here.
enum RemoteIndex {
    /// One entry per node of every other worker, at `starts[owner] + slot`: one direct access
    /// per remote in-edge. At 10M nodes on 2 workers it is 40 MB, where the table would be
    /// 134 MB.
    Dense(Vec<(u32, u32)>),
    /// Keyed by `(owner << 32) | slot`, sized up front for every id it can hold: used where
    /// the other workers' nodes outnumber the remote in-edges (a cluster of many workers), so
    /// that memory follows the worker's share of the edges.
    Table(IdTable<(u32, u32)>),
}

impl RemoteRows {
    /// Room for every remote source of this worker's `remote_in_edges`, among the nodes of
    /// the other workers (`counts`: every worker's node count). An error when the rows would
    /// not fit a `u32` below [`UNREAD`].
    fn new(owner: &Owner, local: usize, counts: &[(u32, u64)], remote_in_edges: usize) -> Result<Self, Error> {
        let mut starts = vec![0; counts.len() + 1];
        for &(w, n) in counts {
            starts[w as usize + 1] = if w == owner.me { 0 } else { n as usize };
        }
        (1..starts.len()).for_each(|w| starts[w] += starts[w - 1]);
        let elsewhere = starts[counts.len()] as u64;
        let most = (remote_in_edges as u64).min(elsewhere);
        if local as u64 + most >= u64::from(UNREAD) {
            let message = format!("{local} nodes and {most} remote sources exceed one worker's {UNREAD} rows");
            return Err(Error::Internal(message));
        }
        // A dense entry takes 8 bytes per node elsewhere; a table slot 16, for at least 4/3
        // slots per id it can hold.
        let index = if elsewhere <= 2 * most {
            RemoteIndex::Dense(vec![(0, 0); elsewhere as usize])
        } else {
            RemoteIndex::Table(IdTable::with_capacity(most as usize))
        };
        Ok(RemoteRows { local: local as u32, len: 0, starts, index })
    }

    /// The row of the node at `slot` on worker `owner`, which `layers` read (given here at
    /// the node's first read). An error for a slot past its owner's nodes.
    fn read(&mut self, owner: u32, slot: u32, layers: u32) -> Result<u32, Error> {
        let (first, end) = (self.starts[owner as usize], self.starts[owner as usize + 1]);
        if first + slot as usize >= end {
            return Err(Error::Internal(format!("source slot {slot} past worker {owner}'s {} nodes", end - first)));
        }
        let entry = match &mut self.index {
            RemoteIndex::Dense(entries) => &mut entries[first + slot as usize],
            RemoteIndex::Table(table) => {
                table.get_or_insert_with(i64::from(owner) << 32 | i64::from(slot), || (0, 0)).0
            }
        };
        if entry.0 == 0 {
            self.len += 1;
            entry.0 = self.len;
        }
        entry.1 |= layers;
        Ok(self.local + entry.0 - 1)
    }

    fn len(&self) -> usize {
        self.len as usize
    }

    /// Asks the cache for the entry of the node at `slot` on worker `owner`.
    fn prefetch(&self, owner: u32, slot: u32) {
        match &self.index {
            RemoteIndex::Dense(entries) => {
                if let Some(entry) = entries.get(self.starts[owner as usize] + slot as usize) {
                    cluster::prefetch::read(entry);
                }
            }
            RemoteIndex::Table(table) => table.prefetch(i64::from(owner) << 32 | i64::from(slot)),
        }
    }

    /// Each node read here: (its owner, its slot there, its index among the remote rows, the
    /// layers that read it).
    fn iter(&self) -> Box<dyn Iterator<Item = (u32, u32, u32, u32)> + '_> {
        match &self.index {
            RemoteIndex::Dense(entries) => Box::new((0..self.starts.len() - 1).flat_map(move |w| {
                let mine = entries[self.starts[w]..self.starts[w + 1]].iter().enumerate();
                mine.filter(|(_, e)| e.0 != 0).map(move |(s, &(i, layers))| (w as u32, s as u32, i - 1, layers))
            })),
            RemoteIndex::Table(table) => {
                Box::new(table.iter().map(|(key, (i, layers))| ((key >> 32) as u32, key as u32, i - 1, layers)))
            }
        }
    }
}

/// Tells each owner who reads its nodes at each layer, and into which row; returns this
/// worker's subscribers.
fn subscribe(worker: &mut Worker, remote: &RemoteRows, k: usize) -> Result<Vec<Vec<Subscriber>>, Error> {
    let reader = worker.index() as u32;
    // (owner, layer, subscriber).
    let wanted = remote.iter().flat_map(|(owner, slot, row, layers)| {
        let at = Subscriber { slot, reader, row };
        (1..=k as u32).filter(move |l| layers & (1 << l) != 0).map(move |l| (owner, l, at))
    });
    let subscribers = Rc::new(RefCell::new(vec![Vec::new(); k + 1]));
    let sink = subscribers.clone();
    shuffle(
        worker,
        |w: &(u32, u32, Subscriber)| u64::from(w.0),
        move |(_, l, at): (u32, u32, Subscriber)| sink.borrow_mut()[l as usize].push(at),
        |send| {
            let mut wanted = wanted.peekable();
            while wanted.peek().is_some() {
                send(wanted.by_ref().take(SEND_BATCH).collect());
            }
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

    /// The same reads give the same rows, layers and subscriptions whichever index holds them,
    /// and a slot past its owner's nodes is an error, not another node's row.
    #[test]
    fn remote_rows_are_numbered_by_first_read_in_either_index() {
        let owner = Owner { me: 1, owners: Owners::hashed(3) };
        let counts = [(0, 40), (1, 7), (2, 30)];
        // (owner, slot, layers): repeats, both other workers, slot 0 and the last slots.
        let reads = [(2, 5), (0, 39), (0, 0), (2, 5), (2, 29), (0, 39), (2, 0)];
        let reads: Vec<(u32, u32, u32)> = reads.iter().enumerate().map(|(i, &(w, s))| (w, s, 2 << (i % 2))).collect();
        let mut seen = Vec::new();
        for (remote_in_edges, dense) in [(70, true), (20, false)] {
            let mut remote = RemoteRows::new(&owner, 7, &counts, remote_in_edges).unwrap();
            assert_eq!(matches!(remote.index, RemoteIndex::Dense(_)), dense, "{remote_in_edges} remote in-edges");
            let rows: Vec<u32> = reads.iter().map(|&(w, s, l)| remote.read(w, s, l).unwrap()).collect();
            assert_eq!(rows, [7, 8, 9, 7, 10, 8, 11], "rows after the 7 local slots, by first read");
            assert_eq!(remote.len(), 5);
            let mut entries: Vec<_> = remote.iter().collect();
            entries.sort_unstable();
            seen.push(entries);
            assert!(remote.read(0, 40, 2).is_err(), "slot 40 of worker 0's 40 nodes");
            assert_eq!(remote.len(), 5, "an error reads nothing");
        }
        let layers = |w, s| reads.iter().filter(|r| (r.0, r.1) == (w, s)).fold(0, |a, r| a | r.2);
        let expected = vec![
            (0, 0, 2, layers(0, 0)),
            (0, 39, 1, layers(0, 39)),
            (2, 0, 4, layers(2, 0)),
            (2, 5, 0, layers(2, 5)),
            (2, 29, 3, layers(2, 29)),
        ];
        assert_eq!(seen, [expected.clone(), expected]);
    }

    #[test]
    fn salt_counts_depend_on_the_hub_only() {
        assert_eq!(salts(101, 100), 2);
        assert_eq!(salts(1_000, 100), 10);
        assert_eq!(salts(1_000_000, 100), MAX_SALTS as u32);
    }
}
