//! Writing whole input tables (nodes, edges) as Parquet part files with a `_SUCCESS` marker,
//! for `import` and `generate`.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use object_store::buffered::BufWriter;
use parquet::arrow::AsyncArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::Error;
use crate::store::{Io, Place};

/// Writes `batches` as one Parquet file at `place`.
pub fn write_file(io: &Io, place: &Place, schema: SchemaRef, batches: &[RecordBatch]) -> Result<u64, Error> {
    let file = place.shown();
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1 is valid")))
        .build();
    io.block_on(async {
        let upload = BufWriter::new(place.store.clone(), place.path.clone());
        let mut writer = AsyncArrowWriter::try_new(upload, schema, Some(props))?;
        for batch in batches {
            writer.write(batch).await?;
        }
        writer.finish().await?;
        Ok(writer.bytes_written() as u64)
    })
    .map_err(|source| Error::Parquet { file, source })
}

/// Clears `dir` (marker first), lets `write_parts` write its parts, then writes the marker.
pub fn write_table(io: &Io, dir: &Place, write_parts: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
    io.block_on(dir.clear_output())?;
    write_parts()?;
    io.block_on(dir.child(schemas::SUCCESS_MARKER).put(Vec::new()))
}

/// The name of part `i` of a table.
pub fn part_name(i: usize) -> String {
    format!("part-{i:05}.parquet")
}

pub fn schema_ref(schema: arrow_schema::Schema) -> SchemaRef {
    Arc::new(schema)
}
