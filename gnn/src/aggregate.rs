//! Neighbor aggregation. [`scatter_sum`] is gather/scatter over burn tensor ops: the reference
//! the edge-partitioned kernel ([`crate::kernel`]) is tested against, and the path on backends
//! the kernel does not cover (the GPU). [`EdgeTensors`] carries a layer's edges (and their
//! features) to the device and runs whichever of the two the batch was built for.
//!
//! Two kinds of sums: node rows along the edges ([`EdgeTensors::sum`], `out[dst] += coef x[src]`),
//! and one row per edge into its destination ([`EdgeTensors::sum_edge_rows`]: edge features,
//! per-edge messages), which the kernel runs over a plan whose source rows are the edges.

use burn::prelude::*;
use burn::tensor::{IndexingUpdateOp, Int, TensorData};

use crate::batch::{LayerEdges, LayerPlans};
use crate::hetero::GroupTensors;
use crate::kernel::{Aggregation, edge_sum, edge_sum_transposed, uses_kernel};

/// An end of an edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Src,
    Dst,
}

/// A layer's edges as tensors on a device.
#[derive(Debug, Clone)]
pub struct EdgeTensors {
    pub rows_in: usize,
    pub rows_out: usize,
    pub src: Tensor<1, Int>,
    pub dst: Tensor<1, Int>,
    /// `[edges, 1]` each.
    pub gcn_coef: Tensor<2>,
    pub mean_coef: Tensor<2>,
    /// `[rows_out, 1]`.
    pub gcn_self: Tensor<2>,
    /// The input row of each output row, when not `0..rows_out` (see [`LayerEdges::own`]).
    pub own: Option<Tensor<1, Int>>,
    pub edges: usize,
    /// `[edges, edge_dim]`, as the model reads them; `None` when the layer reads none.
    pub features: Option<Tensor<2>>,
    /// The kernel's plans, when the device runs the kernel.
    pub plans: Option<LayerPlans>,
    /// A typed layer: its edges per relation (see [`crate::batch::LayerRelations`]); empty
    /// for a homogeneous layer.
    pub relations: Vec<EdgeTensors>,
    /// A typed layer: its output rows by node type.
    pub out_types: Option<GroupTensors>,
}

impl EdgeTensors {
    pub fn new(e: &LayerEdges, device: &Device, aggregation: Aggregation) -> Self {
        let n = e.src.len();
        let plans = uses_kernel(aggregation, device).then(|| e.plans());
        let column = |v: &[f32]| Tensor::<2>::from_data(TensorData::new(v.to_vec(), [v.len(), 1]), device);
        EdgeTensors {
            rows_in: e.rows_in,
            rows_out: e.rows_out,
            src: Tensor::from_data(TensorData::new(e.src.clone(), [n]), device),
            dst: Tensor::from_data(TensorData::new(e.dst.clone(), [n]), device),
            gcn_coef: column(&e.gcn_coef),
            mean_coef: column(&e.mean_coef),
            gcn_self: column(&e.gcn_self),
            own: e.own.as_ref().map(|own| Tensor::from_data(TensorData::new(own.clone(), [own.len()]), device)),
            edges: n,
            features: (e.edge_dim > 0)
                .then(|| Tensor::from_data(TensorData::new(e.features.clone(), [n, e.edge_dim]), device)),
            plans,
            relations: e
                .typed
                .iter()
                .flat_map(|t| &t.relations)
                .map(|r| EdgeTensors::new(r, device, aggregation))
                .collect(),
            out_types: e.typed.as_ref().map(|t| GroupTensors::new(&t.out_types, device)),
        }
    }

    /// `out[dst] += coef * x[src]` over the edges (`coef` is `[edges, 1]`), `rows_out` rows.
    pub fn sum(&self, x: Tensor<2>, coef: &Tensor<2>) -> Tensor<2> {
        match &self.plans {
            Some(plans) => edge_sum(x, coef.clone(), &plans.edges),
            None => scatter_sum(x, &self.src, &self.dst, Some(coef), self.rows_out),
        }
    }

    /// `out[dst] += x[src]` over the edges, `rows_out` rows.
    pub fn sum_unweighted(&self, x: Tensor<2>) -> Tensor<2> {
        match &self.plans {
            Some(plans) => {
                let ones = Tensor::<2>::ones([self.edges, 1], &x.device());
                edge_sum(x, ones, &plans.edges)
            }
            None => scatter_sum(x, &self.src, &self.dst, None, self.rows_out),
        }
    }

    /// `out[dst[e]] += coef[e] * m[e]`: one row of `m` (`[edges, width]`) per edge, summed into
    /// its destination (`coef` is `[edges, 1]`, `None` for 1); `rows_out` rows.
    pub fn sum_edge_rows(&self, m: Tensor<2>, coef: Option<&Tensor<2>>) -> Tensor<2> {
        let [_, width] = m.dims();
        let device = m.device();
        if self.edges == 0 {
            return Tensor::zeros([self.rows_out, width], &device);
        }
        match self.plans.as_ref().and_then(|p| p.edge_rows.as_ref()) {
            Some(plan) => {
                let coef = coef.cloned().unwrap_or_else(|| Tensor::ones([self.edges, 1], &device));
                edge_sum(m, coef, plan)
            }
            None => {
                let m = match coef {
                    Some(c) => m * c.clone(),
                    None => m,
                };
                Tensor::zeros([self.rows_out, width], &device).select_assign(
                    0,
                    self.dst.clone(),
                    m,
                    IndexingUpdateOp::Add,
                )
            }
        }
    }

    /// Each output row's mean of its in-edges' features (`[rows_out, edge_dim]`, zero for a row
    /// without in-edges), or `None` when the layer reads none.
    pub fn mean_edge_features(&self) -> Option<Tensor<2>> {
        self.features.clone().map(|f| self.sum_edge_rows(f, Some(&self.mean_coef)))
    }

    /// Per head `h`: `out[dst, h] += alpha[e, h] * x[src, h]` over the edges and then one
    /// self-loop per output row (`alpha` is `[edges + rows_out, heads]`, `x` is
    /// `[rows_in, heads * width]`).
    pub fn sum_with_self_loops(&self, x: Tensor<2>, alpha: Tensor<2>) -> Tensor<2> {
        if let Some(plans) = &self.plans {
            return edge_sum(x, alpha, &plans.looped);
        }
        let ([rows, cols], heads) = (x.dims(), alpha.dims()[1]);
        let (src, dst) = self.with_self_loops();
        let entries = alpha.dims()[0];
        let messages = x.reshape([rows, heads, cols / heads]).select(0, src) * alpha.reshape([entries, heads, 1]);
        Tensor::<3>::zeros([self.rows_out, heads, cols / heads], &messages.device())
            .select_assign(0, dst, messages, IndexingUpdateOp::Add)
            .reshape([self.rows_out, cols])
    }

    /// Each output row's own input row of `x` (`x`'s rows are the layer's input rows).
    pub fn own_rows<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let own_plan = self.plans.as_ref().and_then(|p| p.own.as_ref());
        match (&self.own, own_plan) {
            (Some(_), Some(plan)) => {
                let mut dims = x.dims();
                let (rows, width) = (dims[0], dims[1..].iter().product());
                let ones = Tensor::<2>::ones([self.rows_out, 1], &x.device());
                dims[0] = self.rows_out;
                edge_sum(x.reshape([rows, width]), ones, plan).reshape(dims)
            }
            (Some(own), None) => x.select(0, own.clone()),
            (None, _) => x.slice(0..self.rows_out),
        }
    }

    /// Each looped edge's row of `x` (the edges, then one self-loop per output row; see
    /// [`EdgeTensors::with_self_loops`]): `x`'s input rows at the edges' sources (`end` is
    /// [`End::Src`], `x` is `[rows_in, k]`) or its output rows at their destinations
    /// ([`End::Dst`], `[rows_out, k]`). `[edges + rows_out, k]`.
    pub fn looped_rows(&self, x: Tensor<2>, end: End) -> Tensor<2> {
        if let Some(a) = self.plans.as_ref().and_then(|p| p.attention.as_ref()) {
            let plan = match end {
                End::Src => &a.src,
                End::Dst => &a.dst,
            };
            let ones = Tensor::<2>::ones([plan.rows_out, 1], &x.device());
            return edge_sum(x, ones, plan);
        }
        let (src, dst) = self.with_self_loops();
        x.select(0, if end == End::Src { src } else { dst })
    }

    /// Per output row, the sum of its looped edges' rows of `m` (`[edges + rows_out, k]`):
    /// `[rows_out, k]`.
    pub fn sum_looped_rows(&self, m: Tensor<2>) -> Tensor<2> {
        if let Some(a) = self.plans.as_ref().and_then(|p| p.attention.as_ref()) {
            let ones = Tensor::<2>::ones([a.dst.rows_out, 1], &m.device());
            return edge_sum_transposed(m, ones, &a.dst);
        }
        let k = m.dims()[1];
        let (_, dst) = self.with_self_loops();
        Tensor::<2>::zeros([self.rows_out, k], &m.device()).select_assign(0, dst, m, IndexingUpdateOp::Add)
    }

    /// The edges followed by one self-loop per output row, as (src, dst).
    pub fn with_self_loops(&self) -> (Tensor<1, Int>, Tensor<1, Int>) {
        let device = self.src.device();
        let out: Vec<i64> = (0..self.rows_out as i64).collect();
        let out: Tensor<1, Int> = Tensor::from_data(TensorData::new(out, [self.rows_out]), &device);
        let own = self.own.clone().unwrap_or_else(|| out.clone());
        (Tensor::cat(vec![self.src.clone(), own], 0), Tensor::cat(vec![self.dst.clone(), out], 0))
    }
}

/// `out[dst] += coef * x[src]` over the edges, `out` with `rows_out` rows; `coef` is `[edges, 1]`
/// (or `None` for 1).
pub fn scatter_sum(
    x: Tensor<2>,
    src: &Tensor<1, Int>,
    dst: &Tensor<1, Int>,
    coef: Option<&Tensor<2>>,
    rows_out: usize,
) -> Tensor<2> {
    let [_, width] = x.dims();
    let out = Tensor::<2>::zeros([rows_out, width], &x.device());
    if src.dims()[0] == 0 {
        return out;
    }
    let messages = x.select(0, src.clone());
    let messages = match coef {
        Some(c) => messages * c.clone(),
        None => messages,
    };
    out.select_assign(0, dst.clone(), messages, IndexingUpdateOp::Add)
}
