//! The models against independent references: GCN against a dense-matrix GCN on a small random
//! graph, pruned against unpruned batches (same loss, same gradients) for every model, and the
//! edge-partitioned kernel against the gather/scatter reference inside every model. Each test
//! runs with both aggregations.

mod common;

use burn::prelude::*;
use common::{assert_same_step, graph, records, spec, step, step_with};
use gnn::batch::{Batch, BatchSpec};
use gnn::kernel::Aggregation;
use gnn::model::{BatchTensors, Dropout, Gnn};
use gnn::params;
use schemas::layers::Layers;
use schemas::model::ModelKind;

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
fn pruned_and_unpruned_batches_give_the_same_loss_and_gradients() {
    let (n, dim) = (25, 3);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    let device = Device::flex().autodiff();
    for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat] {
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
    let dropout = Dropout { seed: 1, step: 3, rate: 0.5, attention_rate: 0.3 };
    for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat] {
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
    for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat] {
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
    for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat] {
        let kernel = step(kind, &recs, dim, true, (&device, Aggregation::Auto));
        assert_same_step(&format!("{kind:?}"), kernel, step(kind, &recs, dim, true, (&device, Aggregation::Reference)));
    }
}
