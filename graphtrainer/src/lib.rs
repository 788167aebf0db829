//! GraphTrainer: GCN, GraphSAGE, GAT and GINE (from the `gnn` crate) trained on GraphFlat's
//! records, data-parallel over timely workers with a parameter server on the same engine.
//!
//! - [`reader`]: record parts to records (node or link records, see [`example`]), one row
//!   group at a time, checked;
//! - [`plan`]: which row groups each worker reads, and the steps per epoch;
//! - [`stream`]: each epoch's records in a seeded order, with bounded memory (a cache, a
//!   shuffle buffer); kept link records share their endpoints' neighborhoods
//!   ([`neighborhoods`]);
//! - [`loader`]: batch preparation on a reader thread, ahead of compute;
//! - [`ps`]: the parameter server (one shard per worker; sync or async); [`serve`]: the
//!   request-and-answer dataflow that learned rows and histories are served by;
//! - [`histories`]: control variates' histories, a row per node sharded by owner beside the
//!   server, refreshed each epoch and read by each step's estimate;
//! - [`learned`]: learned embeddings, a table sharded by node owner beside the server, pulled
//!   and pushed by the rows a batch holds, with sparse optimizers;
//! - [`optim`]: Adam and SGD with weight decay and a step schedule, run by the shards;
//! - [`train`]: the run as named steps (setup, start, epoch, evaluation), with what differs
//!   between the tasks in [`node`] and [`link`] (ranking metrics in [`rank`]), and the
//!   evaluation batches kept between epochs in [`eval`];
//! - [`full`]: full-graph training on the graph itself (`nodes` and `edges`, no records): every
//!   node and edge each epoch, in rounds over the workers, the exact full-batch gradient;
//! - [`forward`]: a link model's embeddings and pair scores on link records (what GraphInfer's
//!   link output is checked against);
//! - [`task_keys`]: weight decay, early stopping and batch negatives by task;
//! - [`tracker`], [`checkpoint`], [`metrics`], [`phases`]: early stopping, resume, what is
//!   reported (scores, and where an epoch's steps spent their time).

pub mod checkpoint;
pub mod error;
pub mod eval;
pub mod eval_pass;
pub mod example;
pub mod forward;
pub mod full;
pub mod histories;
pub mod learned;
pub mod link;
pub mod loader;
pub mod metrics;
pub mod neighborhoods;
pub mod node;
pub mod optim;
pub mod phases;
pub mod plan;
pub mod ps;
pub mod rank;
pub mod reader;
pub mod serve;
pub mod stream;
pub mod task_keys;
pub mod tracker;
pub mod train;

pub use error::Error;
pub use forward::{forward_link_records, learned_table};
pub use train::TrainSummary;

use std::sync::Arc;

/// Runs a `[train]` job on this process's workers: on records (`train::run`), or on the graph
/// itself when the job names `nodes` and `edges` (`full::run`).
pub fn run(
    io: &Arc<tables::Io>,
    config: &schemas::job::TrainConfig,
    cluster: &schemas::ClusterConfig,
) -> Result<TrainSummary, cluster::Failure<Error>> {
    if config.full_graph() { full::run(io, config, cluster) } else { train::run(io, config, cluster) }
}
