//! The kernel's backward pass, registered with burn's autodiff.
//!
//! For `out = A(coef) x` (the aggregation over the plan's edges):
//! - the input's gradient is the transposed aggregation of the output's gradient, which the
//!   plan's source-sorted copy runs with the same partitioning;
//! - each coefficient's gradient is the dot product of the output gradient at its destination
//!   and the input at its source (per head).

use burn::backend::Autodiff;
use burn::backend::Backend;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;

use super::EdgeOps;
use super::plan::PlanRef;

#[derive(Debug)]
struct EdgeAggregate;

impl<B: Backend + EdgeOps> Backward<B, 2> for EdgeAggregate {
    /// The forward's input and coefficients (each kept only if the other needs a gradient),
    /// the plan, and which way the forward ran.
    type State = (Option<FloatTensor<B>>, Option<FloatTensor<B>>, PlanRef, bool, usize);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (x, coef, plan, transpose, heads) = ops.state;
        let [x_node, coef_node] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let (Some(node), Some(x)) = (coef_node, x) {
            grads.register::<B>(node.id, B::edge_coef_grad(grad.clone(), x, plan.clone(), transpose, heads));
        }
        if let (Some(node), Some(coef)) = (x_node, coef) {
            grads.register::<B>(node.id, B::edge_aggregate(grad, coef, plan, !transpose));
        }
    }
}

impl<B: Backend + EdgeOps, C: CheckpointStrategy> EdgeOps for Autodiff<B, C> {
    fn edge_aggregate(
        x: FloatTensor<Self>,
        coef: FloatTensor<Self>,
        plan: PlanRef,
        transpose: bool,
    ) -> FloatTensor<Self> {
        let (x_tracked, coef_tracked) = (x.is_tracked(), coef.is_tracked());
        let heads = burn::backend::TensorMetadata::shape(coef.primitive())[1];
        let guards = [x.node(), coef.node()];
        let (x, coef) = (x.into_primitive(), coef.into_primitive());
        let out = B::edge_aggregate(x.clone(), coef.clone(), plan.clone(), transpose);
        match EdgeAggregate.prepare::<C>(guards).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                // The coefficients' gradient needs the input, and the input's the coefficients.
                let state = (coef_tracked.then_some(x), x_tracked.then_some(coef), plan, transpose, heads);
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    /// Only ever called inside a backward pass, on values that need no gradient of their own.
    fn edge_coef_grad(
        g: FloatTensor<Self>,
        x: FloatTensor<Self>,
        plan: PlanRef,
        transpose: bool,
        heads: usize,
    ) -> FloatTensor<Self> {
        FloatTensor::<Self>::new(B::edge_coef_grad(g.into_primitive(), x.into_primitive(), plan, transpose, heads))
    }
}
