//! The model sliced by layer, for GraphInfer: each layer of a trained [`Gnn`] as steps that
//! run where the data is, instead of one forward pass over a record.
//!
//! 1. **transform** (on the device, batched): every node's row of the layer's input becomes its
//!    *transformed row* by the layer's own weights ([`Gnn::transform`]): `x W` for GCN,
//!    `[x W_neigh | x W_self]` for GraphSAGE, `[z | a_src . z | a_dst . z]` with `z = x W` for
//!    GAT, `x` itself for GINE.
//! 2. **aggregate** (on the host, per destination): the *message* of each sampled in-neighbor
//!    ([`LayerSlice::message`]) folds into a *state* together with the in-edge's features
//!    ([`LayerSlice::fold`]); states of parts of a node's in-edges merge ([`LayerSlice::merge`]).
//!    Sums and means merge by adding; GAT's softmax merges through a running maximum and a
//!    rescaled sum (online softmax), so a hub's in-edges can be split over reducers and merged
//!    in a fixed order.
//! 3. **finish** (on the host, per node): the node's own transformed row, its degree and the
//!    merged state give the layer's output, with the bias and the activation
//!    ([`LayerSlice::finish`]).
//! 4. **post** (on the device, batched; GINE only, [`LayerSlice::has_post`]): the layer's MLP
//!    and the activation on the finished rows ([`post_rows`]).
//!
//! These are the layers of `layers.rs` rearranged: GCN's coefficient `1 / sqrt((d_u + 1)(d_v + 1))`
//! factors into a source part (in the message) and a destination part (in finish); a mean is
//! a sum and a count; GAT's softmax over in-edges plus the self-loop is the online softmax over
//! the messages, then the self-loop. Edge features are folded on the host with host copies of
//! the layer's edge parameters: GraphSAGE adds `e W_e` to the sum; GAT adds `e . p_h` to head
//! `h`'s logit and keeps the sum of those terms and the edge count, so finish gives the
//! self-loop its mean-filled term `mean(e) . p_h`; GINE sums `ReLU(x_u + e W_e + b_e)`. The
//! tests below check every model against [`Gnn::forward_layer`], with in-edges split into parts
//! and merged.
//!
//! Typed layers (R-GCN, heterogeneous GraphSAGE; see `crate::hetero`) transform per node type
//! ([`Gnn::transform_typed`], the type's projection first at layer 0): the own term (`h W_0`, or
//! `h S_t + b_t`), then a slot per relation leaving the type, `h W_r`, zero-padded to the widest
//! type's row. A node's message is its relation slots (every relation leaving its type); an
//! in-edge of relation `r` folds the slot of `r` scaled by 1 over the destination's in-edges of
//! `r` in the layer ([`LayerSlice::fold_relation`]; the destination knows those counts from its
//! sample), so the state, `out` wide, sums the relations' means and merges by adding; finish adds
//! the own term and R-GCN's bias.

use burn::prelude::*;
use burn::tensor::TensorData;
use schemas::model::{Activation, ModelSpec};

use crate::model::{Gnn, Layer};

/// How a layer aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Symmetric-normalized sum with a self-loop.
    Gcn,
    /// Own row plus the mean of the in-neighbors' messages.
    Sage,
    /// Attention: softmax over in-edges and a self-loop, per head; heads concatenated or averaged.
    Gat { heads: usize, concat: bool },
    /// Own row plus the sum of ReLU messages; the MLP runs afterwards ([`post_rows`]).
    Gine,
    /// A typed layer (R-GCN, heterogeneous GraphSAGE): the own term plus, per relation, the
    /// mean of the messages, folded as a sum scaled by the caller ([`LayerSlice::fold_relation`]).
    Typed,
}

/// One layer of a trained model, sliced (see the module doc). Host copies of the small
/// parameters: the bias and the edge parameters (attention vectors over nodes are applied in
/// [`Gnn::transform`]).
#[derive(Debug, Clone)]
pub struct LayerSlice {
    rule: Rule,
    /// Width of `z` (per head for GAT; the input width for GINE).
    out: usize,
    bias: Vec<f32>,
    /// `None` for the last layer, whose outputs are the logits, and for GINE (post applies it).
    activation: Option<Activation>,
    /// The layer's output width (after post).
    output: usize,
    /// Width of the edge features the layer reads (0: none).
    edge_dim: usize,
    /// Row-major `[edge_dim, cols]`: SAGE's `W_e` (cols = out), GAT's `p` (cols = heads; see
    /// `layers::GatLayer::edge_projection`), GINE's `W_e` (cols = in).
    edge_weight: Vec<f32>,
    /// GINE's `b_e`.
    edge_bias: Vec<f32>,
    /// A typed layer: per node type, the relations leaving it, in the order of their slots in
    /// the type's transformed row (see [`Gnn::transform_typed`]); empty otherwise.
    slots: Vec<Vec<u8>>,
    /// A typed layer: per relation, where its slot starts in a message of its source type.
    relation_at: Vec<usize>,
    /// A typed layer: per relation, its edge projection `W_e,r` row-major (`[edge_dim_r, out]`;
    /// empty for a relation whose edge features the layer does not read).
    relation_edge_weights: Vec<Vec<f32>>,
}

/// A 1-d or 2-d parameter's values on the host, row-major.
fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

impl Gnn {
    /// Layer `l`'s slice.
    pub fn slice(&self, spec: &ModelSpec, l: usize) -> LayerSlice {
        let last = l + 1 == self.layers.len();
        let param = |p: &Option<burn::module::Param<Tensor<2>>>| p.as_ref().map_or_else(Vec::new, |w| host(w.val()));
        let mut slice = LayerSlice {
            rule: Rule::Gcn,
            out: 0,
            bias: Vec::new(),
            activation: (!last).then_some(spec.activation),
            output: 0,
            edge_dim: 0,
            edge_weight: Vec::new(),
            edge_bias: Vec::new(),
            slots: spec.types.as_ref().map_or_else(Vec::new, relation_slots),
            relation_at: Vec::new(),
            relation_edge_weights: Vec::new(),
        };
        match &self.layers[l] {
            Layer::Gcn(g) => (slice.out, slice.bias) = (g.weight.val().dims()[1], host(g.bias.val())),
            Layer::Sage(s) => {
                (slice.rule, slice.out, slice.bias) = (Rule::Sage, s.self_weight.val().dims()[1], host(s.bias.val()));
                slice.edge_weight = param(&s.edge_weight);
            }
            Layer::Gat(g) => {
                slice.rule = Rule::Gat { heads: g.heads, concat: g.concat };
                (slice.out, slice.bias) = (g.out, host(g.bias.val()));
                slice.edge_weight = g.edge_projection().map_or_else(Vec::new, host);
            }
            Layer::Gine(g) => {
                let (input, output) = (g.weight.val().dims()[0], g.output());
                (slice.rule, slice.out, slice.output, slice.activation) = (Rule::Gine, input, output, None);
                slice.edge_weight = param(&g.edge_weight);
                slice.edge_bias = g.edge_bias.as_ref().map_or_else(Vec::new, |b| host(b.val()));
            }
            Layer::Rgcn(r) => {
                (slice.rule, slice.out, slice.bias) = (Rule::Typed, r.output, host(r.bias.val()));
                slice.relation_edge_weights = r.edge_weights.iter().map(param).collect();
            }
            // Heterogeneous GraphSAGE's biases are per type: the own term holds them.
            Layer::HeteroSage(s) => {
                (slice.rule, slice.out) = (Rule::Typed, s.output);
                slice.relation_edge_weights = s.edge_weights.iter().map(param).collect();
            }
        }
        if slice.rule == Rule::Typed {
            slice.output = slice.out;
            slice.relation_at = relation_offsets(&slice.slots, slice.out);
        } else if slice.rule != Rule::Gine {
            slice.output = slice.bias.len();
        }
        slice.edge_dim = if slice.edge_weight.is_empty() { 0 } else { spec.edge_dim };
        slice
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
            Layer::Gine(_) => h,
            Layer::Rgcn(_) | Layer::HeteroSage(_) => panic!("a typed layer transforms per node type: transform_typed"),
        }
    }

    /// A typed layer `l`'s transform of rows `h` of node type `t` (at layer 0, `t`'s features,
    /// projected first): `[rows, slice.row_width()]`, the own term (`h W_0`, or `h S_t + b_t`)
    /// then `h W_r` for each relation leaving `t` ([`LayerSlice::slot`]), zeros after.
    pub fn transform_typed(&self, spec: &ModelSpec, l: usize, t: u8, h: Tensor<2>) -> Tensor<2> {
        let h = if l == 0 { self.projections[usize::from(t)].forward(h) } else { h };
        let slots = spec.types.as_ref().map_or_else(Vec::new, relation_slots);
        let leaving = slots.get(usize::from(t)).cloned().unwrap_or_default();
        let (own, weights): (Tensor<2>, Vec<Tensor<2>>) = match &self.layers[l] {
            Layer::Rgcn(r) => {
                let all = r.relation_weights();
                let weights = leaving.iter().map(|&i| all[usize::from(i)].clone()).collect();
                (h.clone().matmul(r.self_weight.val()), weights)
            }
            Layer::HeteroSage(s) => {
                let own = h.clone().matmul(s.self_weights[usize::from(t)].val())
                    + s.biases[usize::from(t)].val().unsqueeze::<2>();
                (own, leaving.iter().map(|&i| s.neighbor_weights[usize::from(i)].val()).collect())
            }
            _ => panic!("layer {l} is not a typed layer: transform"),
        };
        let (rows, out) = (h.dims()[0], own.dims()[1]);
        let widest = 1 + slots.iter().map(Vec::len).max().unwrap_or(0);
        let mut parts = vec![own];
        parts.extend(weights.into_iter().map(|w| h.clone().matmul(w)));
        if parts.len() < widest {
            parts.push(Tensor::zeros([rows, out * (widest - parts.len())], &h.device()));
        }
        Tensor::cat(parts, 1)
    }
}

/// Per relation, where its slot starts in a message (the relation slots of its source type's
/// transformed row, see [`Gnn::transform_typed`]): `out` times its rank among its type's.
fn relation_offsets(slots: &[Vec<u8>], out: usize) -> Vec<usize> {
    let mut at = vec![0; slots.iter().map(Vec::len).sum()];
    for leaving in slots {
        for (i, &r) in leaving.iter().enumerate() {
            at[usize::from(r)] = i * out;
        }
    }
    at
}

/// Per node type, the relations whose source it is, in relation order.
fn relation_slots(types: &schemas::typed::GraphTypes) -> Vec<Vec<u8>> {
    let mut slots = vec![Vec::new(); types.node_types.len()];
    for (r, relation) in types.relations.iter().enumerate() {
        slots[usize::from(relation.src)].push(r as u8);
    }
    slots
}

impl LayerSlice {
    /// Width of a transformed row.
    pub fn row_width(&self) -> usize {
        match self.rule {
            Rule::Gcn | Rule::Gine => self.out,
            Rule::Sage => 2 * self.out,
            // The own term, then a slot per relation of the type with the most.
            Rule::Typed => self.out * (1 + self.slots.iter().map(Vec::len).max().unwrap_or(0)),
            Rule::Gat { heads, .. } => heads * self.out + 2 * heads,
        }
    }

    /// Width of a message (what crosses to a destination's aggregator): for a typed layer,
    /// the relation slots of the widest type.
    pub fn message_width(&self) -> usize {
        match self.rule {
            Rule::Gcn | Rule::Sage | Rule::Gine => self.out,
            Rule::Typed => self.row_width() - self.out,
            Rule::Gat { heads, .. } => heads * self.out + heads,
        }
    }

    /// Width of an aggregation state.
    pub fn state_width(&self) -> usize {
        match self.rule {
            Rule::Gcn | Rule::Sage => self.out + 1,
            Rule::Gine | Rule::Typed => self.out,
            // With edge features: each head's sum of edge logit terms, and the edge count.
            Rule::Gat { heads, .. } if self.edge_dim > 0 => heads * (self.out + 2) + heads + 1,
            Rule::Gat { heads, .. } => heads * (self.out + 2),
        }
    }

    /// Width of the rows [`LayerSlice::finish`] writes: the layer's output, or with
    /// [`LayerSlice::has_post`] the input of [`post_rows`].
    ///
    /// Never wider than [`LayerSlice::row_width`] (GraphInfer writes a layer's outputs over
    /// its rows, each node's after its own row is read); every rule's test checks it.
    pub fn finish_width(&self) -> usize {
        match self.rule {
            Rule::Gine => self.out,
            _ => self.output,
        }
    }

    /// Width of the layer's output (after [`post_rows`] where the layer has one).
    pub fn output_width(&self) -> usize {
        self.output
    }

    /// Width of the edge features [`LayerSlice::fold`] takes (0: it takes none).
    pub fn edge_dim(&self) -> usize {
        self.edge_dim
    }

    /// Whether the layer is typed: it transforms per node type ([`Gnn::transform_typed`]) and
    /// folds per relation ([`LayerSlice::fold_relation`]).
    pub fn is_typed(&self) -> bool {
        self.rule == Rule::Typed
    }

    /// Whether the finished rows still go through [`post_rows`] (GINE's MLP and activation).
    pub fn has_post(&self) -> bool {
        self.rule == Rule::Gine
    }

    /// The message a node with transformed row `row` sends along its in-edges of this layer;
    /// `degree` is its in-degree as the layer counts it (`schemas::layers::Layers::degree`). A
    /// typed layer's message is the row's relation slots, after the own term.
    pub fn message(&self, row: &[f32], degree: f32, out: &mut [f32]) {
        let start = if self.rule == Rule::Typed { self.out } else { 0 };
        out.copy_from_slice(&row[start..start + self.message_width()]);
        if self.rule == Rule::Gcn {
            let c = gcn_factor(degree);
            out.iter_mut().for_each(|v| *v *= c);
        }
    }

    /// The width of the features an in-edge of relation `r` carries into a fold: a typed
    /// layer's relation's (0 when it reads none), [`LayerSlice::edge_dim`] otherwise.
    pub fn edge_width(&self, r: u8) -> usize {
        match self.rule {
            Rule::Typed => self.relation_edge_weights.get(usize::from(r)).map_or(0, |w| w.len() / self.out.max(1)),
            _ => self.edge_dim,
        }
    }

    /// Folds a typed layer's `message` along an in-edge of relation `r` with features `edge`
    /// ([`LayerSlice::edge_width`] of them, as the model reads them) into `state`: the slot of
    /// `r` plus the edge's projection `e W_e,r`, scaled by `coef`, 1 over the number of the
    /// destination's in-edges of `r` in this layer (so the state sums each relation's mean).
    pub fn fold_relation(&self, state: &mut [f32], message: &[f32], r: u8, coef: f32, edge: &[f32]) {
        let at = self.relation_at[usize::from(r)];
        let slot = &message[at..at + self.out];
        if edge.is_empty() {
            state.iter_mut().zip(slot).for_each(|(s, m)| *s += coef * m);
            return;
        }
        let w = &self.relation_edge_weights[usize::from(r)];
        assert_eq!(edge.len() * self.out, w.len(), "an in-edge's features have its relation's edge width");
        for (j, (s, m)) in state.iter_mut().zip(slot).enumerate() {
            let projected: f32 = edge.iter().enumerate().map(|(k, v)| v * w[k * self.out + j]).sum();
            *s += coef * (m + projected);
        }
    }

    /// A state that holds no message.
    pub fn empty_state(&self) -> Vec<f32> {
        let mut state = vec![0.0; self.state_width()];
        self.clear_state(&mut state);
        state
    }

    /// Makes `state` (`state_width` values) hold no message again, as [`Self::empty_state`]
    /// builds it: one buffer serves every node a worker folds.
    pub fn clear_state(&self, state: &mut [f32]) {
        state.fill(0.0);
        if let Rule::Gat { heads, .. } = self.rule {
            for h in 0..heads {
                state[h * (self.out + 2)] = f32::NEG_INFINITY;
            }
        }
    }

    /// `e`'s projection by the host edge matrix: column `j` of `e W` (`W` is `[edge_dim, cols]`).
    fn project(&self, e: &[f32], cols: usize, j: usize) -> f32 {
        e.iter().enumerate().map(|(k, v)| v * self.edge_weight[k * cols + j]).sum()
    }

    /// Folds one message into `state`: `dst_row` is the destination's transformed row (GAT's
    /// attention reads its destination score there), `edge` the in-edge's features as the
    /// model reads them (standardized where it standardizes; see `crate::features`), empty when
    /// the layer reads none ([`LayerSlice::edge_dim`] 0).
    pub fn fold(&self, state: &mut [f32], dst_row: &[f32], message: &[f32], edge: &[f32]) {
        assert_eq!(edge.len(), self.edge_dim, "an in-edge's features have the layer's edge width");
        let out = self.out;
        match self.rule {
            Rule::Gcn | Rule::Sage => {
                let (sum, count) = state.split_at_mut(out);
                for (i, (s, m)) in sum.iter_mut().zip(message).enumerate() {
                    *s += if edge.is_empty() { *m } else { m + self.project(edge, out, i) };
                }
                count[0] += 1.0;
            }
            Rule::Gat { heads, .. } => {
                let dst_scores = &dst_row[heads * out + heads..];
                let tail = heads * (out + 2);
                for h in 0..heads {
                    let edge_term = if edge.is_empty() { 0.0 } else { self.project(edge, heads, h) };
                    let score = leaky_relu(message[heads * out + h] + dst_scores[h] + edge_term);
                    fold_softmax(
                        &mut state[h * (out + 2)..(h + 1) * (out + 2)],
                        score,
                        &message[h * out..(h + 1) * out],
                    );
                    if !edge.is_empty() {
                        state[tail + h] += edge_term;
                    }
                }
                if !edge.is_empty() {
                    state[tail + heads] += 1.0;
                }
            }
            Rule::Typed => panic!("a typed layer folds with its relation's coefficient: fold_relation"),
            Rule::Gine => {
                for (i, (s, m)) in state.iter_mut().zip(message).enumerate() {
                    let v = if edge.is_empty() { *m } else { m + self.project(edge, out, i) + self.edge_bias[i] };
                    *s += v.max(0.0);
                }
            }
        }
    }

    /// Merges `other` (a state over other in-edges of the same node) into `state`.
    pub fn merge(&self, state: &mut [f32], other: &[f32]) {
        match self.rule {
            Rule::Gcn | Rule::Sage | Rule::Gine | Rule::Typed => state.iter_mut().zip(other).for_each(|(s, o)| *s += o),
            Rule::Gat { heads, .. } => {
                let w = self.out + 2;
                for h in 0..heads {
                    merge_softmax(&mut state[h * w..(h + 1) * w], &other[h * w..(h + 1) * w]);
                }
                // The edge terms' sums and the count.
                state[heads * w..].iter_mut().zip(&other[heads * w..]).for_each(|(s, o)| *s += o);
            }
        }
    }

    /// The layer's output for a node ([`LayerSlice::finish_width`] values): its own
    /// transformed `row`, its `degree` as the layer counts it, and the merged `state` of its
    /// in-edges.
    pub fn finish(&self, row: &[f32], degree: f32, state: &[f32], out: &mut [f32]) {
        assert_eq!(out.len(), self.finish_width(), "finish writes finish_width values");
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
            Rule::Gat { heads, concat } => self.finish_attention(row, state, out, heads, concat),
            // (1 + eps) x_v + the sum, eps = 0; the MLP and the activation are post's.
            Rule::Gine => out.iter_mut().zip(row).zip(state).for_each(|((o, x), s)| *o = x + s),
            // The own term (the row's first slot) and the relations' means.
            Rule::Typed => out.iter_mut().zip(row).zip(state).for_each(|((o, x), s)| *o = x + s),
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

    /// GAT's finish: the self-loop as the softmax's last term (its edge term the mean of the
    /// in-edges', 0 without any), then each head's weighted sum, concatenated or averaged.
    fn finish_attention(&self, row: &[f32], state: &[f32], out: &mut [f32], heads: usize, concat: bool) {
        let (width, w) = (self.out, self.out + 2);
        let mut state = state.to_vec();
        let (own_src, own_dst) = (row[heads * width..heads * width + heads].to_vec(), &row[heads * width + heads..]);
        let count = if self.edge_dim > 0 { state[heads * w + heads] } else { 0.0 };
        for h in 0..heads {
            let fill = if count > 0.0 { state[heads * w + h] / count } else { 0.0 };
            let score = leaky_relu(own_src[h] + own_dst[h] + fill);
            fold_softmax(&mut state[h * w..(h + 1) * w], score, &row[h * width..(h + 1) * width]);
        }
        out.iter_mut().for_each(|o| *o = 0.0);
        for h in 0..heads {
            let s = &state[h * w..(h + 1) * w];
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

/// A typed layer `l`'s transform of `n` host rows of node type `t` (`values` row-major: the
/// type's features at layer 0, which may be none) on `device`, back on the host: `[n,
/// slice.row_width()]` row-major (see [`Gnn::transform_typed`]).
pub fn transform_typed_rows(
    model: &Gnn,
    spec: &ModelSpec,
    l: usize,
    t: u8,
    rows: Vec<f32>,
    n: usize,
    device: &Device,
) -> Vec<f32> {
    let width = rows.len() / n.max(1);
    let h = Tensor::<2>::from_data(TensorData::new(rows, [n, width]), device);
    model.transform_typed(spec, l, t, h).into_data().iter::<f32>().collect()
}

/// Layer `l`'s post step on `rows` finished host rows (row-major, `width` =
/// [`LayerSlice::finish_width`] wide) on `device`, back on the host: `[rows,
/// slice.output_width()]` row-major. GINE: its MLP, then the model's activation unless `l` is
/// the last layer. A layer without a post step ([`LayerSlice::has_post`] false) returns `rows`
/// as they are. Like [`transform_rows`], each row's result depends only on that row and the
/// number of rows.
pub fn post_rows(model: &Gnn, spec: &ModelSpec, l: usize, rows: Vec<f32>, width: usize, device: &Device) -> Vec<f32> {
    let Layer::Gine(g) = &model.layers[l] else { return rows };
    let n = rows.len() / width.max(1);
    let h = Tensor::<2>::from_data(TensorData::new(rows, [n, width]), device);
    model.activate(spec, l, g.mlp(h)).into_data().iter::<f32>().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::EdgeTensors;
    use crate::batch::LayerEdges;
    use crate::hetero::TypeGroups;
    use crate::kernel::Aggregation;
    use crate::rng::Stream;
    use schemas::model::ModelKind;
    use schemas::typed::GraphTypes;

    fn spec(
        kind: ModelKind,
        (heads, output_heads): (usize, usize),
        activation: Activation,
        edge_dim: usize,
    ) -> ModelSpec {
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
            edge_dim,
            normalize_edge_features: false,
            edge_stats: None,
            relation_edge_stats: Vec::new(),
            task: Default::default(),
            decoder: None,
            types: None,
            bases: 0,
            wide_mlp: true,
            learned_embedding_dim: 0,
            precomputed: 0,
            seed: 3,
        }
    }

    /// A random graph of `n` nodes with in-degrees 0..=6 and one hub, with `edge_dim` random
    /// features per edge.
    fn graph(n: usize, edge_dim: usize) -> LayerEdges {
        let mut s = Stream::new(&[11]);
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for v in 0..n {
            let degree = if v == 0 { n - 1 } else { (s.next_u64() % 7) as usize };
            for _ in 0..degree {
                src.push((s.next_u64() % n as u64) as i64);
                dst.push(v as i64);
            }
        }
        let degree: Vec<f32> = (0..n).map(|v| dst.iter().filter(|&&d| d == v as i64).count() as f32).collect();
        let mut e = LayerEdges::new(n, n, src, dst, &degree);
        e.edge_dim = edge_dim;
        e.features = (0..e.src.len() * edge_dim).map(|_| 2.0 * s.unit() - 1.0).collect();
        e
    }

    /// The state of one node's in-edges `incoming`, split in `parts` by position, each part
    /// folded (`fold(partial, j)` folds in-edge `j`) and the parts merged in order.
    fn merged_state(
        slice: &LayerSlice,
        incoming: &[usize],
        parts: usize,
        fold: impl Fn(&mut [f32], usize),
    ) -> Vec<f32> {
        let mut state = slice.empty_state();
        // One buffer for every part, cleared before each as a worker reuses its own (NaN
        // first: a value `clear_state` missed would show in every output).
        let mut partial = vec![f32::NAN; slice.state_width()];
        for part in 0..parts {
            slice.clear_state(&mut partial);
            for &j in incoming.iter().skip(part).step_by(parts) {
                fold(&mut partial, j);
            }
            slice.merge(&mut state, &partial);
        }
        state
    }

    /// Every node's layer-`l` output through the slice, each node's in-edges split in `parts`
    /// and merged in order, then the post step.
    fn sliced(
        model: &Gnn,
        spec: &ModelSpec,
        l: usize,
        x: &[f32],
        width: usize,
        e: &LayerEdges,
        parts: usize,
    ) -> Vec<f32> {
        let slice = model.slice(spec, l);
        let device = Device::flex();
        let n = x.len() / width;
        let rows = transform_rows(model, l, x.to_vec(), width, &device);
        let (rw, mw, fw) = (slice.row_width(), slice.message_width(), slice.finish_width());
        let degree: Vec<f32> = (0..n).map(|v| e.dst.iter().filter(|&&d| d == v as i64).count() as f32).collect();
        let edge = |j: usize| if slice.edge_dim() > 0 { e.edge_row(j) } else { &[] };
        let mut out = vec![0.0; n * fw];
        for v in 0..n {
            let own = &rows[v * rw..(v + 1) * rw];
            let incoming: Vec<usize> = (0..e.src.len()).filter(|&j| e.dst[j] == v as i64).collect();
            let state = merged_state(&slice, &incoming, parts, |partial, j| {
                let u = e.src[j] as usize;
                let mut message = vec![0.0; mw];
                slice.message(&rows[u * rw..(u + 1) * rw], degree[u], &mut message);
                slice.fold(partial, own, &message, edge(j));
            });
            slice.finish(own, degree[v], &state, &mut out[v * fw..(v + 1) * fw]);
        }
        let out = post_rows(model, spec, l, out, fw, &device);
        assert_eq!(out.len(), n * slice.output_width());
        out
    }

    fn check(spec: ModelSpec) {
        check_at(spec, 1.0);
    }

    /// [`check`] on inputs `scale` times larger.
    fn check_at(spec: ModelSpec, scale: f32) {
        let device = Device::flex();
        // Random values in every parameter, the biases included (they start at zero).
        let model = Gnn::new(&spec, &device);
        let mut s = Stream::new(&[17]);
        let values: Vec<f32> = crate::params::flatten(&model).iter().map(|_| s.unit() - 0.5).collect();
        let model = crate::params::load(model, &values, &device);
        let n = 40;
        let e = graph(n, spec.edge_dim);
        let mut s = Stream::new(&[5]);
        let x: Vec<f32> = (0..n * spec.input_dim).map(|_| scale * (2.0 * s.unit() - 1.0)).collect();
        let mut h = x.clone();
        let mut width = spec.input_dim;
        for l in 0..spec.layers {
            let slice = model.slice(&spec, l);
            assert_eq!(slice.edge_dim(), spec.edge_dim, "{:?} reads the edge features", spec.kind);
            assert!(slice.finish_width() <= slice.row_width(), "{:?} finish width", spec.kind);
            for aggregation in [Aggregation::Auto, Aggregation::Reference] {
                let t = EdgeTensors::new(&e, &device, aggregation);
                let input = Tensor::<2>::from_data(TensorData::new(h.clone(), [n, width]), &device);
                let expected: Vec<f32> = model.forward_layer(&spec, l, input, &t).into_data().iter::<f32>().collect();
                for parts in [1, 3] {
                    let got = sliced(&model, &spec, l, &h, width, &e, parts);
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
            h = sliced(&model, &spec, l, &h, width, &e, 1);
            width = model.slice(&spec, l).output_width();
        }
    }

    #[test]
    fn gcn_slices_equal_the_layer() {
        check(spec(ModelKind::Gcn, (1, 1), Activation::Relu, 0));
    }

    #[test]
    fn sage_slices_equal_the_layer() {
        check(spec(ModelKind::Sage, (1, 1), Activation::Elu, 0));
    }

    #[test]
    fn multi_head_gat_slices_equal_the_layer() {
        check(spec(ModelKind::Gat, (3, 2), Activation::Elu, 0));
    }

    #[test]
    fn gat_softmaxes_each_node_by_its_own_largest_score() {
        // Scores far apart: shifted by the largest anywhere, a node whose scores lie 88 below
        // it would have every weight 0 and its output NaN; GraphInfer's online softmax is
        // exact at any scale.
        check_at(spec(ModelKind::Gat, (1, 1), Activation::Elu, 0), 300.0);
        check_at(spec(ModelKind::Gat, (3, 2), Activation::Elu, 4), 300.0);
    }

    #[test]
    fn gine_slices_equal_the_layer() {
        check(spec(ModelKind::Gine, (1, 1), Activation::Elu, 0));
    }

    #[test]
    fn sage_slices_with_edge_features_equal_the_layer() {
        check(spec(ModelKind::Sage, (1, 1), Activation::Relu, 4));
    }

    #[test]
    fn multi_head_gat_slices_with_edge_features_equal_the_layer() {
        check(spec(ModelKind::Gat, (3, 2), Activation::Elu, 4));
    }

    #[test]
    fn gine_slices_with_edge_features_equal_the_layer() {
        check(spec(ModelKind::Gine, (1, 1), Activation::Relu, 4));
    }

    #[test]
    fn slice_widths_say_what_crosses_and_what_post_does() {
        let model = Gnn::new(&spec(ModelKind::Gine, (1, 1), Activation::Relu, 4), &Device::flex());
        let gine = spec(ModelKind::Gine, (1, 1), Activation::Relu, 4);
        let first = model.slice(&gine, 0);
        assert!(first.has_post());
        // GINE's rows are its input rows; finish writes them, post maps them to the output.
        assert_eq!((first.row_width(), first.finish_width(), first.output_width()), (6, 6, 5));
        let gat = spec(ModelKind::Gat, (3, 2), Activation::Elu, 4);
        let slice = Gnn::new(&gat, &Device::flex()).slice(&gat, 0);
        assert!(!slice.has_post());
        // Per head: max, sum and 5 values; then 3 edge-term sums and the count.
        assert_eq!((slice.state_width(), slice.finish_width(), slice.output_width()), (3 * 7 + 4, 15, 15));
    }

    /// Types a (4 wide), b (3), c (2); relations 0: b -> a, 1: a -> a, 2: c -> b, 3: a -> b;
    /// with `edge_features`, ba's edges carry 3 features and cb's 2.
    fn typed_spec(kind: ModelKind, bases: usize, edge_features: bool) -> ModelSpec {
        use schemas::typed::{NodeType, Relation};
        let node_type = NodeType::new;
        let relation = |name: &str, src, dst| Relation::new(name, src, dst);
        let mut types = GraphTypes {
            node_types: vec![node_type("a", 4), node_type("b", 3), node_type("c", 2)],
            relations: vec![relation("ba", 1, 0), relation("aa", 0, 0), relation("cb", 2, 1), relation("ab", 0, 1)],
            target: 0,
        };
        if edge_features {
            (types.relations[0].edge_dim, types.relations[2].edge_dim) = (3, 2);
        }
        ModelSpec { types: Some(types), bases, input_dim: 0, ..spec(kind, (1, 1), Activation::Elu, 0) }
    }

    /// A random typed graph of 30 nodes (types 0, 1, 2 in turn) and 150 edges of every
    /// relation, between nodes of its types, with each edge's features at its relation's width.
    struct TypedGraph {
        node_type: Vec<u8>,
        edges: LayerEdges,
        relation: Vec<u8>,
        /// Every edge's features, concatenated; edge `j`'s are `features[at[j]..at[j + 1]]`.
        features: Vec<f32>,
        at: Vec<usize>,
    }

    fn typed_graph(types: &GraphTypes, s: &mut Stream) -> TypedGraph {
        let n = 30;
        let node_type: Vec<u8> = (0..n).map(|v| (v % 3) as u8).collect();
        let (mut src, mut dst, mut relation) = (Vec::new(), Vec::new(), Vec::new());
        let (mut features, mut at) = (Vec::new(), vec![0]);
        for _ in 0..150 {
            let r = (s.next_u64() % types.relations.len() as u64) as u8;
            let rel = &types.relations[usize::from(r)];
            let mut of = |t: u8| loop {
                let v = (s.next_u64() % n as u64) as usize;
                if node_type[v] == t {
                    return v as i64;
                }
            };
            let (u, w) = (of(rel.src), of(rel.dst));
            src.push(u);
            dst.push(w);
            relation.push(r);
            features.extend((0..rel.edge_dim).map(|_| 2.0 * s.unit() - 1.0));
            at.push(features.len());
        }
        let mut edges = LayerEdges::new(n, n, src, dst, &vec![0.0; n]);
        let split = crate::batch::LayerRelations::split(&edges, &relation, types, &features, &node_type);
        edges.typed = Some(Box::new(split));
        TypedGraph { node_type, edges, relation, features, at }
    }

    /// The rows of `x` in `members`, as one tensor.
    fn gather_rows(x: &[Vec<f32>], members: &[i64], device: &Device) -> Tensor<2> {
        let width = x[members[0] as usize].len();
        let values: Vec<f32> = members.iter().flat_map(|&v| x[v as usize].clone()).collect();
        Tensor::<2>::from_data(TensorData::new(values, [members.len(), width]), device)
    }

    /// Layer `l`'s transformed row of every node, by its type (`row_width` values each).
    fn transformed_rows(model: &Gnn, spec: &ModelSpec, l: usize, groups: &TypeGroups, x: &[Vec<f32>]) -> Vec<f32> {
        let rw = model.slice(spec, l).row_width();
        let mut rows = vec![0.0; x.len() * rw];
        for (t, members) in groups.rows.iter().enumerate() {
            let h = gather_rows(x, members, &Device::flex());
            let out: Vec<f32> = model.transform_typed(spec, l, t as u8, h).into_data().iter::<f32>().collect();
            for (i, &v) in members.iter().enumerate() {
                rows[v as usize * rw..(v as usize + 1) * rw].copy_from_slice(&out[i * rw..(i + 1) * rw]);
            }
        }
        rows
    }

    /// Layer `l` by `forward_layer` on the same rows, each type's features projected at layer 0.
    fn reference_layer(model: &Gnn, spec: &ModelSpec, l: usize, g: &TypedGraph, x: &[Vec<f32>]) -> Vec<f32> {
        let device = Device::flex();
        let t = EdgeTensors::new(&g.edges, &device, Aggregation::Auto);
        let h = if l == 0 {
            let groups = TypeGroups::new(&g.node_type, 3);
            let features = groups.rows.iter().map(|members| gather_rows(x, members, &device));
            let projected = features.zip(&model.projections).map(|(x, p)| p.forward(x)).collect();
            crate::hetero::GroupTensors::new(&groups, &device).gather(projected)
        } else {
            Tensor::<2>::from_data(TensorData::new(x.concat(), [x.len(), x[0].len()]), &device)
        };
        model.forward_layer(spec, l, h, &t).into_data().iter::<f32>().collect()
    }

    /// Layer `l` through the slice, each node's in-edges split in `parts` and merged, each
    /// message and edge term scaled by 1 over its relation's in-edges of the destination.
    fn sliced_layer(slice: &LayerSlice, g: &TypedGraph, rows: &[f32], parts: usize) -> Vec<f32> {
        let (rw, mw, fw) = (slice.row_width(), slice.message_width(), slice.finish_width());
        let (e, n) = (&g.edges, g.node_type.len());
        let count = |w: i64, r: u8| (0..e.dst.len()).filter(|&j| e.dst[j] == w && g.relation[j] == r).count();
        let mut out = vec![0.0; n * fw];
        for w in 0..n {
            let incoming: Vec<usize> = (0..e.dst.len()).filter(|&j| e.dst[j] == w as i64).collect();
            let state = merged_state(slice, &incoming, parts, |partial, j| {
                let u = e.src[j] as usize;
                let mut message = vec![0.0; mw];
                slice.message(&rows[u * rw..(u + 1) * rw], 0.0, &mut message);
                let (r, edge) = (g.relation[j], &g.features[g.at[j]..g.at[j + 1]]);
                assert_eq!(edge.len(), slice.edge_width(r));
                slice.fold_relation(partial, &message, r, 1.0 / count(w as i64, r) as f32, edge);
            });
            slice.finish(&rows[w * rw..(w + 1) * rw], 0.0, &state, &mut out[w * fw..(w + 1) * fw]);
        }
        out
    }

    /// Every typed layer through the slice, its in-edges in 1 or 3 parts, equals
    /// `forward_layer` on the same rows.
    fn check_typed(spec: ModelSpec) {
        let device = Device::flex();
        let model = Gnn::new(&spec, &device);
        let mut s = Stream::new(&[19]);
        let values: Vec<f32> = crate::params::flatten(&model).iter().map(|_| s.unit() - 0.5).collect();
        let model = crate::params::load(model, &values, &device);
        let types = spec.types.clone().unwrap();
        let g = typed_graph(&types, &mut s);
        let groups = TypeGroups::new(&g.node_type, 3);
        let mut x: Vec<Vec<f32>> =
            g.node_type.iter().map(|&t| (0..types.width(t)).map(|_| s.unit() - 0.5).collect()).collect();
        for l in 0..spec.layers {
            let slice = model.slice(&spec, l);
            let fw = slice.finish_width();
            assert!(fw <= slice.row_width(), "{:?} finish width", spec.kind);
            let rows = transformed_rows(&model, &spec, l, &groups, &x);
            let expected = reference_layer(&model, &spec, l, &g, &x);
            for parts in [1, 3] {
                let out = sliced_layer(&slice, &g, &rows, parts);
                for (i, (a, b)) in out.iter().zip(&expected).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                        "{:?} layer {l} parts {parts} value {i}: {a} vs {b}",
                        spec.kind
                    );
                }
                if parts == 1 {
                    x = out.chunks(fw).map(<[f32]>::to_vec).collect();
                }
            }
        }
    }

    #[test]
    fn rgcn_slices_equal_the_layer() {
        check_typed(typed_spec(ModelKind::Rgcn, 0, false));
        check_typed(typed_spec(ModelKind::Rgcn, 2, false));
        check_typed(typed_spec(ModelKind::Rgcn, 2, true));
    }

    #[test]
    fn hetero_sage_slices_equal_the_layer() {
        check_typed(typed_spec(ModelKind::Sage, 0, false));
        check_typed(typed_spec(ModelKind::Sage, 0, true));
    }
}
