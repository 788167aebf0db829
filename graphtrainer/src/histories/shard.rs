//! One worker's share of the histories: a row per node it owns (`crate::learned::owner`), set
//! whole by a refresh and read by any worker's steps.
//!
//! Invariant: a row is `width` values, and a node has at most one. A refresh sets every node's
//! row anew, so a row read after a refresh is that refresh's.

use cluster::hash::IdMap;

/// This worker's rows: the `width` values of each node it owns, by node id.
#[derive(Debug, Clone)]
pub struct HistoryShard {
    pub width: usize,
    at: IdMap<i64, usize>,
    values: Vec<f32>,
}

impl HistoryShard {
    pub fn new(width: usize) -> Self {
        HistoryShard { width, at: IdMap::default(), values: Vec::new() }
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
            let next = self.values.len() / width.max(1);
            let at = *self.at.entry(id).or_insert(next);
            if at == next {
                self.values.extend_from_slice(row);
            } else {
                self.values[at * width..(at + 1) * width].copy_from_slice(row);
            }
        }
    }

    /// The rows of `ids` in `ids` order, or the first id without one.
    pub fn get(&self, ids: &[i64]) -> Result<Vec<f32>, i64> {
        let width = self.width;
        let mut out = Vec::with_capacity(ids.len() * width);
        for &id in ids {
            let at = *self.at.get(&id).ok_or(id)?;
            out.extend_from_slice(&self.values[at * width..(at + 1) * width]);
        }
        Ok(out)
    }

    /// Bytes held: the rows and their index.
    pub fn bytes(&self) -> usize {
        4 * self.values.capacity() + 16 * self.at.capacity()
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
}
