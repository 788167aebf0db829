//! Parquet's async reader over one object: byte ranges and the footer through `object_store`,
//! or, for a local file, read on the calling thread into its table's buffers
//! ([`crate::chunks`]). A part its manifest lists is checked as it is read: every range is
//! widened to whole checksum blocks, each block's CRC-32 is compared with the manifest's
//! ([`crate::checksum`]), and the caller gets its own bytes, sliced from the checked ones. A
//! block that does not match is a [`Changed`] error in the reader's chain.

use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::checksum::{Expected, Mismatch, widen};
use crate::chunks::{self, ChunkBuffers};
use crate::error::Fetch;
use crate::place::Place;

/// A block of a listed part whose bytes are not those its manifest lists: the part changed
/// after its commit. It travels inside the Parquet reader's errors, to be told from bytes that
/// do not decode.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Changed(pub Mismatch);

/// Parquet's async reader over one object.
pub(crate) struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    local: Option<LocalFile>,
    /// The manifest's checksums of a listed part; `None` for a file no manifest lists.
    expected: Option<Arc<Expected>>,
}

/// A local file's path, opened at its first read, and the buffers its chunks are read into.
struct LocalFile {
    path: PathBuf,
    file: Option<File>,
    chunks: Arc<ChunkBuffers>,
}

impl LocalFile {
    fn read(&mut self, range: Range<u64>) -> parquet::errors::Result<Bytes> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(File::open(&self.path).map_err(local_error)?),
        };
        chunks::read_range(file, range, &self.chunks).map_err(local_error)
    }
}

impl ObjectReader {
    /// A reader of the object `meta` of `table`, checked against `expected` when a manifest
    /// lists it (and has block checksums).
    pub(crate) fn new(
        table: &Place,
        meta: &ObjectMeta,
        chunks: &Arc<ChunkBuffers>,
        expected: Option<Arc<Expected>>,
    ) -> ObjectReader {
        // Local places are `LocalFileSystem::new()`'s, rooted at `/`: its own mapping of keys
        // to paths (percent-decoding included) names the file.
        let local = table
            .is_local()
            .then(|| LocalFileSystem::new().path_to_filesystem(&meta.location).ok())
            .flatten()
            .map(|path| LocalFile { path, file: None, chunks: chunks.clone() });
        let expected = expected.filter(|e| e.checks());
        ObjectReader { store: table.store.clone(), path: meta.location.clone(), size: meta.size, local, expected }
    }

    /// A footer that names bytes beyond the end of the file is corrupt: refused before any
    /// buffer of that size is allocated.
    fn within(&self, range: &Range<u64>) -> parquet::errors::Result<()> {
        if range.start > range.end || range.end > self.size {
            return Err(ParquetError::General(format!(
                "the footer names bytes {}..{} of a file of {} bytes: the file is corrupt",
                range.start, range.end, self.size
            )));
        }
        Ok(())
    }

    /// The bytes of `ranges` as they are in the object, unchecked.
    async fn fetch(&mut self, ranges: &[Range<u64>]) -> parquet::errors::Result<Vec<Bytes>> {
        match &mut self.local {
            Some(local) => ranges.iter().map(|range| local.read(range.clone())).collect(),
            None => self.store.get_ranges(&self.path, ranges).await.map_err(external),
        }
    }

    /// The bytes of `ranges`, each checked block by block when the part is listed: the ranges
    /// are widened to whole blocks, those that meet are fetched and checked once, and each
    /// range is sliced out of its checked bytes.
    async fn read(&mut self, ranges: Vec<Range<u64>>) -> parquet::errors::Result<Vec<Bytes>> {
        for range in &ranges {
            self.within(range)?;
        }
        let Some(expected) = self.expected.clone() else { return self.fetch(&ranges).await };
        let spans = spans(&ranges, expected.size);
        let wide: Vec<Range<u64>> = spans.iter().map(|(span, _)| span.clone()).collect();
        let fetched = self.fetch(&wide).await?;
        let mut out = vec![Bytes::new(); ranges.len()];
        for ((span, members), bytes) in spans.into_iter().zip(fetched) {
            expected.check(span.start, &bytes).map_err(|m| ParquetError::External(Box::new(Changed(m))))?;
            for i in members {
                let range = &ranges[i];
                out[i] = bytes.slice((range.start - span.start) as usize..(range.end - span.start) as usize);
            }
        }
        Ok(out)
    }
}

/// `ranges` widened to whole blocks of a file of `size` bytes and merged where they meet: each
/// span with the indices of the ranges it holds, in file order.
fn spans(ranges: &[Range<u64>], size: u64) -> Vec<(Range<u64>, Vec<usize>)> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| ranges[i].start);
    let mut spans: Vec<(Range<u64>, Vec<usize>)> = Vec::new();
    for i in order {
        let wide = widen(&ranges[i], size);
        match spans.last_mut() {
            Some((span, members)) if wide.start <= span.end => {
                span.end = span.end.max(wide.end);
                members.push(i);
            }
            _ => spans.push((wide, vec![i])),
        }
    }
    spans
}

pub(crate) fn local_error(e: std::io::Error) -> ParquetError {
    ParquetError::External(Box::new(Fetch::Local(e)))
}

pub(crate) fn external(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(Fetch::Store(e)))
}

impl AsyncFileReader for ObjectReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move { Ok(self.read(vec![range]).await?.remove(0)) }.boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        self.read(ranges).boxed()
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

/// The footer of the file `meta` in `dir`, checked against `expected` when given.
pub(crate) async fn footer(
    dir: &Place,
    meta: &ObjectMeta,
    expected: Option<Arc<Expected>>,
) -> parquet::errors::Result<ParquetMetaData> {
    let chunks = Arc::new(ChunkBuffers::default());
    let mut reader = ObjectReader::new(dir, meta, &chunks, expected);
    ParquetMetaDataReader::new().load_and_finish(&mut reader, meta.size).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::BLOCK_BYTES;

    /// Ranges that meet once widened are fetched as one span; every range lies in its span.
    #[test]
    fn spans_merge_what_meets_and_hold_every_range() {
        let b = BLOCK_BYTES;
        let size = 10 * b + 7;
        let ranges = vec![3 * b + 5..4 * b + 1, 10..20, 4 * b + 1..5 * b, 8 * b..8 * b + 1, 25..b + 3];
        let spans = spans(&ranges, size);
        let shown: Vec<(Range<u64>, Vec<usize>)> = spans.clone();
        assert_eq!(shown, vec![(0..2 * b, vec![1, 4]), (3 * b..5 * b, vec![0, 2]), (8 * b..9 * b, vec![3])]);
        for (span, members) in &spans {
            for &i in members {
                assert!(span.start <= ranges[i].start && ranges[i].end <= span.end);
            }
        }
        let last: Vec<Range<u64>> = std::iter::once(10 * b..size).collect();
        assert_eq!(super::spans(&last, size), vec![(10 * b..size, vec![0])]);
    }
}
