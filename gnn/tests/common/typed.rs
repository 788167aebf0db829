//! A small random typed graph and its records, for the typed models' tests: three node types
//! of their own widths (ids repeat across types), four relations (two with edge features of
//! their own widths), a hub, and each target node's 2-hop record with every in-edge, built by a
//! plain BFS.

use std::collections::{BTreeMap, VecDeque};

use schemas::model::{ModelKind, ModelSpec};
use schemas::typed::{GraphTypes, NodeType, Relation};
use schemas::{Label, Record};

/// A typed node: (type, id).
pub type Node = (u8, i64);

/// Types a (target, 12 nodes, 4 wide), b (8, 3 wide), c (5, 2 wide); relations 0: b -> a
/// (3 edge features), 1: a -> a, 2: c -> b (2 edge features), 3: a -> b.
pub fn types() -> GraphTypes {
    let node_type = NodeType::new;
    let relation = |name: &str, src, dst, edge_dim| Relation { edge_dim, ..Relation::new(name, src, dst) };
    GraphTypes {
        node_types: vec![node_type("a", 4), node_type("b", 3), node_type("c", 2)],
        relations: vec![
            relation("ba", 1, 0, 3),
            relation("aa", 0, 0, 0),
            relation("cb", 2, 1, 2),
            relation("ab", 0, 1, 0),
        ],
        target: 0,
    }
}

pub const COUNTS: [i64; 3] = [12, 8, 5];

pub struct TypedGraph {
    /// (src, dst, relation).
    pub edges: Vec<(Node, Node, u8)>,
    /// Each edge's features, at its relation's width.
    pub edge_features: Vec<Vec<f32>>,
    pub features: BTreeMap<Node, Vec<f32>>,
}

pub fn typed_graph() -> TypedGraph {
    let types = types();
    let mut s = gnn::rng::Stream::new(&[7]);
    let mut features = BTreeMap::new();
    for (t, &n) in COUNTS.iter().enumerate() {
        for id in 0..n {
            let x = (0..types.width(t as u8)).map(|_| 2.0 * s.unit() - 1.0).collect();
            features.insert((t as u8, id), x);
        }
    }
    let mut edges = Vec::new();
    for (r, rel) in types.relations.iter().enumerate() {
        let (ns, nd) = (COUNTS[usize::from(rel.src)] as u64, COUNTS[usize::from(rel.dst)] as u64);
        for _ in 0..20 {
            let (u, w) = ((s.next_u64() % ns) as i64, (s.next_u64() % nd) as i64);
            if rel.src != rel.dst || u != w {
                edges.push(((rel.src, u), (rel.dst, w), r as u8));
            }
        }
    }
    // A hub: every b points to a0 (no other in-edge of a node repeats it: the BFS records
    // keep parallel edges, and so does the full graph below).
    edges.extend((0..COUNTS[1]).map(|u| ((1, u), (0, 0), 0)));
    let edge_features = edges
        .iter()
        .map(|e| (0..types.relations[usize::from(e.2)].edge_dim).map(|_| 2.0 * s.unit() - 1.0).collect())
        .collect();
    TypedGraph { edges, edge_features, features }
}

/// Each target node's 2-hop record with every in-edge, by a plain BFS.
pub fn typed_records(g: &TypedGraph) -> Vec<Record> {
    let k = 2u8;
    let mut in_edges: BTreeMap<Node, Vec<usize>> = BTreeMap::new();
    for (e, &(_, w, _)) in g.edges.iter().enumerate() {
        in_edges.entry(w).or_default().push(e);
    }
    (0..COUNTS[0])
        .map(|id| {
            let root: Node = (0, id);
            let mut dist = BTreeMap::from([(root, 0u8)]);
            let mut queue = VecDeque::from([root]);
            while let Some(v) = queue.pop_front() {
                if dist[&v] == k {
                    continue;
                }
                for &e in in_edges.get(&v).into_iter().flatten() {
                    let u = g.edges[e].0;
                    if !dist.contains_key(&u) {
                        dist.insert(u, dist[&v] + 1);
                        queue.push_back(u);
                    }
                }
            }
            let mut nodes: Vec<Node> = dist.keys().copied().collect();
            nodes.sort_by_key(|v| (*v != root, dist[v], *v));
            let local: BTreeMap<Node, i32> = nodes.iter().enumerate().map(|(i, &v)| (v, i as i32)).collect();
            let kept_at: Vec<usize> =
                (0..g.edges.len()).filter(|&e| dist.get(&g.edges[e].1).is_some_and(|&d| d < k)).collect();
            let kept: Vec<&(Node, Node, u8)> = kept_at.iter().map(|&e| &g.edges[e]).collect();
            let mut edge_feature_at = vec![0u32];
            for &e in &kept_at {
                edge_feature_at.push(edge_feature_at.last().unwrap() + g.edge_features[e].len() as u32);
            }
            let mut feature_at = vec![0u32];
            for v in &nodes {
                feature_at.push(feature_at.last().unwrap() + g.features[v].len() as u32);
            }
            Record {
                root: id,
                node_ids: nodes.iter().map(|v| v.1).collect(),
                label: Some(Label::Class(id % 3)),
                hops: nodes.iter().map(|v| dist[v]).collect(),
                in_degrees: nodes.iter().map(|v| in_edges.get(v).map_or(0, Vec::len) as i64).collect(),
                features: nodes.iter().flat_map(|v| g.features[v].clone()).collect(),
                edge_src: kept.iter().map(|(u, _, _)| local[u]).collect(),
                edge_dst: kept.iter().map(|(_, w, _)| local[w]).collect(),
                edge_weights: vec![1.0; kept.len()],
                edge_layers: kept.iter().map(|(_, w, _)| (1u32 << (k - dist[w])) - 1).collect(),
                node_types: nodes.iter().map(|v| v.0).collect(),
                feature_at,
                edge_relations: kept.iter().map(|(_, _, r)| *r).collect(),
                edge_features: kept_at.iter().flat_map(|&e| g.edge_features[e].clone()).collect(),
                edge_feature_at,
                ..Record::default()
            }
        })
        .collect()
}

/// A typed model of `kind` over [`types`].
pub fn typed_spec(kind: ModelKind, bases: usize) -> ModelSpec {
    ModelSpec { types: Some(types()), bases, input_dim: 0, ..super::spec(kind, 0) }
}

/// Every typed model: R-GCN without and with bases, heterogeneous GraphSAGE.
pub const MODELS: [(ModelKind, usize); 3] = [(ModelKind::Rgcn, 0), (ModelKind::Rgcn, 2), (ModelKind::Sage, 0)];
