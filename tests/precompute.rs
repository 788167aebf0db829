//! `[precompute]`: the output is the node table with its features replaced by `Â X` (or
//! GraphSAGE's `[X | mean X]`), checked against a dense product computed here in f64 from the
//! tables (GCN's normalized adjacency with self-loops, in-degrees over the message-passing
//! edges only; the mean over the same in-edges); ids, labels and splits
//! come back as the input has them, for integer and string ids; the bits are the same on 1
//! and 2 workers and 2 processes, with hubs split or not; every reader reads it; a node table
//! without features, or holding the product already, is refused before anything is written, and
//! a product past float32 is bad data.
//! Over the output: records of one hop fewer train a GCN with a dense first layer, whose
//! GraphInfer scores equal its forward pass on every record; GraphInfer refuses it over the
//! plain table, and a plain model over `Â X`; GraphSAGE over its own product likewise, and
//! each kind over the other's product is refused; other kinds, normalizing `Â X` again and
//! full-graph training over it are refused; and GraphFlat's and GraphInfer's refreshes over a
//! new day's product write what full runs write.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field};

use crate::common::*;

/// A table's rows by their id as text: (features, label, split).
type Rows = BTreeMap<String, (Vec<f32>, Option<i64>, Option<String>)>;

/// A product computed here in f64 from the node rows and the message-passing edges, by id.
type Dense = fn(&Rows, &[(String, String)]) -> BTreeMap<String, Vec<f64>>;

/// A node table's rows (features of any list encoding), `_SUCCESS` or not.
fn read_nodes(dir: &Path) -> Rows {
    let mut rows = Rows::new();
    for batch in batches_in(parquet_files(dir)) {
        let ids = batch.column_by_name("node_id").unwrap();
        let features = batch.column_by_name("features").unwrap();
        let labels = batch.column_by_name("label").map(|c| c.as_primitive::<Int64Type>().clone());
        let splits = batch.column_by_name("split").map(|c| c.as_string::<i32>().clone());
        for r in 0..batch.num_rows() {
            let row = match features.data_type() {
                DataType::FixedSizeList(..) => features.as_fixed_size_list().value(r),
                _ => features.as_list::<i32>().value(r),
            };
            let label = labels.as_ref().and_then(|l| l.is_valid(r).then(|| l.value(r)));
            let split = splits.as_ref().and_then(|s| s.is_valid(r).then(|| s.value(r).to_owned()));
            let old = rows.insert(id_text(ids, r), (row.as_primitive::<Float32Type>().values().to_vec(), label, split));
            assert!(old.is_none(), "a node twice in {}", dir.display());
        }
    }
    rows
}

/// `Â X` in f64, by id: `x_v / (d_v + 1) + sum over (u, v) of x_u / sqrt((d_u + 1)(d_v + 1))`.
fn dense_product(nodes: &Rows, edges: &[(String, String)]) -> BTreeMap<String, Vec<f64>> {
    let mut degree: BTreeMap<&str, f64> = nodes.keys().map(|id| (id.as_str(), 0.0)).collect();
    edges.iter().for_each(|(_, dst)| *degree.get_mut(dst.as_str()).unwrap() += 1.0);
    let mut out: BTreeMap<String, Vec<f64>> = nodes
        .iter()
        .map(|(id, (x, _, _))| (id.clone(), x.iter().map(|&v| f64::from(v) / (degree[id.as_str()] + 1.0)).collect()))
        .collect();
    for (src, dst) in edges {
        let coef = 1.0 / ((degree[src.as_str()] + 1.0) * (degree[dst.as_str()] + 1.0)).sqrt();
        let x = &nodes[src].0;
        out.get_mut(dst).unwrap().iter_mut().zip(x).for_each(|(o, &v)| *o += coef * f64::from(v));
    }
    out
}

/// `[X | mean X]` in f64, by id: each node's features, then the mean of its in-neighbors'
/// (zeros without any).
fn dense_sage(nodes: &Rows, edges: &[(String, String)]) -> BTreeMap<String, Vec<f64>> {
    let mut sums: BTreeMap<&str, (Vec<f64>, f64)> =
        nodes.iter().map(|(id, (x, _, _))| (id.as_str(), (vec![0.0; x.len()], 0.0))).collect();
    for (src, dst) in edges {
        let (sum, count) = sums.get_mut(dst.as_str()).unwrap();
        sum.iter_mut().zip(&nodes[src].0).for_each(|(s, &v)| *s += f64::from(v));
        *count += 1.0;
    }
    let row = |id: &str, x: &[f32]| {
        let (sum, count) = &sums[id];
        let mean = sum.iter().map(|s| if *count > 0.0 { s / count } else { 0.0 });
        x.iter().map(|&v| f64::from(v)).chain(mean).collect()
    };
    nodes.iter().map(|(id, (x, _, _))| (id.clone(), row(id, x))).collect()
}

/// The output holds every input node once, with `Â X` (to f32's rounding) and the input's
/// label and split.
fn assert_product(data: &Path, out: &Path) {
    assert_product_of(data, out, dense_product);
}

/// [`assert_product`] of the product `dense` computes.
fn assert_product_of(data: &Path, out: &Path, dense: Dense) {
    assert!(out.join("_SUCCESS").exists(), "{} has no _SUCCESS", out.display());
    let nodes = read_nodes(&data.join("nodes"));
    let expected = dense(&nodes, &message_passing_edges(&data.join("edges")));
    let got = read_nodes(out);
    assert_eq!(got.keys().collect::<Vec<_>>(), nodes.keys().collect::<Vec<_>>());
    for (id, (row, label, split)) in &got {
        let want = &expected[id];
        assert_eq!(row.len(), want.len(), "node {id}");
        for (g, w) in row.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() <= 1e-5 * (1.0 + w.abs()), "node {id}: {g} against {w}");
        }
        assert_eq!((label, split), (&nodes[id].1, &nodes[id].2), "node {id}");
    }
}

fn precompute(data: &Path, out: &Path) -> Job {
    Job::table_named("precompute")
        .key("nodes", location(data.join("nodes")))
        .key("edges", location(data.join("edges")))
        .key("output", location(out))
}

#[test]
fn the_product_is_the_dense_normalized_adjacency_times_the_features_on_any_cluster_shape() {
    let dir = scratch("precompute-dense");
    // Held-out edges (valid, test) must not enter the adjacency.
    let data = split_graph(&dir, 400, 6, 5, 11);
    let out = |name: &str| dir.join(name);
    let job = |name: &str, cluster: Job| cluster.and(precompute(&data, &out(name)));
    let summary = run_ok(&job("one", Job::cluster().key("workers", 1)).write(&dir, "one"), &[]);
    assert!(summary.contains("Â X over"), "{summary}");
    assert_product(&data, &out("one"));
    // Hubs split over reducers, on 2 workers and on 2 processes: the same bits as each other.
    let hubs = |name: &str, cluster: Job| job(name, cluster).key("hub_threshold", 4);
    let split = run_ok(&hubs("split", Job::cluster().key("workers", 2)).write(&dir, "split"), &[]);
    assert!(hubs_split(&split) > 0, "{split}");
    assert_product(&data, &out("split"));
    run_two_processes(&hubs("processes", Job::loopback(2)).write(&dir, "processes"), &dir);
    assert_eq!(sorted_rows(&read_batches(&out("processes"))), sorted_rows(&read_batches(&out("split"))));
    // Without hubs split, 1 and 2 workers: the same bits.
    run_ok(&job("two", Job::cluster().key("workers", 2)).write(&dir, "two"), &[]);
    assert_eq!(sorted_rows(&read_batches(&out("two"))), sorted_rows(&read_batches(&out("one"))));
    assert_every_reader_reads_the_manifest(&[&out("one")]);
}

#[test]
fn graphsage_over_its_precomputed_inputs_scores_in_graphinfer_as_its_records_forward_pass() {
    let dir = scratch("precompute-sage");
    let data = split_graph(&dir, 600, 6, 5, 13);
    let (product, flat, model) = (dir.join("product"), dir.join("flat"), dir.join("model"));
    let two = || Job::cluster().key("workers", 2);
    // [X | mean X], with hubs split over reducers, against the dense computation.
    let sage = precompute(&data, &product).key("model", "sage").key("hub_threshold", 4);
    let summary = run_ok(&two().and(sage).write(&dir, "precompute"), &[]);
    assert!(summary.contains("10 per node: [X | mean X] over") && hubs_split(&summary) > 0, "{summary}");
    assert_product_of(&data, &product, dense_sage);
    assert_every_reader_reads_the_manifest(&[&product]);
    // Records of one hop fewer train a GraphSAGE whose first layer is dense; GraphInfer's scores
    // over the same table equal its forward pass on every record.
    let flatten = Job::table_named("flatten")
        .key("nodes", location(&product))
        .key("edges", location(data.join("edges")))
        .key("output", location(&flat))
        .key("hops", 1)
        .key("fanouts", vec![3]);
    run_ok(&flatten.write(&dir, "flatten"), &[]);
    let train = Job::train(&flat, &model).key("model", "sage").key("epochs", 2).key("hidden", 8);
    run_ok(&two().and(train.clone()).write(&dir, "train"), &[]);
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(model_json(&model)).unwrap()).unwrap();
    assert_eq!((meta["spec"]["layers"].as_u64(), meta["spec"]["input_dim"].as_u64()), (Some(2), Some(10)));
    let infer = |nodes: &Path, out: &str| {
        Job::table_named("infer")
            .key("nodes", location(nodes))
            .key("edges", location(data.join("edges")))
            .key("model", location(&model))
            .key("output", location(dir.join(out)))
            .key("hub_threshold", 4)
    };
    run_ok(&two().and(infer(&product, "scores")).write(&dir, "infer"), &[]);
    let difference = max_difference(&scores_only(&read_scores(&dir.join("scores"))), &record_scores(&model, &flat));
    assert!(difference < 1e-4, "scores differ from the records' forward pass by {difference}");
    // A GCN over GraphSAGE's inputs, and GraphSAGE over GCN's, are refused.
    let gcn = train.key("model", "gcn").key("output", location(dir.join("gcn")));
    assert_fails(&run(&gcn.write(&dir, "gcn"), &[]), 64, &["model = \"sage\"", "[X | mean X]"]);
    let ax = dir.join("ax");
    run_ok(&precompute(&data, &ax).write(&dir, "ax"), &[]);
    assert_fails(&run(&infer(&ax, "mixed").write(&dir, "mixed"), &[]), 64, &["Â X", "(for model = \"gcn\")"]);
}

/// "hubs split" in a precompute summary.
fn hubs_split(summary: &str) -> u64 {
    let line = summary.lines().find(|l| l.contains("hubs split")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    words[words.iter().position(|w| *w == "hubs").unwrap() - 1].parse().unwrap()
}

/// A graph keyed by strings, with fixed-size features, labels and splits.
fn string_graph(dir: &Path) {
    let ids = ["user_1", "sku-2-é", "account/3", "loner"];
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let values = Float32Array::from(vec![1.0, 2.0, -1.0, 0.5, 4.0, 0.0, 3.0, 3.0]);
    let features = FixedSizeListArray::new(item, 2, Arc::new(values), None);
    let nodes = RecordBatch::try_from_iter([
        ("node_id", Arc::new(StringArray::from(ids.to_vec())) as ArrayRef),
        ("features", Arc::new(features)),
        ("label", Arc::new(Int64Array::from(vec![Some(0), None, Some(2), Some(1)]))),
        ("split", Arc::new(StringArray::from(vec![Some("train"), Some("valid"), None, Some("test")]))),
    ])
    .unwrap();
    let edges = [("user_1", "sku-2-é"), ("account/3", "sku-2-é"), ("sku-2-é", "user_1"), ("user_1", "user_1")];
    let (src, dst): (Vec<&str>, Vec<&str>) = edges.iter().copied().unzip();
    let edges = RecordBatch::try_from_iter([
        ("src", Arc::new(StringArray::from(src)) as ArrayRef),
        ("dst", Arc::new(StringArray::from(dst))),
    ])
    .unwrap();
    write_parquet(&dir.join("nodes/part-0.parquet"), &nodes);
    write_parquet(&dir.join("edges/part-0.parquet"), &edges);
}

#[test]
fn a_graph_keyed_by_strings_gets_its_strings_labels_and_splits_back() {
    let dir = scratch("precompute-strings");
    let data = dir.join("data");
    string_graph(&data);
    let out = dir.join("out");
    run_ok(&Job::cluster().key("workers", 2).and(precompute(&data, &out)).write(&dir, "job"), &[]);
    assert_product(&data, &out);
    // Each part says what its features are.
    for part in parquet_files(&out) {
        let file = std::fs::File::open(&part).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let value = reader.schema().metadata().get("graphprecompute.features").cloned();
        assert_eq!(value.as_deref(), Some("gcn:1"), "{}", part.display());
    }
}

#[test]
fn a_node_table_without_features_or_holding_the_product_already_is_refused() {
    let dir = scratch("precompute-featureless");
    let data = dir.join("data");
    string_graph(&data);
    let nodes = batches_in(parquet_files(&data.join("nodes"))).remove(0);
    let without = nodes.project(&[0, 2, 3]).unwrap();
    let bare = dir.join("bare");
    write_parquet(&bare.join("nodes/part-0.parquet"), &without);
    std::os::unix::fs::symlink(data.join("edges"), bare.join("edges")).unwrap();
    let out = dir.join("out");
    let job = precompute(&bare, &out).write(&dir, "job");
    assert_fails(&run(&job, &[]), 64, &["no features column", "nothing to multiply"]);
    assert!(!out.join("_SUCCESS").exists());
    // Nor is a table whose features are the product already.
    let ax = dir.join("ax");
    run_ok(&precompute(&data, &ax).write(&dir, "once"), &[]);
    let twice = dir.join("twice");
    std::fs::create_dir_all(&twice).unwrap();
    std::os::unix::fs::symlink(&ax, twice.join("nodes")).unwrap();
    std::os::unix::fs::symlink(data.join("edges"), twice.join("edges")).unwrap();
    let job = precompute(&twice, &dir.join("out-twice")).write(&dir, "twice");
    assert_fails(&run(&job, &[]), 64, &["Â X already", "plain node table"]);
    // A node table of parts that disagree on what their features are.
    let mixed = dir.join("mixed");
    std::fs::create_dir_all(mixed.join("nodes")).unwrap();
    std::fs::copy(data.join("nodes/part-0.parquet"), mixed.join("nodes/part-0.parquet")).unwrap();
    std::fs::copy(&parquet_files(&ax)[0], mixed.join("nodes/part-1.parquet")).unwrap();
    std::os::unix::fs::symlink(data.join("edges"), mixed.join("edges")).unwrap();
    let flatten = Job::flatten(&mixed, dir.join("flat-mixed")).write(&dir, "mixed");
    assert_fails(&run(&flatten, &[]), 65, &["some parts of the node table hold precomputed features"]);
}

#[test]
fn a_model_over_precomputed_features_scores_in_graphinfer_as_its_records_forward_pass() {
    let dir = scratch("precompute-model");
    let data = dir.join("graph");
    generate(&data, 2000, 8, 12, 7);
    let (ax, flat, model) = (dir.join("ax"), dir.join("flat"), dir.join("model"));
    let two = || Job::cluster().key("workers", 2);
    run_ok(&two().and(precompute(&data, &ax).key("normalize_features", true)).write(&dir, "precompute"), &[]);
    // Records of one hop fewer over Â X: the edges a 3-layer GCN's last two layers read.
    let flatten = Job::table_named("flatten")
        .key("nodes", location(&ax))
        .key("edges", location(data.join("edges")))
        .key("output", location(&flat))
        .key("fanouts", vec![6, 3])
        .key("hub_threshold", 20);
    run_ok(&two().and(flatten).write(&dir, "flatten"), &[]);
    let train = Job::train(&flat, &model).key("epochs", 3).key("batch_size", 256).key("hidden", 8);
    run_ok(&two().and(train.clone()).write(&dir, "train"), &[]);
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(model_json(&model)).unwrap()).unwrap();
    assert_eq!((meta["spec"]["layers"].as_u64(), meta["spec"]["precomputed"].as_u64()), (Some(3), Some(1)));
    let expected = record_scores(&model, &flat);
    for threshold in [4, 0] {
        let out = dir.join(format!("scores-{threshold}"));
        let infer = Job::table_named("infer")
            .key("nodes", location(&ax))
            .key("edges", location(data.join("edges")))
            .key("model", location(&model))
            .key("output", location(&out))
            .key("hub_threshold", threshold);
        run_ok(&two().and(infer).write(&dir, &format!("infer-{threshold}")), &[]);
        let difference = max_difference(&scores_only(&read_scores(&out)), &expected);
        assert!(difference < 1e-4, "hub threshold {threshold}: scores differ from the records' by {difference}");
    }
    // The plain node table is not what the model reads.
    let plain = Job::infer(&data, &model, dir.join("plain")).write(&dir, "plain");
    assert_fails(&run(&plain, &[]), 64, &["[precompute]", "plain features"]);
    // GraphSAGE does not read Â X, and its rows are not normalized again.
    let sage = train.clone().key("model", "sage").key("output", location(dir.join("sage")));
    assert_fails(&run(&sage.write(&dir, "sage"), &[]), 64, &["model = \"gcn\"", "Â X"]);
    let normalized = train.key("normalize_features", true).key("output", location(dir.join("normalized")));
    assert_fails(&run(&normalized.write(&dir, "normalized"), &[]), 64, &["normalize_features", "[precompute]"]);
    // A model of plain records over Â X is the other mix-up.
    let (plain_flat, plain_model) = (dir.join("plain-flat"), dir.join("plain-model"));
    run_ok(&Job::flatten(&data, &plain_flat).key("fanouts", vec![3, 3]).write(&dir, "plain-flatten"), &[]);
    run_ok(&Job::train(&plain_flat, &plain_model).key("epochs", 1).key("hidden", 8).write(&dir, "plain-train"), &[]);
    let mixed = Job::table_named("infer")
        .key("nodes", location(&ax))
        .key("edges", location(data.join("edges")))
        .key("model", location(&plain_model))
        .key("output", location(dir.join("mixed")));
    assert_fails(&run(&mixed.write(&dir, "mixed"), &[]), 64, &["Â X", "trained on plain features"]);
    // Full-graph training aggregates every layer itself.
    let full = Job::table_named("train")
        .key("nodes", location(&ax))
        .key("edges", location(data.join("edges")))
        .key("output", location(dir.join("full")));
    assert_fails(&run(&full.write(&dir, "full"), &[]), 64, &["Â X", "plain node table"]);
}

#[test]
fn a_product_past_float32_is_bad_data_not_an_output_of_infinities() {
    let dir = scratch("precompute-overflow");
    let data = dir.join("data");
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let values = Float32Array::from(vec![3e38, 1.0, 3e38, 2.0, 3e38, 0.5]);
    let nodes = RecordBatch::try_from_iter([
        ("node_id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
        ("features", Arc::new(FixedSizeListArray::new(item, 2, Arc::new(values), None))),
    ])
    .unwrap();
    let edges = RecordBatch::try_from_iter([
        ("src", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        ("dst", Arc::new(Int64Array::from(vec![3, 3]))),
    ])
    .unwrap();
    write_parquet(&data.join("nodes/part-0.parquet"), &nodes);
    write_parquet(&data.join("edges/part-0.parquet"), &edges);
    let out = dir.join("out");
    let job = precompute(&data, &out).write(&dir, "job");
    assert_fails(&run(&job, &[]), 65, &["node 3", "overflows float32", "features"]);
    assert!(!out.join("_SUCCESS").exists());
}

/// The model's description, `model-<run>.json`.
#[test]
fn a_refresh_over_precomputed_features_writes_what_a_full_run_writes() {
    use crate::refresh::{Change, Day, Rng, assert_incremental, infer_job, listed_rows, refresh_line};
    let dir = scratch("precompute-refresh");
    generate(&dir.join("g"), 3_000, 6, 5, 7);
    let mut day = Day::read(&dir.join("g"));
    let (data, ax, flat, model) = (dir.join("data"), dir.join("ax"), dir.join("flat"), dir.join("model"));
    day.write(&data);
    // The graph GraphFlat and GraphInfer read: the precomputed nodes, the day's edges.
    let inputs = dir.join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    std::os::unix::fs::symlink(&ax, inputs.join("nodes")).unwrap();
    std::os::unix::fs::symlink(data.join("edges"), inputs.join("edges")).unwrap();
    let product = precompute(&data, &ax).key("overwrite", true).write(&dir, "precompute");
    run_ok(&product, &[]);
    let flatten = Job::flatten(&inputs, &flat).key("hops", 1).key("fanouts", vec![4]);
    run_ok(&flatten.write(&dir, "flatten"), &[]);
    run_ok(&Job::train(&flat, &model).key("epochs", 1).key("hidden", 8).write(&dir, "train"), &[]);
    let (out, full) = (dir.join("scores"), dir.join("full"));
    run_ok(&infer_job(&inputs, &model, &out, true).write(&dir, "day0"), &["--workers", "2"]);
    // GraphFlat's refresh of the records over it, beside GraphInfer's.
    let records = |output: &Path, incremental: bool| {
        let job = Job::flatten(&inputs, output).key("hops", 1).key("fanouts", vec![4]).key("overwrite", true);
        job.key("incremental", incremental)
    };
    let (refreshed_flat, full_flat) = (dir.join("flat-refreshed"), dir.join("flat-full"));
    run_ok(&records(&refreshed_flat, true).write(&dir, "records-day0"), &[]);
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let days: [Change; 3] = [
        ("no change", &|_, _| {}),
        ("features, a label and a split", &|d, r| d.change_nodes(r, 2)),
        ("edges removed and added", &|d, r| d.change_edges(r, 2)),
    ];
    for (i, (name, change)) in days.iter().enumerate() {
        change(&mut day, &mut rng);
        day.write(&data);
        run_ok(&product, &[]);
        let stdout = run_ok(&infer_job(&inputs, &model, &out, true).write(&dir, "day"), &["--workers", "2"]);
        assert_incremental(&stdout, name, i == 0);
        run_ok(&infer_job(&inputs, &model, &full, false).write(&dir, "full"), &[]);
        assert_eq!(listed_rows(&out), sorted_rows(&read_batches(&full)), "{name}: {}", refresh_line(&stdout));
        let stdout = run_ok(&records(&refreshed_flat, true).write(&dir, "records"), &["--workers", "2"]);
        assert_incremental(&stdout, name, i == 0);
        run_ok(&records(&full_flat, false).write(&dir, "records-full"), &[]);
        assert!(read_listed_records(&refreshed_flat) == read_records(&full_flat), "{name}: the records differ");
    }
}
