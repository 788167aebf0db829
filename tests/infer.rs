//! GraphInfer end to end: the three stages agree (every node's scores equal the trainer's
//! forward pass on its flattened record), the output is the same bits on any cluster, hubs
//! split or not give the same scores, and bad input is an error with no `_SUCCESS`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};

/// Training on `records` into `model`: 3 epochs, batches of 256, 8 hidden units, unless keys
/// set after it change them.
fn training(records: &Path, model: &Path) -> Job {
    Job::train(records, model).key("epochs", 3).key("batch_size", 256).key("hidden", 8)
}

/// Keys set on a job.
type Settings = fn(Job) -> Job;

/// The models, each with the keys that set it apart.
const MODELS: [(&str, Settings); 3] = [
    ("gcn", |job| job.key("model", "gcn")),
    ("sage", |job| job.key("model", "sage").key("activation", "elu")),
    ("gat", |job| job.key("model", "gat").key("heads", 3).key("output_heads", 2).key("attention_dropout", 0.2)),
];

/// A generated graph with hubs, flattened with a sampler and different fanouts per hop (and
/// re-indexing forced low), and each model trained on its records.
fn trained_on_generated(dir: &Path) -> (PathBuf, PathBuf) {
    let (data, flat) = (dir.join("graph"), dir.join("flat"));
    generate(&data, 3000, 8, 12, 5);
    let two_workers = || Job::cluster().key("workers", 2);
    let flat_job = Job::flatten(&data, &flat).key("fanouts", vec![6, 3]).key("seed", 9).key("hub_threshold", 20);
    run_ok(&two_workers().and(flat_job).write(dir, "flatten"), &[]);
    for (name, model) in MODELS {
        let train = two_workers().and(model(training(&flat, &dir.join(name))));
        run_ok(&train.write(dir, &format!("train-{name}")), &[]);
    }
    (data, flat)
}

#[test]
fn scores_equal_the_trainer_forward_pass_on_every_record_with_hubs_split_or_not() {
    let dir = scratch("infer-consistency");
    let (data, flat) = trained_on_generated(&dir);
    for (name, _) in MODELS {
        let model = dir.join(name);
        let expected = record_scores(&model, &flat);
        // hub_threshold = 4: every node with more than 4 sampled in-edges at a layer (fanouts 6
        // and 3) has its aggregation split over reducers; 0: never.
        let mut runs = Vec::new();
        for threshold in [4, 0] {
            let out = dir.join(format!("scores-{name}-{threshold}"));
            let job =
                Job::cluster().key("workers", 2).and(Job::infer(&data, &model, &out).key("hub_threshold", threshold));
            let stdout = run_ok(&job.write(&dir, &format!("infer-{name}-{threshold}")), &[]);
            if threshold > 0 {
                assert!(!stdout.contains("hubs split per layer [0, 0]"), "no hub was split:\n{stdout}");
            }
            let got = scores_only(&read_scores(&out));
            let difference = max_difference(&got, &expected);
            assert!(
                difference < 1e-4,
                "{name}, hub threshold {threshold}: scores differ from the records' by {difference}"
            );
            runs.push(got);
        }
        let split = max_difference(&runs[0], &runs[1]);
        assert!(split < 1e-5, "{name}: hubs split and not differ by {split}");
    }
}

#[test]
fn output_is_the_same_bits_on_one_worker_two_workers_and_two_processes() {
    let dir = scratch("infer-determinism");
    let (data, flat) = (dir.join("graph"), dir.join("flat"));
    generate(&data, 2500, 8, 10, 3);
    flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![5, 4]).key("sampler", "weighted"));
    let model = dir.join("model");
    run_ok(&training(&flat, &model).key("model", "gat").key("heads", 2).write(&dir, "train"), &[]);

    let infer = |out: &Path| Job::infer(&data, &model, out).key("hub_threshold", 3).key("batch_size", 100);
    let mut outputs = Vec::new();
    for workers in [1, 2] {
        let out = dir.join(format!("scores-{workers}"));
        run_ok(&Job::cluster().key("workers", workers).and(infer(&out)).write(&dir, &format!("infer-{workers}")), &[]);
        outputs.push(read_scores(&out));
    }
    let out = dir.join("scores-2p");
    run_two_processes(&Job::loopback(2).and(infer(&out)).write(&dir, "infer-2p"), &dir);
    outputs.push(read_scores(&out));

    assert_eq!(outputs[0].len(), 2500);
    let bits = |s: &BTreeMap<i64, Scored>| -> Vec<(i64, Vec<u32>, i64, Vec<u32>)> {
        s.iter()
            .map(|(&id, (e, p, x))| {
                (id, e.iter().map(|v| v.to_bits()).collect(), *p, x.iter().map(|v| v.to_bits()).collect())
            })
            .collect()
    };
    assert!(bits(&outputs[0]) == bits(&outputs[1]), "1 and 2 workers differ");
    assert!(bits(&outputs[0]) == bits(&outputs[2]), "1 worker and 2 processes differ");
}

/// Accuracy from predictions over the test split's labeled nodes.
fn test_accuracy(data: &Path, scored: &BTreeMap<i64, Scored>) -> (usize, usize) {
    let (mut hits, mut total) = (0, 0);
    for batch in read_batches(&data.join("nodes")) {
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let labels = batch.column_by_name("label").unwrap().as_primitive::<Int64Type>();
        let splits = batch.column_by_name("split").unwrap().as_string::<i32>();
        for r in 0..batch.num_rows() {
            if splits.is_valid(r) && splits.value(r) == "test" && labels.is_valid(r) {
                total += 1;
                hits += usize::from(scored[&ids.value(r)].1 == labels.value(r));
            }
        }
    }
    (hits, total)
}

fn last_metrics(model: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(model.join("metrics.jsonl")).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn cora_scores_equal_the_records_and_test_accuracy_equals_the_trainers() {
    let Some(cora) = cora() else { return };
    let dir = scratch("infer-cora");
    let (data, flat) = (dir.join("cora"), dir.join("flat"));
    graphflat_ok(&["import", "ogb", cora.to_str().unwrap(), "--out", data.to_str().unwrap()]);
    flatten(&dir, &data, "flat", &[], |job| job.key("sampler", "all"));
    for (name, model_keys) in MODELS {
        let model = dir.join(name);
        let train =
            model_keys(training(&flat, &model)).key("normalize_features", true).key("epochs", 10).key("lr", 0.02);
        run_ok(&train.write(&dir, &format!("train-{name}")), &[]);
        let out = dir.join(format!("scores-{name}"));
        let infer = Job::infer(&data, &model, &out).key("hub_threshold", 100);
        let stdout = run_ok(&infer.write(&dir, &format!("infer-{name}")), &[]);
        let scored = read_scores(&out);
        assert_eq!(scored.len(), 2708, "{stdout}");
        let difference = max_difference(&scores_only(&scored), &record_scores(&model, &flat));
        assert!(difference < 1e-4, "{name}: Cora scores differ from the records' by {difference}");

        let (hits, total) = test_accuracy(&data, &scored);
        let trainer = last_metrics(&model)["test_accuracy"].as_f64().unwrap();
        assert_eq!(total, 1000, "Cora's test split");
        assert!(
            (hits as f64 / total as f64 - trainer).abs() < 1e-9,
            "{name}: GraphInfer's test accuracy {hits}/{total}, the trainer's {trainer}"
        );
    }
}

#[test]
fn targets_and_the_embedding_layer_choose_rows_and_columns() {
    let dir = scratch("infer-targets");
    let (data, flat) = (dir.join("graph"), dir.join("flat"));
    generate(&data, 1200, 6, 8, 4);
    flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![4, 4]));
    let model = dir.join("model");
    run_ok(&training(&flat, &model).key("hidden", 6).write(&dir, "train"), &[]);
    let all = dir.join("all");
    run_ok(&Job::infer(&data, &model, &all).write(&dir, "all"), &[]);
    let test = dir.join("test");
    run_ok(&Job::infer(&data, &model, &test).key("targets", vec!["test"]).key("embedding", 2).write(&dir, "test"), &[]);
    let (all, test) = (read_scores(&all), read_scores(&test));
    assert!(!test.is_empty() && test.len() < all.len());
    for (id, (embedding, prediction, scores)) in &test {
        // Only the test nodes, with the same scores as when every node is computed; the
        // embedding is now the logits (8 classes), the default the hidden layer (6).
        assert_eq!(&all[id].2, scores);
        assert_eq!(all[id].1, *prediction);
        assert_eq!((embedding.len(), all[id].0.len()), (8, 6));
    }
}

/// A layer writes its transformed rows over its input's own array when no one else holds it
/// and the rows fit (`graphinfer::round::transform`); the embedding layer's outputs are kept
/// for the writer, so with the embedding from layer 1 layer 2 transforms into a fresh array,
/// and with it from layer 2, over its input. Both give the same bits.
#[test]
fn rows_written_over_the_input_equal_rows_in_a_fresh_array() {
    let dir = scratch("infer-in-place");
    let (data, flat) = (dir.join("graph"), dir.join("flat"));
    // 24 features, 16 hidden units, 8 classes: every layer's rows fit in its input's.
    generate(&data, 1500, 6, 24, 9);
    flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![5, 5]));
    let model = dir.join("model");
    run_ok(&training(&flat, &model).key("hidden", 16).write(&dir, "train"), &[]);
    let (fresh, over) = (dir.join("fresh"), dir.join("over"));
    run_ok(&Job::infer(&data, &model, &fresh).key("embedding", 1).write(&dir, "fresh"), &[]);
    run_ok(&Job::infer(&data, &model, &over).key("embedding", 2).write(&dir, "over"), &[]);
    let (fresh, over) = (read_scores(&fresh), read_scores(&over));
    assert_eq!(fresh.len(), 1500);
    assert_eq!(fresh.keys().collect::<Vec<_>>(), over.keys().collect::<Vec<_>>());
    for (id, (embedding, prediction, scores)) in &over {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&fresh[id].2), bits(scores), "node {id}");
        assert_eq!(fresh[id].1, *prediction);
        assert_eq!((embedding.len(), fresh[id].0.len()), (8, 16));
    }
}

#[test]
fn bad_models_and_tables_are_named_and_leave_no_success() {
    let dir = scratch("infer-bad");
    let (data, flat, model) = (dir.join("graph"), dir.join("flat"), dir.join("model"));
    generate(&data, 600, 5, 8, 2);
    flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![3, 3]));
    run_ok(&training(&flat, &model).write(&dir, "train"), &[]);
    let other = dir.join("other");
    generate(&other, 300, 5, 6, 2);
    let mut cases = vec![("width", other.clone(), model.clone(), 65, "takes 8 input features, but the node table")];
    cases.extend(
        bad_models(&dir, &model).into_iter().map(|(name, bad, code, message)| (name, data.clone(), bad, code, message)),
    );
    for (name, graph, model, code, message) in cases {
        let out = dir.join(format!("out-{name}"));
        let failed = run(&Job::infer(&graph, &model, &out).write(&dir, name), &[]);
        let (rc, text) = (failed.status.code(), text(&failed));
        assert_eq!(rc, Some(code), "{name}: {text}");
        assert!(text.contains(message), "{name}: expected {message:?} in:\n{text}");
        assert!(!out.join("_SUCCESS").exists(), "{name}: _SUCCESS after a failure");
    }
    an_edge_to_an_unknown_node_is_named(&dir, &data, &model);
}

/// Copies of the committed `model` under `dir`, each broken one way, with the exit code and
/// the words GraphInfer must fail with.
fn bad_models(dir: &Path, model: &Path) -> Vec<(&'static str, PathBuf, i32, &'static str)> {
    let copy = |name: &str, recommit: bool, change: &dyn Fn(&Path)| copy_model(dir, model, name, recommit, change);
    let meta = std::fs::read_to_string(model_file(model, ".json")).unwrap();
    let write =
        |file: &'static str, bytes: &'static [u8]| move |d: &Path| std::fs::write(model_file(d, file), bytes).unwrap();
    vec![
        (
            "no-json",
            copy("no-json", false, &|d| std::fs::remove_file(model_file(d, ".json")).unwrap()),
            66,
            ".json: missing, though run",
        ),
        ("bad-json", copy("bad-json", true, &write(".json", b"{ not json")), 65, "not a model description"),
        (
            "no-weights",
            copy("no-weights", false, &|d| std::fs::remove_file(model_file(d, ".bpk")).unwrap()),
            66,
            ".bpk: missing, though run",
        ),
        ("bad-weights", copy("bad-weights", true, &write(".bpk", b"garbage")), 65, "cannot load the weights"),
        // Files that changed after the commit (a later run killed before its own).
        ("changed", copy("changed", false, &write(".bpk", b"garbage")), 65, "changed after run"),
        (
            "uncommitted",
            copy("uncommitted", false, &|d| {
                std::fs::remove_file(d.join("_SUCCESS")).unwrap();
                std::fs::remove_file(d.join("_manifest.parquet")).unwrap();
            }),
            66,
            "no manifest of a committed model",
        ),
        (
            "hops",
            copy("hops", true, &|d| {
                let three = meta
                    .replace("\"hops\": 2", "\"hops\": 3")
                    .replace("\"fanouts\": [\n    3,\n    3\n  ]", "\"fanouts\": [3, 3, 3]");
                std::fs::write(model_file(d, ".json"), three).unwrap()
            }),
            65,
            "2 layers but was trained on 3-hop records",
        ),
        ("no-model", dir.join("missing-model"), 66, "no such directory"),
        // Sizes no weights file holds: an error before anything of that size is allocated.
        (
            "huge",
            copy("huge", true, &|d| {
                let mut meta: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(model_file(d, ".json")).unwrap()).unwrap();
                meta["spec"]["hidden"] = 1_000_000_000u64.into();
                std::fs::write(model_file(d, ".json"), serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
            }),
            65,
            "do not fit",
        ),
    ]
}

/// A copy of the committed `model` as `dir/name`, changed by `change`; with `recommit`, its
/// manifest is rewritten to match (a bad file that was committed as it is).
fn copy_model(dir: &Path, model: &Path, name: &str, recommit: bool, change: &dyn Fn(&Path)) -> PathBuf {
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(model).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    change(&to);
    if recommit {
        edit_manifest(&to, |manifest| {
            for part in manifest["parts"].as_array_mut().unwrap() {
                let bytes = std::fs::read(to.join(part["name"].as_str().unwrap())).unwrap();
                let rows = part["rows"].as_u64().unwrap();
                let entry = tables::commit::PartEntry::of(part["name"].as_str().unwrap(), rows, &bytes);
                *part = serde_json::to_value(entry).unwrap();
            }
        });
    }
    to
}

/// An edge to an unknown node: the same check as GraphFlat's, naming file, row and column.
fn an_edge_to_an_unknown_node_is_named(dir: &Path, data: &Path, model: &Path) {
    let broken = dir.join("broken");
    std::fs::create_dir_all(broken.join("edges")).unwrap();
    copy_dir(&data.join("nodes"), &broken.join("nodes"));
    let batch = RecordBatch::try_from_iter([
        ("src", std::sync::Arc::new(arrow_array::Int64Array::from(vec![0i64, 99_999])) as arrow_array::ArrayRef),
        ("dst", std::sync::Arc::new(arrow_array::Int64Array::from(vec![1i64, 2])) as arrow_array::ArrayRef),
    ])
    .unwrap();
    let file = std::fs::File::create(broken.join("edges/part-00000.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    std::fs::write(broken.join("edges/_SUCCESS"), "").unwrap();
    let out = dir.join("out-edges");
    let failed = run(&Job::infer(&broken, model, &out).write(dir, "edges"), &[]);
    let (rc, text) = (failed.status.code(), text(&failed));
    assert_eq!(rc, Some(65), "{text}");
    assert!(text.contains("99999") && text.contains("row 1") && text.contains("src"), "{text}");
    assert!(!out.join("_SUCCESS").exists());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// GraphInfer on the GPU (burn-wgpu; software Vulkan in CI) equals the CPU to 1e-4.
#[cfg(feature = "gpu")]
#[test]
fn gpu_scores_equal_the_cpu() {
    let dir = scratch("infer-gpu");
    let (data, flat, model) = (dir.join("graph"), dir.join("flat"), dir.join("model"));
    generate(&data, 1500, 6, 12, 8);
    flatten(&dir, &data, "flat", &[], |job| job.key("fanouts", vec![5, 3]));
    run_ok(&training(&flat, &model).key("model", "gat").key("heads", 2).write(&dir, "train"), &[]);
    let mut runs = Vec::new();
    for device in ["cpu", "gpu"] {
        let out = dir.join(device);
        run_ok(&Job::infer(&data, &model, &out).key("device", device).key("hub_threshold", 4).write(&dir, device), &[]);
        runs.push(read_scores(&out));
    }
    let difference = max_difference(&scores_only(&runs[0]), &scores_only(&runs[1]));
    assert!(difference < 1e-4, "GPU scores differ from the CPU's by {difference}");
}
