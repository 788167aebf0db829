//! One worker's share of the learned embedding table: the rows of the nodes it owns
//! (`cluster::owner_key(id) % workers`, the owner every stage uses), their optimizer state, and
//! the sparse optimizers that update only the rows a step touched.
//!
//! A row is created when it is first pulled, from `(seed, id)` alone: the same initial row on
//! any cluster shape, and no pass over the node table before training (the trainer reads
//! records, not nodes). Memory: per row `D` floats, plus `2 D` for Adam's moments or one for
//! row-wise Adagrad's sum, plus the index (about 16 bytes).

use cluster::hash::IdMap;
use gnn::rng::Stream;
use schemas::job::{LearnedConfig, SparseOptimizerKind};

/// The seed tag of a learned row's initial values (`[seed, INIT, id]`).
const INIT: u64 = 0x1ea2_6ed0;

/// Rows, by id, with their optimizer state.
#[derive(Debug, Clone)]
pub struct RowShard {
    pub dim: usize,
    pub(super) config: LearnedConfig,
    seed: u64,
    index: IdMap<i64, u32>,
    /// Each row's id, in creation order.
    pub ids: Vec<i64>,
    /// `dim` values a row, in `ids` order.
    pub values: Vec<f32>,
    /// Adam: first and second moments, `dim` a row; Adagrad: the sum of squares in `first`,
    /// one a row.
    pub(super) first: Vec<f32>,
    pub(super) second: Vec<f32>,
    /// Optimizer steps this shard applied, each a step that touched one of its rows (Adam's bias
    /// correction; torch's `SparseAdam` counts its `step()` calls on the whole table).
    pub(super) steps: u64,
    /// The rows at the best validation epoch, when asked to keep them ([`RowShard::keep_best`]).
    pub(super) best: Option<Vec<f32>>,
    /// A graph keyed by strings: each row's original string, one after another, ending at its
    /// `key_ends` entry (slot order); empty for integer ids.
    pub(super) keys: String,
    pub(super) key_ends: Vec<usize>,
}

/// A row to save: its id and its slot here (for its values and original string).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SavedRow {
    pub id: i64,
    pub slot: usize,
}

/// Makes room in `array` for `more` values, growing it by an eighth (at least 4096 rows of
/// `more`) instead of doubling: the table's arrays are most of a shard's memory, and a doubled
/// array holds up to twice its values (what a process may take, and what a memory limit counts,
/// is its capacity), where an eighth holds 1.125 times them. Large arrays are reallocated by
/// moving their pages (`mremap`), not copying, so growing more often costs little.
fn grow(array: &mut Vec<f32>, more: usize) {
    if array.len() + more > array.capacity() {
        array.reserve_exact((array.len() / 8).max(more * 4096));
    }
}

/// `n` normal deviates with standard deviation `std`, from `stream` (Box-Muller).
fn normals(stream: &mut Stream, n: usize, std: f32) -> impl Iterator<Item = f32> + '_ {
    (0..n).map(move |_| {
        let (u, v) = (stream.unit().max(f32::MIN_POSITIVE), stream.unit());
        std * (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    })
}

impl RowShard {
    pub fn new(config: &LearnedConfig, seed: u64) -> Self {
        RowShard {
            dim: config.dim,
            config: config.clone(),
            seed,
            index: IdMap::default(),
            ids: Vec::new(),
            values: Vec::new(),
            first: Vec::new(),
            second: Vec::new(),
            steps: 0,
            best: None,
            keys: String::new(),
            key_ends: Vec::new(),
        }
    }

    /// Indexes the rows by id after their arrays were filled whole (a checkpoint read back).
    pub(super) fn reindex(&mut self) {
        self.index = IdMap::default();
        for (slot, &id) in self.ids.iter().enumerate() {
            self.index.insert(id, slot as u32);
        }
    }

    /// The optimizer's values a row in `first`: Adam's first moment, or Adagrad's one sum.
    pub(super) fn state_width(&self) -> usize {
        match self.config.optimizer {
            SparseOptimizerKind::Adam => self.dim,
            SparseOptimizerKind::Adagrad => 1,
        }
    }

    /// The optimizer's values a row in `second`: Adam's second moment, none for Adagrad.
    pub(super) fn second_width(&self) -> usize {
        match self.config.optimizer {
            SparseOptimizerKind::Adam => self.dim,
            SparseOptimizerKind::Adagrad => 0,
        }
    }

    /// Whether the rows carry original strings (a graph keyed by strings).
    pub fn has_keys(&self) -> bool {
        !self.key_ends.is_empty()
    }

    /// Slot `slot`'s original string (empty for integer ids).
    pub fn key(&self, slot: usize) -> &str {
        let Some(&end) = self.key_ends.get(slot) else { return "" };
        let from = if slot == 0 { 0 } else { self.key_ends[slot - 1] };
        &self.keys[from..end]
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The initial row of node `id`: `N(0, init_std)`, drawn from `(seed, id)` alone.
    pub fn initial(&self, id: i64) -> Vec<f32> {
        let mut stream = Stream::new(&[self.seed, INIT, id as u64]);
        normals(&mut stream, self.dim, self.config.init_std).collect()
    }

    /// The slot of `id`'s row, created with its initial values (and original string `key`,
    /// `None` for integer ids) if it is new.
    fn slot(&mut self, id: i64, key: Option<&str>) -> usize {
        if let Some(&slot) = self.index.get(&id) {
            return slot as usize;
        }
        if let Some(key) = key {
            self.keys.push_str(key);
            self.key_ends.push(self.keys.len());
        }
        let slot = self.ids.len();
        let initial = self.initial(id);
        grow(&mut self.values, self.dim);
        self.values.extend(initial);
        let state = self.state_width();
        grow(&mut self.first, state);
        self.first.extend(std::iter::repeat_n(0.0, state));
        let second = self.second_width();
        grow(&mut self.second, second);
        self.second.extend(std::iter::repeat_n(0.0, second));
        self.ids.push(id);
        self.index.insert(id, slot as u32);
        slot
    }

    /// The rows of `ids`, in order, `dim` values each; `keys`: their original strings (empty
    /// for integer ids).
    pub fn rows(&mut self, ids: &[i64], keys: &[String]) -> Vec<f32> {
        let mut out = Vec::with_capacity(ids.len() * self.dim);
        for (i, &id) in ids.iter().enumerate() {
            let slot = self.slot(id, keys.get(i).map(String::as_str));
            out.extend_from_slice(&self.values[slot * self.dim..(slot + 1) * self.dim]);
        }
        out
    }

    /// One optimizer step on the rows of `ids` with their mean gradients `grads` (`dim` a row,
    /// each id once) at learning rate `lr`; every other row and its state stay as they are.
    pub fn step(&mut self, ids: &[i64], grads: &[f32], lr: f32) {
        self.steps += 1;
        let (d, wd) = (self.dim, self.config.weight_decay);
        let t = self.steps.min(i32::MAX as u64) as i32;
        let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
        let (c1, c2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
        for (&id, g) in ids.iter().zip(grads.chunks(d)) {
            // Every row stepped was pulled first, so it exists (with its string).
            let slot = self.slot(id, None);
            let w = &mut self.values[slot * d..(slot + 1) * d];
            // The decayed gradient of value j, computed where it is used (no row buffer).
            let decayed = |j: usize, w: &[f32]| g[j] + wd * w[j];
            match self.config.optimizer {
                SparseOptimizerKind::Adam => {
                    let m = &mut self.first[slot * d..(slot + 1) * d];
                    let v = &mut self.second[slot * d..(slot + 1) * d];
                    // Zipped, not indexed: no bounds checks, so the loop vectorizes.
                    for (((w, m), v), &g) in w.iter_mut().zip(m).zip(v).zip(g) {
                        let g = g + wd * *w;
                        *m = b1 * *m + (1.0 - b1) * g;
                        *v = b2 * *v + (1.0 - b2) * g * g;
                        *w -= lr * (*m / c1) / ((*v / c2).sqrt() + eps);
                    }
                }
                SparseOptimizerKind::Adagrad => {
                    // Row-wise (PyTorch-BigGraph's): one accumulated mean square per row.
                    let sum = &mut self.first[slot];
                    *sum += (0..d).map(|j| decayed(j, w).powi(2)).sum::<f32>() / d as f32;
                    let scale = lr / (sum.sqrt() + 1e-10);
                    for j in 0..d {
                        w[j] -= scale * decayed(j, w);
                    }
                }
            }
        }
    }

    /// Keeps a copy of every row as it is now (the best validation epoch's).
    pub fn keep_best(&mut self) {
        self.best = Some(self.values.clone());
    }

    /// Each row, ascending by id (its values: [`RowShard::saved_values`]); a list of 16 bytes a
    /// row, so that saving copies no row but the batch being written.
    pub fn rows_to_save(&self) -> Vec<SavedRow> {
        let mut rows: Vec<SavedRow> = self.ids.iter().enumerate().map(|(slot, &id)| SavedRow { id, slot }).collect();
        rows.sort_unstable_by_key(|r| r.id);
        rows
    }

    /// The values `row` is saved with: the kept best copy with `best` where there is one (a row
    /// created after it had its initial values then), else the row as it is.
    pub fn saved_values(&self, row: SavedRow, best: bool) -> std::borrow::Cow<'_, [f32]> {
        let (d, slot) = (self.dim, row.slot);
        match self.best.as_ref().filter(|_| best) {
            Some(kept) if (slot + 1) * d <= kept.len() => std::borrow::Cow::Borrowed(&kept[slot * d..(slot + 1) * d]),
            Some(_) => std::borrow::Cow::Owned(self.initial(row.id)),
            None => std::borrow::Cow::Borrowed(&self.values[slot * d..(slot + 1) * d]),
        }
    }

    /// Bytes per row: the values, the optimizer state and the index.
    pub fn bytes_per_row(&self) -> usize {
        4 * (self.dim + self.state_width() + self.second_width()) + 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(optimizer: SparseOptimizerKind) -> LearnedConfig {
        LearnedConfig { dim: 3, optimizer, lr: None, init_std: 1.0, weight_decay: 0.0 }
    }

    #[test]
    fn a_row_starts_from_its_seed_and_id_alone() {
        let mut a = RowShard::new(&config(SparseOptimizerKind::Adam), 7);
        let mut b = RowShard::new(&config(SparseOptimizerKind::Adam), 7);
        let x = a.rows(&[5, 9], &[]);
        let y = b.rows(&[9, 1, 5], &[]);
        assert_eq!((&x[..3], &x[3..]), (&y[6..], &y[..3]));
        assert_ne!(x[..3], x[3..]);
        // The deviates have about the asked spread.
        let mut many = RowShard::new(&LearnedConfig { dim: 1000, ..config(SparseOptimizerKind::Adam) }, 1);
        let values = many.rows(&[3], &[]);
        let var = values.iter().map(|v| v * v).sum::<f32>() / 1000.0;
        assert!((var - 1.0).abs() < 0.15, "variance {var}");
    }

    #[test]
    fn a_step_moves_only_the_rows_it_names_as_the_dense_rules_do() {
        for kind in [SparseOptimizerKind::Adam, SparseOptimizerKind::Adagrad] {
            let mut shard = RowShard::new(&config(kind), 1);
            let before = shard.rows(&[1, 2], &[]);
            let g = [0.5, -1.0, 2.0];
            shard.step(&[2], &g, 0.1);
            let after = shard.rows(&[1, 2], &[]);
            assert_eq!(before[..3], after[..3], "{kind:?}: an untouched row stays");
            let moved: Vec<f32> = before[3..].iter().zip(&after[3..]).map(|(b, a)| b - a).collect();
            let expected: Vec<f32> = match kind {
                // Adam's first step moves each value by lr times the gradient's sign.
                SparseOptimizerKind::Adam => g.iter().map(|g| 0.1 * g.signum()).collect(),
                // Row-wise Adagrad: lr g / sqrt(mean g^2).
                SparseOptimizerKind::Adagrad => {
                    let rms = (g.iter().map(|g| g * g).sum::<f32>() / 3.0).sqrt();
                    g.iter().map(|g| 0.1 * g / rms).collect()
                }
            };
            for (m, e) in moved.iter().zip(&expected) {
                assert!((m - e).abs() < 1e-5, "{kind:?}: {moved:?} vs {expected:?}");
            }
        }
    }

    #[test]
    fn the_saved_rows_are_the_kept_best_ones_sorted_by_id() {
        let mut shard = RowShard::new(&config(SparseOptimizerKind::Adagrad), 1);
        let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        let first = shard.rows(&[8, 3], &keys(&["h", "c"]));
        shard.keep_best();
        shard.step(&[8], &[1.0, 1.0, 1.0], 0.5);
        let late = shard.rows(&[4], &keys(&["d"]));
        // A row pulled again keeps the string it was created with.
        shard.rows(&[3], &keys(&["other"]));
        let saved = shard.rows_to_save();
        assert_eq!(saved.iter().map(|r| r.id).collect::<Vec<_>>(), vec![3, 4, 8]);
        assert_eq!(saved.iter().map(|r| shard.key(r.slot)).collect::<Vec<_>>(), vec!["c", "d", "h"]);
        let best: Vec<Vec<f32>> = saved.iter().map(|&r| shard.saved_values(r, true).to_vec()).collect();
        assert_eq!((&best[2][..], &best[0][..], &best[1][..]), (&first[..3], &first[3..], &late[..]));
        assert_ne!(&shard.saved_values(saved[2], false)[..], &first[..3]);
    }
}
