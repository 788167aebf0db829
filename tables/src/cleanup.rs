//! After a commit: what runs that have ended left in the output goes. Why this never removes a
//! file a manifest lists, even with runs racing under `overwrite`, is argued in
//! [`crate::commit`]'s module doc.

use std::collections::BTreeMap;

use object_store::ObjectStoreExt;

use crate::entries::{Entry, Kind, entries, remove};
use crate::error::Error;
use crate::lease;
use crate::manifest::{Manifest, read_manifest};
use crate::names::{Layout, Name, REPORT, TEMPORARY, is_run_id, run_of};
use crate::place::Place;
use crate::staging::remove_run_dir;

/// Removes the run-named files (and markers) of runs that have ended, directly under `output`
/// and in `layout`'s directories, after `manifest`'s run committed, and the temporary
/// directories of runs that have ended; see the module doc for why this never removes a file a
/// manifest lists. Files this project did not write, symlinks and other directories are never
/// touched. A failure here only leaves files that readers ignore, so it is logged, not fatal.
pub async fn cleanup(output: &Place, manifest: &Manifest, layout: &Layout) {
    if let Err(e) = try_cleanup(output, manifest, layout).await {
        tracing::warn!("{}: cannot remove the files of earlier runs: {e}", output.shown());
    }
    if let Err(e) = remove_ended_runs(output, &manifest.run).await {
        tracing::warn!("{}: cannot remove the temporary files of earlier runs: {e}", output.shown());
    }
    remove_stale_report(output).await;
}

/// A run that could not commit takes away the run-named files it wrote directly under `output`
/// (a model's metrics while it trained), unless the manifest there is its own; its checkpoints,
/// in `layout`'s directories, stay for a resume. Best effort: what stays goes at the next
/// commit's cleanup.
pub async fn remove_own(output: &Place, run: &str, layout: &Layout) {
    let removed = async {
        if read_manifest(output).await.ok().flatten().is_some_and(|m| m.run == run) {
            return Ok(());
        }
        let own: Vec<Entry> = entries(output)
            .await?
            .into_iter()
            .filter(|e| e.kind == Kind::File && matches!(layout.classify(&e.name), Name::Run(r) if r == run))
            .collect();
        remove(output, &own).await;
        Ok::<(), Error>(())
    };
    if let Err(e) = removed.await {
        tracing::warn!("{}: cannot remove this run's files: {e}", output.shown());
    }
}

/// The temporary directories of runs other than `run` that have ended (their marker gone, or
/// saying they are dead), with the uploads they record aborted.
pub(crate) async fn remove_ended_runs(output: &Place, run: &str) -> Result<(), Error> {
    for entry in entries(&output.child(TEMPORARY)).await? {
        if entry.name == run || !is_run_id(&entry.name) || entry.kind == Kind::Other {
            continue;
        }
        match lease::read(&lease::marker_place(output, &entry.name)).await? {
            Some(marker) if marker.alive() => {}
            // A run that began moments ago may be writing its marker yet.
            None if lease::started_recently(&entry.name) => {}
            _ => remove_run_dir(output, &entry.name, true).await,
        }
    }
    Ok(())
}

/// An earlier run's report describes an output that is no longer there: it goes (only a regular
/// file that is one of this project's reports); a model's job writes its own when it ends.
async fn remove_stale_report(output: &Place) {
    let report = output.child(REPORT);
    if crate::report_page::is_report(&report).await.unwrap_or(false)
        && let Err(e) = report.store.delete(&report.path).await
    {
        tracing::debug!("{}: cannot remove an earlier run's report: {e}", report.shown());
    }
}

/// An output's files by who wrote them (see [`found`]).
struct Found {
    /// Files of other runs, by run (a run with a legacy marker alone included), but those
    /// this run's manifest carries over.
    by_run: BTreeMap<String, Vec<Entry>>,
    /// Other runs' legacy markers at the top.
    markers: Vec<(String, Entry)>,
    /// This run's own files outside the manifest (a model's metrics while it trained).
    own: Vec<Entry>,
    /// This run's files its manifest lists, and its files in the layout's folders.
    mine: Vec<Entry>,
}

/// Sorts the files at the top of `output` and in the layout's folders (checkpoints) by run.
async fn found(output: &Place, manifest: &Manifest, layout: &Layout) -> Result<Found, Error> {
    let listed: std::collections::HashSet<&str> = manifest.parts.iter().map(|p| p.name.as_str()).collect();
    let mut found = Found { by_run: BTreeMap::new(), markers: Vec::new(), own: Vec::new(), mine: Vec::new() };
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
                        found.markers.push((run.to_owned(), entry));
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
                match top && !listed.contains(entry.name.as_str()) {
                    true => found.own.push(entry),
                    false => found.mine.push(entry),
                }
            } else if !(top && listed.contains(entry.name.as_str())) {
                // A part an earlier run wrote that this run's manifest carries over (a
                // refresh's untouched part) is this run's now.
                found.by_run.entry(run).or_default().push(entry);
            }
        }
    }
    Ok(found)
}

async fn try_cleanup(output: &Place, manifest: &Manifest, layout: &Layout) -> Result<(), Error> {
    let Found { mut by_run, markers, own, mine } = found(output, manifest, layout).await?;
    for (run, _) in &markers {
        by_run.entry(run.clone()).or_default();
    }
    remove(output, &own).await;
    let mut ended = Vec::new();
    for (run, files) in by_run {
        match lease::read_run(output, &run).await? {
            Some(marker) if marker.alive() => {}
            Some(_) => {
                // A dead run: its marker first, so that the run fails if it ever commits.
                let legacy = markers.iter().filter(|(r, _)| *r == run).map(|(_, e)| e.clone());
                remove(output, &legacy.collect::<Vec<_>>()).await;
                remove_run_dir(output, &run, true).await;
                remove(output, &files).await;
            }
            None => ended.extend(files),
        }
    }
    match read_manifest(output).await? {
        Some(now) if now.run == manifest.run => remove(output, &ended).await,
        // A later run replaced this one's commit and has ended, so that no commit can take its
        // own back: this run's parts are listed by no manifest any more.
        Some(now) if lease::read_run(output, &now.run).await?.is_none_or(|m| !m.alive()) => {
            remove(output, &mine).await;
        }
        _ => {}
    }
    Ok(())
}
