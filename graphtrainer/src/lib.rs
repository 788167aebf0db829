//! GraphTrainer: GCN, GraphSAGE, GAT and GINE (from the `gnn` crate) trained on GraphFlat's
//! records, data-parallel over timely workers with a parameter server on the same engine.
//!
//! - [`reader`]: record parts to records, one row group at a time, checked;
//! - [`plan`]: which row groups each worker reads, and the steps per epoch;
//! - [`stream`]: each epoch's records in a seeded order, with bounded memory (a cache, a
//!   shuffle buffer);
//! - [`loader`]: batch preparation on a reader thread, ahead of compute;
//! - [`ps`]: the parameter server (one shard per worker; sync or async);
//! - [`optim`]: Adam and SGD with weight decay and a step schedule, run by the shards;
//! - [`train`]: the run as named steps (setup, start, epoch, evaluation);
//! - [`tracker`], [`checkpoint`], [`metrics`]: early stopping, resume, what is reported.

pub mod checkpoint;
pub mod error;
pub mod loader;
pub mod metrics;
pub mod optim;
pub mod plan;
pub mod ps;
pub mod reader;
pub mod stream;
pub mod tracker;
pub mod train;

pub use error::Error;
pub use train::{TrainSummary, run};
