//! The typed model's parameters and layers (see the module doc of [`crate::hetero`]).

use burn::module::Param;
use burn::prelude::*;
use burn::tensor::TensorData;

use super::GroupTensors;
use crate::aggregate::EdgeTensors;
use crate::layers::{glorot, tagged, zeros};
use crate::rng::Stream;

/// Parameter tags of the typed layers (beside `crate::layers`' tags 1 to 4): a relation's
/// weight, a type's self weight and bias, a basis, the basis coefficients.
const RELATION: u64 = 1 << 8;
const NODE_TYPE: u64 = 2 << 8;
const BASIS: u64 = 3 << 8;
const COEFFICIENTS: u64 = 4 << 8;
const RELATION_EDGE: u64 = 5 << 8;

/// Per relation, its edge projection `W_e,r` (`[edge_dims[r], out]`) when the layer reads the
/// relation's edge features (`edge_dims[r] > 0`).
fn edge_weights(edge_dims: &[usize], output: usize, seed: &[u64], device: &Device) -> Vec<Option<Param<Tensor<2>>>> {
    let weight = |(r, &dim): (usize, &usize)| {
        (dim > 0).then(|| glorot(dim, output, &tagged(seed, RELATION_EDGE + r as u64), device))
    };
    edge_dims.iter().enumerate().map(weight).collect()
}

/// A node type's input projection: `x P + c`, from the type's width to the model's `hidden`.
#[derive(Module, Debug)]
pub struct Projection {
    pub weight: Param<Tensor<2>>,
    pub bias: Param<Tensor<1>>,
}

impl Projection {
    pub fn new(width: usize, hidden: usize, seed: &[u64], device: &Device) -> Self {
        Projection { weight: glorot(width, hidden, seed, device), bias: zeros(hidden, seed, device) }
    }

    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        x.matmul(self.weight.val()) + self.bias.val().unsqueeze::<2>()
    }
}

/// `sum_r mean_r(x) W_r + mean_r(e) W_e,r` over the relations with edges in the layer,
/// `[rows_out, out]` (the edge term for the relations with an edge projection).
fn relation_sum(
    x: &Tensor<2>,
    e: &EdgeTensors,
    out: usize,
    weight: impl Fn(usize) -> Tensor<2>,
    edge_weights: &[Option<Param<Tensor<2>>>],
) -> Tensor<2> {
    let mut sum = Tensor::<2>::zeros([e.rows_out, out], &x.device());
    for (r, edges) in e.relations.iter().enumerate().filter(|(_, edges)| edges.edges > 0) {
        sum = sum + edges.sum(x.clone(), &edges.mean_coef).matmul(weight(r));
        if let Some(w) = &edge_weights[r] {
            let mean = edges.mean_edge_features().expect("a relation with edge weights reads its edge features");
            sum = sum + mean.matmul(w.val());
        }
    }
    sum
}

/// The output rows' types of a typed layer.
fn out_types(e: &EdgeTensors) -> &GroupTensors {
    e.out_types.as_ref().expect("a typed layer runs on a batch of typed records")
}

/// R-GCN's basis decomposition: `W_r = sum_b a_rb V_b`.
#[derive(Module, Debug)]
pub struct Bases {
    /// `V`, `[bases, in * out]`: one basis a row.
    pub bases: Param<Tensor<2>>,
    /// `a`, `[relations, bases]`.
    pub coefficients: Param<Tensor<2>>,
}

/// R-GCN: a self weight, a bias, and a weight per relation (or per relation a combination of
/// shared bases).
#[derive(Module, Debug)]
pub struct RgcnLayer {
    pub self_weight: Param<Tensor<2>>,
    pub bias: Param<Tensor<1>>,
    /// `[in, out]` per relation; empty with bases.
    pub relation_weights: Vec<Param<Tensor<2>>>,
    pub bases: Option<Bases>,
    /// `W_e,r`, `[edge_dim_r, out]`, per relation whose edge features the layer reads.
    pub edge_weights: Vec<Option<Param<Tensor<2>>>>,
    pub input: usize,
    pub output: usize,
}

impl RgcnLayer {
    /// `edge_dims`: per relation, the width of the edge features the layer reads (0: none).
    pub fn new(input: usize, output: usize, edge_dims: &[usize], bases: usize, seed: &[u64], device: &Device) -> Self {
        let relations = edge_dims.len();
        let (relation_weights, bases) = if bases == 0 {
            let weights = (0..relations).map(|r| glorot(input, output, &tagged(seed, RELATION + r as u64), device));
            (weights.collect(), None)
        } else {
            // Each basis is Glorot-uniform for an [in, out] weight.
            let mut s = Stream::new(&tagged(seed, BASIS));
            let bound = (6.0 / (input + output) as f32).sqrt();
            let values: Vec<f32> = (0..bases * input * output).map(|_| (2.0 * s.unit() - 1.0) * bound).collect();
            let v = Tensor::from_data(TensorData::new(values, [bases, input * output]), device);
            let basis = crate::layers::param(v, &tagged(seed, BASIS), 0);
            let coefficients = glorot(relations, bases, &tagged(seed, COEFFICIENTS), device);
            (Vec::new(), Some(Bases { bases: basis, coefficients }))
        };
        RgcnLayer {
            self_weight: glorot(input, output, seed, device),
            bias: zeros(output, seed, device),
            relation_weights,
            bases,
            edge_weights: edge_weights(edge_dims, output, seed, device),
            input,
            output,
        }
    }

    /// Every relation's weight, `[in, out]` each.
    pub fn relation_weights(&self) -> Vec<Tensor<2>> {
        match &self.bases {
            None => self.relation_weights.iter().map(Param::val).collect(),
            Some(b) => {
                let all = b.coefficients.val().matmul(b.bases.val());
                let relations = all.dims()[0];
                (0..relations).map(|r| all.clone().slice(r..r + 1).reshape([self.input, self.output])).collect()
            }
        }
    }

    pub fn forward(&self, x: Tensor<2>, e: &EdgeTensors) -> Tensor<2> {
        let weights = self.relation_weights();
        let neighbors = relation_sum(&x, e, self.output, |r| weights[r].clone(), &self.edge_weights);
        e.own_rows(x).matmul(self.self_weight.val()) + self.bias.val().unsqueeze::<2>() + neighbors
    }
}

/// Heterogeneous GraphSAGE: a self weight and bias per node type, a neighbor weight per
/// relation.
#[derive(Module, Debug)]
pub struct HeteroSageLayer {
    /// `[in, out]` and `[out]` per node type.
    pub self_weights: Vec<Param<Tensor<2>>>,
    pub biases: Vec<Param<Tensor<1>>>,
    /// `[in, out]` per relation.
    pub neighbor_weights: Vec<Param<Tensor<2>>>,
    /// `W_e,r`, `[edge_dim_r, out]`, per relation whose edge features the layer reads.
    pub edge_weights: Vec<Option<Param<Tensor<2>>>>,
    pub output: usize,
}

impl HeteroSageLayer {
    /// `edge_dims`: per relation, the width of the edge features the layer reads (0: none).
    pub fn new(input: usize, output: usize, types: usize, edge_dims: &[usize], seed: &[u64], device: &Device) -> Self {
        let of_type = |t: usize| tagged(seed, NODE_TYPE + t as u64);
        HeteroSageLayer {
            self_weights: (0..types).map(|t| glorot(input, output, &of_type(t), device)).collect(),
            biases: (0..types).map(|t| zeros(output, &of_type(t), device)).collect(),
            neighbor_weights: (0..edge_dims.len())
                .map(|r| glorot(input, output, &tagged(seed, RELATION + r as u64), device))
                .collect(),
            edge_weights: edge_weights(edge_dims, output, seed, device),
            output,
        }
    }

    /// `h_w S_t + b_t` for each output row `w` of type `t`.
    pub fn own(&self, own: Tensor<2>, types: &GroupTensors) -> Tensor<2> {
        types.map(own, |t, rows| rows.matmul(self.self_weights[t].val()) + self.biases[t].val().unsqueeze::<2>())
    }

    pub fn forward(&self, x: Tensor<2>, e: &EdgeTensors) -> Tensor<2> {
        let neighbors = relation_sum(&x, e, self.output, |r| self.neighbor_weights[r].val(), &self.edge_weights);
        self.own(e.own_rows(x), out_types(e)) + neighbors
    }
}
