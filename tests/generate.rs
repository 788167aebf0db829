//! `graphflat generate`: deterministic by seed, real hubs, planted communities, and features in
//! which the graph carries signal: a nearest-centroid classifier does clearly better on features
//! averaged over each node's in-neighbors (what one GNN layer does) than on a node's own
//! features (what an MLP sees).

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;

fn table_bytes(dir: &Path) -> Vec<Vec<u8>> {
    parquet_files(dir).iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn same_seed_same_graph_other_seed_other_graph() {
    let dir = scratch("generate-seed");
    for (name, seed) in [("a", 3), ("b", 3), ("c", 4)] {
        generate(&dir.join(name), 3000, 5, 4, seed);
    }
    for table in ["nodes", "edges"] {
        assert_eq!(table_bytes(&dir.join("a").join(table)), table_bytes(&dir.join("b").join(table)), "{table}");
        assert_ne!(table_bytes(&dir.join("a").join(table)), table_bytes(&dir.join("c").join(table)), "{table}");
    }
}

/// Accuracy of classifying `vectors` by the nearest class centroid, centroids fitted on the
/// train nodes and scored on the others.
fn nearest_centroid(
    vectors: &BTreeMap<i64, Vec<f32>>,
    labels: &BTreeMap<i64, Option<i64>>,
    train: &dyn Fn(i64) -> bool,
) -> f64 {
    let dim = vectors.values().next().unwrap().len();
    let mut sums: BTreeMap<i64, (Vec<f64>, f64)> = BTreeMap::new();
    for (&v, x) in vectors.iter().filter(|(v, _)| train(**v)) {
        let entry = sums.entry(labels[&v].unwrap()).or_insert((vec![0.0; dim], 0.0));
        entry.0.iter_mut().zip(x).for_each(|(s, &x)| *s += f64::from(x));
        entry.1 += 1.0;
    }
    let centroids: Vec<(i64, Vec<f64>)> =
        sums.into_iter().map(|(c, (s, n))| (c, s.iter().map(|s| s / n).collect())).collect();
    let (mut right, mut total) = (0.0, 0.0);
    for (&v, x) in vectors.iter().filter(|(v, _)| !train(**v)) {
        let distance = |c: &Vec<f64>| c.iter().zip(x).map(|(c, &x)| (c - f64::from(x)).powi(2)).sum::<f64>();
        let best = centroids.iter().min_by(|a, b| distance(&a.1).total_cmp(&distance(&b.1))).unwrap().0;
        right += f64::from(u8::from(best == labels[&v].unwrap()));
        total += 1.0;
    }
    right / total
}

#[test]
fn hubs_communities_and_signal() {
    let dir = scratch("generate-signal");
    let nodes = 20_000u64;
    generate(&dir, nodes, 10, 16, 7);
    let graph = read_graph(&dir);
    assert_eq!(graph.features.len() as u64, nodes);
    assert_eq!(graph.edges.len() as u64, nodes * 10);

    // A real hub: the largest in-degree is at least 1% of the nodes.
    let mut in_degree: BTreeMap<i64, u64> = BTreeMap::new();
    for &(_, d, _) in &graph.edges {
        *in_degree.entry(d).or_default() += 1;
    }
    let max = *in_degree.values().max().unwrap();
    assert!(max * 100 >= nodes, "largest in-degree {max}");

    // Planted communities: most edges join nodes of the same label (homophily 0.8 plus chance).
    let same = graph.edges.iter().filter(|(s, d, _)| graph.labels[s] == graph.labels[d]).count();
    let homophily = same as f64 / graph.edges.len() as f64;
    assert!((0.75..0.9).contains(&homophily), "homophily {homophily}");

    // Own features vs the mean of own and in-neighbors' features.
    let mut sums: BTreeMap<i64, (Vec<f32>, f32)> = graph.features.iter().map(|(&v, x)| (v, (x.clone(), 1.0))).collect();
    for &(s, d, _) in &graph.edges {
        let x = graph.features[&s].clone();
        let entry = sums.get_mut(&d).unwrap();
        entry.0.iter_mut().zip(&x).for_each(|(a, b)| *a += b);
        entry.1 += 1.0;
    }
    let averaged: BTreeMap<i64, Vec<f32>> =
        sums.into_iter().map(|(v, (s, n))| (v, s.iter().map(|x| x / n).collect())).collect();
    let train = |v: i64| v % 2 == 0; // labels do not follow id order
    let own = nearest_centroid(&graph.features, &graph.labels, &train);
    let neighborhood = nearest_centroid(&averaged, &graph.labels, &train);
    let chance = 1.0 / 8.0;
    assert!(own > chance + 0.1, "own features carry too little signal: {own}");
    eprintln!("nearest centroid: own features {own:.3}, with in-neighbors {neighborhood:.3}, chance {chance:.3}");
    assert!(neighborhood > own + 0.1, "the graph adds too little: own {own}, neighborhood {neighborhood}");
}
