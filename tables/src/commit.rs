//! How a stage's output becomes visible: the commit protocol.
//!
//! 1. **Check** ([`check_output`]): the output is neither an input nor inside one, nor holds
//!    one, after symlinks ([`Place::overlaps`]); the rule of [`crate::guard`] (never another
//!    kind's output, never inside or around another output, the same kind only with
//!    `overwrite`). It holds nothing this project did not write (see [`crate::names`]) unless
//!    the job sets `overwrite`, and then such files are kept and never read; but a table's
//!    directory, which its readers read whole, never keeps one. On a local disk,
//!    what a killed switch left beside it is settled first ([`settle`]). Nothing is deleted
//!    here: yesterday's output stays readable until the new one commits.
//! 2. **Write**: the committing worker takes a [`Lease`] (the run's marker in
//!    `_temporary/<run>/`), then every worker stages parts named by the run
//!    (`part-<run>-<worker>-<n>.parquet`, see [`crate::parts`] and [`crate::staging`]): no
//!    directory reader sees them, and two runs never write the same name.
//! 3. **Commit** ([`commit_all`]): the committing worker checks that its marker is still in
//!    place, then switches the run's version in. On a local disk ([`crate::switch`]) the whole
//!    version is built beside the output and exchanged with it in one step, under the parent
//!    directory's lock, which also makes "no manifest there yet" (without `overwrite`) a check
//!    no other run can race. Elsewhere it publishes every worker's parts under their names
//!    ([`crate::staging::publish`]), then writes the [`Manifest`] ([`MANIFEST`]: the parts with
//!    their rows, sizes and checksums, and the job's settings) and an empty `_SUCCESS`; without
//!    `overwrite` the manifest is a create-if-absent put, so of two runs racing for one output
//!    exactly one commits; the other takes its parts back and fails. Then the replaced version
//!    (its manifest's parts, elsewhere) goes, at once, and the files of runs that have ended
//!    ([`crate::cleanup`]). A stop (a signal) lets the switch finish and starts none after it
//!    ([`crate::stop`]).
//!
//! **What a directory reader sees.** On a local disk, one committed version at every instant
//! (or "not found" when the exchange lands between its listing and its opening of a file).
//! Elsewhere, committed parts only, but during the switch: from the first part published to
//! the last part of the replaced manifest out of sight, a listing may find both runs' parts (on
//! S3 as long as the store takes to complete the uploads: `BENCHMARKS.md` section 18), and a
//! run killed inside that window leaves its published parts visible until the next commit.
//! Readers of this project take only the parts the manifest lists, and so see one run whole.
//!
//! A run may list again parts of the version it replaces (a refresh's untouched parts, named
//! after the run that wrote them): the switch links them into its version, the cleanup of ended
//! runs keeps what a manifest lists, and such a run commits only over the version that lists
//! them (`check_carried`; another run that committed since makes it retryable).
//!
//! A run that writes several outputs (GraphInfer's scores and pair scores) commits them in
//! order: every marker is checked first, and an output that cannot commit takes back those
//! committed before it (their replaced manifest restored, their published parts removed), so a
//! failed run leaves its manifest nowhere.
//!
//! Why two runs racing with `overwrite` leave one complete output: a run deletes another run's
//! files only when that run has ended (its marker is gone, or says it is dead), or when they
//! are the parts of the manifest its own replaced; and, for the files of a run that ended by
//! committing, only when the manifest, read again after that, is still its own. A run that
//! ended before that read committed before it, so the manifest that is still ours replaced its
//! manifest: its files are no longer listed by any manifest. A run whose own commit a later
//! run has replaced, and that later run has ended, deletes its own parts: no manifest lists
//! them, and none can again (only a run still committing takes a commit back). Every run ends
//! with its cleanup, after its marker is gone, so of two racing runs the one that cleans up
//! last finds the other ended, and no losing run's part stays visible once both have ended.

use futures::StreamExt;
use object_store::{ObjectMeta, ObjectStoreExt};
use parquet::file::metadata::KeyValue;

use crate::entries::{Entry, Kind, entries};
use crate::error::Error;
use crate::guard::Named;
use crate::lease::Lease;
use crate::names::{Layout, MANIFEST, TEMPORARY, is_run_id, run_of};
use crate::place::Place;
use crate::staging::{StagedFile, already_exists, publish, put_whole, withdraw};
use crate::stop::Switch;
use crate::switch::{self, ParentLock};

pub use crate::cleanup::cleanup;
pub use crate::manifest::{MANIFEST_FORMAT, Manifest, PartEntry, Stage, read_manifest};
pub use crate::names::new_run_id;

/// Step 1 (see the module doc). `inputs` are every input of the job's stage (tables, records,
/// a model); `layout` names the files the stage's output holds besides run-named ones; `stage`
/// is what asks, for the rule of [`crate::guard`]. `output` is named by the job (or the
/// command line): a name graphflat keeps for itself beside an output is refused.
pub async fn check_output(
    output: &Place,
    inputs: &[&Place],
    stage: Stage,
    overwrite: bool,
    layout: &Layout,
) -> Result<(), Error> {
    check_named(output, inputs, (stage, overwrite), layout, Named::ByJob).await
}

/// [`check_output`] for a place a stage names itself beside its output (a refresh's digests,
/// a kept graph: `.<output>.graphflat-<what>`, see [`crate::guard`]).
pub async fn check_own_output(
    output: &Place,
    inputs: &[&Place],
    stage: Stage,
    overwrite: bool,
    layout: &Layout,
) -> Result<(), Error> {
    check_named(output, inputs, (stage, overwrite), layout, Named::ByStage).await
}

/// Refuses (73) a local output that no write can reach: the output, or a folder on its path,
/// a symlink that leads nowhere (its target missing, or links in a loop: where it would lead
/// cannot be checked either), or a folder on its path that is a file. A job asks it of every
/// output before any stage runs; each commit's checks ask it again.
pub fn check_path(output: &Place) -> Result<(), Error> {
    let Some(dir) = output.local_dir() else { return Ok(()) };
    let mut at = std::path::PathBuf::new();
    for part in dir.components() {
        at.push(part);
        let Ok(meta) = at.symlink_metadata() else {
            // Missing from here on: the run makes it.
            return Ok(());
        };
        let nowhere = meta.is_symlink() && !at.is_dir();
        if nowhere && at == dir {
            return Err(Error::Output(format!(
                "{}: the output is a symlink that leads to no directory (its target is missing, or the links \
                 loop); create the directory it leads to, or name a directory",
                output.shown()
            )));
        }
        if nowhere {
            return Err(Error::Output(format!(
                "{}: the folder {} on its path is a symlink that leads to no directory (its target is missing, or \
                 the links loop); create the directory it leads to, or name another output",
                output.shown(),
                at.display()
            )));
        }
        if !meta.is_symlink() && !meta.is_dir() && at != dir {
            return Err(Error::Output(format!(
                "{}: {} on its path is a file, not a directory; name another output",
                output.shown(),
                at.display()
            )));
        }
    }
    Ok(())
}

async fn check_named(
    output: &Place,
    inputs: &[&Place],
    (stage, overwrite): (Stage, bool),
    layout: &Layout,
    named: Named,
) -> Result<(), Error> {
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
    check_path(output)?;
    settle(output, layout).await?;
    let entries = entries(output).await?;
    // A run writes into its layout's directories (a model's `checkpoints/`) and `_temporary/`:
    // one that is a symlink or a file would lead its writes and its cleanup elsewhere, so not
    // even `overwrite` takes it.
    let directory = |e: &&Entry| layout.dirs.contains(&e.name.as_str()) || e.name == TEMPORARY;
    if let Some(e) = entries.iter().filter(directory).find(|e| e.kind != Kind::Dir) {
        return Err(Error::Output(format!(
            "{}/{} is not a directory (a symlink or a file); this project writes its own directory there: remove \
             it or choose another output",
            output.shown(),
            e.name
        )));
    }
    // A folder where this project writes a file (the markers, a layout's fixed files) is not
    // this project's, and replacing the version would remove what it holds: not even
    // `overwrite` takes it.
    let file = |e: &&Entry| {
        [MANIFEST, schemas::SUCCESS_MARKER].contains(&e.name.as_str()) || layout.files.contains(&e.name.as_str())
    };
    if let Some(e) = entries.iter().filter(file).find(|e| e.kind == Kind::Dir) {
        return Err(Error::Output(format!(
            "{}/{} is a directory, where this project writes a file; what it holds was not written by this project, \
             so not even overwrite replaces it: move it away or choose another output",
            output.shown(),
            e.name
        )));
    }
    // A folder that holds a table: a file of another run's naming there is read with it.
    for folder in layout.tables.iter().filter(|f| entries.iter().any(|e| e.name == **f)) {
        let inside = crate::entries::entries(&output.child(folder)).await?;
        if let Some(e) = inside.iter().find(|e| e.kind != Kind::File || run_of(&e.name).is_none()) {
            return Err(Error::Output(format!(
                "{}/{folder}/{} is not a part this project wrote: readers open {folder}/ as a table, so not even \
                 overwrite takes it; remove it or choose another output",
                output.shown(),
                e.name
            )));
        }
    }
    let foreign: Vec<&str> = entries.iter().filter(|e| !e.ours(layout)).map(|e| e.name.as_str()).collect();
    let table = *layout == Layout::TABLE;
    if !foreign.is_empty() && !overwrite {
        let shown: Vec<&str> = foreign.iter().take(5).copied().collect();
        return Err(Error::Output(format!(
            "{} holds files this project did not write ({}{}); choose a new or empty directory, or {}",
            output.shown(),
            shown.join(", "),
            if foreign.len() > shown.len() { ", ..." } else { "" },
            if table {
                "move them away (a table's directory keeps none)"
            } else {
                "set overwrite = true (they are then kept as they are)"
            }
        )));
    }
    crate::guard::guard(output, stage, overwrite, named).await?;
    if table { keeps_none(output, &foreign, &entries).await } else { Ok(()) }
}

/// A table's directory is read whole: its readers would read, or fail on, anything beside the
/// table's own files, so not even `overwrite` commits beside `foreign` (the output's `entries`
/// this project did not write). `_temporary/` holds only runs' folders (`**/*.parquet` would
/// read anything else there).
async fn keeps_none(output: &Place, foreign: &[&str], entries: &[Entry]) -> Result<(), Error> {
    let mut stray: Vec<String> = foreign.iter().map(|n| n.to_string()).collect();
    if entries.iter().any(|e| e.name == TEMPORARY && e.kind == Kind::Dir) {
        let inside = crate::entries::entries(&output.child(TEMPORARY)).await?;
        let not_a_run = inside.iter().filter(|e| e.kind != Kind::Dir || !is_run_id(&e.name));
        stray.extend(not_a_run.map(|e| format!("{TEMPORARY}/{}", e.name)));
    }
    let Some(name) = stray.first() else { return Ok(()) };
    let others = match stray.len() - 1 {
        0 => String::new(),
        n => format!(" (nor {n} other entries there)"),
    };
    Err(Error::Output(format!(
        "{}/{name} was not written by this project{others}, and a table's readers read its directory whole (polars \
         fails on any other file, pandas and pyarrow read every name not starting with _ or ., DuckDB's \
         **/*.parquet every Parquet file in any folder): not even overwrite commits beside it; move it away or \
         choose a new or empty directory",
        output.shown()
    )))
}

/// One output of a run, ready to commit: its manifest, every file the run staged for it (its
/// parts; a model's files, some of which the manifest does not list) and the run's lease.
pub struct Pending<'a> {
    pub output: &'a Place,
    pub manifest: Manifest,
    pub files: Vec<StagedFile>,
    pub layout: &'a Layout,
    pub lease: Lease,
}

/// Step 3 (see the module doc), for the outputs of a run in the order given:
///
/// 1. every output's marker is checked before anything is published;
/// 2. one output after another, its files are published and its manifest written; when one
///    cannot be (a store's failure, another run that committed there first), its own published
///    files are taken back, and so are the outputs committed before it: the manifest each
///    replaced is put back (while the one there is still this run's), then its files removed.
///    After a failure no output holds this run's manifest;
/// 3. the run's temporary directories go, whatever happened (and, when it could not commit,
///    the run-named files it wrote beside them: a model's metrics); the parts of the replaced
///    manifests and the files of ended runs are removed only once every manifest is in place,
///    so a taken-back output still has the parts its restored manifest lists.
///
/// The outputs are not committed atomically: a reader may see the first one committed for the
/// moment before a later one fails and it is taken back.
pub async fn commit_all(pending: Vec<Pending<'_>>, overwrite: bool) -> Result<(), Error> {
    let mut leases = Vec::new();
    let mut outputs = Vec::new();
    for p in pending {
        leases.push(p.lease);
        outputs.push(Output { place: p.output, manifest: p.manifest, files: p.files, layout: p.layout });
    }
    // A stop (a signal) waits for the switch to end, and the markers to go after it; none
    // starts after the stop (crate::stop).
    let switch = Switch::enter();
    let committed = match &switch {
        Ok(switch) => {
            let committed = publish_all(&outputs, &leases, overwrite).await;
            if committed.is_ok() {
                for output in &outputs {
                    switch.committed(output.place.shown(), &output.manifest.run);
                }
            }
            committed
        }
        Err(stopping) => Err(Error::Retry(stopping.to_string())),
    };
    if committed.is_err() {
        for output in &outputs {
            crate::cleanup::remove_own(output.place, &output.manifest.run, output.layout).await;
        }
    }
    // The markers go whatever happened: a run that lost a race, or failed to write, ends here
    // (and its process may exit before a marker removal spawned on drop runs).
    for lease in leases {
        lease.release(committed.is_err()).await;
    }
    drop(switch);
    for (output, replaced) in outputs.iter().zip(committed?) {
        let removing = std::time::Instant::now();
        let removed = remove_replaced(output, &replaced).await;
        tracing::info!(
            "{}: run {} committed {} parts; the switch took {:.3} s; removing the {removed} parts of the run it \
             replaced took {:.3} s",
            output.place.shown(),
            output.manifest.run,
            output.files.len(),
            replaced.took.as_secs_f64(),
            removing.elapsed().as_secs_f64()
        );
        cleanup(output.place, &output.manifest, output.layout).await;
    }
    Ok(())
}

/// One output of [`commit_all`].
struct Output<'a> {
    place: &'a Place,
    manifest: Manifest,
    files: Vec<StagedFile>,
    layout: &'a Layout,
}

/// What an output held before this run committed it.
struct Replaced {
    /// How long the switch took: from the first file published (on a local disk, the
    /// version's first link) to the manifest in place (the exchange).
    took: std::time::Duration,
    /// Its manifest, whose parts go once every output has committed.
    manifest: Option<Manifest>,
    /// The files it held, kept where a later output may fail and this one be taken back.
    bytes: Option<Held>,
    /// On a local disk, where the replaced version lies after the exchange ([`crate::switch`]).
    version: Option<std::path::PathBuf>,
}

/// The bytes of `_manifest.parquet` and of `_SUCCESS` an output held (`None`: no such file).
struct Held {
    manifest: Option<Vec<u8>>,
    success: Option<Vec<u8>>,
}

/// Steps 1 and 2 of [`commit_all`]: what each output held before.
async fn publish_all(outputs: &[Output<'_>], leases: &[Lease], overwrite: bool) -> Result<Vec<Replaced>, Error> {
    for (output, lease) in outputs.iter().zip(leases) {
        // On a local disk another run's switch moves `_temporary/` for a moment, under the
        // parent's lock: the marker is looked for under it.
        let out = output.place.local_dir().map(|d| switch::real(&d));
        let _lock = match &out {
            Some(out) => ParentLock::take(out)?,
            None => None,
        };
        if !lease.held().await? {
            return Err(Error::Retry(format!(
                "{}: this run's marker ({}) is gone: another run judged it dead and removed its files; run it again",
                output.place.shown(),
                lease.place().shown()
            )));
        }
    }
    let mut done: Vec<(&Output, Replaced)> = Vec::new();
    for (i, output) in outputs.iter().enumerate() {
        // Only an output that a later one may fail after needs what it replaced.
        let keep = overwrite && i + 1 < outputs.len();
        match commit_one(output, overwrite, keep).await {
            Ok(replaced) => done.push((output, replaced)),
            Err(e) => {
                for (output, replaced) in done.into_iter().rev() {
                    take_back(output, replaced).await;
                }
                return Err(e);
            }
        }
    }
    Ok(done.into_iter().map(|(_, replaced)| replaced).collect())
}

/// One output: its files published, then its manifest and `_SUCCESS`. On an error, what it
/// published is taken back.
async fn commit_one(output: &Output<'_>, overwrite: bool, keep: bool) -> Result<Replaced, Error> {
    if let Some(out) = output.place.local_dir().map(|d| switch::real(&d))
        && let Some(replaced) = commit_local(output, &out, overwrite).await?
    {
        return Ok(replaced);
    }
    let place = output.place;
    let (manifest_place, success) = (place.child(MANIFEST), place.child(schemas::SUCCESS_MARKER));
    let previous = previous_manifest(place, overwrite).await?;
    same_kind(place, previous.as_ref(), output.manifest.stage)?;
    crate::guard::apart(place, output.manifest.stage).await?;
    if !overwrite && previous.is_some() {
        return Err(lost_race(place));
    }
    check_carried(output, previous.as_ref())?;
    let bytes = match keep {
        true => Some(Held { manifest: manifest_place.get().await?, success: success.get().await? }),
        false => None,
    };
    let started = std::time::Instant::now();
    publish(place, &output.manifest.run, &output.files).await?;
    let written = async {
        let schema = table_schema(place, &output.manifest, output.layout).await?;
        let encoded = output.manifest.to_parquet(schema.as_ref().map(|(d, kv)| (d, kv.clone())))?;
        let run = &output.manifest.run;
        match put_whole(place, run, MANIFEST, encoded, !overwrite).await {
            Err(e) if already_exists(&e) => return Err(lost_race(place)),
            written => written?,
        }
        put_whole(place, run, schemas::SUCCESS_MARKER, Vec::new(), false).await
    };
    match written.await {
        Ok(()) => Ok(Replaced { took: started.elapsed(), manifest: previous, bytes, version: None }),
        Err(e) => {
            let replaced = Replaced { took: started.elapsed(), manifest: previous, bytes, version: None };
            take_back(output, replaced).await;
            Err(e)
        }
    }
}

/// A run that carries parts of the version it replaces into its own (a refresh's untouched
/// parts: listed by its manifest, staged by no one) commits only over that version: the parts
/// are there, and stay, only while its manifest lists them. Another run that committed since
/// the refresh read the output makes the refresh retryable (75), never a manifest that lists
/// a part that is gone.
fn check_carried(output: &Output<'_>, previous: Option<&Manifest>) -> Result<(), Error> {
    let staged: std::collections::HashSet<&str> = output.files.iter().map(|f| f.name.as_str()).collect();
    let listed_before = |name: &str| previous.is_some_and(|m| m.parts.iter().any(|p| p.name == name));
    let mut carried = output.manifest.parts.iter().filter(|p| !staged.contains(p.name.as_str()));
    match carried.find(|p| !listed_before(&p.name)) {
        None => Ok(()),
        Some(part) => Err(Error::Retry(format!(
            "{}: this run carries {} over from the version it read, which another run has replaced since (the \
             manifest there is run {}'s); run it again",
            output.place.shown(),
            part.name,
            previous.map_or("none", |m| m.run.as_str())
        ))),
    }
}

/// The manifest an output holds before this run commits there.
async fn previous_manifest(place: &Place, overwrite: bool) -> Result<Option<Manifest>, Error> {
    match read_manifest(place).await {
        // What an overwrite replaces need not read: its parts are left to the cleanup of ended runs.
        Err(e) if overwrite && e.cause() == schemas::Cause::BadData => {
            tracing::warn!("{}: replacing an output whose manifest does not read: {e}", place.shown());
            Ok(None)
        }
        read => read,
    }
}

/// [`commit_one`] on a local disk: the run's version built beside the output and exchanged
/// with it in one step, under the parent's lock ([`crate::switch`]).
/// `None` where the parent directory cannot be locked or written (a read-only parent around a
/// writable output): the commit then publishes in place, as on a store, saying so.
async fn commit_local(output: &Output<'_>, out: &std::path::Path, overwrite: bool) -> Result<Option<Replaced>, Error> {
    let (place, run, layout) = (output.place, &output.manifest.run, output.layout);
    let next = switch::sibling(out, run)?;
    let Some(_lock) = ParentLock::take(out)?.filter(|_| switch::can_build(out, &next)) else {
        tracing::warn!(
            "{}: its version cannot be built beside it (a parent that cannot be locked or written, a mount point, \
             a name too long), so the commit publishes in place and a directory reader may see both runs' parts \
             for milliseconds",
            place.shown()
        );
        return Ok(None);
    };
    let checked = async {
        settle_locked(place, out, layout).await?;
        let previous = previous_manifest(place, overwrite).await?;
        same_kind(place, previous.as_ref(), output.manifest.stage)?;
        crate::guard::apart(place, output.manifest.stage).await?;
        if !overwrite && previous.is_some() {
            return Err(lost_race(place));
        }
        check_carried(output, previous.as_ref())?;
        Ok(previous)
    };
    let previous = match checked.await {
        Ok(previous) => previous,
        Err(e) => {
            switch::remove_version(&next);
            return Err(e);
        }
    };
    let started = std::time::Instant::now();
    switch::build(out, &next, &output.files, (previous.as_ref(), &output.manifest), layout)?;
    match switch_in(output, out, &next) {
        Ok(()) => {
            switch::pending(&next);
            Ok(Some(Replaced { took: started.elapsed(), manifest: previous, bytes: None, version: Some(next) }))
        }
        Err(e) => {
            if let Err(back) = switch::move_folders(&next, out, layout) {
                tracing::error!("{}: cannot move folders back from {}: {back}", place.shown(), next.display());
            }
            switch::remove_version(&next);
            Err(e)
        }
    }
}

/// [`commit_local`]'s second half: the manifest and `_SUCCESS` written into the version
/// `next`, the folders moved in, and the exchange.
fn switch_in(output: &Output<'_>, out: &std::path::Path, next: &std::path::Path) -> Result<(), Error> {
    let schema = local_schema(next, &output.manifest, output.layout)?;
    let encoded = output.manifest.to_parquet(schema.as_ref().map(|(d, kv)| (d, kv.clone())))?;
    std::fs::write(next.join(MANIFEST), encoded).map_err(|e| switch::written(next, e))?;
    std::fs::write(next.join(schemas::SUCCESS_MARKER), b"").map_err(|e| switch::written(next, e))?;
    switch::move_folders(out, next, output.layout).map_err(|e| switch::written(out, e))?;
    switch::pause_for_tests();
    switch::exchange(next, out).map_err(|e| switch::written(out, e))
}

/// The schema of a table's parts in the local version `next` (see [`table_schema`]).
fn local_schema(
    next: &std::path::Path,
    manifest: &Manifest,
    layout: &Layout,
) -> Result<Option<(parquet::schema::types::SchemaDescriptor, Vec<KeyValue>)>, Error> {
    use parquet::file::reader::FileReader;
    let Some(first) = manifest.parts.first().filter(|_| layout.files.is_empty()) else { return Ok(None) };
    let path = next.join(&first.name);
    let shown = path.display().to_string();
    let file = std::fs::File::open(&path).map_err(|source| Error::Read { file: shown.clone(), source })?;
    let reader = parquet::file::reader::SerializedFileReader::new(file)
        .map_err(|source| Error::Parquet { file: shown, source })?;
    let meta = reader.metadata().file_metadata();
    Ok(Some((meta.schema_descr().clone(), meta.key_value_metadata().cloned().unwrap_or_default())))
}

/// Settles what killed switches left beside the local output `out` ([`switch::recover`]); the
/// caller holds the parent's lock. A sibling of a run whose marker says it is alive stays.
async fn settle_locked(place: &Place, out: &std::path::Path, layout: &Layout) -> Result<(), Error> {
    let mut alive = std::collections::HashSet::new();
    for run in switch::sibling_runs(out)? {
        if crate::lease::read_run(place, &run).await.ok().flatten().is_some_and(|m| m.alive()) {
            alive.insert(run);
        }
    }
    for done in switch::recover(out, layout, &|run| alive.contains(run))? {
        tracing::warn!("{}: {done}", place.shown());
    }
    Ok(())
}

/// Settles what killed runs left in and beside a local output: under the parent's lock, what
/// a killed switch left beside it ([`crate::switch`]), then the temporary directories of runs
/// that have ended (polars reads every file below a directory). The commands that write an
/// output and `inspect` call it first. Elsewhere nothing: a store's next commit cleans up.
pub async fn settle(place: &Place, layout: &Layout) -> Result<(), Error> {
    let Some(out) = place.local_dir().map(|d| switch::real(&d)) else { return Ok(()) };
    if out.parent().is_some_and(|p| p.is_dir())
        && switch::has_siblings(&out)
        && let Some(_lock) = ParentLock::take(&out)?
    {
        settle_locked(place, &out, layout).await?;
    }
    if let Err(e) = crate::cleanup::remove_ended_runs(place, "").await {
        tracing::warn!("{}: cannot remove the temporary files of ended runs: {e}", place.shown());
    }
    Ok(())
}

/// An output that another kind's run committed while this run wrote (the guard passed at its
/// start): never replaced, as [`crate::guard`] says.
fn same_kind(output: &Place, previous: Option<&Manifest>, stage: Stage) -> Result<(), Error> {
    match previous {
        Some(found) if found.stage != stage => Err(Error::Output(format!(
            "{} holds {} (run {}), committed while this run wrote, and {} asked to write {}; an output of another \
             kind is never replaced, with or without overwrite: choose another output directory",
            output.shown(),
            crate::guard::kind(found.stage),
            found.run,
            stage.name(),
            crate::guard::kind(stage)
        ))),
        _ => Ok(()),
    }
}

fn lost_race(output: &Place) -> Error {
    Error::Output(format!(
        "{}: another run committed this output first; this run's parts are taken back",
        output.shown()
    ))
}

/// The schema of a table's parts, for its manifest file: the first part's Parquet schema and
/// the footer's key-value metadata (the Arrow schema among it); `None` for a model's files or a
/// table of no parts.
async fn table_schema(
    output: &Place,
    manifest: &Manifest,
    layout: &Layout,
) -> Result<Option<(parquet::schema::types::SchemaDescriptor, Vec<KeyValue>)>, Error> {
    let Some(first) = manifest.parts.first().filter(|_| layout.files.is_empty()) else { return Ok(None) };
    let part = output.child(&first.name);
    let meta = ObjectMeta {
        location: part.path.clone(),
        last_modified: chrono::DateTime::UNIX_EPOCH,
        size: first.bytes,
        e_tag: None,
        version: None,
    };
    let footer = crate::fetch::footer(output, &meta, None)
        .await
        .map_err(|source| Error::Parquet { file: part.shown(), source })?;
    let file = footer.file_metadata();
    let metadata = file.key_value_metadata().cloned().unwrap_or_default();
    Ok(Some((file.schema_descr().clone(), metadata)))
}

/// Takes this run's commit of `output` back: the manifest it replaced put back (or the new one
/// removed) while the manifest there is still this run's, then its published files removed.
/// Best effort: a failure is logged.
async fn take_back(output: &Output<'_>, replaced: Replaced) {
    let place = output.place;
    if let (Some(version), Some(out)) = (&replaced.version, place.local_dir().map(|d| switch::real(&d))) {
        take_back_local(output, &out, version).await;
        return;
    }
    let ours = matches!(read_manifest(place).await, Ok(Some(m)) if m.run == output.manifest.run);
    if ours {
        let held = replaced.bytes.unwrap_or(Held { manifest: None, success: None });
        for (name, bytes) in [(MANIFEST, held.manifest), (schemas::SUCCESS_MARKER, held.success)] {
            let target = place.child(name);
            let undone = match bytes {
                Some(bytes) => put_whole(place, &output.manifest.run, name, bytes, false).await,
                None => target
                    .store
                    .delete(&target.path)
                    .await
                    .map_err(|source| target.store_error("cannot remove", source)),
            };
            if let Err(e) = undone {
                tracing::error!("{}: cannot take this run's commit back: {e}", target.shown());
            }
        }
        tracing::warn!("{}: this run's commit was taken back", place.shown());
    }
    withdraw(place, &output.files).await;
}

/// [`take_back`] on a local disk: the replaced version exchanged back in (while the output is
/// still this run's), then this run's version removed.
async fn take_back_local(output: &Output<'_>, out: &std::path::Path, version: &std::path::Path) {
    let place = output.place;
    let undone = async {
        let _lock = ParentLock::take(out)?;
        // A version built beside the output means the parent was locked and written before.
        if matches!(read_manifest(place).await, Ok(Some(m)) if m.run == output.manifest.run) {
            let io = |source| Error::List { dir: place.shown(), source };
            switch::move_folders(out, version, output.layout).map_err(io)?;
            switch::exchange(version, out).map_err(io)?;
            tracing::warn!("{}: this run's commit was taken back", place.shown());
        }
        Ok::<(), Error>(())
    };
    if let Err(e) = undone.await {
        tracing::error!("{}: cannot take this run's commit back: {e}", place.shown());
    }
    switch::remove_version(version);
}

/// The switch's second half: the replaced version removed. On a local disk it left the output
/// whole at the exchange, and its directory goes; elsewhere the parts of the manifest this
/// run's replaced are deleted (while the manifest there is still this run's: otherwise a later
/// commit removes them). Returns how many parts went.
async fn remove_replaced(output: &Output<'_>, replaced: &Replaced) -> usize {
    if let Some(version) = &replaced.version {
        switch::remove_version(version);
        // Parts this run carried over stay, linked into its version.
        let carried = |name: &str| output.manifest.parts.iter().any(|p| p.name == name);
        return replaced.manifest.as_ref().map_or(0, |m| m.parts.iter().filter(|p| !carried(&p.name)).count());
    }
    let Some(previous) = &replaced.manifest else { return 0 };
    let place = output.place;
    if !matches!(read_manifest(place).await, Ok(Some(m)) if m.run == output.manifest.run) {
        return 0;
    }
    let listed: std::collections::HashSet<&str> = output.manifest.parts.iter().map(|p| p.name.as_str()).collect();
    // Only names the replaced run gave (or an earlier version's fixed names of a model's
    // files): a manifest that lists anything else is not followed into removing it.
    let its_own = |name: &str| run_of(name) == Some(previous.run.as_str()) || output.layout.files.contains(&name);
    let replaced = previous.parts.iter().filter(|p| its_own(&p.name) && !listed.contains(p.name.as_str()));
    let gone = replaced.map(|p| async move {
        let part = place.child(&p.name);
        match place.store.delete(&part.path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!("cannot remove {}: {e}", part.shown()),
        }
    });
    futures::stream::iter(gone).buffer_unordered(16).collect::<Vec<()>>().await.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Io;
    use crate::names::REPORT;
    use schemas::StorageConfig;

    fn manifest(run: &str) -> Manifest {
        Manifest::new(run, Stage::Infer, Vec::new(), serde_json::Value::Null)
    }

    /// Commits run `run` to `outputs` together, with a lease taken on each.
    fn commit_both(io: &Io, outputs: &[&Place], run: &str, overwrite: bool) -> Result<(), Error> {
        commit_broken(io, outputs, run, overwrite, None)
    }

    /// [`commit_both`], the output `broken` with a manifest listing a part no one wrote: its
    /// commit cannot read the part's schema, and fails.
    fn commit_broken(
        io: &Io,
        outputs: &[&Place],
        run: &str,
        overwrite: bool,
        broken: Option<&Place>,
    ) -> Result<(), Error> {
        io.block_on(async {
            let mut pending = Vec::new();
            for &output in outputs {
                let lease = Lease::take(output, run, "infer").await?;
                let mut manifest = manifest(run);
                if broken.is_some_and(|b| b.shown() == output.shown()) {
                    manifest.parts.push(PartEntry::of(&format!("part-{run}-00000.parquet"), 1, b"PAR1"));
                }
                pending.push(Pending { output, manifest, files: Vec::new(), layout: &Layout::TABLE, lease });
            }
            commit_all(pending, overwrite).await
        })
    }

    fn success(dir: &std::path::Path) -> Option<Vec<u8>> {
        std::fs::read(dir.join(MANIFEST)).ok()
    }

    /// Runs with a temporary directory in `dir`.
    fn markers(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir.join(TEMPORARY)).map_or(0, |d| d.count())
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

        // Another run committed `b` first: this run takes back what it committed to `a`.
        std::fs::create_dir_all(&b).unwrap();
        let other = manifest(&new_run_id()).to_parquet(None).unwrap();
        std::fs::write(b.join(MANIFEST), &other).unwrap();
        let error = commit_both(&io, &[&pa, &pb], &new_run_id(), false).unwrap_err();
        assert!(matches!(error, Error::Output(_)), "{error}");
        assert_eq!(success(&a), None, "the new manifest of a is removed");
        assert!(!a.join(schemas::SUCCESS_MARKER).exists());
        assert_eq!(success(&b), Some(other));
        assert_eq!((markers(&a), markers(&b)), (0, 0));

        // Under overwrite, `a` had an earlier manifest, and `b` cannot commit at all.
        let earlier = manifest(&new_run_id()).to_parquet(None).unwrap();
        std::fs::write(a.join(MANIFEST), &earlier).unwrap();
        std::fs::remove_file(b.join(MANIFEST)).unwrap();
        assert!(commit_broken(&io, &[&pa, &pb], &new_run_id(), true, Some(&pb)).is_err());
        assert_eq!(success(&a), Some(earlier), "the replaced manifest of a is put back");
        assert!(!a.join(schemas::SUCCESS_MARKER).exists(), "and the _SUCCESS it replaced: none");
        assert_eq!((markers(&a), markers(&b)), (0, 0));

        // Both commit when both can.
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

    /// A run whose manifest lists a part of the version it replaces (a refresh's untouched
    /// part) keeps it: linked into its version, never removed as an ended run's file. Over a
    /// version that no longer lists it (another run committed since), the commit is refused as
    /// retryable and the output stays as it is.
    #[test]
    fn a_carried_part_stays_and_is_carried_only_over_the_version_that_lists_it() {
        use arrow_array::{Int64Array, RecordBatch};
        let io = Io::new(&StorageConfig::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("tables-commit-carried-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let place = Place::parse_output(out.to_str().unwrap(), &StorageConfig::default()).unwrap();
        // Run a's version: one real part and its manifest.
        let a = new_run_id();
        let name = format!("part-{a}-00000-00000.parquet");
        let batch =
            RecordBatch::try_from_iter([("x", std::sync::Arc::new(Int64Array::from(vec![1, 2])) as _)]).unwrap();
        let mut bytes = Vec::new();
        let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        std::fs::write(out.join(&name), &bytes).unwrap();
        let entry = PartEntry::of(&name, 2, &bytes);
        let listed = Manifest::new(&a, Stage::Infer, vec![entry.clone()], serde_json::Value::Null);
        std::fs::write(out.join(MANIFEST), listed.to_parquet(None).unwrap()).unwrap();
        let commit = |run: &str, parts: Vec<PartEntry>| {
            io.block_on(async {
                let lease = Lease::take(&place, run, "infer").await?;
                let manifest = Manifest::new(run, Stage::Infer, parts, serde_json::Value::Null);
                let pending = Pending { output: &place, manifest, files: Vec::new(), layout: &Layout::TABLE, lease };
                commit_all(vec![pending], true).await
            })
        };

        let b = new_run_id();
        commit(&b, vec![entry.clone()]).unwrap();
        assert_eq!(std::fs::read(out.join(&name)).unwrap(), bytes, "the carried part is there, whole");
        let now = io.block_on(read_manifest(&place)).unwrap().unwrap();
        assert_eq!((now.run.as_str(), now.parts.len()), (b.as_str(), 1));

        // Run c replaces b's version without the part; a refresh that read b's comes too late.
        commit(&new_run_id(), Vec::new()).unwrap();
        assert!(!out.join(&name).exists(), "the part goes with the last version that listed it");
        let c = io.block_on(read_manifest(&place)).unwrap().unwrap().run;
        let error = commit(&new_run_id(), vec![entry]).unwrap_err();
        assert!(matches!(&error, Error::Retry(m) if m.contains(&name)), "{error}");
        assert_eq!(io.block_on(read_manifest(&place)).unwrap().unwrap().run, c, "the output is as it was");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
