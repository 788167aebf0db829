//! A model's learned embedding table (`schemas::learned`), read at each node's owner: every
//! worker reads its share of the table's row groups and sends each row to the owner of its node,
//! which keeps it by slot. No process holds more than its own nodes' rows (and a batch in
//! flight). A node with no row (new since training, or never in a training or evaluation
//! record) gets zeros, or ends the job when `[infer] missing_embedding = "error"`; rows of
//! nodes the graph does not hold are skipped. Both are counted in the summary. A typed model's
//! table keys each row by its node type and id, and holds rows of the types that read them.

use std::cell::RefCell;
use std::rc::Rc;

use sampling::{NodeStore, agree};
use schemas::ids::StringHash;
use schemas::learned::LearnedBatch;
use schemas::typed::{self, NODE_TYPE, unpack};
use schemas::{BadInput, error::Location};
use serde::{Deserialize, Serialize};
use tables::{Io, ParquetFile, Place, open_listed, units};
use timely::worker::Worker;

use crate::Error;

/// A row on its way to its node's owner; `print` is its string's fingerprint in a graph keyed
/// by strings (0 for integer ids), checked there as the map step checks an edge's endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    id: i64,
    print: u64,
    values: Vec<f32>,
    /// Its file (by index) and row there, to name a duplicate.
    file: u32,
    at: u64,
}

/// This worker's nodes' rows, by slot, and what did not match.
#[derive(Debug, Default)]
pub struct LearnedRows {
    /// `dim` values per slot; zeros where a node has no row.
    pub values: Vec<f32>,
    pub dim: usize,
    /// This worker's nodes without a row.
    pub missing: u64,
    /// Rows this worker received for nodes the graph does not hold.
    pub unknown: u64,
    /// The first node without a row, if any, as its id reads.
    pub first_missing: Option<String>,
}

/// The parts of the table: the model directory's listed `part-*.parquet` files.
pub fn open(io: &Io, dir: &Place) -> Result<Vec<ParquetFile>, Error> {
    open_listed(io, dir, |name| name.starts_with("part-") && name.ends_with(".parquet"))
}

/// The table a model reads: its width, and a typed model's node types (names in type order,
/// and whether each type's nodes read a learned row).
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    pub dim: usize,
    pub types: Option<(&'a [String], &'a [bool])>,
}

impl Table<'_> {
    /// Whether node type `t`'s nodes read a row (every node's in a homogeneous graph).
    fn reads(&self, t: u8) -> bool {
        self.types.is_none_or(|(_, learned)| learned[usize::from(t)])
    }
}

/// Reads `table` in the model directory `dir` into this worker's nodes' slots (see the module
/// doc). Only the nodes the run computes with (`needed`) and, in a typed graph, of the types
/// that read rows count as missing one. A duplicated id, or a row of a type that reads none,
/// is bad input naming its file and row.
pub fn read(
    worker: &mut Worker,
    io: &Io,
    dir: &Place,
    nodes: &Rc<NodeStore>,
    table: Table,
    needed: impl Fn(usize) -> bool,
) -> Result<LearnedRows, Error> {
    let files = open(io, dir)?;
    let mine = units(&files, worker.index(), worker.peers());
    read_rows(worker, io, (&files, mine), nodes, table, needed)
}

/// [`read`] from the row groups `mine` (file, row group) of `files`, this worker's share of a
/// table of the learned table's columns (GraphInfer's own rows of a link model are one:
/// `node_id`, a typed graph's `node_type`, and `embedding`).
pub fn read_rows(
    worker: &mut Worker,
    io: &Io,
    (files, mine): (&[ParquetFile], Vec<(usize, usize)>),
    nodes: &Rc<NodeStore>,
    table: Table,
    needed: impl Fn(usize) -> bool,
) -> Result<LearnedRows, Error> {
    let dim = table.dim;
    agree(worker, sampling::load::same_id_kind(files, &[schemas::nodes::NODE_ID], nodes.id_kind()))?;
    let strings = nodes.strings.as_ref().map(|s| s.ids.clone()).unwrap_or_default();
    let kept = Rc::new(RefCell::new(Received::new(nodes.len(), dim)));
    let (sink, store) = (kept.clone(), nodes.clone());
    let owners = nodes.owners.clone();
    let route = move |r: &Row| owners.key(r.id);
    let consume = move |r: Row| sink.borrow_mut().take(&store, r);
    let read = cluster::shuffle(worker, route, consume, |send| {
        for &(f, rg) in &mine {
            let name = files[f].name();
            files[f].read_row_group(io, rg, |batch, first_row| {
                send(rows_of(&batch, (&name, f as u32, first_row), table, &strings)?);
                Ok(())
            })?;
        }
        Ok::<_, Error>(())
    });
    agree(worker, read)?;
    // Taken out, not unwrapped: the finished dataflow may still hold its handle.
    let Received { values, found, unknown, duplicate, .. } = std::mem::take(&mut *kept.borrow_mut());
    let duplicate = duplicate.map(|(slot, file, row): (usize, u32, u64)| {
        let at = Location::file(files[file as usize].name()).row(row).column(schemas::nodes::NODE_ID);
        let node = shown(nodes, slot, table);
        Error::from(BadInput::new(at, format!("node {node} has a second row in the model's learned embedding table")))
    });
    agree(worker, duplicate.map_or(Ok(()), Err))?;
    let missing_slots: Vec<usize> =
        (0..found.len()).filter(|&s| !found[s] && table.reads(nodes.node_type(s)) && needed(s)).collect();
    let first_missing = missing_slots.first().map(|&s| shown(nodes, s, table));
    Ok(LearnedRows { values, dim, missing: missing_slots.len() as u64, unknown, first_missing })
}

/// The rows received at their owner: their values by slot, which slots have one, how many
/// rows name no node of this worker, and the first row whose node had one already.
#[derive(Default)]
struct Received {
    values: Vec<f32>,
    found: Vec<bool>,
    dim: usize,
    unknown: u64,
    duplicate: Option<(usize, u32, u64)>,
}

impl Received {
    fn new(nodes: usize, dim: usize) -> Self {
        Received { values: vec![0.0; nodes * dim], found: vec![false; nodes], dim, ..Received::default() }
    }

    /// Takes `r` into its node's slot; a string id's row counts only where the string's
    /// fingerprint is the node's (two strings may share a resolved id nowhere else).
    fn take(&mut self, store: &NodeStore, r: Row) {
        let known = |slot: &usize| store.key(*slot).is_none_or(|key| StringHash::of(key).g == r.print);
        let dim = self.dim;
        match store.slot(r.id).filter(known) {
            None => self.unknown += 1,
            Some(slot) if self.found[slot] => self.duplicate = self.duplicate.or(Some((slot, r.file, r.at))),
            Some(slot) => {
                self.values[slot * dim..(slot + 1) * dim].copy_from_slice(&r.values);
                self.found[slot] = true;
            }
        }
    }
}

/// A row group's rows as they travel to their owners: a typed row keyed by its type and id, a
/// string's by its resolved id. A row of a type that reads no learned rows is bad input at
/// its row.
fn rows_of(
    batch: &arrow_array::RecordBatch,
    (name, file, first_row): (&str, u32, u64),
    table: Table,
    strings: &schemas::ids::StringIds,
) -> Result<Vec<Row>, Error> {
    let names = table.types.map(|(names, _)| names);
    let rows = LearnedBatch::from_batch(batch, name, first_row, table.dim, names)?;
    let ids = rows.ids.resolve(strings);
    let id = |i: usize| match names {
        Some(_) => typed::pack(unpack(rows.key(i)).0, ids.ids[i]).unwrap_or(rows.key(i)),
        None => ids.ids[i],
    };
    if let Some(names) = names
        && let Some(i) = (0..rows.len()).find(|&i| !table.reads(unpack(id(i)).0))
    {
        let t = usize::from(unpack(id(i)).0);
        let at = Location::file(name).row(first_row + i as u64).column(NODE_TYPE);
        let problem = format!("a row of node type {}, whose nodes the model gives no learned rows", names[t]);
        return Err(BadInput::new(at, problem).into());
    }
    let row = |i: usize| Row {
        id: id(i),
        print: ids.print(i).unwrap_or(0),
        values: rows.row(i).to_vec(),
        file,
        at: first_row + i as u64,
    };
    Ok((0..rows.len()).map(row).collect())
}

/// Slot `slot`'s node as the node tables have it: its string, its integer id, or in a typed
/// graph its type's name and id.
fn shown(nodes: &NodeStore, slot: usize, table: Table) -> String {
    match table.types {
        Some((names, _)) => {
            let (t, id) = unpack(nodes.ids[slot]);
            let id = nodes.key(slot).map_or_else(|| id.to_string(), schemas::ids::shown);
            format!("{} {id}", names[usize::from(t)])
        }
        None => nodes.key(slot).map_or_else(|| nodes.ids[slot].to_string(), schemas::ids::shown),
    }
}
