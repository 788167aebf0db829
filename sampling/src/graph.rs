//! The part of the graph one worker owns: its nodes (by `owner_key`), their features, label,
//! split, full in-degree and sampled in-edges with the edges' features. Features, sampled
//! in-edges and their features are flat arrays indexed by slot (one allocation each, not one
//! per node: a worker owns millions of nodes).

use cluster::hash::IdMap;

use schemas::edge_stats::EdgeStats;
use schemas::{Label, LabelKind, Split};

/// One in-edge kept by sampling, best key first.
#[derive(Debug, Clone, Copy)]
pub struct InEdge {
    pub src: i64,
    pub weight: f32,
}

#[derive(Debug, Default)]
pub struct NodeStore {
    pub dim: usize,
    pub label_kind: LabelKind,
    index: IdMap<i64, u32>,
    pub ids: Vec<i64>,
    pub labels: Vec<Option<Label>>,
    pub splits: Vec<Option<Split>>,
    features: Vec<f32>,
    pub in_degree: Vec<u64>,
    /// Sampled in-edges of every node, best first, at most the plan's largest fanout each:
    /// slot `s` holds `sampled[sampled_at[s]..sampled_at[s + 1]]` (empty until sampling ran).
    sampled_at: Vec<usize>,
    sampled: Vec<InEdge>,
    /// Width of the edge table's features (0: it has none); set with the sampled in-edges.
    pub edge_dim: usize,
    /// `edge_dim` features per sampled in-edge, aligned with `sampled`.
    sampled_features: Vec<f32>,
    /// The whole edge table's feature statistics (`None` without edge features), the same on
    /// every worker.
    pub edge_stats: Option<EdgeStats>,
}

impl NodeStore {
    pub fn new(dim: usize, label_kind: LabelKind) -> Self {
        NodeStore { dim, label_kind, ..NodeStore::default() }
    }

    /// Adds a node; returns its slot, or the slot that already holds this id.
    pub fn insert(
        &mut self,
        id: i64,
        label: Option<Label>,
        split: Option<Split>,
        features: &[f32],
    ) -> Result<u32, u32> {
        if let Some(&slot) = self.index.get(&id) {
            return Err(slot);
        }
        let slot = self.ids.len() as u32;
        self.index.insert(id, slot);
        self.ids.push(id);
        self.labels.push(label);
        self.splits.push(split);
        // Rows of another length are reported by the loader; keep the arena rectangular.
        if features.len() == self.dim {
            self.features.extend_from_slice(features);
        } else {
            self.features.resize(self.features.len() + self.dim, 0.0);
        }
        self.in_degree.push(0);
        Ok(slot)
    }

    pub fn slot(&self, id: i64) -> Option<usize> {
        self.index.get(&id).map(|&s| s as usize)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn features(&self, slot: usize) -> &[f32] {
        &self.features[slot * self.dim..(slot + 1) * self.dim]
    }

    /// The sampled in-edges of `slot`, best first.
    pub fn sampled(&self, slot: usize) -> &[InEdge] {
        match self.sampled_at.get(slot..slot + 2) {
            Some(&[from, to]) => &self.sampled[from..to],
            _ => &[],
        }
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

    /// Forgets the sampled in-edges' features (for a model that reads none).
    pub fn drop_edge_features(&mut self) {
        self.edge_dim = 0;
        self.sampled_features = Vec::new();
    }

    /// Sets every node's sampled in-edges: `edges` holds slot 0's, then slot 1's, ...; `at` has
    /// one offset per slot plus the end; `features` holds `edge_dim` values per edge of `edges`.
    pub fn set_sampled(&mut self, at: Vec<usize>, edges: Vec<InEdge>, edge_dim: usize, features: Vec<f32>) {
        debug_assert_eq!(at.len(), self.len() + 1);
        debug_assert_eq!(at.last().copied(), Some(edges.len()));
        debug_assert_eq!(features.len(), edges.len() * edge_dim);
        self.sampled_at = at;
        self.sampled = edges;
        self.edge_dim = edge_dim;
        self.sampled_features = features;
    }
}
