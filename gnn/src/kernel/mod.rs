//! Edge-partitioned neighbor aggregation: a CPU kernel with its own backward pass.
//!
//! `out[w] = sum over edges (w <- r) of coef[e, h] * x[r]`, per head `h`. The edges are sorted
//! by destination and cut into blocks of equal edge counts ([`plan`]); threads take runs of
//! blocks, so no two threads write the same row and a hub's edges are spread over threads
//! ([`cpu`]). The backward pass runs the same kernel over the source-sorted edges
//! ([`autodiff`]).
//!
//! The rows a plan reads may be the edges themselves (`src[e] = e`; the batch builds such a plan
//! for a layer with edge features, `crate::batch::LayerPlans::edge_rows`): the kernel then sums
//! one row per edge into its destination (edge features for GraphSAGE's mean and GAT's
//! self-loop fill, GINE's per-edge messages), partitioned by destination like any other plan;
//! its backward writes each edge's row once, from its destination's gradient.
//!
//! It is a burn backend extension implemented for Flex (the CPU, [`cpu`]) and, in builds with
//! the `gpu` feature, for burn's cubecl backend (the GPU, `cube`), with Autodiff over either.
//! The gather/scatter reference in [`crate::aggregate`] is what the tests compare both against;
//! [`Aggregation`] picks one per device.

mod autodiff;
pub mod cpu;
#[cfg(feature = "gpu")]
mod cube;
mod flex;
pub mod plan;

use burn::backend::{Dispatch, DispatchDevice, backend_extension, tensor::FloatTensor};
use burn::prelude::*;

pub use plan::{EdgePlan, PlanRef};

#[backend_extension(Flex, Cube: cfg(feature = "gpu"), Autodiff)]
pub trait EdgeOps: burn::backend::Backend {
    /// Aggregates `x` (`[rows read, heads * width]`) over the plan's edges with coefficients
    /// `coef` (`[edges, heads]`): into destination rows, or source rows when `transpose`.
    fn edge_aggregate(
        x: FloatTensor<Self>,
        coef: FloatTensor<Self>,
        plan: PlanRef,
        transpose: bool,
    ) -> FloatTensor<Self>;

    /// The gradient of [`EdgeOps::edge_aggregate`] with respect to `coef`, given the output's
    /// gradient `g` and the input `x`: `[edges, heads]`.
    fn edge_coef_grad(
        g: FloatTensor<Self>,
        x: FloatTensor<Self>,
        plan: PlanRef,
        transpose: bool,
        heads: usize,
    ) -> FloatTensor<Self>;
}

pub use schemas::job::Aggregation;

/// Whether `device` runs the kernel under `choice`: Flex (the CPU) and, with the `gpu`
/// feature, the cubecl backend (the GPU) have it.
pub fn uses_kernel(choice: Aggregation, device: &Device) -> bool {
    let has_kernel = match device.clone().inner().as_dispatch() {
        DispatchDevice::Flex(_) => true,
        #[cfg(feature = "gpu")]
        DispatchDevice::Cube(_) => true,
        #[allow(unreachable_patterns)]
        _ => false,
    };
    has_kernel && choice != Aggregation::Reference
}

/// [`EdgeOps::edge_aggregate`] on high-level tensors (forward direction).
pub fn edge_sum(x: Tensor<2>, coef: Tensor<2>, plan: &PlanRef) -> Tensor<2> {
    let out = <Dispatch as EdgeOps>::edge_aggregate(x.into_dispatch(), coef.into_dispatch(), plan.clone(), false);
    Tensor::from_dispatch(out)
}

/// [`EdgeOps::edge_aggregate`] transposed: `out[src] += coef * x[dst]`, `x` holding the
/// plan's destination rows.
pub fn edge_sum_transposed(x: Tensor<2>, coef: Tensor<2>, plan: &PlanRef) -> Tensor<2> {
    let out = <Dispatch as EdgeOps>::edge_aggregate(x.into_dispatch(), coef.into_dispatch(), plan.clone(), true);
    Tensor::from_dispatch(out)
}
