//! One worker's share of the histories: a row per node it owns (`crate::learned::owner`), set
//! whole by a refresh and read by any worker's steps.
//!
//! Invariant: a row is `width` values, and a node has at most one. A refresh sets every node's
//! row anew, so a row read after a refresh is that refresh's.
//!
//! Reads are the hot loop: an epoch reads a row per in-edge of the graph (10M random reads at
//! 1M nodes, into a table larger than the caches). The index is a [`cluster::IdTable`] (one
//! cache line a lookup, where a SwissTable takes two), and [`HistoryShard::get`] asks for the
//! lines it will need `AHEAD` ids early, so that the misses of consecutive ids overlap.

use cluster::IdTable;

/// How many ids ahead `get` asks for their lines: about the misses a core keeps in flight.
const AHEAD: usize = 8;

/// This worker's rows: the `width` values of each node it owns, by node id.
#[derive(Debug, Clone)]
pub struct HistoryShard {
    pub width: usize,
    /// The row of each id: its offset in `values` over `width`.
    at: IdTable<usize>,
    values: Vec<f32>,
}

impl HistoryShard {
    pub fn new(width: usize) -> Self {
        HistoryShard { width, at: IdTable::default(), values: Vec::new() }
    }

    /// Nodes with a row.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Sets the rows of `ids`, `width` values each in `values`, in `ids` order.
    pub fn set(&mut self, ids: &[i64], values: &[f32]) {
        let width = self.width;
        for (&id, row) in ids.iter().zip(values.chunks_exact(width.max(1))) {
            let next = self.at.len();
            let (&mut at, new) = self.at.get_or_insert_with(id, || next);
            if new {
                self.values.extend_from_slice(row);
            } else {
                self.values[at * width..(at + 1) * width].copy_from_slice(row);
            }
        }
    }

    /// The rows of `ids` in `ids` order, or the first id without one.
    pub fn get(&self, ids: &[i64]) -> Result<Vec<f32>, i64> {
        let width = self.width;
        // Phase 1: each id's row, its index line asked for AHEAD ids early.
        let mut rows = Vec::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            if let Some(&later) = ids.get(i + AHEAD) {
                self.at.prefetch(later);
            }
            rows.push(self.at.get(id).ok_or(id)?);
        }
        // Phase 2: the copies, each row's line asked for AHEAD rows early.
        let mut out = Vec::with_capacity(ids.len() * width);
        for (i, &at) in rows.iter().enumerate() {
            if let Some(&later) = rows.get(i + AHEAD).filter(|_| width > 0) {
                cluster::prefetch::read(&self.values[later * width]);
            }
            out.extend_from_slice(&self.values[at * width..(at + 1) * width]);
        }
        Ok(out)
    }

    /// Bytes held: the rows and their index.
    pub fn bytes(&self) -> usize {
        4 * self.values.capacity() + self.at.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_set_again_replaces_the_old_and_an_unknown_id_is_named() {
        let mut shard = HistoryShard::new(2);
        shard.set(&[7, 3], &[1.0, 2.0, 3.0, 4.0]);
        shard.set(&[3, 9], &[5.0, 6.0, 7.0, 8.0]);
        assert_eq!(shard.len(), 3);
        assert_eq!(shard.get(&[9, 7, 3]), Ok(vec![7.0, 8.0, 1.0, 2.0, 5.0, 6.0]));
        assert_eq!(shard.get(&[7, 4, 5]), Err(4));
    }

    /// Reads longer than the prefetch distance, of ids set in another order, against the rows set;
    /// `i64::MIN` and negative ids included.
    #[test]
    fn a_long_read_returns_every_row_in_the_order_asked() {
        let width = 3;
        let ids: Vec<i64> = (0..500).map(|i| (i * 7919) % 1009 - 500).chain([i64::MIN, i64::MAX]).collect();
        let row = |id: i64| (0..width).map(|k| (id as f32) * 0.5 + k as f32).collect::<Vec<f32>>();
        let mut shard = HistoryShard::new(width);
        let mut reversed = ids.clone();
        reversed.reverse();
        shard.set(&reversed, &reversed.iter().flat_map(|&id| row(id)).collect::<Vec<_>>());
        let asked: Vec<i64> = ids.iter().copied().step_by(3).chain(ids.iter().copied().take(40)).collect();
        assert_eq!(shard.get(&asked), Ok(asked.iter().flat_map(|&id| row(id)).collect()));
        assert_eq!(shard.get(&[ids[0], 12345]), Err(12345));
        assert_eq!(HistoryShard::new(0).get(&[]), Ok(vec![]));
    }
}
