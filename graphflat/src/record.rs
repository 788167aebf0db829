//! A flattened record assembled from the pieces the rounds gather. The record itself, and its
//! Arrow layout, are the contract in `schemas::record`.

use cluster::hash::IdMap;

use schemas::{Label, Record, Split};

/// One node of a record as it arrives: its hop, full in-degree and features.
#[derive(Debug, Clone)]
pub struct GatheredNode {
    pub id: i64,
    pub hop: u8,
    pub in_degree: u64,
    pub features: Vec<f32>,
}

/// One edge of a record by global ids: (dst, src, weight, layer mask). Its features, when the
/// edge table has them, travel beside it in one flat array per record (`edge_dim` values per
/// edge, in the edges' order), not in a vector per edge.
pub type GatheredEdge = (i64, i64, f32, u32);

/// Orders the gathered nodes root first, then by (hop, id), and maps edges to local indices
/// sorted by (dst, src, weight, layers, features' bits), each keeping its features
/// (`edge_features`: the same number per edge, aligned with `edges`): the layout depends only
/// on the content.
pub fn assemble(
    root: i64,
    label: Option<Label>,
    split: Option<Split>,
    mut nodes: Vec<GatheredNode>,
    edges: Vec<GatheredEdge>,
    edge_features: Vec<f32>,
) -> Record {
    nodes.sort_by_key(|n| (n.id != root, n.hop, n.id));
    let local: IdMap<i64, i32> = nodes.iter().enumerate().map(|(i, n)| (n.id, i as i32)).collect();
    let dim = edge_features.len().checked_div(edges.len()).unwrap_or(0);
    let features_of = |i: usize| &edge_features[i * dim..(i + 1) * dim];
    let mut local_edges: Vec<(i32, i32, f32, u32, usize)> =
        edges.iter().enumerate().map(|(i, &(dst, src, w, mask))| (local[&dst], local[&src], w, mask, i)).collect();
    local_edges.sort_by(|a, b| {
        (a.0, a.1, a.2.to_bits(), a.3).cmp(&(b.0, b.1, b.2.to_bits(), b.3)).then_with(|| {
            features_of(a.4).iter().map(|v| v.to_bits()).cmp(features_of(b.4).iter().map(|v| v.to_bits()))
        })
    });
    let mut sorted_features = Vec::with_capacity(edge_features.len());
    local_edges.iter().for_each(|e| sorted_features.extend_from_slice(features_of(e.4)));
    // Whole-slice copies: a flat_map over the values copies them one at a time.
    let mut features = Vec::with_capacity(nodes.iter().map(|n| n.features.len()).sum());
    nodes.iter().for_each(|n| features.extend_from_slice(&n.features));
    Record {
        root,
        label,
        split,
        node_ids: nodes.iter().map(|n| n.id).collect(),
        hops: nodes.iter().map(|n| n.hop).collect(),
        in_degrees: nodes.iter().map(|n| n.in_degree as i64).collect(),
        features,
        edge_src: local_edges.iter().map(|e| e.1).collect(),
        edge_dst: local_edges.iter().map(|e| e.0).collect(),
        edge_weights: local_edges.iter().map(|e| e.2).collect(),
        edge_layers: local_edges.iter().map(|e| e.3).collect(),
        edge_features: sorted_features,
    }
}
