//! Pipelined loading: a reader thread reads, shuffles, batches and prunes the next batches (the
//! I/O and CPU work of turning stored records into a block-diagonal graph) while the current
//! one computes, through a bounded queue of `prefetch` batches. Compute reports how long it
//! waited, and the loader how long it took building batches ([`Batches::build_time`]). A read
//! error ends the pass with that error; a loader thread that dies is an error,
//! never a shorter epoch. A pass dropped before its end (early stopping, an error elsewhere)
//! is not waited for: its loader and readers end on their own once they find their channel
//! closed, after at most the batch or unit in hand. Joining them would hold up a failing
//! worker's report behind a read the store may be retrying.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gnn::batch::BatchSpec;
use schemas::Record;

use crate::error::Error;
use crate::example::Example;
use crate::stream::RecordStream;

/// The batches of one pass, in order: `batch_size` records each from a [`RecordStream`], the
/// last one shorter.
pub enum Batches<T: Example = Record> {
    Inline {
        records: Box<RecordStream<T>>,
        batch_size: usize,
        spec: BatchSpec,
        built: Duration,
    },
    Pipelined {
        receive: Receiver<Result<T::Batch, Error>>,
        thread: Option<JoinHandle<()>>,
        ended: bool,
        /// Nanoseconds the thread spent building batches (reading records not counted).
        built: Arc<AtomicU64>,
    },
}

impl<T: Example> Batches<T> {
    pub fn new(records: RecordStream<T>, batch_size: usize, spec: BatchSpec, prefetch: usize) -> Self {
        if prefetch == 0 {
            return Batches::Inline { records: Box::new(records), batch_size, spec, built: Duration::ZERO };
        }
        let (send, receive) = sync_channel(prefetch);
        let built = Arc::new(AtomicU64::new(0));
        let spent = built.clone();
        let thread = std::thread::Builder::new()
            .name("graphtrainer-loader".into())
            .spawn(move || {
                let mut records = records;
                while let Some(batch) = next_records(&mut records, batch_size).transpose() {
                    let started = Instant::now();
                    let batch = batch.map(|b| T::build(&b, &spec));
                    spent.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    if send.send(batch).is_err() {
                        return;
                    }
                }
            })
            .ok();
        Batches::Pipelined { receive, thread, ended: false, built }
    }

    /// Time spent building the batches handed out so far (and the ones prefetched).
    pub fn build_time(&self) -> Duration {
        match self {
            Batches::Inline { built, .. } => *built,
            Batches::Pipelined { built, .. } => Duration::from_nanos(built.load(Ordering::Relaxed)),
        }
    }

    /// The next batch and how long compute waited for it; `None` at the end of the pass.
    pub fn next_batch(&mut self) -> Result<Option<(T::Batch, Duration)>, Error> {
        let started = Instant::now();
        let batch = match self {
            Batches::Inline { records, batch_size, spec, built } => match next_records(records, *batch_size)? {
                None => return Ok(None),
                Some(batch) => {
                    let building = Instant::now();
                    let batch = T::build(&batch, spec);
                    *built += building.elapsed();
                    batch
                }
            },
            Batches::Pipelined { ended: true, .. } => return Ok(None),
            Batches::Pipelined { receive, thread, ended, .. } => match receive.recv() {
                Ok(batch) => batch?,
                // The thread hung up: the end of the pass, or a panic.
                Err(_) => {
                    *ended = true;
                    return loader_ended(thread.take()).map(|()| None);
                }
            },
        };
        Ok(Some((batch, started.elapsed())))
    }
}

/// Up to `n` records from the stream; `None` once it is empty.
fn next_records<T: Example>(records: &mut RecordStream<T>, n: usize) -> Result<Option<Vec<T>>, Error> {
    let batch: Vec<T> = records.by_ref().take(n).collect::<Result<_, _>>()?;
    Ok((!batch.is_empty()).then_some(batch))
}

/// Ok if the loader thread ended after its last batch; its panic message if it died.
fn loader_ended(thread: Option<JoinHandle<()>>) -> Result<(), Error> {
    match thread.map(JoinHandle::join) {
        Some(Ok(())) => Ok(()),
        other => Err(Error::thread_failed("batch loader", other)),
    }
}
