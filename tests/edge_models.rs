//! Edge-aware models end to end: GraphInfer's scores for SAGE, multi-head GAT and GINE with
//! edge features equal the trainer's forward pass on each node's record (every edge, and a
//! sampler with hubs split), the same bits on 1 worker, 2 workers and 2 processes; a graph whose
//! classes only the edges carry is learned with edge features and not without, by GINE from
//! 2-hop records at the default dropout too; an `[infer]` job whose edges lack the model's
//! features is refused.

use std::path::Path;

use crate::common::*;

/// A generated graph with `edge_dim` features per edge and the extra `generate` flags.
fn generate_with_edges(dir: &Path, nodes: u64, avg_degree: u64, edge_dim: usize, extra: &[&str]) {
    let mut args = generate_args(dir.to_str().unwrap(), nodes, avg_degree, 6, 7);
    args.extend(["--edge-feature-dim".to_owned(), edge_dim.to_string()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    graphflat_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
}

/// Keys set on a job.
type Settings = fn(Job) -> Job;

/// The edge-aware models, each with the keys that set it apart (GINE on standardized edges).
const MODELS: [(&str, Settings); 3] = [
    ("sage", |job| job.key("model", "sage").key("activation", "elu")),
    ("gat", |job| job.key("model", "gat").key("heads", 3).key("output_heads", 2).key("attention_dropout", 0.2)),
    ("gine", |job| job.key("model", "gine").key("normalize_edge_features", true)),
];

#[test]
fn edge_aware_scores_equal_the_trainer_forward_pass_on_any_cluster() {
    let dir = scratch("edge-models");
    let data = dir.join("graph");
    generate_with_edges(&data, 1500, 6, 3, &[]);
    // Every in-edge, and a sampler with different fanouts per hop (hubs re-indexed).
    let samplings: [(&str, Settings); 2] = [
        ("all", |job| job.key("sampler", "all")),
        ("uniform", |job| job.key("fanouts", vec![5, 3]).key("hub_threshold", 20)),
    ];
    for (sampling, flat_keys) in samplings {
        let flat = dir.join(format!("flat-{sampling}"));
        let flat_job = flat_keys(Job::flatten(&data, &flat).key("seed", 3));
        run_ok(&Job::cluster().key("workers", 2).and(flat_job).write(&dir, &format!("flatten-{sampling}")), &[]);
        for (name, model_keys) in MODELS {
            let model = dir.join(format!("{name}-{sampling}"));
            let train = model_keys(Job::train(&flat, &model).key("epochs", 2).key("batch_size", 256).key("hidden", 8));
            let trained = run(&train.write(&dir, &format!("train-{name}-{sampling}")), &[]);
            assert!(trained.status.success(), "{name}: {}", text(&trained));
            assert!(text(&trained).contains("3 edge features"), "{name}: the log names the edge features");
            let json: serde_json::Value =
                serde_json::from_slice(&std::fs::read(model_file(&model, ".json")).unwrap()).unwrap();
            assert_eq!(json["spec"]["edge_dim"], 3, "{name}: model.json records the edge width");

            let expected = record_scores(&model, &flat);
            let infer = |out: &Path| Job::infer(&data, &model, out).key("hub_threshold", 4);
            let one = dir.join(format!("scores-{name}-{sampling}-1"));
            run_ok(&Job::cluster().key("workers", 1).and(infer(&one)).write(&dir, "infer-1"), &[]);
            let got = scores_only(&read_scores(&one));
            let difference = max_difference(&got, &expected);
            assert!(difference < 1e-4, "{name}, {sampling}: scores differ from the records' by {difference}");

            let two = dir.join(format!("scores-{name}-{sampling}-2"));
            run_ok(&Job::cluster().key("workers", 2).and(infer(&two)).write(&dir, "infer-2"), &[]);
            let procs = dir.join(format!("scores-{name}-{sampling}-p"));
            run_two_processes(&Job::loopback(2).and(infer(&procs)).write(&dir, "infer-p"), &dir);
            let reference = sorted_rows(&read_batches(&one));
            assert_eq!(sorted_rows(&read_batches(&two)), reference, "{name}, {sampling}: 2 workers differ");
            assert_eq!(sorted_rows(&read_batches(&procs)), reference, "{name}, {sampling}: 2 processes differ");
        }
    }
}

#[test]
fn a_label_only_the_edges_carry_is_learned_with_edge_features_only() {
    let dir = scratch("edge-signal");
    let data = dir.join("graph");
    // Node features are noise and sources are random (homophily 0): only each in-edge's
    // features tell its destination's class. A low skew gives every node in-edges.
    let noise = ["--classes", "4", "--skew", "0.2", "--homophily", "0", "--feature-signal", "0"];
    generate_with_edges(&data, 2000, 8, 8, &noise);
    let flat = dir.join("flat");
    run_ok(&Job::flatten(&data, &flat).key("hops", 1).key("sampler", "all").write(&dir, "flatten"), &[]);
    for model in ["gine", "sage"] {
        let train = |with: bool| {
            Job::train(&flat, dir.join(format!("{model}-{with}")))
                .key("model", model)
                .key("epochs", 60)
                .key("batch_size", 256)
                .key("hidden", 32)
                .key("dropout", 0.1)
                .key("edge_features", with)
        };
        let with = test_accuracy(&run_ok(&train(true).write(&dir, &format!("{model}-with")), &[]));
        let without = test_accuracy(&run_ok(&train(false).write(&dir, &format!("{model}-without")), &[]));
        assert!(with >= 0.9, "{model} with edge features: test accuracy {with}");
        assert!(without < 0.4, "{model} without edge features: test accuracy {without} (chance is 0.25)");
    }
}

#[test]
fn gine_learns_a_label_only_the_edges_carry_from_2_hop_records_at_the_default_dropout() {
    // Issue 51: on 2-hop records the last layer's MLP, `classes` ReLU units wide over sums that
    // are never negative, lost units within 10 epochs in 9 seeds of 10, all 4 in 4 of them
    // (loss ln 4, test accuracy 0.25 for 40-110 epochs of 200, or to the end of a shorter run);
    // it is `hidden` wide now (BENCHMARKS section 11). Before, seed 0 ended here at 0.276.
    let dir = scratch("edge-signal-2hop");
    let data = dir.join("graph");
    let noise = ["--classes", "4", "--skew", "0.2", "--homophily", "0", "--feature-signal", "0"];
    generate_with_edges(&data, 2000, 8, 8, &noise);
    let flat = dir.join("flat");
    run_ok(&Job::flatten(&data, &flat).key("hops", 2).key("fanouts", vec![10, 10]).write(&dir, "flatten"), &[]);
    // Every other key at its default (dropout 0.5, hidden 16, Adam 0.01, weight decay 5e-4,
    // batches of 512), one worker so that a step's batch is the same on any machine.
    for seed in [0, 1, 2] {
        let model = dir.join(format!("gine-{seed}"));
        let train = Job::train(&flat, &model).key("model", "gine").key("epochs", 20).key("seed", seed);
        let out = run_ok(&Job::cluster().key("workers", 1).and(train).write(&dir, &format!("gine-{seed}")), &[]);
        let accuracy = test_accuracy(&out);
        let metrics = std::fs::read_to_string(model.join("metrics.jsonl")).unwrap();
        let last: serde_json::Value = serde_json::from_str(metrics.lines().last().unwrap()).unwrap();
        let loss = last["train_loss"].as_f64().unwrap();
        assert!(accuracy >= 0.9, "seed {seed}: test accuracy {accuracy} (chance is 0.25)\n{metrics}");
        assert!(loss < 0.5, "seed {seed}: the last epoch's train loss is {loss} (ln 4 = 1.386)\n{metrics}");
    }
}

#[test]
fn an_infer_job_whose_edges_lack_the_models_features_is_refused() {
    let dir = scratch("edge-missing");
    let (data, plain) = (dir.join("graph"), dir.join("plain"));
    generate_with_edges(&data, 300, 4, 2, &[]);
    generate(&plain, 300, 4, 6, 7);
    let flat = dir.join("flat");
    run_ok(&Job::flatten(&data, &flat).key("fanouts", vec![3, 2]).write(&dir, "flatten"), &[]);
    let model = dir.join("model");
    run_ok(&Job::train(&flat, &model).key("model", "sage").key("epochs", 1).write(&dir, "train"), &[]);
    // GCN ignores edge features, and says so in its log and model.json.
    let gcn = dir.join("gcn");
    let trained = run(&Job::train(&flat, &gcn).key("model", "gcn").key("epochs", 1).write(&dir, "train-gcn"), &[]);
    assert!(trained.status.success() && text(&trained).contains("gcn ignores"), "{}", text(&trained));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(model_file(&gcn, ".json")).unwrap()).unwrap();
    assert_eq!(json["spec"]["edge_dim"], 0);
    let out = dir.join("scores");
    let failed = run(&Job::infer(&plain, &model, &out).write(&dir, "infer"), &[]);
    assert_fails(&failed, 65, &["reads 2 edge features per edge", "has no features column"]);
    assert!(!out.join("_SUCCESS").exists());

    // `edge_features = true` on records without them is a usage error.
    let plain_flat = dir.join("plain-flat");
    run_ok(&Job::flatten(&plain, &plain_flat).key("fanouts", vec![3, 2]).write(&dir, "flatten-plain"), &[]);
    let job = Job::train(&plain_flat, dir.join("m2")).key("model", "gine").key("edge_features", true);
    assert_fails(&run(&job.write(&dir, "train-plain"), &[]), 64, &["edge_features"]);
}
