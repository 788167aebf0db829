//! One message-passing layer of each kind. A layer maps `rows_in x in` to `rows_out x out`;
//! rows `0..rows_out` of its input are the nodes it computes (see `batch`).
//!
//! Edge features `e_uv` (`edge_dim` wide; see [`EdgeTensors::features`]) enter GraphSAGE's
//! messages, GAT's attention logits and GINE's messages; GCN has no place for them. A layer
//! built with `edge_dim` 0 holds no edge parameters and computes exactly what it computes
//! without edge features. Every parameter's initial values and id derive from the layer's seed
//! and a tag of its own (`tagged`), so `model-<run>.bpk` is the same bytes for the same seed.

use burn::module::{Param, ParamId};
use burn::prelude::*;
use burn::tensor::activation::{leaky_relu, relu};
use burn::tensor::{IndexingUpdateOp, TensorData};

use crate::aggregate::{EdgeTensors, End};
use crate::hub::{HubTerms, Merged};
use crate::rng::Stream;

/// A parameter whose id derives from its seed: burn draws ids at random otherwise, and the
/// ids are written into `model-<run>.bpk`, so the same seed would not give the same file.
pub(crate) fn param<const D: usize>(tensor: Tensor<D>, seed: &[u64], tag: u64) -> Param<Tensor<D>> {
    let mut key = seed.to_vec();
    key.extend([tag, 0x9a2a_3e1d]);
    let mut param = Param::from_tensor(tensor);
    param.id = ParamId::from(Stream::new(&key).next_u64());
    param
}

/// A parameter's value, tracked by autodiff or not.
pub(crate) fn value<const D: usize>(p: &Param<Tensor<D>>, track: bool) -> Tensor<D> {
    if track { p.val() } else { p.val().detach() }
}

/// Glorot-uniform weights from a seeded stream: the same on every worker and backend.
pub fn glorot(rows: usize, cols: usize, seed: &[u64], device: &Device) -> Param<Tensor<2>> {
    let mut s = Stream::new(seed);
    let bound = (6.0 / (rows + cols) as f32).sqrt();
    let values: Vec<f32> = (0..rows * cols).map(|_| (2.0 * s.unit() - 1.0) * bound).collect();
    param(Tensor::from_data(TensorData::new(values, [rows, cols]), device), seed, 0)
}

/// A zero vector (biases); `seed` only names the parameter.
pub fn zeros(len: usize, seed: &[u64], device: &Device) -> Param<Tensor<1>> {
    param(Tensor::zeros([len], device), seed, 1)
}

/// The seed of a layer's parameter other than its first weight: the layer's seed and `tag`.
/// Tags: 1 a second weight (SAGE's neighbor weight, GAT's source attention, GINE's second
/// linear map), 2 GAT's destination attention, [`EDGE`] the edge projection (and its bias),
/// [`EDGE_ATTENTION`] GAT's edge attention.
pub(crate) fn tagged(seed: &[u64], tag: u64) -> Vec<u64> {
    let mut s = seed.to_vec();
    s.push(tag);
    s
}

const EDGE: u64 = 3;
const EDGE_ATTENTION: u64 = 4;

/// The edge projection `W_e` (`[edge_dim, cols]`), when the layer reads edge features.
fn edge_weight(edge_dim: usize, cols: usize, seed: &[u64], device: &Device) -> Option<Param<Tensor<2>>> {
    (edge_dim > 0).then(|| glorot(edge_dim, cols, &tagged(seed, EDGE), device))
}

/// A layer with edge parameters needs batches built with the model's edge features.
const NEEDS_FEATURES: &str = "the layer reads edge features: build its batches with the model's edge_dim";

/// GCN (Kipf & Welling): `h'_w = sum over u in N(w) + w of x_u W / sqrt((d_u + 1)(d_w + 1)) + b`.
#[derive(Module, Debug)]
pub struct GcnLayer {
    pub weight: Param<Tensor<2>>,
    pub bias: Param<Tensor<1>>,
}

impl GcnLayer {
    pub fn new(input: usize, output: usize, seed: &[u64], device: &Device) -> Self {
        GcnLayer { weight: glorot(input, output, seed, device), bias: zeros(output, seed, device) }
    }

    pub fn forward(&self, x: Tensor<2>, e: &EdgeTensors) -> Tensor<2> {
        self.propagate(x.matmul(self.weight.val()), e)
    }

    /// The layer after its input's product with the weight, `h = x W` (a caller that holds `x`
    /// sparse computes it over the nonzeros).
    pub fn propagate(&self, h: Tensor<2>, e: &EdgeTensors) -> Tensor<2> {
        let neighbors = e.sum(h.clone(), &e.gcn_coef);
        let own = e.own_rows(h) * e.gcn_self.clone();
        neighbors + own + self.bias.val().unsqueeze::<2>()
    }
}

/// GraphSAGE with the mean aggregator: `h'_w = x_w W_self + mean over u in N(w) of m_uw + b`,
/// with messages `m_uw = x_u W_neigh + e_uw W_e` (`x_u W_neigh` without edge features). The
/// mean of `e_uw W_e` is taken as `mean(e_uw) W_e`: one projection per node, not per edge.
#[derive(Module, Debug)]
pub struct SageLayer {
    pub self_weight: Param<Tensor<2>>,
    pub neighbor_weight: Param<Tensor<2>>,
    pub bias: Param<Tensor<1>>,
    /// `W_e`, `[edge_dim, out]`.
    pub edge_weight: Option<Param<Tensor<2>>>,
}

impl SageLayer {
    pub fn new(input: usize, output: usize, edge_dim: usize, seed: &[u64], device: &Device) -> Self {
        SageLayer {
            self_weight: glorot(input, output, seed, device),
            neighbor_weight: glorot(input, output, &tagged(seed, 1), device),
            bias: zeros(output, seed, device),
            edge_weight: edge_weight(edge_dim, output, seed, device),
        }
    }

    pub fn forward(&self, x: Tensor<2>, e: &EdgeTensors) -> Tensor<2> {
        let own = e.own_rows(x.clone()).matmul(self.self_weight.val()) + self.bias.val().unsqueeze::<2>();
        // Without in-edges (the dense first layer over [precompute]'s `[X | mean X]`) the mean
        // is zero: its product, and its gradient's, are skipped (the gradient is zero either way).
        let out = match e.edges {
            0 => own,
            _ => own + e.sum(x, &e.mean_coef).matmul(self.neighbor_weight.val()),
        };
        match &self.edge_weight {
            Some(w) => out + e.mean_edge_features().expect(NEEDS_FEATURES).matmul(w.val()),
            None => out,
        }
    }
}

/// GAT (Velickovic et al.): per head, attention `a(W x_u, W x_w)` with LeakyReLU(0.2), softmax
/// over each node's in-edges plus a self-loop; heads concatenated, or averaged in the last layer.
///
/// With edge features (as PyG's `GATConv(edge_dim=E)`): head `h`'s logit of edge `u -> w` adds
/// `a_e[h] . (e_uw W_e)[h]`, which is `e_uw . p_h` with `p_h = W_e[:, head h] a_e[h]`
/// ([`GatLayer::edge_projection`]). A self-loop's features are the mean of the node's in-edge
/// features in this layer (PyG's `fill_value = "mean"`; 0 without in-edges). Messages stay `z_u`.
#[derive(Module, Debug)]
pub struct GatLayer {
    pub weight: Param<Tensor<2>>,
    /// `[heads, out]` each.
    pub att_src: Param<Tensor<2>>,
    pub att_dst: Param<Tensor<2>>,
    pub bias: Param<Tensor<1>>,
    pub heads: usize,
    pub out: usize,
    pub concat: bool,
    /// `W_e`, `[edge_dim, heads * out]`.
    pub edge_weight: Option<Param<Tensor<2>>>,
    /// `a_e`, `[heads, out]`.
    pub att_edge: Option<Param<Tensor<2>>>,
}

/// Attention dropout for one forward pass: a keep-mask per (edge or self-loop, head), or none.
pub type AttentionMask = Option<Tensor<2>>;

impl GatLayer {
    /// `heads` heads of width `out`, concatenated (hidden layers) or averaged (the last).
    pub fn new(
        input: usize,
        out: usize,
        heads: usize,
        concat: bool,
        edge_dim: usize,
        seed: &[u64],
        device: &Device,
    ) -> Self {
        GatLayer {
            weight: glorot(input, heads * out, seed, device),
            att_src: glorot(heads, out, &tagged(seed, 1), device),
            att_dst: glorot(heads, out, &tagged(seed, 2), device),
            bias: zeros(if concat { heads * out } else { out }, seed, device),
            heads,
            out,
            concat,
            edge_weight: edge_weight(edge_dim, heads * out, seed, device),
            att_edge: (edge_dim > 0).then(|| glorot(heads, out, &tagged(seed, EDGE_ATTENTION), device)),
        }
    }

    /// `[edge_dim, heads]`: column `h` is `p_h = W_e[:, head h] a_e[h]`, so an edge's logit
    /// term for head `h` is `e . p_h`; `None` without edge features.
    pub fn edge_projection(&self) -> Option<Tensor<2>> {
        self.edge_projection_tracked(true)
    }

    /// [`GatLayer::edge_projection`], of the weights' values detached unless `track`.
    pub(crate) fn edge_projection_tracked(&self, track: bool) -> Option<Tensor<2>> {
        let (w, a) = (self.edge_weight.as_ref()?.val(), self.att_edge.as_ref()?.val());
        let (w, a) = if track { (w, a) } else { (w.detach(), a.detach()) };
        let edge_dim = w.dims()[0];
        let per_head = w.reshape([edge_dim, self.heads, self.out]) * a.unsqueeze::<3>();
        Some(per_head.sum_dim(2).reshape([edge_dim, self.heads]))
    }

    /// The edge terms of the logits, `[edges + rows_out, heads]` (the edges, then the
    /// self-loops with their mean-filled features); `None` without edge features.
    fn edge_logits(&self, e: &EdgeTensors, hubs: Option<&HubTerms>) -> Option<Tensor<2>> {
        let p = self.edge_projection()?;
        let (features, mut fill) =
            (e.features.clone().expect(NEEDS_FEATURES), e.mean_edge_features().expect(NEEDS_FEATURES));
        // A split hub's in-edges are its pieces': its fill comes with them.
        if let Some(HubTerms { rows, merged: Merged::Softmax(merged) }) = hubs
            && let Some(hub_fill) = &merged.fill
        {
            fill = fill.select_assign(0, rows.clone(), hub_fill.clone(), IndexingUpdateOp::Add);
        }
        let looped = if e.edges == 0 { fill } else { Tensor::cat(vec![features, fill], 0) };
        Some(looped.matmul(p))
    }

    /// `hubs`: the merged pieces of output rows without in-edges here (`crate::hub`).
    pub fn forward(&self, x: Tensor<2>, e: &EdgeTensors, keep: AttentionMask, hubs: Option<&HubTerms>) -> Tensor<2> {
        let (heads, out) = (self.heads, self.out);
        let rows_in = x.dims()[0];
        let z = x.matmul(self.weight.val()).reshape([rows_in, heads, out]);
        let (scores, score_dst) = self.scores(&z, e, hubs);
        // Softmax over each node's in-edges and its self-loop.
        let hub = hubs.and_then(|h| match &h.merged {
            Merged::Softmax(m) => Some((&h.rows, m)),
            Merged::Sum(_) => None,
        });
        let largest = largest_scores(e, &scores, hub.map(|(rows, m)| (rows, &m.max)));
        let weights = (scores - e.looped_rows(largest.clone(), End::Dst)).exp();
        let mut total = e.sum_looped_rows(weights.clone());
        // A split hub's pieces: their parts shifted to the hub's shift, and linear in the hub's
        // destination score (`crate::hub`).
        let mut hub_weighted = None;
        if let Some((rows, m)) = hub {
            let hubs = rows.dims()[0];
            let scale = (m.max.clone() - largest.select(0, rows.clone())).exp();
            let moved = score_dst.select(0, rows.clone());
            let moved = moved.clone() - moved.detach();
            let hub_total = (m.total.clone() + m.d_total.clone() * moved.clone()) * scale.clone();
            total = total.select_assign(0, rows.clone(), hub_total, IndexingUpdateOp::Add);
            let per_head = |t: &Tensor<2>| t.clone().reshape([hubs, heads, out]);
            let column = |t: Tensor<2>| t.reshape([hubs, heads, 1]);
            let sums = (per_head(&m.weighted) + per_head(&m.d_weighted) * column(moved)) * column(scale);
            hub_weighted = Some((rows, sums / column(total.clone().select(0, rows.clone()))));
        }
        let mut alpha = weights / e.looped_rows(total, End::Dst);
        if let Some(keep) = keep {
            alpha = alpha * keep;
        }
        let mut summed = e.sum_with_self_loops(z.reshape([rows_in, heads * out]), alpha);
        if let Some((rows, weighted)) = hub_weighted {
            let weighted = weighted.reshape([rows.dims()[0], heads * out]);
            summed = summed.select_assign(0, rows.clone(), weighted, IndexingUpdateOp::Add);
        }
        let combined = if self.concat {
            summed
        } else {
            summed.reshape([e.rows_out, heads, out]).mean_dim(1).reshape([e.rows_out, out])
        };
        combined + self.bias.val().unsqueeze::<2>()
    }

    /// Each looped edge's attention score per head, `LeakyReLU(a_src . z_u + a_dst . z_w + edge
    /// term)`, `[looped edges, heads]`, and each output row's destination score
    /// `[rows_out, heads]` (a split hub's pieces are linear in it).
    fn scores(&self, z: &Tensor<3>, e: &EdgeTensors, hubs: Option<&HubTerms>) -> (Tensor<2>, Tensor<2>) {
        let [rows_in, heads, _] = z.dims();
        let score_src = (z.clone() * self.att_src.val().unsqueeze::<3>()).sum_dim(2).reshape([rows_in, heads]);
        let z_out = e.own_rows(z.clone());
        let score_dst = (z_out * self.att_dst.val().unsqueeze::<3>()).sum_dim(2).reshape([e.rows_out, heads]);
        let logits = e.looped_rows(score_src, End::Src) + e.looped_rows(score_dst.clone(), End::Dst);
        let logits = match self.edge_logits(e, hubs) {
            Some(edge) => logits + edge,
            None => logits,
        };
        (leaky_relu(logits, 0.2), score_dst)
    }
}

/// Each output row's largest score per head over its looped in-edges (and a split hub's
/// pieces' maxima, `hub`), `[rows_out, heads]`: the softmax's shift. It is a constant that
/// cancels in the ratio and keeps exp finite; one shift for every node would underflow all
/// the weights of a node whose scores lie some 88 below the largest anywhere, and 0 / 0 is NaN.
fn largest_scores(e: &EdgeTensors, scores: &Tensor<2>, hub: Option<(&Tensor<1, Int>, &Tensor<2>)>) -> Tensor<2> {
    let heads = scores.dims()[1];
    let mut largest = Tensor::<2>::full([e.rows_out, heads], f32::NEG_INFINITY, &scores.device());
    if e.rows_out > 0 {
        let (_, dst) = e.with_self_loops();
        largest = largest.select_assign(0, dst, scores.clone().detach(), IndexingUpdateOp::Max);
    }
    if let Some((rows, max)) = hub {
        largest = largest.select_assign(0, rows.clone(), max.clone(), IndexingUpdateOp::Max);
    }
    largest
}

/// GINE (Hu et al. 2020): `h'_w = MLP((1 + eps) x_w + sum over u in N(w) of ReLU(x_u + e_uw W_e + b_e))`
/// with eps = 0 (PyG's `GINEConv` default, not trained) and `MLP = Linear(in, m) -> ReLU ->
/// Linear(m, out)`; without edge features the message is `ReLU(x_u)`. The sum over edges runs
/// per edge (the message depends on the edge), on the kernel's edge-row plan on the CPU.
///
/// The MLP's width `m` is the model's `ModelSpec::mlp_width`, `max(hidden, out)`: `hidden` in
/// every layer unless the output is wider (Hu et al.'s MLPs are `2 x` their layer's width, and a
/// linear head, not a ReLU layer, makes the logits). With `m = out` the last layer's MLP was
/// `classes` ReLU units over a sum that is never negative (post-activation rows plus ReLU
/// messages, at 2 hops a sum of sums): Adam's first steps move a unit's pre-activation alike for
/// every node, so units died whole one after another, and with all of them dead the logits were
/// the constant `b2` (loss ln C, issue 51).
#[derive(Module, Debug)]
pub struct GineLayer {
    /// The MLP: `[in, m]`, `[m]`, `[m, out]`, `[out]`.
    pub weight: Param<Tensor<2>>,
    pub bias: Param<Tensor<1>>,
    pub weight2: Param<Tensor<2>>,
    pub bias2: Param<Tensor<1>>,
    /// `W_e`, `[edge_dim, in]`, and `b_e`, `[in]` (PyG's `lin` over edge features).
    pub edge_weight: Option<Param<Tensor<2>>>,
    pub edge_bias: Option<Param<Tensor<1>>>,
}

impl GineLayer {
    /// A layer from `input` to `output` columns whose MLP is `width` wide (`m` above).
    pub fn new(input: usize, width: usize, output: usize, edge_dim: usize, seed: &[u64], device: &Device) -> Self {
        GineLayer {
            weight: glorot(input, width, seed, device),
            bias: zeros(width, seed, device),
            weight2: glorot(width, output, &tagged(seed, 1), device),
            bias2: zeros(output, &tagged(seed, 1), device),
            edge_weight: edge_weight(edge_dim, input, seed, device),
            edge_bias: (edge_dim > 0).then(|| zeros(input, &tagged(seed, EDGE), device)),
        }
    }

    /// The layer's output width (its MLP's last map).
    pub fn output(&self) -> usize {
        self.weight2.val().dims()[1]
    }

    /// `hubs`: the neighbor sums of output rows without in-edges here (`crate::hub`).
    pub fn forward(&self, x: Tensor<2>, e: &EdgeTensors, hubs: Option<&HubTerms>) -> Tensor<2> {
        let neighbors = GineLayer::with_hubs(self.neighbor_sum(x.clone(), e), hubs);
        self.mlp(e.own_rows(x) + neighbors)
    }

    /// `sum over u of ReLU(x_u + e_uw W_e + b_e)` per output row, `[rows_out, in]`.
    fn neighbor_sum(&self, x: Tensor<2>, e: &EdgeTensors) -> Tensor<2> {
        let (Some(w), Some(b)) = (&self.edge_weight, &self.edge_bias) else {
            return e.sum_unweighted(relu(x));
        };
        if e.edges == 0 {
            return Tensor::zeros([e.rows_out, x.dims()[1]], &x.device());
        }
        let features = e.features.clone().expect(NEEDS_FEATURES);
        let messages = relu(x.select(0, e.src.clone()) + features.matmul(w.val()) + b.val().unsqueeze::<2>());
        e.sum_edge_rows(messages, None)
    }

    /// The MLP on the aggregated rows `[rows, in]`: `[rows, out]`. GraphInfer runs it on its own
    /// after the host's aggregation (see `slice`).
    pub fn mlp(&self, h: Tensor<2>) -> Tensor<2> {
        let hidden = relu(h.matmul(self.weight.val()) + self.bias.val().unsqueeze::<2>());
        hidden.matmul(self.weight2.val()) + self.bias2.val().unsqueeze::<2>()
    }
}

impl GineLayer {
    /// The hubs' neighbor sums added to a neighbor sum of the layer's output rows.
    pub(crate) fn with_hubs(neighbors: Tensor<2>, hubs: Option<&HubTerms>) -> Tensor<2> {
        match hubs {
            Some(HubTerms { rows, merged: Merged::Sum(sums) }) => {
                neighbors.select_assign(0, rows.clone(), sums.clone(), IndexingUpdateOp::Add)
            }
            _ => neighbors,
        }
    }
}
