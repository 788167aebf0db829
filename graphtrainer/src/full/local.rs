//! A worker's part of the graph as every layer reads it: input rows `[own nodes | halo |
//! virtual]`, output rows the own nodes, one edge per in-edge of an own node (a split hub's
//! one per piece, from its virtual row: `crate::full::hubs`; none for GAT's and GINE's, whose
//! pieces run the layer: `crate::full::pieces`). Full-graph training reads
//! every in-edge at every layer, so one [`LayerEdges`] serves all layers; it is built once and
//! kept on the device ([`LocalGraph::tensors`]).
//!
//! The coefficients are those of a record batch over the same edges (`LayerEdges::new`): GCN's
//! `1 / sqrt((d_dst + 1)(d_src + 1))` from the whole graph's in-degrees (a halo row's comes
//! from its owner), the mean's `1 / d_dst`. A node's in-edges keep round 0's order, which does
//! not depend on the cluster's shape. On a typed graph the edges are also split by relation
//! (each relation's mean over its own in-edges, its edge features at its own width) and the
//! own rows grouped by type, as in a typed record batch; only the target type's labels are
//! kept.

use std::ops::Range;

use burn::prelude::Device;
use gnn::LayerEdges;
use gnn::aggregate::EdgeTensors;
use gnn::batch::LayerRelations;
use gnn::hetero::TypeGroups;
use gnn::kernel::Aggregation;
use sampling::NodeStore;
use schemas::Split;
use schemas::label::Label;
use schemas::typed::GraphTypes;

use crate::full::halo::Halo;
use crate::full::hubs::{self, Hubs};

/// See the module doc.
pub struct LocalGraph {
    /// Each input row's node id (own rows by slot, then the halo's): dropout is keyed by it.
    pub ids: Vec<i64>,
    pub edges: LayerEdges,
    /// Each edge's (destination id, place among its in-edges): GAT's attention dropout key.
    pub edge_keys: Vec<(i64, u32)>,
    pub labels: Vec<Option<Label>>,
    pub splits: Vec<Option<Split>>,
}

impl LocalGraph {
    /// `sources`: each in-edge's input row, as [`Halo::plan`] gave them (none for a split
    /// hub, whose in-edges are its runs' virtual rows, `hubs`); `edge_dim`: the edge feature
    /// width the model reads (0: none; the node store's features are then not read);
    /// `threads`: the aggregation kernel's.
    pub fn new(
        nodes: &NodeStore,
        (halo, hubs): (&Halo, &Hubs),
        sources: Vec<i64>,
        (edge_dim, attention, threads): (usize, bool, usize),
        types: Option<&GraphTypes>,
    ) -> Self {
        let own = nodes.len();
        let first_virtual = own + halo.len();
        let mut lists = InEdgeLists::new(sources.len(), edge_dim, types);
        let mut sources = sources.into_iter();
        for slot in 0..own {
            let count = match hubs.is_hub(slot) {
                // Pieces that run the layer: the hub's in-edges are all theirs.
                true if hubs.layered() => 0,
                true => lists.push_hub(nodes, hubs, slot, first_virtual),
                false => lists.push_sampled(nodes, slot, &mut sources),
            };
            lists.dst.extend(std::iter::repeat_n(slot as i64, count));
            lists.edge_keys.extend((0..count as u32).map(|j| (nodes.ids[slot], j)));
        }
        let InEdgeLists { src, dst, relations, edge_keys, features, relation_features, .. } = lists;
        let degree: Vec<f32> = nodes.in_degree.iter().map(|&d| d as f32).chain(halo.degrees.iter().copied()).collect();
        let rows_in = first_virtual + hubs.virtual_rows();
        let degree: Vec<f32> = degree.into_iter().chain(std::iter::repeat_n(0.0, hubs.virtual_rows())).collect();
        let mut edges =
            LayerEdges { edge_dim, features, threads, attention, ..LayerEdges::new(rows_in, own, src, dst, &degree) };
        unit_virtual_edges(&mut edges, first_virtual);
        let mut labels = nodes.labels.clone();
        if let Some(types) = types {
            // Each relation's in-edges over the same rows, each relation's mean over its own.
            let own_types = &nodes.types[..own];
            let mut split = LayerRelations::split(&edges, &relations, types, &relation_features, own_types);
            split.relations.iter_mut().for_each(|r| unit_virtual_edges(r, first_virtual));
            edges.typed = Some(Box::new(split));
            // Only the target type's nodes carry the loss and the scores.
            labels.iter_mut().zip(own_types).filter(|(_, t)| **t != types.target).for_each(|(l, _)| *l = None);
        }
        let ids = nodes.ids.iter().chain(&halo.ids).copied().collect();
        LocalGraph { ids, edges, edge_keys, labels, splits: nodes.splits.clone() }
    }

    /// Rows this worker computes (its own nodes).
    pub fn own(&self) -> usize {
        self.edges.rows_out
    }

    /// The edges on `device`, with the kernel's plans when it runs them.
    pub fn tensors(&self, device: &Device, aggregation: Aggregation) -> EdgeTensors {
        EdgeTensors::new(&self.edges, device, aggregation)
    }

    /// The labels of the own rows in `split` (`None` elsewhere), as the loss and the scores
    /// read them.
    pub fn labels_in(&self, split: Split) -> Vec<Option<Label>> {
        self.labels.iter().zip(&self.splits).map(|(l, s)| if *s == Some(split) { l.clone() } else { None }).collect()
    }
}

/// A worker's in-edges as [`LocalGraph::new`] lists them, destination by destination: each
/// one's source row, destination, key, features (`edge_dim` each), and on a typed graph its
/// relation and its features at its relation's width (`relation_widths`, empty when no
/// relation has features). Every list stays aligned with `src`.
struct InEdgeLists {
    src: Vec<i64>,
    dst: Vec<i64>,
    relations: Vec<u8>,
    edge_keys: Vec<(i64, u32)>,
    features: Vec<f32>,
    relation_features: Vec<f32>,
    edge_dim: usize,
    typed: bool,
    relation_widths: Vec<usize>,
}

impl InEdgeLists {
    /// Empty lists with room for `edges` in-edges.
    fn new(edges: usize, edge_dim: usize, types: Option<&GraphTypes>) -> Self {
        let src = Vec::with_capacity(edges);
        let dst = Vec::with_capacity(src.capacity());
        let relations = Vec::with_capacity(if types.is_some() { src.capacity() } else { 0 });
        let edge_keys = Vec::with_capacity(src.capacity());
        let features = Vec::with_capacity(if edge_dim > 0 { src.capacity() * edge_dim } else { 0 });
        let relation_widths = types.filter(|t| t.has_edge_features()).map(|t| t.relations.iter().map(|r| r.edge_dim));
        let relation_widths: Vec<usize> = relation_widths.map_or_else(Vec::new, Iterator::collect);
        let typed = types.is_some();
        let relation_features = Vec::new();
        InEdgeLists { src, dst, relations, edge_keys, features, relation_features, edge_dim, typed, relation_widths }
    }

    /// Lists split hub `slot`'s in-edges: one per piece, from its run's virtual row (rows from
    /// `first_virtual` on), with the piece's features. Returns how many.
    fn push_hub(&mut self, nodes: &NodeStore, hubs: &Hubs, slot: usize, first_virtual: usize) -> usize {
        let rows = hubs.virtual_rows_of(slot);
        self.src.extend(rows.clone().map(|v| (first_virtual + v as usize) as i64));
        let held: Vec<u8> = nodes.sampled(slot).iter().map(|e| e.relation).collect();
        let pieces = hubs.pieces_of(&held);
        let edge_dim = self.edge_dim;
        if edge_dim > 0 {
            push_piece_features(nodes, slot, &pieces, |_| edge_dim, &mut self.features);
        }
        if self.typed {
            self.relations.extend(pieces.iter().map(|&(_, _, r)| r));
        }
        if !self.relation_widths.is_empty() {
            let width = |r: u8| self.relation_widths[usize::from(r)];
            push_piece_features(nodes, slot, &pieces, width, &mut self.relation_features);
        }
        rows.len()
    }

    /// Lists node `slot`'s sampled in-edges, their source rows the next of `sources`.
    /// Returns how many.
    fn push_sampled(&mut self, nodes: &NodeStore, slot: usize, sources: &mut impl Iterator<Item = i64>) -> usize {
        let count = nodes.sampled(slot).len();
        self.src.extend(sources.by_ref().take(count));
        if self.edge_dim > 0 {
            self.features.extend_from_slice(nodes.sampled_features(slot));
        }
        if self.typed {
            self.relations.extend(nodes.sampled(slot).iter().map(|e| e.relation));
        }
        if !self.relation_widths.is_empty() {
            push_relation_rows(nodes, slot, &self.relation_widths, &mut self.relation_features);
        }
        count
    }
}

/// Gives the virtual in-edges of `edges` (from input rows `first_virtual..`) coefficient 1: a
/// virtual row is its piece's partial, already weighed edge by edge.
fn unit_virtual_edges(edges: &mut LayerEdges, first_virtual: usize) {
    for (e, _) in edges.src.iter().enumerate().filter(|(_, s)| **s as usize >= first_virtual) {
        (edges.gcn_coef[e], edges.mean_coef[e]) = (1.0, 1.0);
    }
}

/// Appends a split hub's virtual in-edges' features (`pieces`, [`Hubs::pieces_of`]): each the
/// sum of its piece's edges' features, cut to `width(relation)`, times the mean's coefficient
/// (one over the hub's in-edges of that relation; the virtual edge's is 1), so the layer's mean
/// of them is the hub's.
fn push_piece_features(
    nodes: &NodeStore,
    slot: usize,
    pieces: &[(usize, Range<usize>, u8)],
    width: impl Fn(u8) -> usize,
    out: &mut Vec<f32>,
) {
    let edges = nodes.sampled(slot);
    let counts = hubs::counts(&edges.iter().map(|e| e.relation).collect::<Vec<_>>());
    let rows: Vec<&[f32]> = nodes.sampled_features(slot).chunks(nodes.edge_dim.max(1)).collect();
    for (_, run, relation) in pieces {
        let (width, count) = (width(*relation), counts[usize::from(*relation)]);
        let mut sum = vec![0.0f32; width];
        for (edge, row) in edges[run.clone()].iter().zip(&rows[run.clone()]) {
            if edge.relation == *relation {
                sum.iter_mut().zip(&row[..width]).for_each(|(s, v)| *s += v / count as f32);
            }
        }
        out.extend(sum);
    }
}

/// Appends the features of `slot`'s in-edges as a typed layer reads them: each edge's row
/// (padded to the widest relation's in the store) cut to its relation's width, `widths[r]`
/// (0: a relation whose features the model leaves out).
fn push_relation_rows(nodes: &NodeStore, slot: usize, widths: &[usize], out: &mut Vec<f32>) {
    let rows = nodes.sampled_features(slot).chunks(nodes.edge_dim.max(1));
    for (edge, row) in nodes.sampled(slot).iter().zip(rows) {
        out.extend_from_slice(&row[..widths[usize::from(edge.relation)]]);
    }
}

/// A typed graph's own rows' features by node type (each type its width), as the per-type
/// input projection reads them: it runs before layer 0 at each node's owner only, and its
/// rows cross to their readers as layer 0's input (no worker holds another's features).
pub struct TypedFeatures {
    /// The own rows by type.
    pub groups: TypeGroups,
    /// Per type, its own rows' features, row-major in `groups`' order.
    pub rows: Vec<Vec<f32>>,
    pub widths: Vec<usize>,
}

impl TypedFeatures {
    /// `nodes`' features, row-normalized when `normalize`.
    pub fn new(nodes: &NodeStore, types: &GraphTypes, normalize: bool) -> Self {
        let own_types = &nodes.types[..nodes.len()];
        let groups = TypeGroups::new(own_types, types.node_types.len());
        let rows = groups
            .rows
            .iter()
            .map(|slots| {
                let mut values = Vec::new();
                slots.iter().for_each(|&s| gnn::features::push_row(nodes.features(s as usize), normalize, &mut values));
                values
            })
            .collect();
        TypedFeatures { groups, rows, widths: types.node_types.iter().map(|t| t.width).collect() }
    }
}
