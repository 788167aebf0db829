//! Neighbor aggregation as gather/scatter over burn tensor ops: the reference every other
//! aggregation kernel is tested against, and the path on every backend.

use burn::prelude::*;
use burn::tensor::{IndexingUpdateOp, Int, TensorData};

use crate::batch::LayerEdges;

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
    pub edges: usize,
}

impl EdgeTensors {
    pub fn new(e: &LayerEdges, device: &Device) -> Self {
        let n = e.src.len();
        let column = |v: &[f32]| Tensor::<2>::from_data(TensorData::new(v.to_vec(), [v.len(), 1]), device);
        EdgeTensors {
            rows_in: e.rows_in,
            rows_out: e.rows_out,
            src: Tensor::from_data(TensorData::new(e.src.clone(), [n]), device),
            dst: Tensor::from_data(TensorData::new(e.dst.clone(), [n]), device),
            gcn_coef: column(&e.gcn_coef),
            mean_coef: column(&e.mean_coef),
            gcn_self: column(&e.gcn_self),
            edges: n,
        }
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
