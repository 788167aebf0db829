//! Neighbor aggregation. [`scatter_sum`] is gather/scatter over burn tensor ops: the reference
//! the edge-partitioned kernel ([`crate::kernel`]) is tested against, and the path on backends
//! the kernel does not cover (the GPU). [`EdgeTensors`] carries a layer's edges to the device and
//! runs whichever of the two the batch was built for.

use burn::prelude::*;
use burn::tensor::{IndexingUpdateOp, Int, TensorData};

use crate::batch::LayerEdges;
use crate::kernel::{Aggregation, PlanRef, edge_sum, uses_kernel};

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
    /// The kernel's plans (when the device runs the kernel): the edges, and the edges followed
    /// by one self-loop per output row (GAT's attention runs over those).
    pub plans: Option<(PlanRef, PlanRef)>,
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
            plans,
        }
    }

    /// `out[dst] += coef * x[src]` over the edges (`coef` is `[edges, 1]`), `rows_out` rows.
    pub fn sum(&self, x: Tensor<2>, coef: &Tensor<2>) -> Tensor<2> {
        match &self.plans {
            Some((plan, _)) => edge_sum(x, coef.clone(), plan),
            None => scatter_sum(x, &self.src, &self.dst, Some(coef), self.rows_out),
        }
    }

    /// Per head `h`: `out[dst, h] += alpha[e, h] * x[src, h]` over the edges and then one
    /// self-loop per output row (`alpha` is `[edges + rows_out, heads]`, `x` is
    /// `[rows_in, heads * width]`).
    pub fn sum_with_self_loops(&self, x: Tensor<2>, alpha: Tensor<2>) -> Tensor<2> {
        if let Some((_, looped)) = &self.plans {
            return edge_sum(x, alpha, looped);
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
        match &self.own {
            Some(own) => x.select(0, own.clone()),
            None => x.slice(0..self.rows_out),
        }
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
