//! The GPU (burn-wgpu; software Vulkan in CI) against the CPU: one training step of every model,
//! gather/scatter aggregation on the GPU against the edge-partitioned kernel on the CPU.
#![cfg(feature = "gpu")]

mod common;

use burn::prelude::*;
use burn::tensor::DeviceKind;
use common::{assert_same_step, graph, records, step};
use gnn::kernel::{Aggregation, uses_kernel};
use schemas::model::ModelKind;

#[test]
fn a_training_step_on_the_gpu_equals_the_cpu() {
    let gpu = Device::wgpu(DeviceKind::DefaultDevice).autodiff();
    let cpu = Device::flex().autodiff();
    assert!(!uses_kernel(Aggregation::Auto, &gpu), "the GPU runs the reference aggregation");
    let (n, dim) = (40, 4);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat] {
        for prune in [true, false] {
            let on_gpu = step(kind, &recs, dim, prune, (&gpu, Aggregation::Auto));
            let on_cpu = step(kind, &recs, dim, prune, (&cpu, Aggregation::Auto));
            assert_same_step(&format!("{kind:?} prune {prune}"), on_gpu, on_cpu);
        }
    }
}
