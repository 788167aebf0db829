//! The models against independent references: GCN against a dense-matrix GCN on a small random
//! graph, pruned against unpruned batches (same loss, same gradients) for every model, and the
//! edge-partitioned kernel against the gather/scatter reference inside every model, with and
//! without edge features; GINE against a dense GINE. Each test runs with both aggregations.

use crate::common;
use crate::common::{
    DROPOUT, EDGE_DIM, EDGE_KINDS, assert_same_step, edge_model, graph, records, records_with_edges, spec, step,
    step_spec, step_with,
};
use burn::module::Param;
use burn::prelude::*;
use gnn::batch::{Batch, BatchSpec};
use gnn::kernel::Aggregation;
use gnn::model::{BatchTensors, Dropout, Gnn, Layer, loss};
use gnn::params;
use schemas::layers::Layers;
use schemas::model::ModelKind;

const EVERY_KIND: [ModelKind; 4] = [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat, ModelKind::Gine];

fn matmul(a: &[Vec<f32>], b: &[Vec<f32>]) -> Vec<Vec<f32>> {
    a.iter().map(|row| (0..b[0].len()).map(|j| row.iter().zip(b).map(|(x, r)| x * r[j]).sum()).collect()).collect()
}

fn weights(values: &[f32], rows: usize, cols: usize) -> Vec<Vec<f32>> {
    values.chunks(cols).take(rows).map(|r| r.to_vec()).collect()
}

#[test]
fn gcn_matches_a_dense_matrix_gcn() {
    let (n, dim) = (30, 4);
    let (edges, features) = graph(n, dim);
    let device = Device::flex();
    let spec = spec(ModelKind::Gcn, dim);
    let model = Gnn::new(&spec, &device);
    let p = params::flatten(&model);

    // Dense: A_hat = D^-1/2 (A + I) D^-1/2 with D = in-degree + 1.
    let mut a = vec![vec![0.0f32; n]; n];
    for &(u, w) in &edges {
        a[w][u] += 1.0;
    }
    let deg: Vec<f32> = (0..n).map(|w| a[w].iter().sum::<f32>() + 1.0).collect();
    let a_hat: Vec<Vec<f32>> = (0..n)
        .map(|w| (0..n).map(|u| (a[w][u] + f32::from(u8::from(u == w))) / (deg[w] * deg[u]).sqrt()).collect())
        .collect();
    let (w1, b1) = (weights(&p[..dim * 5], dim, 5), &p[dim * 5..dim * 5 + 5]);
    let rest = &p[dim * 5 + 5..];
    let (w2, b2) = (weights(&rest[..5 * 3], 5, 3), &rest[15..18]);
    let h1: Vec<Vec<f32>> = matmul(&a_hat, &matmul(&features, &w1))
        .iter()
        .map(|r| r.iter().zip(b1).map(|(x, b)| (x + b).max(0.0)).collect())
        .collect();
    let dense: Vec<Vec<f32>> =
        matmul(&a_hat, &matmul(&h1, &w2)).iter().map(|r| r.iter().zip(b2).map(|(x, b)| x + b).collect()).collect();

    let recs = records(n, 2, &edges, &features);
    for (prune, aggregation, distinct_inputs) in [
        (true, Aggregation::Auto, false),
        (false, Aggregation::Auto, false),
        (true, Aggregation::Reference, false),
        (true, Aggregation::Auto, true),
        (true, Aggregation::Reference, true),
    ] {
        let batch = Batch::build(&recs, &BatchSpec { prune, distinct_inputs, ..BatchSpec::plain(Layers::every(2)) });
        let logits = model.forward(&spec, &batch, &BatchTensors::new(&batch, &device, aggregation), None);
        let got = logits.into_data().try_to_vec::<f32>().unwrap();
        for (r, root) in batch.roots.iter().enumerate() {
            for c in 0..3 {
                let (x, y) = (got[r * 3 + c], dense[*root as usize][c]);
                assert!((x - y).abs() < 1e-4, "root {root} class {c}: {x} vs dense {y} ({prune}, {aggregation:?})");
            }
        }
    }
}

#[test]
fn gine_matches_a_dense_gine_with_its_mlp_hidden_wide() {
    // h'_w = MLP(h_w + sum over u -> w of ReLU(h_u + e_uw W_e + b_e)), MLP = Linear(in, m) ->
    // ReLU -> Linear(m, out), m = max(hidden, out): 5 in both layers here (hidden 5, 3 classes),
    // and 3 (the output) in the last layer of a model written before (`wide_mlp` false).
    let (n, dim) = (30, 4);
    let (edges, features) = graph(n, dim);
    let edge_features = common::edge_features(&edges, EDGE_DIM);
    let recs = common::records_with_edge_features(n, 2, &edges, &features, &edge_features);
    let device = Device::flex();
    for (wide, widths) in [(true, [5, 5]), (false, [5, 3])] {
        let spec =
            schemas::model::ModelSpec { wide_mlp: wide, ..common::spec_with_edges(ModelKind::Gine, dim, EDGE_DIM) };
        let model = Gnn::new(&spec, &device);
        let p = params::flatten(&model);
        let mut at = 0;
        let mut take = |rows: usize, cols: usize| {
            at += rows * cols;
            weights(&p[at - rows * cols..at], rows, cols)
        };
        let mut h = features.clone();
        for (l, (input, out)) in [(dim, 5), (5, 3)].into_iter().enumerate() {
            let m = widths[l];
            let (w1, b1, w2, b2) = (take(input, m), take(1, m), take(m, out), take(1, out));
            let (we, be) = (take(EDGE_DIM, input), take(1, input));
            let mut z = h.clone();
            for (&(u, w), e) in edges.iter().zip(&edge_features) {
                let projected = &matmul(std::slice::from_ref(e), &we)[0];
                for j in 0..input {
                    z[w][j] += (h[u][j] + projected[j] + be[0][j]).max(0.0);
                }
            }
            let hidden: Vec<Vec<f32>> =
                matmul(&z, &w1).iter().map(|r| r.iter().zip(&b1[0]).map(|(x, b)| (x + b).max(0.0)).collect()).collect();
            h = matmul(&hidden, &w2).iter().map(|r| r.iter().zip(&b2[0]).map(|(x, b)| x + b).collect()).collect();
            if l == 0 {
                h.iter_mut().flatten().for_each(|x| *x = x.max(0.0));
            }
        }
        assert_eq!(at, p.len(), "wide {wide}: the parameters are the dense model's");

        let batch = Batch::build(&recs, &BatchSpec::plain(Layers::every(2)).reading(&spec));
        let logits = model.forward(&spec, &batch, &BatchTensors::new(&batch, &device, Aggregation::Auto), None);
        let got = logits.into_data().try_to_vec::<f32>().unwrap();
        for (r, root) in batch.roots.iter().enumerate() {
            for c in 0..3 {
                let (x, y) = (got[r * 3 + c], h[*root as usize][c]);
                assert!((x - y).abs() < 1e-3 * (1.0 + y.abs()), "wide {wide}, root {root} class {c}: {x} vs dense {y}");
            }
        }
    }
}

#[test]
fn pruned_and_unpruned_batches_give_the_same_loss_and_gradients() {
    let (n, dim) = (25, 3);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    let device = Device::flex().autodiff();
    for kind in EVERY_KIND {
        for aggregation in [Aggregation::Auto, Aggregation::Reference] {
            let what = format!("{kind:?} {aggregation:?}");
            assert_same_step(
                &what,
                step(kind, &recs, dim, true, (&device, aggregation)),
                step(kind, &recs, dim, false, (&device, aggregation)),
            );
        }
    }
}

#[test]
fn distinct_and_repeated_input_rows_give_the_same_loss_and_gradients() {
    // 40 records of a 40-node graph repeat every node many times; input dropout keys on the
    // node, so a node's one kept row is dropped as each of its copies is.
    let (n, dim) = (40, 4);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    let device = Device::flex().autodiff();
    let dropout = DROPOUT;
    for kind in EVERY_KIND {
        for aggregation in [Aggregation::Auto, Aggregation::Reference] {
            let repeated = BatchSpec::plain(Layers::every(2));
            let distinct = BatchSpec { distinct_inputs: true, ..repeated.clone() };
            assert!(Batch::build(&recs, &distinct).input_rows() <= n, "a node is kept once");
            assert_same_step(
                &format!("{kind:?} {aggregation:?}"),
                step_with(kind, &recs, dim, &repeated, dropout, (&device, aggregation)),
                step_with(kind, &recs, dim, &distinct, dropout, (&device, aggregation)),
            );
        }
    }
}

#[test]
fn input_dropout_on_the_host_is_the_forward_pass_dropout() {
    // Sparse features (most values zero), as the host path skips zeros.
    let (n, dim) = (30, 6);
    let (edges, mut features) = graph(n, dim);
    features.iter_mut().flatten().enumerate().for_each(|(i, v)| *v = if i % 4 == 0 { *v + 1.0 } else { 0.0 });
    let recs = records(n, 2, &edges, &features);
    let device = Device::flex().autodiff();
    let dropout = Dropout { seed: 5, step: 2, rate: 0.5, attention_rate: 0.2 };
    let batch = Batch::build(&recs, &BatchSpec::plain(Layers::every(2)));
    for kind in EVERY_KIND {
        let spec = spec(kind, dim);
        let model = Gnn::new(&spec, &device);
        let run =
            |t: BatchTensors| model.forward(&spec, &batch, &t, Some(dropout)).into_data().try_to_vec::<f32>().unwrap();
        let on_device = run(BatchTensors::new(&batch, &device, Aggregation::Auto));
        let on_host = run(BatchTensors::with_input_dropout(&batch, dropout, &device, Aggregation::Auto));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&on_device), bits(&on_host), "{kind:?}");
        // The same tensors marked as already dropped: layer 1's input goes unmasked.
        let mut unmasked = BatchTensors::new(&batch, &device, Aggregation::Auto);
        unmasked.input_dropped = true;
        assert_ne!(bits(&run(unmasked)), bits(&on_host), "{kind:?}: the mask applies");
    }
}

#[test]
fn the_kernel_and_the_reference_give_the_same_loss_and_gradients() {
    let (n, dim) = (60, 4);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    let device = Device::flex().autodiff();
    for kind in EVERY_KIND {
        let kernel = step(kind, &recs, dim, true, (&device, Aggregation::Auto));
        assert_same_step(&format!("{kind:?}"), kernel, step(kind, &recs, dim, true, (&device, Aggregation::Reference)));
    }
}

#[test]
fn with_edge_features_the_kernel_and_the_reference_give_the_same_loss_and_gradients() {
    let (n, dim) = (60, 4);
    let recs = records_with_edges(n, dim);
    let device = Device::flex().autodiff();
    for kind in EDGE_KINDS {
        for standardize in [false, true] {
            let (spec, batches) = edge_model(kind, dim, standardize);
            let run = |aggregation| step_spec(&spec, &recs, &batches, DROPOUT, (&device, aggregation));
            let what = format!("{kind:?} standardized {standardize}");
            assert_same_step(&what, run(Aggregation::Auto), run(Aggregation::Reference));
        }
    }
}

#[test]
fn with_edge_features_pruned_unpruned_distinct_and_repeated_batches_agree() {
    let (n, dim) = (40, 3);
    let recs = records_with_edges(n, dim);
    let device = Device::flex().autodiff();
    for kind in EDGE_KINDS {
        let (spec, plain) = edge_model(kind, dim, false);
        for aggregation in [Aggregation::Auto, Aggregation::Reference] {
            let run = |batches: &BatchSpec| step_spec(&spec, &recs, batches, DROPOUT, (&device, aggregation));
            let what = format!("{kind:?} {aggregation:?}");
            let base = run(&plain);
            assert_same_step(
                &format!("{what} unpruned"),
                base.clone(),
                run(&BatchSpec { prune: false, ..plain.clone() }),
            );
            assert_same_step(
                &format!("{what} distinct"),
                base,
                run(&BatchSpec { distinct_inputs: true, ..plain.clone() }),
            );
        }
    }
}

/// The gradients of a layer's edge parameters, each flattened.
fn edge_gradients(layer: &Layer, grads: &burn::tensor::Gradients) -> Vec<Vec<f32>> {
    let of2 = |p: &Option<Param<Tensor<2>>>| {
        p.as_ref().map(|p| p.val().grad(grads).map(|g| g.into_data().try_to_vec::<f32>().unwrap()))
    };
    let of1 = |p: &Option<Param<Tensor<1>>>| {
        p.as_ref().map(|p| p.val().grad(grads).map(|g| g.into_data().try_to_vec::<f32>().unwrap()))
    };
    let all = match layer {
        Layer::Gcn(_) => vec![],
        Layer::Sage(s) => vec![of2(&s.edge_weight)],
        Layer::Gat(g) => vec![of2(&g.edge_weight), of2(&g.att_edge)],
        Layer::Gine(g) => vec![of2(&g.edge_weight), of1(&g.edge_bias)],
        Layer::Rgcn(_) | Layer::HeteroSage(_) => vec![],
    };
    all.into_iter().map(|p| p.expect("the layer has its edge parameter").expect("it has a gradient")).collect()
}

#[test]
fn every_edge_parameter_gets_a_gradient_and_the_features_change_the_logits() {
    let (n, dim) = (30, 4);
    let recs = records_with_edges(n, dim);
    let device = Device::flex().autodiff();
    for kind in EDGE_KINDS {
        let (spec, batches) = edge_model(kind, dim, false);
        let model = Gnn::new(&spec, &device);
        let batch = Batch::build(&recs, &batches);
        let logits = model.forward(&spec, &batch, &BatchTensors::new(&batch, &device, Aggregation::Auto), None);
        let grads = loss(logits.clone(), &batch.labels).0.backward();
        for (l, layer) in model.layers.iter().enumerate() {
            let found = edge_gradients(layer, &grads);
            assert!(!found.is_empty(), "{kind:?} layer {l} has edge parameters");
            for g in found {
                assert!(g.iter().any(|v| *v != 0.0), "{kind:?} layer {l}: an edge parameter's gradient is zero");
            }
        }
        // The same records with other edge features give other logits.
        let mut scaled = batch.clone();
        scaled.layers.iter_mut().for_each(|e| e.features.iter_mut().for_each(|v| *v *= 2.0));
        let other = model.forward(&spec, &scaled, &BatchTensors::new(&scaled, &device, Aggregation::Auto), None);
        let (a, b) = (logits.into_data().try_to_vec::<f32>().unwrap(), other.into_data().try_to_vec::<f32>().unwrap());
        assert!(a.iter().zip(&b).any(|(x, y)| (x - y).abs() > 1e-4), "{kind:?}: the edge features change nothing");
    }
}

#[test]
fn edge_parameters_come_with_edge_features_and_never_to_gcn() {
    let dim = 4;
    for kind in EVERY_KIND {
        let plain = params::flatten(&Gnn::new(&spec(kind, dim), &Device::flex()));
        let with = params::flatten(&Gnn::new(&common::spec_with_edges(kind, dim, EDGE_DIM), &Device::flex()));
        match kind {
            ModelKind::Gcn => assert_eq!(with, plain, "GCN ignores edge features"),
            // The edge parameters come after the others of their layer: the rest is unchanged.
            _ => assert!(with.len() > plain.len(), "{kind:?}"),
        }
    }
}
