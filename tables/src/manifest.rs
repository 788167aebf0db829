//! `_SUCCESS` as a manifest: what a run committed (its parts with rows, sizes and checksums,
//! the stage and its settings), and reading it back. Written by [`crate::commit`], read by
//! every reader of an output ([`crate::read::table_files`]).

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::place::Place;

pub const MANIFEST_FORMAT: u32 = 1;

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
}

impl PartEntry {
    /// The entry of a file `name` holding `bytes` (`rows` rows).
    pub fn of(name: &str, rows: u64, bytes: &[u8]) -> Self {
        PartEntry { name: name.to_owned(), rows, bytes: bytes.len() as u64, crc32: crc32fast::hash(bytes) }
    }
}

/// `_SUCCESS`: what a run committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The run that wrote it (see [`new_run_id`]).
    pub run: String,
    pub stage: Stage,
    pub rows: u64,
    pub bytes: u64,
    /// In name order.
    pub parts: Vec<PartEntry>,
    /// The job's settings for this stage.
    pub settings: serde_json::Value,
    /// What the run tells about itself, for the job's report (absent from older manifests).
    /// Only the report reads it: facts that do not parse are taken as none, never an error.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient")]
    pub facts: Option<schemas::facts::RunFacts>,
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
            parts,
            settings,
            facts: None,
        }
    }

    pub fn with_facts(mut self, facts: schemas::facts::RunFacts) -> Self {
        self.facts = Some(facts);
        self
    }
}

/// The run's facts if they parse; `None` otherwise.
fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<schemas::facts::RunFacts>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
}

/// The largest `_SUCCESS` read: a manifest lists every part in about 150 bytes, so this holds
/// hundreds of thousands of parts; a larger file is not one of ours and is never read whole.
pub const MANIFEST_MAX_BYTES: u64 = 64 << 20;

/// The manifest of a committed output; `None` without `_SUCCESS`, or when `_SUCCESS` is a plain
/// marker (Hadoop and Spark write an empty one). A JSON object that is not a manifest is an
/// error, and so is a `_SUCCESS` larger than [`MANIFEST_MAX_BYTES`] or that is not a regular
/// file (a FIFO would block the reader, a device never end), neither of which is read.
pub async fn read_manifest(dir: &Place) -> Result<Option<Manifest>, Error> {
    if dir.local_dir().is_some_and(|d| d.is_file()) {
        // A single file given as a table: it has no manifest (and no child to read).
        return Ok(None);
    }
    // A FIFO, socket or device given as a table: bad data, never opened.
    dir.refuse_stream()?;
    let marker = dir.child(schemas::SUCCESS_MARKER);
    marker.refuse_special()?;
    match marker.size().await? {
        None => return Ok(None),
        Some(size) if size > MANIFEST_MAX_BYTES => {
            return Err(Error::BadData(format!(
                "{}: {size} bytes, more than any manifest ({} MB); not read",
                marker.shown(),
                MANIFEST_MAX_BYTES >> 20
            )));
        }
        Some(_) => {}
    }
    let Some(bytes) = marker.get().await? else { return Ok(None) };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Ok(None);
    }
    serde_json::from_slice(&bytes).map(Some).map_err(|source| Error::Decode {
        file: marker.shown(),
        what: "manifest",
        source,
    })
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
}
