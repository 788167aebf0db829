//! The model sliced by layer, for GraphInfer: each layer of a trained [`Gnn`] as three steps
//! that run where the data is, instead of one forward pass over a record.
//!
//! 1. **transform** (on the device, batched): every node's row of the layer's input becomes its
//!    *transformed row* by the layer's own weights ([`Gnn::transform`]): `x W` for GCN,
//!    `[x W_neigh | x W_self]` for GraphSAGE, `[z | a_src . z | a_dst . z]` with `z = x W` for GAT.
//! 2. **aggregate** (on the host, per destination): the *message* of each sampled in-neighbor
//!    ([`LayerSlice::message`]) folds into a *state* ([`LayerSlice::fold`]); states of parts of
//!    a node's in-edges merge ([`LayerSlice::merge`]). Sums and means merge by adding; GAT's
//!    softmax merges through a running maximum and a rescaled sum (online softmax), so a hub's
//!    in-edges can be split over reducers and merged in a fixed order.
//! 3. **finish** (on the host, per node): the node's own transformed row, its degree and the
//!    merged state give the layer's output, with the bias and the activation
//!    ([`LayerSlice::finish`]).
//!
//! These are the layers of `layers.rs` rearranged: GCN's coefficient `1 / sqrt((d_u + 1)(d_v + 1))`
//! factors into a source part (in the message) and a destination part (in finish); a mean is
//! a sum and a count; GAT's softmax over in-edges plus the self-loop is the online softmax over
//! the messages, then the self-loop. The tests below check every model against
//! [`Gnn::forward_layer`], and a split-and-merged state against the unsplit one.

use burn::prelude::*;
use burn::tensor::TensorData;
use schemas::model::{Activation, ModelSpec};

use crate::model::{Gnn, Layer};

/// How a layer aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Symmetric-normalized sum with a self-loop.
    Gcn,
    /// Own row plus the mean of the in-neighbors'.
    Sage,
    /// Attention: softmax over in-edges and a self-loop, per head; heads concatenated or averaged.
    Gat { heads: usize, concat: bool },
}

/// One layer of a trained model, sliced (see the module doc). Host copies of the small
/// parameters (bias, nothing else: attention vectors are applied in [`Gnn::transform`]).
#[derive(Debug, Clone)]
pub struct LayerSlice {
    rule: Rule,
    /// Width of `z` (per head for GAT).
    out: usize,
    bias: Vec<f32>,
    /// `None` for the last layer, whose outputs are the logits.
    activation: Option<Activation>,
}

impl Gnn {
    /// Layer `l`'s slice.
    pub fn slice(&self, spec: &ModelSpec, l: usize) -> LayerSlice {
        let host = |t: Tensor<1>| t.into_data().iter::<f32>().collect::<Vec<f32>>();
        let (rule, out, bias) = match &self.layers[l] {
            Layer::Gcn(g) => (Rule::Gcn, g.weight.val().dims()[1], host(g.bias.val())),
            Layer::Sage(s) => (Rule::Sage, s.self_weight.val().dims()[1], host(s.bias.val())),
            Layer::Gat(g) => (Rule::Gat { heads: g.heads, concat: g.concat }, g.out, host(g.bias.val())),
        };
        let last = l + 1 == self.layers.len();
        LayerSlice { rule, out, bias, activation: (!last).then_some(spec.activation) }
    }

    /// Layer `l`'s transform of the input rows `h` (`[rows, in]`): `[rows, slice.row_width()]`.
    /// Each row's result depends only on that row (and on the number of rows: callers that
    /// need identical bits whatever the batch pad their batches to one size).
    pub fn transform(&self, l: usize, h: Tensor<2>) -> Tensor<2> {
        match &self.layers[l] {
            Layer::Gcn(g) => h.matmul(g.weight.val()),
            Layer::Sage(s) => {
                Tensor::cat(vec![h.clone().matmul(s.neighbor_weight.val()), h.matmul(s.self_weight.val())], 1)
            }
            Layer::Gat(g) => {
                let z = h.matmul(g.weight.val());
                let (rows, heads, out) = (z.dims()[0], g.heads, g.out);
                let per_head = z.clone().reshape([rows, heads, out]);
                let score = |a: Tensor<2>| (per_head.clone() * a.unsqueeze::<3>()).sum_dim(2).reshape([rows, heads]);
                let (src, dst) = (score(g.att_src.val()), score(g.att_dst.val()));
                Tensor::cat(vec![z, src, dst], 1)
            }
        }
    }
}

impl LayerSlice {
    /// Width of a transformed row.
    pub fn row_width(&self) -> usize {
        match self.rule {
            Rule::Gcn => self.out,
            Rule::Sage => 2 * self.out,
            Rule::Gat { heads, .. } => heads * self.out + 2 * heads,
        }
    }

    /// Width of a message (what crosses to a destination's aggregator).
    pub fn message_width(&self) -> usize {
        match self.rule {
            Rule::Gcn | Rule::Sage => self.out,
            Rule::Gat { heads, .. } => heads * self.out + heads,
        }
    }

    /// Width of an aggregation state.
    pub fn state_width(&self) -> usize {
        match self.rule {
            Rule::Gcn | Rule::Sage => self.out + 1,
            Rule::Gat { heads, .. } => heads * (self.out + 2),
        }
    }

    /// Width of the layer's output.
    pub fn output_width(&self) -> usize {
        self.bias.len()
    }

    /// The message a node with transformed row `row` sends along its in-edges of this layer;
    /// `degree` is its in-degree as the layer counts it (`schemas::layers::Layers::degree`).
    pub fn message(&self, row: &[f32], degree: f32, out: &mut [f32]) {
        let width = self.message_width();
        out.copy_from_slice(&row[..width]);
        if self.rule == Rule::Gcn {
            let c = gcn_factor(degree);
            out.iter_mut().for_each(|v| *v *= c);
        }
    }

    /// A state that holds no message.
    pub fn empty_state(&self) -> Vec<f32> {
        let mut state = vec![0.0; self.state_width()];
        if let Rule::Gat { heads, .. } = self.rule {
            for h in 0..heads {
                state[h * (self.out + 2)] = f32::NEG_INFINITY;
            }
        }
        state
    }

    /// Folds one message into `state`; `dst_row` is the destination's transformed row (GAT's
    /// attention reads its destination score there).
    pub fn fold(&self, state: &mut [f32], dst_row: &[f32], message: &[f32]) {
        match self.rule {
            Rule::Gcn | Rule::Sage => {
                let (sum, count) = state.split_at_mut(self.out);
                sum.iter_mut().zip(message).for_each(|(s, m)| *s += m);
                count[0] += 1.0;
            }
            Rule::Gat { heads, .. } => {
                let out = self.out;
                let dst_scores = &dst_row[heads * out + heads..];
                for h in 0..heads {
                    let score = leaky_relu(message[heads * out + h] + dst_scores[h]);
                    fold_softmax(
                        &mut state[h * (out + 2)..(h + 1) * (out + 2)],
                        score,
                        &message[h * out..(h + 1) * out],
                    );
                }
            }
        }
    }

    /// Merges `other` (a state over other in-edges of the same node) into `state`.
    pub fn merge(&self, state: &mut [f32], other: &[f32]) {
        match self.rule {
            Rule::Gcn | Rule::Sage => state.iter_mut().zip(other).for_each(|(s, o)| *s += o),
            Rule::Gat { heads, .. } => {
                let w = self.out + 2;
                for h in 0..heads {
                    merge_softmax(&mut state[h * w..(h + 1) * w], &other[h * w..(h + 1) * w]);
                }
            }
        }
    }

    /// The layer's output for a node: its own transformed `row`, its `degree` as the layer
    /// counts it, and the merged `state` of its in-edges.
    pub fn finish(&self, row: &[f32], degree: f32, state: &[f32], out: &mut [f32]) {
        let width = self.out;
        match self.rule {
            Rule::Gcn => {
                // c_v (sum_u c_u z_u + c_v z_v): the coefficient's destination part, and the self-loop.
                let c = gcn_factor(degree);
                for (i, o) in out.iter_mut().enumerate() {
                    *o = c * (state[i] + c * row[i]);
                }
            }
            Rule::Sage => {
                let count = state[width];
                for (i, o) in out.iter_mut().enumerate() {
                    let mean = if count > 0.0 { state[i] / count } else { 0.0 };
                    *o = row[width + i] + mean;
                }
            }
            Rule::Gat { heads, concat } => {
                let mut state = state.to_vec();
                // The self-loop is the last term of the softmax.
                let (own_src, own_dst) =
                    (row[heads * width..heads * width + heads].to_vec(), &row[heads * width + heads..]);
                for h in 0..heads {
                    let score = leaky_relu(own_src[h] + own_dst[h]);
                    let w = width + 2;
                    fold_softmax(&mut state[h * w..(h + 1) * w], score, &row[h * width..(h + 1) * width]);
                }
                out.iter_mut().for_each(|o| *o = 0.0);
                for h in 0..heads {
                    let s = &state[h * (width + 2)..(h + 1) * (width + 2)];
                    for i in 0..width {
                        let value = s[2 + i] / s[1];
                        if concat {
                            out[h * width + i] = value;
                        } else {
                            out[i] += value;
                        }
                    }
                }
                if !concat {
                    out.iter_mut().for_each(|o| *o /= heads as f32);
                }
            }
        }
        for (o, b) in out.iter_mut().zip(&self.bias) {
            *o += b;
        }
        match self.activation {
            None => {}
            Some(Activation::Relu) => out.iter_mut().for_each(|o| *o = o.max(0.0)),
            Some(Activation::Elu) => out.iter_mut().for_each(|o| {
                if *o <= 0.0 {
                    *o = o.exp() - 1.0
                }
            }),
        }
    }
}

/// GCN's coefficient factors per node: `1 / sqrt(degree + 1)`.
fn gcn_factor(degree: f32) -> f32 {
    1.0 / (degree + 1.0).sqrt()
}

fn leaky_relu(x: f32) -> f32 {
    if x >= 0.0 { x } else { 0.2 * x }
}

/// One head's softmax state `[max, sum of exp(score - max), sum of exp(score - max) z]`, with
/// one more `(score, z)`.
fn fold_softmax(state: &mut [f32], score: f32, z: &[f32]) {
    let (max, rest) = state.split_first_mut().expect("a state has a max");
    let (sum, acc) = rest.split_first_mut().expect("a state has a sum");
    if score > *max {
        let scale = (*max - score).exp();
        *sum = *sum * scale + 1.0;
        acc.iter_mut().zip(z).for_each(|(a, v)| *a = *a * scale + v);
        *max = score;
    } else {
        let w = (score - *max).exp();
        *sum += w;
        acc.iter_mut().zip(z).for_each(|(a, v)| *a += w * v);
    }
}

/// Merges two heads' softmax states (see [`fold_softmax`]) by rescaling both to the larger max.
fn merge_softmax(state: &mut [f32], other: &[f32]) {
    if other[1] == 0.0 {
        return;
    }
    if state[1] == 0.0 {
        state.copy_from_slice(other);
        return;
    }
    let max = state[0].max(other[0]);
    let (mine, theirs) = ((state[0] - max).exp(), (other[0] - max).exp());
    state[0] = max;
    state[1] = state[1] * mine + other[1] * theirs;
    for i in 2..state.len() {
        state[i] = state[i] * mine + other[i] * theirs;
    }
}

/// Layer `l`'s transform of `rows` host rows (row-major, `width` wide) on `device`, back on the
/// host: `[rows, slice.row_width()]` row-major.
pub fn transform_rows(model: &Gnn, l: usize, rows: Vec<f32>, width: usize, device: &Device) -> Vec<f32> {
    let n = rows.len() / width.max(1);
    let h = Tensor::<2>::from_data(TensorData::new(rows, [n, width]), device);
    model.transform(l, h).into_data().iter::<f32>().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::EdgeTensors;
    use crate::batch::LayerEdges;
    use crate::kernel::Aggregation;
    use crate::rng::Stream;
    use schemas::model::ModelKind;

    fn spec(kind: ModelKind, heads: usize, output_heads: usize, activation: Activation) -> ModelSpec {
        ModelSpec {
            kind,
            input_dim: 6,
            hidden: 5,
            classes: 3,
            layers: 2,
            heads,
            output_heads,
            activation,
            normalize_features: false,
            multi_label: false,
            edge_dim: 0,
            normalize_edge_features: false,
            edge_stats: None,
            seed: 3,
        }
    }

    /// A random graph of `n` nodes with in-degrees 0..=6 and one hub, as (src, dst) lists.
    fn graph(n: usize) -> (Vec<i64>, Vec<i64>) {
        let mut s = Stream::new(&[11]);
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for v in 0..n {
            let degree = if v == 0 { n - 1 } else { (s.next_u64() % 7) as usize };
            for _ in 0..degree {
                src.push((s.next_u64() % n as u64) as i64);
                dst.push(v as i64);
            }
        }
        (src, dst)
    }

    /// Every node's layer-`l` output through the slice, each node's in-edges split in `parts`
    /// and merged in order.
    fn sliced(
        model: &Gnn,
        spec: &ModelSpec,
        l: usize,
        x: &[f32],
        width: usize,
        edges: &(Vec<i64>, Vec<i64>),
        parts: usize,
    ) -> Vec<f32> {
        let slice = model.slice(spec, l);
        let n = x.len() / width;
        let rows = transform_rows(model, l, x.to_vec(), width, &Device::flex());
        let (rw, mw) = (slice.row_width(), slice.message_width());
        let degree: Vec<f32> = (0..n).map(|v| edges.1.iter().filter(|&&d| d == v as i64).count() as f32).collect();
        let mut out = vec![0.0; n * slice.output_width()];
        for v in 0..n {
            let own = &rows[v * rw..(v + 1) * rw];
            let incoming: Vec<usize> =
                (0..edges.0.len()).filter(|&e| edges.1[e] == v as i64).map(|e| edges.0[e] as usize).collect();
            let mut state = slice.empty_state();
            for part in 0..parts {
                let mut partial = slice.empty_state();
                for &u in incoming.iter().skip(part).step_by(parts) {
                    let mut message = vec![0.0; mw];
                    slice.message(&rows[u * rw..(u + 1) * rw], degree[u], &mut message);
                    slice.fold(&mut partial, own, &message);
                }
                slice.merge(&mut state, &partial);
            }
            let ow = slice.output_width();
            slice.finish(own, degree[v], &state, &mut out[v * ow..(v + 1) * ow]);
        }
        out
    }

    fn check(spec: ModelSpec) {
        let device = Device::flex();
        let model = Gnn::new(&spec, &device);
        let n = 40;
        let edges = graph(n);
        let mut s = Stream::new(&[5]);
        let x: Vec<f32> = (0..n * spec.input_dim).map(|_| 2.0 * s.unit() - 1.0).collect();
        let degree: Vec<f32> = (0..n).map(|v| edges.1.iter().filter(|&&d| d == v as i64).count() as f32).collect();
        let e = LayerEdges::new(n, n, edges.0.clone(), edges.1.clone(), &degree);
        let mut h = x.clone();
        let mut width = spec.input_dim;
        for l in 0..spec.layers {
            for aggregation in [Aggregation::Auto, Aggregation::Reference] {
                let t = EdgeTensors::new(&e, &device, aggregation);
                let input = Tensor::<2>::from_data(TensorData::new(h.clone(), [n, width]), &device);
                let expected: Vec<f32> = model.forward_layer(&spec, l, input, &t).into_data().iter::<f32>().collect();
                for parts in [1, 3] {
                    let got = sliced(&model, &spec, l, &h, width, &edges, parts);
                    assert_eq!(got.len(), expected.len());
                    for (i, (a, b)) in got.iter().zip(&expected).enumerate() {
                        assert!(
                            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                            "{:?} layer {l} parts {parts} value {i}: {a} vs {b}",
                            spec.kind
                        );
                    }
                }
            }
            let slice = model.slice(&spec, l);
            h = sliced(&model, &spec, l, &h, width, &edges, 1);
            width = slice.output_width();
        }
    }

    #[test]
    fn gcn_slices_equal_the_layer() {
        check(spec(ModelKind::Gcn, 1, 1, Activation::Relu));
    }

    #[test]
    fn sage_slices_equal_the_layer() {
        check(spec(ModelKind::Sage, 1, 1, Activation::Elu));
    }

    #[test]
    fn multi_head_gat_slices_equal_the_layer() {
        check(spec(ModelKind::Gat, 3, 2, Activation::Elu));
    }
}
