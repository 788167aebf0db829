//! The owner's in-edge buffer for the nodes it samples itself (every node that is not a hub):
//! a counting sort. The map step already counted each node's in-degree at its owner, so the
//! owner lays out one array with each node's run at a fixed offset, scatters arriving in-edges
//! into place, and selects each node's best afterwards.
//!
//! Why not a small buffer per node: a worker owns millions of nodes, and a growing buffer each
//! costs an allocation and a reallocation or two per node, scattered over the heap. Here an
//! in-edge costs 16 bytes in one flat array, whatever the arrival order, plus its features
//! (4 bytes each) at the same place of a second flat array when the edge table has them; its
//! key is computed when its run is selected, so nothing but the edge itself crosses between
//! workers.
//!
//! Invariant: a slot receives at most its in-degree of in-edges (every in-edge of a node that
//! is not a hub goes to its owner, once). A slot that would overflow is a bug upstream, reported
//! as an error rather than written over its neighbor's run.
//!
//! The runs then become the store's sampled in-edges in place ([`OwnedRuns::keep`],
//! [`OwnedRuns::into_kept`]): slot by slot, each slot's kept in-edges are written at the end of
//! the previous slot's, which is never past the slot's own run, since a slot keeps at most what
//! its run holds (a hub, whose in-edges are reduced elsewhere, has a run as long as its sample
//! can be, left empty until then). Sampling thus never holds the in-edges twice: with every
//! in-edge kept, a second array would be as large as the runs (640 MB at 40M edges).
//!
//! When the caller asks for them ([`crate::SampleSpec::source_slots`]), a third flat array holds
//! each in-edge's source slot (4 bytes, see [`crate::NodeStore::source_slots`]) at the same
//! place, kept in place alike.

use schemas::Sampler;

use crate::graph::{InEdge, REMOTE_SOURCE};
use crate::sample::Candidate;
pub use crate::sample::keep_best;

#[derive(Debug, Default)]
pub struct OwnedRuns {
    /// Per slot: where its next in-edge goes, and where its run ends (one cache line for both).
    cursor: Vec<Cursor>,
    /// Slot `s`'s run starts at `cursor[s - 1].end` (0 for slot 0).
    edges: Vec<InEdge>,
    /// The features of the in-edge at place `i` of `edges`: `features[i * dim..(i + 1) * dim]`
    /// (empty when `dim` is 0).
    features: Vec<f32>,
    dim: usize,
    /// The source slot of the in-edge at place `i` (empty unless asked for).
    sources: Vec<u32>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    next: usize,
    end: usize,
}

impl OwnedRuns {
    /// Room for `capacity[s]` in-edges of each slot `s` (for a hub, reduced elsewhere, as many
    /// as its sample keeps), each with `dim` features and, with `sources`, its source slot.
    pub fn new(capacity: impl ExactSizeIterator<Item = u64>, dim: usize, sources: bool) -> Self {
        let mut cursor = Vec::with_capacity(capacity.len());
        let mut total = 0usize;
        for c in capacity {
            cursor.push(Cursor { next: total, end: total + c as usize });
            total += c as usize;
        }
        let empty = InEdge { src: 0, weight: 0.0, relation: 0 };
        // Zeros: a fresh mapping, paged in where an in-edge lands rather than all up front.
        let sources = if sources { vec![0; total] } else { Vec::new() };
        OwnedRuns { cursor, edges: vec![empty; total], features: vec![0.0; total * dim], dim, sources }
    }

    /// Places one in-edge of `slot` with its `dim` features and its source slot (ignored
    /// unless asked for); `Err` when the slot's run is already full, or no slot.
    pub fn push(&mut self, slot: usize, edge: InEdge, source: u32, features: &[f32]) -> Result<(), usize> {
        let Some(c) = self.cursor.get_mut(slot).filter(|c| c.next < c.end) else {
            return Err(slot);
        };
        self.edges[c.next] = edge;
        self.features[c.next * self.dim..(c.next + 1) * self.dim].copy_from_slice(features);
        if let Some(s) = self.sources.get_mut(c.next) {
            *s = source;
        }
        c.next += 1;
        Ok(())
    }

    /// Asks the cache for `slot`'s cursor: the first of a push's two dependent misses (a
    /// loop over arriving edges calls it some edges ahead, then [`OwnedRuns::prefetch_place`]).
    pub fn prefetch_cursor(&self, slot: usize) {
        if let Some(c) = self.cursor.get(slot) {
            cluster::prefetch::read(c);
        }
    }

    /// Asks the cache for the place `slot`'s next in-edge goes: the second miss, once the
    /// cursor is in the cache.
    pub fn prefetch_place(&self, slot: usize) {
        let Some(c) = self.cursor.get(slot) else { return };
        if let Some(e) = self.edges.get(c.next) {
            cluster::prefetch::read(e);
        }
        if let Some(s) = self.sources.get(c.next) {
            cluster::prefetch::read(s);
        }
    }

    /// Pushes the in-edges `slot` received, as keyed candidates of `dst`, onto `out`; each
    /// carries its place, where [`OwnedRuns::features`] finds its features.
    pub fn candidates(&self, slot: usize, sampler: Sampler, seed: u64, dst: i64, out: &mut Vec<Candidate<usize>>) {
        let start = if slot == 0 { 0 } else { self.cursor[slot - 1].end };
        let run = &self.edges[start..self.cursor[slot].next];
        out.extend(run.iter().enumerate().map(|(i, e)| {
            let place = start + i;
            Candidate::carrying(sampler, seed, dst, e.src, e.weight, self.features(place), place)
        }));
    }

    /// The relation of the in-edge at `place` (a candidate's payload).
    pub fn relation(&self, place: usize) -> u8 {
        self.edges[place].relation
    }

    /// The features of the in-edge at `place` (a candidate's payload).
    pub fn features(&self, place: usize) -> &[f32] {
        &self.features[place * self.dim..(place + 1) * self.dim]
    }

    /// The source slot of the in-edge at `place` ([`REMOTE_SOURCE`] unless asked for).
    pub fn source(&self, place: usize) -> u32 {
        self.sources.get(place).copied().unwrap_or(REMOTE_SOURCE)
    }

    /// Writes `kept` (its in-edges with their `features`, `dim` each, and their source slots
    /// when asked for) as `slot`'s kept in-edges at `place`, the end of the previous slot's
    /// (see the module doc), and returns the end of `slot`'s. Slots are kept in order, each
    /// once, after its candidates were read: the write may cover its own run. `Err` when they
    /// would reach past its run, a bug upstream.
    pub fn keep(&mut self, slot: usize, place: usize, kept: &Kept) -> Result<usize, usize> {
        let end = place + kept.edges.len();
        if self.cursor.get(slot).is_none_or(|c| end > c.end) {
            return Err(slot);
        }
        self.edges[place..end].copy_from_slice(&kept.edges);
        self.features[place * self.dim..end * self.dim].copy_from_slice(&kept.features);
        if !self.sources.is_empty() {
            self.sources[place..end].copy_from_slice(&kept.sources);
        }
        Ok(end)
    }

    /// The first `len` places: every slot's kept in-edges, their features and source slots, in
    /// slot order.
    pub fn into_kept(self, len: usize) -> Kept {
        let OwnedRuns { mut edges, mut features, mut sources, dim, .. } = self;
        edges.truncate(len);
        features.truncate(len * dim);
        sources.truncate(len);
        // Shrinking a mapped block remaps it in place: nothing is copied.
        edges.shrink_to_fit();
        features.shrink_to_fit();
        sources.shrink_to_fit();
        Kept { edges, features, sources }
    }
}

/// Kept in-edges, aligned: `edge_dim` features each, and each one's source slot (empty unless
/// asked for).
#[derive(Debug, Default)]
pub struct Kept {
    pub edges: Vec<InEdge>,
    pub features: Vec<f32>,
    pub sources: Vec<u32>,
}

impl Kept {
    pub fn clear(&mut self) {
        self.edges.clear();
        self.features.clear();
        self.sources.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Reservoir;

    fn edge(src: i64, weight: f32) -> InEdge {
        InEdge { src, weight, relation: 0 }
    }

    #[test]
    fn runs_hold_each_slots_edges_whatever_the_order() {
        let mut runs = OwnedRuns::new([2u64, 0, 3].into_iter(), 1, true);
        for (slot, src) in [(2, 20), (0, 1), (2, 21), (0, 2), (2, 22)] {
            runs.push(slot, edge(src, 1.0), src as u32 + 100, &[src as f32 * 10.0]).unwrap();
        }
        assert_eq!(runs.push(0, edge(3, 1.0), 0, &[0.0]), Err(0), "slot 0 has room for 2");
        assert_eq!(runs.push(1, edge(3, 1.0), 0, &[0.0]), Err(1), "slot 1 has none");
        let srcs = |slot| {
            let mut out = Vec::new();
            runs.candidates(slot, Sampler::All, 0, 9, &mut out);
            let mut s: Vec<(i64, f32, u32)> =
                out.iter().map(|c| (c.src, runs.features(c.payload)[0], runs.source(c.payload))).collect();
            s.sort_by_key(|e| e.0);
            s
        };
        assert_eq!(srcs(0), vec![(1, 10.0, 101), (2, 20.0, 102)]);
        assert!(srcs(1).is_empty());
        assert_eq!(srcs(2), vec![(20, 200.0, 120), (21, 210.0, 121), (22, 220.0, 122)]);

        let mut runs = OwnedRuns::new([1u64].into_iter(), 0, false);
        runs.push(0, edge(5, 1.0), 7, &[]).unwrap();
        assert_eq!(runs.source(0), REMOTE_SOURCE, "source slots nobody asked for");
        assert!(runs.into_kept(1).sources.is_empty());
    }

    /// Kept in place slot by slot, the runs become what a separate array of each slot's kept
    /// in-edges would hold: in slot order, each with its features and source slot, a hub's
    /// sample in the room left for it; a slot cannot keep past its run.
    #[test]
    fn runs_become_the_kept_edges_in_place() {
        // Slot 1 is a hub: room for its sample of 2, nothing pushed; slot 2 has no in-edges.
        let mut runs = OwnedRuns::new([3u64, 2, 0, 2].into_iter(), 1, true);
        for (slot, src) in [(0, 1), (3, 30), (0, 2), (3, 31), (0, 3)] {
            runs.push(slot, edge(src, 1.0), src as u32 + 100, &[src as f32 * 10.0]).unwrap();
        }
        // Each slot keeps its largest sources, as many as `keeps` says; the hub gets 100, 101.
        // Slot 3's kept edges go to places 4 and 5, over its own run (places 5 and 6).
        let keeps = [2, 2, 0, 2];
        let (mut expected, mut place) = (Kept::default(), 0);
        for (slot, &keep) in keeps.iter().enumerate() {
            let mut best = Vec::new();
            runs.candidates(slot, Sampler::All, 0, 9, &mut best);
            let mut kept: Vec<(InEdge, f32, u32)> =
                best.iter().map(|c| (edge(c.src, 1.0), runs.features(c.payload)[0], runs.source(c.payload))).collect();
            if slot == 1 {
                kept = vec![(edge(100, 1.0), 1000.0, 7), (edge(101, 1.0), 1010.0, 8)];
            }
            kept.sort_by_key(|(e, _, _)| std::cmp::Reverse(e.src));
            kept.truncate(keep);
            let mut slot_kept = Kept::default();
            for (e, f, s) in kept {
                slot_kept.edges.push(e);
                slot_kept.features.push(f);
                slot_kept.sources.push(s);
            }
            expected.edges.extend_from_slice(&slot_kept.edges);
            expected.features.extend_from_slice(&slot_kept.features);
            expected.sources.extend_from_slice(&slot_kept.sources);
            place = runs.keep(slot, place, &slot_kept).unwrap();
        }
        let kept = runs.into_kept(place);
        let srcs = |edges: &[InEdge]| edges.iter().map(|e| e.src).collect::<Vec<_>>();
        assert_eq!(srcs(&kept.edges), srcs(&expected.edges));
        assert_eq!(srcs(&kept.edges), vec![3, 2, 101, 100, 31, 30]);
        assert_eq!(kept.features, expected.features);
        assert_eq!(kept.sources, vec![103, 102, 8, 7, 131, 130]);

        let mut runs = OwnedRuns::new([3u64, 1].into_iter(), 0, false);
        let of = |n: usize| Kept { edges: vec![edge(1, 1.0); n], ..Kept::default() };
        assert_eq!(runs.keep(0, 0, &of(4)), Err(0), "slot 0's run holds 3");
        assert_eq!(runs.keep(1, 3, &of(2)), Err(1), "slot 1's run ends at 4");
        assert_eq!(runs.keep(1, 2, &of(2)), Ok(4));
    }

    /// The owner's selection equals the reservoir's (the library's reference sampler) for
    /// every sampler and limits below, at and above the in-degree.
    #[test]
    fn keep_best_equals_the_reservoir() {
        let edges: Vec<(i64, f32)> = (0..300).map(|i| (i * 7 % 301, 0.5 + (i % 5) as f32)).collect();
        for sampler in [Sampler::All, Sampler::Uniform, Sampler::Weighted, Sampler::Topk] {
            for limit in [1, 10, 300, 1000] {
                let mut reservoir = Reservoir::new(limit);
                let mut runs = OwnedRuns::new([edges.len() as u64].into_iter(), 0, false);
                for &(src, w) in &edges {
                    reservoir.push(Candidate::new(sampler, 5, 77, src, w));
                    runs.push(0, edge(src, w), 0, &[]).unwrap();
                }
                let mut best = Vec::new();
                runs.candidates(0, sampler, 5, 77, &mut best);
                keep_best(&mut best, limit);
                let best: Vec<Candidate> = best.iter().map(Candidate::bare).collect();
                assert_eq!(best, reservoir.into_sorted(), "{sampler:?}, limit {limit}");
            }
        }
    }

    /// The same with features, parallel edges among them (same src and weight, other features),
    /// in two arrival orders: the owner keeps the reservoir's edges, each with its own features.
    #[test]
    fn keep_best_with_features_equals_the_reservoir() {
        let edges: Vec<(i64, f32, [f32; 2])> =
            (0..300).map(|i| (i % 60, 1.0 + (i % 2) as f32, [i as f32, 0.25 * (i % 7) as f32])).collect();
        let content = |src: i64, w: f32, f: &[f32]| (src, w.to_bits(), f.iter().map(|v| v.to_bits()).collect());
        for sampler in [Sampler::All, Sampler::Uniform, Sampler::Weighted, Sampler::Topk] {
            for limit in [1, 10, 300] {
                let mut reservoir = Reservoir::new(limit);
                edges
                    .iter()
                    .for_each(|(src, w, f)| reservoir.push(Candidate::carrying(sampler, 5, 77, *src, *w, f, *f)));
                let expected: Vec<(i64, u32, Vec<u32>)> =
                    reservoir.into_sorted().iter().map(|c| content(c.src, c.weight, &c.payload)).collect();
                for reversed in [false, true] {
                    let mut runs = OwnedRuns::new([edges.len() as u64].into_iter(), 2, false);
                    let order: Vec<_> = if reversed { edges.iter().rev().collect() } else { edges.iter().collect() };
                    order.into_iter().for_each(|(src, w, f)| runs.push(0, edge(*src, *w), 0, f).unwrap());
                    let mut best = Vec::new();
                    runs.candidates(0, sampler, 5, 77, &mut best);
                    keep_best(&mut best, limit);
                    let got: Vec<(i64, u32, Vec<u32>)> =
                        best.iter().map(|c| content(c.src, c.weight, runs.features(c.payload))).collect();
                    assert_eq!(got, expected, "{sampler:?}, limit {limit}, reversed {reversed}");
                }
            }
        }
    }
}
