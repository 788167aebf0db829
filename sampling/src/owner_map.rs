//! A stage's owner map (`partition = "PATH"` in `[flatten]` and `[infer]`): the partition
//! table (`schemas::parts`) read whole, once per process, and shared by its workers
//! ([`SharedOwnerMap`]). The nodes it names are owned by their part's worker, the others by the
//! hash (`cluster::owners`).
//!
//! The table is read after the node table's strings are numbered (a string's id depends on the
//! strings it collides with, `schemas::ids`), and before any node travels to its owner. Every
//! process reads the same table to the same map, so every worker routes alike; an error (a bad
//! row, an id named twice, ids of the other kind than the graph's) is the same on every worker.
//! Rows naming nodes the graph does not hold are kept and never looked up: a table made for an
//! older graph still serves the nodes both hold.

use std::sync::{Arc, Mutex};

use cluster::{OwnerMap, Owners};
use schemas::ids::{IdKind, StringIds};
use schemas::nodes::NODE_ID;
use schemas::parts::PartBatch;
use schemas::typed::{pack, unpack};
use schemas::{BadInput, Location};
use timely::worker::Worker;

use crate::Error;
use crate::agree;
use crate::same_kind::same_id_kind;
use tables::{Io, ParquetFile, Place, open_table};

/// The owner map of one process, read by the first of its workers that asks.
#[derive(Debug, Clone, Default)]
pub struct SharedOwnerMap(Arc<Mutex<Option<Arc<OwnerMap>>>>);

/// The partition table a stage routes by, and the process's copy of its map.
#[derive(Debug, Clone, Copy)]
pub struct PartitionTable<'a> {
    pub place: &'a Place,
    pub shared: &'a SharedOwnerMap,
}

/// How the graph names its nodes, which the table's ids must match.
#[derive(Debug, Clone, Copy)]
pub struct GraphKeys<'a> {
    pub kind: IdKind,
    /// The graph's collided strings (empty for integer ids).
    pub strings: &'a StringIds,
    /// A typed graph's node type names, in type order.
    pub types: Option<&'a [String]>,
}

/// The owners of this worker's cluster: by `table` when there is one, else by the hash. Fails
/// alike on every worker.
pub fn owners(worker: &mut Worker, io: &Io, table: Option<PartitionTable>, keys: GraphKeys) -> Result<Owners, Error> {
    let peers = worker.peers();
    let Some(table) = table else { return Ok(Owners::hashed(peers)) };
    let map = agree(worker, table.shared.get_or_read(io, table.place, keys))?;
    Ok(Owners::mapped(peers, map))
}

impl SharedOwnerMap {
    /// The map, read from `place` unless a worker of this process read it already. A failed
    /// read is not kept: each worker that asks reads again, and meets the same error.
    fn get_or_read(&self, io: &Io, place: &Place, keys: GraphKeys) -> Result<Arc<OwnerMap>, Error> {
        // A worker that panicked while holding the lock left nothing half-made: the map is
        // stored whole or not at all.
        let mut held = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(map) = held.as_ref() {
            return Ok(map.clone());
        }
        let map = Arc::new(read(io, place, keys)?);
        *held = Some(map.clone());
        Ok(map)
    }
}

/// Reads the whole table into a map; an id named twice is bad input at its second row.
fn read(io: &Io, place: &Place, keys: GraphKeys) -> Result<OwnerMap, Error> {
    let files = open_table(io, place)?;
    same_id_kind(&files, &[NODE_ID], keys.kind)?;
    let rows: u64 = files.iter().map(ParquetFile::rows).sum();
    let mut map = OwnerMap::with_capacity(rows as usize);
    for file in &files {
        let name = file.name();
        for rg in 0..file.row_groups() {
            file.read_row_group(io, rg, |batch, first_row| {
                let rows = PartBatch::from_batch(&batch, &name, first_row, keys.types)?;
                let ids = rows.ids.resolve(keys.strings);
                for i in 0..rows.len() {
                    // A typed row's key is its type and its resolved id.
                    let node = match keys.types {
                        Some(_) => pack(unpack(rows.key(i)).0, ids.ids[i]).unwrap_or(rows.key(i)),
                        None => ids.ids[i],
                    };
                    if !map.insert(node, rows.parts[i]) {
                        let at = Location::file(name.as_str()).row(first_row + i as u64).column(NODE_ID);
                        let problem = format!("node {} is named a second time: a node has one part", rows.ids.key(i));
                        return Err(BadInput::new(at, problem).into());
                    }
                }
                Ok(())
            })?;
        }
    }
    if map.is_empty() {
        return Err(Error::BadData(format!("{}: the partition table is empty", place.shown())));
    }
    Ok(map)
}
