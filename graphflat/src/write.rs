//! The write side every record job shares: batches of work through a dataflow, one timely
//! epoch per batch, and the rows it emits written to parts, each batch sorted once complete.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use arrow_schema::{ArrowError, SchemaRef};
use cluster::{all_gather, wait_while};
use sampling::agree;
use schemas::FlattenConfig;
use serde::{Deserialize, Serialize};
use stage::progress::Progress;
use stage::{Worker, Written};
use tables::parts::PartsOf;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Input, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle, Scope, StreamVec};

use schemas::facts::Log2Counts;

use crate::error::Error;
use crate::sink::{Encoder, Lanes, Piece, Row};
use crate::writer_thread::{Finished, WriterThread};

/// The records' sizes on one worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecordStats {
    pub nodes: u64,
    pub edges: u64,
    pub max_nodes: u64,
    pub max_edges: u64,
    /// Records by their count of nodes and of edges.
    pub node_counts: Log2Counts,
    pub edge_counts: Log2Counts,
    /// Node rows this worker answered in the rounds, and those it sent to another worker.
    pub answered: u64,
    pub exchanged: u64,
    /// A refresh: the parts this worker wrote again without their affected records, the
    /// records those kept, and the parts its rounds wrote.
    pub rewritten: u64,
    pub kept: u64,
    pub new_parts: u64,
}

impl RecordStats {
    fn add(&mut self, (nodes, edges): (u64, u64)) {
        self.nodes += nodes;
        self.edges += edges;
        self.max_nodes = self.max_nodes.max(nodes);
        self.max_edges = self.max_edges.max(edges);
        self.node_counts.add(nodes);
        self.edge_counts.add(edges);
    }
}

/// Runs `batches` through the dataflow that `build` makes, one timely epoch per batch with at
/// most `max_in_flight` in flight, and writes the rows it emits to parts, each batch sorted
/// (`Row::sort`) once it is complete, so parts are the same every run, and laid out in clones
/// of `columns`. Every worker calls this at the same point; a worker with fewer batches sends
/// empty epochs.
pub(crate) fn write_batches<I, R>(
    worker: &mut Worker,
    config: &FlattenConfig,
    schema: SchemaRef,
    output: &PartsOf,
    batches: Vec<Vec<I>>,
    columns: R::Columns,
    build: impl for<'s> FnOnce(Scope<'s, u64>, StreamVec<'s, u64, I>) -> StreamVec<'s, u64, R>,
) -> Result<Written<RecordStats>, Error>
where
    I: timely::ExchangeData + Clone,
    R: Row,
{
    let (progress, reporter) = (worker.progress.clone(), worker.reporter);
    let index = worker.timely.index();
    let epochs = all_gather(worker.timely, vec![(batches.len() as u64, index)]).iter().map(|b| b.0).max().unwrap_or(0);
    let encoder =
        Encoder::new(worker.io.clone(), output.clone(), schema.clone(), schemas::job::mb_bytes(config.part_size_mb));
    let thread = WriterThread::spawn(encoder, format!("graphflat:writer-{index}"))?;
    let lanes = Lanes::<R>::new(schema, columns);
    let writer = Writer { lanes, thread: Some(thread), output: output.dir.shown() };
    let state = WriteState::default();
    let mut sink = WriteSink {
        pending: HashMap::new(),
        writer: Some(writer),
        progress: progress.clone(),
        counted: 0,
        state: state.clone(),
    };

    let timely = &mut *worker.timely;
    let mut input = InputHandleVec::<u64, I>::new();
    let probe = ProbeHandle::new();
    timely.dataflow::<u64, _, _>(|scope| {
        let items = scope.input_from(&mut input);
        build(scope, items).probe_with(&probe).sink(Pipeline, "Write", move |(input, frontier)| {
            // Rows of a batch arrive in no fixed order: hold each batch until it is complete.
            input.for_each(|cap, rows| sink.hold(cap.least().copied().unwrap_or_default(), rows));
            sink.write_complete(|t| frontier.less_equal(t));
            if frontier.is_empty() {
                sink.finish();
            }
            sink.count_bytes();
        });
    });
    let report = reporter.then_some(&*progress);
    feed(timely, &mut input, &probe, batches, epochs, config.max_in_flight as u64, report);
    input.close();
    wait_while(timely, || !state.finished.get());
    let failure = state.failure.take();
    agree(timely, failure.map_or(Ok(()), Err))?;
    Ok(state.written.take())
}

/// Sends batch `e` of `batches` as epoch `e`, for each of the `epochs` every worker sends
/// (empty past this worker's last batch), keeping at most `max_in_flight` batches between
/// input and output; the reporter logs the progress as it goes.
fn feed<I: timely::ExchangeData + Clone>(
    timely: &mut timely::worker::Worker,
    input: &mut InputHandleVec<u64, I>,
    probe: &ProbeHandle<u64>,
    batches: Vec<Vec<I>>,
    epochs: u64,
    max_in_flight: u64,
    report: Option<&Progress>,
) {
    let mut batches = batches.into_iter();
    for epoch in 0..epochs {
        for item in batches.next().into_iter().flatten() {
            input.send(item);
        }
        input.advance_to(epoch + 1);
        // Keep at most `max_in_flight` batches between input and output.
        let oldest = (epoch + 1).saturating_sub(max_in_flight);
        wait_while(timely, || probe.less_than(&oldest));
        if let Some(progress) = report {
            progress.report(0, Duration::from_secs(2), false);
        }
    }
}

/// What the write operator hands back to its worker: the account of what it wrote, its first
/// failure, and whether it has finished (the writer closed, or dropped after a failure).
#[derive(Clone, Default)]
struct WriteState {
    written: Rc<RefCell<Written<RecordStats>>>,
    failure: Rc<RefCell<Option<Error>>>,
    finished: Rc<Cell<bool>>,
}

/// The write operator: each batch's rows held until the batch is complete, the writer
/// (`None` once it failed or finished), and the bytes already added to the process's progress
/// counter (`counted`, never more than the writer has written).
struct WriteSink<R: Row> {
    pending: HashMap<u64, Vec<R>>,
    writer: Option<Writer<R>>,
    progress: Arc<Progress>,
    counted: u64,
    state: WriteState,
}

impl<R: Row> WriteSink<R> {
    /// Holds `rows` of the batch at `time` until the batch is complete.
    fn hold(&mut self, time: u64, rows: &mut Vec<R>) {
        self.pending.entry(time).or_default().append(rows);
    }

    /// Writes every complete batch (none that `incomplete` says may still grow), in time
    /// order, each sorted, and counts its rows; a failed write drops the writer (its thread
    /// stops without closing its part) and keeps the failure.
    fn write_complete(&mut self, incomplete: impl Fn(&u64) -> bool) {
        let mut done: Vec<u64> = self.pending.keys().copied().filter(|t| !incomplete(t)).collect();
        done.sort_unstable();
        for time in done {
            let mut rows = self.pending.remove(&time).unwrap_or_default();
            R::sort(&mut rows);
            let mut written = self.state.written.borrow_mut();
            for row in &rows {
                written.targets += 1;
                written.own.add(row.sizes());
            }
            self.progress.advance(0, rows.len() as u64);
            if let Some(w) = self.writer.as_mut()
                && let Err(e) = w.write(rows)
            {
                self.writer = None;
                *self.state.failure.borrow_mut() = Some(e);
            }
        }
    }

    /// Once the input is done: closes the writer (once) and keeps its account, or its failure.
    fn finish(&mut self) {
        if self.state.finished.get() {
            return;
        }
        match self.writer.take().map(Writer::finish) {
            Some(Ok(done)) => {
                self.progress.add_bytes(done.bytes_written.saturating_sub(self.counted));
                self.counted = done.bytes_written;
                let mut written = self.state.written.borrow_mut();
                written.bytes = done.bytes_written;
                written.parts = done.parts_written;
                written.entries = done.entries;
            }
            Some(Err(e)) => *self.state.failure.borrow_mut() = Some(e),
            None => {}
        }
        self.state.finished.set(true);
    }

    /// Adds the bytes the writer's thread wrote since the last count to the progress counter.
    fn count_bytes(&mut self) {
        let thread = self.writer.as_ref().and_then(|w| w.thread.as_ref());
        let now = thread.map_or(self.counted, WriterThread::bytes_so_far);
        self.progress.add_bytes(now.saturating_sub(self.counted));
        self.counted = now;
    }
}

/// A worker's records on their way to parts: laid out in lanes here, encoded on the thread.
struct Writer<R: Row> {
    lanes: Lanes<R>,
    /// `None` once it has stopped.
    thread: Option<WriterThread>,
    /// The output, for errors about a batch headed there.
    output: String,
}

impl<R: Row> Writer<R> {
    /// Lays out a batch's rows and hands the thread the pieces they complete.
    fn write(&mut self, rows: Vec<R>) -> Result<(), Error> {
        if let Some(thread) = &self.thread {
            thread.written().for_each(|batch| self.lanes.recycle(batch));
        }
        let mut pieces = Vec::new();
        for row in rows {
            self.lanes.push(row, &mut pieces).map_err(|source| self.arrow(source))?;
        }
        self.hand_over(pieces)
    }

    /// Writes what the lanes hold, closes the open part and returns the account.
    fn finish(mut self) -> Result<Finished, Error> {
        let mut pieces = Vec::new();
        self.lanes.finish(&mut pieces).map_err(|source| self.arrow(source))?;
        self.hand_over(pieces)?;
        self.thread.take().map_or_else(|| Err(stopped()), WriterThread::finish)
    }

    fn hand_over(&mut self, pieces: Vec<Piece>) -> Result<(), Error> {
        if pieces.is_empty() {
            return Ok(());
        }
        let Some(thread) = self.thread.as_mut() else { return Err(stopped()) };
        if thread.push(pieces).is_err() {
            // A stopped thread says why when it is finished.
            let error = self.thread.take().map(WriterThread::finish).and_then(Result::err);
            return Err(error.unwrap_or_else(stopped));
        }
        Ok(())
    }

    fn arrow(&self, source: ArrowError) -> Error {
        Error::Arrow { file: self.output.clone(), source }
    }
}

fn stopped() -> Error {
    Error::Internal("the record writer stopped without saying why".into())
}
