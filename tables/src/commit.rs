//! How a stage's output becomes visible: the commit protocol.
//!
//! 1. **Check** ([`check_output`]): the output is neither an input nor inside one, nor contains
//!    one; an output that already has `_SUCCESS` is kept unless the job sets `overwrite`.
//!    Nothing is deleted here: yesterday's output stays readable until the new one commits.
//! 2. **Write**: every worker writes parts named by the run (`part-<run>-<worker>-<n>.parquet`,
//!    see [`crate::parts`]), so two runs never write the same name and a multipart upload never
//!    needs to be conditional.
//! 3. **Commit** ([`commit`]): worker 0 writes `_SUCCESS` last, as a JSON [`Manifest`] of the
//!    parts with their rows, sizes and CRC-32 checksums, and the job's settings. Without
//!    `overwrite` it is a create-if-absent put, so of two runs racing for one output exactly one
//!    commits; the other fails. Then parts the manifest does not list (a failed run's
//!    leftovers, an older run's parts, staging files) are removed.
//!
//! Readers ([`crate::store::Place::parquet_files`]) take only the parts a manifest lists, so
//! a reader never sees a half-written output or a mix of runs.

use object_store::{ObjectMeta, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::store::Place;

pub const MANIFEST_FORMAT: u32 = 1;

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
    /// The stage: `flatten`, `train`, `infer`, `generate`, `import`.
    pub stage: String,
    pub rows: u64,
    pub bytes: u64,
    /// In name order.
    pub parts: Vec<PartEntry>,
    /// The job's settings for this stage.
    pub settings: serde_json::Value,
}

impl Manifest {
    pub fn new(run: &str, stage: &str, mut parts: Vec<PartEntry>, settings: serde_json::Value) -> Self {
        parts.sort();
        Manifest {
            format: MANIFEST_FORMAT,
            run: run.to_owned(),
            stage: stage.to_owned(),
            rows: parts.iter().map(|p| p.rows).sum(),
            bytes: parts.iter().map(|p| p.bytes).sum(),
            parts,
            settings,
        }
    }
}

/// A run id, unique in practice: the start time in milliseconds and a random part, in hex.
/// Worker 0 makes it and every worker of every process uses that one.
pub fn new_run_id() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let noise = std::collections::hash_map::RandomState::new();
    let random = std::hash::BuildHasher::hash_one(&noise, (std::process::id(), now.as_nanos()));
    format!("{:011x}{:08x}", now.as_millis(), random as u32)
}

/// The manifest of a committed output; `None` without `_SUCCESS`, or when `_SUCCESS` is a plain
/// marker (Hadoop and Spark write an empty one; earlier versions of this project a few lines of
/// text). A JSON object that is not a manifest is an error.
pub async fn read_manifest(dir: &Place) -> Result<Option<Manifest>, Error> {
    let marker = dir.child(schemas::SUCCESS_MARKER);
    let bytes = match marker.store.get(&marker.path).await {
        Ok(got) => got.bytes().await.map_err(|source| marker.store_error("cannot read", source))?,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(source) => return Err(marker.store_error("cannot read", source)),
    };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Ok(None);
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::BadData(format!("{}: not a manifest this version reads: {e}", marker.shown())))
}

/// Step 1 (see the module doc). `inputs` are the stage's input tables.
pub async fn check_output(output: &Place, inputs: &[&Place], overwrite: bool) -> Result<(), Error> {
    for input in inputs {
        if output.overlaps(input) {
            return Err(Error::Usage(format!(
                "the output {} is, holds or lies inside the input {}; choose another output",
                output.shown(),
                input.shown()
            )));
        }
    }
    if !overwrite && output.child(schemas::SUCCESS_MARKER).exists().await {
        return Err(Error::Output(format!(
            "{} already holds a finished output (_SUCCESS); set overwrite = true to replace it",
            output.shown()
        )));
    }
    Ok(())
}

/// Step 3 (see the module doc): writes the manifest, then removes what it does not list.
pub async fn commit(output: &Place, manifest: &Manifest, overwrite: bool) -> Result<(), Error> {
    let marker = output.child(schemas::SUCCESS_MARKER);
    let json = serde_json::to_vec_pretty(manifest).map_err(|e| Error::Internal(format!("manifest: {e}")))?;
    let mode = if overwrite { PutMode::Overwrite } else { PutMode::Create };
    let put = marker.store.put_opts(&marker.path, PutPayload::from(json), PutOptions::from(mode)).await;
    match put {
        Ok(_) => {}
        Err(object_store::Error::AlreadyExists { .. }) => {
            return Err(Error::Output(format!(
                "{}: another run committed this output first; this run's parts are left for its next run to remove",
                output.shown()
            )));
        }
        Err(source) => return Err(marker.store_error("cannot write", source)),
    }
    remove_unlisted(output, manifest).await;
    Ok(())
}

/// Removes parts (`part-*`, staging files included) the manifest does not list. A failure here
/// only leaves files that readers ignore, so it is logged, not fatal.
async fn remove_unlisted(output: &Place, manifest: &Manifest) {
    let listed: std::collections::HashSet<&str> = manifest.parts.iter().map(|p| p.name.as_str()).collect();
    let stale: Vec<ObjectMeta> = match output.list_files().await {
        Ok(files) => files
            .into_iter()
            .filter(|m| m.location.filename().is_some_and(|n| n.starts_with("part-") && !listed.contains(n)))
            .collect(),
        Err(e) => {
            tracing::warn!("{}: cannot list old parts to remove them: {e}", output.shown());
            return;
        }
    };
    for file in stale {
        if let Err(e) = output.store.delete(&file.location).await {
            tracing::warn!("cannot remove {}: {e}", output.show(&file.location));
        }
    }
    // object_store's local store stages uploads as `<name>#<n>` and leaves those names out of
    // its listings; a killed run's staging files are removed here.
    if let Some(dir) = output.local_dir()
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("part-") && name.contains('#') && std::fs::remove_file(entry.path()).is_err() {
                tracing::warn!("cannot remove {}", entry.path().display());
            }
        }
    }
}
