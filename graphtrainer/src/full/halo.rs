//! The halo: the rows of remote in-neighbors a worker reads, and the two exchanges over them,
//! rows forward ([`Halo::pull`]) and their gradients backward ([`Halo::push_back`]).
//!
//! Built once after round 0 ([`Halo::plan`], over [`in_edge_sources`] and the split hubs'
//! runs). Every in-edge arrived with its source's slot at
//! the source's owner (`NodeStore::take_source_slots`, with the `ELSEWHERE` bit when that is
//! another worker), so a remote source is (owner, slot),
//! found without an id lookup. The reader numbers its remote sources in first-read order (its
//! input row `own + i`) and sends each owner the slots it reads, in that order: its *list*.
//! From then on both sides name a row by its position in the list. An owner sends a reader's
//! rows in list order and the reader copies them into its halo rows in the same order; no id
//! crosses the wire, only the rows (chunks carry their first position, so arrival order does
//! not matter).
//!
//! Backward runs the same lists the other way: a reader sends the gradients of its halo rows
//! to their owners, which add them to their own rows' gradients. An owner adds what it
//! receives in (reader, position) order, so the sums have one order on every run of one
//! cluster shape; on another shape they are the same terms in another order (equal to float
//! rounding, not bit for bit).

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use cluster::IdTable;
use sampling::{ELSEWHERE, NodeStore};

use crate::full::wire::{Precision, Values};

/// Values a message carries at most (4 MiB of `f32`): a reader's rows are cut into chunks.
const CHUNK_VALUES: usize = 1 << 20;

/// What crosses the wire: rows of a list (or their gradients, or degrees), from position `at`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Rows {
    to: u32,
    from: u32,
    at: u32,
    values: Values,
}

/// A reader's list, to the owner of its rows (sent once, by [`Halo::plan`] as slots, by
/// [`Halo::of_ids`] as node ids).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct List<T> {
    to: u32,
    from: u32,
    at: u32,
    rows: Vec<T>,
}

/// One worker's halo (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Halo {
    me: usize,
    peers: usize,
    /// Rows this worker owns: its input rows `0..own`; halo row `i` is input row `own + i`.
    pub own: usize,
    /// Each halo row's node id.
    pub ids: Vec<i64>,
    /// Each halo row's in-degree (GCN's coefficients read it).
    pub degrees: Vec<f32>,
    /// Per owner, the halo rows its list fills, in list order.
    reads: Vec<Vec<u32>>,
    /// Per reader, this worker's slots in the reader's list, in list order.
    sends: Vec<Vec<u32>>,
    /// This worker's slots some worker reads, ascending, and each own slot's place among
    /// them (`u32::MAX`: read by no one): the stale exchange decides once per row.
    read: Vec<u32>,
    read_at: Vec<u32>,
}

/// A node a worker reads: its id, its owner and its slot there.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    pub id: i64,
    pub owner: usize,
    pub slot: u32,
}

/// The sources of the in-edges of `nodes`' own slots but those `skip` names, in slot order,
/// then in-edge order; `source_slots` is aligned with the in-edges
/// (`NodeStore::take_source_slots`: the slot at the source's owner, with the [`ELSEWHERE`]
/// bit when that is another worker).
pub fn in_edge_sources<'a>(
    nodes: &'a NodeStore,
    source_slots: &'a [u32],
    skip: impl Fn(usize) -> bool + 'a,
) -> impl Iterator<Item = Source> + 'a {
    let mut first = 0;
    (0..nodes.len()).flat_map(move |slot| {
        let edges = nodes.sampled(slot);
        let at = first;
        first += edges.len();
        let edges = if skip(slot) { &edges[..0] } else { edges };
        edges.iter().zip(&source_slots[at..]).map(|(edge, &s)| Source {
            id: edge.src,
            owner: nodes.owners.of(edge.src),
            slot: s & !ELSEWHERE,
        })
    })
}

/// Where a worker's nodes are: each node's owner and, for its own nodes, their slots (what
/// [`Halo::of_ids`] reads, kept after the node store is dropped).
#[derive(Debug, Clone)]
pub struct Directory {
    owners: cluster::Owners,
    slots: IdTable<u32>,
    own: usize,
}

impl Directory {
    pub fn of(nodes: &NodeStore) -> Directory {
        let mut slots = IdTable::with_capacity(nodes.len());
        for (slot, &id) in nodes.ids.iter().enumerate() {
            slots.get_or_insert_with(id, || slot as u32);
        }
        Directory { owners: nodes.owners.clone(), slots, own: nodes.len() }
    }

    fn slot(&self, id: i64) -> Option<usize> {
        self.slots.get(id).map(|s| s as usize)
    }
}

/// Rows of `width` values a chunk holds.
fn chunk_rows(width: usize) -> usize {
    (CHUNK_VALUES / width.max(1)).max(1)
}

/// Sends every message to its `to`; returns what arrived here, in (sender, position) order.
fn trade(worker: &mut Worker, out: Vec<Rows>) -> Vec<Rows> {
    let mut received = cluster::exchange(worker, out, |r: &Rows| u64::from(r.to));
    received.sort_unstable_by_key(|r| (r.from, r.at));
    received
}

impl Halo {
    /// The halo of the sources this worker reads, and each source's input row: an own slot,
    /// or `own +` its halo row. `sources` are its nodes' in-edges' (in slot order, then in-edge
    /// order; a split hub's none) and then its hub runs' (`crate::full::hubs`). Every worker
    /// calls it in step.
    pub fn plan(worker: &mut Worker, nodes: &NodeStore, sources: impl Iterator<Item = Source>) -> (Halo, Vec<i64>) {
        let (me, peers) = (worker.index(), worker.peers());
        let own = nodes.len();
        let mut halo = Halo { me, peers, own, reads: vec![Vec::new(); peers], ..Halo::default() };
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); peers];
        // Each remote source's halo row, by (owner, slot) packed into one key: a lookup per edge.
        let mut found: IdTable<u32> = IdTable::default();
        let mut rows = Vec::with_capacity(sources.size_hint().0);
        for Source { id, owner, slot } in sources {
            if owner == me {
                rows.push(i64::from(slot));
                continue;
            }
            rows.push(halo.remote_row(
                &mut found,
                &mut lists,
                ((owner as i64) << 32) | i64::from(slot),
                (id, owner, slot),
            ));
        }
        halo.sends = halo.tell_owners(worker, lists);
        halo.index_reads();
        halo.degrees = halo.pull(worker, &nodes.in_degree.iter().map(|&d| d as f32).collect::<Vec<_>>(), 1);
        (halo, rows)
    }

    /// The halo of the nodes `ids` names, read for something other than in-edges (a link
    /// pair's endpoints), and each id's input row: its own slot, or `own +` its halo row. The
    /// owners find the ids' slots in their [`Directory`]. Every worker calls it in step;
    /// `None` on every worker when an id names a node no worker holds (the tables' checks rule
    /// that out).
    pub fn of_ids(worker: &mut Worker, nodes: &Directory, ids: &[i64]) -> Option<(Halo, Vec<i64>)> {
        let (me, peers) = (worker.index(), worker.peers());
        let own = nodes.own;
        let mut halo = Halo { me, peers, own, reads: vec![Vec::new(); peers], ..Halo::default() };
        let mut lists: Vec<Vec<i64>> = vec![Vec::new(); peers];
        let mut found: IdTable<u32> = IdTable::default();
        let mut rows = Vec::with_capacity(ids.len());
        let mut missing = false;
        for &id in ids {
            let owner = nodes.owners.of(id);
            if owner == me {
                let slot = nodes.slot(id);
                missing |= slot.is_none();
                rows.push(slot.map_or(0, |s| s as i64));
                continue;
            }
            rows.push(halo.remote_row(&mut found, &mut lists, id, (id, owner, id)));
        }
        for list in halo.tell_owners(worker, lists) {
            let slots: Vec<u32> = list.iter().map(|&id| nodes.slot(id).map_or(u32::MAX, |s| s as u32)).collect();
            missing |= slots.contains(&u32::MAX);
            halo.sends.push(slots);
        }
        if missing {
            halo.sends.iter_mut().flatten().for_each(|s| *s = 0);
        }
        halo.index_reads();
        let failed = cluster::sum(worker, u64::from(missing));
        (failed == 0).then_some((halo, rows))
    }

    /// The input row of remote node `id`, found by `key`: the first time, a new halo row,
    /// named `item` in the list of its `owner`.
    fn remote_row<T>(
        &mut self,
        found: &mut IdTable<u32>,
        lists: &mut [Vec<T>],
        key: i64,
        read: (i64, usize, T),
    ) -> i64 {
        let (id, owner, item) = read;
        let next = self.ids.len() as u32;
        let (row, new) = found.get_or_insert_with(key, || next);
        let row = *row;
        if new {
            self.ids.push(id);
            self.reads[owner].push(row);
            lists[owner].push(item);
        }
        (self.own + row as usize) as i64
    }

    /// Which own slots some reader reads, and where each is among them.
    fn index_reads(&mut self) {
        self.read = self.sends.iter().flatten().copied().collect();
        self.read.sort_unstable();
        self.read.dedup();
        self.read_at = vec![u32::MAX; self.own];
        self.read.iter().enumerate().for_each(|(i, &slot)| self.read_at[slot as usize] = i as u32);
    }

    /// Sends each owner this worker's list of its rows (slots or ids); returns the lists of
    /// every reader of this worker's own rows, by reader.
    fn tell_owners<T>(&self, worker: &mut Worker, lists: Vec<Vec<T>>) -> Vec<Vec<T>>
    where
        T: timely::ExchangeData + Clone,
    {
        let mut out = Vec::new();
        for (owner, list) in lists.into_iter().enumerate() {
            for (c, chunk) in list.chunks(CHUNK_VALUES).enumerate() {
                let at = (c * CHUNK_VALUES) as u32;
                out.push(List { to: owner as u32, from: self.me as u32, at, rows: chunk.to_vec() });
            }
        }
        let mut received = cluster::exchange(worker, out, |l: &List<T>| u64::from(l.to));
        received.sort_unstable_by_key(|l| (l.from, l.at));
        let mut sends = vec![Vec::new(); self.peers];
        for list in received {
            sends[list.from as usize].extend(list.rows);
        }
        sends
    }

    /// This worker's index.
    pub fn index(&self) -> usize {
        self.me
    }

    /// This worker's slots some worker reads, ascending.
    pub fn read_rows(&self) -> &[u32] {
        &self.read
    }

    /// Where own slot `slot` is in [`Halo::read_rows`] (it must be read).
    pub fn read_row_of(&self, slot: u32) -> usize {
        self.read_at[slot as usize] as usize
    }

    /// Each reader's list of this worker's slots, by reader.
    pub fn lists_by_reader(&self) -> impl Iterator<Item = (usize, &[u32])> {
        self.sends.iter().map(Vec::as_slice).enumerate()
    }

    /// Each owner's halo rows (0-based in the halo), in its list's order, by owner.
    pub fn rows_by_owner(&self) -> impl Iterator<Item = (usize, &[u32])> {
        self.reads.iter().map(Vec::as_slice).enumerate()
    }

    /// The halo rows `owner`'s list fills, in list order.
    pub fn rows_from(&self, owner: usize) -> &[u32] {
        &self.reads[owner]
    }

    /// Halo rows this worker reads (input rows past its own).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Rows every pull sends from this worker (the lists of its readers, together).
    pub fn rows_sent(&self) -> usize {
        self.sends.iter().map(Vec::len).sum()
    }

    /// The rows `lists[w]` names of `rows` (`width` each), to each worker `w`, in list order and
    /// in chunks that carry their first position.
    fn messages(&self, lists: &[Vec<u32>], rows: &[f32], width: usize, precision: Precision) -> Vec<Rows> {
        let mut out = Vec::new();
        for (to, list) in lists.iter().enumerate() {
            for (c, chunk) in list.chunks(chunk_rows(width)).enumerate() {
                let mut values = Vec::with_capacity(chunk.len() * width);
                for &row in chunk {
                    values.extend_from_slice(&rows[row as usize * width..(row as usize + 1) * width]);
                }
                let at = (c * chunk_rows(width)) as u32;
                let values = Values::encode(values, precision);
                out.push(Rows { to: to as u32, from: self.me as u32, at, values });
            }
        }
        out
    }

    /// The halo's copies of `own_rows` (this worker's rows, `width` each) on every worker:
    /// this worker's halo rows, `width` each. Every worker calls it in step.
    pub fn pull(&self, worker: &mut Worker, own_rows: &[f32], width: usize) -> Vec<f32> {
        self.pull_at(worker, own_rows, width, Precision::F32)
    }

    /// [`Halo::pull`], the rows crossing at `precision` (`crate::full::wire`).
    pub fn pull_at(&self, worker: &mut Worker, own_rows: &[f32], width: usize, precision: Precision) -> Vec<f32> {
        let mut halo = vec![0.0; self.len() * width];
        if self.peers == 1 {
            return halo;
        }
        let out = self.messages(&self.sends, own_rows, width, precision);
        for rows in trade(worker, out) {
            let list = &self.reads[rows.from as usize][rows.at as usize..];
            for (values, &row) in rows.values.decode().chunks(width).zip(list) {
                halo[row as usize * width..(row as usize + 1) * width].copy_from_slice(values);
            }
        }
        halo
    }

    /// Sends the gradients of this worker's halo rows (`halo_grads`, `width` each) to their
    /// owners and adds the gradients of its own rows' copies on other workers to `own_grads`.
    /// Every worker calls it in step.
    pub fn push_back(&self, worker: &mut Worker, halo_grads: &[f32], width: usize, own_grads: &mut [f32]) {
        self.push_back_at(worker, halo_grads, width, own_grads, Precision::F32);
    }

    /// [`Halo::push_back`], the gradients crossing at `precision` (`crate::full::wire`).
    pub fn push_back_at(
        &self,
        worker: &mut Worker,
        halo_grads: &[f32],
        width: usize,
        own_grads: &mut [f32],
        precision: Precision,
    ) {
        if self.peers == 1 {
            return;
        }
        let out = self.messages(&self.reads, halo_grads, width, precision);
        for rows in trade(worker, out) {
            let list = &self.sends[rows.from as usize][rows.at as usize..];
            for (values, &slot) in rows.values.decode().chunks(width).zip(list) {
                let own = &mut own_grads[slot as usize * width..(slot as usize + 1) * width];
                own.iter_mut().zip(values).for_each(|(g, v)| *g += v);
            }
        }
    }
}
