//! Writes one worker's records as part files (see [`tables::parts`]): [`Lanes`] lay the rows out
//! in Arrow batches of about [`BATCH_BYTES`], an [`Encoder`] writes them.
//!
//! **Each row group holds the records of one split** (`train`, `valid`, `test`, or none): records
//! wait in a lane per split until the lane holds a row group's worth ([`ROW_GROUP_DECODED_BYTES`])
//! or the writer finishes, then go out together as one row group. A trainer reads a row group at
//! a time and counts each one's splits first, so its training pass decodes only the training row
//! groups and its evaluation pass only the others, instead of every row of the set twice an epoch
//! (BENCHMARKS.md, section 1). Within a lane, records keep the order they were pushed in (each
//! batch sorted by `Row::sort`), so the parts are the same every run.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, SchemaRef};
use parquet::file::properties::EnabledStatistics;
use parquet::schema::types::ColumnPath;

use crate::error::Error;
use schemas::Split;
use schemas::record::{LinkRecord, Record, RecordColumns, links_to_batch};
use tables::Io;
use tables::parts::{PartWriter as Parts, PartsOf, part_properties};
use tables::staging::StagedPart;

/// Records of a lane buffered before they become one Arrow batch.
const BATCH_BYTES: usize = 8 << 20;
/// Decoded bytes of one split's records that make a row group. Readers decode a row group at a
/// time, and dictionary-encoded features (Cora's 0/1 words) can be a hundred times smaller in
/// the file than in memory, which the writer's own row-group limit measures. The lanes hold up
/// to [`LANES`] times this.
const ROW_GROUP_DECODED_BYTES: usize = 32 << 20;
/// The dictionary of feature values a column chunk builds before it falls back to plain
/// pages: 32,768 distinct values. Few-valued features (Cora's 0/1) never reach it; many-valued
/// ones (random floats) stop hashing every value into it sooner than parquet's 1 MB default.
const DICTIONARY_BYTES: usize = 128 << 10;
/// Lanes of records waiting for their row group: one per split, and one for records without.
const LANES: usize = 4;

/// The leaf column of `node_features` (`list<fixed_size_list<float32>>`) in the Parquet schema.
fn feature_values() -> ColumnPath {
    ColumnPath::new([schemas::record::NODE_FEATURES, "list", "item", "list", "item"].map(String::from).to_vec())
}

/// A row of a record table: a node record (as a [`Record`], or as the pieces the rounds
/// gathered for it) or a link record.
pub trait Row: Clone + Send + 'static {
    /// The columns a lane lays its rows out in until they become a batch.
    type Columns: Columns<Self>;
    /// Its nodes and edges, for the summary.
    fn sizes(&self) -> (u64, u64);
    /// Rows of one batch in the order they are written: by content, so parts are the same
    /// every run.
    fn sort(rows: &mut [Self]);
    /// Its split: a row group holds the rows of one split.
    fn split(&self) -> Option<Split>;
}

/// Rows laid out for one Arrow batch. A lane starts from a clone of the writer's empty one.
pub trait Columns<R>: Clone + Send + 'static {
    /// Lays out `row`; returns the bytes it adds (as `Record::size_bytes` counts them).
    fn push(&mut self, row: R) -> usize;
    fn is_empty(&self) -> bool;
    /// The rows so far as one batch of `schema`, leaving the columns empty.
    fn take_batch(&mut self, schema: &SchemaRef) -> Result<RecordBatch, ArrowError>;
    /// Takes back the buffers of a written batch of these columns, to fill again (nothing, for
    /// columns that keep no buffers).
    fn recycle(&mut self, _written: RecordBatch) {}
}

impl Row for Record {
    type Columns = RecordColumns;

    fn sizes(&self) -> (u64, u64) {
        (self.num_nodes() as u64, self.num_edges() as u64)
    }

    fn sort(rows: &mut [Self]) {
        // Keys first, then each record moved once: a record is a few hundred bytes of headers.
        rows.sort_by_cached_key(|r| r.root);
    }

    fn split(&self) -> Option<Split> {
        self.split
    }
}

impl Columns<Record> for RecordColumns {
    fn push(&mut self, row: Record) -> usize {
        let before = self.bytes();
        RecordColumns::push(self, &row);
        self.bytes() - before
    }

    fn is_empty(&self) -> bool {
        RecordColumns::is_empty(self)
    }

    fn take_batch(&mut self, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
        RecordColumns::take_batch(self, schema)
    }

    fn recycle(&mut self, written: RecordBatch) {
        RecordColumns::recycle(self, written);
    }
}

impl Row for LinkRecord {
    type Columns = LinkRows;

    fn sizes(&self) -> (u64, u64) {
        (self.num_nodes() as u64, self.num_edges() as u64)
    }

    fn sort(rows: &mut [Self]) {
        // Parallel supervision edges of one split are the same record.
        rows.sort_by_cached_key(|r| (r.src, r.dst, r.split));
    }

    fn split(&self) -> Option<Split> {
        self.split
    }
}

/// Link records wait as rows and become a batch together (`links_to_batch`).
#[derive(Debug, Clone, Default)]
pub struct LinkRows(Vec<LinkRecord>);

impl Columns<LinkRecord> for LinkRows {
    fn push(&mut self, row: LinkRecord) -> usize {
        let bytes = row.size_bytes();
        self.0.push(row);
        bytes
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn take_batch(&mut self, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
        let batch = links_to_batch(&self.0, schema);
        self.0.clear();
        batch
    }
}

/// What the lanes hand the encoder, in order: a batch of the open row group, or its end.
#[derive(Debug)]
pub enum Piece {
    /// A batch, and the bytes its rows held as [`Columns::push`] counted them.
    Batch(RecordBatch, usize),
    EndRowGroup,
}

/// Rows of one split waiting for their row group: Arrow batches of about [`BATCH_BYTES`], and
/// the columns of the next one. Rows are laid out as they arrive: rows held until their row
/// group closes (up to 32 MB of small allocations a lane) made the 1M-node flatten about 8%
/// slower, most of it in the allocator.
struct Lane<C> {
    batches: Vec<(RecordBatch, usize)>,
    columns: C,
    /// Roughly the bytes of `columns`, and of everything in the lane, in memory.
    column_bytes: usize,
    bytes: usize,
}

impl<C> Lane<C> {
    /// Turns the lane's columns into a batch.
    fn convert<R>(&mut self, schema: &SchemaRef) -> Result<(), ArrowError>
    where
        C: Columns<R>,
    {
        if !self.columns.is_empty() {
            self.batches.push((self.columns.take_batch(schema)?, self.column_bytes));
            self.column_bytes = 0;
        }
        Ok(())
    }

    /// The lane's rows as the pieces of one row group, the lane left empty.
    fn close<R>(&mut self, schema: &SchemaRef, out: &mut Vec<Piece>) -> Result<(), ArrowError>
    where
        C: Columns<R>,
    {
        self.convert(schema)?;
        self.bytes = 0;
        if !self.batches.is_empty() {
            out.extend(self.batches.drain(..).map(|(batch, bytes)| Piece::Batch(batch, bytes)));
            out.push(Piece::EndRowGroup);
        }
        Ok(())
    }
}

fn lane_of(split: Option<Split>) -> usize {
    match split {
        None => 0,
        Some(Split::Train) => 1,
        Some(Split::Valid) => 2,
        Some(Split::Test) => 3,
    }
}

/// One worker's rows laid out in a lane per split, cut into batches and row groups: the
/// pieces an [`Encoder`] writes. Laying out (assembling a node record into its columns) runs
/// where the rows are made; encoding and compressing can run on a thread of their own
/// (`crate::writer_thread`), which hands written batches back: a lane whose columns became a
/// batch refills them from one ([`Lanes::recycle`]), so the worker lays out batch after batch
/// in the same buffers instead of allocating, growing and paging in new ones.
pub struct Lanes<R: Row = Record> {
    schema: SchemaRef,
    lanes: [Lane<R::Columns>; LANES],
    /// Written batches whose buffers the next converted lane takes back (at most [`LANES`]).
    written: Vec<RecordBatch>,
}

impl<R: Row> Lanes<R> {
    /// Lanes that lay rows out in clones of `columns` (empty), for batches of `schema`.
    pub fn new(schema: SchemaRef, columns: R::Columns) -> Self {
        let lane = || Lane { batches: Vec::new(), columns: columns.clone(), column_bytes: 0, bytes: 0 };
        Lanes { schema, lanes: std::array::from_fn(|_| lane()), written: Vec::new() }
    }

    /// Lays out `row`; any batch or row group it completes goes to `out`.
    pub fn push(&mut self, row: R, out: &mut Vec<Piece>) -> Result<(), ArrowError> {
        let Lanes { schema, lanes, written } = self;
        let held = &mut lanes[lane_of(row.split())];
        let bytes = held.columns.push(row);
        held.column_bytes += bytes;
        held.bytes += bytes;
        if held.column_bytes >= BATCH_BYTES {
            held.convert(schema)?;
        }
        if held.bytes >= ROW_GROUP_DECODED_BYTES {
            held.close(schema, out)?;
        }
        // Columns just taken as a batch have no room left.
        if held.columns.is_empty()
            && let Some(batch) = written.pop()
        {
            held.columns.recycle(batch);
        }
        Ok(())
    }

    /// Keeps a written batch for its buffers (see the type's doc).
    pub fn recycle(&mut self, batch: RecordBatch) {
        if self.written.len() < LANES {
            self.written.push(batch);
        }
    }

    /// What the lanes hold, in lane order, a row group each.
    pub fn finish(&mut self, out: &mut Vec<Piece>) -> Result<(), ArrowError> {
        self.lanes.iter_mut().try_for_each(|lane| lane.close(&self.schema, out))
    }
}

/// Writes the pieces of one worker's records as part files.
pub struct Encoder {
    parts: Parts,
}

impl Encoder {
    pub fn new(io: Arc<Io>, to: PartsOf, schema: SchemaRef, part_limit: u64) -> Self {
        // Chunk statistics on root_id and split only, where readers can prune by them (a row
        // group holds one split: its statistics say which, for `graphflat.open_records`, and
        // for DuckDB's or Spark's filters on split). Dictionary pages on
        // the feature values: low-cardinality features (Cora's 0/1) become bit-packed indices
        // (Cora's records: 1.7 MB against 5.7 MB with zstd alone); others fall back to plain
        // after the first megabyte of dictionary in each column chunk (docs/graphflat.md).
        let props = part_properties()
            .set_column_statistics_enabled(ColumnPath::from(schemas::record::ROOT_ID), EnabledStatistics::Chunk)
            .set_column_statistics_enabled(ColumnPath::from(schemas::record::SPLIT), EnabledStatistics::Chunk)
            .set_column_dictionary_enabled(feature_values(), true)
            .set_column_dictionary_page_size_limit(feature_values(), DICTIONARY_BYTES)
            .build();
        Encoder { parts: Parts::new(io, to, schema, props, part_limit) }
    }

    pub fn write(&mut self, piece: &Piece) -> Result<(), Error> {
        match piece {
            Piece::Batch(batch, _) => self.parts.write(batch),
            Piece::EndRowGroup => self.parts.end_row_group(),
        }
    }

    /// Bytes this writer has produced so far, counting the open part.
    pub fn bytes_so_far(&self) -> u64 {
        self.parts.bytes_so_far()
    }

    pub fn bytes_written(&self) -> u64 {
        self.parts.bytes_written
    }

    pub fn parts_written(&self) -> u32 {
        self.parts.parts_written
    }

    /// The finished parts, for the manifest.
    pub fn entries(&self) -> Vec<StagedPart> {
        self.parts.parts.clone()
    }

    /// Closes the open part.
    pub fn finish(&mut self) -> Result<(), Error> {
        self.parts.finish()
    }
}
