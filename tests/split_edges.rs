//! `graphflat split-edges` and the rule it feeds: the split table holds the input's rows in
//! order with a deterministic split of the asked fractions (both directions of an edge alike
//! with --undirected, checked on real Cora), and no `valid` or `test` edge passes messages in
//! any stage: not in a record's edges or in-degrees (checked against the table read plainly),
//! not in GraphInfer's graph (its scores equal the forward pass over those records, and differ
//! from a graph that keeps the held-out edges).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::*;
use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};

/// An edge table's rows in file order: (src, dst, weight bits, split).
type Row = (i64, i64, u32, Option<String>);

/// Every row of the committed table `dir`, in part and row order, read with parquet's reader.
fn rows(dir: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    for batch in read_batches(dir) {
        let column = |name| batch.column_by_name(name).unwrap();
        let (src, dst) = (column("src").as_primitive::<Int64Type>(), column("dst").as_primitive::<Int64Type>());
        let weight = column("weight").as_primitive::<Float32Type>();
        let split = batch.column_by_name("split").map(|s| s.as_string::<i32>().clone());
        for r in 0..batch.num_rows() {
            let split = split.as_ref().and_then(|s| s.is_valid(r).then(|| s.value(r).to_owned()));
            rows.push((src.value(r), dst.value(r), weight.value(r).to_bits(), split));
        }
    }
    rows
}

/// Runs `graphflat split-edges --edges IN --out OUT` with `args`; returns stdout.
fn split_edges(input: &Path, out: &Path, args: &[&str]) -> String {
    graphflat_ok(&[&["split-edges", "--edges", input.to_str().unwrap(), "--out", out.to_str().unwrap()], args].concat())
}

/// Edges per split name.
fn counts(rows: &[Row]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for row in rows {
        *counts.entry(row.3.clone().unwrap()).or_default() += 1;
    }
    counts
}

#[test]
fn split_edges_is_deterministic_keeps_the_rows_and_the_fractions() {
    let dir = scratch("split-edges");
    let data = dir.join("graph");
    generate(&data, 4000, 8, 4, 3);
    let input = rows(&data.join("edges"));
    let args = ["--valid", "0.1", "--test", "0.2", "--seed", "7"];
    let stdout = split_edges(&data.join("edges"), &dir.join("a"), &args);
    split_edges(&data.join("edges"), &dir.join("b"), &args);
    let (a, b) = (rows(&dir.join("a")), rows(&dir.join("b")));
    assert_eq!(a, b, "two runs differ");
    let bytes = |d: &str| parquet_files(&dir.join(d)).iter().map(|f| std::fs::read(f).unwrap()).collect::<Vec<_>>();
    assert_eq!(bytes("a"), bytes("b"), "two runs wrote different bytes");

    let unsplit: Vec<(i64, i64, u32)> = a.iter().map(|r| (r.0, r.1, r.2)).collect();
    assert_eq!(unsplit, input.iter().map(|r| (r.0, r.1, r.2)).collect::<Vec<_>>(), "not the input's rows in order");
    let counts = counts(&a);
    let total = a.len() as f64;
    for (split, share) in [("valid", 0.1), ("test", 0.2), ("train", 0.7)] {
        let got = counts[split] as f64 / total;
        assert!((got - share).abs() < 0.01, "{split}: {got} of {total} edges, asked {share}");
    }
    let summary = format!("{} train, {} valid, {} test", counts["train"], counts["valid"], counts["test"]);
    assert!(stdout.contains(&summary), "the summary does not count the table's splits ({summary}):\n{stdout}");
    // Parallel edges share their split: the draw is a function of the edge's endpoints.
    let mut by_pair: BTreeMap<(i64, i64), BTreeSet<&str>> = BTreeMap::new();
    a.iter().for_each(|r| _ = by_pair.entry((r.0, r.1)).or_default().insert(r.3.as_deref().unwrap()));
    assert!(by_pair.values().all(|s| s.len() == 1), "parallel edges split apart");

    split_edges(&data.join("edges"), &dir.join("c"), &["--valid", "0.1", "--test", "0.2", "--seed", "8"]);
    let other = rows(&dir.join("c"));
    assert_ne!(other.iter().map(|r| &r.3).collect::<Vec<_>>(), a.iter().map(|r| &r.3).collect::<Vec<_>>());
}

#[test]
fn split_edges_refuses_an_output_over_its_input_and_fractions_that_cannot_work() {
    let dir = scratch("split-edges-refuses");
    let data = dir.join("graph");
    generate(&data, 200, 4, 4, 1);
    let edges = data.join("edges");
    let refused = |out: &Path, args: &[&str], words: &[&str]| {
        let output = graphflat()
            .env_remove("RUST_BACKTRACE")
            .args(["split-edges", "--edges", edges.to_str().unwrap(), "--out", out.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        assert_fails(&output, 64, words);
        assert!(!out.join("_SUCCESS").exists(), "{} was written", out.display());
    };
    refused(&edges.join("inside"), &[], &["lies inside the input"]);
    refused(&data, &[], &["holds"]);
    refused(&dir.join("x"), &["--valid", "0.6", "--test", "0.4"], &["must be below 1"]);
    refused(&dir.join("y"), &["--test", "1"], &["--test must be in [0, 1)"]);
    refused(&dir.join("z"), &["--valid=-0.1"], &["--valid must be in [0, 1)"]);
    // Fractions that pass the check but leave no edge in train on this graph: nothing committed.
    let out = dir.join("no-train");
    let output = graphflat()
        .args(["split-edges", "--edges", edges.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .args(["--valid", "0.99999999999", "--test", "0"])
        .output()
        .unwrap();
    assert_fails(&output, 65, &["no edge drew the train split"]);
    assert!(!out.join("_SUCCESS").exists());
}

#[test]
fn undirected_split_puts_both_directions_of_every_cora_edge_in_one_split() {
    let Some(cora) = cora() else { return };
    let dir = scratch("split-edges-cora");
    graphflat_ok(&["import", "ogb", cora.to_str().unwrap(), "--out", dir.join("cora").to_str().unwrap()]);
    let edges = dir.join("cora/edges");
    let args = ["--valid", "0.05", "--test", "0.1", "--seed", "1"];
    split_edges(&edges, &dir.join("undirected"), &[&args[..], &["--undirected"]].concat());
    split_edges(&edges, &dir.join("directed"), &args);

    let splits_by_pair = |rows: &[Row]| {
        let mut by_pair: BTreeMap<(i64, i64), BTreeSet<String>> = BTreeMap::new();
        for r in rows {
            by_pair.entry((r.0.min(r.1), r.0.max(r.1))).or_default().insert(r.3.clone().unwrap());
        }
        by_pair
    };
    let undirected = rows(&dir.join("undirected"));
    let pairs = splits_by_pair(&undirected);
    let both_ways: BTreeSet<(i64, i64)> = undirected.iter().map(|r| (r.0, r.1)).collect();
    assert!(both_ways.iter().all(|&(s, d)| both_ways.contains(&(d, s))), "Cora stores both directions");
    assert!(pairs.values().all(|s| s.len() == 1), "an undirected edge's directions split apart");
    let held_out = undirected.iter().filter(|r| r.3.as_deref() != Some("train")).count() as f64;
    let share = held_out / undirected.len() as f64;
    assert!((share - 0.15).abs() < 0.03, "{share} of Cora's edges held out, asked 0.15");
    let apart = splits_by_pair(&rows(&dir.join("directed"))).values().filter(|s| s.len() > 1).count();
    assert!(apart > 100, "without --undirected the directions draw apart ({apart} pairs)");
}

/// The generated graph's edges split 25% valid, 25% test; returns (data, split edge table).
fn split_graph(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let data = dir.join("graph");
    generate(&data, 800, 6, 8, 11);
    let split = dir.join("split-edges");
    split_edges(&data.join("edges"), &split, &["--valid", "0.25", "--test", "0.25", "--seed", "2"]);
    (data, split)
}

#[test]
fn no_valid_or_test_edge_reaches_a_record_or_graphinfer() {
    let dir = scratch("split-edges-leak");
    let (data, split) = split_graph(&dir);
    let table = rows(&split);
    let held_out: BTreeSet<(i64, i64)> =
        table.iter().filter(|r| r.3.as_deref() != Some("train")).map(|r| (r.0, r.1)).collect();
    // The message-passing in-edges of every node, read plainly from the table.
    let mut in_edges: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for r in table.iter().filter(|r| r.3.as_deref() == Some("train")) {
        in_edges.entry(r.1).or_default().push(r.0);
    }
    in_edges.values_mut().for_each(|v| v.sort_unstable());
    let all_in: BTreeMap<i64, usize> = table.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.1).or_default() += 1;
        m
    });

    let records = dir.join("flat");
    let flat = Job::cluster().key("workers", 2).and(
        Job::flatten(&data, &records).key("edges", split.display().to_string()).key("hops", 2).key("sampler", "all"),
    );
    run_ok(&flat.write(&dir, "flatten"), &[]);
    let mut changed_degrees = 0;
    for record in read_records(&records) {
        for (src, dst, _, _) in global_edges(&record) {
            assert!(
                !held_out.contains(&(src, dst)),
                "root {}: held-out edge {src} -> {dst} in its record",
                record.root
            );
        }
        let root_in: Vec<i64> = global_edges(&record).iter().filter(|e| e.1 == record.root).map(|e| e.0).collect();
        assert_eq!(root_in, in_edges.get(&record.root).cloned().unwrap_or_default(), "root {}'s in-edges", record.root);
        for (i, node) in record.node_ids.iter().enumerate() {
            let expected = in_edges.get(node).map_or(0, Vec::len);
            assert_eq!(record.in_degrees[i], expected as i64, "root {}: node {node}'s in-degree", record.root);
            changed_degrees += usize::from(all_in.get(node).copied().unwrap_or(0) != expected);
        }
    }
    assert!(changed_degrees > 100, "held-out edges change few in-degrees ({changed_degrees})");

    // GraphInfer over the split table equals the forward pass over these records; over the
    // table with every edge, it does not.
    let model = dir.join("model");
    let train = Job::train(&records, &model).key("epochs", 1).key("hidden", 8).key("model", "gcn");
    run_ok(&train.write(&dir, "train"), &[]);
    let expected = record_scores(&model, &records);
    let infer = |name: &str, edges: &Path| {
        let out = dir.join(name);
        let job = Job::cluster()
            .key("workers", 2)
            .and(Job::infer(&data, &model, &out).key("edges", edges.display().to_string()));
        run_ok(&job.write(&dir, name), &[]);
        scores_only(&read_scores(&out))
    };
    let held = max_difference(&infer("scores", &split), &expected);
    assert!(held < 1e-4, "GraphInfer over the split table differs from the records by {held}");
    let leaked = max_difference(&infer("scores-all-edges", &data.join("edges")), &expected);
    assert!(leaked > 1e-3, "the held-out edges change no score ({leaked}): the check has no teeth");
}

#[test]
fn an_empty_edge_table_is_bad_input_and_nothing_is_committed() {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    let dir = scratch("split-edges-empty");
    let edges = dir.join("edges");
    std::fs::create_dir_all(&edges).unwrap();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("src", Arc::new(Int64Array::from(Vec::<i64>::new()))),
        ("dst", Arc::new(Int64Array::from(Vec::<i64>::new()))),
    ];
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(edges.join("part-0.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let out = dir.join("out");
    let output = graphflat()
        .env_remove("RUST_BACKTRACE")
        .args(["split-edges", "--edges", edges.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_fails(&output, 65, &["the edge table is empty"]);
    assert!(!out.join("_SUCCESS").exists());
}
