//! One worker's output as zstd Parquet part files: Arrow batches in, a new part whenever the
//! current one passes the size limit. Parts go through `object_store`'s multipart upload, which
//! makes a part visible only when it is complete. The stage writes `_SUCCESS` after every
//! worker's parts are finished.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use object_store::buffered::BufWriter;
use parquet::arrow::AsyncArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};

use crate::error::Error;
use crate::store::{Io, Place};

/// A row group closes at about this many bytes in memory.
const ROW_GROUP_BYTES: usize = 64 << 20;

/// The writer settings of every stage's parts: zstd level 1, no dictionaries and no page
/// statistics (on feature columns they cost more than half the write time and buy nothing:
/// zstd does the compressing). Callers add chunk statistics on the columns readers prune by.
pub fn part_properties() -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid")))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
}

pub struct PartWriter {
    io: Arc<Io>,
    dir: Place,
    schema: SchemaRef,
    props: WriterProperties,
    worker: usize,
    part_limit: u64,
    next_part: u32,
    current: Option<AsyncArrowWriter<BufWriter>>,
    /// Bytes of finished parts.
    pub bytes_written: u64,
    pub parts_written: u32,
}

impl PartWriter {
    /// Parts of worker `worker` under `dir`, each closed once it passes `part_limit` bytes.
    pub fn new(io: Arc<Io>, dir: Place, schema: SchemaRef, props: WriterProperties, worker: usize, part_limit: u64) -> Self {
        PartWriter { io, dir, schema, props, worker, part_limit, next_part: 0, current: None, bytes_written: 0, parts_written: 0 }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn part(&self) -> Place {
        self.dir.child(&format!("part-{:05}-{:05}.parquet", self.worker, self.next_part))
    }

    /// The name of the part being written, for errors about a batch headed there.
    pub fn current_name(&self) -> String {
        self.part().shown()
    }

    /// Bytes this writer has produced so far, counting the open part.
    pub fn bytes_so_far(&self) -> u64 {
        self.bytes_written + self.current.as_ref().map_or(0, |w| w.bytes_written() as u64)
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), Error> {
        let part = self.part();
        let file = part.shown();
        if self.current.is_none() {
            let upload = BufWriter::new(part.store.clone(), part.path.clone());
            let writer = AsyncArrowWriter::try_new(upload, self.schema.clone(), Some(self.props.clone()))
                .map_err(|source| Error::Write { file: file.clone(), source })?;
            self.current = Some(writer);
        }
        let writer = self.current.as_mut().expect("opened above");
        self.io.block_on(writer.write(batch)).map_err(|source| Error::Write { file, source })?;
        if (writer.bytes_written() + writer.in_progress_size()) as u64 >= self.part_limit {
            self.close_part()?;
        }
        Ok(())
    }

    fn close_part(&mut self) -> Result<(), Error> {
        if let Some(mut writer) = self.current.take() {
            let file = self.part().shown();
            self.io.block_on(writer.finish()).map_err(|source| Error::Write { file, source })?;
            self.bytes_written += writer.bytes_written() as u64;
            self.parts_written += 1;
            self.next_part += 1;
        }
        Ok(())
    }

    /// Closes the open part.
    pub fn finish(&mut self) -> Result<(), Error> {
        self.close_part()
    }
}
