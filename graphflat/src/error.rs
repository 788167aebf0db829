//! The errors a GraphFlat job can end with: the table layer's (bad input, store and Parquet
//! failures, each with its exit cause), or a failure of the cluster (see `cluster::Failure`).

pub use tables::Error;
pub use tables::error::Report;
