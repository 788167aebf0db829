//! The models against independent references: GCN against a dense-matrix GCN on a small random
//! graph, pruned against unpruned batches (same loss, same gradients) for every model, and the
//! edge-partitioned kernel against the gather/scatter reference inside every model. Each test
//! runs with both aggregations.

use std::collections::{BTreeMap, VecDeque};

use burn::prelude::*;
use gnn::batch::{Batch, BatchSpec, RecordGraph};
use gnn::model::{BatchTensors, Dropout, Gnn, cross_entropy};
use gnn::kernel::Aggregation;
use gnn::params;
use schemas::model::{Activation, ModelKind, ModelSpec};

/// A random directed graph with a hub (node 0) and an isolated node (the last).
fn graph(n: usize, dim: usize) -> (Vec<(usize, usize)>, Vec<Vec<f32>>) {
    let mut s = gnn::rng::Stream::new(&[42]);
    let mut edges = Vec::new();
    for _ in 0..n * 3 {
        let (u, w) = ((s.next_u64() % (n as u64 - 1)) as usize, (s.next_u64() % (n as u64 - 1)) as usize);
        if u != w {
            edges.push((u, w));
        }
    }
    for u in 1..n - 1 {
        edges.push((u, 0));
    }
    let features = (0..n).map(|_| (0..dim).map(|_| s.unit() - 0.5).collect()).collect();
    (edges, features)
}

/// Records with every edge, built by a plain BFS (as GraphFlat's `all` sampler makes them).
fn records(n: usize, k: u8, edges: &[(usize, usize)], features: &[Vec<f32>]) -> Vec<RecordGraph> {
    let mut in_edges: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &(u, w) in edges {
        in_edges.entry(w).or_default().push(u);
    }
    (0..n)
        .map(|root| {
            let mut dist = BTreeMap::from([(root, 0u8)]);
            let mut queue = VecDeque::from([root]);
            while let Some(v) = queue.pop_front() {
                if dist[&v] == k {
                    continue;
                }
                for &u in in_edges.get(&v).into_iter().flatten() {
                    if !dist.contains_key(&u) {
                        dist.insert(u, dist[&v] + 1);
                        queue.push_back(u);
                    }
                }
            }
            let mut nodes: Vec<usize> = dist.keys().copied().collect();
            nodes.sort_by_key(|v| (*v != root, dist[v], *v));
            let local: BTreeMap<usize, i32> = nodes.iter().enumerate().map(|(i, &v)| (v, i as i32)).collect();
            let kept: Vec<&(usize, usize)> =
                edges.iter().filter(|(_, w)| dist.get(w).is_some_and(|&d| d < k)).collect();
            RecordGraph {
                root: root as i64,
                label: Some((root % 3) as i64),
                split: None,
                hops: nodes.iter().map(|v| dist[v]).collect(),
                in_degrees: nodes.iter().map(|v| in_edges.get(v).map_or(0, Vec::len) as i64).collect(),
                features: nodes.iter().flat_map(|&v| features[v].clone()).collect(),
                edge_src: kept.iter().map(|(u, _)| local[u]).collect(),
                edge_dst: kept.iter().map(|(_, w)| local[w]).collect(),
                edge_weights: vec![1.0; kept.len()],
                edge_layers: kept.iter().map(|(_, w)| (1u32 << (k - dist[w])) - 1).collect(),
            }
        })
        .collect()
}

fn spec(kind: ModelKind, dim: usize) -> ModelSpec {
    ModelSpec {
        kind,
        input_dim: dim,
        hidden: 5,
        classes: 3,
        layers: 2,
        heads: if kind == ModelKind::Gat { 2 } else { 1 },
        output_heads: if kind == ModelKind::Gat { 2 } else { 1 },
        activation: Activation::Relu,
        normalize_features: false,
        seed: 9,
    }
}

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
    for (prune, aggregation) in [(true, Aggregation::Kernel), (false, Aggregation::Kernel), (true, Aggregation::Reference)]
    {
        let batch = Batch::build(&recs, &BatchSpec { hops: 2, fanouts: vec![], prune, normalize_features: false, kernel_plans: false });
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

/// The loss and gradients of one training step with dropout.
fn step(kind: ModelKind, recs: &[RecordGraph], dim: usize, prune: bool, aggregation: Aggregation) -> (f32, Vec<f32>) {
    let device = Device::flex().autodiff();
    let spec = spec(kind, dim);
    let model = Gnn::new(&spec, &device);
    let batch = Batch::build(recs, &BatchSpec { hops: 2, fanouts: vec![], prune, normalize_features: false, kernel_plans: false });
    let dropout = Dropout { seed: 1, step: 3, rate: 0.5, attention_rate: 0.3 };
    let logits = model.forward(&spec, &batch, &BatchTensors::new(&batch, &device, aggregation), Some(dropout));
    let (loss, _) = cross_entropy(logits, &batch.labels);
    let value = loss.clone().into_data().try_to_vec::<f32>().unwrap()[0];
    (value, params::gradients(&model, &loss.backward()))
}

fn assert_same_step(what: &str, (loss_a, grads_a): (f32, Vec<f32>), (loss_b, grads_b): (f32, Vec<f32>)) {
    assert!((loss_a - loss_b).abs() < 1e-5, "{what}: loss {loss_a} vs {loss_b}");
    assert!(grads_a.iter().any(|g| *g != 0.0), "{what}: all gradients are zero");
    for (i, (a, b)) in grads_a.iter().zip(&grads_b).enumerate() {
        assert!((a - b).abs() < 1e-5, "{what}: gradient {i}: {a} vs {b}");
    }
}

#[test]
fn pruned_and_unpruned_batches_give_the_same_loss_and_gradients() {
    let (n, dim) = (25, 3);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat] {
        for aggregation in [Aggregation::Kernel, Aggregation::Reference] {
            let what = format!("{kind:?} {aggregation:?}");
            assert_same_step(&what, step(kind, &recs, dim, true, aggregation), step(kind, &recs, dim, false, aggregation));
        }
    }
}

#[test]
fn the_kernel_and_the_reference_give_the_same_loss_and_gradients() {
    let (n, dim) = (60, 4);
    let (edges, features) = graph(n, dim);
    let recs = records(n, 2, &edges, &features);
    for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat] {
        let kernel = step(kind, &recs, dim, true, Aggregation::Kernel);
        assert_same_step(&format!("{kind:?}"), kernel, step(kind, &recs, dim, true, Aggregation::Reference));
    }
}
