//! One layer's round, on every worker in step:
//!
//! 1. **transform**: the rows of this worker's nodes that the layer reads, on the device in
//!    batches padded to `batch_size` rows, fewer for very wide rows (so a row's bits do not
//!    depend on its batch mates, and a batch stays under [`TRANSFORM_BYTES`]); a typed model's
//!    batches hold one node type each (its own weights, and at layer 1 its own width);
//! 2. **push**: each node's message to the workers that subscribed to it, and each hub's own
//!    row to the reducers of its runs (what crosses the wire: `Push`);
//! 3. **hub runs**: each reducer folds its runs and sends the partial states to the hub's owner
//!    (`Partial`), which merges them in salt order;
//! 4. **finish**: every node the layer computes folds its in-edges' messages in rank order (or
//!    takes its hub's merged state) and gets its output. The in-edges are those the layer reads
//!    ([`LayerRule`]); a typed layer weighs each message by its relation's mean.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

use burn::prelude::Device;
use cluster::shuffle;
use cluster::wait::check_abort;
use gnn::{Gnn, LayerSlice};
use sampling::NodeStore;
use schemas::model::ModelSpec;
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::Error;
use crate::plan::{Plan, reducer};
use crate::rule::LayerRule;
use stage::Progress;

/// What a round needs, the same for every layer.
pub struct Context<'a> {
    pub nodes: &'a Rc<NodeStore>,
    pub plan: &'a Plan,
    pub rule: &'a LayerRule,
    pub model: &'a Gnn,
    pub spec: &'a ModelSpec,
    pub device: &'a Device,
    pub batch_size: usize,
    pub progress: &'a Progress,
    pub reporter: bool,
}

/// What crosses the wire in step 2.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Push {
    /// A node's message, to a worker that aggregates over it.
    Message { to: u32, at: u32, row: Vec<f32> },
    /// A hub's own transformed row, to the reducer of its run `salt` (GAT's attention reads it).
    Hub { hub: i64, layer: u32, salt: u32, row: Vec<f32> },
}

/// A reducer's state over one run of a hub's in-edges, to the hub's owner (step 3).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Partial {
    hub: i64,
    salt: u32,
    state: Vec<f32>,
}

/// A layer's input rows: the node features (layer 1, taken out of the store: no later step
/// reads them) or the previous layer's outputs, which the layer lets go once it has
/// transformed them (freed then, unless the caller holds them too: the embedding layer's, for
/// the writer).
pub enum Input {
    /// The features; in a typed graph with learned rows, each node's learned row after them
    /// where its type reads one.
    Features {
        values: Vec<f32>,
        normalize: bool,
        learned: Option<LearnedInput>,
    },
    Rows {
        values: Rc<Vec<f32>>,
        width: usize,
    },
}

/// A typed model's learned rows, by slot (`dim` values each; zeros for the types that read
/// none), and whether each node type reads them.
pub struct LearnedInput {
    pub values: Vec<f32>,
    pub dim: usize,
    pub types: Vec<bool>,
}

impl LearnedInput {
    fn width(&self, t: u8) -> usize {
        if self.types[usize::from(t)] { self.dim } else { 0 }
    }
}

impl Input {
    /// The width of the rows of nodes of type `t` (type 0 in a homogeneous graph).
    fn width(&self, nodes: &NodeStore, t: u8) -> usize {
        match self {
            Input::Features { learned, .. } => nodes.width(t) + learned.as_ref().map_or(0, |l| l.width(t)),
            Input::Rows { width, .. } => *width,
        }
    }

    fn append(&self, nodes: &NodeStore, slot: usize, out: &mut Vec<f32>) {
        match self {
            Input::Features { values, normalize, learned } => {
                gnn::features::push_row(nodes.feature_row(values, slot), *normalize, out);
                if let Some(l) = learned.as_ref().filter(|l| l.width(nodes.node_type(slot)) > 0) {
                    out.extend_from_slice(&l.values[slot * l.dim..(slot + 1) * l.dim]);
                }
            }
            Input::Rows { values, width } => out.extend_from_slice(&values[slot * width..(slot + 1) * width]),
        }
    }
}

/// Layer `l` (1-based): this worker's outputs, `nodes x slice.output_width()` row-major (rows
/// of nodes the layer does not compute stay zero).
pub fn layer(worker: &mut Worker, cx: &Context, l: usize, input: Input) -> Result<Vec<f32>, Error> {
    let slice = cx.model.slice(cx.spec, l - 1);
    let n = cx.nodes.len();
    cx.progress.add_total(l - 1, (0..n).filter(|&v| cx.plan.needs(v, l)).count() as u64);
    // The input is gone once transformed (its array holds the rows, or it is freed before the
    // layer's array is allocated): one array of node rows fewer at the layer's peak (256 MB at
    // 4M nodes and 16 hidden units; the features at layer 1, 512 MB there at 32 features).
    // The messages follow the rows in the same array, so where the input's array has room for
    // both (layer 1's features, 32 wide, under rows and messages of 16), neither pages in
    // fresh memory (640 MB each at 10M nodes).
    let (rw, mw) = (slice.row_width(), slice.message_width());
    let mut buf = transform(cx, l, &slice, input, mw);
    let (rows, local) = buf.split_at_mut(n * rw);
    write_messages(cx, l, &slice, rows, local);
    let (remote, hub_rows) = push(worker, cx, l, rows, rw, local, mw)?;
    let messages = Messages { local, remote, n, width: mw };
    let merged = if cx.plan.hub_count[l] > 0 {
        reduce_hubs(worker, cx, l, &slice, &messages, &hub_rows)?
    } else {
        HashMap::new()
    };
    let fw = slice.finish_width();
    let done = finish(cx, l, &slice, rows, &messages, &merged);
    // The messages go with the array's tail.
    let mut out = buf;
    out.truncate(n * fw);
    out.shrink_to_fit();
    cx.progress.advance(l - 1, done % 8192);
    if slice.has_post() {
        return Ok(post(cx, l, out, fw));
    }
    Ok(out)
}

/// Step 2's input: each node's message from its transformed row (`row_width` each), into
/// `messages` (`message_width` each); zeros for the nodes no layer-`l` output reads.
fn write_messages(cx: &Context, l: usize, slice: &LayerSlice, rows: &[f32], messages: &mut [f32]) {
    let (rw, mw) = (slice.row_width(), slice.message_width());
    for u in 0..cx.nodes.len() {
        let message = &mut messages[u * mw..(u + 1) * mw];
        if cx.plan.needs(u, l - 1) {
            let degree = cx.rule.degree(l, cx.nodes.in_degree[u]) as f32;
            slice.message(&rows[u * rw..(u + 1) * rw], degree, message);
        } else {
            message.fill(0.0);
        }
    }
}

/// Step 4: every node the layer computes folds its in-edges' messages (or takes its hub's
/// `merged` state) and finishes; returns how many did. The outputs are written over `rows`,
/// one array of node rows fewer at the layer's peak (640 MB at 10M nodes and 16 hidden
/// units): node v's output, written once its row is read, lies in `[v fw, (v + 1) fw)`, below
/// `(v + 1) rw` (`finish_width <= row_width`), so it overwrites rows of nodes up to v only,
/// whose rows are read already (slot order).
fn finish(
    cx: &Context,
    l: usize,
    slice: &LayerSlice,
    rows: &mut [f32],
    messages: &Messages,
    merged: &HashMap<u32, Vec<f32>>,
) -> u64 {
    let (n, rw, fw) = (cx.nodes.len(), slice.row_width(), slice.finish_width());
    assert!(fw <= rw, "layer {l}: finish width {fw} wider than its rows ({rw})");
    // One state and one output buffer serve every node (a fresh state a node cost an
    // allocation, 6% of a layer at 10M nodes).
    let (mut state, mut finished) = (slice.empty_state(), vec![0f32; fw]);
    let mut done = 0u64;
    let e = cx.nodes.edge_dim;
    for v in 0..n {
        if !cx.plan.needs(v, l) {
            rows[v * fw..(v + 1) * fw].fill(0.0);
            continue;
        }
        // The messages a node reads lie at random rows: those of a node a few slots ahead are
        // asked for now, so that their misses overlap (see `cluster::prefetch`).
        if v + PREFETCH_SLOTS < n {
            cx.plan.in_rows(v + PREFETCH_SLOTS).iter().for_each(|&r| messages.prefetch(r as usize));
        }
        let own = &rows[v * rw..(v + 1) * rw];
        match merged.get(&(v as u32)) {
            Some(merged) => state.copy_from_slice(merged),
            None => {
                let (in_rows, features) = (cx.plan.in_rows(v), cx.nodes.sampled_features(v));
                let edges = cx.rule.selected(l, cx.nodes.sampled(v)).map(|s| Edge {
                    row: in_rows[s.index],
                    features: &features[s.index * e..s.index * e + slice.edge_width(s.relation)],
                    relation: s.relation,
                    coef: s.coef,
                });
                fold(slice, own, edges, messages, &mut state)
            }
        }
        let degree = cx.rule.degree(l, cx.nodes.in_degree[v]) as f32;
        slice.finish(own, degree, &state, &mut finished);
        rows[v * fw..(v + 1) * fw].copy_from_slice(&finished);
        done += 1;
        if done.is_multiple_of(8192) {
            cx.progress.advance(l - 1, 8192);
            check_abort();
            if cx.reporter {
                cx.progress.report(l - 1, Duration::from_secs(2), false);
            }
        }
    }
    done
}

/// GINE's post step (its MLP and activation) on the device, in batches padded like the
/// transform's, over the finished rows (`width` each) of the nodes the layer computes.
fn post(cx: &Context, l: usize, finished: Vec<f32>, width: usize) -> Vec<f32> {
    let ow = cx.model.slice(cx.spec, l - 1).output_width();
    let n = cx.nodes.len();
    let mut out = vec![0f32; n * ow];
    let slots: Vec<usize> = (0..n).filter(|&v| cx.plan.needs(v, l)).collect();
    let batch_rows = transform_rows(cx.batch_size, width.max(ow));
    for batch in slots.chunks(batch_rows) {
        let mut values = Vec::with_capacity(batch_rows * width);
        for &v in batch {
            values.extend_from_slice(&finished[v * width..(v + 1) * width]);
        }
        values.resize(batch_rows * width, 0.0);
        let rows = gnn::slice::post_rows(cx.model, cx.spec, l - 1, values, width, cx.device);
        for (i, &v) in batch.iter().enumerate() {
            out[v * ow..(v + 1) * ow].copy_from_slice(&rows[i * ow..(i + 1) * ow]);
        }
        check_abort();
    }
    out
}

/// A layer's messages by row (see `plan`): this worker's nodes', then the remote nodes' it reads.
struct Messages<'a> {
    local: &'a [f32],
    remote: Vec<f32>,
    n: usize,
    width: usize,
}

impl Messages<'_> {
    fn row(&self, r: usize) -> &[f32] {
        let w = self.width;
        if r < self.n { &self.local[r * w..(r + 1) * w] } else { &self.remote[(r - self.n) * w..(r - self.n + 1) * w] }
    }

    /// Asks the cache for row `r`'s first line (a row no layer reads, out of range: nothing).
    fn prefetch(&self, r: usize) {
        let first =
            if r < self.n { self.local.get(r * self.width) } else { self.remote.get((r - self.n) * self.width) };
        first.into_iter().for_each(cluster::prefetch::read);
    }
}

/// Slots ahead of the node being folded whose messages are prefetched.
const PREFETCH_SLOTS: usize = 2;

/// An in-edge as a fold reads it: its source's row, its features (`slice.edge_width(relation)`
/// of them, none when the model reads none) and, in a typed layer, its relation and weight.
struct Edge<'a> {
    row: u32,
    features: &'a [f32],
    relation: u8,
    coef: f32,
}

/// Folds the messages of `edges`, in order, into `state` (cleared first), for a destination
/// with transformed row `own`.
fn fold<'e>(
    slice: &LayerSlice,
    own: &[f32],
    edges: impl Iterator<Item = Edge<'e>>,
    messages: &Messages,
    state: &mut [f32],
) {
    slice.clear_state(state);
    for edge in edges {
        let message = messages.row(edge.row as usize);
        if slice.is_typed() {
            slice.fold_relation(state, message, edge.relation, edge.coef, edge.features);
        } else {
            slice.fold(state, own, message, edge.features);
        }
    }
}

/// A transform's input and output stay under this many bytes: `batch_size` rows of very wide
/// features (100k a row) would otherwise take gigabytes.
const TRANSFORM_BYTES: usize = 256 << 20;

/// Rows per transform: `batch_size`, fewer when rows of `width` values would pass
/// [`TRANSFORM_BYTES`]. It depends only on the settings and the width, so every batch of a
/// layer has the same padded shape on every worker.
pub fn transform_rows(batch_size: usize, width: usize) -> usize {
    batch_size.min(TRANSFORM_BYTES / (4 * width.max(1))).max(1)
}

/// Step 1: the transformed rows of the nodes whose layer-`l - 1` output is needed (the others'
/// are zero), written over the input's own array where they fit ([`Input::into_owned`]), else
/// into a fresh one, by node type for a typed model. The array holds `nodes x tail` values
/// more after the rows, for the caller to overwrite: stale input where the input's array had
/// room for them, else zeros.
fn transform(cx: &Context, l: usize, slice: &LayerSlice, input: Input, tail: usize) -> Vec<f32> {
    let owned = if slice.is_typed() { Err(input) } else { input.into_owned(cx.nodes, slice.row_width()) };
    match owned {
        Ok(owned) => transform_in_place(cx, l, slice, owned, tail),
        Err(input) => transform_into_new(cx, l, slice, &input, tail),
    }
}

/// A homogeneous layer input held by no one else, as one array of `width`-value rows by slot.
struct OwnedInput {
    values: Vec<f32>,
    width: usize,
    normalize: bool,
}

impl Input {
    /// The input's own array, when the rows of width `rw` can be written over it: its rows are
    /// no narrower, all of one width (a homogeneous graph), and no one else holds them (the
    /// embedding layer's outputs are kept for the writer).
    fn into_owned(self, nodes: &NodeStore, rw: usize) -> Result<OwnedInput, Input> {
        if nodes.is_typed() {
            return Err(self);
        }
        match self {
            Input::Features { values, normalize, learned: None }
                if rw <= nodes.dim && values.len() == nodes.len() * nodes.dim =>
            {
                Ok(OwnedInput { values, width: nodes.dim, normalize })
            }
            Input::Rows { values, width } if rw <= width && values.len() == nodes.len() * width => {
                match Rc::try_unwrap(values) {
                    Ok(values) => Ok(OwnedInput { values, width, normalize: false }),
                    Err(values) => Err(Input::Rows { values, width }),
                }
            }
            input => Err(input),
        }
    }
}

/// [`transform`] over the input's own array. Row `u`'s output, `rw <= width` values, lies in
/// `[u rw, (u + 1) rw)`, below input row `u + 1`'s start: slots go in ascending order and a
/// batch's inputs are copied out before its outputs are written, so a write only ever covers
/// input rows already read. Rows of nodes the layer does not transform are zeroed at the end;
/// the array is then cut (or grown) to the rows and the `tail`.
fn transform_in_place(cx: &Context, l: usize, slice: &LayerSlice, input: OwnedInput, tail: usize) -> Vec<f32> {
    let (n, rw) = (cx.nodes.len(), slice.row_width());
    let OwnedInput { values: mut rows, width, normalize } = input;
    let slots: Vec<usize> = (0..n).filter(|&u| cx.plan.needs(u, l - 1)).collect();
    let batch_rows = transform_rows(cx.batch_size, width.max(rw));
    for batch in slots.chunks(batch_rows) {
        let mut values = Vec::with_capacity(batch_rows * width);
        for &u in batch {
            gnn::features::push_row(&rows[u * width..(u + 1) * width], normalize, &mut values);
        }
        values.resize(batch_rows * width, 0.0);
        let out = gnn::slice::transform_rows(cx.model, l - 1, values, width, cx.device);
        for (i, &u) in batch.iter().enumerate() {
            rows[u * rw..(u + 1) * rw].copy_from_slice(&out[i * rw..(i + 1) * rw]);
        }
        check_abort();
    }
    rows.resize(n * (rw + tail), 0.0);
    for u in (0..n).filter(|&u| !cx.plan.needs(u, l - 1)) {
        rows[u * rw..(u + 1) * rw].fill(0.0);
    }
    rows.shrink_to_fit();
    rows
}

/// [`transform`] into a fresh array (a typed input, rows wider than the input's, or an input
/// someone else holds too).
fn transform_into_new(cx: &Context, l: usize, slice: &LayerSlice, input: &Input, tail: usize) -> Vec<f32> {
    let (n, rw) = (cx.nodes.len(), slice.row_width());
    let mut rows = vec![0f32; n * (rw + tail)];
    let mut groups = vec![Vec::new(); cx.nodes.widths.len().max(1)];
    for u in (0..n).filter(|&u| cx.plan.needs(u, l - 1)) {
        groups[usize::from(cx.nodes.node_type(u))].push(u);
    }
    for (t, slots) in groups.iter().enumerate() {
        let t = t as u8;
        let width = input.width(cx.nodes, t);
        let batch_rows = transform_rows(cx.batch_size, width.max(rw));
        for batch in slots.chunks(batch_rows) {
            let mut values = Vec::with_capacity(batch_rows * width);
            for &u in batch {
                input.append(cx.nodes, u, &mut values);
            }
            values.resize(batch_rows * width, 0.0);
            let out = if slice.is_typed() {
                gnn::slice::transform_typed_rows(cx.model, cx.spec, l - 1, t, values, batch_rows, cx.device)
            } else {
                gnn::slice::transform_rows(cx.model, l - 1, values, width, cx.device)
            };
            for (i, &u) in batch.iter().enumerate() {
                rows[u * rw..(u + 1) * rw].copy_from_slice(&out[i * rw..(i + 1) * rw]);
            }
            check_abort();
        }
    }
    rows
}

/// Step 2: messages to subscribers and hub rows to reducers. Returns the remote nodes'
/// messages this worker reads (by row - local), and the hub rows it got (by (hub, salt)).
#[allow(clippy::type_complexity)]
fn push(
    worker: &mut Worker,
    cx: &Context,
    l: usize,
    rows: &[f32],
    rw: usize,
    local: &[f32],
    mw: usize,
) -> Result<(Vec<f32>, HashMap<(i64, u32), Vec<f32>>), Error> {
    let remote_rows = Rc::new(RefCell::new(vec![0f32; cx.plan.remote_rows * mw]));
    let hub_rows: Rc<RefCell<HashMap<(i64, u32), Vec<f32>>>> = Rc::default();
    let (sink, hubs_sink) = (remote_rows.clone(), hub_rows.clone());
    let owners = cx.nodes.owners.clone();
    let route = move |p: &Push| match p {
        Push::Message { to, .. } => u64::from(*to),
        Push::Hub { hub, layer, salt, .. } => reducer(&owners, *hub, *layer as usize, *salt),
    };
    let consume = move |p: Push| match p {
        Push::Message { at, row, .. } => {
            let i = at as usize;
            sink.borrow_mut()[i * mw..(i + 1) * mw].copy_from_slice(&row);
        }
        Push::Hub { hub, salt, row, .. } => {
            hubs_sink.borrow_mut().insert((hub, salt), row);
        }
    };
    shuffle(worker, route, consume, |send| {
        for chunk in cx.plan.subscribers[l].chunks(4096) {
            let batch = chunk
                .iter()
                .map(|at| {
                    let s = at.slot as usize;
                    Push::Message { to: at.reader, at: at.row, row: local[s * mw..(s + 1) * mw].to_vec() }
                })
                .collect();
            send(batch);
        }
        let hubs = cx.plan.hubs[l].iter().flat_map(|(&slot, &salts)| {
            let s = slot as usize;
            (0..salts).map(move |salt| Push::Hub {
                hub: cx.nodes.ids[s],
                layer: l as u32,
                salt,
                row: rows[s * rw..(s + 1) * rw].to_vec(),
            })
        });
        send(hubs.collect());
        Ok::<(), Error>(())
    })?;
    Ok((remote_rows.take(), hub_rows.take()))
}

/// Step 3: this worker's runs folded and sent to the owners; returns the merged state of each
/// hub this worker owns, by slot.
fn reduce_hubs(
    worker: &mut Worker,
    cx: &Context,
    l: usize,
    slice: &LayerSlice,
    messages: &Messages,
    hub_rows: &HashMap<(i64, u32), Vec<f32>>,
) -> Result<HashMap<u32, Vec<f32>>, Error> {
    let mut partials = Vec::with_capacity(cx.plan.tasks[l].len());
    for task in &cx.plan.tasks[l] {
        let own = hub_rows
            .get(&(task.hub, task.salt))
            .ok_or_else(|| Error::Internal(format!("no row of hub {} for run {}", task.hub, task.salt)))?;
        let e = cx.nodes.edge_dim;
        let edges = task.rows.iter().enumerate().map(|(i, &row)| {
            let relation = task.relations.get(i).copied().unwrap_or(0);
            Edge {
                row,
                features: &task.features[i * e..i * e + slice.edge_width(relation)],
                relation,
                coef: task.coefs.get(i).copied().unwrap_or(1.0),
            }
        });
        let mut state = slice.empty_state();
        fold(slice, own, edges, messages, &mut state);
        partials.push(Partial { hub: task.hub, salt: task.salt, state });
        check_abort();
    }
    let received: Rc<RefCell<Vec<Partial>>> = Rc::default();
    let sink = received.clone();
    let owners = cx.nodes.owners.clone();
    shuffle(
        worker,
        move |p: &Partial| owners.key(p.hub),
        move |p| sink.borrow_mut().push(p),
        |send| {
            send(partials);
            Ok::<(), Error>(())
        },
    )?;
    let mut by_hub: BTreeMap<(i64, u32), Vec<f32>> = BTreeMap::new();
    for p in received.take() {
        by_hub.insert((p.hub, p.salt), p.state);
    }
    let mut merged: HashMap<u32, Vec<f32>> = HashMap::new();
    // BTreeMap order: each hub's runs in salt order.
    for ((hub, _), state) in by_hub {
        let slot = cx.nodes.slot(hub).ok_or_else(|| Error::Internal(format!("hub {hub} has no owner here")))? as u32;
        slice.merge(merged.entry(slot).or_insert_with(|| slice.empty_state()), &state);
    }
    for (&slot, &salts) in &cx.plan.hubs[l] {
        let got = merged.contains_key(&slot);
        if !got && salts > 0 {
            return Err(Error::Internal(format!("hub {} got no partial states", cx.nodes.ids[slot as usize])));
        }
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_rows_make_smaller_transforms() {
        assert_eq!(transform_rows(4096, 1433), 4096);
        let rows = transform_rows(4096, 100_000);
        assert!(rows < 4096 && rows * 100_000 * 4 <= TRANSFORM_BYTES, "{rows}");
        assert_eq!(transform_rows(4096, usize::MAX / 8), 1);
    }
}
