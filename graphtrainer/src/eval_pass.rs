//! The evaluation pass over a worker's evaluation batches: the kept ones ([`EvalCache`]) when
//! the first pass kept them, else streamed.

use std::borrow::Cow;

use gnn::model::BatchTensors;
use timely::worker::Worker;

use crate::error::Error;
use crate::eval::{EVAL_BATCH, EvalCache, batch_bytes};
use crate::example::Example;
use crate::loader::Batches;
use crate::reader::{Pass, Unit};
use crate::stream::RecordStream;
use crate::train::{Setup, TrainConfig, with_learned};

/// An evaluation batch's tensors with its learned rows as they are now, pulled from their
/// owners (the kept tensors hold none: the rows change every step); as they are without a
/// learned table.
pub fn with_rows<'a, T: Example>(
    worker: &mut Worker,
    setup: &Setup<T>,
    batch: &T::Batch,
    tensors: &'a BatchTensors,
) -> Cow<'a, BatchTensors> {
    let Some(learned) = &setup.learned else { return Cow::Borrowed(tensors) };
    let (ids, keys) = T::graph(batch).learned_keys();
    let rows = learned.borrow_mut().pull(worker, &ids, &keys);
    Cow::Owned(with_learned(tensors.clone(), Some(rows), &setup.spec, &setup.base))
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
        // The pass that keeps its batches reads each unit once.
        let once = matches!(*cache, EvalCache::Unknown);
        let records = RecordStream::evaluate(setup.source.clone(), group, once);
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
