//! A part written as a multipart upload that its run's commit completes (S3 and S3-compatible
//! stores, see [`crate::staging`]). Until then the store shows nothing under the part's key:
//! an upload in progress is no object, to any reader or listing. Parts of [`PART_BYTES`] go up
//! as the Parquet writer fills them, at most [`IN_FLIGHT`] at once; [`Upload::finish`] sends the
//! last and returns what the commit needs (the upload id and the parts' ids).
//!
//! An upload is recorded under the run's temporary directory (`….upload`, holding its id) before
//! any part goes up, so that when its run dies without completing or aborting it, a later
//! commit aborts it (see `crate::commit`'s cleanup): stores keep the parts of an upload, and
//! bill them, until it ends.

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStoreExt, PutPayload};
use parquet::arrow::async_writer::AsyncFileWriter;
use parquet::errors::ParquetError;
use tokio::task::JoinSet;

use crate::checksum::{Checksums, Sums};
use crate::staging::Staged;

/// Bytes per uploaded part but the last: above S3's 5 MiB minimum, as `object_store`'s own
/// multipart writer.
pub const PART_BYTES: usize = 10 << 20;

/// Parts uploading at once per upload.
const IN_FLIGHT: usize = 4;

/// One part file being uploaded (see the module doc).
pub(crate) struct Upload {
    store: Arc<dyn MultipartStore>,
    path: Path,
    id: MultipartId,
    buffer: Vec<u8>,
    next: usize,
    uploading: JoinSet<Result<(usize, PartId), object_store::Error>>,
    done: Vec<(usize, PartId)>,
    sums: Checksums,
    finished: bool,
    runtime: tokio::runtime::Handle,
}

impl Upload {
    /// Starts the upload of `path`, recorded at `record` first. Called inside the I/O runtime.
    pub(crate) async fn start(
        store: Arc<dyn MultipartStore>,
        objects: &Arc<dyn object_store::ObjectStore>,
        path: Path,
        record: &Path,
    ) -> Result<Upload, object_store::Error> {
        let id = store.create_multipart(&path).await?;
        let recorded = objects.put(record, PutPayload::from(id.clone().into_bytes())).await;
        if let Err(e) = recorded {
            let _ = store.abort_multipart(&path, &id).await;
            return Err(e);
        }
        Ok(Upload {
            store,
            path,
            id,
            buffer: Vec::with_capacity(PART_BYTES),
            next: 0,
            uploading: JoinSet::new(),
            done: Vec::new(),
            sums: Checksums::default(),
            finished: false,
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// Sends the buffered bytes as the next part, waiting first while [`IN_FLIGHT`] are on
    /// their way.
    async fn send(&mut self) -> Result<(), object_store::Error> {
        while self.uploading.len() >= IN_FLIGHT {
            self.settle_one().await?;
        }
        let bytes = Bytes::from(std::mem::replace(&mut self.buffer, Vec::with_capacity(PART_BYTES)));
        let (store, path, id, index) = (self.store.clone(), self.path.clone(), self.id.clone(), self.next);
        self.next += 1;
        self.uploading.spawn(async move {
            let part = store.put_part(&path, &id, index, PutPayload::from(bytes)).await?;
            Ok((index, part))
        });
        Ok(())
    }

    async fn settle_one(&mut self) -> Result<(), object_store::Error> {
        match self.uploading.join_next().await {
            Some(Ok(done)) => {
                self.done.push(done?);
                Ok(())
            }
            Some(Err(join)) => Err(object_store::Error::Generic { store: "upload", source: Box::new(join) }),
            None => Ok(()),
        }
    }

    /// Sends the last part and waits for every part: the upload as the commit completes it,
    /// and the checksums of its bytes.
    pub(crate) fn into_staged(self) -> (Staged, Sums) {
        let mut this = self;
        this.finished = true;
        let mut done = std::mem::take(&mut this.done);
        done.sort_by_key(|(i, _)| *i);
        let parts = done.into_iter().map(|(_, p)| p.content_id).collect();
        let sums = std::mem::take(&mut this.sums).finish();
        (Staged::Upload { id: this.id.clone(), parts }, sums)
    }
}

fn failed(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileWriter for Upload {
    fn write(&mut self, bytes: Bytes) -> BoxFuture<'_, parquet::errors::Result<()>> {
        async move {
            self.sums.update(&bytes);
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let n = rest.len().min(PART_BYTES - self.buffer.len());
                self.buffer.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
                if self.buffer.len() == PART_BYTES {
                    self.send().await.map_err(failed)?;
                }
            }
            Ok(())
        }
        .boxed()
    }

    /// Sends the last part and waits for every part; the upload stays open for the commit.
    fn complete(&mut self) -> BoxFuture<'_, parquet::errors::Result<()>> {
        async move {
            if !self.buffer.is_empty() || self.next == 0 {
                self.send().await.map_err(failed)?;
            }
            while !self.uploading.is_empty() {
                self.settle_one().await.map_err(failed)?;
            }
            Ok(())
        }
        .boxed()
    }
}

impl Drop for Upload {
    /// An upload dropped before it was handed to the commit is aborted (best effort: its record
    /// lets a later commit abort it).
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.uploading.abort_all();
        let (store, path, id) = (self.store.clone(), self.path.clone(), self.id.clone());
        drop(self.runtime.spawn(async move { store.abort_multipart(&path, &id).await }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    /// Bytes written in pieces come out, once the upload is completed, as the object whole, in
    /// parts of [`PART_BYTES`]; nothing is there before.
    #[test]
    fn a_completed_upload_holds_every_byte() {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let memory = Arc::new(InMemory::new());
            let objects: Arc<dyn object_store::ObjectStore> = memory.clone();
            let path = Path::from("out/part-1.parquet");
            let record = Path::from("out/_temporary/r/part-1.parquet.upload");
            let data: Vec<u8> = (0..2 * PART_BYTES + 12_345).map(|i| (i * 13 + i / 4099) as u8).collect();
            let mut upload = Upload::start(memory.clone(), &objects, path.clone(), &record).await.unwrap();
            for piece in data.chunks(3_000_001) {
                upload.write(Bytes::copy_from_slice(piece)).await.unwrap();
            }
            upload.complete().await.unwrap();
            assert!(objects.head(&path).await.is_err(), "an upload in progress is no object");
            let (staged, sums) = upload.into_staged();
            let Staged::Upload { id, parts } = staged else { panic!("an upload") };
            assert_eq!(parts.len(), 3);
            assert_eq!(sums, Sums::of(&data));
            let parts = parts.into_iter().map(|content_id| PartId { content_id }).collect();
            memory.complete_multipart(&path, &id, parts).await.unwrap();
            assert!(objects.get(&path).await.unwrap().bytes().await.unwrap() == data);
            assert_eq!(objects.get(&record).await.unwrap().bytes().await.unwrap(), id.as_bytes());
        });
    }
}
