//! How a stage's output becomes visible: the commit protocol.
//!
//! 1. **Check** ([`check_output`]): the output is neither an input nor inside one, nor holds
//!    one, after symlinks ([`Place::overlaps`]). It holds nothing this project did not write
//!    (see [`crate::names`]) unless the job sets `overwrite`, and then such files are kept and
//!    never read; an output that already has `_SUCCESS` is kept unless the job sets
//!    `overwrite`. Nothing is deleted here: yesterday's output stays readable until the new
//!    one commits.
//! 2. **Write**: the committing worker takes a [`Lease`] (the run's marker), then every worker
//!    writes parts named by the run (`part-<run>-<worker>-<n>.parquet`, see [`crate::parts`]),
//!    so two runs never write the same name and a multipart upload never needs to be
//!    conditional.
//! 3. **Commit** ([`commit`]): the committing worker checks that its marker is still in
//!    place, then writes `_SUCCESS` last, as a JSON [`Manifest`] of the parts with their rows,
//!    sizes and CRC-32 checksums, and the job's settings. Without `overwrite` it is a
//!    create-if-absent put, so of two runs racing for one output exactly one commits; the
//!    other fails. Then it removes the files of runs that have ended ([`cleanup`]).
//!
//! A run that writes several outputs (GraphInfer's scores and pair scores) commits them
//! together with [`commit_all`]: every marker is checked first, the manifests go in order,
//! and a manifest that cannot be written takes back those written before it, so a failed run
//! leaves its `_SUCCESS` nowhere.
//!
//! Readers ([`crate::read::table_files`]) take only the parts a manifest lists, so a reader never
//! sees a half-written output or a mix of runs.
//!
//! Why two runs racing with `overwrite` leave one complete output: a run deletes another run's
//! files only when that run has ended (its marker is gone, or says it is dead), and, for a run
//! that ended by committing, only when `_SUCCESS`, read again after that, is still its own. A
//! run that ended before that read committed before it, so the manifest that is still ours
//! replaced its manifest: its files are no longer listed by any manifest.

use std::collections::BTreeMap;

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::Error;
use crate::lease::{self, Lease};
use crate::names::{Layout, Name, REPORT, marker_name, run_of};
use crate::place::Place;

pub use crate::manifest::{MANIFEST_FORMAT, Manifest, PartEntry, Stage, read_manifest};
pub use crate::names::new_run_id;

/// Step 1 (see the module doc). `inputs` are every input of the job's stage (tables, records,
/// a model); `layout` names the files the stage's output holds besides run-named ones.
pub async fn check_output(output: &Place, inputs: &[&Place], overwrite: bool, layout: &Layout) -> Result<(), Error> {
    for input in inputs {
        if output.overlaps(input) {
            return Err(Error::Usage(format!(
                "the output {} is, holds or lies inside the input {}; choose another output",
                output.shown(),
                input.shown()
            )));
        }
    }
    if output.local_dir().is_some_and(|d| d.exists() && !d.is_dir()) {
        return Err(Error::Output(format!("{}: the output is a file, not a directory", output.shown())));
    }
    let entries = entries(output).await?;
    // A run writes into its layout's directories (a model's `checkpoints/`): one that is a
    // symlink or a file would lead its writes and its cleanup elsewhere, so not even
    // `overwrite` takes it.
    if let Some(e) = entries.iter().find(|e| layout.dirs.contains(&e.name.as_str()) && e.kind != Kind::Dir) {
        return Err(Error::Output(format!(
            "{}/{} is not a directory (a symlink or a file); this project writes its own directory              there: remove it or choose another output",
            output.shown(),
            e.name
        )));
    }
    let foreign: Vec<&str> = entries.iter().filter(|e| !e.ours(layout)).map(|e| e.name.as_str()).collect();
    if !foreign.is_empty() && !overwrite {
        let shown: Vec<&str> = foreign.iter().take(5).copied().collect();
        return Err(Error::Output(format!(
            "{} holds files this project did not write ({}{}); choose a new or empty directory, or set \
             overwrite = true (they are then kept as they are)",
            output.shown(),
            shown.join(", "),
            if foreign.len() > shown.len() { ", ..." } else { "" }
        )));
    }
    if !overwrite && entries.iter().any(|e| e.name == schemas::SUCCESS_MARKER) {
        return Err(Error::Output(format!(
            "{} already holds a finished output (_SUCCESS); set overwrite = true to replace it",
            output.shown()
        )));
    }
    Ok(())
}

/// Step 3 (see the module doc): writes the manifest of `lease`'s run, then removes the files
/// of runs that have ended, and the run's marker.
pub async fn commit(
    output: &Place,
    manifest: &Manifest,
    overwrite: bool,
    layout: &Layout,
    lease: Lease,
) -> Result<(), Error> {
    commit_all(vec![Pending { output, manifest: manifest.clone(), layout, lease }], overwrite).await
}

/// One output of a run, ready to commit: its manifest and the run's lease on it.
pub struct Pending<'a> {
    pub output: &'a Place,
    pub manifest: Manifest,
    pub layout: &'a Layout,
    pub lease: Lease,
}

/// Step 3 for a run that writes several outputs (GraphInfer's scores, then its pair scores),
/// in the order given:
///
/// 1. every output's marker is checked before any manifest is written;
/// 2. the manifests are written one after another; when one cannot be (a store's failure,
///    another run that committed there first), those already written are taken back before the
///    error returns: the `_SUCCESS` each replaced is put back, or the new one removed (while it
///    is still this run's). After a failure no output holds this run's `_SUCCESS`;
/// 3. the markers go, whatever happened; the files of ended runs are removed only once every
///    manifest is in place, so a taken-back output still has the parts its restored manifest
///    lists.
///
/// The outputs are not committed atomically: a reader may see the first one committed for the
/// moment before a later one fails and it is taken back.
pub async fn commit_all(pending: Vec<Pending<'_>>, overwrite: bool) -> Result<(), Error> {
    let (leases, outputs): (Vec<Lease>, Vec<(&Place, Manifest, &Layout)>) =
        pending.into_iter().map(|p| (p.lease, (p.output, p.manifest, p.layout))).unzip();
    let published = publish(&outputs, &leases, overwrite).await;
    // The markers go whatever the puts did: a run that lost a race, or failed to write, ends
    // here (and its process may exit before a marker removal spawned on drop runs).
    for lease in leases {
        lease.release().await;
    }
    published?;
    for (output, manifest, layout) in &outputs {
        cleanup(output, manifest, layout).await;
    }
    Ok(())
}

/// Steps 1 and 2 of [`commit_all`].
async fn publish(outputs: &[(&Place, Manifest, &Layout)], leases: &[Lease], overwrite: bool) -> Result<(), Error> {
    for ((output, _, _), lease) in outputs.iter().zip(leases) {
        if !lease.held().await? {
            return Err(Error::Retry(format!(
                "{}: this run's marker ({}) is gone: another run judged it dead and removed its files; run it again",
                output.shown(),
                marker_name(lease.run())
            )));
        }
    }
    let mut written: Vec<(&Place, &str, Option<Vec<u8>>)> = Vec::new();
    for (i, (output, manifest, _)) in outputs.iter().enumerate() {
        // Only an output that a later one may fail after needs what it replaced.
        let keep_replaced = overwrite && i + 1 < outputs.len();
        match put_manifest(output, manifest, overwrite, keep_replaced).await {
            Ok(replaced) => written.push((output, &manifest.run, replaced)),
            Err(e) => {
                for (output, run, replaced) in written.into_iter().rev() {
                    take_back(output, run, replaced).await;
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Writes `manifest` as `output`'s `_SUCCESS`: a create-if-absent put without `overwrite`.
/// Returns the bytes it replaced when `keep_replaced` asks for them.
async fn put_manifest(
    output: &Place,
    manifest: &Manifest,
    overwrite: bool,
    keep_replaced: bool,
) -> Result<Option<Vec<u8>>, Error> {
    let marker = output.child(schemas::SUCCESS_MARKER);
    let json = serde_json::to_vec_pretty(manifest).map_err(|source| Error::Encode { what: "manifest", source })?;
    let replaced = if keep_replaced { marker.get().await? } else { None };
    let mode = if overwrite { PutMode::Overwrite } else { PutMode::Create };
    match marker.store.put_opts(&marker.path, PutPayload::from(json), PutOptions::from(mode)).await {
        Ok(_) => Ok(replaced),
        Err(object_store::Error::AlreadyExists { .. }) => Err(Error::Output(format!(
            "{}: another run committed this output first; this run's parts are removed by the next commit",
            output.shown()
        ))),
        Err(source) => Err(marker.store_error("cannot write", source)),
    }
}

/// Takes run `run`'s `_SUCCESS` back from `output`: puts back the bytes it replaced, or removes
/// it. A manifest that is no longer this run's (another run committed since) is left alone.
/// Best effort: a failure is logged.
async fn take_back(output: &Place, run: &str, replaced: Option<Vec<u8>>) {
    let marker = output.child(schemas::SUCCESS_MARKER);
    match read_manifest(output).await {
        Ok(Some(manifest)) if manifest.run == run => {}
        _ => return,
    }
    let undone = match replaced {
        Some(bytes) => marker.put(bytes).await,
        None => marker.store.delete(&marker.path).await.map_err(|source| marker.store_error("cannot remove", source)),
    };
    match undone {
        Ok(()) => tracing::warn!("{}: this run's _SUCCESS was taken back", output.shown()),
        Err(e) => tracing::error!("{}: cannot take this run's _SUCCESS back: {e}", output.shown()),
    }
}

/// Removes the run-named files (and markers) of runs that have ended, directly under `output`
/// and in `layout`'s directories, after `manifest`'s run committed; see the module doc for why
/// this never removes a file a manifest lists. Files this project did not write, symlinks and
/// other directories are never touched. A failure here only leaves files that readers ignore,
/// so it is logged, not fatal.
pub async fn cleanup(output: &Place, manifest: &Manifest, layout: &Layout) {
    if let Err(e) = try_cleanup(output, manifest, layout).await {
        tracing::warn!("{}: cannot remove the files of earlier runs: {e}", output.shown());
    }
    remove_stale_report(output).await;
}

/// The job's report of an earlier run describes an output that is no longer there: it goes
/// (only a regular file that is one of this project's reports); the job writes its own when it
/// ends.
async fn remove_stale_report(output: &Place) {
    let report = output.child(REPORT);
    if crate::report_page::is_report(&report).await.unwrap_or(false)
        && let Err(e) = report.store.delete(&report.path).await
    {
        tracing::debug!("{}: cannot remove an earlier run's report: {e}", report.shown());
    }
}

async fn try_cleanup(output: &Place, manifest: &Manifest, layout: &Layout) -> Result<(), Error> {
    let listed: std::collections::HashSet<&str> = manifest.parts.iter().map(|p| p.name.as_str()).collect();
    // Files by run; this run's own files outside the manifest (staging) go at once.
    let mut by_run: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    let mut markers = Vec::new();
    let mut own = Vec::new();
    let mut scopes = vec![(output.clone(), true)];
    scopes.extend(layout.dirs.iter().map(|d| (output.child(d), false)));
    for (dir, top) in scopes {
        for entry in entries(&dir).await? {
            if entry.kind != Kind::File {
                continue;
            }
            let run = match layout.classify(&entry.name) {
                Name::Run(run) if top => run.to_owned(),
                Name::Marker(run) if top => {
                    if run != manifest.run {
                        markers.push(run.to_owned());
                    }
                    continue;
                }
                _ if !top => match run_of(&entry.name) {
                    Some(run) => run.to_owned(),
                    None => continue,
                },
                _ => continue,
            };
            if run == manifest.run {
                if top && !listed.contains(entry.name.as_str()) {
                    own.push(entry);
                }
            } else {
                by_run.entry(run).or_default().push(entry);
            }
        }
    }
    for run in markers {
        by_run.entry(run).or_default();
    }
    remove(output, &own).await;
    let mut ended = Vec::new();
    for (run, files) in by_run {
        let place = output.child(&marker_name(&run));
        match lease::read(&place).await? {
            Some(marker) if marker.alive() => {}
            Some(_) => {
                // A dead run: its marker first, so that the run fails if it ever commits.
                remove(output, &[Entry::file(&place)]).await;
                remove(output, &files).await;
            }
            None => ended.extend(files),
        }
    }
    if !ended.is_empty() && read_manifest(output).await?.is_some_and(|m| m.run == manifest.run) {
        remove(output, &ended).await;
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    /// A symlink, or anything else that is neither.
    Other,
}

/// A name directly under a directory.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    path: Path,
    /// On the local file system, the file's real path (object_store's paths escape some
    /// characters of local names).
    local: Option<std::path::PathBuf>,
    kind: Kind,
}

impl Entry {
    fn file(place: &Place) -> Entry {
        let name = place.path.filename().unwrap_or_default().to_owned();
        Entry { name, path: place.path.clone(), local: place.local_dir(), kind: Kind::File }
    }

    /// Whether this project may have written it: a file with one of its names, or a directory
    /// of the layout.
    fn ours(&self, layout: &Layout) -> bool {
        match (layout.classify(&self.name), self.kind) {
            (Name::Foreign, _) | (_, Kind::Other) => false,
            (Name::Fixed, Kind::Dir) => layout.dirs.contains(&self.name.as_str()),
            (_, Kind::Dir) => false,
            (_, Kind::File) => true,
        }
    }
}

/// The names directly under `dir`, without following symlinks; none if it does not exist.
async fn entries(dir: &Place) -> Result<Vec<Entry>, Error> {
    if let Some(local) = dir.local_dir() {
        let read = match std::fs::read_dir(&local) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => {
                return Ok(Vec::new());
            }
            Err(source) => return Err(Error::List { dir: dir.shown(), source }),
        };
        let mut out = Vec::new();
        for entry in read {
            let entry = entry.map_err(|source| Error::List { dir: dir.shown(), source })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = match std::fs::symlink_metadata(entry.path()) {
                Ok(m) if m.is_file() => Kind::File,
                Ok(m) if m.is_dir() => Kind::Dir,
                _ => Kind::Other,
            };
            out.push(Entry { path: dir.path.clone().join(name.as_str()), name, local: Some(entry.path()), kind });
        }
        return Ok(out);
    }
    let listed = dir
        .store
        .list_with_delimiter(Some(&dir.path))
        .await
        .map_err(|source| dir.store_error("cannot list", source))?;
    let name = |path: &Path| path.filename().unwrap_or_default().to_owned();
    let files = listed.objects.into_iter().map(|m| Entry {
        name: name(&m.location),
        path: m.location,
        local: None,
        kind: Kind::File,
    });
    let dirs =
        listed.common_prefixes.into_iter().map(|p| Entry { name: name(&p), path: p, local: None, kind: Kind::Dir });
    Ok(files.chain(dirs).collect())
}

async fn remove(output: &Place, files: &[Entry]) {
    for file in files {
        let removed = match &file.local {
            Some(path) => std::fs::remove_file(path).map_err(|e| e.to_string()),
            None => output.store.delete(&file.path).await.map_err(|e| e.to_string()),
        };
        if let Err(e) = removed {
            tracing::warn!("cannot remove {}: {e}", output.show(&file.path));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Io;
    use schemas::StorageConfig;

    fn manifest(run: &str) -> Manifest {
        Manifest::new(run, Stage::Infer, Vec::new(), serde_json::Value::Null)
    }

    /// Commits run `run` to `outputs` together, with a lease taken on each.
    fn commit_both(io: &Io, outputs: &[&Place], run: &str, overwrite: bool) -> Result<(), Error> {
        io.block_on(async {
            let mut pending = Vec::new();
            for &output in outputs {
                let lease = Lease::take(output, run, "infer").await?;
                pending.push(Pending { output, manifest: manifest(run), layout: &Layout::TABLE, lease });
            }
            commit_all(pending, overwrite).await
        })
    }

    fn success(dir: &std::path::Path) -> Option<Vec<u8>> {
        std::fs::read(dir.join(schemas::SUCCESS_MARKER)).ok()
    }

    fn markers(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("_run-"))
            .count()
    }

    /// A second output that cannot commit takes the first one's `_SUCCESS` back: removed when
    /// it was new, the replaced one put back under `overwrite`; the markers go either way.
    #[test]
    fn a_failed_later_commit_takes_the_earlier_ones_back() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("tables-commit-all-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (a, b) = (dir.join("a"), dir.join("b"));
        let place = |p: &std::path::Path| Place::parse_output(p.to_str().unwrap(), &StorageConfig::default()).unwrap();
        let (pa, pb) = (place(&a), place(&b));

        // Another run committed `b` first: the create-if-absent put fails there.
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join(schemas::SUCCESS_MARKER), b"other").unwrap();
        let error = commit_both(&io, &[&pa, &pb], &new_run_id(), false).unwrap_err();
        assert!(matches!(error, Error::Output(_)), "{error}");
        assert_eq!(success(&a), None, "the new _SUCCESS of a is removed");
        assert_eq!(success(&b).as_deref(), Some(&b"other"[..]));
        assert_eq!((markers(&a), markers(&b)), (0, 0));

        // Under overwrite, `a` had an earlier manifest, and `b`'s cannot be written at all.
        let earlier = serde_json::to_vec(&manifest(&new_run_id())).unwrap();
        std::fs::write(a.join(schemas::SUCCESS_MARKER), &earlier).unwrap();
        std::fs::remove_file(b.join(schemas::SUCCESS_MARKER)).unwrap();
        std::fs::create_dir(b.join(schemas::SUCCESS_MARKER)).unwrap();
        assert!(commit_both(&io, &[&pa, &pb], &new_run_id(), true).is_err());
        assert_eq!(success(&a), Some(earlier), "the replaced _SUCCESS of a is put back");
        assert_eq!((markers(&a), markers(&b)), (0, 0));

        // Both commit when both can.
        std::fs::remove_dir(b.join(schemas::SUCCESS_MARKER)).unwrap();
        let run = new_run_id();
        commit_both(&io, &[&pa, &pb], &run, true).unwrap();
        for output in [&pa, &pb] {
            assert_eq!(io.block_on(read_manifest(output)).unwrap().unwrap().run, run);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A commit takes away an earlier run's report (the job writes its own when it ends), and
    /// only a report: a foreign `report.html` and a FIFO in its place stay.
    #[test]
    fn a_commit_removes_only_an_earlier_report() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("tables-commit-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let place = |p: &std::path::Path| Place::parse_output(p.to_str().unwrap(), &StorageConfig::default()).unwrap();
        let (ours, foreign, fifo) = (dir.join("ours"), dir.join("foreign"), dir.join("fifo"));
        for d in [&ours, &foreign, &fifo] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(ours.join(REPORT), format!("{}\n<html></html>", crate::names::REPORT_SIGNATURE)).unwrap();
        std::fs::write(foreign.join(REPORT), "someone's page").unwrap();
        let made = std::process::Command::new("mkfifo").arg(fifo.join(REPORT)).status().unwrap();
        assert!(made.success());
        commit_both(&io, &[&place(&ours), &place(&foreign), &place(&fifo)], &new_run_id(), true).unwrap();
        assert!(!ours.join(REPORT).exists(), "the earlier report is gone");
        assert_eq!(std::fs::read_to_string(foreign.join(REPORT)).unwrap(), "someone's page");
        assert!(std::fs::symlink_metadata(fifo.join(REPORT)).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
