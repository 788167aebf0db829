//! SANCUS's exchange: a halo row is sent only when it has moved enough since it was last sent,
//! or when the copy its readers hold is `epochs` epochs old; otherwise the readers reuse their
//! copy. Gradients go back the same way: a reader sends a halo row's gradient only when it has
//! moved enough since the last it sent (or is as old), and the owner reuses the last it got.
//!
//! "Moved enough": `|new - last|_2 > threshold x |last|_2`, per row. A row's decision is the
//! owner's (forward) or the reader's (backward), made once for all its receivers, so every
//! reader of a row holds the same copy and the run stays the same on any arrival order. With
//! `epochs = 0` the exchange is exact and this module is not used ([`Halo::pull`],
//! [`Halo::push_back`]).
//!
//! What it keeps, per exchanged layer: the owner, the last row sent of each of its rows that
//! some worker reads and its age; the reader, its copies of the halo rows. Backward, the
//! reader keeps the last gradient it sent of each halo row and its age; the owner, the last
//! gradient it got from each reader for each row. Each is a halo's worth of rows (see
//! `docs/full-graph.md`).
//!
//! [`Traffic`] counts what crossed against what the exact exchange would have sent: rows and
//! bytes (a skipped row costs nothing; a sent row its values, at the wire's precision, and its
//! position, 4 bytes), the exact exchange's at 4 bytes a value.

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::full::halo::Halo;
use crate::full::wire::{self, Precision, Values};

/// How stale a halo row may get (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Staleness {
    /// Epochs a copy may be reused; 0: the exchange is exact.
    pub epochs: u32,
    /// The relative change below which a row is not sent.
    pub threshold: f32,
}

/// What crossed between workers, against the exact exchange.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Traffic {
    pub rows: u64,
    pub exact_rows: u64,
    pub bytes: u64,
    pub exact_bytes: u64,
}

impl Traffic {
    pub fn add(&mut self, other: Traffic) {
        self.rows += other.rows;
        self.exact_rows += other.exact_rows;
        self.bytes += other.bytes;
        self.exact_bytes += other.exact_bytes;
    }

    /// `rows` of `width` values sent at `precision`, of `exact` the exact exchange sends.
    pub fn count(&mut self, rows: usize, exact: usize, width: usize, precision: Precision) {
        self.rows += rows as u64;
        self.exact_rows += exact as u64;
        // A row skipped by no one goes without its position: the exact exchange's lists.
        let positions = if rows == exact { 0 } else { rows };
        self.bytes += (rows * width * wire::value_bytes(precision) + positions * 4) as u64;
        self.exact_bytes += (exact * width * 4) as u64;
    }
}

/// Rows of a list that changed: their positions in the list and their values.
#[derive(Debug, Clone)]
struct Changed {
    to: u32,
    from: u32,
    positions: Vec<u32>,
    values: Vec<f32>,
}

/// [`Changed`] as it crosses, its values at the wire's precision.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sent {
    to: u32,
    from: u32,
    positions: Vec<u32>,
    values: Values,
}

/// One exchanged layer's copies (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct LayerCopies {
    /// Owner: the last row sent of each row some reader reads (by [`Halo::read_rows`] index).
    sent: Vec<f32>,
    sent_age: Vec<u32>,
    /// Reader: the halo rows as last received.
    copies: Vec<f32>,
    /// Reader: the last gradient sent of each halo row.
    grads_sent: Vec<f32>,
    grads_age: Vec<u32>,
    /// Owner: per reader, the last gradient got for each position of its list.
    grads_got: Vec<Vec<f32>>,
}

/// Whether `row` differs from `last` enough to be sent (it always is when `age` reached the
/// bound, or when nothing was sent yet: `fresh`).
fn moved(row: &[f32], last: &[f32], age: u32, fresh: bool, s: Staleness) -> bool {
    if fresh || age >= s.epochs {
        return true;
    }
    let (mut change, mut norm) = (0f32, 0f32);
    for (a, b) in row.iter().zip(last) {
        change += (a - b) * (a - b);
        norm += b * b;
    }
    change > s.threshold * s.threshold * norm
}

/// For each row of `rows` (`width` values each), whether it is sent; `last` and `age` follow.
fn decide(rows: &[f32], last: &mut Vec<f32>, age: &mut Vec<u32>, width: usize, s: Staleness) -> Vec<bool> {
    let n = rows.len() / width.max(1);
    let fresh = last.len() != rows.len();
    if fresh {
        *last = vec![0.0; rows.len()];
        *age = vec![0; n];
    }
    let mut sent = vec![false; n];
    for i in 0..n {
        let (row, was) = (&rows[i * width..(i + 1) * width], &mut last[i * width..(i + 1) * width]);
        sent[i] = moved(row, was, age[i], fresh, s);
        if sent[i] {
            was.copy_from_slice(row);
            age[i] = 0;
        } else {
            age[i] += 1;
        }
    }
    sent
}

/// Rows a message carries at most: a list's changed rows are cut into chunks (positions are
/// absolute, so chunks may arrive in any order).
const CHUNK_ROWS: usize = 1 << 16;

/// `changed` cut into messages of at most [`CHUNK_ROWS`] rows, at `precision`.
fn chunks(changed: Changed, width: usize, precision: Precision) -> Vec<Sent> {
    let Changed { to, from, positions, values } = changed;
    if positions.len() <= CHUNK_ROWS {
        return vec![Sent { to, from, positions, values: Values::encode(values, precision) }];
    }
    positions
        .chunks(CHUNK_ROWS)
        .zip(values.chunks(CHUNK_ROWS * width))
        .map(|(p, v)| Sent { to, from, positions: p.to_vec(), values: Values::encode(v.to_vec(), precision) })
        .collect()
}

/// Sends `out` to its `to`s; returns what arrived here, in (sender, first position) order.
fn trade(worker: &mut Worker, out: Vec<Sent>) -> Vec<Changed> {
    let mut received = cluster::exchange(worker, out, |c: &Sent| u64::from(c.to));
    received.sort_unstable_by_key(|c| (c.from, c.positions.first().copied()));
    let decode = |c: Sent| Changed { to: c.to, from: c.from, positions: c.positions, values: c.values.decode() };
    received.into_iter().map(decode).collect()
}

impl Halo {
    /// [`Halo::pull`] with stale copies: returns this worker's halo rows, fresh where their
    /// owners sent them, its copies elsewhere. Rows cross at `precision`, rounded before the
    /// decision (the last row sent is what its readers hold).
    pub fn pull_stale(
        &self,
        worker: &mut Worker,
        cache: &mut LayerCopies,
        own_rows: &[f32],
        width: usize,
        (s, precision): (Staleness, Precision),
        traffic: &mut Traffic,
    ) -> Vec<f32> {
        let read = self.read_rows();
        let mut rows = Vec::with_capacity(read.len() * width);
        read.iter().for_each(|&slot| rows.extend_from_slice(&own_rows[slot as usize * width..][..width]));
        wire::round(&mut rows, precision);
        let sent = decide(&rows, &mut cache.sent, &mut cache.sent_age, width, s);
        let mut out = Vec::new();
        for (reader, list) in self.lists_by_reader() {
            let mut changed =
                Changed { to: reader as u32, from: self.index() as u32, positions: Vec::new(), values: Vec::new() };
            for (p, &slot) in list.iter().enumerate() {
                let at = self.read_row_of(slot);
                if sent[at] {
                    changed.positions.push(p as u32);
                    changed.values.extend_from_slice(&rows[at * width..(at + 1) * width]);
                }
            }
            traffic.count(changed.positions.len(), list.len(), width, precision);
            out.extend(chunks(changed, width, precision));
        }
        if cache.copies.len() != self.len() * width {
            cache.copies = vec![0.0; self.len() * width];
        }
        for changed in trade(worker, out) {
            let rows = self.rows_from(changed.from as usize);
            for (&p, values) in changed.positions.iter().zip(changed.values.chunks(width)) {
                let row = rows[p as usize] as usize;
                cache.copies[row * width..(row + 1) * width].copy_from_slice(values);
            }
        }
        cache.copies.clone()
    }

    /// [`Halo::push_back`] with stale gradients: adds to `own_grads` the last gradient got from
    /// every reader for each of its rows. Gradients cross at `precision`, rounded as rows are.
    #[allow(clippy::too_many_arguments)]
    pub fn push_back_stale(
        &self,
        worker: &mut Worker,
        cache: &mut LayerCopies,
        halo_grads: &[f32],
        width: usize,
        own_grads: &mut [f32],
        (s, precision): (Staleness, Precision),
        traffic: &mut Traffic,
    ) {
        let mut halo_grads = halo_grads.to_vec();
        wire::round(&mut halo_grads, precision);
        let sent = decide(&halo_grads, &mut cache.grads_sent, &mut cache.grads_age, width, s);
        let mut out = Vec::new();
        for (owner, rows) in self.rows_by_owner() {
            let mut changed =
                Changed { to: owner as u32, from: self.index() as u32, positions: Vec::new(), values: Vec::new() };
            for (p, &row) in rows.iter().enumerate().filter(|(_, r)| sent[**r as usize]) {
                changed.positions.push(p as u32);
                changed.values.extend_from_slice(&halo_grads[row as usize * width..(row as usize + 1) * width]);
            }
            traffic.count(changed.positions.len(), rows.len(), width, precision);
            out.extend(chunks(changed, width, precision));
        }
        let received = trade(worker, out);
        if cache.grads_got.is_empty() {
            cache.grads_got = self.lists_by_reader().map(|(_, list)| vec![0.0; list.len() * width]).collect();
        }
        for changed in received {
            let got = &mut cache.grads_got[changed.from as usize];
            for (&p, values) in changed.positions.iter().zip(changed.values.chunks(width)) {
                got[p as usize * width..(p as usize + 1) * width].copy_from_slice(values);
            }
        }
        // Every reader's last gradients, in (reader, position) order.
        for ((_, list), got) in self.lists_by_reader().zip(&cache.grads_got) {
            for (&slot, values) in list.iter().zip(got.chunks(width)) {
                let own = &mut own_grads[slot as usize * width..(slot as usize + 1) * width];
                own.iter_mut().zip(values).for_each(|(g, v)| *g += v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Staleness = Staleness { epochs: 2, threshold: 0.1 };

    #[test]
    fn a_row_is_sent_first_then_when_it_moved_or_its_copy_is_too_old() {
        let (mut last, mut age) = (Vec::new(), Vec::new());
        // Two rows of 2: everything goes the first time.
        assert_eq!(decide(&[1.0, 0.0, 0.0, 1.0], &mut last, &mut age, 2, S), vec![true, true]);
        // Row 0 moved by 5% (kept), row 1 by 50% (sent).
        assert_eq!(decide(&[1.05, 0.0, 0.0, 1.5], &mut last, &mut age, 2, S), vec![false, true]);
        assert_eq!(last, vec![1.0, 0.0, 0.0, 1.5], "the last row sent, not the last row");
        // Row 0 reused once more (age 1 < 2), then sent at age 2 although it never moved enough.
        assert_eq!(decide(&[1.05, 0.0, 0.0, 1.5], &mut last, &mut age, 2, S), vec![false, false]);
        assert_eq!(decide(&[1.05, 0.0, 0.0, 1.5], &mut last, &mut age, 2, S), vec![true, false]);
        assert_eq!(last[..2], [1.05, 0.0]);
    }

    #[test]
    fn a_threshold_of_zero_sends_every_row_that_changed_at_all() {
        let s = Staleness { epochs: 5, threshold: 0.0 };
        let (mut last, mut age) = (Vec::new(), Vec::new());
        decide(&[1.0, 2.0], &mut last, &mut age, 1, s);
        assert_eq!(decide(&[1.0, 2.000_001], &mut last, &mut age, 1, s), vec![false, true]);
    }

    #[test]
    fn traffic_counts_positions_only_when_rows_were_skipped() {
        let mut t = Traffic::default();
        t.count(10, 10, 4, Precision::F32);
        assert_eq!((t.bytes, t.exact_bytes), (160, 160));
        t.count(5, 10, 4, Precision::F32);
        assert_eq!((t.rows, t.exact_rows, t.bytes, t.exact_bytes), (15, 20, 160 + 100, 320));
        // bfloat16: 2 bytes a value, positions still 4; the exact exchange's at 4 a value.
        t.count(5, 10, 4, Precision::Bf16);
        assert_eq!((t.bytes, t.exact_bytes), (260 + 40 + 20, 480));
    }
}
