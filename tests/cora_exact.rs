//! Exactness on real Cora: with the `all` sampler, every record equals what an independent BFS
//! over the raw OGB files says it must hold.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::common::*;
use flate2::read::GzDecoder;

fn csv_lines(path: &Path) -> Vec<String> {
    BufReader::new(GzDecoder::new(std::fs::File::open(path).unwrap())).lines().map(|l| l.unwrap()).collect()
}

/// Cora read straight from the raw files, independently of `graphflat import`.
struct Raw {
    in_edges: HashMap<i64, Vec<i64>>,
    edges: Vec<(i64, i64)>,
    features: Vec<Vec<f32>>,
    labels: Vec<i64>,
}

fn raw(cora: &Path) -> Raw {
    let edges: Vec<(i64, i64)> = csv_lines(&cora.join("raw/edge.csv.gz"))
        .iter()
        .map(|l| {
            let (s, d) = l.split_once(',').unwrap();
            (s.parse().unwrap(), d.parse().unwrap())
        })
        .collect();
    let mut in_edges: HashMap<i64, Vec<i64>> = HashMap::new();
    for &(s, d) in &edges {
        in_edges.entry(d).or_default().push(s);
    }
    let features = csv_lines(&cora.join("raw/node-feat.csv.gz"))
        .iter()
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    let labels = csv_lines(&cora.join("raw/node-label.csv.gz")).iter().map(|l| l.trim().parse().unwrap()).collect();
    Raw { in_edges, edges, features, labels }
}

/// Hop distance of every node within `k` in-hops of `root`: a plain BFS over in-edges.
fn bfs(raw: &Raw, root: i64, k: u8) -> BTreeMap<i64, u8> {
    let mut dist = BTreeMap::from([(root, 0u8)]);
    let mut queue = VecDeque::from([root]);
    while let Some(v) = queue.pop_front() {
        let d = dist[&v];
        if d == k {
            continue;
        }
        for &u in raw.in_edges.get(&v).into_iter().flatten() {
            if let std::collections::btree_map::Entry::Vacant(e) = dist.entry(u) {
                e.insert(d + 1);
                queue.push_back(u);
            }
        }
    }
    dist
}

/// Flattens Cora `k` hops deep for `targets` (the `[flatten]` value) on `workers` workers and
/// checks every record against a BFS of the raw files.
fn check_exact(k: u8, targets: toml::Value, workers: &str) {
    let Some(cora) = cora() else { return };
    let dir = scratch(&format!("cora-k{k}"));
    let data = dir.join("cora");
    graphflat_ok(&["import", "ogb", cora.to_str().unwrap(), "--out", data.to_str().unwrap()]);
    let settings = |job: Job| job.key("hops", k).key("sampler", "all").key("targets", targets.clone());
    let out = flatten(&dir, &data, "flat", &["--workers", workers], settings);

    let raw = raw(&cora);
    let splits: HashMap<i64, &str> = ["train", "valid", "test"]
        .iter()
        .flat_map(|s| {
            csv_lines(&cora.join(format!("split/public/{s}.csv.gz")))
                .into_iter()
                .map(move |l| (l.trim().parse().unwrap(), *s))
        })
        .collect();
    let records = read_records(&out);
    let expected_roots: Vec<i64> = if targets.as_str() == Some("all") {
        (0..raw.features.len() as i64).collect()
    } else {
        let mut t: Vec<i64> = splits.iter().filter(|(_, s)| **s == "train").map(|(&n, _)| n).collect();
        t.sort();
        t
    };
    assert_eq!(records.iter().map(|r| r.root).collect::<Vec<_>>(), expected_roots);

    for record in &records {
        check_record(record, &raw, &splits, k);
    }
}

/// A record of every in-edge within `k` hops against a plain BFS over the raw graph: its nodes
/// and hops, its edges and the layers each serves, its features, in-degrees, label and split.
fn check_record(record: &Record, raw: &Raw, splits: &HashMap<i64, &str>, k: u8) {
    let dist = bfs(raw, record.root, k);
    // Nodes and hops.
    let got: BTreeMap<i64, u8> = record.node_ids.iter().copied().zip(record.hops.iter().copied()).collect();
    assert_eq!(got.len(), record.node_ids.len(), "root {}: a node listed twice", record.root);
    assert_eq!(got, dist, "root {}: node set or hop distances differ from BFS", record.root);
    assert_eq!(record.node_ids[0], record.root);
    // Edges: every edge (u -> w) with w within k-1 hops, each serving layers 1..=k-hop(w).
    let mut expected: Vec<(i64, i64, u32)> = raw
        .edges
        .iter()
        .filter(|(_, w)| dist.get(w).is_some_and(|&d| d < k))
        .map(|&(u, w)| (u, w, (1u32 << (k - dist[&w])) - 1))
        .collect();
    expected.sort();
    let got: Vec<(i64, i64, u32)> = global_edges(record)
        .into_iter()
        .map(|(s, d, w, l)| {
            assert_eq!(f32::from_bits(w), 1.0);
            (s, d, l)
        })
        .collect();
    assert_eq!(got, expected, "root {}: edge set differs", record.root);
    // Features, in-degrees, label and split equal the input rows.
    for (i, &node) in record.node_ids.iter().enumerate() {
        assert_eq!(
            record.node_features(i),
            &raw.features[node as usize][..],
            "root {} node {node}: features",
            record.root
        );
        let in_degree = raw.in_edges.get(&node).map_or(0, Vec::len) as i64;
        assert_eq!(record.in_degrees[i], in_degree, "root {} node {node}: in-degree", record.root);
    }
    assert_eq!(record.label.as_ref().and_then(schemas::Label::class), Some(raw.labels[record.root as usize]));
    assert_eq!(record.split.map(schemas::Split::name), splits.get(&record.root).copied());
}

#[test]
fn cora_two_hops_all_nodes_match_bfs() {
    check_exact(2, "all".into(), "2");
}

#[test]
fn cora_three_hops_train_nodes_match_bfs() {
    check_exact(3, vec!["train"].into(), "1");
}
