//! The owner's in-edge buffer for the nodes it samples itself (every node that is not a hub):
//! a counting sort. The map step already counted each node's in-degree at its owner, so the
//! owner lays out one array with each node's run at a fixed offset, gathers arriving in-edges
//! into place, and selects each node's best afterwards.
//!
//! Why not a small buffer per node: a worker owns millions of nodes, and a growing buffer each
//! costs an allocation and a reallocation or two per node, scattered over the heap. Here an
//! in-edge costs 16 bytes in one flat array, whatever the arrival order, plus its features
//! (4 bytes each) at the same place of a second flat array when the edge table has them; its
//! key is computed when its run is selected, so nothing but the edge itself crosses between
//! workers.
//!
//! In-edges arrive in no order, so writing each straight to its run costs two cache misses
//! (the slot's cursor, then the place) in arrays far larger than the cache: at 10M nodes, a
//! 160 MB array of cursors and 1.6 GB of runs. So the runs are filled in two passes, a radix
//! sort by slot:
//! - *Staging* ([`OwnedRuns::push`]): slots are grouped in blocks of `2^shift` consecutive
//!   slots, sized so that a block's runs take about [`BLOCK_BYTES`]. An arriving in-edge is
//!   appended to its block's part of the array (the runs of the block's slots, one region),
//!   with its slot's offset in the block in the in-edge's padding. A worker writes one stream
//!   a block, a few hundred to a few thousand, which the cache holds.
//! - *Placing* (on first use of a block: [`OwnedRuns::candidates`], [`OwnedRuns::keep`]): the
//!   block's staged in-edges are counted per slot, sorted by slot in place (an American flag
//!   sort: each swap puts one in-edge in its final place), and each slot's group moved, last
//!   slot first, to its run's start. All of it happens inside a region the cache holds.
//!
//! Invariant: a slot receives at most its in-degree of in-edges (every in-edge of a node that
//! is not a hub goes to its owner, once), so a block's staged in-edges fit its region, and each
//! slot's, once sorted, fit its run. A slot that would overflow is a bug upstream, reported as
//! an error rather than written over its neighbor's run: when its block has no room left
//! ([`OwnedRuns::push`] names the slot whose in-edge found none), or when the block is placed.
//!
//! The runs then become the store's sampled in-edges in place ([`OwnedRuns::keep`],
//! [`OwnedRuns::into_kept`]): slot by slot, each slot's kept in-edges are written at the end of
//! the previous slot's, which is never past the slot's own run, since a slot keeps at most what
//! its run holds (a hub, whose in-edges are reduced elsewhere, has a run as long as its sample
//! can be, left empty until then). Sampling thus never holds the in-edges twice: with every
//! in-edge kept, a second array would be as large as the runs (640 MB at 40M edges).
//!
//! When the caller asks for them ([`crate::SampleSpec::source_slots`]), a third flat array holds
//! each in-edge's source slot (4 bytes, see [`crate::NodeStore::take_source_slots`]) at the same
//! place, staged, placed and kept alike.

use schemas::Sampler;

use crate::graph::InEdge;
use crate::sample::Candidate;
pub use crate::sample::keep_best;

/// The bytes of runs a block of slots is sized to: its in-edges, their features and source
/// slots, which placing the block sorts in place. Past a core's L2 (512 kB to 1 MB) but well
/// within a shared L3 (32 MB on the benchmark machine), while a worker's blocks stay few enough
/// (1,221 at 10M nodes of 10 in-edges) that the cache holds the end of each block's stream while
/// staging.
pub const BLOCK_BYTES: usize = 1 << 21;

/// Slots a block holds at most: a staged in-edge names its slot in 16 bits.
const MAX_SHIFT: u32 = 16;

#[derive(Debug, Default)]
pub struct OwnedRuns {
    /// Per slot: where its run's in-edges end once placed (its start until then), and where its
    /// run ends (one cache line for both).
    cursor: Vec<Cursor>,
    /// Slot `s`'s run starts at `cursor[s - 1].end` (0 for slot 0).
    edges: Vec<Staged>,
    /// The features of the in-edge at place `i` of `edges`: `features[i * dim..(i + 1) * dim]`
    /// (empty when `dim` is 0).
    features: Vec<f32>,
    dim: usize,
    /// The source slot of the in-edge at place `i` (empty unless asked for).
    sources: Vec<u32>,
    /// Block `b` holds slots `b << shift` up to `(b + 1) << shift`.
    shift: u32,
    blocks: Vec<Block>,
    /// Placing's per-slot counts and cursors, reused from block to block.
    counts: Vec<usize>,
    next: Vec<usize>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    next: usize,
    end: usize,
}

/// A block's region of the runs: in-edges are staged at `next`, up to `end`, until it is placed.
#[derive(Debug, Clone, Copy)]
struct Block {
    next: usize,
    end: usize,
    placed: bool,
}

/// An in-edge in the runs. While its block is staged, `local` is its slot's offset in the block,
/// in bytes an [`InEdge`] leaves as padding, so a staged array is as large as a placed one.
#[derive(Debug, Clone, Copy)]
struct Staged {
    src: i64,
    weight: f32,
    relation: u8,
    local: u16,
}

// Staging costs no memory: a staged in-edge takes an in-edge's place, and the runs become the
// kept in-edges in their allocation (`OwnedRuns::into_kept`).
const _: () = assert!(size_of::<Staged>() == size_of::<InEdge>() && align_of::<Staged>() == align_of::<InEdge>());

impl Staged {
    fn new(edge: InEdge, local: u16) -> Self {
        Staged { src: edge.src, weight: edge.weight, relation: edge.relation, local }
    }

    fn in_edge(self) -> InEdge {
        InEdge { src: self.src, weight: self.weight, relation: self.relation }
    }
}

impl OwnedRuns {
    /// Room for `capacity[s]` in-edges of each slot `s` (for a hub, reduced elsewhere, as many
    /// as its sample keeps), each with `dim` features and, with `sources`, its source slot, in
    /// blocks of slots whose runs take about [`BLOCK_BYTES`].
    /// Walks `capacity` twice (the total sizes the blocks) rather than holding a copy of it.
    pub fn new(capacity: impl ExactSizeIterator<Item = u64> + Clone, dim: usize, sources: bool) -> Self {
        let in_edges = capacity.clone().sum::<u64>().max(1) as f64;
        let per_edge = size_of::<Staged>() + 4 * dim + if sources { 4 } else { 0 };
        let per_slot = in_edges / capacity.len().max(1) as f64 * per_edge as f64;
        let slots = (BLOCK_BYTES as f64 / per_slot).max(1.0);
        Self::blocked(capacity, dim, sources, slots.log2().floor() as u32)
    }

    /// As [`OwnedRuns::new`], in blocks of `2^shift` slots (at most `2^16`).
    pub fn blocked(capacity: impl ExactSizeIterator<Item = u64>, dim: usize, sources: bool, shift: u32) -> Self {
        let shift = shift.min(MAX_SHIFT);
        let mut cursor = Vec::with_capacity(capacity.len());
        let mut blocks = Vec::with_capacity((capacity.len() >> shift) + 1);
        let mut total = 0usize;
        for (s, c) in capacity.enumerate() {
            if s & ((1 << shift) - 1) == 0 {
                blocks.push(Block { next: total, end: total, placed: false });
            }
            cursor.push(Cursor { next: total, end: total + c as usize });
            total += c as usize;
            blocks.last_mut().expect("a block per 2^shift slots").end = total;
        }
        let empty = Staged { src: 0, weight: 0.0, relation: 0, local: 0 };
        // Zeros: a fresh mapping, paged in where an in-edge lands rather than all up front.
        let sources = if sources { vec![0; total] } else { Vec::new() };
        OwnedRuns {
            cursor,
            edges: vec![empty; total],
            features: vec![0.0; total * dim],
            dim,
            sources,
            shift,
            blocks,
            counts: Vec::new(),
            next: Vec::new(),
        }
    }

    /// Stages one in-edge of `slot` with its `dim` features and its source slot (ignored
    /// unless asked for); `Err` when there is no such slot, or its block has no room left (a
    /// slot received more than its in-degree, maybe this one) or was placed already.
    pub fn push(&mut self, slot: usize, edge: InEdge, source: u32, features: &[f32]) -> Result<(), usize> {
        let local = (slot & ((1 << self.shift) - 1)) as u16;
        let Some(b) = self.blocks.get_mut(slot >> self.shift).filter(|b| b.next < b.end && !b.placed) else {
            return Err(slot);
        };
        if slot >= self.cursor.len() {
            return Err(slot);
        }
        let at = b.next;
        b.next += 1;
        self.edges[at] = Staged::new(edge, local);
        self.features[at * self.dim..(at + 1) * self.dim].copy_from_slice(features);
        if let Some(s) = self.sources.get_mut(at) {
            *s = source;
        }
        Ok(())
    }

    /// Places `slot`'s block if it is still staged (see the module doc); `Err` names a slot of
    /// the block that received more in-edges than its run holds.
    fn place(&mut self, slot: usize) -> Result<(), usize> {
        let block = slot >> self.shift;
        let Some(&Block { next: staged, placed: false, .. }) = self.blocks.get(block) else {
            return Ok(());
        };
        self.blocks[block].placed = true;
        let first = block << self.shift;
        let last = (first + (1 << self.shift)).min(self.cursor.len());
        let start = self.run_start(first);
        // Each slot's staged in-edges, checked against its run.
        self.counts.clear();
        self.counts.resize(last - first, 0);
        for e in &self.edges[start..staged] {
            self.counts[usize::from(e.local)] += 1;
        }
        if let Some(l) = (0..last - first).find(|&l| self.counts[l] > self.run_len(first + l)) {
            return Err(first + l);
        }
        // Sorted by slot into `start..staged`, each slot's group at `next[l] - counts[l]`.
        self.next.clear();
        self.next.extend(self.counts.iter().scan(start, |at, &c| {
            *at += c;
            Some(*at - c)
        }));
        let mut end = start;
        for l in 0..last - first {
            end += self.counts[l];
            while self.next[l] < end {
                let i = self.next[l];
                let to = usize::from(self.edges[i].local);
                if to != l {
                    self.swap(i, self.next[to]);
                }
                self.next[to] += 1;
            }
        }
        // Each group to its run's start, which is never before it (a run holds at least its
        // group): from the last slot back, a group only moves over groups already moved.
        for l in (0..last - first).rev() {
            let (slot, count) = (first + l, self.counts[l]);
            let (from, to) = (self.next[l] - count, self.run_start(slot));
            if from != to {
                self.edges.copy_within(from..from + count, to);
                self.features.copy_within(from * self.dim..(from + count) * self.dim, to * self.dim);
                if !self.sources.is_empty() {
                    self.sources.copy_within(from..from + count, to);
                }
            }
            self.cursor[slot].next = to + count;
        }
        Ok(())
    }

    /// Swaps the in-edges at places `i` and `j`, with their features and source slots.
    fn swap(&mut self, i: usize, j: usize) {
        self.edges.swap(i, j);
        for k in 0..self.dim {
            self.features.swap(i * self.dim + k, j * self.dim + k);
        }
        if !self.sources.is_empty() {
            self.sources.swap(i, j);
        }
    }

    fn run_start(&self, slot: usize) -> usize {
        if slot == 0 { 0 } else { self.cursor[slot - 1].end }
    }

    fn run_len(&self, slot: usize) -> usize {
        self.cursor[slot].end - self.run_start(slot)
    }

    /// Pushes the in-edges `slot` received, as keyed candidates of `dst`, onto `out`; each
    /// carries its place, where [`OwnedRuns::features`] finds its features. Places the slot's
    /// block first if it is still staged: `Err` names a slot of it that received more in-edges
    /// than its run holds.
    pub fn candidates(
        &mut self,
        slot: usize,
        sampler: Sampler,
        seed: u64,
        dst: i64,
        out: &mut Vec<Candidate<usize>>,
    ) -> Result<(), usize> {
        self.place(slot)?;
        let start = self.run_start(slot);
        let run = &self.edges[start..self.cursor[slot].next];
        out.extend(run.iter().enumerate().map(|(i, e)| {
            let place = start + i;
            Candidate::carrying(sampler, seed, dst, e.src, e.weight, self.features(place), place)
        }));
        Ok(())
    }

    /// The relation of the in-edge at `place` (a candidate's payload).
    pub fn relation(&self, place: usize) -> u8 {
        self.edges[place].relation
    }

    /// The features of the in-edge at `place` (a candidate's payload).
    pub fn features(&self, place: usize) -> &[f32] {
        &self.features[place * self.dim..(place + 1) * self.dim]
    }

    /// The source slot of the in-edge at `place` (`None` unless asked for).
    pub fn source(&self, place: usize) -> Option<u32> {
        self.sources.get(place).copied()
    }

    /// Writes `kept` (its in-edges with their `features`, `dim` each, and their source slots
    /// when asked for) as `slot`'s kept in-edges at `place`, the end of the previous slot's
    /// (see the module doc), and returns the end of `slot`'s. Slots are kept in order, each
    /// once, after its candidates were read: the write may cover its own run. Places the
    /// slot's block first if it is still staged. `Err` when they would reach past its run, or a
    /// slot of its block received more in-edges than its run holds: a bug upstream.
    pub fn keep(&mut self, slot: usize, place: usize, kept: &Kept) -> Result<usize, usize> {
        let end = place + kept.edges.len();
        if self.cursor.get(slot).is_none_or(|c| end > c.end) {
            return Err(slot);
        }
        // The write may reach into the slot's block, which must not be staged any more.
        self.place(slot)?;
        for (to, e) in self.edges[place..end].iter_mut().zip(&kept.edges) {
            *to = Staged::new(*e, 0);
        }
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
        // The same size and alignment: collected in place, into the same allocation.
        let edges = edges.into_iter().map(Staged::in_edge).collect();
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
    use cluster::hash::mix64;

    fn edge(src: i64, weight: f32) -> InEdge {
        InEdge { src, weight, relation: 0 }
    }

    #[test]
    fn runs_hold_each_slots_edges_whatever_the_order() {
        // One slot a block, two, and all three in one.
        for shift in [0, 1, MAX_SHIFT] {
            let mut runs = OwnedRuns::blocked([2u64, 0, 3].into_iter(), 1, true, shift);
            for (slot, src) in [(2, 20), (0, 1), (2, 21), (0, 2), (2, 22)] {
                runs.push(slot, edge(src, 1.0), src as u32 + 100, &[src as f32 * 10.0]).unwrap();
            }
            assert_eq!(runs.push(0, edge(3, 1.0), 0, &[0.0]), Err(0), "slot 0 has room for 2");
            assert_eq!(runs.push(1, edge(3, 1.0), 0, &[0.0]), Err(1), "slot 1 has none");
            assert_eq!(runs.push(3, edge(3, 1.0), 0, &[0.0]), Err(3), "no slot 3");
            let mut srcs = |slot| {
                let mut out = Vec::new();
                runs.candidates(slot, Sampler::All, 0, 9, &mut out).unwrap();
                let mut s: Vec<(i64, f32, u32)> =
                    out.iter().map(|c| (c.src, runs.features(c.payload)[0], runs.source(c.payload).unwrap())).collect();
                s.sort_by_key(|e| e.0);
                s
            };
            assert_eq!(srcs(2), vec![(20, 200.0, 120), (21, 210.0, 121), (22, 220.0, 122)], "shift {shift}");
            assert_eq!(srcs(0), vec![(1, 10.0, 101), (2, 20.0, 102)], "shift {shift}");
            assert!(srcs(1).is_empty());
            assert_eq!(runs.push(0, edge(3, 1.0), 0, &[0.0]), Err(0), "placed blocks take no more");
        }

        let mut runs = OwnedRuns::new([1u64].into_iter(), 0, false);
        runs.push(0, edge(5, 1.0), 7, &[]).unwrap();
        assert_eq!(runs.source(0), None, "source slots nobody asked for");
        assert!(runs.into_kept(1).sources.is_empty());
    }

    /// A slot that receives more than its run holds, while its block still has room, is found
    /// when the block is placed, by reading candidates or keeping, whichever comes first.
    #[test]
    fn an_overflowing_slot_is_named_when_its_block_is_placed() {
        for keeping in [false, true] {
            let mut runs = OwnedRuns::blocked([1u64, 2, 3].into_iter(), 0, false, MAX_SHIFT);
            for slot in [1, 1, 1, 2] {
                runs.push(slot, edge(1, 1.0), 0, &[]).unwrap();
            }
            let placed = if keeping {
                runs.keep(0, 0, &Kept::default()).map(|_| ())
            } else {
                runs.candidates(2, Sampler::All, 0, 9, &mut Vec::new())
            };
            assert_eq!(placed, Err(1), "slot 1's run holds 2");
        }
    }

    /// What a list per slot holds: (source, feature bits, source slot) of each in-edge.
    type SlotList = Vec<(i64, u32, u32)>;

    /// Each slot's arrivals (slot, source) in a scrambled order, and what a list per slot
    /// holds after them (source, feature bits, source slot), sorted: hubs (a run left empty,
    /// every tenth slot from 3) and runs filled but for one place (from 5).
    fn scrambled_arrivals(capacity: &[u64]) -> (Vec<(usize, i64)>, Vec<SlotList>) {
        let filled = |s: usize| match s % 10 {
            3 => 0,
            5 => capacity[s].saturating_sub(1),
            _ => capacity[s],
        };
        let slots = capacity.len();
        let mut arrivals: Vec<(usize, i64)> =
            (0..slots).flat_map(|s| (0..filled(s) as i64).map(move |k| (s, 1000 * s as i64 + k))).collect();
        arrivals.sort_by_key(|&(s, k)| mix64(k as u64 ^ (s as u64) << 40));
        let mut expected: Vec<SlotList> = vec![Vec::new(); slots];
        for &(s, src) in &arrivals {
            expected[s].push((src, (-src as f32).to_bits(), src as u32 + 1));
        }
        expected.iter_mut().for_each(|e| e.sort());
        (arrivals, expected)
    }

    /// Every slot's candidates checked against `expected` and kept whole, in slot order; the
    /// places kept.
    fn check_and_keep_each_slot(runs: &mut OwnedRuns, expected: &[SlotList], shift: u32) -> usize {
        let mut place = 0;
        for (slot, expected) in expected.iter().enumerate() {
            let mut out = Vec::new();
            runs.candidates(slot, Sampler::All, 0, 9, &mut out).unwrap();
            let mut got: SlotList = out
                .iter()
                .map(|c| (c.src, runs.features(c.payload)[0].to_bits(), runs.source(c.payload).unwrap()))
                .collect();
            got.sort();
            assert_eq!(&got, expected, "slot {slot}, shift {shift}");
            assert!(out.iter().all(|c| runs.features(c.payload)[1] == c.src as f32));
            let mut kept = Kept::default();
            for c in &out {
                kept.edges.push(edge(c.src, 1.0));
                kept.features.extend_from_slice(runs.features(c.payload));
                kept.sources.push(runs.source(c.payload).unwrap());
            }
            place = runs.keep(slot, place, &kept).unwrap();
        }
        place
    }

    /// Staged in blocks of any size and placed, each slot's run holds what it received, as a
    /// list per slot does: slots with no in-edges, slots whose run is room left empty (a hub's)
    /// or half filled, one slot larger than its block's share, edges arriving in a scrambled
    /// order; and the runs, kept whole, become the in-edges in slot order in their allocation.
    #[test]
    fn staged_blocks_place_what_a_list_per_slot_holds() {
        let slots = 300;
        let capacity: Vec<u64> = (0..slots as u64).map(|s| if s == 77 { 500 } else { mix64(s) % 9 }).collect();
        let (arrivals, expected) = scrambled_arrivals(&capacity);
        for shift in [0, 1, 3, 5, MAX_SHIFT, u32::MAX] {
            let mut runs = if shift == u32::MAX {
                OwnedRuns::new(capacity.iter().copied(), 2, true)
            } else {
                OwnedRuns::blocked(capacity.iter().copied(), 2, true, shift)
            };
            for &(s, src) in &arrivals {
                runs.push(s, edge(src, 1.0), src as u32 + 1, &[-src as f32, src as f32]).unwrap();
            }
            let place = check_and_keep_each_slot(&mut runs, &expected, shift);
            let allocation = runs.edges.as_ptr() as usize;
            let kept = runs.into_kept(place);
            assert_eq!(kept.edges.as_ptr() as usize, allocation, "collected in place");
            // Each slot's run, sorted, holds its expected sources, the runs in slot order.
            let all: Vec<i64> = expected.iter().flat_map(|e| e.iter().map(|x| x.0)).collect();
            let got: Vec<i64> = kept.edges.iter().map(|e| e.src).collect();
            let mut sorted_runs = Vec::new();
            let mut at = 0;
            for e in &expected {
                let mut run = got[at..at + e.len()].to_vec();
                run.sort();
                sorted_runs.extend(run);
                at += e.len();
            }
            assert_eq!(sorted_runs, all, "shift {shift}");
            assert_eq!(kept.sources.iter().zip(&got).filter(|(s, e)| **s != **e as u32 + 1).count(), 0);
        }
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
            runs.candidates(slot, Sampler::All, 0, 9, &mut best).unwrap();
            let mut kept: Vec<(InEdge, f32, u32)> = best
                .iter()
                .map(|c| (edge(c.src, 1.0), runs.features(c.payload)[0], runs.source(c.payload).unwrap()))
                .collect();
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
                runs.candidates(0, sampler, 5, 77, &mut best).unwrap();
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
                    runs.candidates(0, sampler, 5, 77, &mut best).unwrap();
                    keep_best(&mut best, limit);
                    let got: Vec<(i64, u32, Vec<u32>)> =
                        best.iter().map(|c| content(c.src, c.weight, runs.features(c.payload))).collect();
                    assert_eq!(got, expected, "{sampler:?}, limit {limit}, reversed {reversed}");
                }
            }
        }
    }
}
