//! The layers' parts of split hubs' pieces (`crate::hub` argues the merge and its gradient):
//! GINE's sums as tensor ops, GAT's softmax parts in loops on the host.
//!
//! GAT's pieces are a hub's in-edges, a softmax per piece and head: as tensor ops that is a
//! gather, an exponential and two scatter-adds over `[edges, heads, width]`, run three times a
//! pass (forward, evaluation, and again under autodiff for backward), and those generic ops
//! cost twice the whole layer's kernel on a graph whose hubs hold most edges. On the host it is
//! one pass over the edges forward ([`GatLayer::piece_softmax`]) and one backward
//! ([`GatLayer::piece_surrogate`]), which gives the gradients of the rows' transform `z = x W`,
//! of their source scores and of the edge terms; a scalar whose autodiff gradient is theirs
//! carries them into the layer's weights and the rows.

use burn::prelude::*;
use burn::tensor::activation::relu;
use burn::tensor::{IndexingUpdateOp, TensorData};

use crate::hub::{PieceEdges, SoftmaxParts};
use crate::layers::{GatLayer, GineLayer, value};

fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 values")
}

fn tensor(values: Vec<f32>, cols: usize, device: &Device) -> Tensor<2> {
    let rows = values.len() / cols.max(1);
    Tensor::from_data(TensorData::new(values, [rows, cols]), device)
}

impl GineLayer {
    /// Per piece, `Σ ReLU(x_u + e W_e + b_e)` over its edges: `[pieces, in]`.
    pub(crate) fn piece_sums(&self, x: Tensor<2>, e: &PieceEdges, track: bool) -> Tensor<2> {
        let (width, device) = (x.dims()[1], x.device());
        let mut messages = x.select(0, e.src.clone());
        if let (Some(w), Some(b)) = (&self.edge_weight, &self.edge_bias) {
            let features = e.features.clone().expect("a piece's edge features");
            messages = messages + features.matmul(value(w, track)) + value(b, track).unsqueeze::<2>();
        }
        let zeros = Tensor::zeros([e.pieces(), width], &device);
        zeros.select_assign(0, e.piece.clone(), relu(messages), IndexingUpdateOp::Add)
    }
}

/// A GAT layer's pieces on the host: the rows' transform, and per edge and head its shifted
/// weight `exp(l_e - m)` and LeakyReLU's slope at its logit.
struct Weights {
    z: Vec<f32>,
    weight: Vec<f32>,
    slope: Vec<f32>,
    max: Vec<f32>,
}

impl GatLayer {
    /// The pieces' logits over the rows `x` and their weights (see [`Weights`]).
    fn piece_weights(&self, x: Tensor<2>, e: &PieceEdges, score_dst: &[f32]) -> Weights {
        let (heads, out, rows) = (self.heads, self.out, x.dims()[0]);
        let z_t = x.matmul(value(&self.weight, false));
        let score_src =
            (z_t.clone().reshape([rows, heads, out]) * value(&self.att_src, false).unsqueeze::<3>()).sum_dim(2);
        let (z, score_src) = (host(z_t), host(score_src));
        let edge_terms = self
            .edge_projection_tracked(false)
            .map(|p| host(e.features.clone().expect("a piece's edge features").matmul(p)));
        let edges = e.src_rows.len();
        let (mut logit, mut slope) = (vec![0.0f32; edges * heads], vec![0.0f32; edges * heads]);
        let mut max = vec![f32::NEG_INFINITY; e.pieces() * heads];
        for (p, range) in e.ranges.iter().enumerate() {
            for edge in range.clone() {
                let u = e.src_rows[edge];
                for h in 0..heads {
                    let mut pre = score_src[u * heads + h] + score_dst[p * heads + h];
                    if let Some(t) = &edge_terms {
                        pre += t[edge * heads + h];
                    }
                    let (l, s) = if pre > 0.0 { (pre, 1.0) } else { (0.2 * pre, 0.2) };
                    (logit[edge * heads + h], slope[edge * heads + h]) = (l, s);
                    max[p * heads + h] = max[p * heads + h].max(l);
                }
            }
        }
        for (p, range) in e.ranges.iter().enumerate() {
            for i in range.start * heads..range.end * heads {
                logit[i] = (logit[i] - max[p * heads + i % heads]).exp();
            }
        }
        Weights { z, weight: logit, slope, max }
    }

    /// Per piece and head, the largest logit and the shifted sums (see `crate::hub`), as
    /// constants: the hubs' destination scores `score_dst` and the attention dropout `keep`
    /// (`[edges, heads]`; `None`: none) on the host.
    pub(crate) fn piece_softmax(
        &self,
        x: Tensor<2>,
        e: &PieceEdges,
        (score_dst, keep): (&[f32], Option<&[f32]>),
    ) -> SoftmaxParts {
        let (heads, out, device) = (self.heads, self.out, x.device());
        let w = self.piece_weights(x, e, score_dst);
        let (pieces, wide) = (e.pieces(), heads * out);
        let (mut total, mut d_total) = (vec![0.0f32; pieces * heads], vec![0.0f32; pieces * heads]);
        let (mut weighted, mut d_weighted) = (vec![0.0f32; pieces * wide], vec![0.0f32; pieces * wide]);
        for (p, range) in e.ranges.iter().enumerate() {
            for edge in range.clone() {
                let z = &w.z[e.src_rows[edge] * wide..(e.src_rows[edge] + 1) * wide];
                for h in 0..heads {
                    let (i, at) = (edge * heads + h, p * heads + h);
                    let kept = w.weight[i] * keep.map_or(1.0, |k| k[i]);
                    total[at] += w.weight[i];
                    d_total[at] += w.weight[i] * w.slope[i];
                    for c in h * out..(h + 1) * out {
                        weighted[p * wide + c] += kept * z[c];
                        d_weighted[p * wide + c] += kept * w.slope[i] * z[c];
                    }
                }
            }
        }
        SoftmaxParts {
            max: w.max,
            total: tensor(total, heads, &device),
            d_total: tensor(d_total, heads, &device),
            weighted: tensor(weighted, wide, &device),
            d_weighted: tensor(d_weighted, wide, &device),
        }
    }

    /// A scalar on the autodiff graph of the layer's weights and the rows `x` whose gradient
    /// is theirs through the pieces' parts, given the parts' gradients `grads` (per piece, `S`'s
    /// `heads` values then `Z`'s `heads x out`).
    pub(crate) fn piece_surrogate(
        &self,
        x: Tensor<2>,
        e: &PieceEdges,
        (score_dst, keep): (&[f32], Option<&[f32]>),
        grads: &[f32],
    ) -> Tensor<1> {
        let (heads, out, rows, device) = (self.heads, self.out, x.dims()[0], x.device());
        let wide = heads * out;
        let w = self.piece_weights(x.clone().detach(), e, score_dst);
        // Phase 1: on the host, the gradients of `z`, of the source scores and of the edges'
        // logit terms (LeakyReLU's input).
        let (mut dz, mut d_score) = (vec![0.0f32; rows * wide], vec![0.0f32; rows * heads]);
        let mut d_edge = vec![0.0f32; e.src_rows.len() * heads];
        for (p, range) in e.ranges.iter().enumerate() {
            let g = &grads[p * (heads + wide)..(p + 1) * (heads + wide)];
            let (g_total, g_weighted) = g.split_at(heads);
            for edge in range.clone() {
                let u = e.src_rows[edge];
                for h in 0..heads {
                    let i = edge * heads + h;
                    let k = keep.map_or(1.0, |k| k[i]);
                    let cols = h * out..(h + 1) * out;
                    let dot: f32 = cols.clone().map(|c| g_weighted[c] * w.z[u * wide + c]).sum();
                    cols.for_each(|c| dz[u * wide + c] += w.weight[i] * k * g_weighted[c]);
                    let d_pre = (g_total[h] + k * dot) * w.weight[i] * w.slope[i];
                    d_score[u * heads + h] += d_pre;
                    d_edge[i] = d_pre;
                }
            }
        }
        // Phase 2: the same terms on the autodiff graph, weighed by their gradients.
        let z = x.matmul(value(&self.weight, true));
        let score = (z.clone().reshape([rows, heads, out]) * value(&self.att_src, true).unsqueeze::<3>()).sum_dim(2);
        let mut surrogate = (z * tensor(dz, wide, &device)).sum()
            + (score.reshape([rows, heads]) * tensor(d_score, heads, &device)).sum();
        if let Some(p) = self.edge_projection_tracked(true) {
            let terms = e.features.clone().expect("a piece's edge features").matmul(p);
            surrogate = surrogate + (terms * tensor(d_edge, heads, &device)).sum();
        }
        surrogate
    }
}
