//! The flattened record table GraphFlat writes: one row per target node, self-contained.
//!
//! Nodes are listed root first, then by (hop, node_id). Edges are local index pairs into that
//! list, sorted by (dst, src). `edge_layers` says which GNN layers each edge serves: bit `l-1` is
//! set when layer `l` (1 = the layer nearest the input) aggregates over the edge. A node at hop
//! `d` is computed by layers `1..=k-d`, and the record holds exactly the edges those layers need
//! (see the crate's `README.md`).
//!
//! Link records (`link`) hold one supervision edge each: the neighborhoods of its endpoints
//! and negatives, laid out with the same node and edge columns.
//!
//! `schema` names the columns and builds the Arrow schema; `batch` converts records to and from
//! Arrow batches over that schema; `columns` lays records out column by column, the one place
//! a batch's columns are built; `roots` reads records' roots off a batch without building them.

mod batch;
mod columns;
mod link;
mod reclaim;
mod roots;
mod schema;

pub use batch::{Record, Tag, from_batch, from_batch_where, tags, to_batch};
pub use columns::RecordColumns;
pub use link::{LinkRecord, link_splits, links_from_batch, links_to_batch};
pub use roots::{Root, RootColumns};
pub use schema::*;
