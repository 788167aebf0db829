//! Link models, end to end over the real pipeline (`split-edges`, a link `[flatten]`, a link
//! `[train]`, `[infer]`): GraphInfer's embedding of every node equals the trainer's encoder
//! output for that node in any link record that holds it, and the decoder on GraphInfer's
//! embeddings gives the trainer's pair scores, to 1e-4; with every in-edge and with a sampler
//! (hubs split); the same embeddings on 1 and 2 workers and 2 processes.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use burn::prelude::*;
use gnn::decoder::PairScorer;

/// GraphInfer's `embedding` column by node id; checks that a link model writes no node head.
fn read_embeddings(dir: &Path) -> BTreeMap<i64, Vec<f32>> {
    let mut out = BTreeMap::new();
    for batch in read_batches(dir) {
        assert!(batch.column_by_name("scores").is_none() && batch.column_by_name("prediction").is_none());
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let embedding = batch.column_by_name("embedding").unwrap().as_fixed_size_list();
        for r in 0..batch.num_rows() {
            let row = embedding.value(r).as_primitive::<Float32Type>().values().to_vec();
            assert!(out.insert(ids.value(r), row).is_none(), "node {} written twice", ids.value(r));
        }
    }
    out
}

fn max_gap(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// A link model's settings: (model kind, decoder, fanouts or every in-edge).
type Case = (&'static str, &'static str, Option<Vec<i64>>);

/// Flattens, trains and infers a link model; checks GraphInfer against the
/// trainer's forward pass on every link record. Returns GraphInfer's embeddings.
fn check_consistency(dir: &Path, data: &Path, name: &str, (model, decoder, fanouts): &Case) -> BTreeMap<i64, Vec<f32>> {
    let at = |what: &str| dir.join(format!("{name}-{what}"));
    let mut flatten = Job::flatten(data, at("flat")).key("task", "link").key("negatives", 2).key("hub_threshold", 4);
    flatten = match fanouts {
        None => flatten.key("sampler", "all"),
        Some(f) => flatten.key("fanouts", f.clone()),
    };
    let train = Job::train(at("flat"), at("model"))
        .key("model", *model)
        .key("decoder", *decoder)
        .key("hidden", 8)
        .key("embedding_dim", 6)
        .key("heads", 2)
        .key("epochs", 3)
        .key("dropout", 0.0);
    let job = flatten.and(train).and(Job::infer(data, at("model"), at("emb")).key("hub_threshold", 4));
    run_ok(&job.write(dir, name), &[]);
    let embeddings = read_embeddings(&at("emb"));
    let (model, records) = (at("model"), at("flat"));
    let forward =
        graphtrainer::forward_link_records(&local_io(), model.to_str().unwrap(), records.to_str().unwrap()).unwrap();
    assert!(!forward.is_empty());
    let device = Device::flex();
    let (meta, gnn) = gnn::io::load(&local_io(), model.to_str().unwrap(), &device).unwrap();
    let scorer = PairScorer::of(&meta.spec, gnn.decoder.as_ref());
    let (mut worst, mut worst_score) = (0f32, 0f32);
    for link in &forward {
        for (id, h) in &link.embeddings {
            worst = worst.max(max_gap(h, &embeddings[id]));
        }
        let destinations = std::iter::once(link.dst).chain(link.negatives.iter().copied());
        for (d, &score) in destinations.zip(&link.scores) {
            let ours = scorer.score(&embeddings[&link.src], &embeddings[&d]);
            worst_score = worst_score.max((ours - score).abs() / score.abs().max(1.0));
        }
    }
    assert!(worst < 1e-4, "{name}: an embedding differs from the trainer's by {worst}");
    assert!(worst_score < 1e-4, "{name}: a pair score differs from the trainer's by {worst_score} (relative)");
    embeddings
}

#[test]
fn graphinfer_embeddings_and_pair_scores_equal_the_trainer_on_link_records() {
    let dir = scratch("link-consistency");
    let data = split_graph(&dir, 300, 5, 6, 11);
    let cases: [(&str, Case); 3] = [
        ("gcn-all", ("gcn", "dot", None)),
        ("sage-sampled", ("sage", "mlp", Some(vec![4, 3]))),
        ("gat-sampled", ("gat", "dot", Some(vec![3, 3]))),
    ];
    for (name, case) in &cases {
        let one = check_consistency(&dir, &data, name, case);
        if *name == "sage-sampled" {
            // The same model on 2 workers and on 2 processes: the same bits.
            let model = dir.join(format!("{name}-model"));
            let two = dir.join(format!("{name}-emb2"));
            run_ok(&Job::infer(&data, &model, &two).key("hub_threshold", 4).write(&dir, "two"), &["--workers", "2"]);
            assert!(read_embeddings(&two) == one, "GraphInfer's embeddings differ on 2 workers");
            let procs = dir.join(format!("{name}-emb-procs"));
            let job = Job::loopback(2).and(Job::infer(&data, &model, &procs).key("hub_threshold", 4));
            run_two_processes(&job.write(&dir, "procs"), &dir);
            assert!(read_embeddings(&procs) == one, "GraphInfer's embeddings differ on 2 processes");
        }
    }
}
