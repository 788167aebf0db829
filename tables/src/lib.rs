//! Parquet tables through `object_store`, for every stage: a table is a directory of part files
//! with a `_SUCCESS` marker written last.
//!
//! - [`store`]: places (local paths and URIs), listing a table's parts, reading row groups;
//! - [`table`]: writing files and whole tables;
//! - [`parts`]: one worker's share of a stage's output as part files;
//! - [`commit`]: the commit protocol: run-named parts, a `_SUCCESS` manifest written last.

pub mod commit;
pub mod error;
pub mod parts;
pub mod store;
pub mod table;

pub use error::Error;
pub use store::{Io, ParquetFile, Place, configure, open_table, units};
