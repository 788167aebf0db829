//! A worker's [`Encoder`] on a thread of its own, so that encoding and compressing the
//! records (Parquet levels and pages, zstd: about a third of a flatten's work) runs beside the
//! rounds instead of between them. The worker lays its records out in Arrow batches
//! (`crate::sink::Lanes`) and hands the thread the pieces.
//!
//! Invariants:
//! - **The same bytes as writing in place.** The worker hands over the pieces in the order it
//!   would have written them, and one thread writes them in that order.
//! - **Bounded memory.** The pieces waiting between the worker and the thread hold at most
//!   [`QUEUED_BYTES`] of rows (or one hand-over, however large); a worker that gets ahead waits
//!   for the thread.
//! - **Nothing is written after a failure.** The thread closes the open part only on
//!   [`WriterThread::finish`]; a worker that unwinds stops the queue, and the thread stops after
//!   the batch in hand, writing none of the batches still queued and without closing its part (as an in-place writer dropped mid-part does).
//!   The thread's first error stops it; the worker's next push sees the queue closed and
//!   [`WriterThread::finish`] returns that error. A panic on the thread is raised again on the
//!   worker, with its message.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryIter, channel, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use schemas::message::panic_text;
use tables::staging::StagedPart;

use crate::error::Error;
use crate::sink::{Encoder, Piece};

/// Bytes of rows (as `sink::Columns::push` counts them) that may wait for the thread: about
/// six row groups. The lanes hand over a row group's batches at once; with room for two, the
/// worker and the thread waited on each other a fifth of the 1M flatten's rounds (docs/graphflat.md).
const QUEUED_BYTES: usize = 192 << 20;

/// Written batches waiting to go back to the worker (`WriterThread::written`); more are dropped
/// on the thread.
const WRITTEN: usize = 4;

/// What the worker sends: pieces to write (with their rows' bytes), or the end of the output.
enum Message {
    Pieces(Vec<Piece>, usize),
    Finish,
}

/// The bytes waiting in the queue, and whether the thread has stopped taking them.
#[derive(Default)]
struct Queued {
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl Queued {
    /// Waits for room for `bytes` (an empty queue always has room); false once stopped.
    fn admit(&self, bytes: usize) -> bool {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut state = self
            .changed
            .wait_while(state, |(queued, stopped)| !*stopped && *queued > 0 && *queued + bytes > QUEUED_BYTES)
            .unwrap_or_else(|e| e.into_inner());
        state.0 += bytes;
        !state.1
    }

    fn taken(&self, bytes: usize) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0 -= bytes;
        self.changed.notify_all();
    }

    fn stop(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.changed.notify_all();
    }

    fn is_stopped(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1
    }
}

/// Marks the queue stopped when the thread ends, however it ends (a panic too), so that a
/// waiting worker wakes.
struct StopOnExit(Arc<Queued>);

impl Drop for StopOnExit {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The writer's account once its parts are closed.
#[derive(Debug, Clone, Default)]
pub struct Finished {
    pub bytes_written: u64,
    pub parts_written: u32,
    pub entries: Vec<StagedPart>,
}

pub struct WriterThread {
    queue: Option<Sender<Message>>,
    /// Batches the thread has written, handed back for their buffers.
    written: Receiver<RecordBatch>,
    queued: Arc<Queued>,
    thread: Option<JoinHandle<Result<Finished, Error>>>,
    /// Bytes produced so far, counting the open part (for progress).
    bytes: Arc<AtomicU64>,
}

impl WriterThread {
    /// Starts `writer` on a thread named `name`.
    pub fn spawn(writer: Encoder, name: String) -> Result<Self, Error> {
        let (queue, batches) = channel();
        let (give_back, written) = sync_channel(WRITTEN);
        let (bytes, queued) = (Arc::new(AtomicU64::new(0)), Arc::new(Queued::default()));
        let (counter, stop) = (bytes.clone(), StopOnExit(queued.clone()));
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || run(writer, batches, give_back, &counter, stop))
            .map_err(|e| Error::Internal(format!("cannot start the record writer's thread: {e}")))?;
        Ok(WriterThread { queue: Some(queue), written, queued, thread: Some(thread), bytes })
    }

    /// The batches written since the last call, for their buffers (`sink::Lanes::recycle`).
    pub fn written(&self) -> TryIter<'_, RecordBatch> {
        self.written.try_iter()
    }

    /// Hands `pieces` to the thread, waiting while the queue holds [`QUEUED_BYTES`]. An error
    /// means the thread has stopped: [`WriterThread::finish`] says why.
    pub fn push(&mut self, pieces: Vec<Piece>) -> Result<(), Stopped> {
        let queue = self.queue.as_ref().ok_or(Stopped)?;
        let bytes = pieces.iter().map(|p| if let Piece::Batch(_, bytes) = p { *bytes } else { 0 }).sum();
        if !self.queued.admit(bytes) {
            return Err(Stopped);
        }
        queue.send(Message::Pieces(pieces, bytes)).map_err(|_| Stopped)
    }

    pub fn bytes_so_far(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Writes what the thread holds, closes the open part and returns the account; or the
    /// thread's error.
    pub fn finish(mut self) -> Result<Finished, Error> {
        if let Some(queue) = self.queue.take() {
            // A closed queue: the thread stopped on an error, which joining returns.
            let _ = queue.send(Message::Finish);
        }
        let thread = self.thread.take().expect("joined only here and in drop");
        match thread.join() {
            Ok(result) => result,
            Err(panic) => {
                std::panic::panic_any(format!("the record writer's thread panicked: {}", panic_text(&*panic)))
            }
        }
    }
}

/// The thread has stopped (on an error that [`WriterThread::finish`] returns).
#[derive(Debug, Clone, Copy)]
pub struct Stopped;

impl Drop for WriterThread {
    /// Unwinding without [`WriterThread::finish`]: the queue closes, and the thread stops
    /// without closing its part.
    fn drop(&mut self) {
        // Stopped first: the batches still queued are not written.
        self.queued.stop();
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(
    mut writer: Encoder,
    batches: Receiver<Message>,
    give_back: SyncSender<RecordBatch>,
    bytes: &AtomicU64,
    stop: StopOnExit,
) -> Result<Finished, Error> {
    for message in batches {
        match message {
            Message::Pieces(pieces, size) => {
                // Only a worker that gave up on the writer stops the queue while it runs.
                if stop.0.is_stopped() {
                    break;
                }
                for piece in pieces {
                    writer.write(&piece)?;
                    if let Piece::Batch(batch, _) = piece {
                        // A full return queue: this one is freed here.
                        let _ = give_back.try_send(batch);
                    }
                }
                stop.0.taken(size);
                bytes.store(writer.bytes_so_far(), Ordering::Relaxed);
            }
            Message::Finish => {
                writer.finish()?;
                bytes.store(writer.bytes_written(), Ordering::Relaxed);
                return Ok(Finished {
                    bytes_written: writer.bytes_written(),
                    parts_written: writer.parts_written(),
                    entries: writer.entries(),
                });
            }
        }
    }
    Err(Error::Internal("the record writer was dropped before it finished".into()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use arrow_schema::{Schema, SchemaRef};
    use schemas::record::record_fields;
    use schemas::{LabelKind, Record, Split, StorageConfig};
    use tables::{Io, Place};

    use super::*;
    use crate::sink::Lanes;

    fn record(root: i64) -> Record {
        let split = [None, Some(Split::Train), Some(Split::Valid), Some(Split::Test)][root as usize % 4];
        Record {
            root,
            split,
            node_ids: vec![root, root + 1],
            hops: vec![0, 1],
            in_degrees: vec![1, 0],
            features: (0..8).map(|i| (root * 8 + i) as f32 / 7.0).collect(),
            edge_src: vec![1],
            edge_dst: vec![0],
            edge_weights: vec![1.0],
            edge_layers: vec![1],
            ..Record::default()
        }
    }

    /// A record of 5,000 nodes, about 170 kB: 200 of them make several row groups.
    fn big(root: i64) -> Record {
        let nodes = 5000;
        Record {
            node_ids: (root..root + nodes).collect(),
            hops: vec![1; nodes as usize],
            in_degrees: vec![0; nodes as usize],
            features: vec![0.5; nodes as usize * 4],
            ..record(root * 4)
        }
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(record_fields(4, LabelKind::Class, 0)))
    }

    fn writer(io: &Arc<Io>, dir: &Path) -> Encoder {
        let place =
            Place::parse_output(dir.to_str().expect("a UTF-8 path"), &StorageConfig::default()).expect("a local path");
        let to = tables::parts::PartsOf { dir: place, run: "r".into(), worker: 0 };
        // Parts of a few kB: the rows span several parts and row groups.
        Encoder::new(io.clone(), to, schema(), 4 << 10)
    }

    fn lanes() -> Lanes<Record> {
        Lanes::new(schema(), Default::default())
    }

    /// The pieces `rows` complete, and with `finish` all the lanes hold.
    fn pieces(lanes: &mut Lanes<Record>, rows: impl IntoIterator<Item = Record>, finish: bool) -> Vec<Piece> {
        let mut out = Vec::new();
        rows.into_iter().for_each(|r| lanes.push(r, &mut out).unwrap());
        if finish {
            lanes.finish(&mut out).unwrap();
        }
        out
    }

    /// The parts of run "r" staged under `dir`, with their bytes.
    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("_temporary/r"))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap()))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("graphflat-writer-thread-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn writes_the_bytes_an_in_place_writer_writes() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let batches: Vec<Vec<Record>> = (0..20).map(|b| (b * 50..(b + 1) * 50).map(record).collect()).collect();

        let in_place_dir = scratch("in-place");
        let mut in_place = writer(&io, &in_place_dir);
        let all = pieces(&mut lanes(), batches.iter().flatten().cloned(), true);
        all.iter().for_each(|p| in_place.write(p).unwrap());
        in_place.finish().unwrap();

        let threaded_dir = scratch("threaded");
        let mut threaded = WriterThread::spawn(writer(&io, &threaded_dir), "test-writer".into()).unwrap();
        let mut lanes = lanes();
        batches.iter().for_each(|b| threaded.push(pieces(&mut lanes, b.clone(), false)).unwrap());
        threaded.push(pieces(&mut lanes, [], true)).unwrap();
        let finished = threaded.finish().unwrap();

        let (expected, got) = (files(&in_place_dir), files(&threaded_dir));
        assert!(expected.len() > 2, "the rows should span several parts, got {}", expected.len());
        assert!(expected == got, "the threaded writer wrote other files");
        assert_eq!(finished.parts_written as usize, got.len());
        assert_eq!(finished.bytes_written, got.iter().map(|f| f.1.len() as u64).sum::<u64>());
        assert_eq!(finished.entries, in_place.entries());
        // A failed test keeps its files to be read.
        [in_place_dir, threaded_dir].iter().for_each(|d| std::fs::remove_dir_all(d).unwrap());
    }

    #[test]
    fn a_failed_write_stops_the_thread_and_finish_says_why() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        // The output directory is a file: the first part cannot be created.
        let dir = scratch("blocked");
        std::fs::write(&dir, b"not a directory").unwrap();
        let mut threaded = WriterThread::spawn(writer(&io, &dir), "test-writer".into()).unwrap();
        // A row group (32 MB) is written, and fails, long before the last push, and the queue
        // closes.
        let mut lanes = lanes();
        let stopped =
            (0..100).any(|b| threaded.push(pieces(&mut lanes, (b * 10..(b + 1) * 10).map(big), false)).is_err());
        let error = threaded.finish().expect_err("writing under a file must fail");
        assert!(stopped, "pushes after the failure should see the thread stopped");
        assert!(matches!(error, Error::Write { .. } | Error::Store { .. }), "{error:?}");
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn a_writer_dropped_before_finishing_closes_no_part() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let dir = scratch("dropped");
        std::fs::create_dir_all(&dir).unwrap();
        let mut threaded = WriterThread::spawn(writer(&io, &dir), "test-writer".into()).unwrap();
        threaded.push(pieces(&mut lanes(), (0..10).map(record), true)).unwrap();
        drop(threaded);
        // Ten small rows fit one open part, which only `finish` closes.
        assert!(
            files(&dir).is_empty(),
            "a part was written: {:?}",
            files(&dir).iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn batches_still_queued_when_the_worker_gives_up_are_not_written() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let dir = scratch("given-up");
        std::fs::create_dir_all(&dir).unwrap();
        // Enough rows for several row groups and parts, queued, then the queue stopped (what
        // dropping a `WriterThread` does before the thread takes them).
        let (queue, batches) = channel();
        let mut lanes = lanes();
        (0..60).for_each(|b| {
            queue.send(Message::Pieces(pieces(&mut lanes, (b * 10..(b + 1) * 10).map(big), false), 0)).unwrap()
        });
        let queued = Arc::new(Queued::default());
        queued.stop();
        drop(queue);
        let (give_back, _written) = sync_channel(WRITTEN);
        let result = run(writer(&io, &dir), batches, give_back, &AtomicU64::new(0), StopOnExit(queued));
        assert!(result.is_err(), "a writer given up on reports no account");
        assert!(files(&dir).is_empty(), "queued rows were written after the worker gave up");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
