//! The edge-partitioned kernel against the gather/scatter reference, forward and backward, on
//! random graphs with hubs, isolated nodes and no edges at all: node rows along the edges, with
//! one coefficient or one per head, edge rows into their destinations, and the row copies of
//! attention and distinct inputs. On the CPU and, in builds with the `gpu` feature, on the GPU
//! (software Vulkan in CI).

use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::aggregate::{EdgeTensors, End, scatter_sum};
use gnn::batch::LayerEdges;
use gnn::kernel::{Aggregation, EdgePlan, edge_sum, uses_kernel};
use gnn::rng::Stream;
use std::sync::Arc;

/// A layer's edges: `hub_edges` into row 0, `edges` more uniformly at random; rows past
/// `rows_out / 2` never receive an edge and the last input row is never read.
fn random_layer(seed: u64, rows_in: usize, rows_out: usize, edges: usize, hub_edges: usize) -> LayerEdges {
    let mut s = Stream::new(&[seed]);
    let mut e = LayerEdges { rows_in, rows_out, ..LayerEdges::default() };
    let reach = (rows_out / 2).max(1) as u64;
    for i in 0..edges + hub_edges {
        e.src.push((s.next_u64() % (rows_in as u64 - 1)) as i64);
        e.dst.push(if i < hub_edges { 0 } else { (s.next_u64() % reach) as i64 });
    }
    let n = e.src.len();
    e.gcn_coef = (0..n).map(|_| s.unit()).collect();
    e.mean_coef = e.gcn_coef.clone();
    e.gcn_self = vec![0.5; rows_out];
    e.edge_keys = vec![(0, 0); n];
    e
}

fn random(seed: u64, shape: [usize; 2], device: &Device) -> Tensor<2> {
    let mut s = Stream::new(&[seed, 7]);
    let values: Vec<f32> = (0..shape[0] * shape[1]).map(|_| s.unit() * 2.0 - 1.0).collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// Whether the reference runs on `device` for a layer with `rows_out` output rows: burn's GPU
/// `select_assign` divides by the output's rows (a layer always has some: a batch holds a
/// record), so the empty case is compared on the CPU only.
fn reference_runs(device: &Device, rows_out: usize) -> bool {
    rows_out > 0 || matches!(device.clone().inner().as_dispatch(), burn::backend::DispatchDevice::Flex(_))
}

/// The training devices the kernel runs on: the CPU, and the GPU in builds that have it.
fn devices() -> Vec<Device> {
    let mut devices = vec![Device::flex().autodiff()];
    if cfg!(feature = "gpu") {
        devices.extend(gnn::device(schemas::job::DeviceKind::Gpu).ok().map(|d| d.autodiff()));
        assert_eq!(devices.len(), 2, "a gpu build without a usable adapter");
    }
    devices
}

fn values(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

fn assert_close(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-4 * (1.0 + x.abs().max(y.abs())), "{what}[{i}]: {x} vs {y}");
    }
}

/// (rows_in, rows_out, edges, hub edges): a hub that spans many blocks, a small graph, a layer
/// without edges, and one without output rows.
const CASES: [(usize, usize, usize, usize); 5] =
    [(300, 120, 2_000, 9_000), (12, 7, 15, 4), (50, 20, 0, 0), (9, 0, 0, 0), (2_000, 1_500, 30_000, 0)];

#[test]
fn forward_and_backward_match_the_reference() {
    for device in devices() {
        forward_and_backward_on(&device);
    }
}

fn forward_and_backward_on(device: &Device) {
    let device = device.clone();
    for (case, &(rows_in, rows_out, edges, hub)) in CASES.iter().enumerate() {
        let e = random_layer(case as u64, rows_in, rows_out, edges, hub);
        let n = e.src.len();
        let kernel = EdgeTensors::new(&e, &device, Aggregation::Auto);
        let reference = EdgeTensors::new(&e, &device, Aggregation::Reference);
        assert!(kernel.plans.is_some() && reference.plans.is_none(), "the kernel runs on {device:?}");
        let width = 6;
        let x = random(case as u64, [rows_in, width], &device);
        let coef = random(case as u64 + 100, [n, 1], &device);
        let weights = random(case as u64 + 200, [rows_out, width], &device);

        // The loss adds x itself so that x has a gradient even where no edge reads it (the
        // reference returns a constant when there are no edges).
        let run = |use_kernel: bool| {
            let (x, coef) = (x.clone().require_grad(), coef.clone().require_grad());
            let out = if use_kernel {
                kernel.sum(x.clone(), &coef)
            } else {
                scatter_sum(x.clone(), &reference.src, &reference.dst, Some(&coef), rows_out)
            };
            let loss = (out.clone() * weights.clone()).sum() + x.clone().sum();
            let grads = loss.backward();
            let grad = |t: &Tensor<2>| t.grad(&grads).map(|g| g.into_data().try_to_vec::<f32>().unwrap());
            (values(out.inner()), grad(&x).unwrap(), grad(&coef))
        };
        let (out_k, gx_k, gc_k) = run(true);
        let (out_r, gx_r, gc_r) = run(false);
        let what = format!("case {case}");
        assert_eq!(out_k.len(), rows_out * width);
        assert_close(&format!("{what} forward"), &out_k, &out_r);
        assert_close(&format!("{what} d/dx"), &gx_k, &gx_r);
        if n > 0 {
            assert_close(&format!("{what} d/dcoef"), &gc_k.unwrap(), &gc_r.unwrap());
        }
    }
}

#[test]
fn multi_head_attention_sums_match_the_reference() {
    for device in devices() {
        multi_head_on(&device);
    }
}

fn multi_head_on(device: &Device) {
    let device = device.clone();
    for (case, &(rows_in, rows_out, edges, hub)) in CASES.iter().enumerate() {
        if !reference_runs(&device, rows_out) {
            continue;
        }
        let e = random_layer(case as u64 + 10, rows_in, rows_out, edges, hub);
        let entries = e.src.len() + rows_out;
        let (heads, width) = (3, 4);
        let x = random(case as u64, [rows_in, heads * width], &device);
        let alpha = random(case as u64 + 1, [entries, heads], &device);
        let weights = random(case as u64 + 2, [rows_out, heads * width], &device);
        let run = |aggregation: Aggregation| {
            let layer = EdgeTensors::new(&e, &device, aggregation);
            let (x, alpha) = (x.clone().require_grad(), alpha.clone().require_grad());
            let out = layer.sum_with_self_loops(x.clone(), alpha.clone());
            let grads = (out.clone() * weights.clone()).sum().backward();
            let grad = |t: &Tensor<2>| t.grad(&grads).unwrap().into_data().try_to_vec::<f32>().unwrap();
            (values(out.inner()), grad(&x), grad(&alpha))
        };
        let (k, r) = (run(Aggregation::Auto), run(Aggregation::Reference));
        assert_close(&format!("case {case} forward"), &k.0, &r.0);
        assert_close(&format!("case {case} d/dx"), &k.1, &r.1);
        assert_close(&format!("case {case} d/dalpha"), &k.2, &r.2);
    }
}

#[test]
fn runs_without_autodiff_and_only_the_tracked_input_gets_a_gradient() {
    let e = random_layer(3, 40, 30, 100, 50);
    let src: Vec<u32> = e.src.iter().map(|&s| s as u32).collect();
    let dst: Vec<u32> = e.dst.iter().map(|&d| d as u32).collect();
    let plan = Arc::new(EdgePlan::new(40, 30, &src, &dst));
    let coef_values = Tensor::<2>::from_data(TensorData::new(e.gcn_coef.clone(), [e.src.len(), 1]), &Device::flex());

    // Inference device: no autodiff at all.
    let x = random(1, [40, 5], &Device::flex());
    let plain = values(edge_sum(x.clone(), coef_values.clone(), &plan));

    // Training device, coefficients constant (GCN's normalization): same values, x's gradient.
    let device = Device::flex().autodiff();
    let x = random(1, [40, 5], &device).require_grad();
    let coef = Tensor::<2>::from_data(TensorData::new(e.gcn_coef.clone(), [e.src.len(), 1]), &device);
    let out = edge_sum(x.clone(), coef.clone(), &plan);
    assert_eq!(values(out.clone().inner()), plain);
    let grads = out.sum().backward();
    assert!(x.grad(&grads).is_some());
    assert!(coef.grad(&grads).is_none());
}

#[test]
fn edge_row_sums_match_the_reference() {
    for device in devices() {
        edge_rows_on(&device);
    }
}

fn edge_rows_on(device: &Device) {
    let device = device.clone();
    for (case, &(rows_in, rows_out, edges, hub)) in CASES.iter().enumerate() {
        let mut e = random_layer(case as u64 + 20, rows_in, rows_out, edges, hub);
        let n = e.src.len();
        // The layer has edge features: its plans include the one over edge rows.
        e.edge_dim = 2;
        e.features = vec![0.5; n * 2];
        let width = 5;
        let m = random(case as u64 + 3, [n, width], &device);
        let coef = random(case as u64 + 4, [n, 1], &device);
        let weights = random(case as u64 + 5, [rows_out, width], &device);
        let run = |aggregation: Aggregation, weighted: bool| {
            let layer = EdgeTensors::new(&e, &device, aggregation);
            assert_eq!(
                layer.plans.as_ref().map(|p| p.edge_rows.is_some()),
                uses_kernel(aggregation, &device).then_some(true)
            );
            let (m, coef) = (m.clone().require_grad(), coef.clone().require_grad());
            let out = layer.sum_edge_rows(m.clone(), weighted.then_some(&coef));
            // As in the first test: m itself in the loss, for a gradient without edges.
            let grads = ((out.clone() * weights.clone()).sum() + m.clone().sum() + coef.clone().sum()).backward();
            let grad = |t: &Tensor<2>| t.grad(&grads).unwrap().into_data().try_to_vec::<f32>().unwrap();
            (values(out.inner()), grad(&m), grad(&coef))
        };
        for weighted in [false, true] {
            let (k, r) = (run(Aggregation::Auto, weighted), run(Aggregation::Reference, weighted));
            let what = format!("case {case} weighted {weighted}");
            assert_eq!(k.0.len(), rows_out * width);
            assert_close(&format!("{what} forward"), &k.0, &r.0);
            assert_close(&format!("{what} d/dm"), &k.1, &r.1);
            assert_close(&format!("{what} d/dcoef"), &k.2, &r.2);
        }
    }
}

/// GAT's row copies to the looped edges and their sums into destinations, and each output
/// row's own input row of a layer that reads distinct rows: kernel plans against `select`.
#[test]
fn attention_and_own_rows_match_the_reference() {
    for device in devices() {
        for (case, &(rows_in, rows_out, edges, hub)) in CASES.iter().enumerate() {
            if !reference_runs(&device, rows_out) {
                continue;
            }
            let mut e = random_layer(case as u64 + 30, rows_in, rows_out, edges, hub);
            e.attention = true;
            // Output row r reads input row (3 r) mod rows_in, as a layer over distinct rows does.
            e.own = Some((0..rows_out as i64).map(|r| (3 * r) % rows_in as i64).collect());
            let looped = e.src.len() + rows_out;
            let (x_in, x_out) =
                (random(case as u64 + 6, [rows_in, 3], &device), random(case as u64 + 7, [rows_out, 3], &device));
            let m = random(case as u64 + 8, [looped, 3], &device);
            let (w_looped, w_out) =
                (random(case as u64 + 9, [looped, 3], &device), random(case as u64 + 10, [rows_out, 3], &device));
            let run = |aggregation: Aggregation| {
                let layer = EdgeTensors::new(&e, &device, aggregation);
                let (x_in, x_out, m) =
                    (x_in.clone().require_grad(), x_out.clone().require_grad(), m.clone().require_grad());
                let src = layer.looped_rows(x_in.clone(), End::Src);
                let dst = layer.looped_rows(x_out.clone(), End::Dst);
                let summed = layer.sum_looped_rows(m.clone());
                let own = layer.own_rows(x_in.clone());
                let loss = ((src.clone() + dst.clone()) * w_looped.clone()).sum()
                    + ((summed.clone() + own.clone()) * w_out.clone()).sum()
                    + x_in.clone().sum()
                    + x_out.clone().sum()
                    + m.clone().sum();
                let grads = loss.backward();
                let grad = |t: &Tensor<2>| t.grad(&grads).unwrap().into_data().try_to_vec::<f32>().unwrap();
                let outs = [src, dst, summed, own].map(|t| values(t.inner()));
                (outs, [grad(&x_in), grad(&x_out), grad(&m)])
            };
            let (k, r) = (run(Aggregation::Auto), run(Aggregation::Reference));
            for (i, what) in ["src rows", "dst rows", "sums", "own rows"].iter().enumerate() {
                assert_close(&format!("{device:?} case {case} {what}"), &k.0[i], &r.0[i]);
            }
            for (i, what) in ["d/dx_in", "d/dx_out", "d/dm"].iter().enumerate() {
                assert_close(&format!("{device:?} case {case} {what}"), &k.1[i], &r.1[i]);
            }
        }
    }
}
