//! Edge features, end to end: every record carries each of its edges' features, checked against
//! the edge table read with the parquet crate alone; records and the table's feature statistics
//! are the same on 1 and 2 workers and with hubs re-indexed or not; `import ogb` brings OGB's
//! `edge-feat.csv.gz` along.

use std::collections::HashMap;
use std::path::Path;

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use schemas::edge_stats::EdgeStats;
use schemas::nodes::NodeRows;
use schemas::record::FlattenMeta;
use schemas::{Label, LabelKind, Split};

/// Each (src, dst) of the edge table with the feature rows (as bits) of its edges, in table order.
type FeatureRows = HashMap<(i64, i64), Vec<Vec<u32>>>;

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// The edge table `edges`, read with the parquet crate.
fn feature_rows(edges: &Path) -> FeatureRows {
    let mut rows = FeatureRows::new();
    for batch in read_batches(edges) {
        let src = batch.column_by_name("src").unwrap().as_primitive::<Int64Type>();
        let dst = batch.column_by_name("dst").unwrap().as_primitive::<Int64Type>();
        let features = batch.column_by_name("features").unwrap().as_list::<i32>();
        for r in 0..batch.num_rows() {
            let row = bits(features.value(r).as_primitive::<Float32Type>().values());
            rows.entry((src.value(r), dst.value(r))).or_default().push(row);
        }
    }
    rows
}

/// Every record's edge j, by global ids (node_ids[edge_src[j]], node_ids[edge_dst[j]]), carries
/// `dim` features that are a row of that pair in the table; a record's parallel edges take
/// distinct rows (no table row twice). Returns how many edges were checked.
fn check_against_the_table(records: &[Record], rows: &FeatureRows, dim: usize) -> usize {
    let mut checked = 0;
    for r in records {
        assert_eq!(r.edge_features.len(), r.num_edges() * dim, "root {}", r.root);
        let mut used: HashMap<((i64, i64), Vec<u32>), usize> = HashMap::new();
        for j in 0..r.num_edges() {
            let pair = (r.node_ids[r.edge_src[j] as usize], r.node_ids[r.edge_dst[j] as usize]);
            let carried = bits(r.edge_features_of(j));
            let table = rows.get(&pair).unwrap_or_else(|| panic!("root {}: {pair:?} is no edge of the table", r.root));
            let available = table.iter().filter(|row| **row == carried).count();
            let count = used.entry((pair, carried)).or_default();
            *count += 1;
            assert!(
                *count <= available,
                "root {}: edge {pair:?} carries {:?}, which the table's rows of that pair do not hold",
                r.root,
                r.edge_features_of(j)
            );
            checked += 1;
        }
    }
    checked
}

/// The flatten settings of the part files of `out` (every part has the same).
fn meta_of(out: &Path) -> FlattenMeta {
    let metas: Vec<FlattenMeta> = parquet_files(out)
        .iter()
        .map(|path| {
            let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
            FlattenMeta::from_metadata(builder.schema().metadata()).unwrap()
        })
        .collect();
    assert!(metas.windows(2).all(|m| m[0] == m[1]), "parts of {} differ in metadata", out.display());
    metas[0].clone()
}

/// Mean and population standard deviation of each column, in one plain pass.
fn plain_stats(rows: &FeatureRows, dim: usize) -> EdgeStats {
    let all: Vec<Vec<f64>> =
        rows.values().flatten().map(|row| row.iter().map(|&b| f64::from(f32::from_bits(b))).collect()).collect();
    let n = all.len() as f64;
    let mean: Vec<f64> = (0..dim).map(|c| all.iter().map(|row| row[c]).sum::<f64>() / n).collect();
    let std = (0..dim).map(|c| (all.iter().map(|row| (row[c] - mean[c]).powi(2)).sum::<f64>() / n).sqrt() as f32);
    EdgeStats { mean: mean.iter().map(|&m| m as f32).collect(), std: std.collect() }
}

#[test]
fn records_carry_each_edges_features_on_any_cluster_with_or_without_reindexing() {
    let dir = scratch("edge-features");
    let data = dir.join("graph");
    let mut args = generate_args(data.to_str().unwrap(), 1500, 6, 4, 5);
    args.extend(["--edge-feature-dim", "3"].map(String::from));
    graphflat_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());

    let settings = |job: Job, hub_threshold: i64| {
        let job = job.key("sampler", "uniform").key("fanouts", vec![5, 3]).key("seed", 7).key("batch_size", 97);
        job.key("hub_threshold", hub_threshold)
    };
    let flattened = |name: &str, workers: &str, hub_threshold: i64| {
        let out = dir.join(name);
        let summary =
            run_ok(&settings(Job::flatten(&data, &out), hub_threshold).write(&dir, name), &["--workers", workers]);
        (read_records(&out), meta_of(&out), hubs_reindexed(&summary))
    };
    let (one, meta, hubs) = flattened("one-reindexed", "1", 4);
    assert!(hubs > 100, "re-indexing should kick in for many nodes: {hubs} hubs");
    assert_eq!(one.len(), 1500);

    let rows = feature_rows(&data.join("edges"));
    let checked = check_against_the_table(&one, &rows, 3);
    assert!(checked > 10_000, "only {checked} edges checked");
    assert!(one.iter().any(|r| r.in_degrees[0] > 5 && r.num_edges() > 5), "no root with more in-edges than its fanout");

    assert_eq!(meta.edge_dim, 3);
    let stats = meta.edge_stats.clone().expect("edge feature statistics in the metadata");
    let plain = plain_stats(&rows, 3);
    for (got, want) in stats.mean.iter().chain(&stats.std).zip(plain.mean.iter().chain(&plain.std)) {
        assert!((got - want).abs() < 1e-4, "statistics {stats:?} differ from a plain pass {plain:?}");
    }

    for (name, workers, hub_threshold) in [("one", "1", 0), ("two", "2", 0), ("two-reindexed", "2", 4)] {
        let (records, other_meta, _) = flattened(name, workers, hub_threshold);
        assert!(records == one, "{name}: records differ from 1 worker with re-indexing");
        assert_eq!(other_meta, meta, "{name}: the metadata (edge statistics included) differs");
    }
}

#[test]
fn import_ogb_carries_edge_feat_into_the_edge_table_and_the_records() {
    let dir = scratch("edge-features-ogb");
    let raw = dir.join("ogb/raw");
    std::fs::create_dir_all(&raw).unwrap();
    let gz = |name: &str, text: &str| std::fs::write(raw.join(name), gzip(text)).unwrap();
    gz("node-feat.csv.gz", "1.0,2.0\n3.0,4.0\n5.0,6.0\n7.0,8.0\n");
    gz("node-label.csv.gz", "0\n1\n0\n1\n");
    // Two parallel edges 0 -> 1 with different features.
    gz("edge.csv.gz", "0,1\n0,1\n2,1\n1,3\n3,0\n");
    let edge_feat = "0.5,1,-1\n0.25,1,-1\n2,3,4\n-0.125,0,7.5\n9,8,7\n";
    gz("edge-feat.csv.gz", edge_feat);
    let data = dir.join("graph");
    let summary = graphflat_ok(&["import", "ogb", dir.join("ogb").to_str().unwrap(), "--out", data.to_str().unwrap()]);
    assert!(summary.contains("5 edges (3 features)"), "{summary}");

    let rows = feature_rows(&data.join("edges"));
    let lines: Vec<Vec<u32>> =
        edge_feat.lines().map(|l| bits(&l.split(',').map(|v| v.parse::<f32>().unwrap()).collect::<Vec<_>>())).collect();
    assert_eq!(rows[&(0, 1)], vec![lines[0].clone(), lines[1].clone()]);
    assert_eq!((&rows[&(2, 1)][0], &rows[&(1, 3)][0], &rows[&(3, 0)][0]), (&lines[2], &lines[3], &lines[4]));

    let out = flatten(&dir, &data, "flat", &["--workers", "2"], |job| job.key("hops", 2).key("sampler", "all"));
    let records = read_records(&out);
    assert_eq!(check_against_the_table(&records, &rows, 3), records.iter().map(Record::num_edges).sum::<usize>());
    // Node 1's in-edges: both parallel edges, each with its own row, ordered by content.
    let root = records.iter().find(|r| r.root == 1).unwrap();
    let from_0: Vec<Vec<u32>> = (0..root.num_edges())
        .filter(|&j| root.node_ids[root.edge_src[j] as usize] == 0 && root.edge_dst[j] == 0)
        .map(|j| bits(root.edge_features_of(j)))
        .collect();
    assert_eq!(from_0, vec![lines[1].clone(), lines[0].clone()], "0.25 sorts before 0.5 by bits");

    // An edge-feat file with a line fewer than the edges fails, naming it, and commits nothing.
    gz("edge-feat.csv.gz", "0.5,1,-1\n0.25,1,-1\n2,3,4\n-0.125,0,7.5\n");
    let short = dir.join("short");
    let failed = graphflat()
        .args(["import", "ogb", dir.join("ogb").to_str().unwrap(), "--out", short.to_str().unwrap()])
        .output()
        .unwrap();
    assert_fails(&failed, 65, &["edge-feat.csv.gz"]);
    assert!(!short.join("edges/_SUCCESS").exists() && !short.join("nodes/_SUCCESS").exists());
}

/// Two parallel edges 0 -> 1 (same weight) that differ only in their features, in two part
/// files, and node 1 keeps one (fanout 1): which one depends on the features alone, not on
/// which file holds which, the workers or re-indexing.
#[test]
fn parallel_edges_are_kept_by_content_not_by_arrival() {
    let dir = scratch("edge-features-parallel");
    let (a, b) = ([1.0f32, -2.0], [1.0f32, 2.0]);
    let mut outputs = Vec::new();
    for (name, first, second) in [("ab", a, b), ("ba", b, a)] {
        let data = dir.join(name);
        let labels = [Some(Label::Class(0)), Some(Label::Class(1))];
        let splits = [Some(Split::Train); 2];
        let nodes = NodeRows {
            ids: vec![0, 1],
            features: vec![0.5, 1.5],
            dim: 1,
            labels: &labels,
            label: LabelKind::Class,
            splits: &splits,
        };
        write_parquet(&data.join("nodes/part-0.parquet"), &nodes.to_batch());
        let edges = |src: Vec<i64>, dst: Vec<i64>, features: Vec<f32>| {
            let weight = vec![1.0; src.len()];
            schemas::edges::to_batch_with(src, dst, weight, Some((features, 2)))
        };
        write_parquet(&data.join("edges/part-0.parquet"), &edges(vec![0, 1], vec![1, 0], [first, [3.0, 3.0]].concat()));
        write_parquet(&data.join("edges/part-1.parquet"), &edges(vec![0], vec![1], second.to_vec()));
        for (workers, hub_threshold) in [("1", 0), ("2", 0), ("1", 1), ("2", 1)] {
            let out_name = format!("{name}-{workers}-{hub_threshold}");
            let settings = |job: Job| job.key("hops", 1).key("fanouts", vec![1]).key("hub_threshold", hub_threshold);
            outputs.push((
                out_name.clone(),
                read_records(&flatten(&dir, &data, &out_name, &["--workers", workers], settings)),
            ));
        }
    }
    let (_, first) = &outputs[0];
    let root = first.iter().find(|r| r.root == 1).unwrap();
    assert_eq!(root.num_edges(), 1);
    assert!(root.edge_features == a || root.edge_features == b, "{:?}", root.edge_features);
    for (name, records) in &outputs {
        assert!(records == first, "{name}: differs from {}", outputs[0].0);
    }
}
