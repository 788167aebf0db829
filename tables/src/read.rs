//! Reading Parquet tables through `object_store`: a table's files with their footers, row
//! groups as the unit of work, decoded batches of a bounded size.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use futures::FutureExt;
use futures::TryStreamExt;
use futures::future::BoxFuture;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::basic::Type as PhysicalType;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::chunks::{self, ChunkBuffers};
use crate::error::Error;
use crate::io::Io;
use crate::manifest::{Manifest, read_manifest};
use crate::place::Place;

/// What one decoded batch of a row group should hold (see [`ParquetFile::batch_rows`]).
const BATCH_BYTES: u64 = 4 << 20;

/// One Parquet file with its footer read: the unit of work is one of its row groups.
#[derive(Clone)]
pub struct ParquetFile {
    pub place: Place,
    pub meta: ObjectMeta,
    pub arrow: ArrowReaderMetadata,
    /// The buffers its table's local column chunks are read into (see [`crate::chunks`]).
    chunks: Arc<ChunkBuffers>,
}

impl ParquetFile {
    /// Opens one file of `table`, whose column chunks are read into `chunks` where it is local.
    pub async fn open(table: &Place, meta: ObjectMeta, chunks: Arc<ChunkBuffers>) -> Result<ParquetFile, Error> {
        let mut reader = ObjectReader::new(table, &meta, &chunks);
        let arrow = ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new())
            .await
            .map_err(|source| Error::Parquet { file: table.show(&meta.location), source })?;
        Ok(ParquetFile { place: table.clone(), meta, arrow, chunks })
    }

    pub fn name(&self) -> String {
        self.place.show(&self.meta.location)
    }

    pub fn row_groups(&self) -> usize {
        self.arrow.metadata().num_row_groups()
    }

    /// The file row of row group `rg`'s first row.
    pub fn first_row(&self, rg: usize) -> u64 {
        self.arrow.metadata().row_groups()[..rg].iter().map(|g| g.num_rows() as u64).sum()
    }

    /// The rows row group `rg` holds, as its metadata says (a claim, unchecked until read).
    pub fn row_group_rows(&self, rg: usize) -> u64 {
        self.arrow.metadata().row_group(rg).num_rows().max(0) as u64
    }

    /// Row group `rg`'s size uncompressed: about what its rows take in memory decoded.
    pub fn row_group_bytes(&self, rg: usize) -> u64 {
        self.arrow.metadata().row_group(rg).total_byte_size().max(0) as u64
    }

    pub fn rows(&self) -> u64 {
        self.arrow.metadata().file_metadata().num_rows() as u64
    }

    /// Rows per decoded batch of row group `rg`: about [`BATCH_BYTES`] decoded, at most 8,192.
    /// Records are wide (Cora's hold 210 kB of features each), and a batch's value and level
    /// buffers are allocated afresh: at 8,192 such rows they are gigabytes, paged in and
    /// zeroed on every batch, where batches of a few megabytes reuse the allocator's memory.
    fn batch_rows(&self, rg: usize) -> usize {
        let group = self.arrow.metadata().row_group(rg);
        // Decoded, a value takes its type's width plus two 16-bit levels (the page sizes in
        // the footer are encoded sizes: a dictionary-encoded 0/1 column is 100x smaller).
        let decoded: u64 = group
            .columns()
            .iter()
            .map(|c| {
                let width = match c.column_type() {
                    PhysicalType::BOOLEAN => 1,
                    PhysicalType::INT32 | PhysicalType::FLOAT => 4,
                    PhysicalType::INT96 => 12,
                    _ => 8,
                };
                c.num_values().max(0) as u64 * (width + 4)
            })
            .sum();
        let per_row = (decoded / group.num_rows().max(1) as u64).max(1);
        (BATCH_BYTES / per_row).clamp(1, 8192) as usize
    }

    /// Reads row group `rg` batch by batch; `each` gets a batch and its first row in the file.
    pub fn read_row_group(
        &self,
        io: &Io,
        rg: usize,
        each: impl FnMut(RecordBatch, u64) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.read_columns(io, rg, None, each)
    }

    /// Reads the named columns of row group `rg` (all with `None`): only their column chunks
    /// are fetched and decoded.
    pub fn read_columns(
        &self,
        io: &Io,
        rg: usize,
        columns: Option<&[&str]>,
        mut each: impl FnMut(RecordBatch, u64) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let parquet_error = |source| Error::Parquet { file: self.name(), source };
        let mut builder = ParquetRecordBatchStreamBuilder::new_with_metadata(
            ObjectReader::new(&self.place, &self.meta, &self.chunks),
            self.arrow.clone(),
        )
        .with_row_groups(vec![rg])
        .with_batch_size(self.batch_rows(rg));
        if let Some(columns) = columns {
            let mask =
                ProjectionMask::columns(self.arrow.metadata().file_metadata().schema_descr(), columns.iter().copied());
            builder = builder.with_projection(mask);
        }
        let mut stream = builder.build().map_err(parquet_error)?;
        let mut row = self.first_row(rg);
        while let Some(batch) = io.block_on(stream.try_next()).map_err(parquet_error)? {
            let rows = batch.num_rows() as u64;
            each(batch, row)?;
            row += rows;
        }
        Ok(())
    }
}

/// The files of a table, in name order:
/// - a single file;
/// - a finished output (a `_SUCCESS` manifest): the parts it lists, and nothing else;
/// - a directory: every file below it, skipping hidden and `_`-prefixed names (the Hadoop and
///   Spark convention for markers and temporary files) and the job's `report.html` directly in
///   it;
/// - a glob: the files of its directory whose names match.
pub async fn table_files(table: &Place) -> Result<Vec<ObjectMeta>, Error> {
    if !table.is_glob()
        && let Some(manifest) = read_manifest(table).await?
    {
        let parts = listed(table, &manifest);
        refuse_streams(table, &parts)?;
        return Ok(parts);
    }
    let mut files: Vec<ObjectMeta> = match table.list_files().await? {
        files if files.is_empty() && !table.is_glob() => match table.head().await? {
            Some(meta) => vec![meta],
            None => {
                let what = if table.local_dir().is_some_and(|d| d.is_dir()) {
                    "no data files in this directory"
                } else {
                    "does not exist"
                };
                return Err(Error::NoInput(format!("{}: {what}", table.shown())));
            }
        },
        files => files.into_iter().filter(|m| table.is_data_file(&m.location)).collect(),
    };
    files.sort_by(|a, b| a.location.cmp(&b.location));
    if files.is_empty() {
        let what = if table.is_glob() { "no file matches" } else { "no data files in this directory" };
        return Err(Error::NoInput(format!("{}: {what}", table.shown())));
    }
    Ok(files)
}

/// An error naming the first local file of `files` that is a FIFO, a socket or a device (a part
/// someone replaced): opening it would block the reader. (Directory listings leave them out.)
fn refuse_streams(table: &Place, files: &[ObjectMeta]) -> Result<(), Error> {
    if table.local_dir().is_none() {
        return Ok(());
    }
    let stream = files
        .iter()
        .map(|m| std::path::PathBuf::from(format!("/{}", m.location)))
        .find(|path| crate::place::is_stream(path));
    match stream {
        Some(path) => Err(crate::place::not_regular(path.display())),
        None => Ok(()),
    }
}

/// The parts a manifest lists, as objects of the table's directory. Listed parts carry no
/// modification time; readers do not use it.
fn listed(table: &Place, manifest: &Manifest) -> Vec<ObjectMeta> {
    manifest
        .parts
        .iter()
        .map(|p| ObjectMeta {
            location: table.path.clone().join(p.name.as_str()),
            last_modified: chrono::DateTime::UNIX_EPOCH,
            size: p.bytes,
            e_tag: None,
            version: None,
        })
        .collect()
}

/// Every (file, row group) of a table, numbered the same way on every worker; worker `i` of
/// `n` takes the units whose number is `i` mod `n`.
pub fn open_table(io: &Io, table: &Place) -> Result<Vec<ParquetFile>, Error> {
    io.block_on(async {
        let mut files = Vec::new();
        let chunks = Arc::new(ChunkBuffers::default());
        for meta in table_files(table).await? {
            files.push(ParquetFile::open(table, meta, chunks.clone()).await?);
        }
        Ok(files)
    })
}

/// This worker's share of a table's row groups.
pub fn units(files: &[ParquetFile], index: usize, peers: usize) -> Vec<(usize, usize)> {
    files
        .iter()
        .enumerate()
        .flat_map(|(f, file)| (0..file.row_groups()).map(move |rg| (f, rg)))
        .enumerate()
        .filter(|(unit, _)| unit % peers == index)
        .map(|(_, fr)| fr)
        .collect()
}

/// Parquet's async reader over one object: byte ranges and the footer through `object_store`,
/// or, for a local file, read on the calling thread into its table's buffers.
struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    local: Option<LocalFile>,
}

/// A local file's path, opened at its first read, and the buffers its chunks are read into.
struct LocalFile {
    path: PathBuf,
    file: Option<File>,
    chunks: Arc<ChunkBuffers>,
}

impl LocalFile {
    fn read(&mut self, range: std::ops::Range<u64>) -> parquet::errors::Result<Bytes> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(File::open(&self.path).map_err(local_error)?),
        };
        chunks::read_range(file, range, &self.chunks).map_err(local_error)
    }
}

impl ObjectReader {
    fn new(table: &Place, meta: &ObjectMeta, chunks: &Arc<ChunkBuffers>) -> ObjectReader {
        // Local places are `LocalFileSystem::new()`'s, rooted at `/`: its own mapping of keys
        // to paths (percent-decoding included) names the file.
        let local = table
            .is_local()
            .then(|| LocalFileSystem::new().path_to_filesystem(&meta.location).ok())
            .flatten()
            .map(|path| LocalFile { path, file: None, chunks: chunks.clone() });
        ObjectReader { store: table.store.clone(), path: meta.location.clone(), size: meta.size, local }
    }

    /// A footer that names bytes beyond the end of the file is corrupt: refused before any
    /// buffer of that size is allocated.
    fn within(&self, range: &std::ops::Range<u64>) -> parquet::errors::Result<()> {
        if range.start > range.end || range.end > self.size {
            return Err(ParquetError::General(format!(
                "the footer names bytes {}..{} of a file of {} bytes: the file is corrupt",
                range.start, range.end, self.size
            )));
        }
        Ok(())
    }
}

/// A local read's error, its kind kept for the exit code (a part its manifest lists but that
/// is gone is a missing input, 66: `Error::cause`). `External` prints its source inside its
/// own message; `schemas::message` prints it once.
fn local_error(e: std::io::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: std::ops::Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.within(&range)?;
            match &mut self.local {
                Some(local) => local.read(range),
                None => self.store.get_range(&self.path, range).await.map_err(external),
            }
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            for range in &ranges {
                self.within(range)?;
            }
            match &mut self.local {
                Some(local) => ranges.into_iter().map(|range| local.read(range)).collect(),
                None => self.store.get_ranges(&self.path, &ranges).await.map_err(external),
            }
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata =
                ParquetMetaDataReader::new().with_arrow_reader_options(options).load_and_finish(self, size).await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}
