//! Writing whole input tables (nodes, edges) as Parquet part files under the commit protocol
//! ([`crate::commit`]), for `import` and `generate`.

use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::commit::{Manifest, Pending, Stage, check_output, commit_all, new_run_id};
use crate::error::Error;
use crate::io::Io;
use crate::lease::Lease;
use crate::names::Layout;
use crate::parts::write_part;
use crate::place::Place;
use crate::staging::StagedPart;

/// The parts of one table being written, from any number of threads, under a run's lease;
/// [`TableWriter::commit`] makes them the table.
pub struct TableWriter<'a> {
    io: &'a Io,
    dir: Place,
    stage: Stage,
    lease: Lease,
    parts: Mutex<Vec<StagedPart>>,
}

impl<'a> TableWriter<'a> {
    /// Checks `dir` as an output of `stage` apart from `inputs` (an earlier table of the same
    /// command there is replaced only with `overwrite`, see [`crate::guard`]; files this project
    /// did not write are kept) and takes a new run's lease on it.
    pub fn start(io: &'a Io, dir: &Place, stage: Stage, inputs: &[&Place], overwrite: bool) -> Result<Self, Error> {
        Self::start_run(io, dir, (stage, &new_run_id()), inputs, overwrite)
    }

    /// Writers of tables that make one whole (a graph's node and edge tables), under one run:
    /// [`TableWriter::commit_together`] commits them, so that their manifests name that one
    /// run, and a command that finds them of two runs knows the whole was never committed (a
    /// run stopped between two tables' switches, or two runs' switches interleaved).
    pub fn start_together(
        io: &'a Io,
        dirs: &[Place],
        stage: Stage,
        inputs: &[&Place],
        overwrite: bool,
    ) -> Result<Vec<Self>, Error> {
        let run = new_run_id();
        dirs.iter().map(|dir| Self::start_run(io, dir, (stage, &run), inputs, overwrite)).collect()
    }

    fn start_run(
        io: &'a Io,
        dir: &Place,
        (stage, run): (Stage, &str),
        inputs: &[&Place],
        overwrite: bool,
    ) -> Result<Self, Error> {
        let lease = io.block_on(async {
            check_output(dir, inputs, stage, overwrite, &Layout::TABLE).await?;
            Lease::take(dir, run, stage.name()).await
        })?;
        Ok(TableWriter { io, dir: dir.clone(), stage, lease, parts: Mutex::new(Vec::new()) })
    }

    /// Writes `batches` as part `i` of the table (zstd level 1, the writer's row groups).
    pub fn write(&self, i: usize, schema: SchemaRef, batches: &[RecordBatch]) -> Result<(), Error> {
        let name = format!("part-{}-{i:05}.parquet", self.lease.run());
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid")))
            .build();
        let part = write_part(self.io, &self.dir, self.lease.run(), &name, schema, props, batches)?;
        self.parts.lock().map_err(|_| Error::Internal("a part writer panicked".into()))?.push(part);
        Ok(())
    }

    /// Commits the parts (replacing any earlier table there; its parts are removed after the
    /// commit).
    pub fn commit(self) -> Result<(), Error> {
        Self::commit_together(vec![self])
    }

    /// Commits every writer's table, one after the other (`commit_all`: where one fails, the
    /// ones before it are taken back).
    pub fn commit_together(writers: Vec<Self>) -> Result<(), Error> {
        let Some(io) = writers.first().map(|w| w.io) else { return Ok(()) };
        let (mut dirs, mut rest) = (Vec::new(), Vec::new());
        for writer in writers {
            let parts = writer.parts.into_inner().map_err(|_| Error::Internal("a part writer panicked".into()))?;
            dirs.push(writer.dir);
            rest.push((writer.stage, writer.lease, parts));
        }
        let places: Vec<&Place> = dirs.iter().collect();
        let pending = dirs.iter().zip(rest).map(|(dir, (stage, lease, parts))| {
            let entries = parts.iter().map(|p| p.entry.clone()).collect();
            let mut manifest = Manifest::new(lease.run(), stage, entries, serde_json::Value::Null);
            manifest.together = crate::together::partners_of(dir, &places);
            let files = parts.iter().map(StagedPart::file).collect();
            Pending { output: dir, manifest, files, layout: &Layout::TABLE, lease }
        });
        // The guard at the start allowed the replacement (or found nothing to replace).
        io.block_on(commit_all(pending.collect(), true))
    }
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
        let place = Place::parse_output(dir.join("file/table").to_str().unwrap(), &storage).unwrap();
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let batch = RecordBatch::try_from_iter([("node_id", ids)]).unwrap();
        let props = WriterProperties::builder().build();
        let error = write_part(&io, &place, "r", "part-0.parquet", batch.schema(), props, &[batch]).unwrap_err();
        assert!(matches!(error, Error::Write { .. }), "{error}");
        assert_eq!(error.cause(), Cause::CantCreate, "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
