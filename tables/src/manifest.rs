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

/// The manifest of a committed output; `None` without `_SUCCESS`, or when `_SUCCESS` is a plain
/// marker (Hadoop and Spark write an empty one). A JSON object that is not a manifest is an
/// error.
pub async fn read_manifest(dir: &Place) -> Result<Option<Manifest>, Error> {
    if dir.local_dir().is_some_and(|d| d.is_file()) {
        // A single file given as a table: it has no manifest (and no child to read).
        return Ok(None);
    }
    let marker = dir.child(schemas::SUCCESS_MARKER);
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
