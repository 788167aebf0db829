//! GraphTrainer: GCN, GraphSAGE and GAT (from the `gnn` crate) trained on GraphFlat's records,
//! data-parallel over timely workers with a parameter server on the same engine.
//!
//! - [`reader`]: record parts to records, a worker's share of the row groups;
//! - [`loader`]: shuffling and batch preparation on a reader thread, ahead of compute;
//! - [`ps`]: the parameter server (one shard per worker, sync mode);
//! - [`optim`]: Adam and SGD with weight decay and a step schedule, run by the shards;
//! - [`train`]: the loop, evaluation, early stopping, checkpoints, the model files.

pub mod collective;
pub mod error;
pub mod loader;
pub mod optim;
pub mod ps;
pub mod reader;
pub mod train;

pub use error::Error;
pub use train::{TrainSummary, run};
