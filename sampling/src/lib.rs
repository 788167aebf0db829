//! GraphFlat's map and sampling as a library, for every stage that starts from the node and
//! edge tables (GraphFlat, GraphInfer):
//!
//! - [`load`]: each worker reads its share of the tables, checks every row, sends nodes to their
//!   owners (by [`cluster::owner_key`]) and counts in-degrees there;
//! - [`graph`]: the part of the graph a worker owns ([`NodeStore`]);
//! - [`sample`]: hash-keyed samplers and the per-layer plan;
//! - [`reindex`]: every node's sampled in-edges, hubs spread over salted reducers and merged;
//! - [`runs`]: the owner's counting sort of the in-edges it samples itself.
//!
//! Errors are the table layer's ([`tables::Error`]); [`agree`] makes every worker return the
//! same one.

pub mod graph;
pub mod load;
pub mod reindex;
pub mod runs;
pub mod sample;

pub use graph::{InEdge, NodeStore};
pub use load::{Edge, ReadEdges, load_edges, load_nodes};
pub use reindex::{SampleSpec, Sampled, sample_in_edges};
pub use tables::Error;

use timely::worker::Worker;

/// Every worker gets the same result: the first error any worker had (see [`cluster::agree`]).
pub fn agree<T>(worker: &mut Worker, local: Result<T, Error>) -> Result<T, Error> {
    cluster::agree::<T, Error, tables::error::Report>(worker, local)
}
