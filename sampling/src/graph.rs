//! The part of the graph one worker owns: its nodes (by `cluster::Owners`), their features, label,
//! split, full in-degree and sampled in-edges with the edges' features. Features, sampled
//! in-edges and their features are flat arrays indexed by slot (one allocation each, not one
//! per node: a worker owns millions of nodes).

use cluster::{IdTable, Owners};

mod layout;

use schemas::edge_stats::EdgeStats;
use schemas::ids::{IdKind, StringIds};
use schemas::model::ModelSpec;
use schemas::{Label, LabelKind, Split};

/// The bit of a source slot that marks a source another worker owns; the other 31 bits are
/// its slot there (see [`NodeStore::take_source_slots`]).
pub const ELSEWHERE: u32 = 1 << 31;

/// One in-edge kept by sampling, best key first.
#[derive(Debug, Clone, Copy)]
pub struct InEdge {
    pub src: i64,
    pub weight: f32,
    /// Its relation (0 in a homogeneous graph).
    pub relation: u8,
}

#[derive(Debug, Default)]
pub struct NodeStore {
    pub dim: usize,
    pub label_kind: LabelKind,
    /// Each id's slot: looked up once per edge by sampling's callers, so a table whose
    /// lookups can be prefetched ([`NodeStore::prefetch`]).
    index: IdTable<u32>,
    pub ids: Vec<i64>,
    /// A typed graph's node types (`schemas::typed`): each slot's type; empty for a
    /// homogeneous graph, whose ids are plain.
    pub types: Vec<u8>,
    /// A typed graph: each type's feature width (`dim` is 0 then).
    pub widths: Vec<usize>,
    /// A typed graph: slot `s`'s features are `features[feature_at[s]..feature_at[s + 1]]`.
    feature_at: Vec<usize>,
    pub labels: Vec<Option<Label>>,
    pub splits: Vec<Option<Split>>,
    features: Vec<f32>,
    pub in_degree: Vec<u64>,
    /// Sampled in-edges of every node, by relation, best first within each relation, at most
    /// the relation's largest fanout each:
    /// slot `s` holds `sampled[sampled_at[s]..sampled_at[s + 1]]` (empty until sampling ran).
    sampled_at: Vec<usize>,
    sampled: Vec<InEdge>,
    /// Width of the edge table's features (0: it has none); set with the sampled in-edges.
    pub edge_dim: usize,
    /// `edge_dim` features per sampled in-edge, aligned with `sampled`.
    sampled_features: Vec<f32>,
    /// Each sampled in-edge's source slot, aligned with `sampled`: empty unless sampling was
    /// asked for them (see [`NodeStore::take_source_slots`]).
    source_slots: Vec<u32>,
    /// The whole edge table's feature statistics (`None` without edge features), the same on
    /// every worker.
    pub edge_stats: Option<EdgeStats>,
    /// A typed graph: each relation's edge features (see [`RelationEdges`]).
    pub relation_edges: RelationEdges,
    /// A graph keyed by strings: their internal ids and each slot's original string.
    pub strings: Option<NodeStrings>,
    /// What the node table's precomputed features are, if they are (`[precompute]`'s output:
    /// its parts' schema metadata `schemas::nodes::PRECOMPUTED`).
    pub precomputed: Option<schemas::nodes::Precomputed>,
    /// Which worker owns each node: every message about a node is routed by
    /// [`Owners::key`]. Set by the loader before any node travels.
    pub owners: Owners,
}

/// The original ids of a graph keyed by strings (`schemas::ids`): the collided strings' table,
/// the same on every worker, and each owned node's string by slot, in one flat buffer (a
/// worker owns millions of nodes).
#[derive(Debug, Clone, Default)]
pub struct NodeStrings {
    pub ids: StringIds,
    keys: String,
    /// Slot `s`'s string is `keys[ends[s - 1]..ends[s]]` (from 0 for slot 0).
    ends: Vec<usize>,
}

impl NodeStrings {
    pub fn new(ids: StringIds) -> Self {
        NodeStrings { ids, ..NodeStrings::default() }
    }

    /// Appends the next slot's string.
    pub fn push(&mut self, key: &str) {
        self.keys.push_str(key);
        self.ends.push(self.keys.len());
    }

    pub fn get(&self, slot: usize) -> &str {
        let from = if slot == 0 { 0 } else { self.ends[slot - 1] };
        &self.keys[from..self.ends[slot]]
    }

    /// Asks the cache for where slot `slot`'s string starts and ends.
    fn prefetch(&self, slot: usize) {
        if let Some(end) = self.ends.get(slot.saturating_sub(1)..=slot) {
            end.iter().for_each(cluster::prefetch::read);
        }
    }

    /// Asks the cache for slot `slot`'s string (after [`NodeStrings::prefetch`] brought in
    /// where it starts).
    fn prefetch_key(&self, slot: usize) {
        let from = if slot == 0 { 0 } else { self.ends.get(slot - 1).copied().unwrap_or(0) };
        if let Some(first) = self.keys.as_bytes().get(from) {
            cluster::prefetch::read(first);
        }
    }
}

/// A typed graph's edge features by relation: each relation's width (0: none; a reversed
/// relation has its table's) and its table's statistics, the same on every worker. An edge
/// carries `edge_dim` values (the widest relation's) wherever edges travel within a stage:
/// its relation's own values first, zeros after; records and models see only the relation's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelationEdges {
    pub dims: Vec<usize>,
    pub stats: Vec<Option<EdgeStats>>,
}

impl RelationEdges {
    /// Relation `r`'s width (0 for a homogeneous graph, which has none listed).
    pub fn dim(&self, r: u8) -> usize {
        self.dims.get(usize::from(r)).copied().unwrap_or(0)
    }

    pub fn any(&self) -> bool {
        self.dims.iter().any(|&d| d > 0)
    }
}

impl NodeStore {
    pub fn new(dim: usize, label_kind: LabelKind) -> Self {
        NodeStore { dim, label_kind, ..NodeStore::default() }
    }

    /// A typed graph's store: `widths[t]` features for a node of type `t`.
    pub fn typed(widths: Vec<usize>, label_kind: LabelKind) -> Self {
        NodeStore { widths, feature_at: vec![0], label_kind, ..NodeStore::default() }
    }

    pub fn is_typed(&self) -> bool {
        !self.feature_at.is_empty()
    }

    /// Whether the node table's ids are integers or strings.
    pub fn id_kind(&self) -> IdKind {
        if self.strings.is_some() { IdKind::String } else { IdKind::Int }
    }

    /// Slot `slot`'s original string, in a graph keyed by strings.
    pub fn key(&self, slot: usize) -> Option<&str> {
        self.strings.as_ref().map(|s| s.get(slot))
    }

    /// Adds a node (`node_type` 0 in a homogeneous graph; `id` its key in a typed one);
    /// returns its slot, or the slot that already holds this id.
    pub fn insert(
        &mut self,
        id: i64,
        node_type: u8,
        label: Option<Label>,
        split: Option<Split>,
        features: &[f32],
    ) -> Result<u32, u32> {
        let (&mut slot, new) = self.index.get_or_insert_with(id, || self.ids.len() as u32);
        if !new {
            return Err(slot);
        }
        self.ids.push(id);
        self.labels.push(label);
        self.splits.push(split);
        // Rows of another length are reported by the loader; keep each node's width.
        let width = self.width(node_type);
        if features.len() == width {
            self.features.extend_from_slice(features);
        } else {
            self.features.resize(self.features.len() + width, 0.0);
        }
        if self.is_typed() {
            self.types.push(node_type);
            self.feature_at.push(self.features.len());
        }
        self.in_degree.push(0);
        Ok(slot)
    }

    /// The feature width of a node of `node_type` (`dim` in a homogeneous graph).
    pub fn width(&self, node_type: u8) -> usize {
        if self.is_typed() { self.widths[usize::from(node_type)] } else { self.dim }
    }

    /// Slot `slot`'s type (0 in a homogeneous graph).
    pub fn node_type(&self, slot: usize) -> u8 {
        self.types.get(slot).copied().unwrap_or(0)
    }

    pub fn slot(&self, id: i64) -> Option<usize> {
        self.index.get(id).map(|s| s as usize)
    }

    /// Asks the cache for where [`NodeStore::slot`] will look `id` up (a loop over edges calls
    /// it a few edges ahead).
    pub fn prefetch(&self, id: i64) {
        self.index.prefetch(id);
    }

    /// Asks the cache for the rows of `slot` a reply reads: its features, in-degree and split
    /// and, with `edges`, where its sampled in-edges start (a loop over requests calls it a few
    /// requests ahead).
    pub fn prefetch_row(&self, slot: usize, edges: bool) {
        if let (Some(degree), Some(split)) = (self.in_degree.get(slot), self.splits.get(slot)) {
            cluster::prefetch::read(degree);
            cluster::prefetch::read(split);
        }
        // The row's first lines (the hardware prefetcher follows a wide row) and its last.
        let row = self.features(slot);
        row.iter().step_by(16).take(4).chain(row.last()).for_each(cluster::prefetch::read);
        if edges && let Some(at) = self.sampled_at.get(slot) {
            cluster::prefetch::read(at);
        }
        if let Some(strings) = &self.strings {
            strings.prefetch(slot);
        }
    }

    /// Asks the cache for slot `slot`'s original string in a graph keyed by strings (after
    /// [`NodeStore::prefetch_row`] brought in where it starts).
    pub fn prefetch_key(&self, slot: usize) {
        if let Some(strings) = &self.strings {
            strings.prefetch_key(slot);
        }
    }

    /// Asks the cache for the first sampled in-edge of `slot` (after [`NodeStore::prefetch_row`]
    /// brought in where they start).
    pub fn prefetch_edges(&self, slot: usize) {
        if let Some(edge) = self.sampled_at.get(slot).and_then(|&from| self.sampled.get(from)) {
            cluster::prefetch::read(edge);
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn features(&self, slot: usize) -> &[f32] {
        self.feature_row(&self.features, slot)
    }

    /// Slot `slot`'s row of `features`, laid out as this store's (the array
    /// [`NodeStore::take_features`] gave).
    pub fn feature_row<'a>(&self, features: &'a [f32], slot: usize) -> &'a [f32] {
        if self.is_typed() {
            return &features[self.feature_at[slot]..self.feature_at[slot + 1]];
        }
        &features[slot * self.dim..(slot + 1) * self.dim]
    }

    /// Every node's features, in slot order ([`NodeStore::feature_row`] finds a row), taken
    /// out of the store: a caller that reads them once frees them when done, and
    /// [`NodeStore::features`] is empty after. GraphInfer's first layer is such a caller; its
    /// features are the largest array of the store (128 bytes a node at 32 features).
    pub fn take_features(&mut self) -> Vec<f32> {
        std::mem::take(&mut self.features)
    }

    /// The sampled in-edges of `slot`, best first.
    pub fn sampled(&self, slot: usize) -> &[InEdge] {
        match self.sampled_at.get(slot..slot + 2) {
            Some(&[from, to]) => &self.sampled[from..to],
            _ => &[],
        }
    }

    /// The sampled in-edges of `slot`, one run per relation (ascending), best first in each.
    pub fn sampled_runs(&self, slot: usize) -> impl Iterator<Item = (u8, &[InEdge])> {
        self.sampled(slot).chunk_by(|a, b| a.relation == b.relation).map(|run| (run[0].relation, run))
    }

    /// The features of `slot`'s sampled in-edges, `edge_dim` per edge, aligned with
    /// [`NodeStore::sampled`] (empty without edge features).
    pub fn sampled_features(&self, slot: usize) -> &[f32] {
        match self.sampled_at.get(slot..slot + 2) {
            Some(&[from, to]) => &self.sampled_features[from * self.edge_dim..to * self.edge_dim],
            _ => &[],
        }
    }

    /// Standardizes every sampled in-edge's features in place (`stats` of this width).
    pub fn standardize_edge_features(&mut self, stats: &EdgeStats) {
        let mut out = Vec::with_capacity(self.edge_dim);
        for row in self.sampled_features.chunks_mut(self.edge_dim.max(1)) {
            out.clear();
            stats.push_standardized(row, &mut out);
            row.copy_from_slice(&out);
        }
    }

    /// Standardizes each sampled in-edge's features in place with its relation's statistics
    /// (`stats[r]`, of relation `r`'s width; `None`: left as they are).
    pub fn standardize_relation_edge_features(&mut self, stats: &[Option<EdgeStats>]) {
        let (dim, mut out) = (self.edge_dim, Vec::new());
        for (edge, row) in self.sampled.iter().zip(self.sampled_features.chunks_mut(dim.max(1))) {
            let Some(Some(stats)) = stats.get(usize::from(edge.relation)) else { continue };
            let width = stats.dim();
            out.clear();
            stats.push_standardized(&row[..width], &mut out);
            row[..width].copy_from_slice(&out);
        }
    }

    /// Keeps the sampled in-edges' features as a model with `spec` reads them: none for a
    /// model that reads none, standardized in place for one trained on standardized features
    /// (a typed model's per relation, with `relation_edge_stats`).
    pub fn keep_edge_features_for(&mut self, spec: &ModelSpec) {
        match &spec.types {
            Some(types) if !types.has_edge_features() => self.drop_edge_features(),
            Some(_) if spec.normalize_edge_features => {
                self.standardize_relation_edge_features(&spec.relation_edge_stats)
            }
            Some(_) => {}
            None if spec.edge_dim == 0 => self.drop_edge_features(),
            None => {
                if let Some(stats) = spec.edge_stats.as_ref().filter(|_| spec.normalize_edge_features) {
                    self.standardize_edge_features(stats);
                }
            }
        }
    }

    /// Forgets the sampled in-edges' features (for a model that reads none).
    pub fn drop_edge_features(&mut self) {
        self.edge_dim = 0;
        self.sampled_features = Vec::new();
    }

    /// Sets every node's sampled in-edges: `edges` holds slot 0's, then slot 1's, ...; `at` has
    /// one offset per slot plus the end; `features` holds `edge_dim` values per edge of `edges`,
    /// `sources` one per edge or none.
    pub fn set_sampled(
        &mut self,
        at: Vec<usize>,
        edges: Vec<InEdge>,
        edge_dim: usize,
        features: Vec<f32>,
        sources: Vec<u32>,
    ) {
        debug_assert_eq!(at.len(), self.len() + 1);
        debug_assert_eq!(at.last().copied(), Some(edges.len()));
        debug_assert_eq!(features.len(), edges.len() * edge_dim);
        debug_assert!(sources.is_empty() || sources.len() == edges.len());
        self.sampled_at = at;
        self.sampled = edges;
        self.edge_dim = edge_dim;
        self.sampled_features = features;
        self.source_slots = sources;
    }

    /// Takes the source slots of every sampled in-edge, aligned with the in-edges (slot 0's,
    /// then slot 1's, ...): the source's slot at its owner, with the [`ELSEWHERE`] bit set when
    /// that owner is another worker (its owner is then `owners.of(src)`). Empty unless
    /// sampling was asked for them ([`crate::SampleSpec::source_slots`]), which limits a worker
    /// to 2^31 nodes. The map step resolved every endpoint's slot at its owner already, so each
    /// in-edge brings its source's along, and a caller that reads the sources' rows needs no
    /// lookup by id (a random probe of a table that at 10M nodes is several times the size of
    /// the cache). Taken, not borrowed: the caller turns them into its own array in place.
    pub fn take_source_slots(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.source_slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The taken array holds each slot's row where `features` found it, in a homogeneous
    /// store and in a typed one (rows of different widths), and the store keeps none.
    #[test]
    fn taken_features_keep_each_slots_row() {
        let mut plain = NodeStore::new(2, LabelKind::Class);
        let mut typed = NodeStore::typed(vec![1, 3], LabelKind::Class);
        for id in 0..5i64 {
            let t = (id % 2) as u8;
            let row: Vec<f32> = (0..typed.width(t)).map(|j| (id * 10 + j as i64) as f32).collect();
            typed.insert(id, t, None, None, &row).expect("new id");
            plain.insert(id, 0, None, None, &[id as f32, -(id as f32)]).expect("new id");
        }
        for store in [&mut plain, &mut typed] {
            let rows: Vec<Vec<f32>> = (0..store.len()).map(|s| store.features(s).to_vec()).collect();
            let taken = store.take_features();
            for (s, row) in rows.iter().enumerate() {
                assert_eq!(store.feature_row(&taken, s), row.as_slice(), "slot {s}");
            }
            assert!(store.features.is_empty());
        }
        assert_eq!(typed.feature_row(&[0., 1., 2., 3., 4., 5., 6., 7., 8., 9., 10.], 1), &[1., 2., 3.]);
    }

    /// With an owner map, every per-slot array follows its node into part order (nodes the map
    /// does not name last, each group by id); the index finds each id at its new slot; without
    /// a map, nothing moves.
    #[test]
    fn laid_out_nodes_keep_their_rows_in_part_order() {
        use std::sync::Arc;

        use cluster::{OwnerMap, Owners};

        let parts = Arc::new(OwnerMap::new([(4, 1), (1, 0), (3, 1), (0, 1)], 4));
        let mut typed = NodeStore::typed(vec![1, 3], LabelKind::Class);
        typed.strings = Some(NodeStrings::new(StringIds::default()));
        for id in [3i64, 2, 4, 0, 1] {
            let t = (id % 2) as u8;
            let row: Vec<f32> = (0..typed.width(t)).map(|j| (id * 10 + j as i64) as f32).collect();
            let split = (id == 4).then_some(Split::Test);
            typed.insert(id, t, Some(Label::Class(id)), split, &row).expect("new id");
            let last = typed.len() - 1;
            typed.in_degree[last] = id as u64 + 7;
            typed.strings.as_mut().unwrap().push(&format!("node-{id}"));
        }
        let mut unmoved = NodeStore { owners: Owners::hashed(2), ..NodeStore::typed(vec![1, 3], LabelKind::Class) };
        unmoved.insert(9, 1, None, None, &[1., 2., 3.]).unwrap();
        unmoved.insert(8, 0, None, None, &[4.]).unwrap();
        unmoved.lay_out();
        assert_eq!(unmoved.ids, [9, 8], "without a map the arrival order stands");

        // A homogeneous store's rows move in place, cycle by cycle.
        let mut plain = NodeStore::new(2, LabelKind::Class);
        for id in [3i64, 2, 4, 0, 1] {
            plain.insert(id, 0, Some(Label::Class(-id)), None, &[id as f32, 0.5]).expect("new id");
        }
        plain.owners = Owners::mapped(2, parts.clone());
        plain.lay_out();
        assert_eq!(plain.ids, [1, 0, 3, 4, 2]);
        for (slot, &id) in plain.ids.iter().enumerate() {
            assert_eq!((plain.slot(id), plain.features(slot)), (Some(slot), &[id as f32, 0.5][..]));
            assert_eq!(plain.labels[slot], Some(Label::Class(-id)));
        }

        typed.owners = Owners::mapped(2, parts);
        typed.lay_out();
        // Part 0: 1; part 1: 0, 3, 4; not named: 2.
        assert_eq!(typed.ids, [1, 0, 3, 4, 2]);
        for (slot, &id) in typed.ids.iter().enumerate() {
            let t = (id % 2) as u8;
            let row: Vec<f32> = (0..typed.width(t)).map(|j| (id * 10 + j as i64) as f32).collect();
            assert_eq!(typed.slot(id), Some(slot));
            assert_eq!((typed.node_type(slot), typed.features(slot)), (t, row.as_slice()), "node {id}");
            assert_eq!(typed.labels[slot], Some(Label::Class(id)));
            assert_eq!(typed.splits[slot], (id == 4).then_some(Split::Test));
            assert_eq!(typed.in_degree[slot], id as u64 + 7);
            assert_eq!(typed.key(slot), Some(format!("node-{id}").as_str()));
        }
    }
}
