//! The kernel on burn's Flex CPU backend: the tensors' f32 storage handed to [`super::cpu`].

use burn::backend::TensorMetadata;
use burn::backend::flex::{Flex, FlexTensor};
use burn::tensor::{DType, TensorData};

use super::EdgeOps;
use super::cpu::{self, Layout};
use super::plan::PlanRef;

/// The tensor's values in row-major order (copied only when it is a strided view).
fn values(t: &FlexTensor) -> std::borrow::Cow<'_, [f32]> {
    assert_eq!(t.dtype(), DType::F32, "the edge kernel runs on f32 tensors");
    match t.as_slice::<f32>() {
        Some(v) => std::borrow::Cow::Borrowed(v),
        None => std::borrow::Cow::Owned(t.to_contiguous().as_slice::<f32>().expect("contiguous").to_vec()),
    }
}

fn dims2(t: &FlexTensor) -> [usize; 2] {
    let shape = t.shape();
    assert_eq!(shape.num_dims(), 2, "the edge kernel takes 2-d tensors");
    [shape[0], shape[1]]
}

impl EdgeOps for Flex {
    fn edge_aggregate(x: FlexTensor, coef: FlexTensor, plan: PlanRef, transpose: bool) -> FlexTensor {
        let csr = plan.csr(transpose);
        let [read_rows, cols] = dims2(&x);
        let [edges, heads] = dims2(&coef);
        let expect_read = if transpose { plan.rows_out } else { plan.rows_in };
        assert!(read_rows >= expect_read && edges == csr.edges(), "edge kernel: shapes do not match the plan");
        let layout = Layout { heads, cols };
        let out = cpu::aggregate(csr, &values(&x), &values(&coef), layout, plan.threads);
        FlexTensor::from_data(TensorData::new(out, [csr.rows(), cols]))
    }

    fn edge_coef_grad(g: FlexTensor, x: FlexTensor, plan: PlanRef, transpose: bool, heads: usize) -> FlexTensor {
        let csr = plan.csr(transpose);
        let [_, cols] = dims2(&x);
        let grad = cpu::coef_grad(csr, &values(&g), &values(&x), Layout { heads, cols }, plan.threads);
        FlexTensor::from_data(TensorData::new(grad, [csr.edges(), heads]))
    }
}
