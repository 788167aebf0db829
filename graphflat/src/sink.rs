//! Writes one worker's records as zstd Parquet part files, starting a new part when the current
//! one passes the size limit. Parts go through `object_store`'s multipart upload, which makes a
//! part visible only when it is complete.

use std::sync::Arc;

use arrow_schema::SchemaRef;
use object_store::buffered::BufWriter;
use parquet::arrow::AsyncArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::error::Error;
use schemas::record::{Record, to_batch};
use crate::store::{Io, Place};

/// Records buffered before they become one Arrow batch.
const BATCH_BYTES: usize = 8 << 20;
/// A row group closes at about this many bytes in memory.
const ROW_GROUP_BYTES: usize = 64 << 20;

pub struct PartWriter {
    io: Arc<Io>,
    dir: Place,
    schema: SchemaRef,
    worker: usize,
    part_limit: u64,
    next_part: u32,
    current: Option<AsyncArrowWriter<BufWriter>>,
    buffered: Vec<Record>,
    buffered_bytes: usize,
    /// Bytes of finished parts.
    pub bytes_written: u64,
    pub parts_written: u32,
}

impl PartWriter {
    pub fn new(io: Arc<Io>, dir: Place, schema: SchemaRef, worker: usize, part_limit: u64) -> Self {
        PartWriter {
            io,
            dir,
            schema,
            worker,
            part_limit,
            next_part: 0,
            current: None,
            buffered: Vec::new(),
            buffered_bytes: 0,
            bytes_written: 0,
            parts_written: 0,
        }
    }

    pub fn push(&mut self, record: Record) -> Result<(), Error> {
        self.buffered_bytes += record.size_bytes();
        self.buffered.push(record);
        if self.buffered_bytes >= BATCH_BYTES {
            self.write_buffered()?;
        }
        Ok(())
    }

    /// Bytes this writer has produced so far, counting the open part.
    pub fn bytes_so_far(&self) -> u64 {
        self.bytes_written + self.current.as_ref().map_or(0, |w| w.bytes_written() as u64)
    }

    fn write_buffered(&mut self) -> Result<(), Error> {
        if self.buffered.is_empty() {
            return Ok(());
        }
        let part = self.dir.child(&format!("part-{:05}-{:05}.parquet", self.worker, self.next_part));
        let file = part.shown();
        let batch = to_batch(&self.buffered, &self.schema)
            .map_err(|source| Error::Arrow { file: file.clone(), source })?;
        self.buffered.clear();
        self.buffered_bytes = 0;
        if self.current.is_none() {
            // Dictionaries and page statistics cost more than half the write time on feature
            // columns and buy nothing there (zstd does the compressing); keep chunk statistics on
            // root_id only, where readers can prune by it.
            let props = WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid")))
                .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
                .set_dictionary_enabled(false)
                .set_statistics_enabled(EnabledStatistics::None)
                .set_column_statistics_enabled(ColumnPath::from(schemas::record::ROOT_ID), EnabledStatistics::Chunk)
                .build();
            let upload = BufWriter::new(part.store.clone(), part.path.clone());
            let writer = AsyncArrowWriter::try_new(upload, self.schema.clone(), Some(props))
                .map_err(|source| Error::Write { file: file.clone(), source })?;
            self.current = Some(writer);
        }
        let writer = self.current.as_mut().expect("opened above");
        self.io.block_on(writer.write(&batch)).map_err(|source| Error::Write { file: file.clone(), source })?;
        if (writer.bytes_written() + writer.in_progress_size()) as u64 >= self.part_limit {
            self.close_part()?;
        }
        Ok(())
    }

    fn close_part(&mut self) -> Result<(), Error> {
        if let Some(mut writer) = self.current.take() {
            let file = self.dir.child(&format!("part-{:05}-{:05}.parquet", self.worker, self.next_part)).shown();
            self.io.block_on(writer.finish()).map_err(|source| Error::Write { file, source })?;
            self.bytes_written += writer.bytes_written() as u64;
            self.parts_written += 1;
            self.next_part += 1;
        }
        Ok(())
    }

    /// Writes what is buffered and closes the open part.
    pub fn finish(&mut self) -> Result<(), Error> {
        self.write_buffered()?;
        self.close_part()
    }
}
