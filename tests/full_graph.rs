//! Full-graph training (`[train] nodes` and `edges`, no records): an epoch's step is exactly the
//! full-batch gradient of a dense-matrix GCN computed here, on one, two and three workers and on
//! two processes of two workers; every model kind's steps equal the record trainer's on records
//! that hold every edge, trained in one batch of every training node; GraphInfer runs the model
//! and scores as the dense forward pass; stale copies send fewer bytes (and a zero threshold
//! changes nothing); workers that own no node take part; and the usage errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use burn::prelude::*;
use burn::tensor::TensorData;
use gnn::model::Layer;
use schemas::model::ModelMeta;

use crate::common::typed::{self, RETURNS_FANOUTS, graph_tables};
use crate::common::*;

const NODES: u64 = 240;
const LR: f32 = 0.5;

/// The keys every run here shares: plain SGD with no decay and no dropout, so that one step
/// is `p - lr g` with `g` the gradient of the mean training loss.
fn train_keys(model: &str, epochs: usize) -> String {
    format!(
        "model = \"{model}\"\nhidden = 8\nheads = 2\nepochs = {epochs}\noptimizer = \"sgd\"\nlr = {LR}\n\
         weight_decay = 0.0\ndropout = 0.0\nseed = 11\n"
    )
}

/// Trains on the graph `data` into `dir/<name>` with `workers` workers; returns the model.
fn train_full(dir: &Path, data: &Path, name: &str, workers: usize, keys: &str) -> PathBuf {
    train_full_summary(dir, data, name, workers, keys).0
}

/// [`train_full`], with the run's summary.
fn train_full_summary(dir: &Path, data: &Path, name: &str, workers: usize, keys: &str) -> (PathBuf, String) {
    let out = dir.join(name);
    let job = format!(
        "[cluster]\nworkers = {workers}\n[train]\nnodes = \"{}/nodes\"\nedges = \"{}/edges\"\noutput = \"{}\"\nlayers = 2\n{keys}",
        data.display(),
        data.display(),
        out.display()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, job).unwrap();
    let summary = run_ok(&path, &[]);
    (out, summary)
}

/// [`train_full`] on two processes of two workers over TCP, into `dir/procs`.
fn train_two_processes(dir: &Path, data: &Path, keys: &str) -> PathBuf {
    let out = dir.join("procs");
    let hosts = loopback_hosts(2).iter().map(|h| format!("\"{h}\"")).collect::<Vec<_>>().join(", ");
    let job = format!(
        "[cluster]\nworkers = 2\nprocesses = 2\nhosts = [{hosts}]\n[train]\nnodes = \"{d}/nodes\"\nedges = \"{d}/edges\"\n\
         output = \"{}\"\nlayers = 2\n{keys}",
        out.display(),
        d = data.display()
    );
    run_two_processes(&write_job(dir, "procs", &job), dir);
    out
}

/// The summary's share of the exact exchange's bytes the training passes sent, in percent.
fn bytes_sent(summary: &str) -> f64 {
    let line = summary.lines().find(|l| l.contains("exchanged:")).unwrap_or_else(|| panic!("{summary}"));
    let inside = line.split("MB (").nth(1).unwrap().split('%').next().unwrap();
    inside.parse().unwrap()
}

/// The model's description and flat parameters.
fn params(model: &Path) -> (ModelMeta, Vec<f32>) {
    let (meta, gnn) = gnn::io::load(&local_io(), model.to_str().unwrap(), &Device::flex()).unwrap();
    (meta, gnn::params::flatten(&gnn))
}

fn largest_gap(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The generated graph as dense matrices: features `[n, d]`, GCN's normalized adjacency
/// with self-loops `[n, n]` (`1 / sqrt((d_v + 1)(d_u + 1))` per edge, duplicates adding up,
/// `1 / (d_v + 1)` on the diagonal, `d` the in-degree), labels and splits by node.
struct Dense {
    n: usize,
    dim: usize,
    x: Vec<f32>,
    a: Vec<f32>,
    labels: Vec<Option<i64>>,
    splits: Vec<Option<String>>,
}

fn dense(data: &Path) -> Dense {
    let g = read_graph(data);
    let n = g.features.len();
    assert_eq!(g.features.keys().copied().collect::<Vec<_>>(), (0..n as i64).collect::<Vec<_>>());
    let dim = g.features[&0].len();
    let x = g.features.values().flatten().copied().collect();
    let mut degree = vec![0f32; n];
    g.edges.iter().for_each(|&(_, d, _)| degree[d as usize] += 1.0);
    let mut a = vec![0f32; n * n];
    for &(s, d, _) in &g.edges {
        a[d as usize * n + s as usize] += 1.0 / ((degree[d as usize] + 1.0) * (degree[s as usize] + 1.0)).sqrt();
    }
    (0..n).for_each(|v| a[v * n + v] += 1.0 / (degree[v] + 1.0));
    let mut splits = BTreeMap::new();
    for batch in read_batches(&data.join("nodes")) {
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let split = batch.column_by_name("split").unwrap().as_string::<i32>();
        for r in 0..batch.num_rows() {
            splits.insert(ids.value(r), split.is_valid(r).then(|| split.value(r).to_owned()));
        }
    }
    Dense { n, dim, x, a, labels: g.labels.into_values().collect(), splits: splits.into_values().collect() }
}

/// The dense two-layer GCN's logits with `model`'s parameters: `A relu(A X W1 + b1) W2 + b2`.
fn dense_logits(g: &Dense, model: &gnn::Gnn, device: &Device) -> Tensor<2> {
    let a = Tensor::<2>::from_data(TensorData::new(g.a.clone(), [g.n, g.n]), device);
    let mut h = Tensor::<2>::from_data(TensorData::new(g.x.clone(), [g.n, g.dim]), device);
    for (l, layer) in model.layers.iter().enumerate() {
        let Layer::Gcn(gcn) = layer else { panic!("a GCN") };
        h = a.clone().matmul(h.matmul(gcn.weight.val())) + gcn.bias.val().unsqueeze::<2>();
        if l + 1 < model.layers.len() {
            h = burn::tensor::activation::relu(h);
        }
    }
    h
}

/// The full-batch gradient of the mean cross-entropy over the labeled training nodes at
/// `params`, flattened as the model's parameters.
fn dense_gradient(g: &Dense, meta: &ModelMeta, params: &[f32]) -> Vec<f32> {
    let device = Device::flex().autodiff();
    let model = gnn::params::load(gnn::Gnn::new(&meta.spec, &device), params, &device);
    let logits = dense_logits(g, &model, &device);
    let train: Vec<(usize, i64)> = (0..g.n)
        .filter(|&v| g.splits[v].as_deref() == Some("train"))
        .filter_map(|v| g.labels[v].map(|c| (v, c)))
        .collect();
    let rows = Tensor::<1, Int>::from_data(
        TensorData::new(train.iter().map(|t| t.0 as i64).collect(), [train.len()]),
        &device,
    );
    let classes = train.iter().map(|t| t.1).collect::<Vec<_>>();
    let classes = Tensor::<2, Int>::from_data(TensorData::new(classes, [train.len(), 1]), &device);
    let log_p = burn::tensor::activation::log_softmax(logits.select(0, rows), 1).gather(1, classes);
    let loss = log_p.sum().neg() / train.len() as f32;
    gnn::params::gradients(&model, &loss.backward())
}

/// The parameters after one SGD step of `meta`'s model from its start on the dense
/// full-batch gradient, a step that moves them.
fn dense_step(g: &Dense, meta: &ModelMeta) -> Vec<f32> {
    let initial = params_at_start(meta);
    let gradient = dense_gradient(g, meta, &initial);
    assert!(gradient.iter().map(|v| v.abs()).fold(0.0, f32::max) > 1e-3, "a step that moves the weights");
    initial.iter().zip(&gradient).map(|(p, g)| p - LR * g).collect()
}

#[test]
fn one_epoch_steps_by_the_dense_full_batch_gradient_on_any_cluster_shape() {
    let dir = scratch("full-graph-dense");
    let data = dir.join("g");
    generate(&data, NODES, 4, 6, 3);
    let g = dense(&data);
    let keys = train_keys("gcn", 1);
    let one = train_full(&dir, &data, "one", 1, &keys);
    let (meta, trained) = params(&one);
    let expected = dense_step(&g, &meta);
    assert!(largest_gap(&trained, &expected) < 1e-5, "{}", largest_gap(&trained, &expected));
    assert!(meta.fanouts.is_empty() && meta.hops == 2, "every edge at each of the 2 layers: {meta:?}");
    for workers in [2, 3] {
        let (_, other) = params(&train_full(&dir, &data, &format!("w{workers}"), workers, &keys));
        assert!(largest_gap(&other, &expected) < 1e-5, "{workers} workers: {}", largest_gap(&other, &expected));
    }
    // Two processes of two workers, over TCP.
    let procs = params(&train_two_processes(&dir, &data, &keys)).1;
    assert!(largest_gap(&procs, &expected) < 1e-5, "2 processes: {}", largest_gap(&procs, &expected));
}

#[test]
fn split_hubs_step_by_the_dense_gradient_and_as_hubs_kept_whole() {
    let dir = scratch("full-graph-hubs");
    let data = dir.join("g");
    generate(&data, NODES, 4, 6, 3);
    let g = dense(&data);
    // Hubs of more than 4 in-edges are summed in runs on other workers and merged at the owner.
    let keys = format!("{}hub_threshold = 4\n", train_keys("gcn", 1));
    let (one, summary) = train_full_summary(&dir, &data, "one", 1, &keys);
    assert!(split_hubs(&summary) > 10, "{summary}");
    let (meta, trained) = params(&one);
    let expected = dense_step(&g, &meta);
    assert!(largest_gap(&trained, &expected) < 1e-5, "{}", largest_gap(&trained, &expected));
    let (three, summary) = train_full_summary(&dir, &data, "three", 3, &keys);
    assert!(split_hubs(&summary) > 10, "{summary}");
    assert!(largest_gap(&params(&three).1, &expected) < 1e-5, "3 workers");
    // Two processes of two workers: partials cross between processes too.
    let procs = params(&train_two_processes(&dir, &data, &keys)).1;
    assert!(largest_gap(&procs, &expected) < 1e-5, "2 processes: {}", largest_gap(&procs, &expected));
    // With dropout (each run's source rows masked as the owner's copies are) and an edge
    // term (GraphSAGE, GAT and GINE read the edges' features), three epochs: the same model as
    // with every hub whole, on another cluster shape. GAT's and GINE's pieces run the layer
    // (GAT's softmax merged at the owner, with attention dropout drawn per in-edge).
    let data = dir.join("e");
    let mut args = generate_args(data.to_str().unwrap(), NODES, 4, 6, 5);
    args.extend(["--edge-feature-dim".into(), "3".into()]);
    graphflat_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    for model in ["gcn", "sage", "gat", "gine"] {
        let mut keys = train_keys(model, 3).replace("dropout = 0.0", "dropout = 0.5");
        if model == "gat" {
            keys.push_str("attention_dropout = 0.3\n");
        }
        let whole = train_full(&dir, &data, &format!("{model}-whole"), 2, &format!("{keys}hub_threshold = 0\n"));
        let split = format!("{keys}hub_threshold = 3\n");
        let (split, summary) = train_full_summary(&dir, &data, &format!("{model}-split"), 3, &split);
        assert!(split_hubs(&summary) > 10, "{summary}");
        let ((meta, whole), split) = (params(&whole), params(&split).1);
        assert_eq!(meta.spec.edge_dim, if model == "gcn" { 0 } else { 3 });
        assert!(largest_gap(&whole, &params_at_start(&meta)) > 1e-3, "{model}: the steps moved it");
        assert!(largest_gap(&whole, &split) < 1e-5, "{model}: {}", largest_gap(&whole, &split));
    }
}

/// The summary's count of split hubs (0 when none was).
fn split_hubs(summary: &str) -> u64 {
    let line = summary.lines().find(|l| l.contains("exchanged:")).unwrap_or_else(|| panic!("{summary}"));
    line.split(" split hubs").next().and_then(|s| s.rsplit(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[test]
fn stale_copies_send_fewer_bytes_and_a_zero_threshold_changes_nothing() {
    let dir = scratch("full-graph-stale");
    let data = dir.join("g");
    generate(&data, NODES, 4, 6, 13);
    let keys = train_keys("gcn", 6);
    let (exact, summary) = train_full_summary(&dir, &data, "exact", 2, &keys);
    assert_eq!(bytes_sent(&summary), 100.0, "{summary}");
    // A row is skipped only when it did not change at all: the same steps.
    let zero = format!("{keys}halo_staleness = 3\nhalo_threshold = 0.0\n");
    let (same, _) = train_full_summary(&dir, &data, "zero", 2, &zero);
    let (exact, same) = (params(&exact).1, params(&same).1);
    assert!(largest_gap(&exact, &same) < 1e-6, "{}", largest_gap(&exact, &same));
    // Rows that moved less than half their norm are reused for up to 3 epochs.
    let loose = format!("{keys}halo_staleness = 3\nhalo_threshold = 0.5\n");
    let (stale, summary) = train_full_summary(&dir, &data, "loose", 2, &loose);
    let sent = bytes_sent(&summary);
    assert!(sent < 90.0, "{summary}");
    assert!(largest_gap(&exact, &params(&stale).1) > 1e-6, "stale copies change the steps");
    // The same on 3 workers: the decisions are per row, not per worker pair.
    let (_, summary) = train_full_summary(&dir, &data, "loose3", 3, &loose);
    assert!(bytes_sent(&summary) < 90.0, "{summary}");
}

#[test]
fn bfloat16_rows_cross_at_half_the_bytes_and_move_the_model_by_their_rounding() {
    let dir = scratch("full-graph-bf16");
    let data = dir.join("g");
    generate(&data, NODES, 4, 6, 17);
    let keys = train_keys("gcn", 6);
    let bf16 = format!("{keys}halo_precision = \"bf16\"\n");
    let exact = params(&train_full(&dir, &data, "exact", 3, &keys)).1;
    let (rounded, summary) = train_full_summary(&dir, &data, "bf16", 3, &bf16);
    assert_eq!(bytes_sent(&summary), 50.0, "{summary}");
    assert!(summary.contains("at bfloat16"), "{summary}");
    // Each crossing value moves by at most 2^-8 of itself: the model moves, a little.
    let (rounded, scale) = (params(&rounded).1, exact.iter().fold(0f32, |m, v| m.max(v.abs())));
    let gap = largest_gap(&exact, &rounded);
    assert!(gap > 1e-7 && gap < 1e-2 * scale, "{gap} of {scale}");
    // One worker: nothing crosses, nothing is rounded.
    let one = (train_full(&dir, &data, "one", 1, &keys), train_full(&dir, &data, "one-bf16", 1, &bf16));
    assert_eq!(params(&one.0).1, params(&one.1).1);
    // With stale copies, the rows that still cross cross at half the bytes.
    let stale = format!("{keys}halo_staleness = 3\nhalo_threshold = 0.5\n");
    let (_, f32_summary) = train_full_summary(&dir, &data, "stale", 3, &stale);
    let (_, bf16_summary) =
        train_full_summary(&dir, &data, "stale-bf16", 3, &format!("{stale}halo_precision = \"bf16\"\n"));
    let (f32_sent, bf16_sent) = (bytes_sent(&f32_summary), bytes_sent(&bf16_summary));
    assert!(bf16_sent < 0.75 * f32_sent, "{bf16_sent}% against {f32_sent}%");
}

#[test]
fn graphinfer_scores_a_full_graph_model_as_the_dense_forward_pass() {
    let dir = scratch("full-graph-infer");
    let data = dir.join("g");
    generate(&data, NODES, 4, 6, 5);
    let model = train_full(&dir, &data, "model", 2, &train_keys("gcn", 5));
    let scores = dir.join("scores");
    let job = format!(
        "[cluster]\nworkers = 3\n[infer]\nnodes = \"{d}/nodes\"\nedges = \"{d}/edges\"\nmodel = \"{}\"\noutput = \"{}\"\n",
        model.display(),
        scores.display(),
        d = data.display()
    );
    std::fs::write(dir.join("infer.toml"), job).unwrap();
    run_ok(&dir.join("infer.toml"), &[]);
    let scored = read_scores(&scores);
    let device = Device::flex();
    let (_, gnn) = gnn::io::load(&local_io(), model.to_str().unwrap(), &device).unwrap();
    let g = dense(&data);
    let probabilities = burn::tensor::activation::softmax(dense_logits(&g, &gnn, &device), 1);
    let expected = probabilities.into_data().try_to_vec::<f32>().unwrap();
    let classes = expected.len() / g.n;
    assert_eq!(scored.len(), g.n);
    for (id, (_, _, row)) in &scored {
        let want = &expected[*id as usize * classes..(*id as usize + 1) * classes];
        assert!(largest_gap(row, want) < 1e-4, "node {id}: {row:?} against {want:?}");
    }
}

/// Records of `data` that hold every edge within 2 hops, every node a target.
fn every_edge_records(dir: &Path, data: &Path) -> PathBuf {
    flatten(dir, data, "flat", &[], |job| job.key("hops", 2).key("sampler", "all").key("targets", "all"))
}

#[test]
fn every_kind_steps_as_the_record_trainer_on_records_of_every_edge() {
    let dir = scratch("full-graph-records");
    let data = dir.join("g");
    graphflat_ok(&[
        "generate",
        "--out",
        data.to_str().unwrap(),
        "--nodes",
        "200",
        "--avg-degree",
        "3",
        "--feature-dim",
        "5",
        "--edge-feature-dim",
        "2",
        "--seed",
        "9",
    ]);
    let records = every_edge_records(&dir, &data);
    for model in ["gcn", "sage", "gat", "gine"] {
        // One batch of every training record: the record trainer's step is then the full batch's.
        let keys = format!("{}batch_size = 100000\n", train_keys(model, 2));
        let full = train_full(&dir, &data, &format!("full-{model}"), 2, &keys);
        // GAT's and GINE's hubs split too: their pieces run the layer on 3 workers.
        let split = matches!(model, "gat" | "gine").then(|| {
            let keys = format!("{keys}hub_threshold = 2\n");
            let (split, summary) = train_full_summary(&dir, &data, &format!("split-{model}"), 3, &keys);
            assert!(split_hubs(&summary) > 10, "{summary}");
            split
        });
        let on_records = dir.join(format!("records-{model}"));
        let job = format!(
            "[cluster]\nworkers = 1\n[train]\nrecords = \"{}\"\noutput = \"{}\"\n{keys}",
            records.display(),
            on_records.display()
        );
        std::fs::write(dir.join(format!("records-{model}.toml")), job).unwrap();
        run_ok(&dir.join(format!("records-{model}.toml")), &[]);
        let ((full_meta, full), (record_meta, record)) = (params(&full), params(&on_records));
        assert_eq!(full_meta.spec.edge_dim, record_meta.spec.edge_dim, "{model}");
        assert_eq!(full_meta.spec.edge_dim, if model == "gcn" { 0 } else { 2 }, "{model}");
        assert!(largest_gap(&full, &record) < 2e-5, "{model}: {}", largest_gap(&full, &record));
        if let Some(split) = split {
            let split = params(&split).1;
            assert!(largest_gap(&split, &record) < 2e-5, "{model} split: {}", largest_gap(&split, &record));
        }
    }
}

#[test]
fn a_link_epoch_steps_as_the_record_trainer_on_link_records_of_every_edge() {
    let dir = scratch("full-graph-link");
    let data = split_graph(&dir, 150, 3, 5, 5);
    // Epoch 0 draws each training edge's negatives as a flatten with the same seed does.
    let records = flatten(&dir, &data, "flat", &[], |job| {
        job.key("hops", 2).key("sampler", "all").key("task", "link").key("negatives", 2).key("seed", 11)
    });
    // GAT's and GINE's hubs split (the full-graph job's key alone): their pieces run the layer.
    let cases = [
        ("gcn", "dot", 1, ""),
        ("gcn", "dot", 3, ""),
        ("sage", "mlp", 2, ""),
        ("gat", "dot", 2, ""),
        ("gat", "mlp", 3, "hub_threshold = 2\n"),
        ("gine", "dot", 3, "hub_threshold = 2\n"),
    ];
    for (model, decoder, workers, hubs) in cases {
        let keys = format!(
            "{}task = \"link\"\ndecoder = \"{decoder}\"\nembedding_dim = 4\npatience = 0\n",
            train_keys(model, 1)
        );
        let name = format!("{model}-{decoder}-{workers}");
        let full_keys = format!("{keys}negatives = 2\n{hubs}");
        let (full, summary) = train_full_summary(&dir, &data, &format!("full-{name}"), workers, &full_keys);
        assert_eq!(split_hubs(&summary) > 0, !hubs.is_empty(), "{name}: {summary}");
        // Every training record in one batch, no batch negatives: the record trainer's one step.
        let on_records = dir.join(format!("records-{name}"));
        let job = format!(
            "[cluster]\nworkers = 1\n[train]\nrecords = \"{}\"\noutput = \"{}\"\n{keys}batch_size = 100000\n\
             batch_negatives = \"none\"\n",
            records.display(),
            on_records.display()
        );
        std::fs::write(dir.join(format!("records-{name}.toml")), job).unwrap();
        run_ok(&dir.join(format!("records-{name}.toml")), &[]);
        let ((full_meta, full), (_, record)) = (params(&full), params(&on_records));
        assert_eq!(full_meta.spec.task, schemas::Task::Link);
        let start = params_at_start(&full_meta);
        assert!(largest_gap(&full, &start) > 1e-3, "{name}: the step moved the parameters");
        assert!(largest_gap(&full, &record) < 2e-5, "{name}: {}", largest_gap(&full, &record));
        if name == "gcn-dot-1" {
            // GraphInfer embeds every node with either model alike.
            let (full, record) = (infer(&data, &dir.join("full-gcn-dot-1")), infer(&data, &on_records));
            assert_eq!(full.len(), 150);
            for (id, row) in &full {
                assert!(largest_gap(row, &record[id]) < 1e-4, "node {id}: {row:?} against {:?}", record[id]);
            }
        }
    }
    // Later epochs draw fresh negatives, the same on any cluster shape.
    let keys = format!("{}task = \"link\"\nembedding_dim = 4\nnegatives = 3\n", train_keys("sage", 4));
    let (one, three) = (train_full(&dir, &data, "epochs-1", 1, &keys), train_full(&dir, &data, "epochs-3", 3, &keys));
    let (one, three) = (params(&one).1, params(&three).1);
    assert!(largest_gap(&one, &three) < 1e-5, "{}", largest_gap(&one, &three));
}

/// GraphInfer's embeddings of every node of `data` with `model`, on two workers.
fn infer(data: &Path, model: &Path) -> BTreeMap<i64, Vec<f32>> {
    let out = model.with_extension("embeddings");
    let job = format!(
        "[cluster]\nworkers = 2\n[infer]\nnodes = \"{d}/nodes\"\nedges = \"{d}/edges\"\nmodel = \"{}\"\noutput = \"{}\"\n",
        model.display(),
        out.display(),
        d = data.display()
    );
    let path = model.with_extension("infer.toml");
    std::fs::write(&path, job).unwrap();
    run_ok(&path, &[]);
    read_embeddings(&out)
}

/// The parameters a model of `meta`'s spec starts from (its seed's).
fn params_at_start(meta: &ModelMeta) -> Vec<f32> {
    gnn::params::flatten(&gnn::Gnn::new(&meta.spec, &Device::flex()))
}

/// The generated typed graph's `[graph]` with every relation's every in-edge (no relation's
/// own fanouts).
fn typed_graph(data: &Path) -> String {
    graph_tables(data).replace(&format!("fanouts = {RETURNS_FANOUTS:?}\n"), "")
}

#[test]
fn typed_models_step_as_the_record_trainer_on_typed_records_of_every_edge() {
    // Users with more than 3 in-edges split by run and relation (R-GCN) over 3 workers.
    let cases = [("rgcn", "", 1), ("rgcn", "bases = 2\nhub_threshold = 3\n", 3), ("sage", "", 2)];
    typed_steps_match_records("full-graph-typed", &[], &cases);
}

#[test]
fn typed_models_read_relations_edge_features_as_the_record_trainer() {
    // Buys edges carry 4 features and follows edges 2; returns and sells none. Both kinds
    // read them, standardized per relation or raw.
    // GraphSAGE with its hubs split: the virtual edges carry their pieces' mean features.
    let cases = [("rgcn", "normalize_edge_features = true\n", 2), ("sage", "hub_threshold = 2\n", 3)];
    typed_steps_match_records("full-graph-typed-edges", &["--edge-feature-dim", "4"], &cases);
}

#[test]
fn typed_split_hubs_take_the_steps_of_hubs_kept_whole_under_dropout() {
    let dir = scratch("full-graph-typed-hubs");
    let data = dir.join("graph");
    let data_arg = data.to_str().unwrap();
    graphflat_ok(&[
        "generate",
        "--hetero",
        "--out",
        data_arg,
        "--nodes",
        "400",
        "--seed",
        "6",
        "--edge-feature-dim",
        "4",
    ]);
    let graph = typed_graph(&data);
    // Each piece's sources masked as their owners' rows are, each relation's mean of edge
    // features carried by its virtual edges: three epochs split by run and relation on 3
    // workers equal every hub whole on 2.
    for model in ["rgcn", "sage"] {
        let keys = train_keys(model, 3).replace("dropout = 0.0", "dropout = 0.5");
        let train = |name: String, workers: usize, threshold: u64| {
            let out = dir.join(&name);
            let job = format!(
                "{graph}[cluster]\nworkers = {workers}\n[train]\ntarget_type = \"user\"\nlayers = 2\noutput = {:?}\n\
                 {keys}hub_threshold = {threshold}\n",
                out.display().to_string()
            );
            (out.clone(), run_ok(&write_job(&dir, &name, &job), &[]))
        };
        let (whole, _) = train(format!("{model}-whole"), 2, 0);
        let (split, summary) = train(format!("{model}-split"), 3, 2);
        assert!(split_hubs(&summary) > 10, "{summary}");
        let ((meta, whole), split) = (params(&whole), params(&split).1);
        assert!(meta.spec.types.as_ref().unwrap().has_edge_features(), "{model}: the model reads edge features");
        assert!(largest_gap(&whole, &params_at_start(&meta)) > 1e-3, "{model}: the steps moved it");
        assert!(largest_gap(&whole, &split) < 1e-5, "{model}: {}", largest_gap(&whole, &split));
    }
}

#[test]
fn typed_link_models_step_as_the_record_trainer_on_typed_link_records_of_every_edge() {
    // Buys (users to items, 4 edge features) split into train, valid and test edges.
    let dir = scratch("full-graph-typed-link");
    let data = typed::split_typed(&dir);
    let graph = typed_graph(&data);
    let flat = dir.join("flat");
    let job = format!(
        "{graph}[flatten]\noutput = {:?}\ntask = \"link\"\nlink_relation = \"buys\"\nnegatives = 2\nhops = 2\n\
         sampler = \"all\"\nseed = 11\n",
        flat.display().to_string()
    );
    run_ok(&write_job(&dir, "flat", &job), &[]);
    // GraphSAGE's hubs split by run and relation (the full-graph job's key alone).
    for (model, decoder, workers, hubs) in [("rgcn", "dot", 1, ""), ("sage", "mlp", 3, "hub_threshold = 2\n")] {
        let name = format!("{model}-{workers}");
        let keys = format!(
            "{}task = \"link\"\ndecoder = \"{decoder}\"\nembedding_dim = 4\npatience = 0\nnormalize_edge_features = true\n",
            train_keys(model, 1)
        );
        let full = dir.join(format!("full-{name}"));
        let job = format!(
            "{graph}[cluster]\nworkers = {workers}\n[train]\nlink_relation = \"buys\"\nnegatives = 2\nlayers = 2\n\
             output = {:?}\n{keys}{hubs}",
            full.display().to_string()
        );
        let summary = run_ok(&write_job(&dir, &format!("full-{name}"), &job), &[]);
        assert_eq!(split_hubs(&summary) > 0, !hubs.is_empty(), "{name}: {summary}");
        // Every training record in one batch, no batch negatives: the record trainer's one step.
        let on_records = dir.join(format!("records-{name}"));
        let job = format!(
            "[cluster]\nworkers = 1\n[train]\nrecords = {:?}\noutput = {:?}\n{keys}batch_size = 100000\n\
             batch_negatives = \"none\"\n",
            flat.display().to_string(),
            on_records.display().to_string()
        );
        run_ok(&write_job(&dir, &format!("records-{name}"), &job), &[]);
        let ((full_meta, full_params), (record_meta, record)) = (params(&full), params(&on_records));
        assert_eq!(full_meta.spec.types, record_meta.spec.types, "{name}");
        assert_eq!(full_meta.link_relation, record_meta.link_relation, "{name}");
        assert!(largest_gap(&full_params, &params_at_start(&full_meta)) > 1e-3, "{name}: the step moved it");
        // The weights agree to 1e-6; a bias's gradient sums every row's, which records repeat
        // once per record that holds them (1,500 nodes, a loss near 8): summed in other groups.
        let gap = largest_gap(&full_params, &record);
        assert!(gap < 5e-5, "{name}: {gap}");
    }
    // A typed link task names its relation.
    let job = format!(
        "{graph}[train]\ntarget_type = \"user\"\nmodel = \"rgcn\"\ntask = \"link\"\noutput = \"{}/m\"\n",
        dir.display()
    );
    assert_fails(&run(&write_job(&dir, "bad", &job), &[]), 64, &["needs [train] link_relation"]);
}

/// GraphInfer scores with either model (trained on the graph, trained on its records) alike,
/// every node of every type, only the users scored.
fn graphinfer_scores_either_model_alike(graph: &str, full: &Path, on_records: &Path) {
    let (full, record) = (infer_typed(graph, full), infer_typed(graph, on_records));
    assert_eq!(full.len(), record.len());
    for (node, (embedding, _, scores)) in &full {
        let (want, _, want_scores) = &record[node];
        assert!(largest_gap(embedding, want) < 1e-4, "{node:?}");
        assert_eq!(scores.is_some(), node.0 == "user", "{node:?}: only users are scored");
        if let (Some(a), Some(b)) = (scores, want_scores) {
            assert!(largest_gap(a, b) < 1e-4, "{node:?}");
        }
    }
}

/// On a generated typed graph (`generate` given `args` too), each case's (kind, extra keys,
/// workers) full-graph step equals the record trainer's one batch of typed records of every
/// edge; GraphInfer scores the first case's models alike. A `hub_threshold` among the extra
/// keys is the full-graph job's alone, and must split hubs.
fn typed_steps_match_records(name: &str, args: &[&str], cases: &[(&str, &str, usize)]) {
    let dir = scratch(name);
    let data = dir.join("graph");
    let data_arg = data.to_str().unwrap();
    graphflat_ok(&[&["generate", "--hetero", "--out", data_arg, "--nodes", "400", "--seed", "4"], args].concat());
    let graph = typed_graph(&data);
    let flat = dir.join("flat");
    let job = format!(
        "{graph}[flatten]\noutput = {:?}\ntarget_type = \"user\"\nhops = 2\nsampler = \"all\"\n",
        flat.display().to_string()
    );
    run_ok(&write_job(&dir, "flat", &job), &[]);
    for (i, &(model, extra, workers)) in cases.iter().enumerate() {
        let name = format!("{model}-{workers}");
        let (hubs, extra): (Vec<&str>, Vec<&str>) = extra.lines().partition(|l| l.starts_with("hub_threshold"));
        let (hubs, extra) = (hubs.concat(), extra.iter().map(|l| format!("{l}\n")).collect::<String>());
        // One batch of every training record: the record trainer's step is then the full batch's.
        let keys = format!("{}{extra}batch_size = 100000\n", train_keys(model, 2));
        let full = dir.join(format!("full-{name}"));
        let job = format!(
            "{graph}[cluster]\nworkers = {workers}\n[train]\ntarget_type = \"user\"\nlayers = 2\noutput = {:?}\n{keys}{hubs}\n",
            full.display().to_string()
        );
        let summary = run_ok(&write_job(&dir, &format!("full-{name}"), &job), &[]);
        assert_eq!(split_hubs(&summary) > 0, !hubs.is_empty(), "{name}: {summary}");
        let on_records = dir.join(format!("records-{name}"));
        let job = format!(
            "[cluster]\nworkers = 1\n[train]\nrecords = {:?}\noutput = {:?}\n{keys}",
            flat.display().to_string(),
            on_records.display().to_string()
        );
        run_ok(&write_job(&dir, &format!("records-{name}"), &job), &[]);
        let ((full_meta, full_params), (record_meta, record)) = (params(&full), params(&on_records));
        assert_eq!(full_meta.spec.types, record_meta.spec.types, "{name}");
        assert_eq!(full_meta.spec.normalize_edge_features, extra.contains("normalize_edge_features"), "{name}");
        assert_eq!(full_meta.spec.relation_edge_stats, record_meta.spec.relation_edge_stats, "{name}");
        if !args.is_empty() {
            let types = full_meta.spec.types.as_ref().unwrap();
            assert!(types.has_edge_features(), "{name}: the model reads the relations' edge features");
        }
        assert!(largest_gap(&full_params, &params_at_start(&full_meta)) > 1e-3, "{name}: the steps moved it");
        assert!(largest_gap(&full_params, &record) < 2e-5, "{name}: {}", largest_gap(&full_params, &record));
        if i == 0 {
            graphinfer_scores_either_model_alike(&graph, &full, &on_records);
        }
    }
    if args.is_empty() {
        let job = format!(
            "{graph}[train]\ntarget_type = \"user\"\nmodel = \"rgcn\"\nedge_features = true\noutput = \"{}/m\"\n",
            dir.display()
        );
        assert_fails(&run(&write_job(&dir, "bad", &job), &[]), 64, &["no relation's edge table has a features column"]);
    }
}

#[test]
fn typed_workers_that_own_no_node_take_part_in_every_exchange() {
    // 40 typed nodes on 16 workers: some own none, and their empty projection still runs
    // backward in step (it was a panic: the empty rows were no autodiff tensor), as do
    // GraphSAGE's per-type self weights over no rows (a panic too: no type had rows).
    let dir = scratch("full-graph-typed-empty");
    let data = dir.join("graph");
    graphflat_ok(&["generate", "--hetero", "--out", data.to_str().unwrap(), "--nodes", "40", "--seed", "2"]);
    let graph = typed_graph(&data);
    for model in ["rgcn", "sage"] {
        let train = |workers: usize| {
            let out = dir.join(format!("{model}-{workers}"));
            let job = format!(
                "{graph}[cluster]\nworkers = {workers}\n[train]\ntarget_type = \"user\"\noutput = {:?}\n{}",
                out.display().to_string(),
                train_keys(model, 2)
            );
            run_ok(&write_job(&dir, &format!("{model}-{workers}"), &job), &[]);
            params(&out).1
        };
        let (few, many) = (train(1), train(16));
        assert!(largest_gap(&few, &many) < 1e-5, "{model}: {}", largest_gap(&few, &many));
    }
}

#[test]
fn typed_full_graph_keys_are_checked() {
    let dir = scratch("full-graph-typed-usage");
    let data = dir.join("graph");
    let graph = typed_graph(&data);
    // Checked before any table is read: the graph need not exist.
    for (keys, words) in [
        ("model = \"gat\"", "\"rgcn\" and \"sage\""),
        ("model = \"rgcn\"\nlink_relation = \"buys\"", "a key of the link task"),
        ("model = \"rgcn\"\nnodes = \"n\"", "names nodes, and the job has a [graph]"),
        ("model = \"rgcn\"\nrecords = \"r\"", "or a typed [graph] and target_type"),
        ("model = \"rgcn\"\ntarget_type = \"buyer\"", "not a node type"),
    ] {
        let target = if keys.contains("target_type") { "" } else { "target_type = \"user\"\n" };
        let job = format!("{graph}[train]\n{target}{keys}\noutput = \"{}/m\"\n", dir.display());
        assert_fails(&run(&write_job(&dir, "bad", &job), &[]), 64, &[words]);
        assert!(!dir.join("m").exists(), "{keys}: nothing written");
    }
    let homogeneous = "[train]\nnodes = \"n\"\nedges = \"e\"\nmodel = \"rgcn\"\noutput = \"m\"\n";
    assert_fails(&run(&write_job(&dir, "rgcn", homogeneous), &[]), 64, &["reads a typed graph"]);
    let no_graph = "[train]\ntarget_type = \"user\"\nmodel = \"rgcn\"\noutput = \"m\"\n";
    assert_fails(&run(&write_job(&dir, "no-graph", no_graph), &[]), 64, &["no [graph]"]);
}

/// GraphInfer's rows of the typed graph `graph` with `model`, on two workers.
fn infer_typed(graph: &str, model: &Path) -> BTreeMap<typed::Node, typed::TypedScored> {
    let out = model.with_extension("scores");
    let job = format!(
        "{graph}[cluster]\nworkers = 2\n[infer]\ntarget_type = \"user\"\nmodel = {:?}\noutput = {:?}\n",
        model.display().to_string(),
        out.display().to_string()
    );
    let path = model.with_extension("infer.toml");
    std::fs::write(&path, job).unwrap();
    run_ok(&path, &[]);
    typed::read_typed_scores(&out)
}

#[test]
fn workers_that_own_no_node_take_part_in_every_exchange() {
    // 12 nodes on 16 workers: some own nothing (GAT's softmax over no rows was a panic), and
    // with every node of 2 in-edges or more split, some reduce pieces of hubs they do not own.
    let dir = scratch("full-graph-empty-workers");
    let data = dir.join("g");
    generate(&data, 12, 2, 3, 2);
    for model in ["gcn", "sage", "gat", "gine"] {
        let keys = train_keys(model, 2);
        let few = train_full(&dir, &data, &format!("{model}-1"), 1, &keys);
        let split = format!("{keys}hub_threshold = 1\n");
        let (many, summary) = train_full_summary(&dir, &data, &format!("{model}-16"), 16, &split);
        assert!(split_hubs(&summary) > 0, "{summary}");
        let (few, many) = (params(&few).1, params(&many).1);
        assert!(largest_gap(&few, &many) < 1e-5, "{model}: {}", largest_gap(&few, &many));
    }
}

#[test]
fn full_graph_keys_are_checked() {
    let dir = scratch("full-graph-usage");
    let data = dir.join("g");
    generate(&data, 60, 3, 4, 1);
    for (i, (keys, words)) in bad_keys(&data).iter().enumerate() {
        let job = dir.join(format!("bad{i}.toml"));
        std::fs::write(&job, format!("[train]\n{keys}\noutput = \"{}/m{i}\"\n", dir.display())).unwrap();
        assert_fails(&run(&job, &[]), 64, &[words]);
        assert!(!dir.join(format!("m{i}")).exists(), "{keys}: nothing written");
    }
    jobs_that_fail_on_their_data_or_their_place(&dir, &data);
}

/// `[train]` keys that cannot work, with words of their error: a mode's keys in the other
/// mode, values out of range, what full-graph training does not do.
fn bad_keys(data: &Path) -> Vec<(String, &'static str)> {
    let d = data.display();
    let (graph, records) = (format!("nodes = \"{d}/nodes\"\nedges = \"{d}/edges\""), format!("records = \"{d}/r\""));
    let on = |keys: &str| format!("{graph}\n{keys}");
    let idle = "keys of full-graph training";
    vec![
        (format!("{records}\n{graph}"), "not both"),
        (format!("nodes = \"{d}/nodes\""), "set both"),
        (format!("{records}\nlayers = 3"), idle),
        (format!("{records}\nhalo_staleness = 2"), idle),
        (on("halo_threshold = -1.0"), "halo_threshold"),
        (on("halo_staleness = 4294967296"), "halo_staleness is at most"),
        (on("memory_mb = 0"), "memory_mb must be at least 1"),
        (on("negatives = 2"), "keys of the link task"),
        (format!("{records}\nnegatives = 2"), idle),
        (on("task = \"link\"\nbatch_negatives = \"destinations\""), "batch negatives"),
        (on("task = \"link\"\nnegatives = 0"), "negatives >= 1"),
        (on("learned_embedding_dim = 4"), "learned_embedding_dim"),
        (on("mode = \"async\""), "async"),
        (on("layers = 0"), "layers must be"),
        (format!("{records}\nhub_threshold = 4"), idle),
        (format!("{records}\nhalo_precision = \"bf16\""), idle),
        (on("halo_precision = \"f16\""), "halo_precision"),
        (on("hub_threshold = -1"), "hub_threshold"),
    ]
}

/// Jobs whose keys are fine: the record trainer's keys idle, not refused; a link task with
/// nothing to learn; a graph that does not fit the memory allowed; an output inside an input.
fn jobs_that_fail_on_their_data_or_their_place(dir: &Path, data: &Path) {
    let d = data.display();
    // The record trainer's keys are said to be idle, not refused (one job file, either mode).
    let job = dir.join("idle.toml");
    let keys = format!("nodes = \"{d}/nodes\"\nedges = \"{d}/edges\"\nbatch_size = 64\ncache_mb = 8\nepochs = 1");
    std::fs::write(&job, format!("[train]\n{keys}\noutput = \"{}/idle\"\n", dir.display())).unwrap();
    let out = run(&job, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("batch_size, cache_mb are keys of training on records"), "{}", text(&out));
    // A link task on edges without a split: nothing to learn, a data error.
    let job = dir.join("no-split.toml");
    let keys = format!("nodes = \"{d}/nodes\"\nedges = \"{d}/edges\"\ntask = \"link\"");
    std::fs::write(&job, format!("[train]\n{keys}\noutput = \"{}/no-split\"\n", dir.display())).unwrap();
    assert_fails(&run(&job, &[]), 65, &["no edge has split \"train\""]);
    assert!(!dir.join("no-split/_SUCCESS").exists());
    // A graph that does not fit the memory the job allows: refused before the first epoch.
    // 3000 nodes of 64 features: 1.5 MiB of input rows alone, twice the 1 MiB allowed.
    let wide = dir.join("wide");
    generate(&wide, 3000, 3, 64, 1);
    let job = dir.join("small.toml");
    let w = wide.display();
    let keys = format!("nodes = \"{w}/nodes\"\nedges = \"{w}/edges\"\nmemory_mb = 1");
    std::fs::write(&job, format!("[train]\n{keys}\noutput = \"{}/small\"\n", dir.display())).unwrap();
    assert_fails(&run(&job, &[]), 64, &["needs about", "train on its records"]);
    assert!(!dir.join("small/_SUCCESS").exists());
    // The output inside an input table: refused before anything is written there.
    let job = dir.join("inside.toml");
    std::fs::write(&job, format!("[train]\nnodes = \"{d}/nodes\"\nedges = \"{d}/edges\"\noutput = \"{d}/nodes/m\"\n"))
        .unwrap();
    assert_fails(&run(&job, &[]), 64, &["nodes"]);
    assert!(!data.join("nodes/m").exists());
}

/// A label at or above `[train] classes` is bad input (65) naming its file, row and column,
/// found again by an independent read of the node table with pyarrow's view: the generated
/// table's largest class, whose first row the message must name.
#[test]
fn a_label_above_classes_names_its_file_row_and_column() {
    let dir = scratch("full-label-above");
    let data = dir.join("g");
    generate(&data, NODES, 4, 8, 3);
    let labels = read_column_i64(&data.join("nodes"), "label");
    let largest = *labels.iter().map(|(_, _, c)| c).max().unwrap();
    let (file, row, _) = labels.iter().find(|(_, _, c)| *c == largest).unwrap().clone();
    let job = format!(
        "[train]\nnodes = \"{0}/nodes\"\nedges = \"{0}/edges\"\noutput = \"{1}\"\nclasses = {largest}\n{2}",
        data.display(),
        dir.join("model").display(),
        train_keys("gcn", 1)
    );
    let path = dir.join("above.toml");
    std::fs::write(&path, job).unwrap();
    let out = run(&path, &[]);
    let at = format!("{file}, row {row}, column \"label\"");
    assert_fails(&out, 65, &[&at, &format!("not below [train] classes = {largest}")]);
}

/// A model written with patience = 0 is the last epoch's, and the summary says so.
#[test]
fn the_summary_names_the_epoch_whose_weights_were_written() {
    let dir = scratch("full-written-epoch");
    let data = dir.join("g");
    generate(&data, NODES, 4, 8, 3);
    let (_, summary) = train_full_summary(&dir, &data, "last", 1, &format!("{}patience = 0\n", train_keys("gcn", 3)));
    assert!(summary.contains("weights of:   epoch 3"), "{summary}");
}
