//! Every read and write goes through `object_store`: local paths and URIs (`s3://`, ...) alike.

use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use arrow_array::RecordBatch;
use bytes::Bytes;
use parquet::basic::Type as PhysicalType;
use futures::FutureExt;
use futures::TryStreamExt;
use futures::future::BoxFuture;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::ProjectionMask;
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use schemas::StorageConfig;

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

/// The process's `[storage]` settings, for every store opened after [`configure`].
static STORAGE: RwLock<Option<StorageConfig>> = RwLock::new(None);

/// Sets the `[storage]` settings every `s3://` place opened from now on uses.
pub fn configure(storage: &StorageConfig) {
    *STORAGE.write().unwrap_or_else(PoisonError::into_inner) = Some(storage.clone());
}

fn storage_config() -> StorageConfig {
    STORAGE.read().unwrap_or_else(PoisonError::into_inner).clone().unwrap_or_default()
}

/// An S3 client: the standard AWS environment (credentials, region, endpoint, allow_http),
/// then what `[storage]` sets.
fn s3_builder(storage: &StorageConfig) -> AmazonS3Builder {
    let mut builder = AmazonS3Builder::from_env();
    if let Some(endpoint) = &storage.endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    if let Some(region) = &storage.region {
        builder = builder.with_region(region);
    }
    if let Some(allow) = storage.allow_http {
        builder = builder.with_allow_http(allow);
    }
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: storage.retries,
        retry_timeout: Duration::from_secs_f64(storage.retry_timeout_s),
    };
    // Set key by key: `with_client_options` would drop what the environment set (allow_http).
    let millis = |seconds: f64| format!("{}ms", (seconds * 1000.0).round() as u64);
    builder
        .with_retry(retry)
        .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), millis(storage.connect_timeout_s))
        .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), millis(storage.timeout_s))
}

/// An HDFS client for the namenode (or name service) of `url`: the Hadoop configuration files
/// hdfs-native reads (`HADOOP_CONF_DIR`), then `[storage]` retries (failover attempts) and
/// request timeout (socket timeout).
#[cfg(feature = "hdfs")]
fn hdfs_store(uri: &str, url: &url::Url) -> Result<Box<dyn ObjectStore>, Error> {
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let namenode = format!("{}://{}{port}", url.scheme(), url.host_str().unwrap_or(""));
    let storage = storage_config();
    let settings = [
        ("dfs.client.failover.max.attempts", storage.retries.to_string()),
        ("dfs.client.socket-timeout", ((storage.timeout_s * 1000.0).round() as u64).to_string()),
    ];
    let store = hdfs_native_object_store::HdfsObjectStoreBuilder::new()
        .with_url(namenode)
        .with_config(settings)
        .build()
        .map_err(|source| Error::Store { what: format!("cannot open {uri}"), source })?;
    Ok(Box::new(store))
}

#[cfg(not(feature = "hdfs"))]
fn hdfs_store(uri: &str, _url: &url::Url) -> Result<Box<dyn ObjectStore>, Error> {
    Err(Error::Usage(format!("{uri}: this build cannot read HDFS; build with `cargo build --release --features hdfs`")))
}

/// A file or directory in some store, with the text that names it in messages.
#[derive(Clone, Debug)]
pub struct Place {
    pub store: Arc<dyn ObjectStore>,
    pub path: Path,
    /// How files under this store are shown: `file_uri_prefix` + path.
    prefix: String,
    /// A glob on file names (`*`, `?`) from the last component of the path it was parsed from;
    /// `path` is then the directory.
    pattern: Option<String>,
    /// On the local file system (a plain path or a `file://` URI).
    local: bool,
}

impl Place {
    /// A local path (relative to the working directory) or a URI object_store understands. A
    /// last component with `*` or `?` is a glob over the file names of its directory.
    pub fn parse(uri: &str) -> Result<Place, Error> {
        let (dir, pattern) = match uri.rsplit_once('/') {
            Some((dir, last)) if last.contains(['*', '?']) => (dir, Some(last.to_owned())),
            None if uri.contains(['*', '?']) => (".", Some(uri.to_owned())),
            _ => (uri, None),
        };
        let mut place = Self::parse_plain(uri, dir)?;
        place.pattern = pattern;
        Ok(place)
    }

    fn parse_plain(uri: &str, location: &str) -> Result<Place, Error> {
        if location.contains("://") {
            let url = url::Url::parse(location).map_err(|e| Error::Usage(format!("{uri}: not a valid URI: {e}")))?;
            let opened = |source| Error::Store { what: format!("cannot open {uri}"), source };
            let url_path = || {
                Path::from_url_path(url.path()).map_err(|source| Error::Store { what: format!("bad path {uri}"), source: source.into() })
            };
            let (store, path) = match url.scheme() {
                "s3" => {
                    let store = s3_builder(&storage_config()).with_url(location).build().map_err(opened)?;
                    (Box::new(store) as Box<dyn ObjectStore>, url_path()?)
                }
                "hdfs" | "viewfs" => (hdfs_store(uri, &url)?, url_path()?),
                _ => object_store::parse_url(&url).map_err(opened)?,
            };
            let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
            let prefix = format!("{}://{}{port}/", url.scheme(), url.host_str().unwrap_or(""));
            let prefix = if url.scheme() == "file" { "/".to_owned() } else { prefix };
            Ok(Place { store: Arc::from(store), path, prefix, pattern: None, local: url.scheme() == "file" })
        } else {
            let absolute = std::path::absolute(location).map_err(|e| Error::Usage(format!("{uri}: {e}")))?;
            let path = Path::from_absolute_path(&absolute)
                .map_err(|source| Error::Store { what: format!("bad path {uri}"), source: source.into() })?;
            Ok(Place { store: Arc::new(LocalFileSystem::new()), path, prefix: "/".to_owned(), pattern: None, local: true })
        }
    }

    /// The place `name` inside this directory.
    pub fn child(&self, name: &str) -> Place {
        Place {
            store: self.store.clone(),
            path: self.path.clone().join(name),
            prefix: self.prefix.clone(),
            pattern: None,
            local: self.local,
        }
    }

    /// How an object of this store is named in messages.
    pub fn show(&self, path: &Path) -> String {
        format!("{}{}", self.prefix, path)
    }

    pub fn shown(&self) -> String {
        match &self.pattern {
            Some(p) => format!("{}/{p}", self.show(&self.path)),
            None => self.show(&self.path),
        }
    }

    /// Whether one of the two is the other or lies inside it (an output must not touch an input).
    pub fn overlaps(&self, other: &Place) -> bool {
        let (a, b) = (self.show(&self.path), other.show(&other.path));
        a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
    }

    /// The directory on the local file system, for a local place.
    pub fn local_dir(&self) -> Option<std::path::PathBuf> {
        self.local.then(|| std::path::PathBuf::from(format!("/{}", self.path)))
    }

    /// Every object below this directory.
    pub async fn list_files(&self) -> Result<Vec<ObjectMeta>, Error> {
        self.store.list(Some(&self.path)).try_collect().await.map_err(|source| self.store_error("cannot list", source))
    }

    /// The files of a table, in name order:
    /// - a single file;
    /// - a finished output (a `_SUCCESS` manifest): the parts it lists, and nothing else;
    /// - a directory: every file below it, skipping hidden and `_`-prefixed names (the Hadoop and
    ///   Spark convention for markers and temporary files);
    /// - a glob: the files of its directory whose names match.
    pub async fn parquet_files(&self) -> Result<Vec<ObjectMeta>, Error> {
        if self.pattern.is_none()
            && let Some(manifest) = crate::commit::read_manifest(self).await?
        {
            return Ok(self.listed(&manifest));
        }
        let listed = self.list_files().await;
        let mut files: Vec<ObjectMeta> = match listed {
            Ok(files) if files.is_empty() && self.pattern.is_none() => match self.store.head(&self.path).await {
                Ok(meta) => vec![meta],
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(Error::NoInput(format!("{}: does not exist", self.shown())));
                }
                Err(source) => return Err(self.store_error("cannot read", source)),
            },
            Ok(files) => files.into_iter().filter(|m| self.is_data_file(&m.location)).collect(),
            Err(e) => return Err(e),
        };
        files.sort_by(|a, b| a.location.cmp(&b.location));
        if files.is_empty() {
            let what = if self.pattern.is_some() { "no file matches" } else { "no data files in this directory" };
            return Err(Error::NoInput(format!("{}: {what}", self.shown())));
        }
        Ok(files)
    }

    /// A listed file is data unless a component below this directory is hidden or `_`-prefixed,
    /// or it fails the glob.
    fn is_data_file(&self, location: &Path) -> bool {
        let below: Vec<String> =
            location.prefix_match(&self.path).map(|parts| parts.map(|p| p.as_ref().to_owned()).collect()).unwrap_or_default();
        let visible = below.iter().all(|part| !part.starts_with(['_', '.']));
        let matches = match &self.pattern {
            Some(pattern) => below.len() == 1 && glob_matches(pattern, &below[0]),
            None => true,
        };
        visible && matches
    }

    /// The parts a manifest lists, as objects of this directory.
    fn listed(&self, manifest: &crate::commit::Manifest) -> Vec<ObjectMeta> {
        manifest
            .parts
            .iter()
            .map(|p| ObjectMeta {
                location: self.path.clone().join(p.name.as_str()),
                last_modified: chrono_epoch(),
                size: p.bytes,
                e_tag: None,
                version: None,
            })
            .collect()
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

    /// The object's bytes; `None` if there is none.
    pub async fn get(&self) -> Result<Option<Vec<u8>>, Error> {
        match self.store.get(&self.path).await {
            Ok(got) => got.bytes().await.map(|b| Some(b.to_vec())).map_err(|source| self.store_error("cannot read", source)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(self.store_error("cannot read", source)),
        }
    }

    /// Removes every object under this directory.
    pub async fn delete_all(&self) -> Result<(), Error> {
        for file in self.list_files().await? {
            self.store.delete(&file.location).await.map_err(|source| self.store_error("cannot remove files under", source))?;
        }
        Ok(())
    }

    pub(crate) fn store_error(&self, what: &str, source: object_store::Error) -> Error {
        Error::Store { what: format!("{what} {}", self.shown()), source }
    }
}

/// `*` (any run of characters) and `?` (one character) against a whole file name.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic two-pointer match with backtracking to the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Listed parts carry no modification time; readers do not use it.
fn chrono_epoch() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::UNIX_EPOCH
}

/// What one decoded batch of a row group should hold (see [`ParquetFile::batch_rows`]).
const BATCH_BYTES: u64 = 4 << 20;

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
    pub fn read_row_group(&self, io: &Io, rg: usize, each: impl FnMut(RecordBatch, u64) -> Result<(), Error>) -> Result<(), Error> {
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
        let mut builder =
            ParquetRecordBatchStreamBuilder::new_with_metadata(Self::reader(&self.place, &self.meta), self.arrow.clone())
                .with_row_groups(vec![rg])
                .with_batch_size(self.batch_rows(rg));
        if let Some(columns) = columns {
            let mask = ProjectionMask::columns(self.arrow.metadata().file_metadata().schema_descr(), columns.iter().copied());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob_matches("*.parquet", "part-0.parquet"));
        assert!(!glob_matches("*.parquet", "part-0.parquet.tmp"));
        assert!(glob_matches("part-?-*", "part-1-x"));
        assert!(!glob_matches("part-?-*", "part-12-x"));
        assert!(glob_matches("*", "anything"));
    }

    #[test]
    fn places_overlap_when_one_holds_the_other() {
        let place = |p: &str| Place::parse(p).unwrap();
        assert!(place("/data/g").overlaps(&place("/data/g/nodes")));
        assert!(place("/data/g/nodes").overlaps(&place("/data/g")));
        assert!(place("/data/g").overlaps(&place("/data/g")));
        assert!(!place("/data/g").overlaps(&place("/data/graph")));
        let glob = place("/data/g/*.parquet");
        assert_eq!(glob.shown(), "/data/g/*.parquet");
        assert!(glob.overlaps(&place("/data/g")));
    }
}
