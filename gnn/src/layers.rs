//! One message-passing layer of each kind. A layer maps `rows_in x in` to `rows_out x out`;
//! rows `0..rows_out` of its input are the nodes it computes (see `batch`).

use burn::module::{Param, ParamId};
use burn::prelude::*;
use burn::tensor::activation::leaky_relu;
use burn::tensor::{IndexingUpdateOp, TensorData};

use crate::aggregate::EdgeTensors;
use crate::rng::Stream;

/// A parameter whose id derives from its seed: burn draws ids at random otherwise, and the
/// ids are written into `model.bpk`, so the same seed would not give the same file.
fn param<const D: usize>(tensor: Tensor<D>, seed: &[u64], tag: u64) -> Param<Tensor<D>> {
    let mut key = seed.to_vec();
    key.extend([tag, 0x9a2a_3e1d]);
    let mut param = Param::from_tensor(tensor);
    param.id = ParamId::from(Stream::new(&key).next_u64());
    param
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
        let h = x.matmul(self.weight.val());
        let neighbors = e.sum(h.clone(), &e.gcn_coef);
        let own = e.own_rows(h) * e.gcn_self.clone();
        neighbors + own + self.bias.val().unsqueeze::<2>()
    }
}

/// GraphSAGE with the mean aggregator: `h'_w = x_w W_self + mean over u in N(w) of x_u W_neigh + b`.
#[derive(Module, Debug)]
pub struct SageLayer {
    pub self_weight: Param<Tensor<2>>,
    pub neighbor_weight: Param<Tensor<2>>,
    pub bias: Param<Tensor<1>>,
}

impl SageLayer {
    pub fn new(input: usize, output: usize, seed: &[u64], device: &Device) -> Self {
        let mut s = seed.to_vec();
        s.push(1);
        SageLayer {
            self_weight: glorot(input, output, seed, device),
            neighbor_weight: glorot(input, output, &s, device),
            bias: zeros(output, seed, device),
        }
    }

    pub fn forward(&self, x: Tensor<2>, e: &EdgeTensors) -> Tensor<2> {
        let mean = e.sum(x.clone(), &e.mean_coef);
        e.own_rows(x).matmul(self.self_weight.val())
            + mean.matmul(self.neighbor_weight.val())
            + self.bias.val().unsqueeze::<2>()
    }
}

/// GAT (Velickovic et al.): per head, attention `a(W x_u, W x_w)` with LeakyReLU(0.2), softmax
/// over each node's in-edges plus a self-loop; heads concatenated, or averaged in the last layer.
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
}

/// Attention dropout for one forward pass: a keep-mask per (edge or self-loop, head), or none.
pub type AttentionMask = Option<Tensor<2>>;

impl GatLayer {
    pub fn new(input: usize, out: usize, heads: usize, concat: bool, seed: &[u64], device: &Device) -> Self {
        let with = |tag: u64| {
            let mut s = seed.to_vec();
            s.push(tag);
            s
        };
        GatLayer {
            weight: glorot(input, heads * out, seed, device),
            att_src: glorot(heads, out, &with(1), device),
            att_dst: glorot(heads, out, &with(2), device),
            bias: zeros(if concat { heads * out } else { out }, seed, device),
            heads,
            out,
            concat,
        }
    }

    pub fn forward(&self, x: Tensor<2>, e: &EdgeTensors, keep: AttentionMask) -> Tensor<2> {
        let (heads, out) = (self.heads, self.out);
        let rows_in = x.dims()[0];
        let z = x.matmul(self.weight.val()).reshape([rows_in, heads, out]);
        let score_src = (z.clone() * self.att_src.val().unsqueeze::<3>()).sum_dim(2).reshape([rows_in, heads]);
        let z_out = e.own_rows(z.clone());
        let score_dst = (z_out * self.att_dst.val().unsqueeze::<3>()).sum_dim(2).reshape([e.rows_out, heads]);
        let (src, dst) = e.with_self_loops();
        let scores = leaky_relu(score_src.select(0, src.clone()) + score_dst.select(0, dst.clone()), 0.2);
        // Softmax over each node's in-edges; shifting by a constant per head keeps exp finite and
        // cancels in the ratio.
        let shift = scores.clone().detach().max_dim(0);
        let weights = (scores - shift).exp();
        let total = Tensor::<2>::zeros([e.rows_out, heads], &weights.device()).select_assign(
            0,
            dst.clone(),
            weights.clone(),
            IndexingUpdateOp::Add,
        );
        let mut alpha = weights / total.select(0, dst.clone());
        if let Some(keep) = keep {
            alpha = alpha * keep;
        }
        let summed = e.sum_with_self_loops(z.reshape([rows_in, heads * out]), alpha);
        let combined = if self.concat {
            summed
        } else {
            summed.reshape([e.rows_out, heads, out]).mean_dim(1).reshape([e.rows_out, out])
        };
        combined + self.bias.val().unsqueeze::<2>()
    }
}
