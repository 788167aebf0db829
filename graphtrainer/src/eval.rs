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

use crate::error::Error;
use crate::example::Example;
use crate::loader::Batches;
use crate::reader::{Pass, Unit};
use crate::stream::RecordStream;
use crate::train::{Setup, TrainConfig};

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
/// their features (twice too).
fn batch_bytes(batch: &Batch) -> u64 {
    let edges: usize = batch.layers.iter().map(|l| l.src.len()).sum();
    let edge_features: usize = batch.layers.iter().map(|l| l.features.len()).sum();
    (batch.features.len() * 8 + edges * 32 + edge_features * 8 + batch.roots.len() * 64) as u64
}

/// Visits every evaluation batch of the worker: the kept ones when the first pass kept them,
/// else streamed, one stream per group of units (a batch never spans two groups); the first
/// pass keeps what it built while it fits.
pub fn for_each_batch<T: Example>(
    setup: &Setup<T>,
    config: &TrainConfig,
    index: usize,
    groups: &[Vec<Unit>],
    mut visit: impl FnMut(&T::Batch, &BatchTensors),
) -> Result<(), Error> {
    if let EvalCache::Kept(kept) = &*setup.eval_cache.borrow() {
        kept.iter().for_each(|(batch, tensors)| visit(batch, tensors));
        return Ok(());
    }
    let mut cache = setup.eval_cache.borrow_mut();
    let (mut kept, mut bytes) = (Vec::new(), 0u64);
    for group in groups {
        let records = RecordStream::evaluate(setup.source.clone(), group);
        let mut batches = Batches::new(records, EVAL_BATCH, setup.batch_spec.clone(), config.prefetch);
        while let Some((batch, _)) = batches.next_batch()? {
            let tensors = BatchTensors::new(T::graph(&batch), &setup.base, setup.aggregation);
            visit(&batch, &tensors);
            if matches!(*cache, EvalCache::Unknown) {
                bytes += batch_bytes(T::graph(&batch));
                if bytes + setup.source.cached_bytes() <= setup.source.budget() {
                    kept.push((batch, tensors));
                } else {
                    kept.clear();
                    *cache = EvalCache::TooLarge;
                }
            }
        }
    }
    if matches!(*cache, EvalCache::Unknown) {
        tracing::info!(
            "train: worker {index} keeps its {} evaluation batches between epochs ({} MB)",
            kept.len(),
            bytes >> 20
        );
        *cache = EvalCache::Kept(kept);
        setup.source.release(Pass::Evaluate);
    }
    Ok(())
}
