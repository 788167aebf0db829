//! A k-layer GNN over a batch: input dropout, k message-passing layers with activation and
//! dropout between them, logits for the roots.

use burn::prelude::*;
use burn::tensor::activation::{elu, log_softmax, relu};
use burn::tensor::{Int, TensorData};
use schemas::Label;
use schemas::model::{Activation, ModelKind, ModelSpec};
use schemas::task::Decoder;

use crate::aggregate::EdgeTensors;
use crate::batch::{Batch, TypedInputs};
use crate::control_variate::ControlVariate;
use crate::decoder::MlpDecoder;
use crate::hetero::{GroupTensors, HeteroSageLayer, Projection, RgcnLayer};
use crate::hub::{HubTerms, PieceEdges, PieceInputs, PieceParts};
use crate::kernel::Aggregation;
use crate::layers::value;
use crate::layers::{AttentionMask, GatLayer, GcnLayer, GineLayer, SageLayer};
use crate::rng::Stream;

/// The seed tag of a typed model's input projections (`[seed, PROJECTION, type]`; layer `i`'s
/// seed is `[seed, i]`).
const PROJECTION: u64 = 1 << 32;

#[derive(Module, Debug)]
pub enum Layer {
    Gcn(GcnLayer),
    Sage(SageLayer),
    Gat(GatLayer),
    Gine(GineLayer),
    Rgcn(RgcnLayer),
    HeteroSage(HeteroSageLayer),
}

#[derive(Module, Debug)]
pub struct Gnn {
    /// A typed model's input projection per node type (see [`crate::hetero`]); empty for a
    /// homogeneous model.
    pub projections: Vec<Projection>,
    pub layers: Vec<Layer>,
    /// A link model's `mlp` decoder (see [`crate::decoder`]); `None` for node models and the
    /// parameter-free `dot`.
    pub decoder: Option<MlpDecoder>,
}

/// A batch on a device.
#[derive(Debug, Clone)]
pub struct BatchTensors {
    pub input: Input,
    pub layers: Vec<EdgeTensors>,
    /// The input holds its rows after dropout already ([`BatchTensors::with_input_dropout`]).
    pub input_dropped: bool,
    /// A model with learned embeddings (`ModelSpec::learned_embedding_dim`): each input row's
    /// embedding, `[input rows, learned_embedding_dim]`, in input-row order (the trainer pulls
    /// them from the parameter server and marks them to take a gradient). Layer 0 reads the
    /// features, then these columns; input dropout masks only the features (the rows are
    /// parameters, regularized by their optimizer, as a torch `Embedding` input is not dropped).
    pub learned: Option<Tensor<2>>,
}

/// A batch's input rows on a device.
#[derive(Debug, Clone)]
pub enum Input {
    /// `[input rows, dim]`.
    Rows(Tensor<2>),
    /// A typed batch: per node type, its rows' features (`None` for a type without rows), and
    /// where those rows go.
    Typed { features: Vec<Option<Tensor<2>>>, groups: GroupTensors },
}

impl BatchTensors {
    pub fn new(batch: &Batch, device: &Device, aggregation: Aggregation) -> Self {
        let input = match &batch.typed {
            Some(typed) => typed_input(typed, typed.features.clone(), device),
            None => rows_input(batch, batch.features.clone(), device),
        };
        Self::with_input(batch, input, device, aggregation, false)
    }

    /// The batch with its input dropout applied on the host: the same masks as the forward
    /// pass draws (see [`input_dropout`]), drawn only where a feature is not zero (a zero stays
    /// zero under any mask), which for sparse features such as Cora's bag of words is 1 draw
    /// in 80. The input needs no gradient, so masking before the upload changes nothing else.
    pub fn with_input_dropout(batch: &Batch, d: Dropout, device: &Device, aggregation: Aggregation) -> Self {
        let input = match &batch.typed {
            Some(typed) => typed_input(typed, typed_input_dropout(batch, typed, d), device),
            None => rows_input(batch, input_dropout(batch, d), device),
        };
        Self::with_input(batch, input, device, aggregation, d.rate > 0.0)
    }

    fn with_input(batch: &Batch, input: Input, device: &Device, aggregation: Aggregation, dropped: bool) -> Self {
        BatchTensors {
            input,
            layers: batch.layers.iter().map(|e| EdgeTensors::new(e, device, aggregation)).collect(),
            input_dropped: dropped,
            learned: None,
        }
    }

    /// The batch's learned embedding rows, `rows` row-major, `width` a row (see
    /// [`BatchTensors::learned`]); on an autodiff device they take a gradient.
    pub fn with_learned(mut self, rows: Vec<f32>, width: usize, device: &Device) -> Self {
        let n = rows.len() / width.max(1);
        let tensor = Tensor::<2>::from_data(TensorData::new(rows, [n, width]), device);
        self.learned = Some(if device.is_autodiff() { tensor.require_grad() } else { tensor });
        self
    }
}

fn rows_input(batch: &Batch, x: Vec<f32>, device: &Device) -> Input {
    Input::Rows(Tensor::from_data(TensorData::new(x, [batch.input_rows(), batch.dim]), device))
}

/// Per type, its rows' features on the device: `None` for a type without rows or features.
fn typed_input(typed: &TypedInputs, features: Vec<Vec<f32>>, device: &Device) -> Input {
    let features = features
        .into_iter()
        .zip(&typed.widths)
        .zip(&typed.groups.rows)
        .map(|((x, &width), rows)| {
            let rows = rows.len();
            (rows > 0 && width > 0).then(|| Tensor::from_data(TensorData::new(x, [rows, width]), device))
        })
        .collect();
    Input::Typed { features, groups: GroupTensors::new(&typed.groups, device) }
}

/// Training randomness: dropout rates and what seeds the masks. Masks depend on (seed, step,
/// node) for the input and (seed, step, root, position in record) after it, never on how
/// records were split into batches or workers.
#[derive(Debug, Clone, Copy)]
pub struct Dropout {
    pub seed: u64,
    pub step: u64,
    pub rate: f32,
    pub attention_rate: f32,
}

impl Gnn {
    /// The model of `spec` with its initial weights. Its layers read `spec.edge_dim` edge
    /// features (GCN's none); a typed model's, each relation's `edge_dim` of its types.
    pub fn new(spec: &ModelSpec, device: &Device) -> Self {
        let k = spec.layers;
        let edge_dim = spec.edge_dim;
        let types = spec.types.as_ref().map_or(0, |t| t.node_types.len());
        // Per relation, the width of the edge features the typed layers read.
        let edge_dims: Vec<usize> = spec.types.iter().flat_map(|t| &t.relations).map(|r| r.edge_dim).collect();
        let layers = (0..k)
            .map(|i| {
                let last = i + 1 == k;
                let seed = [spec.seed, i as u64];
                let input = spec.layer_input(i);
                let out = if last { spec.classes } else { spec.hidden };
                match spec.kind {
                    ModelKind::Gcn => Layer::Gcn(GcnLayer::new(input, out, &seed, device)),
                    ModelKind::Sage if spec.types.is_some() => {
                        Layer::HeteroSage(HeteroSageLayer::new(input, out, types, &edge_dims, &seed, device))
                    }
                    ModelKind::Sage => Layer::Sage(SageLayer::new(input, out, edge_dim, &seed, device)),
                    ModelKind::Gat => {
                        let heads = if last { spec.output_heads } else { spec.heads };
                        Layer::Gat(GatLayer::new(input, out, heads, !last, edge_dim, &seed, device))
                    }
                    ModelKind::Gine => {
                        Layer::Gine(GineLayer::new(input, spec.mlp_width(i), out, edge_dim, &seed, device))
                    }
                    ModelKind::Rgcn => Layer::Rgcn(RgcnLayer::new(input, out, &edge_dims, spec.bases, &seed, device)),
                }
            })
            .collect();
        let projections = spec.types.iter().flat_map(|t| &t.node_types).enumerate();
        let projections = projections
            .map(|(t, n)| Projection::new(n.input_width(), spec.hidden, &[spec.seed, PROJECTION, t as u64], device));
        let decoder = (spec.decoder == Some(Decoder::Mlp)).then(|| MlpDecoder::new(spec.classes, spec.seed, device));
        Gnn { projections: projections.collect(), layers, decoder }
    }

    /// A typed batch's input rows projected to `hidden`, in row order: each type's projection
    /// reads its rows' features, then their learned rows where the type has them (`learned`,
    /// in [`Batch::learned_rows`] order).
    fn project(&self, batch: &Batch, t: &BatchTensors, dropout: Option<Dropout>) -> Tensor<2> {
        let (Input::Typed { features, groups }, Some(typed)) = (&t.input, &batch.typed) else {
            panic!("a typed batch projected: its input is not typed")
        };
        let mut learned_at = 0;
        let mut parts = Vec::new();
        for (ty, (x, p)) in features.iter().zip(&self.projections).enumerate() {
            let rows = &typed.groups.rows[ty];
            if rows.is_empty() {
                continue;
            }
            let mut inputs: Vec<Tensor<2>> = x.iter().cloned().collect();
            if let Some(d) = dropout {
                inputs = inputs.into_iter().map(|x| apply_dropout_at(x, batch, d, 0, |i| rows[i] as usize)).collect();
            }
            if let Some(learned) = t.learned.as_ref().filter(|_| typed.learned[ty]) {
                inputs.push(learned.clone().slice(learned_at..learned_at + rows.len()));
                learned_at += rows.len();
            }
            parts.push(p.forward(Tensor::cat(inputs, 1)));
        }
        groups.gather(parts)
    }

    /// Layer `l` (0-based) on its own, in evaluation mode: `h` holds the layer's input rows
    /// (`e.rows_in`), the result its output rows (`e.rows_out`), after the activation unless it
    /// is the last layer (whose outputs are the logits). GraphInfer runs the model this way,
    /// one round per layer; [`Gnn::forward`] is these layers in sequence.
    pub fn forward_layer(&self, spec: &ModelSpec, l: usize, h: Tensor<2>, e: &EdgeTensors) -> Tensor<2> {
        self.train_layer(spec, l, h, (e, None), None)
    }

    /// [`Gnn::forward_layer`] in training: `keep` is GAT's attention dropout mask,
    /// `[edges + self-loops, heads]` (see [`crate::layers::GatLayer::forward`]); dropout on `h`
    /// is the caller's. Full-graph training runs the model this way, one layer a round.
    pub fn train_layer(
        &self,
        spec: &ModelSpec,
        l: usize,
        h: Tensor<2>,
        (e, keep): (&EdgeTensors, AttentionMask),
        hubs: Option<&HubTerms>,
    ) -> Tensor<2> {
        let h = match &self.layers[l] {
            Layer::Gcn(g) => g.forward(h, e),
            Layer::Sage(s) => s.forward(h, e),
            Layer::Gat(g) => g.forward(h, e, keep, hubs),
            Layer::Gine(g) => g.forward(h, e, hubs),
            Layer::Rgcn(r) => r.forward(h, e),
            Layer::HeteroSage(s) => s.forward(h, e),
        };
        self.activate(spec, l, h)
    }

    /// The activation after layer `l`: the model's, except after the last layer.
    pub fn activate(&self, spec: &ModelSpec, l: usize, h: Tensor<2>) -> Tensor<2> {
        if l + 1 == self.layers.len() {
            return h;
        }
        match spec.activation {
            Activation::Relu => relu(h),
            Activation::Elu => elu(h, 1.0),
        }
    }

    /// Layer 0's input rows: the features (or a typed batch's projections), then the learned
    /// embedding's columns where the model has them, the features masked by `dropout` unless
    /// the host did it (see [`BatchTensors::learned`]).
    fn input(&self, batch: &Batch, t: &BatchTensors, dropout: Option<Dropout>) -> Tensor<2> {
        let x = match &t.input {
            Input::Rows(x) => x.clone(),
            // The features masked before their projection when the learned rows join them.
            Input::Typed { .. } => {
                return self.project(batch, t, dropout.filter(|_| !t.input_dropped && t.learned.is_some()));
            }
        };
        let Some(learned) = &t.learned else { return x };
        if batch.dim == 0 {
            return learned.clone();
        }
        let x = match dropout.filter(|_| !t.input_dropped) {
            Some(d) => apply_dropout(x, batch, d, 0),
            None => x,
        };
        Tensor::cat(vec![x, learned.clone()], 1)
    }

    /// Logits of the batch's roots, `[records, classes]`. `dropout` is `None` at evaluation.
    pub fn forward(&self, spec: &ModelSpec, batch: &Batch, t: &BatchTensors, dropout: Option<Dropout>) -> Tensor<2> {
        self.forward_estimating(spec, batch, t, dropout, (None, None))
    }

    /// [`Gnn::forward`] with the last layer's sum over in-edges estimated with control variates
    /// (`cv`: see [`crate::control_variate`]) where given; the last layer must then be GCN's or
    /// GraphSAGE's.
    /// In training, with `clean` (the batch's tensors without dropout), the estimate is VR-GCN's
    /// CVD: the dropout-free rows carry the control variate, their dropout noise is summed apart.
    pub fn forward_estimating(
        &self,
        spec: &ModelSpec,
        batch: &Batch,
        t: &BatchTensors,
        dropout: Option<Dropout>,
        (cv, clean): (Option<&ControlVariate>, Option<&BatchTensors>),
    ) -> Tensor<2> {
        let last = self.layers.len() - 1;
        let h = self.rows_into(spec, batch, t, dropout, last);
        let e = &t.layers[last];
        let h = match (cv, &self.layers[last]) {
            (None, layer) => {
                let keep = self.attention_keep(layer, batch, last, dropout, &h.device());
                self.train_layer(spec, last, h, (e, keep), None)
            }
            (Some(cv), layer) => {
                let clean = clean.filter(|_| dropout.is_some());
                let mean = clean.map(|clean| self.rows_into(spec, batch, clean, None, last));
                match layer {
                    Layer::Gcn(g) => cv.gcn(g, h, mean, e),
                    Layer::Sage(s) => cv.sage(s, h, mean, e),
                    _ => panic!("control variates estimate a GCN or GraphSAGE layer"),
                }
            }
        };
        h.slice(0..batch.roots.len())
    }

    /// The input rows of layer `upto` (after its dropout): the layers before it run in training
    /// mode with `dropout` (`None`: evaluation mode).
    fn rows_into(
        &self,
        spec: &ModelSpec,
        batch: &Batch,
        t: &BatchTensors,
        dropout: Option<Dropout>,
        upto: usize,
    ) -> Tensor<2> {
        let mut h = self.input(batch, t, dropout);
        // Layer 0's input is masked already: by the host, or with the learned columns above.
        let input_done = t.input_dropped || t.learned.is_some();
        for (l, layer) in self.layers.iter().enumerate().take(upto + 1) {
            let e = &t.layers[l];
            h = h.slice(0..e.rows_in);
            if let Some(d) = dropout.filter(|_| l > 0 || !input_done) {
                h = apply_dropout(h, batch, d, l as u64);
            }
            if l == upto {
                break;
            }
            let keep = self.attention_keep(layer, batch, l, dropout, &h.device());
            h = self.train_layer(spec, l, h, (e, keep), None);
        }
        h
    }

    /// GAT's attention dropout mask of layer `l`, in training with an attention rate.
    fn attention_keep(
        &self,
        layer: &Layer,
        batch: &Batch,
        l: usize,
        dropout: Option<Dropout>,
        device: &Device,
    ) -> AttentionMask {
        match layer {
            Layer::Gat(g) => {
                dropout.filter(|d| d.attention_rate > 0.0).map(|d| attention_mask(batch, l, g.heads, d, device))
            }
            _ => None,
        }
    }
}

/// The mean loss over the rows with a label, and how many rows that is: cross-entropy for class
/// labels; binary cross-entropy with logits, averaged over every target, for multi-hot targets.
pub fn loss(logits: Tensor<2>, labels: &[Option<Label>]) -> (Tensor<1>, usize) {
    let device = logits.device();
    let rows: Vec<i64> = (0..labels.len() as i64).filter(|&i| labels[i as usize].is_some()).collect();
    let n = rows.len();
    let picked = logits.select(0, Tensor::<1, Int>::from_data(TensorData::new(rows, [n]), &device));
    let labeled: Vec<&Label> = labels.iter().flatten().collect();
    if let Some(Label::Targets(first)) = labeled.first() {
        let width = first.len();
        let targets: Vec<f32> = labeled.iter().flat_map(|l| l.targets().unwrap_or(&[]).iter().copied()).collect();
        let y = Tensor::<2>::from_data(TensorData::new(targets, [n, width]), &device);
        // max(x, 0) - x y + log(1 + exp(-|x|)): the stable form of -[y log s(x) + (1-y) log(1-s(x))].
        let x = picked;
        let elementwise = x.clone().clamp_min(0.0) - x.clone() * y + (x.abs().neg().exp() + 1.0).log();
        return (elementwise.mean(), n);
    }
    let classes: Vec<i64> = labeled.iter().filter_map(|l| l.class()).collect();
    let at_label =
        log_softmax(picked, 1).gather(1, Tensor::<2, Int>::from_data(TensorData::new(classes, [n, 1]), &device));
    (at_label.sum().neg() / n.max(1) as f32, n)
}

/// Whether a multi-hot target is predicted from its logit: its sigmoid passes one half. The
/// trainer's micro-F1 and GraphInfer's `prediction` column both read it.
pub fn predicts_target(logit: f32) -> bool {
    logit > 0.0
}

/// Score counts `(hits, out of)` over the rows with a label, additive across batches and workers:
/// for classes, (correct, labeled): their ratio is the accuracy; for multi-hot targets with
/// predictions [`predicts_target`], (2 TP, 2 TP + FP + FN): their ratio is the micro-F1.
pub fn score(logits: Tensor<2>, labels: &[Option<Label>]) -> (u64, u64) {
    let [_, width] = logits.dims();
    let values: Vec<f32> = logits.into_data().iter::<f32>().collect();
    score_values(&values, width, labels)
}

/// [`score`] of logits read back already: row-major, `width` a row.
pub fn score_values(values: &[f32], width: usize, labels: &[Option<Label>]) -> (u64, u64) {
    let rows = values.len() / width.max(1);
    if labels.iter().flatten().next().is_some_and(|l| l.targets().is_some()) {
        let (mut tp, mut fp, mut fn_) = (0u64, 0u64, 0u64);
        for (row, label) in labels.iter().enumerate().take(rows) {
            let Some(targets) = label.as_ref().and_then(Label::targets) else { continue };
            for (x, &y) in values[row * width..(row + 1) * width].iter().zip(targets) {
                match (predicts_target(*x), y >= 0.5) {
                    (true, true) => tp += 1,
                    (true, false) => fp += 1,
                    (false, true) => fn_ += 1,
                    (false, false) => {}
                }
            }
        }
        return (2 * tp, 2 * tp + fp + fn_);
    }
    // The first largest logit, as argmax picks it.
    let predicted = values.chunks(width.max(1)).map(|row| {
        let best = row.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
        best.0 as i64
    });
    let labeled = labels.iter().filter(|l| l.is_some()).count() as u64;
    let correct = predicted.zip(labels).filter(|(p, l)| l.as_ref().and_then(Label::class) == Some(*p)).count();
    (correct as u64, labeled)
}

/// The dropout stream of row `row` of layer `layer`'s input. Layer 1's input rows are nodes:
/// one mask per node and step, as a full-batch GCN draws it, so a batch may keep a node's rows
/// once. Later layers' rows are per record: (root, position in record).
fn row_stream(batch: &Batch, d: Dropout, layer: u64, row: usize) -> Stream {
    if layer == 0 {
        let id = batch.input_ids[row] as u64;
        match &batch.typed {
            // A typed node is its type and id: the same id in two types is two nodes.
            Some(typed) => Stream::new(&[d.seed, d.step, id, u64::MAX, u64::from(typed.types[row])]),
            None => Stream::new(&[d.seed, d.step, id, u64::MAX]),
        }
    } else {
        let (root, pos) = batch.row_keys[row];
        Stream::new(&[d.seed, d.step, root as u64, u64::from(pos), layer])
    }
}

/// Inverted dropout on `h`: each kept value scaled by 1 / (1 - rate).
fn apply_dropout(h: Tensor<2>, batch: &Batch, d: Dropout, layer: u64) -> Tensor<2> {
    apply_dropout_at(h, batch, d, layer, |row| row)
}

/// [`apply_dropout`] on rows of `h` that are the batch's rows `row(0), row(1), ...`.
fn apply_dropout_at(
    h: Tensor<2>,
    batch: &Batch,
    d: Dropout,
    layer: u64,
    row: impl Fn(usize) -> usize + Sync,
) -> Tensor<2> {
    if d.rate <= 0.0 {
        return h;
    }
    let [rows, width] = h.dims();
    let scale = 1.0 / (1.0 - d.rate);
    let mut mask = vec![0.0; rows * width];
    crate::rows::for_each_row(&mut mask, width, |i, values| {
        let mut s = row_stream(batch, d, layer, row(i));
        values.iter_mut().for_each(|v| *v = if s.unit() < d.rate { 0.0 } else { scale });
    });
    let device = h.device();
    h * Tensor::<2>::from_data(TensorData::new(mask, [rows, width]), &device)
}

/// The batch's input rows after layer 1's dropout: what [`apply_dropout`] makes of them, with
/// the mask drawn only at values that are not zero.
pub fn input_dropout(batch: &Batch, d: Dropout) -> Vec<f32> {
    let mut x = batch.features.clone();
    if d.rate > 0.0 && batch.dim > 0 {
        crate::rows::for_each_row(&mut x, batch.dim, |row, values| drop_row(batch, d, row, values));
    }
    x
}

/// [`input_dropout`] for a typed batch: per node type, its rows' features after dropout.
pub fn typed_input_dropout(batch: &Batch, typed: &TypedInputs, d: Dropout) -> Vec<Vec<f32>> {
    let mut features = typed.features.clone();
    if d.rate <= 0.0 {
        return features;
    }
    let featured = features.iter_mut().zip(&typed.groups.rows).zip(&typed.widths).filter(|(_, w)| **w > 0);
    for ((x, rows), &width) in featured {
        for (values, &row) in x.chunks_mut(width).zip(rows) {
            drop_row(batch, d, row as usize, values);
        }
    }
    features
}

/// Input row `row`'s values after dropout, in place.
fn drop_row(batch: &Batch, d: Dropout, row: usize, values: &mut [f32]) {
    let scale = 1.0 / (1.0 - d.rate);
    let s = row_stream(batch, d, 0, row);
    for (j, v) in values.iter_mut().enumerate().filter(|(_, v)| **v != 0.0) {
        // Without a branch: keeps and drops alternate at random, which a branch mispredicts.
        let kept = f32::from(u8::from(s.unit_at(j as u64) >= d.rate));
        *v *= kept * scale;
    }
}

/// GAT's attention dropout mask, `[edges + self-loops, heads]`, keyed by each edge's place in
/// its record (self-loops by their row).
fn attention_mask(batch: &Batch, layer: usize, heads: usize, d: Dropout, device: &Device) -> Tensor<2> {
    let e = &batch.layers[layer];
    let scale = 1.0 / (1.0 - d.attention_rate);
    let keys = e
        .edge_keys
        .iter()
        .map(|&(root, j)| (root as u64, u64::from(j), 0u64))
        .chain(batch.row_keys[..e.rows_out].iter().map(|&(root, pos)| (root as u64, u64::from(pos), 1u64)));
    let mut mask = Vec::with_capacity((e.src.len() + e.rows_out) * heads);
    for (root, j, self_loop) in keys {
        let mut s = Stream::new(&[d.seed, d.step, root, j, self_loop, layer as u64, 0xa77e]);
        mask.extend((0..heads).map(|_| if s.unit() < d.attention_rate { 0.0 } else { scale }));
    }
    let rows = mask.len() / heads;
    Tensor::from_data(TensorData::new(mask, [rows, heads]), device)
}

impl Gnn {
    /// GAT layer `l`'s destination scores of the rows `x` (`[rows, in]`, the hubs' own input
    /// rows): `[rows, heads]`, a constant (what a piece's logits read).
    pub fn destination_scores(&self, l: usize, x: Tensor<2>) -> Tensor<2> {
        let Layer::Gat(g) = &self.layers[l] else { panic!("destination scores of a GAT layer") };
        let rows = x.dims()[0];
        let z = x.matmul(value(&g.weight, false)).reshape([rows, g.heads, g.out]);
        (z * value(&g.att_dst, false).unsqueeze::<3>()).sum_dim(2).reshape([rows, g.heads])
    }

    /// Layer `l`'s parts of the pieces `e` over their source rows `x` (after dropout), as
    /// constants: GAT's with the hubs' destination scores `score_dst` (`[pieces, heads]`) and its
    /// attention dropout `keep` (`[edges, heads]`), on the host.
    pub fn piece_parts(&self, l: usize, x: Tensor<2>, e: &PieceEdges, (score_dst, keep): PieceInputs) -> PieceParts {
        match &self.layers[l] {
            Layer::Gine(g) => PieceParts::Sum(g.piece_sums(x, e, false)),
            Layer::Gat(g) => PieceParts::Softmax(g.piece_softmax(x, e, (score_dst.expect("a hub's score"), keep))),
            _ => panic!("pieces of a GAT or GINE layer"),
        }
    }

    /// A scalar whose gradient (on an autodiff device) is that of the weights of layer `l` and
    /// of the rows `x` (a leaf) through the parts of the pieces `e`, given the parts' gradients
    /// `grads` (per piece: GINE's sum's; GAT's `S`'s then `Z`'s).
    pub fn piece_surrogate(
        &self,
        l: usize,
        x: Tensor<2>,
        e: &PieceEdges,
        inputs: PieceInputs,
        grads: &[f32],
    ) -> Tensor<1> {
        match &self.layers[l] {
            Layer::Gine(g) => {
                let sums = g.piece_sums(x, e, true);
                let [pieces, width] = sums.dims();
                let g = Tensor::<2>::from_data(TensorData::new(grads.to_vec(), [pieces, width]), &sums.device());
                (sums * g).sum()
            }
            Layer::Gat(g) => g.piece_surrogate(x, e, (inputs.0.expect("a hub's score"), inputs.1), grads),
            _ => panic!("pieces of a GAT or GINE layer"),
        }
    }
}
