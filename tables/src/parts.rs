//! One worker's output as zstd Parquet part files: Arrow batches in, a new part whenever the
//! current one passes the size limit. A part becomes visible only at its run's commit
//! ([`crate::staging`]): a local one is written at its staged name with direct I/O
//! ([`crate::direct`]), on S3 it is a multipart upload the commit completes
//! ([`crate::upload`]), on any other store it is written whole at its staged key. The stage
//! commits once every worker's parts are finished.

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

use crate::checksum::{Checksums, Sums};
use crate::direct::DirectPart;
use crate::error::Error;
use crate::io::Io;
use crate::manifest::PartEntry;
use crate::names::{staged_name, upload_name};
use crate::place::Place;
use crate::staging::{Staged, StagedPart};
use crate::upload::Upload;

/// A file written whole through its store, with the checksums of every byte that passes (for
/// the manifest).
pub(crate) struct Checksummed {
    upload: BufWriter,
    sums: Checksums,
}

impl Checksummed {
    pub(crate) fn new(upload: BufWriter) -> Self {
        Checksummed { upload, sums: Checksums::default() }
    }

    pub(crate) fn finish(self) -> Sums {
        self.sums.finish()
    }
}

impl AsyncFileWriter for Checksummed {
    fn write(&mut self, bytes: Bytes) -> BoxFuture<'_, parquet::errors::Result<()>> {
        self.sums.update(&bytes);
        self.upload.write(bytes)
    }

    fn complete(&mut self) -> BoxFuture<'_, parquet::errors::Result<()>> {
        self.upload.complete()
    }
}

/// A part being written: a local file written directly, an upload the commit completes, or a
/// file written whole at its staged key.
enum Open {
    Local(ArrowWriter<DirectPart>),
    Upload(AsyncArrowWriter<Upload>),
    Store(AsyncArrowWriter<Checksummed>),
}

impl Open {
    /// Starts the part `name` of `run` in `dir`, staged (see the module doc).
    fn new(
        io: &Io,
        dir: &Place,
        run: &str,
        name: &str,
        schema: SchemaRef,
        props: WriterProperties,
    ) -> Result<Open, ParquetError> {
        let staged = dir.child(&staged_name(run, name));
        // Local places are `LocalFileSystem::new()`'s: its mapping of keys to paths names the
        // file, as for reads and cleanup.
        let local = staged.is_local().then(|| LocalFileSystem::new().path_to_filesystem(&staged.path).ok()).flatten();
        if let Some(path) = local {
            let file = DirectPart::create(path)?;
            return Ok(Open::Local(ArrowWriter::try_new(file, schema, Some(props))?));
        }
        if let Some(multipart) = dir.multipart.as_ref().filter(|_| dir.stage_uploads) {
            let (target, record) = (dir.child(name).path, dir.child(&upload_name(run, name)).path);
            let upload = io
                .block_on(Upload::start(multipart.clone(), &dir.store, target, &record))
                .map_err(|e| ParquetError::External(Box::new(e)))?;
            return Ok(Open::Upload(AsyncArrowWriter::try_new(upload, schema, Some(props))?));
        }
        let upload = Checksummed::new(BufWriter::new(staged.store.clone(), staged.path.clone()));
        Ok(Open::Store(AsyncArrowWriter::try_new(upload, schema, Some(props))?))
    }

    fn write(&mut self, io: &Io, batch: &RecordBatch) -> Result<(), ParquetError> {
        match self {
            Open::Local(w) => w.write(batch),
            Open::Upload(w) => io.block_on(w.write(batch)),
            Open::Store(w) => io.block_on(w.write(batch)),
        }
    }

    fn flush(&mut self, io: &Io) -> Result<(), ParquetError> {
        match self {
            Open::Local(w) => w.flush(),
            Open::Upload(w) => io.block_on(w.flush()),
            Open::Store(w) => io.block_on(w.flush()),
        }
    }

    fn bytes_written(&self) -> usize {
        match self {
            Open::Local(w) => w.bytes_written(),
            Open::Upload(w) => w.bytes_written(),
            Open::Store(w) => w.bytes_written(),
        }
    }

    fn in_progress_size(&self) -> usize {
        match self {
            Open::Local(w) => w.in_progress_size(),
            Open::Upload(w) => w.in_progress_size(),
            Open::Store(w) => w.in_progress_size(),
        }
    }

    /// Writes the footer: the checksums of the part's bytes, and how it waits for the commit.
    fn finish(self, io: &Io) -> Result<(Sums, Staged), ParquetError> {
        match self {
            Open::Local(w) => Ok((w.into_inner()?.complete()?, Staged::File)),
            Open::Upload(mut w) => {
                io.block_on(w.finish())?;
                let (staged, sums) = w.into_inner().into_staged();
                Ok((sums, staged))
            }
            Open::Store(mut w) => {
                io.block_on(w.finish())?;
                Ok((w.into_inner().finish(), Staged::File))
            }
        }
    }
}

/// Writes `batches` as the part `name` of run `run` in `dir`, staged for the commit, with
/// `props`.
pub fn write_part(
    io: &Io,
    dir: &Place,
    run: &str,
    name: &str,
    schema: SchemaRef,
    props: WriterProperties,
    batches: &[RecordBatch],
) -> Result<StagedPart, Error> {
    let file = dir.child(name).shown();
    let error = |source| Error::Write { file: file.clone(), source };
    let mut open = Open::new(io, dir, run, name, schema, props).map_err(error)?;
    for batch in batches {
        open.write(io, batch).map_err(error)?;
    }
    let (sums, staged) = open.finish(io).map_err(error)?;
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    Ok(StagedPart { entry: PartEntry::summed(name, rows, sums), staged })
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
    /// The finished parts, for the commit.
    pub parts: Vec<StagedPart>,
    /// A folder of `to.dir` the parts go in (`"embeddings/"`), or empty.
    prefix: &'static str,
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
            prefix: "",
        }
    }

    /// The parts in the folder `prefix` (ending in `/`) of `to.dir`, named with it in the
    /// manifest: a table inside another output (a model's learned embeddings), staged and
    /// committed with that output's files.
    pub fn in_folder(mut self, prefix: &'static str) -> Self {
        self.prefix = prefix;
        self
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn part_name(&self) -> String {
        format!("{}part-{}-{:05}-{:05}.parquet", self.prefix, self.to.run, self.to.worker, self.next_part)
    }

    /// The part being written, as its commit names it.
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
        let file = self.part().shown();
        let error = |source| Error::Write { file: file.clone(), source };
        if self.current.is_none() {
            let (schema, props) = (self.schema.clone(), self.props.clone());
            let open = Open::new(&self.io, &self.to.dir, &self.to.run, &self.part_name(), schema, props);
            self.current = Some(open.map_err(error)?);
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
            let (sums, staged) = writer.finish(&self.io).map_err(|source| Error::Write { file, source })?;
            let bytes = sums.bytes;
            let entry = PartEntry::summed(&self.part_name(), self.current_rows, sums);
            self.parts.push(StagedPart { entry, staged });
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

    /// Closes the open part. Worker 0 that wrote none writes one of no rows: an output of no
    /// rows still has a part of its schema, so that its readers get its columns (and its
    /// manifest file the schema, see `crate::commit`).
    pub fn finish(&mut self) -> Result<(), Error> {
        if self.parts.is_empty() && self.current.is_none() && self.to.worker == 0 {
            self.write(&RecordBatch::new_empty(self.schema.clone()))?;
        }
        self.close_part()
    }
}
