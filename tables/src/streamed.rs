//! One object too large to build in memory first (a worker's share of a learned table in a
//! checkpoint), written as a stream and read back by ranges. The write is object_store's
//! buffered upload: a multipart upload on an object store, a temporary file renamed at the end
//! on a local one, so the object appears whole when the write finishes, or not at all; no more
//! than the upload's buffer is held at a time. Reads take one range at a time.

use std::ops::Range;

use object_store::ObjectStoreExt;
use object_store::buffered::BufWriter;
use tokio::io::AsyncWriteExt;

use crate::error::Error;
use crate::io::Io;
use crate::place::Place;

/// An object being written block by block (see the module doc).
pub struct StreamedPut<'a> {
    io: &'a Io,
    place: Place,
    upload: Option<BufWriter>,
}

impl<'a> StreamedPut<'a> {
    pub fn new(io: &'a Io, place: Place) -> Self {
        let upload = BufWriter::new(place.store.clone(), place.path.clone());
        StreamedPut { io, place, upload: Some(upload) }
    }

    /// Appends `bytes`.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let upload = self.upload.as_mut().ok_or_else(|| Error::Internal("a write after the end".into()))?;
        let written = self.io.block_on(upload.write_all(bytes));
        written.map_err(|e| self.failed(e))
    }

    /// Completes the object: from now on readers see it whole.
    pub fn finish(mut self) -> Result<(), Error> {
        let Some(mut upload) = self.upload.take() else { return Ok(()) };
        let done = self.io.block_on(upload.shutdown());
        done.map_err(|e| self.failed(e))
    }

    fn failed(&self, error: std::io::Error) -> Error {
        let source = object_store::Error::Generic { store: "upload", source: Box::new(error) };
        self.place.store_error("cannot write", source)
    }
}

impl Drop for StreamedPut<'_> {
    /// An unfinished object is abandoned: no reader ever sees part of it.
    fn drop(&mut self) {
        if let Some(mut upload) = self.upload.take() {
            let _ = self.io.block_on(upload.abort());
        }
    }
}

/// Bytes `range` of the object at `place` (none for an empty range: a store may refuse one).
pub fn read_range(io: &Io, place: &Place, range: Range<u64>) -> Result<Vec<u8>, Error> {
    if range.is_empty() {
        return Ok(Vec::new());
    }
    let got = io.block_on(place.store.get_range(&place.path, range));
    got.map(|bytes| bytes.to_vec()).map_err(|source| place.store_error("cannot read", source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::StorageConfig;

    /// Blocks written one after another read back as one object, by any range; an object
    /// dropped before it is finished never appears.
    #[test]
    fn a_streamed_object_appears_whole_or_not_at_all() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("tables-streamed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let place = |name: &str| io.output(dir.join(name).to_str().unwrap()).unwrap();
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut put = StreamedPut::new(&io, place("whole"));
        for block in bytes.chunks(700_000) {
            put.write(block).unwrap();
        }
        put.finish().unwrap();
        assert_eq!(std::fs::read(dir.join("whole")).unwrap(), bytes);
        assert_eq!(read_range(&io, &place("whole"), 1_000_000..1_000_010).unwrap(), bytes[1_000_000..1_000_010]);
        assert_eq!(read_range(&io, &place("whole"), 7..7).unwrap(), Vec::<u8>::new());
        let mut abandoned = StreamedPut::new(&io, place("abandoned"));
        abandoned.write(&bytes).unwrap();
        drop(abandoned);
        assert!(!dir.join("abandoned").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
