//! The GPU (burn-wgpu; software Vulkan in CI) against the CPU: one training step of every model,
//! with and without edge features, and of the typed models, the edge kernel on either device;
//! and the GPU's kernel against its own gather/scatter reference.
#![cfg(feature = "gpu")]

use crate::common;
use crate::common::{
    DROPOUT, EDGE_KINDS, assert_same_step, edge_model, graph, records, records_with_edges, step, step_spec,
};
use burn::prelude::*;
use burn::tensor::DeviceKind;
use gnn::kernel::{Aggregation, uses_kernel};
use schemas::BatchNegatives;
use schemas::model::ModelKind;

#[test]
fn a_training_step_on_the_gpu_equals_the_cpu() {
    let gpu = Device::wgpu(DeviceKind::DefaultDevice).autodiff();
    let cpu = Device::flex().autodiff();
    assert!(uses_kernel(Aggregation::Auto, &gpu), "the GPU runs the edge kernel");
    let (n, dim) = (40, 4);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat, ModelKind::Gine] {
        for prune in [true, false] {
            let on_gpu = step(kind, &recs, dim, prune, (&gpu, Aggregation::Auto));
            let on_cpu = step(kind, &recs, dim, prune, (&cpu, Aggregation::Auto));
            let reference = step(kind, &recs, dim, prune, (&gpu, Aggregation::Reference));
            assert_same_step(&format!("{kind:?} prune {prune}"), on_gpu.clone(), on_cpu);
            assert_same_step(&format!("{kind:?} prune {prune}, the GPU's reference"), on_gpu, reference);
        }
    }
}

#[test]
fn a_training_step_with_edge_features_on_the_gpu_equals_the_cpu() {
    let gpu = Device::wgpu(DeviceKind::DefaultDevice).autodiff();
    let cpu = Device::flex().autodiff();
    let (n, dim) = (40, 4);
    let recs = records_with_edges(n, dim);
    for kind in EDGE_KINDS {
        let (spec, batches) = edge_model(kind, dim, true);
        let run = |device: &Device| step_spec(&spec, &recs, &batches, DROPOUT, (device, Aggregation::Auto));
        assert_same_step(&format!("{kind:?} with edge features"), run(&gpu), run(&cpu));
    }
}

#[test]
fn a_typed_training_step_on_the_gpu_equals_the_cpu() {
    let gpu = Device::wgpu(DeviceKind::DefaultDevice).autodiff();
    let cpu = Device::flex().autodiff();
    let recs = common::typed::typed_records(&common::typed::typed_graph());
    for (kind, bases) in common::typed::MODELS {
        let spec = common::typed::typed_spec(kind, bases);
        let batches = gnn::batch::BatchSpec::plain(schemas::layers::Layers::every(2)).reading(&spec);
        let run = |device: &Device| step_spec(&spec, &recs, &batches, DROPOUT, (device, Aggregation::Auto));
        assert_same_step(&format!("{kind:?} bases {bases}"), run(&gpu), run(&cpu));
    }
}

#[test]
fn a_link_training_step_on_the_gpu_equals_the_cpu() {
    let gpu = Device::wgpu(DeviceKind::DefaultDevice).autodiff();
    let cpu = Device::flex().autodiff();
    let (n, dim) = (40, 4);
    let (edges, features) = graph(n, dim);
    let links = common::link_records(&records(n, 2, &edges, &features), &edges, 16);
    for decoder in [schemas::task::Decoder::Dot, schemas::task::Decoder::Mlp] {
        let spec = common::link_spec(ModelKind::Sage, dim, decoder);
        let run = |device: &Device| {
            common::link_step(&spec, &links, BatchNegatives::Destinations, (device, Aggregation::Auto))
        };
        assert_same_step(&format!("link step, {decoder:?}"), run(&gpu), run(&cpu));
    }
}
