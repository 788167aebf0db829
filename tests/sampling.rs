//! Sampling, end to end: every layer's fanout holds for every node of every record, edges serve
//! only the layers that compute their destination, and `topk` keeps exactly the heaviest.
//! (The statistical tests of the samplers' rates live with the samplers, in
//! graphflat/src/sample.rs.)

use std::collections::HashMap;

use crate::common::*;

/// For each record: node at hop d is computed by layers 1..=k-d; for each such layer l it has
/// exactly min(fanout of l, in-degree) in-edges marked for l, and none for other layers.
fn check_fanouts(fanouts: &[u32], sampler: &str) {
    let k = fanouts.len();
    let dir = scratch(&format!("fanouts-{sampler}-{k}"));
    let data = dir.join("graph");
    generate(&data, 1500, 6, 2, 3);
    let settings = |job: Job| {
        let job = job.key("hops", k as i64).key("fanouts", fanouts.to_vec()).key("sampler", sampler);
        job.key("targets", vec!["train"])
    };
    let out = flatten(&dir, &data, "flat", &["--workers", "2"], settings);
    let records = read_records(&out);
    assert!(records.len() > 500);
    let mut hub_checked = false;
    for r in &records {
        let mut per_layer: HashMap<(i32, usize), u32> = HashMap::new();
        for (i, &dst) in r.edge_dst.iter().enumerate() {
            let mask = r.edge_layers[i];
            assert_ne!(mask, 0, "root {}: an edge serving no layer", r.root);
            for l in 1..=32usize {
                if mask & (1 << (l - 1)) != 0 {
                    assert!(
                        l <= k - r.hops[dst as usize] as usize,
                        "root {}: edge marked for a layer its node skips",
                        r.root
                    );
                    *per_layer.entry((dst, l)).or_default() += 1;
                }
            }
        }
        for (i, &hop) in r.hops.iter().enumerate() {
            for l in 1..=(k - hop as usize) {
                let fanout = fanouts[k - l] as i64;
                let expected = fanout.min(r.in_degrees[i]) as u32;
                let got = per_layer.get(&(i as i32, l)).copied().unwrap_or(0);
                assert_eq!(got, expected, "root {} node {} (hop {hop}) layer {l}", r.root, r.node_ids[i]);
                hub_checked |= r.in_degrees[i] > 100;
            }
        }
    }
    assert!(hub_checked, "no hub was sampled; the test graph should have hubs");
}

#[test]
fn uniform_fanouts_hold_per_layer() {
    check_fanouts(&[5, 2], "uniform");
}

#[test]
fn weighted_fanouts_hold_per_layer_with_three_hops() {
    check_fanouts(&[2, 4, 3], "weighted");
}

#[test]
fn topk_keeps_exactly_the_heaviest_in_edges() {
    let dir = scratch("topk");
    let data = dir.join("graph");
    generate(&data, 1000, 8, 2, 9);
    let settings =
        |job: Job| job.key("hops", 1).key("fanouts", vec![6]).key("sampler", "topk").key("hub_threshold", 10);
    let out = flatten(&dir, &data, "flat", &["--workers", "2"], settings);
    let graph = read_graph(&data);
    let mut in_weights: HashMap<i64, Vec<(i64, f32)>> = HashMap::new();
    for &(s, d, w) in &graph.edges {
        in_weights.entry(d).or_default().push((s, w));
    }
    for r in read_records(&out) {
        let mut heaviest = in_weights.remove(&r.root).unwrap_or_default();
        heaviest.sort_by(|a, b| b.1.total_cmp(&a.1));
        heaviest.truncate(6);
        let mut expected: Vec<(i64, u32)> = heaviest.iter().map(|&(s, w)| (s, w.to_bits())).collect();
        expected.sort();
        let got: Vec<(i64, u32)> = global_edges(&r).iter().map(|&(s, _, w, _)| (s, w)).collect();
        assert_eq!(got, expected, "root {}", r.root);
    }
}

/// Every in-edge of a hub whose in-degree squared is past any memory: its record holds them all
/// (a record once reserved room for its root's in-degree times the nodes it asked for).
#[test]
fn every_in_edge_of_a_hub_fits_in_its_record() {
    let dir = scratch("sampling-hub-all");
    let data = dir.join("graph");
    let n = 70_000i64;
    generate(&data, n as u64, 1, 2, 9);
    std::fs::remove_dir_all(data.join("edges")).unwrap();
    std::fs::create_dir_all(data.join("edges")).unwrap();
    let mut edges: Vec<(i64, i64)> = (1..n).map(|u| (u, 0)).collect();
    edges.extend([(0, 1), (2, 1)]);
    write_edges(&data.join("edges/part-0.parquet"), &edges);
    for hops in [1i64, 2] {
        let settings = |job: Job| job.key("hops", hops).key("sampler", "all");
        let out = flatten(&dir, &data, &format!("flat-{hops}"), &["--workers", "2"], settings);
        let records = read_records(&out);
        assert_eq!(records.len() as i64, n);
        let hub = records.iter().find(|r| r.root == 0).unwrap();
        assert_eq!(hub.in_degrees[0], n - 1);
        assert_eq!(hub.edge_dst.iter().filter(|&&d| d == 0).count() as i64, n - 1, "{hops} hops");
    }
    // Node 1's record reaches the hub at hop 1: with 2 hops it holds the hub's every in-edge.
    let records = read_records(&dir.join("flat-2"));
    let r = records.iter().find(|r| r.root == 1).unwrap();
    assert_eq!(r.num_edges() as i64, 2 + (n - 1), "node 1's in-edges and the hub's");
}
