//! Each epoch's records as a stream, in a seeded order, with memory bounded by settings rather
//! than by the record set:
//!
//! - a worker's units (row groups, see [`crate::plan`]) are visited in a seeded shuffle of
//!   `(seed, epoch, worker)`;
//! - their records pass through a shuffle buffer of about `shuffle_mb`: it fills to that size,
//!   then each record out is a seeded random pick from it and makes room for the next one in
//!   (tf.data's `shuffle`); evaluation takes the records in order instead;
//! - a [`Source`] reads a unit's records for one pass at a time and keeps them, up to its
//!   budget (`cache_mb`), so that a small set is decoded once rather than every epoch (kept
//!   link records share one copy of each distinct endpoint neighborhood, see
//!   [`crate::neighborhoods`]). What is cached changes the memory and the time only: the
//!   order is the same either way. A control variates' refresh, which decodes every record,
//!   offers them ([`Source::offer`]); the first evaluation, which keeps its batches, takes its
//!   records out of the cache instead ([`Source::take`]).
//!
//! - units are decoded on threads of their own while the stream drains the one before (see
//!   `ReadAhead`), and their records are moved out, not copied, unless the cache keeps them.
//!
//! So a worker holds at most the cache, the shuffle buffer, three decoded row groups and the
//! loader's prefetched batches, however many records the set has.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use gnn::rng::Stream;
use schemas::Record;

use crate::error::Error;
use crate::example::Example;
use crate::reader::{Pass, RecordSet, Unit};

/// A unit's records (node or link records, see [`Example`]) for a pass, read from the set or
/// from the cache.
pub struct Source<T: Example = Record> {
    set: Arc<RecordSet>,
    cache: Mutex<Cache<T>>,
}

struct Cache<T: Example> {
    budget: u64,
    /// Bytes of the kept records besides what they share.
    own: u64,
    /// Bytes the trainer keeps beside the records under the same budget ([`Source::hold`]).
    held: u64,
    shared: T::Shared,
    records: HashMap<(Unit, Pass), Kept<T>>,
}

/// A kept unit's records and their own bytes (what they take besides the shared part).
type Kept<T> = (Arc<Vec<T>>, u64);

impl<T: Example> Cache<T> {
    fn used(&self) -> u64 {
        self.own + self.held + T::shared_bytes(&self.shared)
    }
}

impl<T: Example> Source<T> {
    /// A source that caches up to `budget` bytes of decoded records.
    pub fn new(set: Arc<RecordSet>, budget: u64) -> Self {
        let cache = Cache { budget, own: 0, held: 0, shared: T::Shared::default(), records: HashMap::new() };
        Source { set, cache: Mutex::new(cache) }
    }

    pub fn set(&self) -> &RecordSet {
        &self.set
    }

    /// The labeled records of `unit` that `pass` takes, in row order.
    pub fn records(&self, unit: Unit, pass: Pass) -> Result<Arc<Vec<T>>, Error> {
        if let Some((hit, _)) = self.cache().records.get(&(unit, pass)) {
            return Ok(hit.clone());
        }
        let mut records = T::read(&self.set, unit, pass)?;
        let mut cache = self.cache();
        let cache = &mut *cache;
        // Offered while this read ran (a refresh beside the next epoch's loader): keep that one.
        if let Some((hit, _)) = cache.records.get(&(unit, pass)) {
            return Ok(hit.clone());
        }
        let room = cache.budget.saturating_sub(cache.used());
        let Some(own) = T::keep(&mut records, &mut cache.shared, room) else { return Ok(Arc::new(records)) };
        let records = Arc::new(records);
        cache.own += own;
        cache.records.insert((unit, pass), (records.clone(), own));
        Ok(records)
    }

    /// The labeled records of `unit` that `pass` takes, for a pass that reads each unit once
    /// (the first evaluation, whose batches the trainer keeps): handed over from the cache,
    /// their bytes given back, where a refresh offered them; else read, and not cached.
    pub fn take(&self, unit: Unit, pass: Pass) -> Result<Arc<Vec<T>>, Error> {
        let taken = {
            let mut cache = self.cache();
            let cache = &mut *cache;
            let taken = cache.records.remove(&(unit, pass));
            if let Some((_, own)) = &taken {
                cache.own -= own;
                T::prune(&mut cache.shared);
            }
            taken
        };
        match taken {
            Some((records, _)) => Ok(records),
            None => Ok(Arc::new(T::read(&self.set, unit, pass)?)),
        }
    }

    /// Caches `records`, `unit`'s records of `pass` as [`Source::records`] reads them but read
    /// elsewhere (a control variates' refresh reads every record), where they fit and are not
    /// cached yet: the pass then finds them as if it had read them first.
    pub fn offer(&self, unit: Unit, pass: Pass, mut records: Vec<T>) {
        let mut cache = self.cache();
        let cache = &mut *cache;
        if cache.records.contains_key(&(unit, pass)) {
            return;
        }
        let room = cache.budget.saturating_sub(cache.used());
        let Some(own) = T::keep(&mut records, &mut cache.shared, room) else { return };
        cache.own += own;
        cache.records.insert((unit, pass), (Arc::new(records), own));
    }

    /// Bytes of records cached so far, and what [`Source::hold`] counted beside them.
    pub fn cached_bytes(&self) -> u64 {
        self.cache().used()
    }

    /// Bytes of the records cached alone, what they share included (the summary's figure).
    pub fn records_bytes(&self) -> u64 {
        let cache = self.cache();
        cache.used() - cache.held
    }

    /// Counts `bytes` the trainer keeps beside the records (control variates' roots) against
    /// the budget, so that what is cached after them fits beside them.
    pub fn hold(&self, bytes: u64) {
        self.cache().held += bytes;
    }

    /// The cache's budget in bytes.
    pub fn budget(&self) -> u64 {
        self.cache().budget
    }

    /// Drops the cached records of `pass` and gives their bytes back to the budget: for a pass
    /// whose batches the trainer keeps instead.
    pub fn release(&self, pass: Pass) {
        let mut cache = self.cache();
        let cache = &mut *cache;
        let freed: u64 = cache.records.iter().filter(|((_, p), _)| *p == pass).map(|(_, (_, own))| own).sum();
        cache.records.retain(|(_, p), _| *p != pass);
        cache.own -= freed;
        T::prune(&mut cache.shared);
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache<T>> {
        // The cache holds no invariant a panicking reader could break: take it over.
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Where an epoch's stream starts: the worker, the epoch and the seed choose its order.
#[derive(Debug, Clone, Copy)]
pub struct Order {
    pub seed: u64,
    pub epoch: usize,
    pub worker: usize,
}

/// The records of a pass over some units, in order: see the module doc.
pub struct RecordStream<T: Example = Record> {
    /// The units' records, decoded ahead on reader threads.
    ahead: ReadAhead<Arc<Vec<T>>>,
    /// The unit being drained.
    current: Option<Drain<T>>,
    buffer: Vec<T>,
    buffer_bytes: u64,
    capacity: u64,
    pick: Stream,
    failed: bool,
}

impl<T: Example> RecordStream<T> {
    /// The training records of `units` for one epoch, shuffled by `order` through a buffer of
    /// about `shuffle_bytes`.
    pub fn train(source: Arc<Source<T>>, units: &[Unit], order: Order, shuffle_bytes: u64) -> Self {
        let Order { seed, epoch, worker } = order;
        let visit: Vec<Unit> = epoch_order(units.len(), seed, epoch, worker).into_iter().map(|i| units[i]).collect();
        let pick = Stream::new(&[seed, epoch as u64, worker as u64, 0x5108]);
        Self::with(ReadAhead::new(visit, move |unit| source.records(unit, Pass::Train)), shuffle_bytes, pick)
    }

    /// The validation and test records of `units`, in unit order; `once`: each read once,
    /// taken out of the cache ([`Source::take`]).
    pub fn evaluate(source: Arc<Source<T>>, units: &[Unit], once: bool) -> Self {
        // A zero-byte buffer holds one record at a time: the stream keeps the order.
        let read =
            move |unit| if once { source.take(unit, Pass::Evaluate) } else { source.records(unit, Pass::Evaluate) };
        Self::with(ReadAhead::new(units.to_vec(), read), 0, Stream::new(&[0]))
    }

    fn with(ahead: ReadAhead<Arc<Vec<T>>>, capacity: u64, pick: Stream) -> Self {
        RecordStream { ahead, current: None, buffer: Vec::new(), buffer_bytes: 0, capacity, pick, failed: false }
    }

    /// The next record from the units, or `None` after the last.
    fn pull(&mut self) -> Result<Option<T>, Error> {
        loop {
            if let Some(r) = self.current.as_mut().and_then(Drain::next) {
                return Ok(Some(r));
            }
            let Some(records) = self.ahead.next()? else { return Ok(None) };
            self.current = Some(Drain::from(records));
        }
    }
}

/// A unit's records as the stream takes them: moved out when the stream holds the only copy
/// (a unit the cache did not keep), cloned from the cache's otherwise.
enum Drain<T> {
    Owned(std::vec::IntoIter<T>),
    Shared(Arc<Vec<T>>, usize),
}

impl<T: Clone> Drain<T> {
    fn from(records: Arc<Vec<T>>) -> Self {
        match Arc::try_unwrap(records) {
            Ok(records) => Drain::Owned(records.into_iter()),
            Err(kept) => Drain::Shared(kept, 0),
        }
    }

    fn next(&mut self) -> Option<T> {
        match self {
            Drain::Owned(records) => records.next(),
            Drain::Shared(records, next) => {
                let r = records.get(*next)?.clone();
                *next += 1;
                Some(r)
            }
        }
    }
}

/// Threads decoding a pass's units ahead of the stream. Decoding is the costliest part of a
/// streamed epoch (BENCHMARKS.md, section 1): one thread decoding while another shuffles and
/// batches still left the trainer waiting.
const READERS: usize = 2;

/// Units decoded on [`READERS`] threads of their own (reader `j` decodes units `j`,
/// `j + READERS`, ...) and taken in order, so that decoding the next units overlaps what is done
/// with this one: a pass's records for its stream, or every record for a control variates'
/// refresh (`crate::histories::refresh`). Each reader hands a unit over and waits (a rendezvous
/// channel), so the readers hold at most one decoded unit each beyond the taker's. A decoding
/// error is the next item; a reader that dies is an error, never fewer units. Dropped early,
/// its readers stop at their next hand-over.
pub(crate) struct ReadAhead<X> {
    readers: Vec<Reader<X>>,
    /// Units received so far, and the number of units.
    received: usize,
    units: usize,
}

/// A reader's channel, and its thread (`None` once joined, or if it never started).
type Reader<X> = (Receiver<Result<X, Error>>, Option<JoinHandle<()>>);

impl<X: Send + 'static> ReadAhead<X> {
    /// `visit`'s units, each decoded by `read`.
    pub(crate) fn new(visit: Vec<Unit>, read: impl Fn(Unit) -> Result<X, Error> + Send + Sync + 'static) -> Self {
        let (units, read) = (visit.len(), Arc::new(read));
        let readers = (0..READERS.min(units))
            .map(|j| {
                let (send, receive) = sync_channel(0);
                let (read, mine): (_, Vec<Unit>) =
                    (read.clone(), visit.iter().copied().skip(j).step_by(READERS).collect());
                let thread = std::thread::Builder::new()
                    .name("graphtrainer-reader".into())
                    .spawn(move || {
                        for unit in mine {
                            let decoded = read(unit);
                            let failed = decoded.is_err();
                            // The taker was dropped (cut short by an error elsewhere): stop.
                            if send.send(decoded).is_err() || failed {
                                return;
                            }
                        }
                    })
                    .ok();
                (receive, thread)
            })
            .collect();
        ReadAhead { readers, received: 0, units }
    }

    /// The next unit's decoding; `None` after the last.
    pub(crate) fn next(&mut self) -> Result<Option<X>, Error> {
        if self.received == self.units {
            return Ok(None);
        }
        let (receive, thread) = &mut self.readers[self.received % READERS];
        match receive.recv() {
            Ok(decoded) => {
                self.received += 1;
                decoded.map(Some)
            }
            Err(_) => Err(Error::thread_failed("record reader", thread.take().map(JoinHandle::join))),
        }
    }
}

impl<T: Example> Iterator for RecordStream<T> {
    type Item = Result<T, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        while self.buffer.is_empty() || self.buffer_bytes < self.capacity {
            match self.pull() {
                Ok(Some(r)) => {
                    self.buffer_bytes += r.size_bytes() as u64;
                    self.buffer.push(r);
                }
                Ok(None) => break,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        if self.buffer.is_empty() {
            return None;
        }
        let i = (self.pick.next_u64() % self.buffer.len() as u64) as usize;
        let r = self.buffer.swap_remove(i);
        self.buffer_bytes -= r.size_bytes() as u64;
        Some(Ok(r))
    }
}

/// A seeded Fisher-Yates shuffle of `0..len` for a worker's `epoch`.
pub fn epoch_order(len: usize, seed: u64, epoch: usize, worker: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut s = Stream::new(&[seed, epoch as u64, worker as u64, 0x5107]);
    for i in (1..len).rev() {
        let j = (s.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}
