//! Link records, end to end: one per supervision edge of the edge table's split column; each
//! endpoint's neighborhood is exactly that node's own node record with the same settings;
//! negatives follow the hash rule, recomputed here over the whole table in one place; no valid
//! or test edge is ever a message-passing edge; the same records on 1 and 2 workers and 2
//! processes; `disjoint_train` and `supervision_fraction`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use cluster::hash::{hash3, mix64, unit_interval};
use parquet::arrow::ArrowWriter;
use schemas::Split;
use schemas::record::LinkRecord;

/// The split of the undirected pair {a, b}: a simple rule of this test's own (parallel and
/// reversed edges share it), about 60% train, 10% valid, 10% test, 20% none.
fn split_of(a: i64, b: i64) -> Option<Split> {
    match (a.min(b) * 31 + a.max(b) * 17) % 10 {
        0..=5 => Some(Split::Train),
        6 => Some(Split::Valid),
        7 => Some(Split::Test),
        _ => None,
    }
}

/// Copies the generated graph `data` to `out` with a `split` column on its edge table.
fn with_split(data: &Path, out: &Path) {
    std::fs::create_dir_all(out.join("edges")).unwrap();
    std::os::unix::fs::symlink(data.join("nodes"), out.join("nodes")).unwrap();
    for (i, batch) in read_batches(&data.join("edges")).into_iter().enumerate() {
        let (src, dst) = (int64s(&batch, "src"), int64s(&batch, "dst"));
        let splits: StringArray = src.iter().zip(&dst).map(|(&s, &d)| split_of(s, d).map(Split::name)).collect();
        let mut fields: Vec<Field> = batch.schema().fields().iter().map(|f| (**f).clone()).collect();
        fields.push(Field::new("split", DataType::Utf8, true));
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        columns.push(Arc::new(splits));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let file = std::fs::File::create(out.join(format!("edges/part-{i}.parquet"))).unwrap();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }
}

fn int64s(batch: &RecordBatch, name: &str) -> Vec<i64> {
    batch.column_by_name(name).unwrap().as_primitive::<Int64Type>().values().to_vec()
}

/// (src, dst) of every edge of `data`'s edge table, in table order.
fn table_edges(data: &Path) -> Vec<(i64, i64)> {
    batches_in(parquet_files(&data.join("edges")))
        .iter()
        .flat_map(|b| int64s(b, "src").into_iter().zip(int64s(b, "dst")).collect::<Vec<_>>())
        .collect()
}

/// Negative draw `i` of (src, dst), recomputed from the rule over every node at once: node `v`
/// falls in bucket `mix64(v ^ K) % 4096`; the first hash picks a bucket in proportion to its
/// total weight (buckets in order), the second a node of it in proportion to its weight (ids
/// in order). Weights: 1, or in-degree^0.75 for `degree`.
fn expected_negative(weights: &BTreeMap<i64, f64>, seed: u64, src: i64, dst: i64, i: usize) -> i64 {
    let mut buckets: BTreeMap<u64, Vec<(i64, f64)>> = BTreeMap::new();
    for (&v, &w) in weights {
        buckets.entry(mix64(v as u64 ^ 0x2545_f491_4f6c_dd1d) % 4096).or_default().push((v, w));
    }
    let edge = hash3(seed ^ 0x6e65_6761_7469_7665, src as u64, dst as u64);
    let (first, second) = (unit_interval(hash3(edge, i as u64, 0)), unit_interval(hash3(edge, i as u64, 1)));
    let totals: Vec<(u64, f64)> =
        buckets.iter().map(|(&b, nodes)| (b, nodes.iter().map(|n| n.1).sum::<f64>())).filter(|t| t.1 > 0.0).collect();
    let grand: f64 = totals.iter().map(|t| t.1).sum();
    let (mut at, mut bucket) = (0.0, totals.last().unwrap().0);
    for &(b, total) in &totals {
        at += total;
        if at > first * grand {
            bucket = b;
            break;
        }
    }
    let nodes = &buckets[&bucket];
    let total: f64 = nodes.iter().map(|n| n.1).sum();
    let mut at = 0.0;
    for &(v, w) in nodes {
        at += w;
        if at > second * total {
            return v;
        }
    }
    nodes.iter().rev().find(|n| n.1 > 0.0).unwrap().0
}

/// A generated graph with hubs and a split column, in `dir/data`.
fn split_graph(dir: &Path) -> PathBuf {
    let generated = dir.join("generated");
    generate(&generated, 400, 5, 4, 3);
    let data = dir.join("data");
    with_split(&generated, &data);
    data
}

fn link_job(data: &Path, out: &Path) -> Job {
    Job::flatten(data, out)
        .key("hops", 2)
        .key("fanouts", vec![4, 2])
        .key("task", "link")
        .key("negatives", 3)
        .key("batch_size", 32)
}

#[test]
fn each_endpoint_holds_its_own_node_record_and_negatives_follow_the_hash_rule() {
    let dir = scratch("link-endpoints");
    let data = split_graph(&dir);
    let edges = table_edges(&data);
    let supervision: BTreeSet<(i64, i64, Split)> =
        edges.iter().filter_map(|&(s, d)| split_of(s, d).map(|split| (s, d, split))).collect();
    let held_out: BTreeSet<(i64, i64)> =
        edges.iter().copied().filter(|&(s, d)| matches!(split_of(s, d), Some(Split::Valid | Split::Test))).collect();
    let mut in_degree: HashMap<i64, u64> = HashMap::new();
    for &(_, d) in edges.iter().filter(|e| !held_out.contains(e)) {
        *in_degree.entry(d).or_default() += 1;
    }
    let ids: Vec<i64> = read_graph(&dir.join("generated")).features.keys().copied().collect();
    for (sampler, hub_threshold) in [("uniform", 5), ("degree", 0)] {
        let job = |j: Job| j.key("hub_threshold", hub_threshold);
        let links = flatten(&dir, &data, &format!("links-{sampler}"), &[], |_| {
            job(link_job(&data, &dir.join(format!("links-{sampler}")))).key("negative_sampler", sampler)
        });
        let summary_nodes = flatten(&dir, &data, &format!("nodes-{sampler}"), &[], |j| {
            job(j.key("hops", 2).key("fanouts", vec![4, 2]))
        });
        let nodes: HashMap<i64, Record> = read_records(&summary_nodes).into_iter().map(|r| (r.root, r)).collect();
        let links = read_links(&links);
        let found: BTreeSet<(i64, i64, Split)> = links.iter().map(|l| (l.src, l.dst, l.split.unwrap())).collect();
        assert_eq!(found, supervision, "one record per supervision edge of the table");
        let weights: BTreeMap<i64, f64> = ids
            .iter()
            .map(|&v| {
                let degree = in_degree.get(&v).copied().unwrap_or(0) as f64;
                (v, if sampler == "degree" { degree.powf(0.75) } else { 1.0 })
            })
            .collect();
        for link in &links {
            assert_eq!(link.endpoints.len(), 2 + 3);
            for (e, endpoint) in link.endpoints.iter().enumerate() {
                let own = &nodes[&link.endpoint_ids()[e]];
                let own = Record { label: None, split: None, ..own.clone() };
                assert_eq!(&**endpoint, &own, "{sampler}: link {} -> {}, endpoint {e}", link.src, link.dst);
                for pair in global_edges(endpoint).iter().map(|g| (g.0, g.1)) {
                    assert!(!held_out.contains(&pair), "{sampler}: a valid or test edge {pair:?} passes messages");
                }
            }
            let expected: Vec<i64> = (0..3).map(|i| expected_negative(&weights, 0, link.src, link.dst, i)).collect();
            assert_eq!(link.negatives, expected, "{sampler}: negatives of {} -> {}", link.src, link.dst);
        }
        if sampler == "degree" {
            let drawn: Vec<i64> = links.iter().flat_map(|l| l.negatives.clone()).collect();
            assert!(drawn.iter().all(|v| in_degree.contains_key(v)), "a node without in-edges has weight 0");
        }
    }
}

#[test]
fn link_records_are_the_same_on_1_and_2_workers_and_2_processes() {
    let dir = scratch("link-workers");
    let data = split_graph(&dir);
    let one =
        flatten(&dir, &data, "one", &["--workers", "1"], |_| link_job(&data, &dir.join("one")).key("hub_threshold", 5));
    let two =
        flatten(&dir, &data, "two", &["--workers", "2"], |_| link_job(&data, &dir.join("two")).key("hub_threshold", 5));
    let job = Job::loopback(2).and(link_job(&data, &dir.join("procs")).key("hub_threshold", 5));
    run_two_processes(&job.write(&dir, "procs"), &dir);
    let reference = sorted_rows(&read_batches(&one));
    assert!(!reference.is_empty());
    assert_eq!(sorted_rows(&read_batches(&two)), reference, "2 workers");
    assert_eq!(sorted_rows(&read_batches(&dir.join("procs"))), reference, "2 processes");
}

#[test]
fn disjoint_train_holds_each_training_edge_out_of_its_own_record() {
    let dir = scratch("link-disjoint");
    let data = split_graph(&dir);
    let plain = read_links(&flatten(&dir, &data, "plain", &[], |_| link_job(&data, &dir.join("plain"))));
    let disjoint = read_links(&flatten(&dir, &data, "disjoint", &[], |_| {
        link_job(&data, &dir.join("disjoint")).key("disjoint_train", true)
    }));
    assert_eq!(plain.len(), disjoint.len());
    let mut removed = 0;
    for (p, d) in plain.iter().zip(&disjoint) {
        let own = |l: &LinkRecord| -> usize {
            l.endpoints
                .iter()
                .flat_map(|e| global_edges(e))
                .filter(|g| (g.0, g.1) == (l.src, l.dst) || (g.0, g.1) == (l.dst, l.src))
                .count()
        };
        if d.split == Some(Split::Train) {
            assert_eq!(own(d), 0, "train record {} -> {} still holds its own edge", d.src, d.dst);
            removed += own(p);
            let (p_edges, d_edges) = (p.num_edges(), d.num_edges());
            assert_eq!(p_edges - d_edges, own(p), "only the record's own edges go");
            assert_eq!(p.num_nodes(), d.num_nodes(), "nodes stay");
        } else {
            assert_eq!(p, d, "valid and test records are unchanged");
        }
    }
    assert!(removed > 0, "some training record held its own edge");
}

#[test]
fn supervision_fraction_keeps_a_hash_chosen_share() {
    let dir = scratch("link-fraction");
    let data = split_graph(&dir);
    let all = read_links(&flatten(&dir, &data, "all", &[], |_| link_job(&data, &dir.join("all"))));
    let some = read_links(&flatten(&dir, &data, "some", &["--workers", "2"], |_| {
        link_job(&data, &dir.join("some")).key("supervision_fraction", 0.3)
    }));
    let share = some.len() as f64 / all.len() as f64;
    assert!((0.2..0.4).contains(&share), "kept {} of {} ({share:.2})", some.len(), all.len());
    assert!(some.iter().all(|l| all.contains(l)), "a kept record is the same as in the full set");
}

#[test]
fn a_link_job_without_supervision_edges_fails_with_bad_input() {
    let dir = scratch("link-no-split");
    let data = dir.join("g");
    generate(&data, 100, 3, 4, 1);
    let out = dir.join("out");
    let result = run(&link_job(&data, &out).write(&dir, "job"), &[]);
    assert_fails(&result, 65, &["no edge has a split", "split-edges"]);
    assert!(!out.join("_SUCCESS").exists());
}
