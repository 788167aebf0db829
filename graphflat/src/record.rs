//! A flattened record assembled from the pieces the rounds gather: straight into a batch's
//! columns for node records ([`AssembledColumns`], on the worker, as each batch completes), or
//! as a [`Record`] for a link record's endpoints. The record itself, and its Arrow layout, are the contract in
//! `schemas::record`.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, SchemaRef};
use cluster::hash::IdMap;
use sampling::NodeStore;
use schemas::record::RecordColumns;
use schemas::{Label, Record, Split, typed};

use crate::sink::{Columns, Row};

/// One node of a record as it arrives: its hop, full in-degree and where its features (and,
/// in a graph keyed by strings, its original string) are: in the record's block `block`, at
/// `features` (and `key`).
#[derive(Debug, Clone)]
pub struct GatheredNode {
    pub id: i64,
    pub hop: u8,
    pub in_degree: u64,
    pub block: u32,
    pub features: Range<usize>,
    pub key: Range<usize>,
}

/// The buffers of one container of replies, shared by every record it answered: the nodes'
/// features and their original strings (empty for integer ids).
#[derive(Debug, Clone, Default)]
pub struct Block {
    pub features: Arc<Vec<f32>>,
    pub keys: Arc<String>,
}

/// One edge of a record by global ids: (dst, src, weight, layer mask, relation). Its features,
/// when the edge table has them, travel beside it in one flat array per record (`edge_dim`
/// values per edge, in the edges' order), not in a vector per edge.
pub type GatheredEdge = (i64, i64, f32, u32, u8);

/// What the rounds gather for one record: its root's label and split, its nodes (features in
/// `blocks`, at each node's block and range) and its edges (`edge_features`: the same number
/// per edge, aligned with `edges`). A block is the feature buffer of one container of replies,
/// shared by every record it answered (`crate::round`): a node's features are copied once,
/// from the reply into the batch's columns, and a record never grows a buffer of its own for
/// them.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    pub root: i64,
    pub label: Option<Label>,
    pub split: Option<Split>,
    pub nodes: Vec<GatheredNode>,
    pub blocks: Vec<Block>,
    pub edges: Vec<GatheredEdge>,
    pub edge_features: Vec<f32>,
    /// With `root_neighbors`: the root's every in-neighbor, in sampling-key order.
    pub root_neighbors: Vec<i64>,
}

/// [`assemble_into`]'s working memory, kept between records: its maps and lists would otherwise
/// be allocated and freed once per record (a 1M-node job assembles a million).
#[derive(Debug, Clone, Default)]
pub struct Scratch {
    local: IdMap<i64, i32>,
    local_edges: Vec<(i32, i32, f32, u32, usize, u8)>,
}

/// Where an assembled record goes, node by node and edge by edge: a batch's columns
/// ([`RecordColumns`]) or a [`Record`] of its own (`RecordBuilder`).
pub trait RecordSink {
    fn start(&mut self, root: i64, label: Option<Label>, split: Option<Split>);
    /// A node, root first, then by (hop, id); a typed record's nodes carry their type.
    fn node(&mut self, id: i64, hop: u8, in_degree: i64, features: &[f32], node_type: Option<u8>);
    /// The original string of the node just added (a graph keyed by strings).
    fn key(&mut self, key: &str);
    /// An edge by local indices, in the record's edge order; a typed record's carry their
    /// relation.
    fn edge(&mut self, src: i32, dst: i32, weight: f32, layers: u32, features: &[f32], relation: Option<u8>);
    /// The root's every in-neighbor, after the edges (records with `root_neighbors`).
    fn root_neighbors(&mut self, ids: &[i64]);
}

impl RecordSink for RecordColumns {
    fn start(&mut self, root: i64, label: Option<Label>, split: Option<Split>) {
        RecordColumns::start(self, root, label, split);
    }

    fn node(&mut self, id: i64, hop: u8, in_degree: i64, features: &[f32], node_type: Option<u8>) {
        RecordColumns::node(self, id, hop, in_degree, features, node_type);
    }

    fn key(&mut self, key: &str) {
        RecordColumns::key(self, key);
    }

    fn edge(&mut self, src: i32, dst: i32, weight: f32, layers: u32, features: &[f32], relation: Option<u8>) {
        RecordColumns::edge(self, src, dst, weight, layers, features, relation);
    }

    fn root_neighbors(&mut self, ids: &[i64]) {
        RecordColumns::root_neighbors(self, ids);
    }
}

/// One [`Record`] built by [`assemble_into`].
#[derive(Debug, Default)]
struct RecordBuilder {
    record: Record,
    /// Whether edges record where their features start (a typed graph with edge features).
    edge_feature_at: bool,
}

impl RecordSink for RecordBuilder {
    fn start(&mut self, root: i64, label: Option<Label>, split: Option<Split>) {
        self.record = Record { root, label, split, ..Record::default() };
        if self.edge_feature_at {
            self.record.edge_feature_at.push(0);
        }
    }

    fn node(&mut self, id: i64, hop: u8, in_degree: i64, features: &[f32], node_type: Option<u8>) {
        let r = &mut self.record;
        r.node_ids.push(id);
        r.hops.push(hop);
        r.in_degrees.push(in_degree);
        r.features.extend_from_slice(features);
        if let Some(t) = node_type {
            r.node_types.push(t);
            if r.feature_at.is_empty() {
                r.feature_at.push(0);
            }
            r.feature_at.push(r.features.len() as u32);
        }
    }

    fn key(&mut self, key: &str) {
        self.record.node_keys.push(key.to_owned());
    }

    fn edge(&mut self, src: i32, dst: i32, weight: f32, layers: u32, features: &[f32], relation: Option<u8>) {
        let r = &mut self.record;
        r.edge_src.push(src);
        r.edge_dst.push(dst);
        r.edge_weights.push(weight);
        r.edge_layers.push(layers);
        r.edge_features.extend_from_slice(features);
        if let Some(relation) = relation {
            r.edge_relations.push(relation);
        }
        if self.edge_feature_at {
            r.edge_feature_at.push(r.edge_features.len() as u32);
        }
    }

    fn root_neighbors(&mut self, ids: &[i64]) {
        self.record.root_neighbors = ids.to_vec();
    }
}

/// The record of `gathered`, as [`assemble_into`] lays it out.
pub fn assemble(gathered: Gathered, typed: Option<&[usize]>, scratch: &mut Scratch) -> Record {
    let edge_feature_at = typed.is_some_and(|widths| widths.iter().any(|&w| w > 0));
    let mut builder = RecordBuilder { edge_feature_at, ..RecordBuilder::default() };
    assemble_into(gathered, typed, scratch, &mut builder);
    builder.record
}

/// Orders the gathered nodes root first, then by (hop, id), and maps edges to local indices
/// sorted by (dst, src, relation, weight, layers, features' bits), each keeping its features:
/// the layout depends only on the content. In a `typed` graph (`Some` of each relation's edge
/// feature width) the ids are typed keys (`schemas::typed`): nodes are ordered by (hop, key),
/// and the record holds each node's plain id and type, each edge's relation, each node's
/// features at its type's width and each edge's at its relation's (the gathered ones are
/// padded to the widest).
pub fn assemble_into(gathered: Gathered, typed: Option<&[usize]>, scratch: &mut Scratch, out: &mut impl RecordSink) {
    let Gathered { root, label, split, mut nodes, blocks, edges, edge_features, root_neighbors } = gathered;
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
    let plain = |id: i64| if typed.is_some() { typed::unpack(id).1 } else { id };
    out.start(plain(root), label, split);
    for n in &nodes {
        let node_type = typed.map(|_| typed::unpack(n.id).0);
        let block = &blocks[n.block as usize];
        out.node(plain(n.id), n.hop, n.in_degree as i64, &block.features[n.features.clone()], node_type);
        if !n.key.is_empty() {
            out.key(&block.keys[n.key.clone()]);
        }
    }
    // A typed graph with edge features keeps each edge's relation's width of them.
    let widths = typed.filter(|widths| widths.iter().any(|&w| w > 0));
    for &(dst, src, weight, layers, i, relation) in local_edges.iter() {
        let features = features_of(i);
        let features = widths.map_or(features, |w| &features[..w[usize::from(relation)]]);
        out.edge(src, dst, weight, layers, features, typed.map(|_| relation));
    }
    out.root_neighbors(&root_neighbors);
}

/// A lane's columns for records the rounds gathered: each is assembled straight into them, so
/// no [`Record`] is built between the rounds and the Arrow batch.
#[derive(Debug, Clone, Default)]
pub struct AssembledColumns {
    columns: RecordColumns,
    scratch: Scratch,
    /// A typed graph's edge feature width for each relation.
    typed: Option<Arc<[usize]>>,
}

impl AssembledColumns {
    /// Columns for the records of `nodes`' graph.
    pub fn of(nodes: &NodeStore) -> Self {
        AssembledColumns { typed: edge_widths(nodes).map(Arc::from), ..AssembledColumns::default() }
    }
}

/// A typed graph's edge feature width for each relation, as [`assemble_into`] takes them
/// (`None` for a homogeneous graph).
pub fn edge_widths(nodes: &NodeStore) -> Option<Vec<usize>> {
    nodes.is_typed().then(|| nodes.relation_edges.dims.clone())
}

impl Columns<Gathered> for AssembledColumns {
    fn push(&mut self, row: Gathered) -> usize {
        let before = self.columns.bytes();
        assemble_into(row, self.typed.as_deref(), &mut self.scratch, &mut self.columns);
        self.columns.bytes() - before
    }

    fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    fn take_batch(&mut self, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
        self.columns.take_batch(schema)
    }

    fn recycle(&mut self, written: RecordBatch) {
        self.columns.recycle(written);
    }
}

impl Row for Gathered {
    type Columns = AssembledColumns;

    fn sizes(&self) -> (u64, u64) {
        (self.nodes.len() as u64, self.edges.len() as u64)
    }

    fn sort(rows: &mut [Self]) {
        rows.sort_by_cached_key(|r| r.root);
    }

    fn split(&self) -> Option<Split> {
        self.split
    }
}
