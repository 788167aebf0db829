//! A k-layer GNN over a batch: input dropout, k message-passing layers with activation and
//! dropout between them, logits for the roots.

use burn::prelude::*;
use burn::tensor::activation::{elu, log_softmax, relu};
use burn::tensor::{Int, TensorData};
use schemas::model::{Activation, ModelKind, ModelSpec};

use crate::aggregate::EdgeTensors;
use crate::batch::Batch;
use crate::kernel::Aggregation;
use crate::layers::{GatLayer, GcnLayer, SageLayer};
use crate::rng::Stream;

pub use schemas::model::ModelSpec as ModelConfig;

#[derive(Module, Debug)]
pub enum Layer {
    Gcn(GcnLayer),
    Sage(SageLayer),
    Gat(GatLayer),
}

#[derive(Module, Debug)]
pub struct Gnn {
    pub layers: Vec<Layer>,
}

/// A batch on a device.
#[derive(Debug, Clone)]
pub struct BatchTensors {
    pub x: Tensor<2>,
    pub layers: Vec<EdgeTensors>,
}

impl BatchTensors {
    pub fn new(batch: &Batch, device: &Device, aggregation: Aggregation) -> Self {
        BatchTensors {
            x: Tensor::from_data(TensorData::new(batch.features.clone(), [batch.rows(), batch.dim]), device),
            layers: batch.layers.iter().map(|e| EdgeTensors::new(e, device, aggregation)).collect(),
        }
    }
}

/// Training randomness: dropout rates and what seeds the masks. Masks depend on (seed, step,
/// root, position in record), never on how records were split into batches or workers.
#[derive(Debug, Clone, Copy)]
pub struct Dropout {
    pub seed: u64,
    pub step: u64,
    pub rate: f32,
    pub attention_rate: f32,
}

impl Gnn {
    pub fn new(spec: &ModelSpec, device: &Device) -> Self {
        let k = spec.layers;
        let layers = (0..k)
            .map(|i| {
                let last = i + 1 == k;
                let seed = [spec.seed, i as u64];
                let width = |i: usize| {
                    if i == 0 {
                        spec.input_dim
                    } else if spec.kind == ModelKind::Gat {
                        spec.hidden * spec.heads
                    } else {
                        spec.hidden
                    }
                };
                let out = if last { spec.classes } else { spec.hidden };
                match spec.kind {
                    ModelKind::Gcn => Layer::Gcn(GcnLayer::new(width(i), out, &seed, device)),
                    ModelKind::Sage => Layer::Sage(SageLayer::new(width(i), out, &seed, device)),
                    ModelKind::Gat => {
                        let heads = if last { spec.output_heads } else { spec.heads };
                        Layer::Gat(GatLayer::new(width(i), out, heads, !last, &seed, device))
                    }
                }
            })
            .collect();
        Gnn { layers }
    }

    /// Logits of the batch's roots, `[records, classes]`. `dropout` is `None` at evaluation.
    pub fn forward(&self, spec: &ModelSpec, batch: &Batch, t: &BatchTensors, dropout: Option<Dropout>) -> Tensor<2> {
        let mut h = t.x.clone();
        for (l, layer) in self.layers.iter().enumerate() {
            let e = &t.layers[l];
            h = h.slice(0..e.rows_in);
            if let Some(d) = dropout {
                h = apply_dropout(h, batch, d, l as u64);
            }
            h = match layer {
                Layer::Gcn(g) => g.forward(h, e),
                Layer::Sage(s) => s.forward(h, e),
                Layer::Gat(g) => {
                    let keep = dropout
                        .filter(|d| d.attention_rate > 0.0)
                        .map(|d| attention_mask(batch, l, g.heads, d, &h.device()));
                    g.forward(h, e, keep)
                }
            };
            if l + 1 < self.layers.len() {
                h = match spec.activation {
                    Activation::Relu => relu(h),
                    Activation::Elu => elu(h, 1.0),
                };
            }
        }
        h.slice(0..batch.roots.len())
    }
}

/// Mean cross-entropy of `logits` against `labels` (rows with a label only), and the number of
/// rows it averaged over.
pub fn cross_entropy(logits: Tensor<2>, labels: &[Option<i64>]) -> (Tensor<1>, usize) {
    let device = logits.device();
    let rows: Vec<i64> = (0..labels.len() as i64).filter(|&i| labels[i as usize].is_some()).collect();
    let n = rows.len();
    let targets: Vec<i64> = labels.iter().flatten().copied().collect();
    let picked = log_softmax(logits, 1).select(0, Tensor::<1, Int>::from_data(TensorData::new(rows, [n]), &device));
    let at_label = picked.gather(1, Tensor::<2, Int>::from_data(TensorData::new(targets, [n, 1]), &device));
    (at_label.sum().neg() / n.max(1) as f32, n)
}

/// Inverted dropout on `h`: each kept value scaled by 1 / (1 - rate).
fn apply_dropout(h: Tensor<2>, batch: &Batch, d: Dropout, layer: u64) -> Tensor<2> {
    if d.rate <= 0.0 {
        return h;
    }
    let [rows, width] = h.dims();
    let scale = 1.0 / (1.0 - d.rate);
    let mut mask = Vec::with_capacity(rows * width);
    for &(root, pos) in &batch.row_keys[..rows] {
        let mut s = Stream::new(&[d.seed, d.step, root as u64, u64::from(pos), layer]);
        mask.extend((0..width).map(|_| if s.unit() < d.rate { 0.0 } else { scale }));
    }
    let device = h.device();
    h * Tensor::<2>::from_data(TensorData::new(mask, [rows, width]), &device)
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
