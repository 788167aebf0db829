//! A worker's evaluation batches, built once and kept between epochs when they fit.
//!
//! The evaluation pass visits the same records in the same order every epoch, so its batches
//! and their tensors are built once when they fit, together with the records cached so far,
//! in the worker's share of `cache_mb`; the evaluation records then leave the record cache. A
//! set with wide features (Cora) then costs a forward pass per epoch, not a decode, a batch
//! build and a copy to the device; a set larger than the cache is streamed every epoch as
//! before, and never holds more than the budget.

use gnn::Batch;
use gnn::model::BatchTensors;

/// Records per evaluation batch.
pub const EVAL_BATCH: usize = 2048;

/// Evaluation's batches on the device.
#[derive(Default)]
pub enum EvalCache<B> {
    /// Not known yet: the first pass measures it.
    #[default]
    Unknown,
    Kept(Vec<(B, BatchTensors)>),
    /// Larger than the budget: streamed every epoch.
    TooLarge,
}

/// The bytes a built batch and its tensors hold: the feature rows twice, and the edges with
/// their features (twice too); a typed batch's features by type, and its edges once more, split
/// by relation, with its output rows by type.
pub fn batch_bytes(batch: &Batch) -> u64 {
    let edges: usize = batch.layers.iter().map(|l| l.src.len()).sum();
    let edge_features: usize = batch.layers.iter().map(|l| l.features.len()).sum();
    let features = batch.features.len() + batch.typed.as_ref().map_or(0, |t| t.features.iter().map(Vec::len).sum());
    let typed_rows: usize = batch.layers.iter().filter(|l| l.typed.is_some()).map(|l| l.src.len() + l.rows_out).sum();
    (features * 8 + edges * 32 + typed_rows * 32 + edge_features * 8 + batch.roots.len() * 64) as u64
}
