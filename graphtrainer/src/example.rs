//! What the trainer streams: node records (`schemas::Record`, one per target node) or link
//! records (`schemas::record::LinkRecord`, one per supervision edge). The source, the stream
//! and the loader (see [`crate::stream`], [`crate::loader`]) are generic over it; this is how
//! each kind is read from a unit, sized for the cache, and batched.

use gnn::batch::{Batch, BatchSpec};
use gnn::link::LinkBatch;
use schemas::Record;
use schemas::record::LinkRecord;

use crate::error::Error;
use crate::neighborhoods::Neighborhoods;
use crate::reader::{Pass, RecordSet, Unit};

pub trait Example: Clone + Send + Sync + 'static {
    /// A batch of them, as a step computes on it.
    type Batch: Send + 'static;

    /// Roughly the bytes it takes in memory (the cache and the shuffle buffer count them).
    fn size_bytes(&self) -> usize;

    /// The records of `unit` that `pass` takes, in row order, checked.
    fn read(set: &RecordSet, unit: Unit, pass: Pass) -> Result<Vec<Self>, Error>;

    /// The records `pass` takes out of node records of a unit in row order, as
    /// `RecordSet::read_roots` gives them (node records: what [`Example::read`] gives, in the
    /// same order); `None` for a kind not read so (link records).
    fn of_pass(every: Vec<Record>, pass: Pass) -> Option<Vec<Self>>;

    /// What the records a cache keeps share (link records: their endpoints' neighborhoods, see
    /// [`crate::neighborhoods`]).
    type Shared: Default + Send + 'static;

    /// Readies `records` for the cache if the bytes they add, with what they add to `shared`,
    /// fit in `room`: returns their bytes besides `shared`'s, or `None` with nothing changed.
    fn keep(records: &mut [Self], shared: &mut Self::Shared, room: u64) -> Option<u64>;

    /// Bytes `shared` holds.
    fn shared_bytes(shared: &Self::Shared) -> u64;

    /// Drops from `shared` what no kept record holds any more.
    fn prune(shared: &mut Self::Shared);

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

    fn of_pass(every: Vec<Record>, pass: Pass) -> Option<Vec<Self>> {
        Some(every.into_iter().filter(|r| pass.reads(r.split, r.label.is_some())).collect())
    }

    type Shared = ();

    fn keep(records: &mut [Self], _: &mut (), room: u64) -> Option<u64> {
        let bytes = records.iter().map(|r| r.size_bytes() as u64).sum();
        (bytes <= room).then_some(bytes)
    }

    fn shared_bytes(_: &()) -> u64 {
        0
    }

    fn prune(_: &mut ()) {}

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

    fn of_pass(_: Vec<Record>, _: Pass) -> Option<Vec<Self>> {
        None
    }

    type Shared = Neighborhoods;

    fn keep(records: &mut [Self], shared: &mut Neighborhoods, room: u64) -> Option<u64> {
        shared.share(records, room)
    }

    fn shared_bytes(shared: &Neighborhoods) -> u64 {
        shared.bytes()
    }

    fn prune(shared: &mut Neighborhoods) {
        shared.prune();
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
