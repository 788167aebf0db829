//! A flattened record assembled from the pieces the rounds gather. The record itself, and its
//! Arrow layout, are the contract in `schemas::record`.

use std::ops::Range;

use cluster::hash::IdMap;

use schemas::{Label, Record, Split, typed};

/// One node of a record as it arrives: its hop, full in-degree and where its features are in
/// the record's gathered features.
#[derive(Debug, Clone)]
pub struct GatheredNode {
    pub id: i64,
    pub hop: u8,
    pub in_degree: u64,
    pub features: Range<usize>,
}

/// One edge of a record by global ids: (dst, src, weight, layer mask, relation). Its features,
/// when the edge table has them, travel beside it in one flat array per record (`edge_dim`
/// values per edge, in the edges' order), not in a vector per edge.
pub type GatheredEdge = (i64, i64, f32, u32, u8);

/// What the rounds gather for one record: its root's label and split, its nodes (features in
/// `features`, at each node's range) and its edges (`edge_features`: the same number per edge,
/// aligned with `edges`).
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    pub root: i64,
    pub label: Option<Label>,
    pub split: Option<Split>,
    pub nodes: Vec<GatheredNode>,
    pub features: Vec<f32>,
    pub edges: Vec<GatheredEdge>,
    pub edge_features: Vec<f32>,
}

/// [`assemble`]'s working memory, kept between records: its maps and lists would otherwise be
/// allocated and freed once per record (a 1M-node job assembles a million).
#[derive(Debug, Default)]
pub struct Scratch {
    local: IdMap<i64, i32>,
    local_edges: Vec<(i32, i32, f32, u32, usize, u8)>,
}

/// Orders the gathered nodes root first, then by (hop, id), and maps edges to local indices
/// sorted by (dst, src, relation, weight, layers, features' bits), each keeping its features:
/// the layout depends only on the content. In a `typed` graph (`Some` of each relation's edge feature width) the ids
/// are typed keys (`schemas::typed`): nodes are ordered by (hop, key), and the record holds
/// each node's plain id and type, each edge's relation, each node's features at its type's
/// width and each edge's at its relation's (the gathered ones are padded to the widest).
pub fn assemble(gathered: Gathered, typed: Option<&[usize]>, scratch: &mut Scratch) -> Record {
    let Gathered { root, label, split, mut nodes, features: node_features, edges, edge_features } = gathered;
    // Unstable sorts (no buffer to allocate): ids are distinct, and edges that compare equal
    // are the same values.
    nodes.sort_unstable_by_key(|n| (n.id != root, n.hop, n.id));
    let Scratch { local, local_edges } = scratch;
    local.clear();
    local.extend(nodes.iter().enumerate().map(|(i, n)| (n.id, i as i32)));
    let dim = edge_features.len().checked_div(edges.len()).unwrap_or(0);
    let features_of = |i: usize| &edge_features[i * dim..(i + 1) * dim];
    local_edges.clear();
    local_edges.extend(
        edges
            .iter()
            .enumerate()
            .map(|(i, &(dst, src, w, mask, relation))| (local[&dst], local[&src], w, mask, i, relation)),
    );
    local_edges.sort_unstable_by(|a, b| {
        (a.0, a.1, a.5, a.2.to_bits(), a.3).cmp(&(b.0, b.1, b.5, b.2.to_bits(), b.3)).then_with(|| {
            features_of(a.4).iter().map(|v| v.to_bits()).cmp(features_of(b.4).iter().map(|v| v.to_bits()))
        })
    });
    let mut sorted_features = Vec::with_capacity(edge_features.len());
    let mut edge_feature_at = Vec::new();
    match typed {
        Some(widths) if widths.iter().any(|&w| w > 0) => {
            edge_feature_at.push(0);
            for e in local_edges.iter() {
                sorted_features.extend_from_slice(&features_of(e.4)[..widths[usize::from(e.5)]]);
                edge_feature_at.push(sorted_features.len() as u32);
            }
        }
        _ => local_edges.iter().for_each(|e| sorted_features.extend_from_slice(features_of(e.4))),
    }
    // Whole-slice copies: a flat_map over the values copies them one at a time.
    let mut features = Vec::with_capacity(node_features.len());
    nodes.iter().for_each(|n| features.extend_from_slice(&node_features[n.features.clone()]));
    let (mut node_types, mut feature_at, mut edge_relations) = (Vec::new(), Vec::new(), Vec::new());
    if typed.is_some() {
        node_types = nodes.iter().map(|n| typed::unpack(n.id).0).collect();
        feature_at.push(0);
        nodes.iter().for_each(|n| feature_at.push(feature_at[feature_at.len() - 1] + n.features.len() as u32));
        edge_relations = local_edges.iter().map(|e| e.5).collect();
    }
    let plain = |id: i64| if typed.is_some() { typed::unpack(id).1 } else { id };
    Record {
        root: plain(root),
        label,
        split,
        node_ids: nodes.iter().map(|n| plain(n.id)).collect(),
        hops: nodes.iter().map(|n| n.hop).collect(),
        in_degrees: nodes.iter().map(|n| n.in_degree as i64).collect(),
        features,
        edge_src: local_edges.iter().map(|e| e.1).collect(),
        edge_dst: local_edges.iter().map(|e| e.0).collect(),
        edge_weights: local_edges.iter().map(|e| e.2).collect(),
        edge_layers: local_edges.iter().map(|e| e.3).collect(),
        edge_features: sorted_features,
        node_types,
        feature_at,
        edge_relations,
        edge_feature_at,
    }
}
