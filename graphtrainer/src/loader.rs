//! Pipelined loading: a reader thread shuffles, batches and prunes the next batches (the CPU
//! work of turning records into a block-diagonal graph) while the current one computes, through
//! a bounded queue of `prefetch` batches. Compute reports how long it waited.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::{Duration, Instant};

use gnn::RecordGraph;
use gnn::batch::{Batch, BatchSpec};
use gnn::rng::Stream;

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
    Inline { records: Arc<Vec<RecordGraph>>, chunks: std::vec::IntoIter<Vec<usize>>, spec: BatchSpec },
    Pipelined(Receiver<Batch>),
}

impl Batches {
    pub fn new(
        records: Arc<Vec<RecordGraph>>,
        order: Vec<usize>,
        batch_size: usize,
        spec: BatchSpec,
        prefetch: usize,
    ) -> Self {
        let chunks: Vec<Vec<usize>> = order.chunks(batch_size).map(<[usize]>::to_vec).collect();
        if prefetch == 0 {
            return Batches::Inline { records, chunks: chunks.into_iter(), spec };
        }
        let (send, receive) = sync_channel(prefetch);
        std::thread::spawn(move || {
            for chunk in chunks {
                let batch: Vec<RecordGraph> = chunk.iter().map(|&i| records[i].clone()).collect();
                if send.send(Batch::build(&batch, &spec)).is_err() {
                    return;
                }
            }
        });
        Batches::Pipelined(receive)
    }

    /// The next batch and how long compute waited for it.
    pub fn next_batch(&mut self) -> Option<(Batch, Duration)> {
        let started = Instant::now();
        let batch = match self {
            Batches::Inline { records, chunks, spec } => {
                let chunk = chunks.next()?;
                let batch: Vec<RecordGraph> = chunk.iter().map(|&i| records[i].clone()).collect();
                Batch::build(&batch, spec)
            }
            Batches::Pipelined(receive) => receive.recv().ok()?,
        };
        Some((batch, started.elapsed()))
    }
}
