//! Writes one worker's records as part files (see [`tables::parts`]), converting them to Arrow
//! batches of about [`BATCH_BYTES`].
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
use schemas::record::{LinkRecord, Record, links_to_batch, to_batch};
use tables::Io;
use tables::commit::PartEntry;
use tables::parts::{PartWriter as Parts, PartsOf, part_properties};

/// Records of a lane buffered before they become one Arrow batch.
const BATCH_BYTES: usize = 8 << 20;
/// Decoded bytes of one split's records that make a row group. Readers decode a row group at a
/// time, and dictionary-encoded features (Cora's 0/1 words) can be a hundred times smaller in
/// the file than in memory, which the writer's own row-group limit measures. The lanes hold up
/// to [`LANES`] times this.
const ROW_GROUP_DECODED_BYTES: usize = 32 << 20;
/// Lanes of records waiting for their row group: one per split, and one for records without.
const LANES: usize = 4;

/// The leaf column of `node_features` (`list<fixed_size_list<float32>>`) in the Parquet schema.
fn feature_values() -> ColumnPath {
    ColumnPath::new([schemas::record::NODE_FEATURES, "list", "item", "list", "item"].map(String::from).to_vec())
}

/// A row of a record table: a node record or a link record.
pub trait Row: Clone + Send + 'static {
    /// Roughly the bytes it takes in memory, for batching writes.
    fn size_bytes(&self) -> usize;
    /// Its nodes and edges, for the summary.
    fn sizes(&self) -> (u64, u64);
    /// Rows of one batch in the order they are written: by content, so parts are the same
    /// every run.
    fn sort(rows: &mut [Self]);
    /// Its split: a row group holds the rows of one split.
    fn split(&self) -> Option<Split>;
    fn to_batch(rows: &[Self], schema: &SchemaRef) -> Result<RecordBatch, ArrowError>;
}

impl Row for Record {
    fn size_bytes(&self) -> usize {
        Record::size_bytes(self)
    }

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

    fn to_batch(rows: &[Self], schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
        to_batch(rows, schema)
    }
}

impl Row for LinkRecord {
    fn size_bytes(&self) -> usize {
        LinkRecord::size_bytes(self)
    }

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

    fn to_batch(rows: &[Self], schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
        links_to_batch(rows, schema)
    }
}

/// Rows of one split waiting for their row group: Arrow batches of about [`BATCH_BYTES`], and
/// the rows of the next one. Rows become a batch as soon as there are enough of them: rows
/// held until their row group closes (up to 32 MB of small allocations a lane) made the 1M-node
/// flatten about 8% slower, most of it in the allocator.
struct Lane<R> {
    batches: Vec<RecordBatch>,
    rows: Vec<R>,
    /// Roughly the bytes of `rows`, and of everything in the lane, in memory.
    row_bytes: usize,
    bytes: usize,
}

impl<R> Default for Lane<R> {
    fn default() -> Self {
        Lane { batches: Vec::new(), rows: Vec::new(), row_bytes: 0, bytes: 0 }
    }
}

impl<R: Row> Lane<R> {
    /// Turns the lane's rows into a batch.
    fn convert(&mut self, parts: &Parts) -> Result<(), Error> {
        if !self.rows.is_empty() {
            let batch = R::to_batch(&self.rows, parts.schema())
                .map_err(|source| Error::Arrow { file: parts.current_name(), source })?;
            self.batches.push(batch);
            self.rows.clear();
            self.row_bytes = 0;
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

pub struct PartWriter<R: Row = Record> {
    parts: Parts,
    lanes: [Lane<R>; LANES],
}

impl<R: Row> PartWriter<R> {
    pub fn new(io: Arc<Io>, to: PartsOf, schema: SchemaRef, part_limit: u64) -> Self {
        // Chunk statistics on root_id only, where readers can prune by it. Dictionary pages on
        // the feature values: low-cardinality features (Cora's 0/1) become bit-packed indices
        // (Cora's records: 1.7 MB against 5.7 MB with zstd alone); others fall back to plain
        // after the first megabyte of dictionary in each column chunk (docs/graphflat.md).
        let props = part_properties()
            .set_column_statistics_enabled(ColumnPath::from(schemas::record::ROOT_ID), EnabledStatistics::Chunk)
            .set_column_dictionary_enabled(feature_values(), true)
            .build();
        let parts = Parts::new(io, to, schema, props, part_limit);
        PartWriter { parts, lanes: Default::default() }
    }

    pub fn push(&mut self, record: R) -> Result<(), Error> {
        let lane = lane_of(record.split());
        let held = &mut self.lanes[lane];
        let bytes = record.size_bytes();
        held.rows.push(record);
        held.row_bytes += bytes;
        held.bytes += bytes;
        if held.row_bytes >= BATCH_BYTES {
            held.convert(&self.parts)?;
        }
        if held.bytes >= ROW_GROUP_DECODED_BYTES {
            self.write_lane(lane)?;
        }
        Ok(())
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
    pub fn entries(&self) -> Vec<PartEntry> {
        self.parts.parts.clone()
    }

    /// Writes a lane's rows as one row group.
    fn write_lane(&mut self, lane: usize) -> Result<(), Error> {
        let mut held = std::mem::take(&mut self.lanes[lane]);
        held.convert(&self.parts)?;
        if held.batches.is_empty() {
            return Ok(());
        }
        for batch in held.batches {
            self.parts.write(&batch)?;
        }
        self.parts.end_row_group()
    }

    /// Writes what the lanes hold, in lane order, and closes the open part.
    pub fn finish(&mut self) -> Result<(), Error> {
        for lane in 0..LANES {
            self.write_lane(lane)?;
        }
        self.parts.finish()
    }
}
