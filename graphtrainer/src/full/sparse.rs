//! A GCN's layer 0 as a sparse product. Bag-of-words features are mostly zeros (Cora: 18 of
//! 1,433 words a paper, 1.3%), and a GCN layer reads its input only through `X W`. Over the
//! nonzeros, `X W` is the aggregation kernel's sum with the features as edges: from column `j`
//! (row `j` of `W`) to row `i`, weighted by `X[i, j]` (`gnn::kernel::edge_sum`). Its backward
//! is the same kernel over the transposed plan, `dW = X^T dH`, the only gradient layer 0 needs
//! (the features take none). So a pass costs `nonzeros x width` multiply-adds each way, where
//! the dense product costs `rows x input_dim x width`: 80 times fewer on Cora.
//!
//! Dropout on the features scales the nonzeros alone (a zero stays zero), drawn as
//! `dropout::drop_features` draws them, per node and column. The product equals the dense
//! one's up to the order of its sums.

use std::sync::Arc;

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::kernel::{EdgePlan, PlanRef, edge_sum};
use gnn::model::Dropout;

use super::dropout::row_stream;

/// Past 1 in this many values nonzero, the dense product runs (the sparse one's plan costs
/// about 28 bytes a nonzero beside the dense rows' 4 a value).
const SPARSE_PAST: usize = 16;

/// Layer 0's input rows (`[own | halo]`) by their nonzero values.
pub struct SparseRows {
    /// Edges from a column (`rows_in`: the input width) to a row (`rows_out`: the rows).
    plan: PlanRef,
    /// Each nonzero's row and column, row by row, and its value: the plan's edges in order.
    rows: Vec<u32>,
    columns: Vec<u32>,
    values: Vec<f32>,
}

impl SparseRows {
    /// `rows` (`width` values each) by their nonzeros, when at most 1 in [`SPARSE_PAST`] is
    /// one; `threads` run the kernel.
    pub fn of(rows: &[f32], width: usize, threads: usize) -> Option<SparseRows> {
        let nonzero = rows.iter().filter(|v| **v != 0.0).count();
        if width == 0 || rows.is_empty() || nonzero * SPARSE_PAST > rows.len() {
            return None;
        }
        let (mut at_rows, mut columns, mut values) =
            (Vec::with_capacity(nonzero), Vec::with_capacity(nonzero), Vec::with_capacity(nonzero));
        for (i, row) in rows.chunks(width).enumerate() {
            for (j, &v) in row.iter().enumerate().filter(|(_, v)| **v != 0.0) {
                at_rows.push(i as u32);
                columns.push(j as u32);
                values.push(v);
            }
        }
        let plan = Arc::new(EdgePlan::new(width, rows.len() / width, &columns, &at_rows).with_threads(threads));
        Some(SparseRows { plan, rows: at_rows, columns, values })
    }

    /// `X W` for layer 0's `weight` (`[input width, out]`), the features of the rows' nodes
    /// (`ids`, by row) dropped by `dropout`: `[rows, out]`.
    pub fn product(&self, weight: Tensor<2>, ids: &[i64], dropout: Option<Dropout>, device: &Device) -> Tensor<2> {
        let coef = match dropout.filter(|d| d.rate > 0.0) {
            None => self.values.clone(),
            Some(d) => self.dropped(ids, d),
        };
        let coef = Tensor::<2>::from_data(TensorData::new(coef, [self.values.len(), 1]), device);
        edge_sum(weight, coef, &self.plan)
    }

    /// The values after dropout: each row's stream drawn at its columns.
    fn dropped(&self, ids: &[i64], d: Dropout) -> Vec<f32> {
        let scale = 1.0 / (1.0 - d.rate);
        let mut out = Vec::with_capacity(self.values.len());
        let mut at = 0;
        while at < self.rows.len() {
            let row = self.rows[at];
            let stream = row_stream(d, ids[row as usize], 0);
            while at < self.rows.len() && self.rows[at] == row {
                let keep = stream.unit_at(u64::from(self.columns[at])) >= d.rate;
                out.push(if keep { self.values[at] * scale } else { 0.0 });
                at += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::full::dropout::drop_features;

    fn values(t: Tensor<2>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    /// Rows of `width` values, about one in `every` nonzero, and some rows all zeros.
    fn sparse_rows(rows: usize, width: usize, every: u64) -> Vec<f32> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..rows * width)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let zero_row = (i / width) % 7 == 3;
                match !zero_row && (state >> 33).is_multiple_of(every) {
                    true => ((state >> 40) % 1000) as f32 / 250.0 - 2.0,
                    false => 0.0,
                }
            })
            .collect()
    }

    /// The product and `W`'s gradient over the nonzeros equal the dense product's and
    /// `X^T dH`, with and without dropout (drawn as the dense rows' is).
    #[test]
    fn the_sparse_product_and_its_gradient_are_the_dense_ones() {
        let (rows, width, out) = (60, 50, 7);
        let x = sparse_rows(rows, width, 20);
        let ids: Vec<i64> = (0..rows as i64).map(|i| i * 13 + 5).collect();
        let sparse = SparseRows::of(&x, width, 1).expect("1 in 20 is sparse");
        let device = Device::flex().autodiff();
        let w = Tensor::<2>::from_data(TensorData::new(sparse_rows(width, out, 1), [width, out]), &device);
        let g = Tensor::<2>::from_data(TensorData::new(sparse_rows(rows, out, 1), [rows, out]), &device);
        for dropout in [None, Some(Dropout { seed: 3, step: 11, rate: 0.5, attention_rate: 0.0 })] {
            let dense_x = dropout.map_or_else(|| x.clone(), |d| drop_features(&x, &ids, width, d));
            let dense_x = Tensor::<2>::from_data(TensorData::new(dense_x, [rows, width]), &device);
            let (w_dense, w_sparse) = (w.clone().require_grad(), w.clone().require_grad());
            let dense = dense_x.matmul(w_dense.clone());
            let product = sparse.product(w_sparse.clone(), &ids, dropout, &device);
            let (a, b) = (values(dense.clone()), values(product.clone()));
            assert!(a.iter().zip(&b).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + a.abs())), "{dropout:?}");
            let dense_grad = w_dense.grad(&(dense * g.clone()).sum().backward()).unwrap();
            let sparse_grad = w_sparse.grad(&(product * g.clone()).sum().backward()).unwrap();
            let (a, b) = (values(dense_grad), values(sparse_grad));
            assert!(a.iter().zip(&b).all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + a.abs())), "{dropout:?}: dW");
        }
    }

    #[test]
    fn dense_rows_stay_dense() {
        assert!(SparseRows::of(&sparse_rows(40, 30, 4), 30, 1).is_none(), "1 in 4 nonzero");
        assert!(SparseRows::of(&[], 30, 1).is_none());
    }
}
