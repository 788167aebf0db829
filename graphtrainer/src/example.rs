//! What the trainer streams: node records (`schemas::Record`, one per target node) or link
//! records (`schemas::record::LinkRecord`, one per supervision edge). The source, the stream
//! and the loader (see [`crate::stream`], [`crate::loader`]) are generic over it; this is how
//! each kind is read from a unit, sized for the cache, and batched.

use gnn::batch::{Batch, BatchSpec};
use gnn::link::LinkBatch;
use schemas::Record;
use schemas::record::LinkRecord;

use crate::error::Error;
use crate::reader::{Pass, RecordSet, Unit};

pub trait Example: Clone + Send + Sync + 'static {
    /// A batch of them, as a step computes on it.
    type Batch: Send + 'static;

    /// Roughly the bytes it takes in memory (the cache and the shuffle buffer count them).
    fn size_bytes(&self) -> usize;

    /// The records of `unit` that `pass` takes, in row order, checked.
    fn read(set: &RecordSet, unit: Unit, pass: Pass) -> Result<Vec<Self>, Error>;

    fn build(items: &[Self], spec: &BatchSpec) -> Self::Batch;

    /// The graph the encoder runs on.
    fn graph(batch: &Self::Batch) -> &Batch;

    /// Records in a batch: target nodes, or supervision edges.
    fn len(batch: &Self::Batch) -> usize;
}

impl Example for Record {
    type Batch = Batch;

    fn size_bytes(&self) -> usize {
        Record::size_bytes(self)
    }

    fn read(set: &RecordSet, unit: Unit, pass: Pass) -> Result<Vec<Self>, Error> {
        set.read(unit, pass)
    }

    fn build(items: &[Self], spec: &BatchSpec) -> Batch {
        Batch::build(items, spec)
    }

    fn graph(batch: &Batch) -> &Batch {
        batch
    }

    fn len(batch: &Batch) -> usize {
        batch.roots.len()
    }
}

impl Example for LinkRecord {
    type Batch = LinkBatch;

    fn size_bytes(&self) -> usize {
        LinkRecord::size_bytes(self)
    }

    fn read(set: &RecordSet, unit: Unit, pass: Pass) -> Result<Vec<Self>, Error> {
        set.read_links(unit, pass)
    }

    fn build(items: &[Self], spec: &BatchSpec) -> LinkBatch {
        LinkBatch::build(items, spec)
    }

    fn graph(batch: &LinkBatch) -> &Batch {
        &batch.batch
    }

    fn len(batch: &LinkBatch) -> usize {
        batch.len()
    }
}
