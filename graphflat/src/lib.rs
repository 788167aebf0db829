//! GraphFlat: one self-contained k-hop neighborhood record per target node, from Parquet node
//! and edge tables to Parquet record parts, as a timely dataflow.
//!
//! The job is the `stage` skeleton around this crate's body ([`flatten`]); it runs in phases,
//! every worker in step (see `docs/graphflat.md`):
//! 1. map ([`sampling::load`]): read a share of the tables, check every row, send nodes to their
//!    owners;
//! 2. sampling with re-indexing ([`sampling::reindex`], [`sampling::sample`]): each node keeps
//!    its best in-edges by hash-derived key, hubs spread over salted reducers and merged exactly;
//! 3. the k rounds ([`round`]) over batches of targets, one timely epoch per batch
//!    ([`targets`]; for the link task, [`links`]: the records of each supervision edge's
//!    endpoints and [`sampling::negatives`]); with `incremental`, over the targets a change
//!    reaches only ([`refresh`]);
//! 4. the sink ([`sink`]): zstd Parquet parts, then `_SUCCESS` (the skeleton's commit).
//!
//! Beside the stage, the commands that write input tables: [`generate`] (a synthetic graph),
//! [`import`] (OGB's layout) and [`split`] (an edge table's train/valid/test split for the link
//! task).

pub mod error;
pub mod flatten;
pub mod generate;
pub mod hetero;
pub mod import;
pub mod links;
pub mod record;
pub mod refresh;
pub mod round;
pub mod sink;
pub mod split;
pub mod targets;
pub mod write;
pub mod writer_thread;

pub use error::Error;
pub use flatten::{Summary, run};
/// The table layer, shared with the other stages (see the `tables` crate).
pub use tables::table;
