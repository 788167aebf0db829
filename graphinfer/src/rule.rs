//! Which of a node's sampled in-edges each layer aggregates, and how each counts: the layer
//! rule (`schemas::layers`) of every relation.
//!
//! A homogeneous model has one rule, and layer `l` reads a prefix of the node's sample (its
//! best `count(l)` in-edges). A typed model's sample holds one run per relation
//! (`NodeStore::sampled_runs`), each with its own fanouts (`ModelMeta::relation_layers`), so
//! layer `l` reads, of each run, the prefix that relation's rule keeps: the in-edges the
//! node's record holds at that layer. A typed layer averages per relation, so each in-edge
//! weighs 1 over the destination's in-edges of its relation in the layer ([`Selected::coef`]).

use std::ops::Range;

use sampling::InEdge;
use schemas::layers::Layers;
use schemas::model::ModelMeta;

/// The layer rule of every relation of a model (one for a homogeneous model).
#[derive(Debug, Clone)]
pub struct LayerRule {
    /// One per relation, by relation number.
    relations: Vec<Layers>,
    typed: bool,
    hops: usize,
}

/// One in-edge a layer reads: its index in the node's sample, its relation, and its weight in
/// a typed layer (1 over its relation's in-edges of the destination in the layer).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selected {
    pub index: usize,
    pub relation: u8,
    pub coef: f32,
}

impl LayerRule {
    /// The rule of `meta`'s model: the records' fanouts, per relation for a typed model, after
    /// a dense first layer (no in-edge, no degree) when its features were precomputed.
    pub fn of(meta: &ModelMeta) -> Self {
        let mut relations = meta.relation_layers();
        if meta.spec.precomputed > 0 {
            relations = relations.into_iter().map(schemas::layers::Layers::dense_first).collect();
        }
        LayerRule { relations, typed: meta.spec.types.is_some(), hops: meta.spec.layers }
    }

    /// A homogeneous model's rule (the tests build rules without a model).
    #[cfg(test)]
    fn plain(layers: Layers) -> Self {
        LayerRule { hops: layers.hops(), relations: vec![layers], typed: false }
    }

    /// The rule of a `hops`-layer typed model's relations, by relation number.
    #[cfg(test)]
    fn typed(hops: usize, relations: Vec<Layers>) -> Self {
        LayerRule { relations, typed: true, hops }
    }

    /// k: the model's layers.
    pub fn hops(&self) -> usize {
        self.hops
    }

    pub fn is_typed(&self) -> bool {
        self.typed
    }

    /// A node's in-degree as layer `l` counts it (GCN's normalization,
    /// `schemas::layers::Layers::degree`); a typed layer counts per relation instead
    /// ([`Selected::coef`]) and reads no degree.
    pub fn degree(&self, l: usize, in_degree: u64) -> u64 {
        if self.typed { in_degree } else { self.relations[0].degree(l, in_degree) }
    }

    /// The ranges of `sampled` that layer `l` reads, with their relation: one prefix for a
    /// homogeneous model, a prefix of each relation's run for a typed one.
    pub fn ranges<'s>(&'s self, l: usize, sampled: &'s [InEdge]) -> impl Iterator<Item = (u8, Range<usize>)> + 's {
        let plain = (!self.typed).then(|| (0, 0..self.relations[0].count(l, sampled.len())));
        let runs = if self.typed { sampled } else { &[] }.chunk_by(|a, b| a.relation == b.relation);
        let typed = runs.scan(0, move |start, run| {
            let (r, from) = (run[0].relation, *start);
            *start += run.len();
            let count = self.relations.get(usize::from(r)).map_or(0, |rule| rule.count(l, run.len()));
            Some((r, from..from + count))
        });
        plain.into_iter().chain(typed.filter(|(_, range)| !range.is_empty()))
    }

    /// The in-edges layer `l` reads of a node's `sampled` in-edges, in sample order.
    pub fn selected<'s>(&'s self, l: usize, sampled: &'s [InEdge]) -> impl Iterator<Item = Selected> + 's {
        self.ranges(l, sampled).flat_map(|(relation, range)| {
            let coef = 1.0 / range.len() as f32;
            range.map(move |index| Selected { index, relation, coef })
        })
    }

    /// How many in-edges layer `l` reads of `sampled`.
    pub fn count(&self, l: usize, sampled: &[InEdge]) -> usize {
        self.ranges(l, sampled).map(|(_, r)| r.len()).sum()
    }

    /// One past the last in-edge of `sampled` that layer `l` reads (the prefix that holds them).
    pub fn window(&self, l: usize, sampled: &[InEdge]) -> usize {
        self.ranges(l, sampled).last().map_or(0, |(_, r)| r.end)
    }

    /// The most in-edges any layer keeps per node, and per relation for a typed model: round
    /// 0's sampling limits (as GraphFlat sampled the records).
    pub fn sample_limits(&self) -> (usize, Vec<usize>) {
        let limits: Vec<usize> = self.relations.iter().map(Layers::sample_limit).collect();
        let limit = limits.iter().copied().max().unwrap_or(0);
        (limit, if self.typed { limits } else { Vec::new() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::layers::Fanout;

    fn edges(relations: &[u8]) -> Vec<InEdge> {
        relations.iter().enumerate().map(|(i, &relation)| InEdge { src: i as i64, weight: 1.0, relation }).collect()
    }

    #[test]
    fn a_plain_layer_reads_a_prefix() {
        let rule = LayerRule::plain(Layers::new(vec![Fanout::Sample(3), Fanout::Sample(1)]));
        let sampled = edges(&[0; 5]);
        // Layer 2 (the last) uses the nearest hop's fanout, 3; layer 1 the second's, 1.
        assert_eq!(rule.ranges(2, &sampled).collect::<Vec<_>>(), vec![(0, 0..3)]);
        assert_eq!(rule.count(1, &sampled), 1);
        assert_eq!(rule.window(2, &sampled), 3);
        assert_eq!(rule.sample_limits(), (3, Vec::new()));
    }

    #[test]
    fn a_typed_layer_reads_a_prefix_of_each_relation_and_weighs_by_relation() {
        // Relation 0 keeps [2, 1] (nearest hop first), relation 2 keeps [1, 3].
        let rule = LayerRule::typed(
            2,
            vec![
                Layers::new(vec![Fanout::Sample(2), Fanout::Sample(1)]),
                Layers::new(vec![Fanout::Sample(5), Fanout::Sample(5)]),
                Layers::new(vec![Fanout::Sample(1), Fanout::Sample(3)]),
            ],
        );
        let sampled = edges(&[0, 0, 0, 2, 2, 2, 2]);
        assert_eq!(rule.ranges(2, &sampled).collect::<Vec<_>>(), vec![(0, 0..2), (2, 3..4)]);
        assert_eq!(rule.ranges(1, &sampled).collect::<Vec<_>>(), vec![(0, 0..1), (2, 3..6)]);
        let selected: Vec<Selected> = rule.selected(2, &sampled).collect();
        let coefs: Vec<(usize, u8, f32)> = selected.iter().map(|s| (s.index, s.relation, s.coef)).collect();
        assert_eq!(coefs, vec![(0, 0, 0.5), (1, 0, 0.5), (3, 2, 1.0)]);
        assert_eq!(rule.count(1, &sampled), 4);
        assert_eq!(rule.window(1, &sampled), 6);
        assert_eq!(rule.window(2, &[]), 0);
        assert_eq!(rule.sample_limits(), (5, vec![2, 5, 3]));
    }
}
