//! Where a run's files wait for its commit, and how the commit makes them visible.
//!
//! Every file a run commits is staged first, where no directory reader sees it as data
//! (see [`crate::names`]), in one of two ways:
//!
//! - [`Staged::File`]: written whole at its staged name (`_temporary/<run>/<name>.staged`): a
//!   local part with direct I/O, or through the store; [`publish`] renames it into place: a
//!   rename on a local disk and HDFS, a server-side copy and a delete on S3 with
//!   `[storage] staging = "copy"`;
//! - [`Staged::Upload`]: a multipart upload to the file's own key ([`crate::upload`]), which
//!   shows nothing until [`publish`] completes it; the object then appears whole, and no byte
//!   is copied (S3's default).
//!
//! The committer publishes every worker's files before the manifest goes, so that a manifest
//! never lists a file that is not there; [`withdraw`] takes published files back when the
//! commit fails after all (a lost race, a later output that cannot commit).

use futures::{StreamExt, TryStreamExt};
use object_store::multipart::PartId;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::manifest::PartEntry;
use crate::names::{run_dir, staged_name};
use crate::place::Place;

/// Files published at once: a commit of thousands of parts on S3 is bounded by round trips.
const AT_ONCE: usize = 16;

/// How one file waits for its run's commit (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Staged {
    /// At its staged name, [`staged_name`].
    File,
    /// A multipart upload to its key: its id and its parts' ids, in order.
    Upload { id: String, parts: Vec<String> },
}

/// A file of a run, to publish under `name` in its output.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StagedFile {
    pub name: String,
    pub staged: Staged,
}

/// A part of a run: its manifest entry and how it waits for the commit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StagedPart {
    pub entry: PartEntry,
    pub staged: Staged,
}

impl StagedPart {
    pub fn file(&self) -> StagedFile {
        StagedFile { name: self.entry.name.clone(), staged: self.staged.clone() }
    }
}

/// Makes run `run`'s `files` visible in `dir` under their names, [`AT_ONCE`] at a time. On an
/// error, those published are taken back ([`withdraw`]) before it returns.
pub async fn publish(dir: &Place, run: &str, files: &[StagedFile]) -> Result<(), Error> {
    let published = futures::stream::iter(files.iter().map(|file| publish_one(dir, run, file)))
        .buffer_unordered(AT_ONCE)
        .try_collect::<Vec<()>>()
        .await;
    if let Err(e) = published {
        withdraw(dir, files).await;
        return Err(e);
    }
    Ok(())
}

async fn publish_one(dir: &Place, run: &str, file: &StagedFile) -> Result<(), Error> {
    let target = dir.child(&file.name);
    match &file.staged {
        Staged::File => {
            let staged = dir.child(&staged_name(run, &file.name));
            dir.store
                .rename(&staged.path, &target.path)
                .await
                .map_err(|source| target.store_error("cannot publish", source))
        }
        Staged::Upload { id, parts } => {
            let Some(multipart) = &dir.multipart else {
                return Err(Error::Internal(format!(
                    "{}: an upload staged on a store without uploads",
                    target.shown()
                )));
            };
            let parts = parts.iter().map(|content_id| PartId { content_id: content_id.clone() }).collect();
            multipart
                .complete_multipart(&target.path, &id.clone(), parts)
                .await
                .map(|_| ())
                .map_err(|source| target.store_error("cannot complete the upload of", source))
        }
    }
}

/// Writes the file `name` of `dir` (the manifest, `_SUCCESS`) for run `run`: create-if-absent
/// with `create` (false: `AlreadyExists` when there is one), whole in one step either way. On a
/// local disk the bytes go to the run's temporary directory first and are linked (`create`) or
/// renamed into place, so a run killed while it writes leaves nothing beside the parts
/// (`object_store`'s own local put stages `<name>#<n>` beside its target, which a kill leaves
/// there and polars then refuses).
pub async fn put_whole(dir: &Place, run: &str, name: &str, bytes: Vec<u8>, create: bool) -> Result<(), Error> {
    let target = dir.child(name);
    let (Some(to), Some(via)) = (target.local_dir(), dir.child(&staged_name(run, name)).local_dir()) else {
        let mode = if create { PutMode::Create } else { PutMode::Overwrite };
        return match dir.store.put_opts(&target.path, PutPayload::from(bytes), PutOptions::from(mode)).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { path, source }) => Err(Error::Store {
                what: format!("{} exists", target.shown()),
                source: object_store::Error::AlreadyExists { path, source },
            }),
            Err(source) => Err(target.store_error("cannot write", source)),
        };
    };
    let local = |source: std::io::Error| Error::Write { file: target.shown(), source: source.into() };
    // Another run's commit may move `_temporary/` into its next version between the steps.
    match crate::moved::again_if_moved(|| stage_and_place(&via, &to, &bytes, create)) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::Store {
            what: format!("{} exists", target.shown()),
            source: object_store::Error::AlreadyExists { path: target.shown(), source: e.into() },
        }),
        placed => placed.map_err(local),
    }
}

/// [`put_whole`]'s local steps: `bytes` written at `via` (its folder made), then linked
/// (`create`) or renamed to `to`; `via` is removed if that fails.
fn stage_and_place(via: &std::path::Path, to: &std::path::Path, bytes: &[u8], create: bool) -> std::io::Result<()> {
    if let Some(parent) = via.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(via, bytes)?;
    let placed = match create {
        // The staged name left (its folder moved away meanwhile) goes with the run's folder.
        true => std::fs::hard_link(via, to).map(|()| drop(std::fs::remove_file(via))),
        false => std::fs::rename(via, to),
    };
    if placed.is_err() {
        let _ = std::fs::remove_file(via);
    }
    placed
}

/// Whether `error` is [`put_whole`]'s create-if-absent finding the file there.
pub fn already_exists(error: &Error) -> bool {
    matches!(error, Error::Store { source: object_store::Error::AlreadyExists { .. }, .. })
}

/// Takes back `files` from `dir`: removes those published (their names are the run's own), and
/// aborts uploads not completed. Best effort: what remains is this run's and goes with the
/// next commit's cleanup.
pub async fn withdraw(dir: &Place, files: &[StagedFile]) {
    let each = files.iter().map(|file| async move {
        let target = dir.child(&file.name);
        if let (Staged::Upload { id, .. }, Some(multipart)) = (&file.staged, &dir.multipart) {
            let _ = multipart.abort_multipart(&target.path, &id.clone()).await;
        }
        match dir.store.delete(&target.path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!("cannot take back {}: {e}", target.shown()),
        }
    });
    futures::stream::iter(each).buffer_unordered(AT_ONCE).collect::<Vec<()>>().await;
}

/// Removes run `run`'s temporary directory from `dir`: aborts the uploads it records when
/// `abort` says so (a run that did not complete them), then deletes everything in it (its marker
/// last, so that a run judged dead fails its commit). Best effort: a failure is logged.
pub async fn remove_run_dir(dir: &Place, run: &str, abort: bool) {
    let root = dir.child(&run_dir(run));
    let listed: Vec<object_store::ObjectMeta> = match dir.store.list(Some(&root.path)).try_collect().await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!("cannot list {}: {e}", root.shown());
            return;
        }
    };
    let (mut marker, mut files): (Vec<Path>, Vec<Path>) = (Vec::new(), Vec::new());
    for meta in listed {
        match meta.location.filename() {
            Some(crate::names::MARKER) => marker.push(meta.location),
            Some(name) if abort && name.ends_with(".upload") => {
                abort_recorded(dir, &meta.location, name).await;
                files.push(meta.location);
            }
            _ => files.push(meta.location),
        }
    }
    files.extend(marker);
    for path in files {
        match dir.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!("cannot remove {}: {e}", dir.show(&path)),
        }
    }
    if let Some(local) = root.local_dir() {
        // Empty directories stay on a local disk: a folder's (a model's `embeddings/`), the
        // run's, then `_temporary` when no other run uses it.
        if let Ok(folders) = std::fs::read_dir(&local) {
            folders.flatten().for_each(|f| drop(std::fs::remove_dir(f.path())));
        }
        let _ = std::fs::remove_dir(&local);
        let _ = local.parent().map(std::fs::remove_dir);
    }
}

/// Aborts the upload a record (`<name>.upload`, holding its id) names, on the store of `dir`.
async fn abort_recorded(dir: &Place, record: &Path, name: &str) {
    let Some(multipart) = &dir.multipart else { return };
    let Some(part) = name.strip_suffix(".upload") else { return };
    let id = match dir.store.get(record).await {
        Ok(got) => match got.bytes().await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => return,
        },
        Err(_) => return,
    };
    if let Err(e) = multipart.abort_multipart(&dir.child(part).path, &id).await {
        tracing::debug!("cannot abort the upload of {}: {e}", dir.child(part).shown());
    }
}

/// Stages, under its own name in `dir`, a copy of `file`, a listed part of another table of
/// the same store (a graph's kept table carried into its other slot, `stage::kept`): a
/// server-side copy (on a local disk, `object_store`'s copy of a file), else its bytes read
/// and written (a part is small: `stage::kept` closes them at 16 MB). Its manifest entry is
/// the source's: the bytes are the same.
pub async fn stage_copy(dir: &Place, run: &str, file: &crate::ParquetFile) -> Result<StagedPart, Error> {
    let entry = file
        .listed_entry()
        .ok_or_else(|| Error::Internal(format!("{}: not a listed part, not copied", file.name())))?;
    let staged = dir.child(&staged_name(run, &entry.name));
    if dir.store.copy(&file.meta.location, &staged.path).await.is_err() {
        let read = |source| file.place.store_error("cannot read", source);
        let got = file.place.store.get(&file.meta.location).await.map_err(read)?;
        let bytes = got.bytes().await.map_err(read)?;
        dir.store.put(&staged.path, bytes.into()).await.map_err(|source| staged.store_error("cannot stage", source))?;
    }
    Ok(StagedPart { entry, staged: Staged::File })
}
