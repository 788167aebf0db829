//! A worker's nodes renumbered in the owners' layout order (`cluster::Owners::order`: by part,
//! then by id), so that the nodes of one part lie together in every array indexed by slot and
//! a fold over a part's in-edges reads rows near each other. Without an owner map nothing
//! moves.
//!
//! The loader calls it once every node is in and before any edge names a slot: the in-degrees
//! are zeros and nothing is sampled, so the slots change under no one. The permutation is
//! applied in place, cycle by cycle, each row moved once: a fresh copy of the features (1.3 GB
//! at 10M nodes of 32 features) would cost more in page faults than the moves themselves. Two
//! things are rebuilt instead, being of several widths: the strings of a graph keyed by strings,
//! and a typed graph's feature rows.

use super::{NodeStore, NodeStrings};

/// A slot of `order` whose row has moved.
const DONE: u32 = u32::MAX;

impl NodeStore {
    /// Renumbers the slots in the owners' layout order (see the module doc).
    pub(crate) fn lay_out(&mut self) {
        if !self.owners.is_mapped() {
            return;
        }
        let mut order = self.layout_order();
        if let Some(strings) = &self.strings {
            let mut laid = NodeStrings::new(strings.ids.clone());
            order.iter().for_each(|&was| laid.push(strings.get(was as usize)));
            self.strings = Some(laid);
        }
        if self.is_typed() {
            self.lay_out_typed_rows(&order);
        }
        self.permute(&mut order);
        for (slot, &id) in self.ids.iter().enumerate() {
            *self.index.get_or_insert_with(id, || 0).0 = slot as u32;
        }
    }

    /// `order[new] = old`: the slots sorted by their nodes' layout keys, each looked up once.
    fn layout_order(&self) -> Vec<u32> {
        let mut keyed: Vec<(Option<(u32, i64)>, u32)> =
            self.ids.iter().enumerate().map(|(s, &id)| (self.owners.order(id), s as u32)).collect();
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, s)| s).collect()
    }

    /// A typed graph's feature rows and types, rebuilt in `order`.
    fn lay_out_typed_rows(&mut self, order: &[u32]) {
        let mut features = Vec::with_capacity(self.features.len());
        let mut feature_at = Vec::with_capacity(order.len() + 1);
        feature_at.push(0);
        for &was in order {
            features.extend_from_slice(self.features(was as usize));
            feature_at.push(features.len());
        }
        self.types = order.iter().map(|&was| self.types[was as usize]).collect();
        (self.features, self.feature_at) = (features, feature_at);
    }

    /// Moves every fixed-width row (id, label, split, in-degree, and a homogeneous graph's
    /// features) to its new slot, following each cycle of `order` once; marks `order` done.
    fn permute(&mut self, order: &mut [u32]) {
        let dim = if self.is_typed() { 0 } else { self.dim };
        let mut kept = vec![0f32; dim];
        for start in 0..order.len() {
            if order[start] == DONE || order[start] as usize == start {
                continue;
            }
            // The row at `start` is set aside; each slot of the cycle takes the row it names.
            let saved = (self.ids[start], self.labels[start].take(), self.splits[start], self.in_degree[start]);
            kept.copy_from_slice(&self.features[start * dim..(start + 1) * dim]);
            let mut at = start;
            loop {
                let from = order[at] as usize;
                order[at] = DONE;
                if from == start {
                    (self.ids[at], self.labels[at], self.splits[at], self.in_degree[at]) = saved;
                    self.features[at * dim..(at + 1) * dim].copy_from_slice(&kept);
                    break;
                }
                self.ids[at] = self.ids[from];
                self.labels[at] = self.labels[from].take();
                self.splits[at] = self.splits[from];
                self.in_degree[at] = self.in_degree[from];
                self.features.copy_within(from * dim..(from + 1) * dim, at * dim);
                at = from;
            }
        }
    }
}
