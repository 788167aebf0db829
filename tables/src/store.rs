//! Every read and write goes through `object_store`: local paths and URIs (`s3://`, ...) alike.

use std::future::Future;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use futures::FutureExt;
use futures::TryStreamExt;
use futures::future::BoxFuture;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::error::Error;

/// The async runtime that drives object-store I/O for every worker thread of a process.
pub struct Io {
    runtime: tokio::runtime::Runtime,
}

impl Io {
    pub fn new() -> Result<Arc<Io>, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("graphflat-io")
            .enable_all()
            .build()
            .map_err(|e| Error::Internal(format!("cannot start the I/O runtime: {e}")))?;
        Ok(Arc::new(Io { runtime }))
    }

    /// Runs `future` to completion on the I/O runtime, blocking the calling (worker) thread.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

/// A file or directory in some store, with the text that names it in messages.
#[derive(Clone, Debug)]
pub struct Place {
    pub store: Arc<dyn ObjectStore>,
    pub path: Path,
    /// How files under this store are shown: `file_uri_prefix` + path.
    prefix: String,
}

impl Place {
    /// A local path (relative to the working directory) or a URI object_store understands.
    pub fn parse(uri: &str) -> Result<Place, Error> {
        if uri.contains("://") {
            let url = url::Url::parse(uri).map_err(|e| Error::Usage(format!("{uri}: not a valid URI: {e}")))?;
            let (store, path) = object_store::parse_url(&url)
                .map_err(|source| Error::Store { what: format!("cannot open {uri}"), source })?;
            let prefix = format!("{}://{}/", url.scheme(), url.host_str().unwrap_or(""));
            let prefix = if url.scheme() == "file" { "/".to_owned() } else { prefix };
            Ok(Place { store: Arc::from(store), path, prefix })
        } else {
            let absolute = std::path::absolute(uri).map_err(|e| Error::Usage(format!("{uri}: {e}")))?;
            let path = Path::from_absolute_path(&absolute)
                .map_err(|source| Error::Store { what: format!("bad path {uri}"), source: source.into() })?;
            Ok(Place { store: Arc::new(LocalFileSystem::new()), path, prefix: "/".to_owned() })
        }
    }

    /// The place `name` inside this directory.
    pub fn child(&self, name: &str) -> Place {
        Place { store: self.store.clone(), path: self.path.clone().join(name), prefix: self.prefix.clone() }
    }

    /// How an object of this store is named in messages.
    pub fn show(&self, path: &Path) -> String {
        format!("{}{}", self.prefix, path)
    }

    pub fn shown(&self) -> String {
        self.show(&self.path)
    }

    /// The Parquet files of a table: the file itself, or every `*.parquet` below the directory
    /// (names starting with `_` or `.` skipped), in name order.
    pub async fn parquet_files(&self) -> Result<Vec<ObjectMeta>, Error> {
        if self.path.as_ref().ends_with(".parquet") {
            let meta = self.store.head(&self.path).await.map_err(|source| self.store_error("cannot read", source))?;
            return Ok(vec![meta]);
        }
        let mut files: Vec<ObjectMeta> = self
            .store
            .list(Some(&self.path))
            .try_filter(|m| {
                let name = m.location.filename().unwrap_or("");
                futures::future::ready(name.ends_with(".parquet") && !name.starts_with(['_', '.']))
            })
            .try_collect()
            .await
            .map_err(|source| self.store_error("cannot list", source))?;
        files.sort_by(|a, b| a.location.cmp(&b.location));
        if files.is_empty() {
            return Err(Error::NoInput(format!("{}: no Parquet files found (an empty table)", self.shown())));
        }
        Ok(files)
    }

    pub async fn exists(&self) -> bool {
        self.store.head(&self.path).await.is_ok()
    }

    pub async fn put(&self, bytes: Vec<u8>) -> Result<(), Error> {
        self.store
            .put(&self.path, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|source| self.store_error("cannot write", source))
    }

    /// Removes the `_SUCCESS` marker first, then every part file, so that a re-run never leaves
    /// a mix of old and new parts looking finished.
    pub async fn clear_output(&self) -> Result<(), Error> {
        let marker = self.child(schemas::SUCCESS_MARKER);
        match self.store.delete(&marker.path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(source) => return Err(marker.store_error("cannot delete", source)),
        }
        let parts: Vec<ObjectMeta> = self
            .store
            .list(Some(&self.path))
            .try_filter(|m| futures::future::ready(m.location.filename().is_some_and(|n| n.starts_with("part-"))))
            .try_collect()
            .await
            .map_err(|source| self.store_error("cannot list", source))?;
        for part in parts {
            self.store.delete(&part.location).await.map_err(|source| Error::Store {
                what: format!("cannot delete {}", self.show(&part.location)),
                source,
            })?;
        }
        Ok(())
    }

    fn store_error(&self, what: &str, source: object_store::Error) -> Error {
        Error::Store { what: format!("{what} {}", self.shown()), source }
    }
}

/// One Parquet file with its footer read: the unit of work is one of its row groups.
#[derive(Clone)]
pub struct ParquetFile {
    pub place: Place,
    pub meta: ObjectMeta,
    pub arrow: ArrowReaderMetadata,
}

impl ParquetFile {
    pub async fn open(table: &Place, meta: ObjectMeta) -> Result<ParquetFile, Error> {
        let mut reader = Self::reader(table, &meta);
        let arrow = ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new())
            .await
            .map_err(|source| Error::Parquet { file: table.show(&meta.location), source })?;
        Ok(ParquetFile { place: table.clone(), meta, arrow })
    }

    fn reader(table: &Place, meta: &ObjectMeta) -> ObjectReader {
        ObjectReader { store: table.store.clone(), path: meta.location.clone(), size: meta.size }
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

    pub fn rows(&self) -> u64 {
        self.arrow.metadata().file_metadata().num_rows() as u64
    }

    /// Reads row group `rg` batch by batch; `each` gets a batch and its first row in the file.
    pub fn read_row_group(
        &self,
        io: &Io,
        rg: usize,
        mut each: impl FnMut(RecordBatch, u64) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let parquet_error = |source| Error::Parquet { file: self.name(), source };
        let mut stream = ParquetRecordBatchStreamBuilder::new_with_metadata(
            Self::reader(&self.place, &self.meta),
            self.arrow.clone(),
        )
        .with_row_groups(vec![rg])
        .with_batch_size(8192)
        .build()
        .map_err(parquet_error)?;
        let mut row = self.first_row(rg);
        while let Some(batch) = io.block_on(stream.try_next()).map_err(parquet_error)? {
            let rows = batch.num_rows() as u64;
            each(batch, row)?;
            row += rows;
        }
        Ok(())
    }
}

/// Every (file, row group) of a table, numbered the same way on every worker; worker `i` of
/// `n` takes the units whose number is `i` mod `n`.
pub fn open_table(io: &Io, table: &Place) -> Result<Vec<ParquetFile>, Error> {
    io.block_on(async {
        let mut files = Vec::new();
        for meta in table.parquet_files().await? {
            files.push(ParquetFile::open(table, meta).await?);
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

/// Parquet's async reader over one object: byte ranges and the footer through `object_store`.
struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
}

fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: std::ops::Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move { self.store.get_range(&self.path, range).await.map_err(external) }.boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move { self.store.get_ranges(&self.path, &ranges).await.map_err(external) }.boxed()
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
