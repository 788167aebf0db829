//! A job's I/O: the async runtime that drives object-store I/O for a process's worker threads,
//! and the job's `[storage]` settings, which every place it opens uses. A job creates one and
//! hands it to each stage; nothing about storage is process-wide.

use std::future::Future;
use std::sync::Arc;

use schemas::StorageConfig;

use crate::error::Error;
use crate::place::Place;

/// The async runtime and the `[storage]` settings of one job.
pub struct Io {
    pub(crate) runtime: tokio::runtime::Runtime,
    storage: StorageConfig,
}

impl Io {
    /// The I/O of a job with these `[storage]` settings.
    pub fn new(storage: &StorageConfig) -> Result<Arc<Io>, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("graphflat-io")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        Ok(Arc::new(Io { runtime, storage: storage.clone() }))
    }

    /// The settings the stores of this job's places are built with.
    pub fn storage(&self) -> &StorageConfig {
        &self.storage
    }

    /// An input: a local path or a URI, with `*` globs in its last segment (see [`Place::parse`]).
    pub fn place(&self, uri: &str) -> Result<Place, Error> {
        Place::parse(uri, &self.storage)
    }

    /// An output: one directory, every character taken as written (see [`Place::parse_output`]).
    pub fn output(&self, uri: &str) -> Result<Place, Error> {
        Place::parse_output(uri, &self.storage)
    }

    /// Runs `future` to completion on the I/O runtime, blocking the calling (worker) thread.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}
