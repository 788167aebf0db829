//! One worker's output as zstd Parquet part files: Arrow batches in, a new part whenever the
//! current one passes the size limit. A part becomes visible only when it is complete: a local
//! one is written under a staging name with direct I/O and renamed ([`crate::direct`]), any
//! other goes through `object_store`'s multipart upload. The stage writes `_SUCCESS` after every
//! worker's parts are finished.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use futures::future::BoxFuture;
use object_store::buffered::BufWriter;
use object_store::local::LocalFileSystem;
use parquet::arrow::async_writer::AsyncFileWriter;
use parquet::arrow::{ArrowWriter, AsyncArrowWriter};
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};

use crate::commit::PartEntry;
use crate::direct::DirectPart;
use crate::error::Error;
use crate::io::Io;
use crate::place::Place;

/// The upload of one part, with the CRC-32 of every byte that passes (for the manifest).
pub(crate) struct Checksummed {
    upload: BufWriter,
    crc: crc32fast::Hasher,
}

impl Checksummed {
    pub(crate) fn new(upload: BufWriter) -> Self {
        Checksummed { upload, crc: crc32fast::Hasher::new() }
    }

    pub(crate) fn finish(self) -> u32 {
        self.crc.finalize()
    }
}

impl AsyncFileWriter for Checksummed {
    fn write(&mut self, bytes: Bytes) -> BoxFuture<'_, parquet::errors::Result<()>> {
        self.crc.update(&bytes);
        self.upload.write(bytes)
    }

    fn complete(&mut self) -> BoxFuture<'_, parquet::errors::Result<()>> {
        self.upload.complete()
    }
}

/// A part being written: a local file written directly, or an upload through its store.
enum Open {
    Local(ArrowWriter<DirectPart>),
    Store(AsyncArrowWriter<Checksummed>),
}

impl Open {
    fn new(part: &Place, schema: SchemaRef, props: WriterProperties) -> Result<Open, ParquetError> {
        // Local places are `LocalFileSystem::new()`'s: its mapping of keys to paths names the
        // file, as for reads and cleanup.
        let local = part.is_local().then(|| LocalFileSystem::new().path_to_filesystem(&part.path).ok()).flatten();
        if let Some(path) = local {
            let file = DirectPart::create(path)?;
            return Ok(Open::Local(ArrowWriter::try_new(file, schema, Some(props))?));
        }
        let upload = Checksummed::new(BufWriter::new(part.store.clone(), part.path.clone()));
        Ok(Open::Store(AsyncArrowWriter::try_new(upload, schema, Some(props))?))
    }

    fn write(&mut self, io: &Io, batch: &RecordBatch) -> Result<(), ParquetError> {
        match self {
            Open::Local(w) => w.write(batch),
            Open::Store(w) => io.block_on(w.write(batch)),
        }
    }

    fn flush(&mut self, io: &Io) -> Result<(), ParquetError> {
        match self {
            Open::Local(w) => w.flush(),
            Open::Store(w) => io.block_on(w.flush()),
        }
    }

    fn bytes_written(&self) -> usize {
        match self {
            Open::Local(w) => w.bytes_written(),
            Open::Store(w) => w.bytes_written(),
        }
    }

    fn in_progress_size(&self) -> usize {
        match self {
            Open::Local(w) => w.in_progress_size(),
            Open::Store(w) => w.in_progress_size(),
        }
    }

    /// Writes the footer and makes the part visible: its bytes and their CRC-32.
    fn finish(self, io: &Io) -> Result<(u64, u32), ParquetError> {
        match self {
            Open::Local(w) => {
                let file = w.into_inner()?;
                let bytes = file.bytes_written();
                Ok((bytes, file.complete()?))
            }
            Open::Store(mut w) => {
                io.block_on(w.finish())?;
                let bytes = w.bytes_written() as u64;
                Ok((bytes, w.into_inner().finish()))
            }
        }
    }
}

/// A row group closes at about this many bytes in memory.
const ROW_GROUP_BYTES: usize = 64 << 20;

/// The writer settings of every stage's parts: zstd level 1, no dictionaries (a stage turns them
/// on where they pay: the record sink, on feature values) and no page
/// statistics (on feature columns they cost more than half the write time and buy nothing:
/// zstd does the compressing). Callers add chunk statistics on the columns readers prune by.
pub fn part_properties() -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid")))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
}

/// Where a writer's parts go: the output directory, the run, and the worker.
#[derive(Debug, Clone)]
pub struct PartsOf {
    pub dir: Place,
    /// The run id every worker of the run shares (see [`crate::commit::new_run_id`]).
    pub run: String,
    pub worker: usize,
}

pub struct PartWriter {
    io: Arc<Io>,
    to: PartsOf,
    schema: SchemaRef,
    props: WriterProperties,
    part_limit: u64,
    next_part: u32,
    current: Option<Open>,
    current_rows: u64,
    /// Bytes of finished parts.
    pub bytes_written: u64,
    pub parts_written: u32,
    /// The finished parts, for the manifest.
    pub parts: Vec<PartEntry>,
}

impl PartWriter {
    /// Parts named `part-<run>-<worker>-<n>.parquet` under `to.dir`, each closed once it passes
    /// `part_limit` bytes.
    pub fn new(io: Arc<Io>, to: PartsOf, schema: SchemaRef, props: WriterProperties, part_limit: u64) -> Self {
        PartWriter {
            io,
            to,
            schema,
            props,
            part_limit,
            next_part: 0,
            current: None,
            current_rows: 0,
            bytes_written: 0,
            parts_written: 0,
            parts: Vec::new(),
        }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn part_name(&self) -> String {
        format!("part-{}-{:05}-{:05}.parquet", self.to.run, self.to.worker, self.next_part)
    }

    fn part(&self) -> Place {
        self.to.dir.child(&self.part_name())
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
        let error = |source| Error::Write { file: file.clone(), source };
        if self.current.is_none() {
            self.current = Some(Open::new(&part, self.schema.clone(), self.props.clone()).map_err(error)?);
        }
        let writer = self.current.as_mut().expect("opened above");
        writer.write(&self.io, batch).map_err(error)?;
        self.current_rows += batch.num_rows() as u64;
        if (writer.bytes_written() + writer.in_progress_size()) as u64 >= self.part_limit {
            self.close_part()?;
        }
        Ok(())
    }

    fn close_part(&mut self) -> Result<(), Error> {
        if let Some(writer) = self.current.take() {
            let file = self.part().shown();
            let (bytes, crc32) = writer.finish(&self.io).map_err(|source| Error::Write { file, source })?;
            self.parts.push(PartEntry { name: self.part_name(), rows: self.current_rows, bytes, crc32 });
            self.current_rows = 0;
            self.bytes_written += bytes;
            self.parts_written += 1;
            self.next_part += 1;
        }
        Ok(())
    }

    /// Closes the open row group (if any), so the next batch starts a new one: for writers
    /// that bound row groups by their decoded size, which dictionary pages can make many times
    /// the encoded size that `ROW_GROUP_BYTES` measures.
    pub fn end_row_group(&mut self) -> Result<(), Error> {
        let file = self.part().shown();
        match self.current.as_mut() {
            Some(writer) => writer.flush(&self.io).map_err(|source| Error::Write { file, source }),
            None => Ok(()),
        }
    }

    /// Closes the open part.
    pub fn finish(&mut self) -> Result<(), Error> {
        self.close_part()
    }
}
