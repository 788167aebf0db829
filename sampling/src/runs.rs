//! The owner's in-edge buffer for the nodes it samples itself (every node that is not a hub):
//! a counting sort. The map step already counted each node's in-degree at its owner, so the
//! owner lays out one array with each node's run at a fixed offset, scatters arriving in-edges
//! into place, and selects each node's best afterwards.
//!
//! Why not a small buffer per node: a worker owns millions of nodes, and a growing buffer each
//! costs an allocation and a reallocation or two per node, scattered over the heap. Here an
//! in-edge costs 16 bytes in one flat array, whatever the arrival order; its key is computed
//! when its run is selected, so nothing but the edge itself crosses between workers.
//!
//! Invariant: a slot receives at most its in-degree of in-edges (every in-edge of a node that
//! is not a hub goes to its owner, once). A slot that would overflow is a bug upstream, reported
//! as an error rather than written over its neighbor's run.

use schemas::Sampler;

use crate::sample::Candidate;
pub use crate::sample::keep_best;

#[derive(Debug, Default)]
pub struct OwnedRuns {
    /// Per slot: where its next in-edge goes, and where its run ends (one cache line for both).
    cursor: Vec<Cursor>,
    /// Slot `s`'s run starts at `cursor[s - 1].end` (0 for slot 0).
    edges: Vec<Slotted>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    next: usize,
    end: usize,
}

/// One in-edge in its run: source and weight side by side (one cache line for both).
#[derive(Debug, Clone, Copy, Default)]
struct Slotted {
    src: i64,
    weight: f32,
}

impl OwnedRuns {
    /// Room for `capacity[s]` in-edges of each slot `s` (0 for the hubs, reduced elsewhere).
    pub fn new(capacity: impl ExactSizeIterator<Item = u64>) -> Self {
        let mut cursor = Vec::with_capacity(capacity.len());
        let mut total = 0usize;
        for c in capacity {
            cursor.push(Cursor { next: total, end: total + c as usize });
            total += c as usize;
        }
        OwnedRuns { cursor, edges: vec![Slotted::default(); total] }
    }

    /// Places one in-edge of `slot`; `Err` when the slot's run is already full, or no slot.
    pub fn push(&mut self, slot: usize, src: i64, weight: f32) -> Result<(), usize> {
        let Some(c) = self.cursor.get_mut(slot).filter(|c| c.next < c.end) else {
            return Err(slot);
        };
        self.edges[c.next] = Slotted { src, weight };
        c.next += 1;
        Ok(())
    }

    /// Pushes the in-edges `slot` received, as keyed candidates of `dst`, onto `out`.
    pub fn candidates(&self, slot: usize, sampler: Sampler, seed: u64, dst: i64, out: &mut Vec<Candidate>) {
        let start = if slot == 0 { 0 } else { self.cursor[slot - 1].end };
        let run = &self.edges[start..self.cursor[slot].next];
        out.extend(run.iter().map(|e| Candidate::new(sampler, seed, dst, e.src, e.weight)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Reservoir;

    #[test]
    fn runs_hold_each_slots_edges_whatever_the_order() {
        let mut runs = OwnedRuns::new([2u64, 0, 3].into_iter());
        for (slot, src) in [(2, 20), (0, 1), (2, 21), (0, 2), (2, 22)] {
            runs.push(slot, src, 1.0).unwrap();
        }
        assert_eq!(runs.push(0, 3, 1.0), Err(0), "slot 0 has room for 2");
        assert_eq!(runs.push(1, 3, 1.0), Err(1), "slot 1 has none");
        let srcs = |slot| {
            let mut out = Vec::new();
            runs.candidates(slot, Sampler::All, 0, 9, &mut out);
            let mut s: Vec<i64> = out.iter().map(|c| c.src).collect();
            s.sort();
            s
        };
        assert_eq!(srcs(0), vec![1, 2]);
        assert!(srcs(1).is_empty());
        assert_eq!(srcs(2), vec![20, 21, 22]);
    }

    /// The owner's selection equals the reservoir's (the library's reference sampler) for
    /// every sampler and limits below, at and above the in-degree.
    #[test]
    fn keep_best_equals_the_reservoir() {
        let edges: Vec<(i64, f32)> = (0..300).map(|i| (i * 7 % 301, 0.5 + (i % 5) as f32)).collect();
        for sampler in [Sampler::All, Sampler::Uniform, Sampler::Weighted, Sampler::Topk] {
            for limit in [1, 10, 300, 1000] {
                let mut reservoir = Reservoir::new(limit);
                let mut runs = OwnedRuns::new([edges.len() as u64].into_iter());
                for &(src, w) in &edges {
                    reservoir.push(Candidate::new(sampler, 5, 77, src, w));
                    runs.push(0, src, w).unwrap();
                }
                let mut best = Vec::new();
                runs.candidates(0, sampler, 5, 77, &mut best);
                keep_best(&mut best, limit);
                assert_eq!(best, reservoir.into_sorted(), "{sampler:?}, limit {limit}");
            }
        }
    }
}
