//! The async runtime that drives object-store I/O, shared by a process's worker threads.

use std::future::Future;
use std::sync::Arc;

use crate::error::Error;

/// The async runtime that drives object-store I/O for every worker thread of a process.
pub struct Io {
    pub(crate) runtime: tokio::runtime::Runtime,
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
