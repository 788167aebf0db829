//! GraphTrainer on link records (`[train] task = "link"`), on link record sets assembled from
//! node records (`common::fake_links`): a link model learns Cora's links, trains to the same
//! bytes on 1 worker, 2 workers and 2 processes, scores pairs as its decoder computed by hand,
//! resumes, uses in-batch negatives, and refuses jobs that do not fit its records.

use std::path::{Path, PathBuf};

use crate::common::*;
use schemas::record::LinkRecord;
use schemas::{Split, Task};

/// `metrics.jsonl` of a model directory, one JSON value per epoch.
fn metrics(model: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(model.join("metrics.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn number(line: &serde_json::Value, key: &str) -> f64 {
    line[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {line}"))
}

/// A generated graph in `dir/graph` and a link record set of it in `dir/<name>`.
fn generated(dir: &Path, name: &str, negatives: usize, split_parts: bool) -> (PathBuf, Vec<LinkRecord>) {
    let data = dir.join("graph");
    if !data.exists() {
        generate(&data, 500, 6, 8, 3);
    }
    link_set(dir, &data, name, LinkSettings { hops: 2, negatives, seed: 11, split_parts })
}

/// A small link job: GraphSAGE, 2 layers 16 wide, embeddings 8 wide, no dropout or weight
/// decay (which holds small dot-product embeddings near zero).
fn link_job(records: &Path, model: &Path) -> Job {
    let job = Job::train(records, model).key("task", "link").key("model", "sage").key("hidden", 16);
    let job = job.key("embedding_dim", 8).key("epochs", 4).key("batch_size", 64).key("lr", 0.01).key("seed", 5);
    job.key("dropout", 0.0).key("weight_decay", 0.0)
}

#[test]
fn a_link_model_learns_cora_links() {
    let Some(cora) = cora() else { return };
    let dir = scratch("link-cora");
    let data = dir.join("cora");
    graphflat_ok(&["import", "ogb", cora.to_str().unwrap(), "--out", data.to_str().unwrap()]);
    let settings = LinkSettings { hops: 1, negatives: 1, seed: 1, split_parts: false };
    let (records, links) = link_set(&dir, &data, "links", settings);
    let test = links.iter().filter(|l| l.split == Some(Split::Test)).count();
    assert!(links.len() > 5000 && test > 400, "{} links, {test} test", links.len());
    let model = dir.join("model");
    let job = Job::train(&records, &model).key("task", "link").key("model", "gcn").key("embedding_dim", 64);
    let job = job.key("epochs", 20).key("batch_size", 256).key("lr", 0.01).key("dropout", 0.0).key("weight_decay", 0.0);
    let job = job.key("normalize_features", true).key("cache_mb", 2048).key("patience", 5);
    let out = run_ok(&job.write(&dir, "train"), &["--workers", "2"]);
    let lines = metrics(&model);
    let (first, last) = (&lines[0], lines.last().unwrap());
    let seconds: Vec<f64> = std::fs::read_to_string(model.join("timings.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["seconds"].as_f64().unwrap())
        .collect();
    eprintln!(
        "Cora links (1 hop, GCN 1433 -> 64, dot): loss {:.4} -> {:.4}, test AUC {:.4}, MRR {:.4}, hits@50 {:.4}, \
         {:.2}s per epoch\n{out}",
        number(first, "loss"),
        number(last, "loss"),
        number(last, "test_auc"),
        number(last, "test_mrr"),
        number(last, "test_hits@50"),
        seconds.iter().sum::<f64>() / seconds.len() as f64
    );
    assert!(number(last, "loss") < 0.8 * number(first, "loss"), "the loss did not fall: {first} {last}");
    assert!(number(last, "test_auc") > 0.85, "test AUC {}", number(last, "test_auc"));
    let meta: schemas::model::ModelMeta =
        serde_json::from_slice(&std::fs::read(model_file(&model, ".json")).unwrap()).unwrap();
    assert_eq!((meta.spec.task, meta.spec.decoder, meta.spec.classes), (Task::Link, Some(schemas::Decoder::Dot), 64));
}

#[test]
fn link_training_is_identical_on_one_and_two_workers_and_two_processes() {
    let dir = scratch("link-workers");
    // Part 0 holds every training record: on 2 workers, worker 1 trains on nothing and
    // evaluates the test records of part 1.
    let (records, _) = generated(&dir, "links", 2, true);
    let job = |name: &str| {
        let job = link_job(&records, &dir.join(name)).key("decoder", "mlp").key("in_batch_negatives", true);
        job.key("dropout", 0.2)
    };
    run_ok(&job("one").write(&dir, "one"), &["--workers", "1"]);
    run_ok(&job("two").write(&dir, "two"), &["--workers", "2"]);
    run_two_processes(&Job::loopback(2).and(job("processes")).write(&dir, "processes"), &dir);
    for file in ["model.bpk", "metrics.jsonl"] {
        let one = std::fs::read(committed(&dir.join("one"), file)).unwrap();
        for other in ["two", "processes"] {
            assert!(
                one == std::fs::read(committed(&dir.join(other), file)).unwrap(),
                "{file}: 1 worker and {other} differ"
            );
        }
    }
    let last = metrics(&dir.join("one")).pop().unwrap();
    for key in ["valid_auc", "test_auc", "valid_mrr", "test_mrr", "valid_hits@10", "test_hits@50"] {
        assert!((0.0..=1.0).contains(&number(&last, key)), "{key} in {last}");
    }
}

/// `u . v`.
fn dot(u: &[f32], v: &[f32]) -> f32 {
    u.iter().zip(v).map(|(a, b)| a * b).sum()
}

/// `w2 . relu(W1 (u * v) + b1) + b2`, with `w1t = W1^T` row-major `[d, d]`.
fn mlp(u: &[f32], v: &[f32], (w1t, b1, w2, b2): (&[f32], &[f32], &[f32], f32)) -> f32 {
    let d = u.len();
    let x: Vec<f32> = u.iter().zip(v).map(|(a, b)| a * b).collect();
    (0..d)
        .map(|j| {
            let hidden = b1[j] + (0..d).map(|i| w1t[i * d + j] * x[i]).sum::<f32>();
            hidden.max(0.0) * w2[j]
        })
        .sum::<f32>()
        + b2
}

/// The share of (positive, negative) pairs of the split ordered right, ties 1/2.
fn naive_auc(forward: &[gnn::link::LinkForward], split: Split) -> f64 {
    let of_split: Vec<_> = forward.iter().filter(|f| f.split == Some(split)).collect();
    let negatives: Vec<f32> = of_split.iter().flat_map(|f| f.scores[1..].to_vec()).collect();
    let wins: f64 = of_split
        .iter()
        .flat_map(|f| negatives.iter().map(move |&n| f.scores[0].partial_cmp(&n).unwrap() as i8 as f64 / 2.0 + 0.5))
        .sum();
    wins / (of_split.len() * negatives.len()) as f64
}

#[test]
fn pair_scores_equal_the_decoder_computed_by_hand() {
    let dir = scratch("link-decoder");
    let (records, links) = generated(&dir, "links", 2, false);
    for decoder in ["dot", "mlp"] {
        let model = dir.join(decoder);
        run_ok(&link_job(&records, &model).key("decoder", decoder).write(&dir, decoder), &[]);
        let forward =
            graphtrainer::forward_link_records(&local_io(), model.to_str().unwrap(), records.to_str().unwrap())
                .unwrap();
        assert_eq!(forward.len(), links.len());
        let device = burn::prelude::Device::flex();
        let (meta, gnn) = gnn::io::load(&local_io(), model.to_str().unwrap(), &device).unwrap();
        let scorer = gnn::decoder::PairScorer::of(&meta.spec, gnn.decoder.as_ref());
        let values = |t: burn::prelude::Tensor<1>| t.into_data().iter::<f32>().collect::<Vec<f32>>();
        let d = meta.spec.classes;
        let weights = gnn.decoder.as_ref().map(|m| {
            let w2 = values(m.w2.val().reshape([d]));
            (values(m.w1.val().reshape([d * d])), values(m.b1.val()), w2, values(m.b2.val())[0])
        });
        let mut embeddings = std::collections::HashMap::new();
        let mut worst = 0.0f32;
        for (f, link) in forward.iter().zip(&links) {
            assert_eq!((f.src, f.dst, &f.negatives), (link.src, link.dst, &link.negatives));
            let h = |e: usize| &f.embeddings[e].1;
            for (e, &score) in f.scores.iter().enumerate() {
                let (u, v) = (h(0), h(1 + e));
                let by_hand = match &weights {
                    None => dot(u, v),
                    Some((w1, b1, w2, b2)) => mlp(u, v, (w1, b1, w2, *b2)),
                };
                worst = worst.max((score - by_hand).abs()).max((scorer.score(u, v) - by_hand).abs());
            }
            // A node's embedding is the same in every record and position.
            for (id, h) in &f.embeddings {
                let first = embeddings.entry(*id).or_insert_with(|| h.clone());
                assert!(first.iter().zip(h).all(|(a, b)| (a - b).abs() < 1e-5), "node {id}: embeddings differ");
            }
        }
        assert!(worst < 1e-5, "{decoder}: scores differ from the decoder by hand by up to {worst}");
        // The trainer's test AUC is the AUC of these scores.
        let reported = number(&metrics(&model).pop().unwrap(), "test_auc");
        let naive = naive_auc(&forward, Split::Test);
        eprintln!("{decoder}: test AUC {reported:.4} (by hand from the scores {naive:.4})");
        assert!((reported - naive).abs() < 1e-3, "{decoder}: test AUC {reported}, by hand {naive}");
    }
}

#[test]
fn a_resumed_link_run_reaches_the_uninterrupted_model() {
    let dir = scratch("link-resume");
    let (records, _) = generated(&dir, "links", 1, false);
    let job = |model: &Path, epochs: i64| {
        link_job(&records, model).key("decoder", "mlp").key("epochs", epochs).key("checkpoint_every", 2)
    };
    run_ok(&job(&dir.join("whole"), 4).write(&dir, "whole"), &["--workers", "2"]);
    let model = dir.join("resumed");
    run_ok(&job(&model, 2).write(&dir, "first"), &["--workers", "2"]);
    run_ok(&job(&model, 4).key("resume", true).write(&dir, "resume"), &["--workers", "2"]);
    for file in ["model.bpk", "metrics.jsonl"] {
        let whole = std::fs::read(committed(&dir.join("whole"), file)).unwrap();
        assert!(whole == std::fs::read(committed(&model, file)).unwrap(), "{file} differs after resuming");
    }
}

#[test]
fn batch_negatives_change_the_loss_and_train() {
    let dir = scratch("link-in-batch");
    let (records, _) = generated(&dir, "links", 1, false);
    let run = |name: &str, records: &Path, kind: Option<&str>| {
        let model = dir.join(name);
        let job = link_job(records, &model).key("epochs", 15).key("patience", 0);
        let job = if let Some(kind) = kind { job.key("batch_negatives", kind) } else { job };
        let out = run_ok(&job.write(&dir, name), &[]);
        (metrics(&model), out)
    };
    let (none, _) = run("none", &records, Some("none"));
    let (destinations, _) = run("destinations", &records, Some("destinations"));
    let (pool, said) = run("pool", &records, None);
    assert!(said.contains("batch_negatives negatives (default)"), "{said}");
    for (name, kind) in [("destinations", &destinations), ("negatives", &pool)] {
        assert_ne!(number(&none[0], "loss"), number(&kind[0], "loss"), "{name}");
        let last = kind.last().unwrap();
        eprintln!(
            "batch negatives {name}: loss {} -> {}, test AUC {}",
            kind[0]["loss"], last["loss"], last["test_auc"]
        );
        assert!(number(last, "loss") < number(&kind[0], "loss") && number(last, "test_auc") > 0.7, "{name}: {last}");
    }
    // Records without negatives train on the other destinations by default; nothing ranks them.
    let (bare, _) = generated(&dir, "no-negatives", 0, false);
    // Without validation negatives the link default of patience is 0: no early stop to ask for.
    let said = run_ok(&link_job(&bare, &dir.join("alone")).key("epochs", 15).write(&dir, "alone"), &[]);
    let alone = metrics(&dir.join("alone"));
    assert!(said.contains("batch_negatives destinations (default)") && said.contains("patience 0 (default)"), "{said}");
    let last = alone.last().unwrap();
    assert!(number(last, "loss") < number(&alone[0], "loss"), "{last}");
    assert!(last["test_auc"].is_null() && last["valid_mrr"].is_null(), "{last}");
}

#[test]
fn a_link_job_without_patience_stops_at_its_best_validation_epoch_with_no_decay() {
    let dir = scratch("link-defaults");
    let (records, _) = generated(&dir, "links", 1, false);
    let model = dir.join("model");
    let job = Job::train(&records, &model).key("task", "link").key("model", "sage").key("embedding_dim", 8);
    let out = run_ok(&job.key("epochs", 60).key("lr", 0.05).key("seed", 5).write(&dir, "defaults"), &[]);
    assert!(out.contains("weight_decay 0 (default), patience 10 (default)"), "{out}");
    let lines = metrics(&model);
    // The first epoch of the highest validation AUC, as the tracker keeps it.
    let best = lines.iter().reduce(|a, b| if number(b, "valid_auc") > number(a, "valid_auc") { b } else { a }).unwrap();
    let best_epoch = number(best, "epoch") as usize;
    // Either the run ended 10 epochs after its best epoch, or it ran every epoch.
    eprintln!("link defaults: {} epochs, best {best_epoch}", lines.len());
    assert!(lines.len() == 60 || lines.len() == best_epoch + 10, "{} epochs, best {best_epoch}", lines.len());
    assert!(
        out.contains(&format!("best validation auc {:.4} at epoch {best_epoch}", number(best, "valid_auc"))),
        "{out}"
    );
}

#[test]
fn a_task_mismatch_and_nothing_to_tell_apart_are_usage_errors() {
    let dir = scratch("link-usage");
    let (links, _) = generated(&dir, "links", 1, false);
    let nodes = flatten(&dir, &dir.join("graph"), "nodes", &[], |job| job.key("hops", 2));
    let model = dir.join("model");
    let out = run(&Job::train(&nodes, &model).key("task", "link").write(&dir, "link-on-nodes"), &[]);
    assert_fails(&out, 64, &["task = \"link\"", "node records"]);
    let out = run(&Job::train(&nodes, &model).key("embedding_dim", 8).write(&dir, "dim-on-nodes"), &[]);
    assert_fails(&out, 64, &["embedding_dim", "node records"]);
    let out = run(&Job::train(&links, &model).key("task", "node").write(&dir, "node-on-links"), &[]);
    assert_fails(&out, 64, &["task = \"node\"", "link records"]);
    let out = run(&Job::train(&nodes, &model).key("decoder", "mlp").write(&dir, "decoder-on-nodes"), &[]);
    assert_fails(&out, 64, &["decoder is a key of the link task", "node records"]);
    let (none, _) = generated(&dir, "no-negatives", 0, false);
    let out = run(&Job::train(&none, &model).key("batch_negatives", "none").write(&dir, "no-negatives"), &[]);
    assert_fails(&out, 64, &["no negatives", "batch_negatives = \"none\""]);
    let out = run(&Job::train(&none, &model).key("batch_negatives", "negatives").write(&dir, "no-pool"), &[]);
    assert_fails(&out, 64, &["no negatives", "the other records' negatives"]);
    let alone = Job::train(&none, &model).key("in_batch_negatives", true).key("batch_size", 1);
    let out = run(&alone.write(&dir, "alone-in-its-batch"), &[]);
    assert_fails(&out, 64, &["batch_size = 1 leaves every step without a negative"]);
    assert!(!has_weights(&model));
}

#[test]
fn link_records_that_break_their_metadata_are_bad_input() {
    let dir = scratch("link-bad-records");
    let (records, links) = generated(&dir, "links", 1, false);
    let meta = graphtrainer::reader::RecordSet::open(local_io(), records.to_str().unwrap()).unwrap().meta;
    let model = dir.join("model");
    let refused = |name: &str, set: Vec<LinkRecord>, words: &[&str]| {
        write_link_set(&dir.join(name), &meta, &[set]);
        let out = run(&link_job(&dir.join(name), &model).write(&dir, name), &[]);
        assert_fails(&out, 65, words);
        assert!(!has_weights(&model));
    };
    // GraphFlat writes a link record only for an edge with a split: a null one is not skipped.
    let mut no_split = links.clone();
    no_split[3].split = None;
    refused("no-split", no_split, &["row 3, column \"split\"", "a link record without a split"]);
    // Two negatives (and their neighborhoods) in a set flattened with one.
    let mut extra = links.clone();
    let (negative, neighborhood) = (extra[5].negatives[0], extra[5].endpoints[2].clone());
    extra[5].negatives.push(negative);
    extra[5].endpoints.push(neighborhood);
    refused("extra-negative", extra, &["row 5, column \"negatives\"", "2 negatives, but the set's metadata says 1"]);
}
