//! Control variates (`[train] control_variate = true`): a GCN over `[precompute]`'s `Â X`, and
//! a GraphSAGE over its `[X | mean X]`, trained on records of fanout [2] that list their roots'
//! in-neighbors (`[flatten] root_neighbors`). Checked against an independent exact computation:
//! the saved model's forward pass over every-in-edge records of the same graph (the exact
//! model). GraphInfer scores the model
//! as that exact pass; the trainer's evaluation, right after a refresh of every node's history,
//! is that exact pass too (its last epoch's validation accuracy is the exact model's), on 1 and
//! 2 workers and on 2 processes; the records' neighbor lists are every in-edge's source; what
//! control variates cannot run on is refused before anything is written.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::RecordBatch;

use crate::common::*;

/// The generated graph's `Â X` at `dir/ax`, and its records of fanout [2] with neighbor lists
/// at `dir/flat` and of every in-edge at `dir/every`.
fn prepare(dir: &Path) -> std::path::PathBuf {
    prepare_for(dir, "gcn", 0)
}

/// [`prepare`] of `model`'s precomputed inputs (still at `dir/ax`), the edge table with
/// `edge_dim` features.
fn prepare_for(dir: &Path, model: &str, edge_dim: usize) -> std::path::PathBuf {
    let data = dir.join("graph");
    let mut args = generate_args(data.to_str().unwrap(), 1500, 8, 12, 5);
    args.extend(["--edge-feature-dim".to_owned(), edge_dim.to_string()]);
    graphflat_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let ax = dir.join("ax");
    let precompute = Job::table_named("precompute")
        .key("nodes", location(data.join("nodes")))
        .key("edges", location(data.join("edges")))
        .key("output", location(&ax))
        .key("model", model)
        .key("normalize_features", true);
    run_ok(&precompute.write(dir, "precompute"), &[]);
    let flatten = |out: &str| {
        Job::table_named("flatten")
            .key("nodes", location(&ax))
            .key("edges", location(data.join("edges")))
            .key("output", location(dir.join(out)))
            .key("hops", 1)
    };
    let two = || Job::cluster().key("workers", 2);
    let sampled = flatten("flat").key("fanouts", vec![2]).key("root_neighbors", true).key("hub_threshold", 6);
    run_ok(&two().and(sampled).write(dir, "flatten"), &[]);
    run_ok(&flatten("every").key("sampler", "all").write(dir, "every"), &[]);
    data
}

fn cv_train(records: &Path, model: &Path) -> Job {
    Job::train(records, model)
        .key("control_variate", true)
        .key("epochs", 4)
        .key("batch_size", 128)
        .key("hidden", 8)
        .key("dropout", 0.5)
}

/// The last line of a model's `metrics.jsonl`.
fn last_metrics(model: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(model.join("metrics.jsonl")).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// The accuracy of `scores` (by root) on the records of `split` in `records`.
fn accuracy(scores: &BTreeMap<i64, Vec<f32>>, records: &Path, split: schemas::Split) -> f64 {
    let (mut hits, mut all) = (0u64, 0u64);
    for r in read_records(records).iter().filter(|r| r.split == Some(split)) {
        let Some(schemas::Label::Class(class)) = r.label else { continue };
        let s = &scores[&r.root];
        let predicted = (0..s.len()).max_by(|&a, &b| s[a].total_cmp(&s[b]).then(b.cmp(&a))).unwrap();
        hits += u64::from(predicted as i64 == class);
        all += 1;
    }
    hits as f64 / all as f64
}

/// The saved model's forward pass over the every-in-edge records `every` (the exact model), whose
/// accuracies are the ones the run reported for its last epoch.
fn assert_evaluated_exactly(name: &str, model: &Path, every: &Path) -> BTreeMap<i64, Vec<f32>> {
    let exact = record_scores(model, every);
    let metrics = last_metrics(model);
    for (split, key) in [(schemas::Split::Valid, "valid_accuracy"), (schemas::Split::Test, "test_accuracy")] {
        let reported = metrics[key].as_f64().unwrap();
        let want = accuracy(&exact, every, split);
        assert!((reported - want).abs() < 1e-9, "{name}: {key} {reported}, the exact model's {want}");
    }
    exact
}

/// GraphInfer's scores of `model` over the graph and its product (`dir/ax`), hubs split past 6
/// in-edges, on 2 workers: those of the `exact` pass.
fn assert_graphinfer_scores(dir: &Path, data: &Path, model: &Path, exact: &BTreeMap<i64, Vec<f32>>) {
    let out = dir.join("scores");
    let infer = Job::table_named("infer")
        .key("nodes", location(dir.join("ax")))
        .key("edges", location(data.join("edges")))
        .key("model", location(model))
        .key("output", location(&out))
        .key("hub_threshold", 6);
    run_ok(&Job::cluster().key("workers", 2).and(infer).write(dir, "infer"), &[]);
    let difference = max_difference(&scores_only(&read_scores(&out)), exact);
    assert!(difference < 1e-4, "GraphInfer's scores differ from the exact pass by {difference}");
}

#[test]
fn the_records_list_every_in_neighbor_and_sample_a_prefix_of_them() {
    let dir = scratch("cv-records");
    let data = prepare(&dir);
    let mut sources: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (src, dst) in message_passing_edges(&data.join("edges")) {
        sources.entry(dst.parse().unwrap()).or_default().push(src.parse().unwrap());
    }
    let records = read_records(&dir.join("flat"));
    assert_eq!(records.len(), 1500);
    for r in &records {
        let mut listed = r.root_neighbors.clone();
        assert_eq!(listed.len() as i64, r.in_degrees[0], "root {}", r.root);
        // The root's sampled in-edges are the first of its list, by sampling key.
        let sampled: Vec<i64> =
            (0..r.edge_src.len()).filter(|&j| r.edge_dst[j] == 0).map(|j| r.node_ids[r.edge_src[j] as usize]).collect();
        let mut first: Vec<i64> = listed.iter().take(2).copied().collect();
        let mut sampled = sampled;
        first.sort_unstable();
        sampled.sort_unstable();
        assert_eq!(first, sampled, "root {}", r.root);
        listed.sort_unstable();
        let mut want = sources.get(&r.root).cloned().unwrap_or_default();
        want.sort_unstable();
        assert_eq!(listed, want, "root {}", r.root);
    }
    assert_every_reader_reads_the_manifest(&[&dir.join("flat")]);
}

#[test]
fn a_model_trained_with_control_variates_is_the_exact_gcn_in_its_evaluation_and_in_graphinfer() {
    let dir = scratch("cv-exact");
    let data = prepare(&dir);
    let (flat, every) = (dir.join("flat"), dir.join("every"));
    for (name, cluster) in [
        ("one", Job::cluster().key("workers", 1)),
        ("two", Job::cluster().key("workers", 2)),
        ("processes", Job::loopback(2)),
    ] {
        let model = dir.join(format!("model-{name}"));
        let job = cluster.and(cv_train(&flat, &model)).write(&dir, name);
        let summary = match name {
            "processes" => run_two_processes(&job, &dir).concat(),
            _ => run_ok(&job, &[]),
        };
        // Every node's history, on any cluster shape: before the first epoch and after each.
        assert!(summary.contains("control variates: 1500 nodes' histories, 8 wide"), "{name}: {summary}");
        assert!(summary.contains("refreshed 5 times"), "{name}: {summary}");
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(model_json(&model)).unwrap()).unwrap();
        assert_eq!(meta["fanouts"], serde_json::json!([]), "{name}: saved to run over every in-edge");
        // The exact GCN of the saved (last epoch's) weights, over every in-edge.
        let exact = assert_evaluated_exactly(name, &model, &every);
        if name == "two" {
            assert_graphinfer_scores(&dir, &data, &model, &exact);
        }
    }
}

/// The roots' rows kept from the first refresh (a large `cache_mb`) and read from the records
/// at every refresh (`cache_mb = 0`) give the same histories: the same metrics and the same
/// model, on two workers; the summary says which.
#[test]
fn kept_roots_change_only_the_time() {
    let dir = scratch("cv-kept-roots");
    prepare(&dir);
    let mut runs = Vec::new();
    for (cache_mb, says) in [(0, "their roots read from the records at each refresh"), (1024, "their roots kept")] {
        let model = dir.join(format!("model-{cache_mb}"));
        let job = Job::cluster().key("workers", 2).and(cv_train(&dir.join("flat"), &model).key("cache_mb", cache_mb));
        let summary = run_ok(&job.write(&dir, &format!("train-{cache_mb}")), &[]);
        assert!(summary.contains(says), "cache_mb = {cache_mb}: {summary}");
        let read = |file: &str| std::fs::read(committed(&model, file)).unwrap();
        runs.push((read("metrics.jsonl"), read("model.bpk")));
    }
    assert!(runs[0].0 == runs[1].0, "metrics differ with kept roots");
    assert!(runs[0].1 == runs[1].1, "models differ with kept roots");
}

#[test]
fn graphsage_trained_with_control_variates_is_the_exact_model_in_its_evaluation_and_in_graphinfer() {
    let dir = scratch("cv-sage");
    let data = prepare_for(&dir, "sage", 2);
    let (flat, every) = (dir.join("flat"), dir.join("every"));
    let sage = |model: &Path| cv_train(&flat, model).key("model", "sage");
    // The estimate is of the mean of the rows; messages with edge features are not estimated.
    let out = run(&sage(&dir.join("with-edges")).write(&dir, "with-edges"), &[]);
    assert_fails(&out, 64, &["control_variate", "edge_features = false"]);
    for (name, workers) in [("one", 1), ("two", 2)] {
        let model = dir.join(format!("model-{name}"));
        let train = sage(&model).key("edge_features", false);
        let summary = run_ok(&Job::cluster().key("workers", workers).and(train).write(&dir, name), &[]);
        assert!(summary.contains("control variates: 1500 nodes' histories, 8 wide"), "{name}: {summary}");
        // GraphSAGE over every in-edge with the saved weights.
        let exact = assert_evaluated_exactly(name, &model, &every);
        if name == "two" {
            assert_graphinfer_scores(&dir, &data, &model, &exact);
        }
    }
}

/// Copies the record set at `flat` to `out` (parts and `_SUCCESS`), each batch of part `i`
/// through `edit(i, batch)`, which may change the schema (the metadata stays the set's).
fn copy_parts(flat: &Path, out: &Path, edit: impl Fn(usize, RecordBatch) -> RecordBatch) {
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    std::fs::create_dir_all(out).unwrap();
    for (i, path) in parquet_files(flat).iter().enumerate() {
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
        let metadata = reader.schema().metadata().clone();
        let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| edit(i, b.unwrap())).collect();
        let fields = batches[0].schema().fields().clone();
        let schema = std::sync::Arc::new(arrow_schema::Schema::new_with_metadata(fields, metadata));
        let target = std::fs::File::create(out.join(path.file_name().unwrap())).unwrap();
        let mut writer = ArrowWriter::try_new(target, schema.clone(), None).unwrap();
        for batch in batches {
            writer.write(&batch.with_schema(schema.clone()).unwrap()).unwrap();
        }
        writer.close().unwrap();
    }
    std::fs::write(out.join("_SUCCESS"), "").unwrap();
}

/// Copies the record set at `flat` to `out`, the first part without its `root_neighbors`
/// column but with the metadata that promises it.
fn drop_lists_from_one_part(flat: &Path, out: &Path) {
    copy_parts(flat, out, |i, batch| {
        let schema = batch.schema();
        let keep: Vec<usize> = (0..schema.fields().len())
            .filter(|&c| i > 0 || schema.field(c).name() != schemas::record::ROOT_NEIGHBORS)
            .collect();
        batch.project(&keep).unwrap()
    });
}

#[test]
fn a_part_without_the_lists_its_metadata_promises_is_bad_data() {
    let dir = scratch("cv-no-lists");
    prepare(&dir);
    let cut = dir.join("cut");
    drop_lists_from_one_part(&dir.join("flat"), &cut);
    let out = run(&cv_train(&cut, &dir.join("model")).write(&dir, "cut"), &[]);
    assert_fails(&out, 65, &["root_neighbors", "lacks the column"]);
}

/// The refresh before the first step reads every record's root off the batches (with
/// `cache_mb = 0` it builds no record to offer the cache): a root feature that is not finite,
/// in a validation record that only the evaluation would build, is bad data naming the file,
/// the row and the column, before any step.
#[test]
fn a_bad_root_of_a_validation_record_is_bad_data_before_the_first_step() {
    let dir = scratch("cv-bad-root");
    prepare(&dir);
    let (flat, bad) = (dir.join("flat"), dir.join("bad"));
    let first = parquet_files(&flat)[0].file_name().unwrap().to_string_lossy().into_owned();
    let row = std::cell::Cell::new(None);
    copy_parts(&flat, &bad, |i, batch| {
        if i > 0 || row.get().is_some() {
            return batch;
        }
        let mut records = schemas::record::from_batch(&batch, &first, 0).unwrap();
        let Some(at) = records.iter().position(|r| r.split == Some(schemas::Split::Valid)) else { return batch };
        records[at].features[1] = f32::NAN;
        row.set(Some(at));
        schemas::record::to_batch(&records, &batch.schema()).unwrap()
    });
    let row = row.get().expect("a validation record in the first batch");
    let out = run(&cv_train(&bad, &dir.join("model")).key("cache_mb", 0).write(&dir, "bad"), &[]);
    let at = format!("{first}, row {row}, column \"node_features\"");
    assert_fails(&out, 65, &[&at, "a feature value of NaN"]);
    assert!(!text(&out).contains("first step"), "{}", text(&out));
}

#[test]
fn what_control_variates_cannot_run_on_is_refused() {
    let dir = scratch("cv-refused");
    let data = prepare(&dir);
    let refused = |name: &str, job: Job, words: &[&str]| {
        let out = run(&job.write(&dir, name), &[]);
        assert_fails(&out, 64, words);
    };
    let model = |name: &str| dir.join(format!("model-{name}"));
    // Records without neighbor lists, and plain records.
    refused("no-lists", cv_train(&dir.join("every"), &model("a")), &["root_neighbors = true"]);
    let plain = dir.join("plain");
    run_ok(&Job::flatten(&data, &plain).key("hops", 1).key("root_neighbors", true).write(&dir, "plain"), &[]);
    refused("plain", cv_train(&plain, &model("b")), &["[precompute]"]);
    // Another model, async mode, full-graph training.
    refused("gat", cv_train(&dir.join("flat"), &model("c")).key("model", "gat"), &["control_variate", "\"sage\""]);
    refused("async", cv_train(&dir.join("flat"), &model("d")).key("mode", "async"), &["control_variate", "async"]);
    let fanout =
        cv_train(&dir.join("flat"), &model("f")).key("control_variate", false).key("control_variate_fanout", 2);
    refused("fanout", fanout, &["control_variate_fanout", "control_variate = true"]);
    // A record set that leaves nodes out: a step finds an in-neighbor without a history.
    let some = dir.join("some");
    let flatten = Job::table_named("flatten")
        .key("nodes", location(dir.join("ax")))
        .key("edges", location(data.join("edges")))
        .key("output", location(&some))
        .key("hops", 1)
        .key("fanouts", vec![2])
        .key("root_neighbors", true)
        .key("targets", "train");
    run_ok(&flatten.write(&dir, "some"), &[]);
    refused("some", cv_train(&some, &model("e")), &["history", "targets"]);
    // Neighbor lists serve node records, each night in full.
    let link = Job::flatten(&data, dir.join("link")).key("task", "link").key("root_neighbors", true);
    refused("link", link, &["root_neighbors", "link"]);
    for m in ["a", "b", "c", "d", "e", "f"] {
        assert!(!model(m).exists() || !model(m).join("_SUCCESS").exists(), "model {m} was written");
    }
}
