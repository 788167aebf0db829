//! One worker's passes of an epoch over its [`LocalGraph`], in step with every other worker:
//! the training pass ([`train_pass`]: forward with dropout, the loss of its [`Objective`],
//! backward, the gradient sums) and the evaluation pass ([`last_rows`]: forward without
//! dropout; [`evaluate`] scores a node task's valid and test nodes, `crate::full::link` a
//! link task's pairs).
//!
//! **Forward**, layer `l` (0-based): the input rows are `[own | halo | virtual]`; at layer 0
//! the features, after that the worker's own outputs of layer `l - 1` and the halo's copies of
//! them, pulled from their owners ([`Halo::pull`]), then the split hubs' partials of those rows
//! ([`Hubs::forward`]). The layer runs as on a record batch
//! (`Gnn::train_layer`). In training each layer's input is a fresh leaf and its output is
//! kept, so each layer has its own autodiff graph.
//!
//! **Backward**, from the last layer: layer `l`'s graph runs backward from its output's
//! gradient (the loss at the last layer; `sum(out * g)` before it), which gives the gradient
//! of the layer's parameters and of its input rows. The input rows' gradient splits into the
//! own rows' part, the halo's and the virtual rows'; the virtual rows' part goes back to
//! their runs' reducers, which add it to the rows their partials read ([`Hubs::backward`]),
//! then the halo's part goes back to the rows' owners ([`Halo::push_back`]), and the sum is
//! layer `l - 1`'s output gradient. That is the chain rule
//! over the whole graph: a node's output feeds the layer above through every in-edge it is
//! the source of, on whatever worker that edge's destination lives.
//!
//! **Dropout** is drawn per node, layer and epoch (`full::dropout`), never per worker, so the
//! copies of a node's row are masked alike wherever they are read, as the one row of a
//! full-batch model is; GAT's attention dropout per (destination, place among its in-edges).

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::Gnn;
use gnn::aggregate::EdgeTensors;
use gnn::hetero::GroupTensors;
use gnn::model::{Dropout, Layer, loss, score_values};
use gnn::params;
use gnn::rng::Stream;
use schemas::Split;
use schemas::model::{ModelKind, ModelSpec};
use timely::worker::Worker;

use crate::full::dropout::{FULL_GRAPH, drop_features, row_stream};
use crate::full::halo::Halo;
use crate::full::hubs::Hubs;
use crate::full::link::{self, LinkTask, Scoring};
use crate::full::local::{LocalGraph, TypedFeatures};
use crate::full::pieces::LayerHubs;
use crate::full::sparse::SparseRows;
use crate::full::stale::{LayerCopies, Staleness, Traffic};
use crate::full::wire::Precision;
use crate::phases::{Lap, Phases};
use crate::ps::{Score, Stats};

/// What every pass reads, the same every epoch.
pub struct Context<'a> {
    pub spec: &'a ModelSpec,
    pub local: &'a LocalGraph,
    pub halo: &'a Halo,
    /// The split hubs: their runs' partials are every layer's virtual input rows.
    pub hubs: &'a Hubs,
    /// Layer 0's input: the features, or a typed graph's, projected first.
    pub features: Features<'a>,
    /// The link task's edges and pairs (`None`: a node task).
    pub link: Option<&'a LinkTask>,
    /// Layer 0's input rows by their nonzeros, where they are sparse and layer 0 is a GCN
    /// with no split hub ([`crate::full::sparse`]): its product runs over them.
    pub sparse: Option<&'a SparseRows>,
}

/// Layer 0's input as a worker holds it.
#[derive(Clone, Copy)]
pub enum Features<'a> {
    /// The rows `[own | halo]`, `spec.input_dim` each, as the model reads them.
    Rows(&'a [f32]),
    /// A typed graph's own rows by type: each pass projects them (`Gnn::projections`) at the
    /// owner and pulls the halo's projected rows, as a layer's outputs.
    Typed(&'a TypedFeatures),
}

/// A training pass's results on this worker.
pub struct Trained {
    /// The gradient of the sum of the losses of this worker's labeled training nodes.
    pub grad: Vec<f32>,
    /// Those nodes (the server divides by every worker's total).
    pub count: u64,
    pub stats: Stats,
}

/// How training passes exchange the halo: every row every pass, or with stale copies
/// (`crate::full::stale`), at a precision (`crate::full::wire`), and what crossed.
pub struct Exchange {
    pub staleness: Staleness,
    pub precision: Precision,
    /// Per exchanged layer (the outputs of layers `0..k - 1`), its copies.
    layers: Vec<LayerCopies>,
    /// What this worker sent, over the run's training passes.
    pub traffic: Traffic,
}

impl Exchange {
    pub fn new(staleness: Staleness, precision: Precision, layers: usize) -> Self {
        Exchange {
            staleness,
            precision,
            layers: vec![LayerCopies::default(); layers.saturating_sub(1)],
            traffic: Traffic::default(),
        }
    }

    /// Whether every row crosses every pass (no copy is reused).
    fn every_row(&self) -> bool {
        self.staleness.epochs == 0
    }

    /// The halo's rows of layer `l`'s output (`own_rows`, `width` each).
    fn pull(&mut self, worker: &mut Worker, halo: &Halo, l: usize, own_rows: &[f32], width: usize) -> Vec<f32> {
        let how = (self.staleness, self.precision);
        if self.every_row() {
            self.traffic.count(halo.rows_sent(), halo.rows_sent(), width, self.precision);
            return halo.pull_at(worker, own_rows, width, self.precision);
        }
        halo.pull_stale(worker, &mut self.layers[l], own_rows, width, how, &mut self.traffic)
    }

    /// The halo's gradients of layer `l`'s output back to their owners, added to `own_grads`.
    fn push_back(&mut self, worker: &mut Worker, halo: &Halo, l: usize, grads: &[f32], width: usize, own: &mut [f32]) {
        let how = (self.staleness, self.precision);
        if self.every_row() {
            self.traffic.count(halo.len(), halo.len(), width, self.precision);
            return halo.push_back_at(worker, grads, width, own, self.precision);
        }
        halo.push_back_stale(worker, &mut self.layers[l], grads, width, own, how, &mut self.traffic);
    }
}

/// A layer's input leaf (none at layer 0, whose input is the features), its output, and its
/// split hubs' dropout mask (backward reads it again).
struct Kept {
    input: Option<Tensor<2>>,
    output: Tensor<2>,
    /// The dropout mask of the rows the split hubs' runs read here (`Hubs::mask_rows`).
    hub_mask: Option<Vec<f32>>,
    /// The split hubs' pieces, when they run the layer.
    pieces: Option<LayerHubs>,
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 values")
}

/// A typed graph's own rows projected to `hidden` (`[own, hidden]`), each type by its
/// projection, after dropout on the features (drawn as [`drop_features`] draws them).
fn project(cx: &Context, model: &Gnn, typed: &TypedFeatures, dropout: Option<Dropout>, device: &Device) -> Tensor<2> {
    let mut parts = Vec::new();
    for (t, rows) in typed.groups.rows.iter().enumerate().filter(|(_, rows)| !rows.is_empty()) {
        let width = typed.widths[t];
        let ids: Vec<i64> = rows.iter().map(|&r| cx.local.ids[r as usize]).collect();
        let x = match dropout {
            Some(d) => drop_features(&typed.rows[t], &ids, width, d),
            None => typed.rows[t].clone(),
        };
        let x = Tensor::<2>::from_data(TensorData::new(x, [rows.len(), width]), device);
        parts.push(model.projections[t].forward(x));
    }
    if parts.is_empty() {
        // No own rows: an empty projection, on the autodiff graph as every worker's is (its
        // backward runs in step with theirs).
        let x = Tensor::<2>::zeros([0, typed.widths.first().copied().unwrap_or(0)], device);
        return model.projections[0].forward(x);
    }
    GroupTensors::new(&typed.groups, device).gather(parts)
}

/// Multiplies `values` by the dropout mask of node `id`'s row in layer `layer`'s input.
fn mask_row(d: Dropout, id: i64, layer: usize, values: &mut [f32]) {
    let scale = 1.0 / (1.0 - d.rate);
    let mut s = row_stream(d, id, layer);
    values.iter_mut().for_each(|v| *v *= if s.unit() < d.rate { 0.0 } else { scale });
}

/// The dropout mask of a later layer's input rows, `rows x width` values: the rows of `ids`,
/// then ones (virtual rows, their partials masked where they were summed).
fn mask(ids: &[i64], rows: usize, width: usize, d: Dropout, layer: usize) -> Vec<f32> {
    let mut values = vec![1.0; rows * width];
    for (row, &id) in values.chunks_mut(width.max(1)).zip(ids) {
        mask_row(d, id, layer, row);
    }
    values
}

/// GAT's attention dropout mask, `[edges + own rows, heads]`: the edges', then the self-loops'.
fn attention_mask(local: &LocalGraph, heads: usize, d: Dropout, layer: usize, device: &Device) -> Tensor<2> {
    let own = &local.ids[..local.own()];
    let keys = local.edge_keys.iter().map(|&(dst, j)| (dst, u64::from(j), 0)).chain(own.iter().map(|&id| (id, 0, 1)));
    let values = attention_keep(keys, heads, d, layer);
    let rows = values.len() / heads;
    Tensor::from_data(TensorData::new(values, [rows, heads]), device)
}

/// The attention dropout mask of the looped edges `keys` (destination, place among its
/// in-edges, whether a self-loop), `heads` each: drawn per key, wherever the edge is summed.
fn attention_keep(keys: impl Iterator<Item = (i64, u64, u64)>, heads: usize, d: Dropout, layer: usize) -> Vec<f32> {
    let scale = 1.0 / (1.0 - d.attention_rate);
    let mut values = Vec::with_capacity(keys.size_hint().0 * heads);
    for (dst, j, self_loop) in keys {
        let mut s = Stream::new(&[d.seed, d.step, dst as u64, j, self_loop, layer as u64, FULL_GRAPH]);
        values.extend((0..heads).map(|_| if s.unit() < d.attention_rate { 0.0 } else { scale }));
    }
    values
}

/// Layer `l`'s split hubs whose pieces run the layer (GAT, GINE; `crate::full::pieces`) over
/// its input rows `x` and their dropout `row_mask`; in training leaves, and the exchange counted.
fn layer_pieces(
    worker: &mut Worker,
    cx: &Context,
    model: &Gnn,
    (l, x, width): (usize, &[f32], usize),
    (training, row_mask): (&mut Option<(Dropout, &mut Exchange)>, Option<&[f32]>),
    device: &Device,
) -> LayerHubs {
    let heads = if l + 1 == cx.spec.layers { cx.spec.output_heads } else { cx.spec.heads };
    let dropout = training.as_ref().map(|(d, _)| *d);
    let keep = dropout.filter(|d| d.attention_rate > 0.0 && cx.spec.kind == ModelKind::Gat).map(|d| {
        let keys = cx.hubs.run_edge_keys().map(|(hub, j)| (hub, u64::from(j), 0));
        attention_keep(keys, heads, d, l)
    });
    let pieces = cx.hubs.layer_forward(worker, model, l, (x, width, row_mask), keep, dropout.is_some(), device);
    if let Some((_, exchange)) = training {
        let (sent, asked) = (cx.hubs.rows_sent(), cx.hubs.grads_sent());
        if cx.spec.kind == ModelKind::Gat {
            exchange.traffic.count(asked, asked, heads, Precision::F32);
        }
        exchange.traffic.count(sent, sent, Hubs::part_width(model, l, width), Precision::F32);
    }
    pieces
}

/// Layer `l`'s input rows (`rows`, `width` each) on `device`: in training a leaf that tracks
/// its gradient (after layer 0), the rows after dropout (`row_mask`, from [`mask`]), and GAT's
/// attention mask.
fn layer_input(
    cx: &Context,
    l: usize,
    (rows, width): (Vec<f32>, usize),
    (dropout, row_mask): (Option<Dropout>, Option<Vec<f32>>),
    device: &Device,
) -> (Option<Tensor<2>>, Tensor<2>, Option<Tensor<2>>) {
    let count = rows.len() / width.max(1);
    let x = Tensor::<2>::from_data(TensorData::new(rows, [count, width]), device);
    // A typed graph's layer-0 input is the projection's output: its gradient goes back to the
    // projection, and its features were dropped before it (as a typed record batch's).
    let projected = matches!(cx.features, Features::Typed(_));
    let (leaf, x) = match dropout {
        Some(_) if l > 0 || projected => {
            let leaf = x.require_grad();
            let masked = match row_mask {
                Some(m) => leaf.clone() * Tensor::<2>::from_data(TensorData::new(m, [count, width]), device),
                None => leaf.clone(),
            };
            (Some(leaf), masked)
        }
        _ => (None, x),
    };
    let heads = if l + 1 == cx.spec.layers { cx.spec.output_heads } else { cx.spec.heads };
    let keep = dropout
        .filter(|d| d.attention_rate > 0.0 && cx.spec.kind == ModelKind::Gat)
        .map(|d| attention_mask(cx.local, heads, d, l, device));
    (leaf, x, keep)
}

/// The forward pass: each layer's input leaf (in training) and output, after a typed
/// graph's projection (kept first, its output exchanged as a layer's). In evaluation
/// `training` is `None`: no dropout, and the exact exchange. The pulls' time goes to
/// `phases.exchange_seconds`.
fn forward(
    worker: &mut Worker,
    cx: &Context,
    model: &Gnn,
    edges: &EdgeTensors,
    training: Option<(Dropout, &mut Exchange)>,
    phases: &mut Phases,
) -> Vec<Kept> {
    let dropout = training.as_ref().map(|(d, _)| *d);
    let device = edges.gcn_coef.device();
    let mut pass = Forward { worker, cx, model, training, dropout, phases, lap: Lap::start(), device };
    let mut kept = Vec::with_capacity(cx.spec.layers + 1);
    // Exchanged outputs are numbered from the projection's when there is one.
    let (mut input, mut width, first) = match cx.sparse {
        Some(_) => (Vec::new(), cx.spec.input_dim, 0),
        None => pass.input(&mut kept),
    };
    for l in 0..cx.spec.layers {
        let output = match cx.sparse.filter(|_| l == 0) {
            Some(sparse) => {
                let output = pass.sparse_layer(sparse, edges);
                kept.push(Kept { input: None, output: output.clone(), hub_mask: None, pieces: None });
                output
            }
            None => {
                // Layer 0's features were dropped already; evaluation drops nothing.
                let rows = input.len() / width.max(1) + cx.hubs.virtual_rows();
                let row_mask =
                    dropout.filter(|d| d.rate > 0.0 && l > 0).map(|d| mask(&cx.local.ids, rows, width, d, l));
                let (hub_mask, pieces) = pass.hubs(l, &mut input, width, row_mask.as_deref());
                let (leaf, x, keep) = layer_input(cx, l, (input, width), (dropout, row_mask), &pass.device);
                pass.phases.tensors_seconds += pass.lap.lap();
                let terms = pieces.as_ref().and_then(|p| p.terms.as_ref());
                let output = model.train_layer(cx.spec, l, x, (edges, keep), terms);
                kept.push(Kept { input: leaf, output: output.clone(), hub_mask, pieces });
                output
            }
        };
        if l + 1 == cx.spec.layers {
            pass.phases.forward_seconds += pass.lap.lap();
            break;
        }
        width = output.dims()[1];
        input = values(output);
        pass.phases.forward_seconds += pass.lap.lap();
        pass.pull_halo(first + l, &mut input, width);
    }
    kept
}

/// A forward pass in progress: the worker, the graph and model, the training's dropout and
/// exchange (`None` in evaluation), and where its time goes (`lap` since the last phase).
struct Forward<'a, 'c> {
    worker: &'a mut Worker,
    cx: &'a Context<'c>,
    model: &'a Gnn,
    training: Option<(Dropout, &'a mut Exchange)>,
    dropout: Option<Dropout>,
    phases: &'a mut Phases,
    lap: Lap,
    device: Device,
}

impl Forward<'_, '_> {
    /// Layer 0 of a GCN over sparse features: the product over the nonzeros, after dropout
    /// on them, then the layer's sums (see [`crate::full::sparse`]). It has no input leaf.
    fn sparse_layer(&mut self, sparse: &SparseRows, edges: &EdgeTensors) -> Tensor<2> {
        let Layer::Gcn(gcn) = &self.model.layers[0] else { unreachable!("sparse rows are built for a GCN") };
        let product = sparse.product(gcn.weight.val(), &self.cx.local.ids, self.dropout, &self.device);
        self.model.activate(self.cx.spec, 0, gcn.propagate(product, edges))
    }

    /// Layer 0's input rows (`[own | halo]`), their width and the number of the first layer
    /// output exchanged: the features (dropped in training), or a typed graph's projection,
    /// kept first in `kept` and its output exchanged as output 0.
    fn input(&mut self, kept: &mut Vec<Kept>) -> (Vec<f32>, usize, usize) {
        let (cx, dim) = (self.cx, self.cx.spec.input_dim);
        match cx.features {
            Features::Rows(rows) => match self.dropout {
                Some(d) => (drop_features(rows, &cx.local.ids, dim, d), dim, 0),
                None => (rows.to_vec(), dim, 0),
            },
            Features::Typed(typed) => {
                let projected = project(cx, self.model, typed, self.dropout, &self.device);
                let mut rows = values(projected.clone().detach());
                self.phases.forward_seconds += self.lap.lap();
                self.pull_halo(0, &mut rows, cx.spec.hidden);
                kept.push(Kept { input: None, output: projected, hub_mask: None, pieces: None });
                (rows, cx.spec.hidden, 1)
            }
        }
    }

    /// Appends the halo's rows of exchanged output `n` (`width` wide) to `rows`: through the
    /// training's exchange, or exact in evaluation.
    fn pull_halo(&mut self, n: usize, rows: &mut Vec<f32>, width: usize) {
        let halo = match &mut self.training {
            Some((_, exchange)) => exchange.pull(self.worker, self.cx.halo, n, &rows[..], width),
            None => self.cx.halo.pull(self.worker, &rows[..], width),
        };
        rows.extend(halo);
        self.phases.exchange_seconds += self.lap.lap();
    }

    /// The split hubs' part of layer `l` before its input: their pieces, when they run the
    /// layer; else their runs' partial sums appended to `input` as virtual rows, with the
    /// dropout mask of the rows the runs read (`row_mask`'s). Returns that mask and the pieces.
    fn hubs(
        &mut self,
        l: usize,
        input: &mut Vec<f32>,
        width: usize,
        row_mask: Option<&[f32]>,
    ) -> (Option<Vec<f32>>, Option<LayerHubs>) {
        let cx = self.cx;
        if !cx.hubs.active() {
            return (None, None);
        }
        if cx.hubs.layered() {
            self.phases.tensors_seconds += self.lap.lap();
            let how = (&mut self.training, row_mask);
            let layer = layer_pieces(self.worker, cx, self.model, (l, &input[..], width), how, &self.device);
            let seconds = self.lap.lap();
            self.phases.forward_seconds += layer.seconds;
            self.phases.exchange_seconds += seconds - layer.seconds;
            return (None, Some(layer));
        }
        let hub_mask = row_mask.map(|m| cx.hubs.mask_rows(m, width));
        self.phases.tensors_seconds += self.lap.lap();
        let partials = cx.hubs.forward(self.worker, &input[..], width, hub_mask.as_deref());
        if let Some((_, exchange)) = &mut self.training {
            exchange.traffic.count(cx.hubs.rows_sent(), cx.hubs.rows_sent(), width, Precision::F32);
        }
        input.extend(partials);
        self.phases.exchange_seconds += self.lap.lap();
        (hub_mask, None)
    }
}

/// What the last layer's rows are trained for: the labels of the own nodes, or an epoch's
/// link pairs (`crate::full::link`).
pub enum Objective<'a> {
    Node,
    Link(&'a Scoring),
}

/// The loss of the own labeled training nodes from the last layer's `logits`, as a sum, their
/// count and the pass's stats. A worker with none returns a zero that still runs backward, so
/// its halo gradients (zeros) reach their owners in step with the others.
fn node_loss(cx: &Context, logits: Tensor<2>) -> (Tensor<1>, u64, Stats) {
    let labels = cx.local.labels_in(Split::Train);
    let count = labels.iter().filter(|l| l.is_some()).count();
    let classes = logits.dims()[1];
    let (hits, out_of) = score_values(&values(logits.clone().detach()), classes, &labels);
    let mut stats = Stats::default();
    stats[Split::Train] = Score { hits, out_of };
    if count == 0 {
        return (logits.sum() * 0.0, 0, stats);
    }
    let (mean, n) = loss(logits, &labels);
    stats.loss_sum = f64::from(values(mean.clone().detach())[0]) * n as f64;
    stats.loss_rows = n as u64;
    (mean * n as f32, count as u64, stats)
}

/// The training pass with `model` on an autodiff device: the gradient sums of `objective`'s
/// loss on this worker, the count the server divides them by, and the pass's training loss
/// and score.
#[allow(clippy::too_many_arguments)]
pub fn train_pass(
    worker: &mut Worker,
    cx: &Context,
    model: &Gnn,
    edges: &EdgeTensors,
    dropout: Dropout,
    objective: Objective,
    exchange: &mut Exchange,
    phases: &mut Phases,
) -> Trained {
    let mut kept = forward(worker, cx, model, edges, Some((dropout, &mut *exchange)), phases);
    let mut lap = Lap::start();
    let last = kept.pop().expect("a model has layers");
    let Kept { input: mut leaf, output: last, hub_mask: mut leaf_mask, pieces: mut leaf_pieces } = last;
    let ([own, _], device) = (last.dims(), last.device());
    let (mut surrogate, mut grad, count, stats) = top_loss(worker, cx, model, last, objective);
    phases.forward_seconds += lap.lap();
    loop {
        let grads = surrogate.backward();
        let layer = params::gradients(model, &grads);
        if grad.is_empty() {
            grad = layer;
        } else {
            grad.iter_mut().zip(layer).for_each(|(g, l)| *g += l);
        }
        let mut g = leaf.as_ref().map(|input| {
            let [rows, width] = input.dims();
            input.grad(&grads).map_or_else(|| vec![0.0; rows * width], values)
        });
        phases.backward_seconds += lap.lap();
        if let Some(pieces) = leaf_pieces.take() {
            let computed = hub_pieces_backward(
                worker,
                cx,
                model,
                (pieces, &grads, &device),
                (g.as_deref_mut(), &mut grad),
                exchange,
            );
            let seconds = lap.lap();
            phases.backward_seconds += computed;
            phases.exchange_seconds += seconds - computed;
        }
        let (Some(input), Some(g)) = (leaf, g.as_mut()) else { break };
        let width = input.dims()[1];
        let (g, virtual_grads) = g.split_at_mut((own + cx.halo.len()) * width);
        if cx.hubs.active() && !cx.hubs.layered() {
            cx.hubs.backward(worker, virtual_grads, width, leaf_mask.as_deref(), g);
            exchange.traffic.count(cx.hubs.grads_sent(), cx.hubs.grads_sent(), width, Precision::F32);
        }
        let (own_grads, halo_grads) = g.split_at_mut(own * width);
        exchange.push_back(worker, cx.halo, kept.len() - 1, halo_grads, width, own_grads);
        phases.exchange_seconds += lap.lap();
        let Kept { input: below, output, hub_mask: below_mask, pieces: below_pieces } =
            kept.pop().expect("a layer below");
        let upstream = Tensor::<2>::from_data(TensorData::new(own_grads.to_vec(), [own, width]), &device);
        surrogate = (output * upstream).sum();
        (leaf, leaf_mask, leaf_pieces) = (below, below_mask, below_pieces);
    }
    phases.backward_seconds += lap.lap();
    Trained { grad, count, stats }
}

/// The loss at the last layer's rows, as a surrogate whose gradient is the loss's, with the
/// parameter gradients the objective computed outside the graph (a link task's scorer), the
/// count they are divided by, and the pass's training statistics.
fn top_loss(
    worker: &mut Worker,
    cx: &Context,
    model: &Gnn,
    last: Tensor<2>,
    objective: Objective,
) -> (Tensor<1>, Vec<f32>, u64, Stats) {
    match objective {
        Objective::Node => {
            let (sum, count, stats) = node_loss(cx, last);
            (sum, Vec::new(), count, stats)
        }
        Objective::Link(pairs) => {
            let link = link::train_loss(worker, pairs, model, cx.spec, &last);
            let dims = last.dims();
            let upstream = Tensor::<2>::from_data(TensorData::new(link.upstream, dims), &last.device());
            ((last * upstream).sum(), link.grad, link.count, link.stats)
        }
    }
}

/// A layer's hub pieces backward: the pieces' gradients exchanged with the hubs' owners and
/// added into the input rows' and the parameters' gradients; the seconds spent computing
/// (the rest of the call is exchange).
fn hub_pieces_backward(
    worker: &mut Worker,
    cx: &Context,
    model: &Gnn,
    (pieces, grads, device): (LayerHubs, &burn::tensor::Gradients, &Device),
    into: (Option<&mut [f32]>, &mut [f32]),
    exchange: &mut Exchange,
) -> f64 {
    let back = pieces.grad_values(model);
    let computed = cx.hubs.layer_backward(worker, model, pieces, grads, into, device);
    exchange.traffic.count(cx.hubs.grads_sent(), cx.hubs.grads_sent(), back, Precision::F32);
    computed
}

/// The evaluation pass with `model` on a device without autodiff: this worker's rows of the
/// last layer, and their width.
pub fn last_rows(worker: &mut Worker, cx: &Context, model: &Gnn, edges: &EdgeTensors) -> (Vec<f32>, usize) {
    let mut phases = Phases::default();
    let last = forward(worker, cx, model, edges, None, &mut phases).pop().expect("a model has layers").output;
    let width = last.dims()[1];
    (values(last), width)
}

/// The evaluation pass of a node task: this worker's valid and test score counts, and its own
/// rows' logits.
pub fn evaluate(worker: &mut Worker, cx: &Context, model: &Gnn, edges: &EdgeTensors) -> (Stats, Vec<f32>) {
    let (logits, width) = last_rows(worker, cx, model, edges);
    let mut stats = Stats::default();
    for split in [Split::Valid, Split::Test] {
        let (hits, out_of) = score_values(&logits, width, &cx.local.labels_in(split));
        stats[split] = Score { hits, out_of };
    }
    (stats, logits)
}
