//! Reading Parquet tables through `object_store`: a table's files with their footers, row
//! groups as the unit of work, decoded batches of a bounded size.

use std::sync::Arc;

use arrow_array::RecordBatch;
use futures::TryStreamExt;
use object_store::{ObjectMeta, ObjectStoreExt};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder};
use parquet::basic::Type as PhysicalType;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use schemas::{BadInput, Location};

use crate::chunks::ChunkBuffers;
use crate::error::{Error, is_fetch, is_missing};
use crate::fetch::{Changed, ObjectReader};
use crate::files::{Listed, TableFile, listed_entries, replaced, table_files};
use crate::io::Io;
use crate::manifest::Manifest;
use crate::place::Place;

/// What one decoded batch of a row group should hold (see [`ParquetFile::batch_rows`]).
const BATCH_BYTES: u64 = 4 << 20;

/// One Parquet file with its footer read: the unit of work is one of its row groups.
#[derive(Clone)]
pub struct ParquetFile {
    pub place: Place,
    pub meta: ObjectMeta,
    pub arrow: ArrowReaderMetadata,
    /// The buffers its table's local column chunks are read into (see [`crate::chunks`]).
    chunks: Arc<ChunkBuffers>,
    /// Its manifest's entry, which every read is checked against; `None` for a file of a
    /// table without a manifest.
    listed: Option<Arc<Listed>>,
}

impl ParquetFile {
    /// Opens one file of `table`, whose column chunks are read into `chunks` where it is local:
    /// its footer, checked as every read of a listed part is, and a listed part's rows.
    pub async fn open(table: &Place, file: TableFile, chunks: Arc<ChunkBuffers>) -> Result<ParquetFile, Error> {
        let TableFile { meta, listed } = file;
        let expected = listed.as_ref().map(|l| l.expected.clone());
        let mut reader = ObjectReader::new(table, &meta, &chunks, expected);
        let arrow = match ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new()).await {
            Ok(arrow) => arrow,
            Err(source) => return Err(unopened(table, &meta, listed.as_deref(), source).await),
        };
        let name = table.show(&meta.location);
        check_chunks(arrow.metadata(), meta.size, &name)?;
        let rows = arrow.metadata().file_metadata().num_rows();
        if let Some(listed) = &listed
            && u64::try_from(rows).ok() != Some(listed.entry.rows)
        {
            return Err(Error::BadData(format!(
                "{name}: {rows} rows where the manifest of run {} says {}: the part or its manifest changed after \
                 its commit",
                listed.run, listed.entry.rows
            )));
        }
        Ok(ParquetFile { place: table.clone(), meta, arrow, chunks, listed })
    }

    pub fn name(&self) -> String {
        self.place.show(&self.meta.location)
    }

    /// Its manifest's entry; `None` for a file of a table without a manifest.
    pub fn listed_entry(&self) -> Option<crate::manifest::PartEntry> {
        self.listed.as_ref().map(|l| l.entry.clone())
    }

    /// The run whose committed output this file is a part of; `None` without a manifest.
    pub fn run(&self) -> Option<&str> {
        self.listed.as_ref().map(|l| l.run.as_str())
    }

    pub fn row_groups(&self) -> usize {
        self.arrow.metadata().num_row_groups()
    }

    /// The file row of row group `rg`'s first row.
    pub fn first_row(&self, rg: usize) -> u64 {
        self.arrow.metadata().row_groups()[..rg].iter().map(|g| g.num_rows() as u64).sum()
    }

    /// The rows row group `rg` holds, as its metadata says (a claim, unchecked until read).
    pub fn row_group_rows(&self, rg: usize) -> u64 {
        self.arrow.metadata().row_group(rg).num_rows().max(0) as u64
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
    pub fn read_row_group(
        &self,
        io: &Io,
        rg: usize,
        each: impl FnMut(RecordBatch, u64) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.read_columns(io, rg, None, each)
    }

    /// Reads the named columns of row group `rg` (all with `None`): only their column chunks
    /// are fetched and decoded. Bytes that do not decode are bad input at the row and column
    /// where they fail ([`ParquetFile::undecodable`]); a failed fetch is the store's error.
    pub fn read_columns(
        &self,
        io: &Io,
        rg: usize,
        columns: Option<&[&str]>,
        mut each: impl FnMut(RecordBatch, u64) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut row = self.first_row(rg);
        let failed = |row, source| self.undecodable(io, rg, columns, row, source);
        let mut stream = self.stream(rg, self.projection(columns)).map_err(|e| failed(row, e))?;
        while let Some(batch) = next_batch(io, &mut stream).map_err(|e| failed(row, e))? {
            let rows = batch.num_rows() as u64;
            each(batch, row)?;
            row += rows;
        }
        Ok(())
    }

    fn projection(&self, columns: Option<&[&str]>) -> ProjectionMask {
        match columns {
            Some(columns) => {
                ProjectionMask::columns(self.arrow.metadata().file_metadata().schema_descr(), columns.iter().copied())
            }
            None => ProjectionMask::all(),
        }
    }

    fn stream(&self, rg: usize, mask: ProjectionMask) -> Result<ParquetRecordBatchStream<ObjectReader>, ParquetError> {
        let expected = self.listed.as_ref().map(|l| l.expected.clone());
        ParquetRecordBatchStreamBuilder::new_with_metadata(
            ObjectReader::new(&self.place, &self.meta, &self.chunks, expected),
            self.arrow.clone(),
        )
        .with_row_groups(vec![rg])
        .with_batch_size(self.batch_rows(rg))
        .with_projection(mask)
        .build()
    }

    /// The error for row group `rg`, which failed in the batch from file row `row` on. A failed
    /// fetch ([`Fetch`]) is the store's error, as it is. Anything else is in the bytes: bad
    /// input, located by reading each of the columns alone up to the batch where one fails
    /// (a cost paid only on this path), at that batch's first row. The arrow reader's error
    /// names neither the column nor the row, and a page's rows are not known before it decodes,
    /// so the batch's rows are named.
    fn undecodable(&self, io: &Io, rg: usize, columns: Option<&[&str]>, row: u64, source: ParquetError) -> Error {
        if let Some(error) = self.changed_or_replaced(io, &source) {
            return error;
        }
        if is_fetch(&source) {
            return Error::Parquet { file: self.name(), source };
        }
        let schema = self.arrow.metadata().file_metadata().schema_descr();
        let roots = schema.root_schema().get_fields().iter().map(|f| f.name()).enumerate();
        let wanted = |name: &str| columns.is_none_or(|c| c.iter().any(|c| c.split('.').next() == Some(name)));
        let failing = roots.filter(|(_, name)| wanted(name)).find_map(|(i, name)| {
            let mut row = self.first_row(rg);
            let mut stream = self.stream(rg, ProjectionMask::roots(schema, [i])).ok()?;
            loop {
                match next_batch(io, &mut stream) {
                    Ok(Some(batch)) => row += batch.num_rows() as u64,
                    Ok(None) => return None,
                    // A fetch that fails now says nothing of the bytes.
                    Err(e) => return (!is_fetch(&e)).then_some((row, name)),
                }
            }
        });
        let (row, at) = match failing {
            Some((row, name)) => (row, Location::file(self.name()).row(row).column(name)),
            None => (row, Location::file(self.name()).row(row)),
        };
        let end = (row + self.batch_rows(rg) as u64).min(self.first_row(rg) + self.row_group_rows(rg));
        let cause = schemas::message::chain_message(schemas::message::sources(&source));
        BadInput::new(at, format!("rows {row}..{end} (row group {rg}) do not decode: {cause}")).into()
    }
}

impl ParquetFile {
    /// The error of a read that found a listed part changed (a block whose CRC-32 is not the
    /// manifest's) or gone because another run replaced the table; `None` for any other.
    fn changed_or_replaced(&self, io: &Io, source: &ParquetError) -> Option<Error> {
        let listed = self.listed.as_deref()?;
        if let Some(Changed(mismatch)) = schemas::message::sources(source).find_map(|e| e.downcast_ref::<Changed>()) {
            return Some(changed(&self.name(), listed, mismatch));
        }
        if is_missing(source) {
            return io.block_on(replaced(&self.place, &listed.run));
        }
        None
    }
}

/// A listed part whose bytes are not those its manifest lists.
fn changed(name: &str, listed: &Listed, mismatch: &crate::checksum::Mismatch) -> Error {
    let crate::checksum::Mismatch { bytes, expected, found, .. } = mismatch;
    Error::BadData(format!(
        "{name}: bytes {}..{} have CRC-32 {found:08x} where the manifest of run {} says {expected:08x}: the part \
         changed after its commit; run the stage that wrote it again",
        bytes.start, bytes.end, listed.run
    ))
}

/// Why `meta` of `table` could not be opened: a listed part changed or replaced with its table,
/// a file that is not Parquet (said as such), or the Parquet reader's error.
async fn unopened(table: &Place, meta: &ObjectMeta, listed: Option<&Listed>, source: ParquetError) -> Error {
    let name = table.show(&meta.location);
    if let Some(listed) = listed {
        if let Some(Changed(mismatch)) = schemas::message::sources(&source).find_map(|e| e.downcast_ref::<Changed>()) {
            return changed(&name, listed, mismatch);
        }
        if is_missing(&source)
            && let Some(error) = replaced(table, &listed.run).await
        {
            return error;
        }
    }
    if !is_fetch(&source) && !ends_in_magic(table, meta).await {
        return Error::BadData(format!(
            "{name}: not a Parquet file ({} bytes that do not end in a Parquet footer)",
            meta.size
        ));
    }
    Error::Parquet { file: name, source }
}

/// Whether the object ends as a Parquet file does (`PAR1`, after a footer); true when that cannot
/// be read, so that the reader's own error stands.
async fn ends_in_magic(table: &Place, meta: &ObjectMeta) -> bool {
    if meta.size < 12 {
        return false;
    }
    match table.store.get_range(&meta.location, meta.size - 4..meta.size).await {
        Ok(tail) => &tail[..] == b"PAR1",
        Err(_) => true,
    }
}

/// The next batch of `stream`. The Parquet decoder panics on some bytes that do not decode (a
/// varint longer than 10 bytes in a page, for one): such a panic is an error in the bytes like
/// any other, reported by the caller as bad input where it happened, never a crash of the job.
fn next_batch(
    io: &Io,
    stream: &mut ParquetRecordBatchStream<ObjectReader>,
) -> Result<Option<RecordBatch>, ParquetError> {
    let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| io.block_on(stream.try_next())));
    next.unwrap_or_else(|panic| {
        let text = schemas::message::panic_text(panic.as_ref());
        Err(ParquetError::General(format!("the decoder failed: {text}")))
    })
}

/// Checks that every column chunk the footer of `file` (of `size` bytes) names lies within the
/// file, before anything reads one: the decoder panics on a negative offset or size, and an
/// offset past the end would fetch bytes that are not there. Bad input naming the row group and
/// the column otherwise.
fn check_chunks(metadata: &ParquetMetaData, size: u64, file: &str) -> Result<(), Error> {
    for (rg, group) in metadata.row_groups().iter().enumerate() {
        for column in group.columns() {
            let start = column.dictionary_page_offset().unwrap_or(column.data_page_offset());
            let length = column.compressed_size();
            // Negative offsets and sizes fail the conversions.
            let end = u64::try_from(start).ok().zip(u64::try_from(length).ok()).and_then(|(s, l)| s.checked_add(l));
            if column.data_page_offset() >= 0 && end.is_some_and(|end| end <= size) {
                continue;
            }
            let name = column.column_path().parts().first().cloned().unwrap_or_default();
            let problem = format!(
                "row group {rg}: the footer places this column's chunk at offset {start}, {length} bytes long, in a \
                 file of {size} bytes: the file is corrupt"
            );
            return Err(BadInput::new(Location::file(file).column(name), problem).into());
        }
    }
    Ok(())
}

/// Every (file, row group) of a table, numbered the same way on every worker; worker `i` of
/// `n` takes the units whose number is `i` mod `n`. A local directory is read through a hold on
/// the version it holds now ([`crate::pin`]), which its files keep while they live.
pub fn open_table(io: &Io, table: &Place) -> Result<Vec<ParquetFile>, Error> {
    let table = &table.held();
    io.block_on(async {
        let mut files = Vec::new();
        let chunks = Arc::new(ChunkBuffers::default());
        for file in table_files(table).await? {
            files.push(ParquetFile::open(table, file, chunks.clone()).await?);
        }
        Ok(files)
    })
}

/// The Parquet parts of a committed directory that holds other files too (a model directory:
/// its weights and description, and its learned embedding table's `part-*.parquet`): the
/// manifest's entries whose names `keep` accepts.
pub fn open_listed(io: &Io, dir: &Place, keep: impl Fn(&str) -> bool) -> Result<Vec<ParquetFile>, Error> {
    let dir = &dir.held();
    io.block_on(async {
        let mut files = Vec::new();
        let chunks = Arc::new(ChunkBuffers::default());
        for file in table_files(dir).await? {
            if file.meta.location.filename().is_some_and(&keep) {
                files.push(ParquetFile::open(dir, file, chunks.clone()).await?);
            }
        }
        Ok(files)
    })
}

/// A committed version of an output, as this process holds it ([`crate::pin`]): its manifest
/// and its parts, each opened and checked as any listed part is.
pub struct Version {
    pub manifest: Manifest,
    pub parts: Vec<ParquetFile>,
}

/// The version the output `dir` holds now; `None` where it holds no manifest.
pub fn open_version(io: &Io, dir: &Place) -> Result<Option<Version>, Error> {
    let dir = &dir.held();
    io.block_on(async {
        let Some(manifest) = crate::manifest::read_manifest(dir).await? else { return Ok(None) };
        // Each part there at its listed size: a part grown after its commit still reads up to
        // that size, and carried on would hand its readers the bytes past it.
        crate::files::check_listed(dir, &manifest).await?;
        let chunks = Arc::new(ChunkBuffers::default());
        let mut parts = Vec::with_capacity(manifest.parts.len());
        for file in listed_entries(dir, &manifest.run, &manifest.parts) {
            parts.push(ParquetFile::open(dir, file, chunks.clone()).await?);
        }
        Ok(Some(Version { manifest, parts }))
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{Float32Builder, ListBuilder};
    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    use schemas::{Cause, StorageConfig};

    use super::*;
    use crate::fetch::{external, local_error};

    /// A file of 2 row groups of 1,000 rows: `node_id`, then 8 `features` a row.
    fn write_table(path: &std::path::Path) {
        write_table_as(path, Compression::ZSTD(ZstdLevel::try_new(1).unwrap()));
    }

    fn write_table_as(path: &std::path::Path, compression: Compression) {
        let ids = Int64Array::from_iter_values(0..2_000);
        let mut features = ListBuilder::new(Float32Builder::new());
        for i in 0..2_000 {
            features.values().append_slice(&[(i % 97) as f32 * 0.37; 8]);
            features.append(true);
        }
        let columns: Vec<(&str, ArrayRef)> =
            vec![("node_id", Arc::new(ids)), ("features", Arc::new(features.finish()))];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let props =
            WriterProperties::builder().set_compression(compression).set_max_row_group_row_count(Some(1_000)).build();
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    fn read_all(io: &Io, file: &ParquetFile, columns: Option<&[&str]>) -> Result<u64, Error> {
        let mut rows = 0;
        for rg in 0..file.row_groups() {
            file.read_columns(io, rg, columns, |batch, _| {
                rows += batch.num_rows() as u64;
                Ok(())
            })?;
        }
        Ok(rows)
    }

    /// Bytes that do not decode are bad input at the file, the row group's failing rows and the
    /// column they belong to, whichever columns were asked for; the other column still reads.
    #[test]
    fn a_corrupt_page_is_bad_input_naming_its_rows_and_column() {
        let dir = std::env::temp_dir().join(format!("tables-read-corrupt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nodes.parquet");
        write_table(&path);
        let io = Io::new(&StorageConfig::default()).unwrap();
        let place = Place::parse(path.to_str().unwrap(), &StorageConfig::default()).unwrap();
        let files = open_table(&io, &place).unwrap();
        assert_eq!(read_all(&io, &files[0], None).unwrap(), 2_000);

        // Garble the header of the second row group's first feature page.
        let chunk = files[0].arrow.metadata().row_group(1).column(1).clone();
        assert_eq!(chunk.column_path().parts()[0], "features");
        let mut bytes = std::fs::read(&path).unwrap();
        for b in &mut bytes[chunk.data_page_offset() as usize..][..8] {
            *b ^= 0x5a;
        }
        std::fs::write(&path, &bytes).unwrap();
        let files = open_table(&io, &place).unwrap();

        for columns in [None, Some(&["node_id", "features"][..]), Some(&["features"][..])] {
            let error = read_all(&io, &files[0], columns).unwrap_err();
            let Error::BadInput(bad) = &error else { panic!("{columns:?}: not bad input: {error}") };
            assert_eq!(bad.at.file, files[0].name());
            assert_eq!((bad.at.row, bad.at.column.as_deref()), (Some(1_000), Some("features")), "{error}");
            assert!(bad.problem.starts_with("rows 1000..2000 (row group 1) do not decode: "), "{error}");
            assert_eq!(error.cause(), Cause::BadData);
        }
        assert_eq!(read_all(&io, &files[0], Some(&["node_id"])).unwrap(), 2_000);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// No bytes in a page make the reader panic: the decoder panics on some (a varint of more
    /// than 10 bytes), and such a panic is bad input like any other error in the bytes. Every
    /// 12-byte window of the features' chunk in an uncompressed row group set to 0xff, one at
    /// a time: each read succeeds or fails as bad data, and some fail in the decoder.
    #[test]
    fn no_corrupt_page_panics_the_reader() {
        let dir = std::env::temp_dir().join(format!("tables-read-panic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nodes.parquet");
        write_table_as(&path, Compression::UNCOMPRESSED);
        let io = Io::new(&StorageConfig::default()).unwrap();
        let place = Place::parse(path.to_str().unwrap(), &StorageConfig::default()).unwrap();
        let clean = std::fs::read(&path).unwrap();
        let (start, length) = open_table(&io, &place).unwrap()[0].arrow.metadata().row_group(1).column(1).byte_range();
        let mut in_decoder = 0;
        for at in (start as usize..(start + length) as usize - 12).step_by(5) {
            let mut bytes = clean.clone();
            bytes[at..at + 12].fill(0xff);
            std::fs::write(&path, &bytes).unwrap();
            let Ok(files) = open_table(&io, &place) else { continue };
            if let Err(error) = read_all(&io, &files[0], None) {
                assert_eq!(error.cause(), Cause::BadData, "byte {at}: {error}");
                in_decoder += usize::from(error.to_string().contains("the decoder failed"));
            }
        }
        assert!(in_decoder > 0, "no window reached a panic of the decoder");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A footer that places a column chunk at a negative offset or size, or past the file's end,
    /// is bad input naming the file, the row group and the column, found as the file opens: the
    /// decoder panics on the first, and the second names bytes that are not there.
    #[test]
    fn a_chunk_outside_its_file_is_bad_input() {
        let dir = std::env::temp_dir().join(format!("tables-read-chunks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nodes.parquet");
        write_table(&path);
        let io = Io::new(&StorageConfig::default()).unwrap();
        let place = Place::parse(path.to_str().unwrap(), &StorageConfig::default()).unwrap();
        let file = open_table(&io, &place).unwrap().remove(0);
        let (metadata, size) = (file.arrow.metadata().as_ref().clone(), file.meta.size);
        assert!(check_chunks(&metadata, size, "f").is_ok());
        for (offset, length) in [(-5, 100), (4, -1), (size as i64 - 10, 100)] {
            let mut groups = metadata.row_groups().to_vec();
            let mut columns = groups[1].columns().to_vec();
            columns[1] = columns[1]
                .clone()
                .into_builder()
                .set_dictionary_page_offset(None)
                .set_data_page_offset(offset)
                .set_total_compressed_size(length)
                .build()
                .unwrap();
            groups[1] = groups[1].clone().into_builder().set_column_metadata(columns).build().unwrap();
            let corrupt = ParquetMetaData::new(metadata.file_metadata().clone(), groups);
            let error = check_chunks(&corrupt, size, "f").unwrap_err();
            let Error::BadInput(bad) = &error else { panic!("not bad input: {error}") };
            assert_eq!((bad.at.file.as_str(), bad.at.column.as_deref()), ("f", Some("features")), "{error}");
            assert!(bad.problem.starts_with("row group 1: the footer places"), "{error}");
            assert_eq!(error.cause(), Cause::BadData);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A failed fetch is the store's failure: a file gone is a missing input (66), a local file
    /// cut short a corrupt one (65: a retry would read the same bytes), anything else a retry
    /// (75, a store's object shorter than listed included); an error in the bytes (a
    /// decompressor's io error, as parquet wraps it) is bad data (65).
    #[test]
    fn a_failed_fetch_is_told_from_bytes_that_do_not_decode() {
        let parquet = |source| Error::Parquet { file: "f".into(), source };
        let store = |e| parquet(external(e));
        let generic = |s: &str| object_store::Error::Generic { store: "S3", source: s.into() };
        assert_eq!(store(generic("416 Range Not Satisfiable")).cause(), Cause::Retry);
        assert_eq!(store(generic("connection reset")).cause(), Cause::Retry);
        let gone = object_store::Error::NotFound { path: "f".into(), source: "404".into() };
        assert_eq!(store(gone).cause(), Cause::NoInput);
        let local = |kind: std::io::ErrorKind| parquet(local_error(kind.into())).cause();
        assert_eq!(local(std::io::ErrorKind::NotFound), Cause::NoInput);
        assert_eq!(local(std::io::ErrorKind::UnexpectedEof), Cause::BadData);
        assert_eq!(local(std::io::ErrorKind::Interrupted), Cause::Retry);
        let zstd = ParquetError::from(std::io::Error::other("Data corruption detected"));
        assert_eq!(parquet(zstd).cause(), Cause::BadData);
        assert_eq!(parquet(ParquetError::General("bad footer".into())).cause(), Cause::BadData);
    }
}
