//! GraphFlat's map and sampling as a library, for every stage that starts from the node and
//! edge tables (GraphFlat, GraphInfer):
//!
//! - [`load`]: each worker reads its share of the tables, checks every row, sends nodes to their
//!   owners (by [`cluster::Owners`]: the hash, or a partition table) and counts in-degrees there;
//! - [`owner_map`]: the partition table a stage routes by, read once per process;
//! - [`graph`]: the part of the graph a worker owns ([`NodeStore`]);
//! - [`sample`]: hash-keyed samplers and the per-layer plan;
//! - [`reindex`]: every node's sampled in-edges, hubs spread over salted reducers and merged;
//! - [`runs`]: the owner's counting sort of the in-edges it samples itself;
//! - [`supervision`]: the link task's supervision edges (those with a split), collected on
//!   request and kept at the owner of their source.
//!
//! Edges whose split is `valid` or `test` are held out of the graph here, for every stage: no
//! in-edge, in-degree, hub count or edge statistic includes them (see [`load`]).
//!
//! Errors are the table layer's ([`tables::Error`]); [`agree`] makes every worker return the
//! same one.

pub mod graph;
pub mod load;
pub mod negatives;
pub mod owner_map;
pub mod reindex;
pub mod runs;
pub mod same_kind;
pub mod sample;
pub mod supervision;

pub use graph::{ELSEWHERE, InEdge, NodeStore, RelationEdges};
pub use load::{Edge, EdgeRead, ReadEdges, load_edges, load_nodes};
pub use owner_map::{PartitionTable, SharedOwnerMap};
pub use reindex::{SampleSpec, Sampled, sample_in_edges};
pub use supervision::{SupervisionEdge, SupervisionSample};
pub use tables::Error;

use timely::worker::Worker;

/// Every worker gets the same result: the first error any worker had (see [`cluster::agree`]).
pub fn agree<T>(worker: &mut Worker, local: Result<T, Error>) -> Result<T, Error> {
    cluster::agree::<T, Error, tables::error::Report>(worker, local)
}
