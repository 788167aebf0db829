//! Writes one worker's records as part files (see [`tables::parts`]), converting them to Arrow
//! batches of about [`BATCH_BYTES`].

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, SchemaRef};
use parquet::file::properties::EnabledStatistics;
use parquet::schema::types::ColumnPath;

use crate::error::Error;
use schemas::record::{LinkRecord, Record, links_to_batch, to_batch};
use tables::Io;
use tables::commit::PartEntry;
use tables::parts::{PartWriter as Parts, PartsOf, part_properties};

/// Records buffered before they become one Arrow batch.
const BATCH_BYTES: usize = 8 << 20;

/// The leaf column of `node_features` (`list<fixed_size_list<float32>>`) in the Parquet schema.
fn feature_values() -> ColumnPath {
    ColumnPath::new([schemas::record::NODE_FEATURES, "list", "item", "list", "item"].map(String::from).to_vec())
}

/// A row of a record table: a node record or a link record.
pub trait Row: Clone + 'static {
    /// Roughly the bytes it takes in memory, for batching writes.
    fn size_bytes(&self) -> usize;
    /// Its nodes and edges, for the summary.
    fn sizes(&self) -> (u64, u64);
    /// Rows of one batch in the order they are written: by content, so parts are the same
    /// every run.
    fn sort(rows: &mut [Self]);
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
        rows.sort_unstable_by_key(|r| r.root);
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
        rows.sort_unstable_by_key(|a| (a.src, a.dst, a.split));
    }

    fn to_batch(rows: &[Self], schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
        links_to_batch(rows, schema)
    }
}

pub struct PartWriter<R: Row = Record> {
    parts: Parts,
    buffered: Vec<R>,
    buffered_bytes: usize,
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
        PartWriter { parts: Parts::new(io, to, schema, props, part_limit), buffered: Vec::new(), buffered_bytes: 0 }
    }

    pub fn push(&mut self, record: R) -> Result<(), Error> {
        self.buffered_bytes += record.size_bytes();
        self.buffered.push(record);
        if self.buffered_bytes >= BATCH_BYTES {
            self.write_buffered()?;
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

    fn write_buffered(&mut self) -> Result<(), Error> {
        if self.buffered.is_empty() {
            return Ok(());
        }
        let batch = R::to_batch(&self.buffered, self.parts.schema())
            .map_err(|source| Error::Arrow { file: self.parts.current_name(), source })?;
        self.buffered.clear();
        self.buffered_bytes = 0;
        self.parts.write(&batch)
    }

    /// Writes what is buffered and closes the open part.
    pub fn finish(&mut self) -> Result<(), Error> {
        self.write_buffered()?;
        self.parts.finish()
    }
}
