//! The manifest: what a run committed (its parts with rows, sizes and checksums, the stage
//! and its settings), and reading it back. Written by [`crate::commit`], read by every reader of
//! an output ([`crate::read::table_files`]).
//!
//! **Where it lives.** In [`MANIFEST`] (`_manifest.parquet`), a Parquet file of no rows with the
//! table's schema whose footer holds the manifest as JSON (key [`MANIFEST_KEY`]); `_SUCCESS`
//! beside it is empty. Both are for the directory's readers: polars reads every non-empty file
//! of a directory it is given and refuses one that is not Parquet, so the manifest is a
//! Parquet file that adds no rows and no columns, and `_SUCCESS` (which Hadoop tools and
//! schedulers wait for) is empty, as Spark writes it. An earlier version's manifest, JSON in
//! `_SUCCESS`, is still read.

use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{SchemaDescriptor, Type};
use serde::{Deserialize, Serialize};

use crate::checksum::{BLOCK_BYTES, Blocks, Expected, Sums};
use crate::error::Error;
use crate::names::MANIFEST;
use crate::place::Place;

/// 2: the manifest in `_manifest.parquet`, with block checksums; 1: JSON in `_SUCCESS`.
pub const MANIFEST_FORMAT: u32 = 2;

/// The key of the manifest's JSON in the footer of [`MANIFEST`].
pub const MANIFEST_KEY: &str = "graphflat.manifest";

/// The stage that committed an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Flatten,
    Train,
    Infer,
    Generate,
    Import,
    #[serde(rename = "split-edges")]
    SplitEdges,
    Partition,
    Precompute,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Flatten => "flatten",
            Stage::Train => "train",
            Stage::Infer => "infer",
            Stage::Generate => "generate",
            Stage::Import => "import",
            Stage::SplitEdges => "split-edges",
            Stage::Partition => "partition",
            Stage::Precompute => "precompute",
        }
    }
}

/// One part of a committed output.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PartEntry {
    /// The file name inside the output directory.
    pub name: String,
    pub rows: u64,
    pub bytes: u64,
    /// CRC-32 (IEEE) of the file's bytes.
    pub crc32: u32,
    /// CRC-32 of each block of [`Manifest::block_bytes`] bytes (see [`crate::checksum`]); none
    /// in an earlier version's manifest.
    #[serde(default)]
    pub blocks: Blocks,
}

impl PartEntry {
    /// The entry of a file `name` holding `bytes` (`rows` rows).
    pub fn of(name: &str, rows: u64, bytes: &[u8]) -> Self {
        PartEntry::summed(name, rows, Sums::of(bytes))
    }

    /// The entry of a file `name` of `rows` rows whose bytes have `sums`.
    pub fn summed(name: &str, rows: u64, sums: Sums) -> Self {
        PartEntry { name: name.to_owned(), rows, bytes: sums.bytes, crc32: sums.crc32, blocks: sums.blocks }
    }

    /// What a reader checks this part's blocks against.
    pub fn expected(&self) -> Expected {
        Expected { size: self.bytes, blocks: self.blocks.clone() }
    }
}

/// What a run committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The run that wrote it (see [`new_run_id`]).
    pub run: String,
    pub stage: Stage,
    pub rows: u64,
    pub bytes: u64,
    /// The size of the blocks each part's `blocks` checksums.
    #[serde(default = "block_bytes")]
    pub block_bytes: u64,
    /// In name order.
    pub parts: Vec<PartEntry>,
    /// The job's settings for this stage.
    pub settings: serde_json::Value,
    /// What the run tells about itself, for the job's report (absent from older manifests).
    /// Only the report reads it: facts that do not parse are taken as none, never an error.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub facts: Option<schemas::facts::RunFacts>,
    /// The tables committed with this one as one graph, each as the path from this table to it
    /// (`../edges`); empty for any other output (see [`crate::together`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub together: Vec<String>,
}

fn block_bytes() -> u64 {
    BLOCK_BYTES
}

impl Manifest {
    pub fn new(run: &str, stage: Stage, mut parts: Vec<PartEntry>, settings: serde_json::Value) -> Self {
        parts.sort();
        Manifest {
            format: MANIFEST_FORMAT,
            run: run.to_owned(),
            stage,
            rows: parts.iter().map(|p| p.rows).sum(),
            bytes: parts.iter().map(|p| p.bytes).sum(),
            block_bytes: BLOCK_BYTES,
            parts,
            settings,
            facts: None,
            together: Vec::new(),
        }
    }

    /// Checks what a reader relies on, so that a manifest edited by hand or written by a later
    /// version is refused by name rather than half read: a format this version knows, part names
    /// that are plain file names listed once, totals that are the parts' sums and, from format
    /// 2, a checksum for every block of every part.
    pub fn check(&self, file: &str) -> Result<(), Error> {
        let bad = |what: String| Err(Error::BadData(format!("{file}: {what}")));
        if self.format > MANIFEST_FORMAT {
            return bad(format!(
                "manifest format {} is newer than this version reads ({MANIFEST_FORMAT}); read it with a later graphflat",
                self.format
            ));
        }
        if self.format >= 2 && self.block_bytes != BLOCK_BYTES {
            return bad(format!("blocks of {} bytes; this version checks blocks of {BLOCK_BYTES}", self.block_bytes));
        }
        let mut names = std::collections::HashSet::new();
        for part in &self.parts {
            if !crate::names::is_listed_name(&part.name) {
                return bad(format!("part {:?} is not a file name of the table's directory", part.name));
            }
            if !names.insert(part.name.as_str()) {
                return bad(format!("part {} is listed twice", part.name));
            }
            let blocks = part.bytes.div_ceil(BLOCK_BYTES) as usize;
            if self.format >= 2 && part.blocks.0.len() != blocks {
                return bad(format!(
                    "part {} of {} bytes has {} block checksums where it needs {blocks}",
                    part.name,
                    part.bytes,
                    part.blocks.0.len()
                ));
            }
        }
        let (rows, bytes) =
            self.parts.iter().fold((0u64, 0u64), |(r, b), p| (r.saturating_add(p.rows), b.saturating_add(p.bytes)));
        if (rows, bytes) != (self.rows, self.bytes) {
            return bad(format!(
                "its parts hold {rows} rows and {bytes} bytes where its totals say {} and {}",
                self.rows, self.bytes
            ));
        }
        Ok(())
    }

    pub fn with_facts(mut self, facts: schemas::facts::RunFacts) -> Self {
        self.facts = Some(facts);
        self
    }

    /// The manifest as the bytes of [`MANIFEST`]: a Parquet file of no rows whose schema is
    /// `schema` (the table's, with its footer's key-value metadata, which carries the Arrow
    /// schema) or none.
    pub fn to_parquet(&self, schema: Option<(&SchemaDescriptor, Vec<KeyValue>)>) -> Result<Vec<u8>, Error> {
        let json = serde_json::to_string(self).map_err(|source| Error::Encode { what: "manifest", source })?;
        let (root, mut metadata) = match schema {
            Some((descr, metadata)) => (descr.root_schema_ptr(), metadata),
            None => (std::sync::Arc::new(empty_schema()), Vec::new()),
        };
        metadata.retain(|kv| kv.key != MANIFEST_KEY);
        metadata.push(KeyValue::new(MANIFEST_KEY.to_owned(), json));
        let props = WriterProperties::builder().set_key_value_metadata(Some(metadata)).build();
        let encode = |source| Error::Internal(format!("cannot encode the manifest: {source}"));
        let writer = SerializedFileWriter::new(Vec::new(), root, std::sync::Arc::new(props)).map_err(encode)?;
        writer.into_inner().map_err(encode)
    }
}

fn empty_schema() -> Type {
    Type::group_type_builder("schema").build().expect("a root of no fields is a valid schema")
}

/// The run's facts if they parse; `None` otherwise.
fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<schemas::facts::RunFacts>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
}

/// The largest manifest read: a manifest lists every part in about 150 bytes plus 5.5 kB of
/// block checksums per 256 MB, so this holds thousands of parts and terabytes of data; a larger
/// file is not one of ours and is never read whole.
pub const MANIFEST_MAX_BYTES: u64 = 64 << 20;

/// The manifest of a committed output (see the module doc): [`MANIFEST`]'s, or an earlier
/// version's JSON in `_SUCCESS`; `None` without either, or when `_SUCCESS` is a plain marker
/// (Hadoop and Spark write an empty one). A file that is not a manifest of this project is an
/// error, and so is one larger than [`MANIFEST_MAX_BYTES`] or that is not a regular file (a FIFO
/// would block the reader, a device never end), neither of which is read.
pub async fn read_manifest(dir: &Place) -> Result<Option<Manifest>, Error> {
    if dir.local_dir().is_some_and(|d| d.is_file()) {
        // A single file given as a table: it has no manifest (and no child to read).
        return Ok(None);
    }
    // A FIFO, socket or device given as a table: bad data, never opened.
    dir.refuse_stream()?;
    let parquet = dir.child(MANIFEST);
    // One read of the whole file: a manifest that a commit replaces meanwhile is read whole, the
    // old one or the new (a footer read by its size, then its bytes, could mix the two).
    if bounded_size(&parquet).await?.is_some()
        && let Some(bytes) = parquet.get().await?
    {
        let manifest = parse_parquet_manifest(&parquet, bytes)?;
        manifest.check(&parquet.shown())?;
        return Ok(Some(manifest));
    }
    let marker = dir.child(schemas::SUCCESS_MARKER);
    if bounded_size(&marker).await?.is_none() {
        return Ok(None);
    }
    let Some(bytes) = marker.get().await? else { return Ok(None) };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Ok(None);
    }
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|source| Error::Decode {
        file: marker.shown(),
        what: "manifest",
        source,
    })?;
    manifest.check(&marker.shown())?;
    Ok(Some(manifest))
}

/// The size of the file at `place`, if there is one: never a FIFO, a directory or a device,
/// nor larger than [`MANIFEST_MAX_BYTES`] (bad data, named).
async fn bounded_size(place: &Place) -> Result<Option<u64>, Error> {
    place.refuse_special()?;
    match place.size().await? {
        Some(size) if size > MANIFEST_MAX_BYTES => Err(Error::BadData(format!(
            "{}: {size} bytes, more than any manifest ({} MB); not read",
            place.shown(),
            MANIFEST_MAX_BYTES >> 20
        ))),
        size => Ok(size),
    }
}

/// The manifest in the footer of `bytes`, the content of [`MANIFEST`] at `place`.
fn parse_parquet_manifest(place: &Place, bytes: Vec<u8>) -> Result<Manifest, Error> {
    parse_manifest_file(&place.shown(), bytes)
}

/// The manifest in the footer of a [`MANIFEST`] file's bytes; `shown` names the file.
pub(crate) fn parse_manifest_file(shown: &str, bytes: Vec<u8>) -> Result<Manifest, Error> {
    let footer = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::from(bytes))
        .map_err(|source| Error::Parquet { file: shown.to_owned(), source })?;
    let json = footer
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|kv| kv.key == MANIFEST_KEY))
        .and_then(|kv| kv.value.as_deref())
        .ok_or_else(|| {
            Error::BadData(format!("{shown}: not a manifest of this project (no {MANIFEST_KEY} in its footer)"))
        })?;
    serde_json::from_str(json).map_err(|source| Error::Decode { file: shown.to_owned(), what: "manifest", source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_marker_too_large_or_not_a_file_is_an_error_and_never_read() {
        let io = crate::Io::new(&schemas::StorageConfig::default()).unwrap();
        let root = std::env::temp_dir().join(format!("tables-manifest-bounds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let place =
            |d: &std::path::Path| Place::parse(d.to_str().unwrap(), &schemas::StorageConfig::default()).unwrap();
        let (huge, fifo, dir, empty) = (root.join("huge"), root.join("fifo"), root.join("dir"), root.join("empty"));
        for d in [&huge, &fifo, &dir, &empty] {
            std::fs::create_dir_all(d).unwrap();
        }
        // Sparse: reading it whole would take 65 MB of memory, and 3 GB for a larger one.
        std::fs::File::create(huge.join("_SUCCESS")).unwrap().set_len(MANIFEST_MAX_BYTES + 1).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(fifo.join("_SUCCESS")).status().unwrap().success());
        std::fs::create_dir_all(dir.join("_SUCCESS")).unwrap();
        std::fs::write(empty.join("_SUCCESS"), b"").unwrap();
        for (d, words) in
            [(&huge, "more than any manifest"), (&fifo, "not a regular file"), (&dir, "not a regular file")]
        {
            let e = io.block_on(read_manifest(&place(d))).unwrap_err();
            assert!(matches!(e, Error::BadData(_)) && e.to_string().contains(words), "{}: {e}", d.display());
            assert!(e.to_string().contains("_SUCCESS"), "{e}");
        }
        assert_eq!(io.block_on(read_manifest(&place(&empty))).unwrap(), None, "Hadoop's empty marker");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn facts_that_do_not_parse_are_none() {
        let manifest = Manifest::new("r", Stage::Flatten, Vec::new(), serde_json::Value::Null);
        let with = manifest.clone().with_facts(schemas::facts::RunFacts { seconds: 1.5, ..Default::default() });
        let back: Manifest = serde_json::from_value(serde_json::to_value(&with).unwrap()).unwrap();
        assert_eq!(back, with);
        for garbage in
            [serde_json::json!("garbage <script>"), serde_json::json!([1]), serde_json::json!({"seconds": "x"})]
        {
            let mut json = serde_json::to_value(&manifest).unwrap();
            json["facts"] = garbage;
            let back: Manifest = serde_json::from_value(json).unwrap();
            assert_eq!(back.facts, None);
        }
    }

    /// Each defect of a hand-edited or later version's manifest is refused naming the file and
    /// what is wrong; an earlier version's manifest (no block checksums) is read.
    #[test]
    fn a_manifest_a_reader_cannot_rely_on_is_refused_by_name() {
        let big = vec![7u8; (BLOCK_BYTES * 2 + 5) as usize];
        let parts = vec![PartEntry::of("part-a.parquet", 3, &big), PartEntry::of("part-b.parquet", 0, b"")];
        let good = Manifest::new("r", Stage::Flatten, parts, serde_json::Value::Null);
        good.check("m").unwrap();
        let mut legacy = good.clone();
        legacy.format = 1;
        legacy.parts[0].blocks = Blocks::default();
        legacy.check("m").unwrap();
        type Edit = fn(&mut Manifest);
        let edits: [(&str, Edit); 7] = [
            ("newer than this version", |m| m.format = MANIFEST_FORMAT + 1),
            ("blocks of 4096 bytes", |m| m.block_bytes = 4096),
            ("not a file name", |m| m.parts[1].name = "../escape.parquet".into()),
            ("listed twice", |m| m.parts[1].name = m.parts[0].name.clone()),
            ("has 2 block checksums where it needs 3", |m| {
                m.parts[0].blocks.0.pop();
            }),
            ("where its totals say 4", |m| m.rows += 1),
            ("where its totals say", |m| m.bytes += 1),
        ];
        for (words, edit) in edits {
            let mut bad = good.clone();
            edit(&mut bad);
            let e = bad.check("dir/_manifest.parquet").unwrap_err();
            assert!(matches!(e, Error::BadData(_)), "{e}");
            assert!(
                e.to_string().contains(words) && e.to_string().starts_with("dir/_manifest.parquet"),
                "{words}: {e}"
            );
        }
    }
}
