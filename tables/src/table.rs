//! Writing whole input tables (nodes, edges) as Parquet part files under the commit protocol
//! ([`crate::commit`]), for `import` and `generate`.

use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use object_store::buffered::BufWriter;
use parquet::arrow::AsyncArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::commit::{Manifest, PartEntry, Stage, check_output, commit, new_run_id};
use crate::error::Error;
use crate::io::Io;
use crate::lease::Lease;
use crate::names::Layout;
use crate::parts::Checksummed;
use crate::place::Place;

/// The parts of one table being written, from any number of threads, under a run's lease;
/// [`TableWriter::commit`] makes them the table.
pub struct TableWriter<'a> {
    io: &'a Io,
    dir: Place,
    stage: Stage,
    lease: Lease,
    parts: Mutex<Vec<PartEntry>>,
}

impl<'a> TableWriter<'a> {
    /// Checks `dir` as an output apart from `inputs` (an earlier table there is replaced;
    /// files this project did not write are kept) and takes a new run's lease on it.
    pub fn start(io: &'a Io, dir: &Place, stage: Stage, inputs: &[&Place]) -> Result<Self, Error> {
        let lease = io.block_on(async {
            check_output(dir, inputs, true, &Layout::TABLE).await?;
            Lease::take(dir, &new_run_id(), stage.name()).await
        })?;
        Ok(TableWriter { io, dir: dir.clone(), stage, lease, parts: Mutex::new(Vec::new()) })
    }

    /// Writes `batches` as part `i` of the table.
    pub fn write(&self, i: usize, schema: SchemaRef, batches: &[RecordBatch]) -> Result<(), Error> {
        let name = format!("part-{}-{i:05}.parquet", self.lease.run());
        let entry = write_file(self.io, &self.dir.child(&name), schema, batches)?;
        self.parts
            .lock()
            .map_err(|_| Error::Internal("a part writer panicked".into()))?
            .push(PartEntry { name, ..entry });
        Ok(())
    }

    /// Commits the parts with a `_SUCCESS` manifest (replacing any earlier table there; its
    /// parts are removed after the commit).
    pub fn commit(self) -> Result<(), Error> {
        let parts = self.parts.into_inner().map_err(|_| Error::Internal("a part writer panicked".into()))?;
        let manifest = Manifest::new(self.lease.run(), self.stage, parts, serde_json::Value::Null);
        self.io.block_on(commit(&self.dir, &manifest, true, &Layout::TABLE, self.lease))
    }
}

/// Writes `batches` as one Parquet file at `place`; its entry for a manifest (named by `place`).
pub fn write_file(io: &Io, place: &Place, schema: SchemaRef, batches: &[RecordBatch]) -> Result<PartEntry, Error> {
    let file = place.shown();
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid")))
        .build();
    io.block_on(async {
        let upload = Checksummed::new(BufWriter::new(place.store.clone(), place.path.clone()));
        let mut writer = AsyncArrowWriter::try_new(upload, schema, Some(props))?;
        for batch in batches {
            writer.write(batch).await?;
        }
        writer.finish().await?;
        let bytes = writer.bytes_written() as u64;
        Ok(PartEntry {
            name: place.path.filename().unwrap_or_default().to_owned(),
            rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
            bytes,
            crc32: writer.into_inner().finish(),
        })
    })
    .map_err(|source| Error::Write { file, source })
}

pub fn schema_ref(schema: arrow_schema::Schema) -> SchemaRef {
    Arc::new(schema)
}

#[cfg(test)]
mod tests {
    use arrow_array::{ArrayRef, Int64Array};
    use schemas::{Cause, StorageConfig};

    use super::*;

    /// A part that cannot be written is the output's failure (73), not bad data (65, as it was
    /// when reported as a Parquet read's error): here a path through a file, which the store
    /// refuses.
    #[test]
    fn a_part_that_cannot_be_written_is_an_output_error() {
        let dir = std::env::temp_dir().join(format!("tables-table-write-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("file"), b"not a directory").unwrap();
        let io = Io::new(&StorageConfig::default()).unwrap();
        let storage = StorageConfig::default();
        let place = Place::parse_output(dir.join("file/part-0.parquet").to_str().unwrap(), &storage).unwrap();
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let batch = RecordBatch::try_from_iter([("node_id", ids)]).unwrap();
        let error = write_file(&io, &place, batch.schema(), &[batch]).unwrap_err();
        assert!(matches!(error, Error::Write { .. }), "{error}");
        assert_eq!(error.cause(), Cause::CantCreate, "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
