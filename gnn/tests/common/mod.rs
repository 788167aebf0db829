//! Shared by the model tests: random graphs (with edge features), records built by a plain
//! BFS, and one training step's loss and gradients.
#![allow(dead_code)] // each test module uses its own subset

pub mod typed;

use std::collections::{BTreeMap, VecDeque};

use burn::prelude::*;
use gnn::batch::{Batch, BatchSpec};
use gnn::decoder::PairDecoder;
use gnn::kernel::Aggregation;
use gnn::link::{LinkBatch, link_loss};
use gnn::model::{BatchTensors, Dropout, Gnn, loss};
use gnn::params;
use schemas::BatchNegatives;
use schemas::Label;
use schemas::Record as RecordGraph;
use schemas::edge_stats::EdgeStats;
use schemas::layers::Layers;
use schemas::model::{Activation, ModelKind, ModelSpec};
use schemas::record::LinkRecord;
use schemas::task::{Decoder, Task};

/// A random directed graph with a hub (node 0) and an isolated node (the last).
pub fn graph(n: usize, dim: usize) -> (Vec<(usize, usize)>, Vec<Vec<f32>>) {
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

/// `dim` random features for each edge of `edges`, in edge order (an edge carries the same
/// features in every record that holds it).
pub fn edge_features(edges: &[(usize, usize)], dim: usize) -> Vec<Vec<f32>> {
    let mut s = gnn::rng::Stream::new(&[43]);
    edges.iter().map(|_| (0..dim).map(|_| 2.0 * s.unit() - 1.0).collect()).collect()
}

/// Records with every edge, built by a plain BFS (as GraphFlat's `all` sampler makes them).
pub fn records(n: usize, k: u8, edges: &[(usize, usize)], features: &[Vec<f32>]) -> Vec<RecordGraph> {
    records_with_edge_features(n, k, edges, features, &[])
}

/// [`records`] whose edges carry `edge_features[e]` (see [`edge_features`]); none when empty.
pub fn records_with_edge_features(
    n: usize,
    k: u8,
    edges: &[(usize, usize)],
    features: &[Vec<f32>],
    edge_features: &[Vec<f32>],
) -> Vec<RecordGraph> {
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
            let kept: Vec<(usize, &(usize, usize))> =
                edges.iter().enumerate().filter(|(_, (_, w))| dist.get(w).is_some_and(|&d| d < k)).collect();
            RecordGraph {
                root: root as i64,
                node_ids: nodes.iter().map(|&v| v as i64).collect(),
                label: Some(Label::Class((root % 3) as i64)),
                split: None,
                hops: nodes.iter().map(|v| dist[v]).collect(),
                in_degrees: nodes.iter().map(|v| in_edges.get(v).map_or(0, Vec::len) as i64).collect(),
                features: nodes.iter().flat_map(|&v| features[v].clone()).collect(),
                edge_src: kept.iter().map(|(_, (u, _))| local[u]).collect(),
                edge_dst: kept.iter().map(|(_, (_, w))| local[w]).collect(),
                edge_weights: vec![1.0; kept.len()],
                edge_layers: kept.iter().map(|(_, (_, w))| (1u32 << (k - dist[w])) - 1).collect(),
                edge_features: kept
                    .iter()
                    .flat_map(|&(e, _)| edge_features.get(e).cloned().unwrap_or_default())
                    .collect(),
                ..RecordGraph::default()
            }
        })
        .collect()
}

/// The kinds whose layers read edge features, and the width the tests give them.
pub const EDGE_KINDS: [ModelKind; 3] = [ModelKind::Sage, ModelKind::Gat, ModelKind::Gine];
pub const EDGE_DIM: usize = 3;

/// Records (2 hops) of an `n`-node random graph whose edges carry [`EDGE_DIM`] features.
pub fn records_with_edges(n: usize, dim: usize) -> Vec<RecordGraph> {
    let (edges, features) = graph(n, dim);
    records_with_edge_features(n, 2, &edges, &features, &edge_features(&edges, EDGE_DIM))
}

/// The model of `kind` reading [`EDGE_DIM`] edge features, standardized with made-up
/// statistics when `standardize`, and the batches it reads.
pub fn edge_model(kind: ModelKind, dim: usize, standardize: bool) -> (ModelSpec, BatchSpec) {
    let mut spec = spec_with_edges(kind, dim, EDGE_DIM);
    if standardize {
        spec.normalize_edge_features = true;
        spec.edge_stats = Some(EdgeStats { mean: vec![0.1, -0.2, 0.0], std: vec![0.5, 2.0, 0.0] });
    }
    let batches = BatchSpec::plain(Layers::every(2)).reading(&spec);
    (spec, batches)
}

pub fn spec(kind: ModelKind, dim: usize) -> ModelSpec {
    spec_with_edges(kind, dim, 0)
}

/// [`spec`] with layers that read `edge_dim` edge features.
pub fn spec_with_edges(kind: ModelKind, dim: usize, edge_dim: usize) -> ModelSpec {
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
        multi_label: false,
        edge_dim,
        normalize_edge_features: false,
        edge_stats: None,
        relation_edge_stats: Vec::new(),
        task: Default::default(),
        decoder: None,
        types: None,
        bases: 0,
        wide_mlp: true,
        learned_embedding_dim: 0,
        precomputed: 0,
        seed: 9,
    }
}

/// The dropout of the tests' training steps.
pub const DROPOUT: Dropout = Dropout { seed: 1, step: 3, rate: 0.5, attention_rate: 0.3 };

/// The loss and gradients of one training step with dropout.
pub fn step(
    kind: ModelKind,
    recs: &[RecordGraph],
    dim: usize,
    prune: bool,
    (device, aggregation): (&Device, Aggregation),
) -> (f32, Vec<f32>) {
    let batch_spec = BatchSpec { prune, ..BatchSpec::plain(Layers::every(2)) };
    step_with(kind, recs, dim, &batch_spec, DROPOUT, (device, aggregation))
}

/// The loss and gradients of one training step on a batch built by `batch_spec`.
pub fn step_with(
    kind: ModelKind,
    recs: &[RecordGraph],
    dim: usize,
    batch_spec: &BatchSpec,
    dropout: Dropout,
    (device, aggregation): (&Device, Aggregation),
) -> (f32, Vec<f32>) {
    step_spec(&spec(kind, dim), recs, batch_spec, dropout, (device, aggregation))
}

/// The loss and gradients of one training step of the model of `spec` on a batch built by
/// `batch_spec`.
pub fn step_spec(
    spec: &ModelSpec,
    recs: &[RecordGraph],
    batch_spec: &BatchSpec,
    dropout: Dropout,
    (device, aggregation): (&Device, Aggregation),
) -> (f32, Vec<f32>) {
    let model = Gnn::new(spec, device);
    // GAT's batches carry its attention plans, as the trainer's (`BatchSpec::reading`).
    let batch_spec = BatchSpec { attention: spec.kind == ModelKind::Gat, ..batch_spec.clone() };
    let batch = Batch::build(recs, &batch_spec);
    let logits = model.forward(spec, &batch, &BatchTensors::new(&batch, device, aggregation), Some(dropout));
    let (loss, _) = loss(logits, &batch.labels);
    let value = loss.clone().into_data().try_to_vec::<f32>().unwrap()[0];
    (value, params::gradients(&model, &loss.backward()))
}

pub fn assert_same_step(what: &str, (loss_a, grads_a): (f32, Vec<f32>), (loss_b, grads_b): (f32, Vec<f32>)) {
    assert!((loss_a - loss_b).abs() < 1e-5, "{what}: loss {loss_a} vs {loss_b}");
    assert!(grads_a.iter().any(|g| *g != 0.0), "{what}: all gradients are zero");
    for (i, (a, b)) in grads_a.iter().zip(&grads_b).enumerate() {
        assert!((a - b).abs() < 1e-5, "{what}: gradient {i}: {a} vs {b}");
    }
}

/// Link records over [`records`]: each of `edges`' first `count` edges `(u, w)` as a supervision
/// edge with two negatives by a fixed rule, its endpoints' records cloned (no label).
pub fn link_records(recs: &[RecordGraph], edges: &[(usize, usize)], count: usize) -> Vec<LinkRecord> {
    let n = recs.len();
    edges
        .iter()
        .take(count)
        .enumerate()
        .map(|(i, &(u, w))| {
            let negatives = vec![((u * 7 + i) % n) as i64, ((w * 3 + 1) % n) as i64];
            let endpoints = [u as i64, w as i64]
                .iter()
                .chain(&negatives)
                .map(|&v| std::sync::Arc::new(RecordGraph { label: None, ..recs[v as usize].clone() }))
                .collect();
            LinkRecord { src: u as i64, dst: w as i64, split: None, negatives, endpoints }
        })
        .collect()
}

/// A link model of `kind` (2 layers, embeddings 4 wide) with `decoder`.
pub fn link_spec(kind: ModelKind, dim: usize, decoder: Decoder) -> ModelSpec {
    ModelSpec { classes: 4, task: Task::Link, decoder: Some(decoder), ..spec(kind, dim) }
}

/// The loss (sum over count) and gradients of one link training step with dropout.
pub fn link_step(
    spec: &ModelSpec,
    links: &[LinkRecord],
    batch_negatives: BatchNegatives,
    (device, aggregation): (&Device, Aggregation),
) -> (f32, Vec<f32>) {
    let model = Gnn::new(spec, device);
    let batch = LinkBatch::build(links, &BatchSpec::plain(Layers::every(2)));
    let tensors = BatchTensors::new(&batch.batch, device, aggregation);
    let h = model.forward(spec, &batch.batch, &tensors, Some(DROPOUT));
    let (sum, count) = link_loss(PairDecoder::of(spec, model.decoder.as_ref()), h, &batch, batch_negatives);
    let value = sum.clone().into_data().try_to_vec::<f32>().unwrap()[0] / count as f32;
    let grads = params::gradients(&model, &sum.backward()).into_iter().map(|g| g / count as f32).collect();
    (value, grads)
}
