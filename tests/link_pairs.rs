//! GraphInfer's pairs round for link models, end to end: a link model trained on a generated
//! graph (`split-edges --undirected`, link records with `sampler = "all"`, a few epochs with
//! the `dot` and the `mlp` decoder), then `[infer] pairs` over a table written here. Each
//! written score equals the decoder computed by hand from the written embeddings (and, for
//! `mlp`, the parameters in `model.bpk`); the pair output is the same on 1 worker, 2 workers and
//! 2 processes; bad pairs, a node model and outputs that touch others fail with their exit
//! code and leave no `_SUCCESS`.

use crate::common;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use burn::prelude::*;
use cluster::owner_key;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

/// A link model's data and model: the generated graph's nodes and its split edges in
/// `dir/data`, the model in `dir/model-<decoder>`.
fn link_model(dir: &Path, decoder: &str) -> (PathBuf, PathBuf) {
    let data = dir.join("data");
    if !data.join("edges").exists() {
        generate(&dir.join("generated"), 300, 4, 8, 5);
        std::fs::create_dir_all(&data).unwrap();
        std::os::unix::fs::symlink(dir.join("generated/nodes"), data.join("nodes")).unwrap();
        let (edges, split) = (dir.join("generated/edges"), data.join("edges"));
        graphflat_ok(&[
            "split-edges",
            "--edges",
            edges.to_str().unwrap(),
            "--out",
            split.to_str().unwrap(),
            "--undirected",
        ]);
    }
    let flat = dir.join("links");
    if !flat.join("_SUCCESS").exists() {
        flatten(dir, &data, "links", &[], |j| j.key("hops", 2).key("task", "link").key("sampler", "all"));
    }
    let model = dir.join(format!("model-{decoder}"));
    let train = Job::train(&flat, &model)
        .key("task", "link")
        .key("hidden", 16)
        .key("embedding_dim", 8)
        .key("decoder", decoder)
        .key("epochs", 3);
    run_ok(&train.write(dir, &format!("train-{decoder}")), &[]);
    (data, model)
}

/// Every node id of the node table, and each node's in-degree over the edge table.
fn nodes_and_degrees(data: &Path) -> (Vec<i64>, BTreeMap<i64, usize>) {
    let ids: Vec<i64> = read_graph(data).features.keys().copied().collect();
    let mut degree = BTreeMap::new();
    for batch in read_batches(&data.join("edges")) {
        for &d in batch.column_by_name("dst").unwrap().as_primitive::<Int64Type>().values() {
            *degree.entry(d).or_insert(0) += 1;
        }
    }
    (ids, degree)
}

/// The candidates: pairs across the two workers' owners, the hub against many nodes both
/// ways, repeats, and (v, v).
fn candidates(ids: &[i64], degree: &BTreeMap<i64, usize>) -> Vec<(i64, i64)> {
    let hub = *degree.iter().max_by_key(|(id, d)| (**d, -**id)).unwrap().0;
    let owner = |v: i64| owner_key(v) % 2;
    let across: Vec<(i64, i64)> = ids
        .iter()
        .zip(ids.iter().rev())
        .map(|(&a, &b)| (a, b))
        .filter(|&(a, b)| owner(a) != owner(b))
        .take(40)
        .collect();
    assert!(across.len() >= 20, "pairs across owners");
    let mut pairs = across.clone();
    pairs.extend(ids.iter().step_by(7).flat_map(|&v| [(hub, v), (v, hub)]));
    pairs.extend(across.iter().take(5));
    pairs.extend([(hub, hub), (ids[3], ids[3]), (ids[3], ids[3])]);
    pairs
}

/// Writes `pairs` as two Parquet files of small row groups in `dir` (with a column GraphInfer
/// ignores); returns the directory.
fn write_pairs(dir: &Path, pairs: &[(i64, i64)]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let half = pairs.len() / 2;
    for (i, chunk) in [&pairs[..half], &pairs[half..]].into_iter().enumerate() {
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("note", Arc::new(StringArray::from_iter_values(chunk.iter().map(|p| format!("{p:?}"))))),
            ("src", Arc::new(Int64Array::from_iter_values(chunk.iter().map(|p| p.0)))),
            ("dst", Arc::new(Int64Array::from_iter_values(chunk.iter().map(|p| p.1)))),
        ];
        write_parquet(&dir.join(format!("part-{i}.parquet")), RecordBatch::try_from_iter(columns).unwrap());
    }
    dir.to_path_buf()
}

fn write_parquet(path: &Path, batch: RecordBatch) {
    let props = WriterProperties::builder().set_max_row_group_row_count(Some(9)).build();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

fn infer_pairs(data: &Path, model: &Path, pairs: &Path, out: &Path) -> Job {
    Job::infer(data, model, out.join("embeddings"))
        .key("pairs", pairs.to_str().unwrap())
        .key("pairs_output", out.join("pairs").to_str().unwrap())
}

/// One row of the pair output.
type Row = (i64, i64, f32);

/// The pair output's rows, part by part, in file order.
fn read_pair_parts(dir: &Path) -> Vec<Vec<Row>> {
    assert!(dir.join("_SUCCESS").exists(), "{} has no _SUCCESS", dir.display());
    parquet_files(dir)
        .into_iter()
        .map(|file| {
            batches_in([file])
                .iter()
                .flat_map(|b| {
                    let (src, dst) = (b.column(0).as_primitive::<Int64Type>(), b.column(1).as_primitive::<Int64Type>());
                    let score = b.column(2).as_primitive::<Float32Type>();
                    (0..b.num_rows()).map(|r| (src.value(r), dst.value(r), score.value(r))).collect::<Vec<_>>()
                })
                .collect()
        })
        .collect()
}

/// Every row of the pair output, sorted (scores as bits, so that equal means the same bits).
fn pair_rows(dir: &Path) -> Vec<(i64, i64, u32)> {
    let mut rows: Vec<(i64, i64, u32)> =
        read_pair_parts(dir).into_iter().flatten().map(|(s, d, x)| (s, d, x.to_bits())).collect();
    rows.sort_unstable();
    rows
}

/// The embeddings GraphInfer wrote, by node id.
fn read_embeddings(dir: &Path) -> BTreeMap<i64, Vec<f32>> {
    let mut out = BTreeMap::new();
    for batch in read_batches(dir) {
        assert!(batch.column_by_name("scores").is_none(), "a link model has no node head");
        let ids = batch.column_by_name("node_id").unwrap().as_primitive::<Int64Type>();
        let embedding = batch.column_by_name("embedding").unwrap().as_fixed_size_list();
        for r in 0..batch.num_rows() {
            out.insert(ids.value(r), embedding.value(r).as_primitive::<Float32Type>().values().to_vec());
        }
    }
    out
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().iter::<f32>().map(f64::from).collect()
}

/// The decoder by hand, in f64: `h_s . h_d`, or `w2 . relu(W1^T-stored (h_s * h_d) + b1) + b2`
/// with the parameters read from the model.
fn by_hand(model: &Path) -> impl Fn(&[f32], &[f32]) -> f64 {
    let (meta, gnn) = gnn::io::load(&local_io(), model.to_str().unwrap(), &Device::flex()).unwrap();
    let d = meta.spec.classes;
    let mlp = gnn.decoder.map(|m| (values(m.w1.val()), values(m.b1.val()), values(m.w2.val()), values(m.b2.val())[0]));
    move |s: &[f32], t: &[f32]| {
        let x: Vec<f64> = s.iter().zip(t).map(|(&a, &b)| f64::from(a) * f64::from(b)).collect();
        match &mlp {
            None => x.iter().sum(),
            Some((w1, b1, w2, b2)) => {
                let hidden = (0..d).map(|j| (b1[j] + (0..d).map(|i| x[i] * w1[i * d + j]).sum::<f64>()).max(0.0));
                hidden.zip(w2).map(|(h, w)| h * w).sum::<f64>() + b2
            }
        }
    }
}

#[test]
fn pair_scores_equal_the_decoder_by_hand_on_the_written_embeddings() {
    let dir = scratch("pairs-scores");
    for decoder in ["dot", "mlp"] {
        let (data, model) = link_model(&dir, decoder);
        let (ids, degree) = nodes_and_degrees(&data);
        let wanted = candidates(&ids, &degree);
        let table = write_pairs(&dir.join(format!("candidates-{decoder}")), &wanted);
        let out = dir.join(format!("out-{decoder}"));
        let job = infer_pairs(&data, &model, &table, &out).and(Job::cluster().key("workers", 2));
        let job = job.and(Job::report(out.join("report.html")));
        let summary = run_ok(&job.write(&dir, &format!("infer-{decoder}")), &[]);
        assert!(summary.contains(&format!("pairs:        {} candidate pairs scored", wanted.len())), "{summary}");
        assert!(summary.contains("pairs output:"), "{summary}");

        let embeddings = read_embeddings(&out.join("embeddings"));
        assert_eq!(embeddings.len(), ids.len());
        let score = by_hand(&model);
        let parts = read_pair_parts(&out.join("pairs"));
        for part in &parts {
            assert!(part.windows(2).all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1)), "a part sorted by (src, dst)");
        }
        let mut got: Vec<Row> = parts.into_iter().flatten().collect();
        got.sort_by_key(|r| (r.0, r.1));
        let mut expected = wanted.clone();
        expected.sort_unstable();
        assert_eq!(got.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(), expected, "one row per candidate row");
        // The run's facts hold the pairs' distribution, counted here by hand: 20 bins of the
        // sigmoid over [0, 1].
        let mut bins = vec![0u64; 20];
        for &(_, _, x) in &got {
            let p = 1.0 / (1.0 + (-f64::from(x)).exp());
            bins[((p * 20.0).floor() as usize).min(19)] += 1;
        }
        let facts = &common::manifest(&out.join("embeddings"))["facts"]["histograms"];
        let pairs = facts.as_array().unwrap().iter().find(|h| h["name"] == "pair score (sigmoid)").unwrap();
        assert_eq!(pairs["counts"], serde_json::json!(bins));
        assert!(std::fs::read_to_string(out.join("report.html")).unwrap().contains("pair score (sigmoid)"));
        for (s, d, x) in got {
            let want = score(&embeddings[&s], &embeddings[&d]);
            assert!((f64::from(x) - want).abs() <= 1e-5 * (1.0 + want.abs()), "{decoder} ({s}, {d}): {x} vs {want}");
        }
        let manifest = common::manifest(&out.join("pairs"));
        assert_eq!(manifest["rows"], wanted.len() as u64);
        assert_eq!(manifest["run"], common::manifest(&out.join("embeddings"))["run"], "one run, two outputs");

        // Pairs are scored from the last layer whatever `embedding` says, and over every node
        // whatever the targets are.
        let narrow = dir.join(format!("narrow-{decoder}"));
        let job = infer_pairs(&data, &model, &table, &narrow).key("targets", vec!["test"]).key("embedding", 1);
        run_ok(&job.write(&dir, &format!("narrow-{decoder}")), &[]);
        assert!(read_embeddings(&narrow.join("embeddings")).len() < ids.len());
        assert_eq!(pair_rows(&narrow.join("pairs")), pair_rows(&out.join("pairs")));
    }
}

#[test]
fn pair_scores_are_the_same_on_one_worker_two_workers_and_two_processes() {
    let dir = scratch("pairs-determinism");
    let (data, model) = link_model(&dir, "mlp");
    let (ids, degree) = nodes_and_degrees(&data);
    let table = write_pairs(&dir.join("candidates"), &candidates(&ids, &degree));
    let mut outputs = Vec::new();
    for (name, cluster) in [("one", Job::cluster().key("workers", 1)), ("two", Job::cluster().key("workers", 2))] {
        let out = dir.join(name);
        run_ok(&infer_pairs(&data, &model, &table, &out).and(cluster).write(&dir, name), &[]);
        outputs.push(out);
    }
    let out = dir.join("processes");
    run_two_processes(&infer_pairs(&data, &model, &table, &out).and(Job::loopback(2)).write(&dir, "processes"), &dir);
    outputs.push(out);
    let first = pair_rows(&outputs[0].join("pairs"));
    assert!(!first.is_empty());
    for out in &outputs[1..] {
        assert_eq!(pair_rows(&out.join("pairs")), first, "{}", out.display());
    }
    // With `incremental`, the first run is full (the version holds no digests), keeps them
    // beside the embeddings, committed with both outputs; the next refreshes, every node's
    // last layer read back, and scores every pair again, the same.
    let out = dir.join("two");
    let job = infer_pairs(&data, &model, &table, &out).key("incremental", true).write(&dir, "incremental");
    let stdout = run_ok(&job, &["--workers", "2"]);
    assert!(crate::refresh::refresh_line(&stdout).starts_with("refresh: full"), "{stdout}");
    assert!(out.join(".embeddings.graphflat-state/_SUCCESS").exists());
    assert_eq!(pair_rows(&out.join("pairs")), first, "an incremental run's pairs");
    let stdout = run_ok(&job, &["--workers", "2"]);
    let line = crate::refresh::refresh_line(&stdout);
    assert!(line.starts_with("refresh: incremental over run") && line.contains(": 0 nodes changed"), "{line}");
    assert_eq!(pair_rows(&out.join("pairs")), first, "a refresh's pairs");
}

/// No `_SUCCESS` in the job's output nor in its pair output.
fn no_success(out: &Path) {
    for dir in [out.join("embeddings"), out.join("pairs")] {
        assert!(!dir.join("_SUCCESS").exists(), "{} has _SUCCESS", dir.display());
    }
}

#[test]
fn unknown_nodes_and_bad_columns_in_pairs_are_named_and_leave_no_success() {
    let dir = scratch("pairs-bad");
    let (data, model) = link_model(&dir, "dot");
    let (ids, degree) = nodes_and_degrees(&data);
    let good = candidates(&ids, &degree);
    let unknown = 1_000_000_007;
    // Unknown ids in the second file, as dst at one row and as src at a later one: the first
    // row is named, on any number of workers.
    for (bad, row, column) in [((ids[0], unknown), 3, "dst"), ((unknown, ids[1]), 3, "src")] {
        let mut pairs = good.clone();
        let half = pairs.len() / 2;
        pairs[half + 3] = bad;
        pairs[half + 20] = (unknown, unknown);
        let table = write_pairs(&dir.join(format!("unknown-{column}")), &pairs);
        for workers in [1, 2] {
            let out = dir.join(format!("out-unknown-{column}-{workers}"));
            let job = infer_pairs(&data, &model, &table, &out).and(Job::cluster().key("workers", workers));
            let result = run(&job.write(&dir, "unknown"), &[]);
            let file = table.join("part-1.parquet");
            let at = format!("{}, row {row}, column \"{column}\"", file.display());
            assert_fails(&result, 65, &[&at, &format!("unknown node {unknown}")]);
            no_success(&out);
        }
    }

    // src as floats: the file and the column, before any row is scored.
    let table = dir.join("narrow");
    std::fs::create_dir_all(&table).unwrap();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("src", Arc::new(Float64Array::from(vec![1.0, 2.0]))),
        ("dst", Arc::new(Int64Array::from(vec![ids[0], ids[1]]))),
    ];
    write_parquet(&table.join("part-0.parquet"), RecordBatch::try_from_iter(columns).unwrap());
    let out = dir.join("out-narrow");
    let result = run(&infer_pairs(&data, &model, &table, &out).write(&dir, "narrow"), &[]);
    let file = table.join("part-0.parquet");
    assert_fails(
        &result,
        65,
        &[&format!("{}, column \"src\"", file.display()), "expected ids: an integer", "found Float64"],
    );
    no_success(&out);

    // No candidates at all: a committed pair table of no rows (one part of none, which carries
    // the schema), which inspect describes.
    let table = write_pairs(&dir.join("empty"), &[]);
    let out = dir.join("out-empty");
    let summary = run_ok(&infer_pairs(&data, &model, &table, &out).write(&dir, "empty"), &[]);
    assert!(summary.contains("0 candidate pairs"), "{summary}");
    let shown = graphflat_ok(&["inspect", out.join("pairs").to_str().unwrap()]);
    assert!(shown.contains("0 rows in 1 files") && shown.contains("src: Int64"), "{shown}");
    assert_every_reader_reads_the_manifest(&[&out.join("pairs")]);
}

#[test]
fn pairs_need_a_link_model() {
    let dir = scratch("pairs-node-model");
    let data = dir.join("graph");
    generate(&data, 200, 4, 8, 1);
    let flat = flatten(&dir, &data, "flat", &[], |j| j.key("hops", 2));
    let model = dir.join("node-model");
    run_ok(&Job::train(&flat, &model).key("epochs", 1).write(&dir, "train"), &[]);
    let (ids, _) = nodes_and_degrees(&data);
    let table = write_pairs(&dir.join("candidates"), &[(ids[0], ids[1]), (ids[1], ids[2])]);
    let out = dir.join("out");
    let result = run(&infer_pairs(&data, &model, &table, &out).write(&dir, "infer"), &[]);
    assert_fails(&result, 64, &[&model.display().to_string(), "node model", "task = \"link\""]);
    no_success(&out);
}

#[test]
fn the_pair_output_is_checked_like_any_output() {
    let dir = scratch("pairs-outputs");
    let (data, model) = link_model(&dir, "dot");
    let (ids, degree) = nodes_and_degrees(&data);
    let table = write_pairs(&dir.join("candidates"), &candidates(&ids, &degree));
    let out = dir.join("out");
    let job = |output: &Path, pairs_output: &Path| {
        Job::infer(&data, &model, output)
            .key("pairs", table.to_str().unwrap())
            .key("pairs_output", pairs_output.to_str().unwrap())
            .key("overwrite", true)
    };
    let link = dir.join("nodes-link");
    std::os::unix::fs::symlink(data.join("nodes"), &link).unwrap();
    // Inside, around or equal to the output, an input (through a symlink too), or the model.
    let refused: [(PathBuf, PathBuf, &str); 7] = [
        (out.join("embeddings"), out.join("embeddings/pairs"), "inside the other"),
        (out.join("embeddings/inner"), out.join("embeddings"), "inside the other"),
        (out.join("embeddings"), out.join("embeddings"), "inside the other"),
        (out.join("embeddings"), data.join("nodes"), "choose another output"),
        (out.join("embeddings"), link.clone(), "choose another output"),
        (out.join("embeddings"), table.clone(), "choose another output"),
        (table.join("scores"), out.join("pairs"), "choose another output"),
    ];
    let listing = |d: &Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let inputs = [listing(&data.join("nodes")), listing(&table)];
    for (output, pairs_output, says) in &refused {
        let result = run(&job(output, pairs_output).write(&dir, "refused"), &[]);
        assert_fails(&result, 64, &[says]);
        assert!(!out.exists(), "nothing is written before every output is checked");
    }
    assert_eq!([listing(&data.join("nodes")), listing(&table)], inputs, "an input was touched");

    // A pair output holding another tool's files, or a finished one without overwrite: 73.
    let foreign = dir.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let result = run(&job(&out.join("embeddings"), &foreign).key("overwrite", false).write(&dir, "foreign"), &[]);
    assert_fails(&result, 73, &["pairs_output", "notes.txt"]);
    run_ok(&job(&out.join("embeddings"), &out.join("pairs")).write(&dir, "first"), &[]);
    let first = pair_rows(&out.join("pairs"));
    let again = run(&job(&dir.join("elsewhere"), &out.join("pairs")).key("overwrite", false).write(&dir, "again"), &[]);
    assert_fails(&again, 73, &["pairs_output", "overwrite = true"]);
    assert!(!dir.join("elsewhere/_SUCCESS").exists());
    // With overwrite, the same rows again; the earlier run's parts are gone.
    run_ok(&job(&out.join("embeddings"), &out.join("pairs")).write(&dir, "second"), &[]);
    assert_eq!(pair_rows(&out.join("pairs")), first);
    assert_eq!(
        parquet_files(&out.join("pairs")).len(),
        manifest(&out.join("pairs"))["parts"].as_array().unwrap().len()
    );
}
