//! Learned embeddings on the parameter server (`[train] learned_embedding_dim = D`): every node
//! gets a learned `D`-wide vector as model input, after its features (alone where the node
//! table has none). The table is sharded over every worker of every process by node owner
//! ([`shard`]): a step pulls only the rows its batch holds ([`pull`]) and pushes only their
//! gradients, with the weights' push (`crate::ps`), to the rows' owners, whose sparse optimizer
//! updates only those rows. In `sync` mode the update is the same as the weights': summed in
//! worker order, divided by the step's count, so the same batches give the same table on any
//! cluster shape.
//!
//! In a graph keyed by strings a pull carries the ids' original strings, and the owner keeps a
//! new row's (one copy a row): the table is saved under them.
//!
//! A typed model's rows are keyed by typed keys (a node's type and id, `schemas::typed::pack`):
//! a batch pulls the rows of its nodes of the types with learned rows.
//!
//! At the end each worker writes its rows, sorted by key, as Parquet parts in the model
//! directory's `embeddings/` folder (`schemas::learned`), committed with the weights in one
//! manifest: `pandas.read_parquet("<model>/embeddings")` reads the committed table. With early
//! stopping each shard keeps a copy of its rows at the best validation epoch, as the weights.

pub mod checkpoint;
pub mod pull;
pub mod shard;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, StringArray};
use schemas::ids::IdKind;
use schemas::job::LearnedConfig;
use schemas::learned::{learned_batch, learned_schema};
use schemas::typed::unpack;
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::staging::StagedPart;
use tables::{Io, Place};
use timely::worker::Worker;

pub use pull::{Puller, owner};
pub use shard::RowShard;

use crate::error::Error;

/// Where the parts go in the model directory (`gnn::io::LEARNED_FOLDER`).
const FOLDER: &str = "embeddings/";

/// Bytes of values a written batch holds (its rows: as many as fit, whatever the width).
const BATCH_BYTES: usize = 4 << 20;

/// This worker's share of the table and its end of the pull dataflow.
pub struct Learned {
    pub shard: Rc<RefCell<RowShard>>,
    puller: Puller,
    /// The rows' learning rate; `None`: the weights'.
    lr: Option<f32>,
    /// A typed model's node type names, in type order: its rows are keyed by typed keys
    /// (`schemas::typed::pack`) and saved with their type's name.
    types: Option<Vec<String>>,
}

impl Learned {
    pub fn new(worker: &mut Worker, config: &LearnedConfig, seed: u64, types: Option<Vec<String>>) -> Self {
        let shard = Rc::new(RefCell::new(RowShard::new(config, seed)));
        let puller = Puller::new(worker, shard.clone());
        Learned { shard, puller, lr: config.lr, types }
    }

    pub fn dim(&self) -> usize {
        self.shard.borrow().dim
    }

    /// The rows of `ids` (distinct), `dim` values each, from their owners; `keys` are their
    /// original strings in a graph keyed by strings (else empty).
    pub fn pull(&mut self, worker: &mut Worker, ids: &[i64], keys: &[String]) -> Vec<f32> {
        self.puller.pull(worker, ids, keys)
    }

    /// The rows' learning rate at the weights' `lr`.
    pub fn lr(&self, lr: f32) -> f32 {
        self.lr.unwrap_or(lr)
    }

    /// Writes this worker's rows (the kept best ones with `best`) as parts of run `run` in the
    /// model directory `dir`, staged for the model's commit.
    pub fn write_parts(
        &self,
        io: &Arc<Io>,
        dir: &Place,
        run: &str,
        worker: usize,
        best: bool,
    ) -> Result<Vec<StagedPart>, Error> {
        let shard = self.shard.borrow();
        let dim = shard.dim;
        let to = PartsOf { dir: dir.clone(), run: run.to_owned(), worker };
        let kind = if shard.has_keys() { IdKind::String } else { IdKind::Int };
        let schema = learned_schema(dim, kind, self.types.is_some());
        let writer = PartWriter::new(io.clone(), to, schema, part_properties().build(), 1 << 30);
        let mut writer = writer.in_folder(FOLDER);
        let rows_per_batch = (BATCH_BYTES / (4 * dim).max(1)).max(1);
        for rows in shard.rows_to_save().chunks(rows_per_batch) {
            let types: Option<ArrayRef> = self.types.as_ref().map(|names| {
                let names = rows.iter().map(|r| Some(names[usize::from(unpack(r.id).0)].as_str()));
                Arc::new(names.collect::<StringArray>()) as ArrayRef
            });
            // The original strings of a graph keyed by strings, else the id (within its type).
            let ids: ArrayRef = match kind {
                IdKind::String => Arc::new(rows.iter().map(|r| Some(shard.key(r.slot))).collect::<StringArray>()),
                IdKind::Int if types.is_some() => Arc::new(rows.iter().map(|r| unpack(r.id).1).collect::<Int64Array>()),
                IdKind::Int => Arc::new(rows.iter().map(|r| r.id).collect::<Int64Array>()),
            };
            let values = rows.iter().flat_map(|&r| shard.saved_values(r, best).into_owned()).collect();
            writer.write(&learned_batch(types, ids, values, dim))?;
        }
        writer.finish()?;
        Ok(writer.parts)
    }
}
