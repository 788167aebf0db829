//! Pipelined loading: a reader thread shuffles, batches and prunes the next batches (the CPU
//! work of turning records into a block-diagonal graph) while the current one computes, through
//! a bounded queue of `prefetch` batches. Compute reports how long it waited. A loader thread
//! that dies is an error, never a shorter epoch.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gnn::batch::{Batch, BatchSpec};
use gnn::rng::Stream;
use schemas::Record;

use crate::error::Error;

/// The order of a worker's training records in `epoch`: a seeded Fisher-Yates shuffle.
pub fn epoch_order(len: usize, seed: u64, epoch: usize, worker: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut s = Stream::new(&[seed, epoch as u64, worker as u64, 0x5107]);
    for i in (1..len).rev() {
        let j = (s.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// The batches of one epoch, in order.
pub enum Batches {
    Inline { records: Arc<Vec<Record>>, chunks: std::vec::IntoIter<Vec<usize>>, spec: BatchSpec },
    Pipelined { receive: Receiver<Batch>, remaining: usize, thread: Option<JoinHandle<()>> },
}

impl Batches {
    pub fn new(records: Arc<Vec<Record>>, order: Vec<usize>, batch_size: usize, spec: BatchSpec, prefetch: usize) -> Self {
        let chunks: Vec<Vec<usize>> = order.chunks(batch_size).map(<[usize]>::to_vec).collect();
        if prefetch == 0 {
            return Batches::Inline { records, chunks: chunks.into_iter(), spec };
        }
        let (send, receive) = sync_channel(prefetch);
        let remaining = chunks.len();
        let thread = std::thread::Builder::new()
            .name("graphtrainer-loader".into())
            .spawn(move || {
                for chunk in chunks {
                    let batch: Vec<Record> = chunk.iter().map(|&i| records[i].clone()).collect();
                    if send.send(Batch::build(&batch, &spec)).is_err() {
                        return;
                    }
                }
            })
            .ok();
        Batches::Pipelined { receive, remaining, thread }
    }

    /// The next batch and how long compute waited for it; `None` at the end of the epoch.
    pub fn next_batch(&mut self) -> Result<Option<(Batch, Duration)>, Error> {
        let started = Instant::now();
        let batch = match self {
            Batches::Inline { records, chunks, spec } => {
                let Some(chunk) = chunks.next() else { return Ok(None) };
                let batch: Vec<Record> = chunk.iter().map(|&i| records[i].clone()).collect();
                Batch::build(&batch, spec)
            }
            Batches::Pipelined { remaining: 0, .. } => return Ok(None),
            Batches::Pipelined { receive, remaining, thread } => match receive.recv() {
                Ok(batch) => {
                    *remaining -= 1;
                    batch
                }
                Err(_) => return Err(loader_died(thread.take())),
            },
        };
        Ok(Some((batch, started.elapsed())))
    }
}

/// The error for a loader thread that stopped before its last batch, with its panic message.
fn loader_died(thread: Option<JoinHandle<()>>) -> Error {
    let why = match thread.map(JoinHandle::join) {
        None => "it could not be started".to_owned(),
        Some(Ok(())) => "it ended early".to_owned(),
        Some(Err(payload)) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "it panicked".into()),
    };
    Error::Internal(format!("the batch loader thread failed before the end of the epoch: {why}"))
}
