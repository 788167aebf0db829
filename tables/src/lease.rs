//! A run's marker, `_temporary/<run>/run.json` in its output: who is writing there (host,
//! process), kept fresh by a heartbeat while the run lasts and removed, with the rest of the
//! run's temporary directory, when it ends. Cleanup (see
//! [`crate::commit`]) deletes another run's files only when that run has ended: its marker is
//! gone, or the marker says the run is dead:
//!
//! - on the same host (same boot), its process no longer exists (or is another process with
//!   the same pid: its start time differs): a killed run's files go at the next commit;
//! - elsewhere, its heartbeat is older than [`STALE_AFTER`].
//!
//! A run checks that its marker is still in place just before it commits, so a run that was
//! judged dead (stopped for longer than [`STALE_AFTER`]) and cleaned up fails instead of
//! committing a manifest of deleted parts.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::names::{LEGACY_MARKER_PREFIX, MARKER, run_dir};
use crate::place::Place;

/// How often a running job refreshes its marker.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// A marker from another host whose heartbeat is older than this belongs to a dead run.
pub const STALE_AFTER: Duration = Duration::from_secs(60);

/// The marker's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub run: String,
    pub stage: String,
    /// The host's name and boot id: a pid means something only on the same boot of a host.
    pub host: String,
    pub pid: u32,
    /// The process's start, in clock ticks after boot (tells a reused pid apart).
    pub pid_start: Option<u64>,
    /// Milliseconds since the epoch of the last heartbeat.
    pub heartbeat_ms: u64,
}

impl Marker {
    fn now(run: &str, stage: &str) -> Marker {
        let pid = std::process::id();
        Marker {
            run: run.into(),
            stage: stage.into(),
            host: host(),
            pid,
            pid_start: process_start(pid),
            heartbeat_ms: now_ms(),
        }
    }

    /// Whether the run that wrote this marker may still be running.
    pub fn alive(&self) -> bool {
        if self.host == host() {
            return process_start(self.pid).is_some_and(|start| Some(start) == self.pid_start);
        }
        now_ms().saturating_sub(self.heartbeat_ms) < STALE_AFTER.as_millis() as u64
    }
}

/// Where run `run`'s marker lies in `output`.
pub fn marker_place(output: &Place, run: &str) -> Place {
    output.child(&format!("{}/{MARKER}", run_dir(run)))
}

/// A run's hold on its output: the marker, refreshed every [`HEARTBEAT`] until released.
pub struct Lease {
    output: Place,
    place: Place,
    run: String,
    heartbeat: tokio::task::JoinHandle<()>,
    runtime: tokio::runtime::Handle,
    released: bool,
}

impl Lease {
    /// Writes run `run`'s marker into `output` and starts its heartbeat. Called inside the I/O
    /// runtime.
    pub async fn take(output: &Place, run: &str, stage: &str) -> Result<Lease, Error> {
        let place = marker_place(output, run);
        let marker = Marker::now(run, stage);
        place.put(to_json(&marker)?).await?;
        let found = crate::manifest::read_manifest(output).await.ok().flatten().map(|m| m.run);
        remember(output, found);
        let (beat, mut fresh) = (place.clone(), marker);
        let heartbeat = tokio::spawn(async move {
            loop {
                tokio::time::sleep(HEARTBEAT).await;
                fresh.heartbeat_ms = now_ms();
                if let Ok(json) = to_json(&fresh)
                    && let Err(e) = beat.put(json).await
                {
                    tracing::warn!("{}: cannot refresh this run's marker: {e}", beat.shown());
                }
            }
        });
        let runtime = tokio::runtime::Handle::current();
        hold(output, run, true);
        Ok(Lease { output: output.clone(), place, run: run.into(), heartbeat, runtime, released: false })
    }

    pub fn run(&self) -> &str {
        &self.run
    }

    /// The marker's place.
    pub fn place(&self) -> &Place {
        &self.place
    }

    /// Stops the heartbeat and removes the run's temporary directory, its marker last: the run
    /// has ended. `abort` aborts the uploads it records (a run that did not commit them).
    pub async fn release(mut self, abort: bool) {
        self.heartbeat.abort();
        self.released = true;
        hold(&self.output, &self.run, false);
        crate::staging::remove_run_dir(&self.output, &self.run, abort).await;
    }

    /// Whether this run's marker is still in place (no other run judged it dead).
    pub async fn held(&self) -> Result<bool, Error> {
        Ok(match self.place.get().await? {
            Some(bytes) => serde_json::from_slice::<Marker>(&bytes).is_ok_and(|m| m.run == self.run),
            None => false,
        })
    }
}

impl Drop for Lease {
    /// Stops the heartbeat and removes the marker (best effort: a marker left behind is judged
    /// by [`Marker::alive`]); on a local disk, the whole temporary directory of the run, which
    /// failed before its commit (elsewhere the next commit removes what it staged).
    fn drop(&mut self) {
        self.heartbeat.abort();
        if self.released {
            return;
        }
        hold(&self.output, &self.run, false);
        if self.output.is_local() && tokio::runtime::Handle::try_current().is_err() {
            self.runtime.block_on(crate::staging::remove_run_dir(&self.output, &self.run, true));
            return;
        }
        let (store, path) = (self.place.store.clone(), self.place.path.clone());
        let remove = async move { store.delete(&path).await };
        let removed = if tokio::runtime::Handle::try_current().is_ok() {
            // Inside the runtime: blocking here would stall it.
            drop(self.runtime.spawn(remove));
            Ok(())
        } else {
            self.runtime.block_on(remove)
        };
        if let Err(e) = removed {
            tracing::debug!("{}: cannot remove this run's marker: {e}", self.place.shown());
        }
    }
}

/// Whether run `run` began less than [`STALE_AFTER`] ago, by the start its id carries
/// ([`crate::names::new_run_id`]): its directory may not hold its marker yet.
pub fn started_recently(run: &str) -> bool {
    let Some(started) = run.get(..11).and_then(|ms| u64::from_str_radix(ms, 16).ok()) else { return false };
    now_ms().saturating_sub(started) < STALE_AFTER.as_millis() as u64
}

/// The temporary directories of the runs this process holds a lease for on a local disk.
static HELD: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

fn hold(output: &Place, run: &str, held: bool) {
    let Some(dir) = output.child(&run_dir(run)).local_dir() else { return };
    let mut all = HELD.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|d| *d != dir);
    if held {
        all.push(dir);
    }
}

/// Removes the temporary directories of every run this process holds a lease for on a local
/// disk (and `_temporary/` where it is left empty): a process stopped by a signal leaves
/// nothing a directory reader sees (polars reads every file below a directory). The caller
/// is about to exit; elsewhere the next commit removes what a stopped run left.
pub fn remove_held_local() {
    let all = std::mem::take(&mut *HELD.lock().unwrap_or_else(|e| e.into_inner()));
    for dir in all {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = dir.parent().map(std::fs::remove_dir);
    }
}

/// Outputs this process took a lease on, by their shown place, with the run whose manifest each
/// held then: each passed its output check.
static LEASED: std::sync::Mutex<Vec<(String, Option<String>)>> = std::sync::Mutex::new(Vec::new());

fn remember(output: &Place, found: Option<String>) {
    let mut leased = LEASED.lock().unwrap_or_else(|e| e.into_inner());
    let shown = output.shown();
    if !leased.iter().any(|(s, _)| *s == shown) {
        leased.push((shown, found));
    }
}

/// Whether this process took a run's lease on `output` (its output check passed: nothing there
/// is foreign but what `overwrite` keeps), and the run whose manifest it held then (`None`:
/// none). The job's report may go there when the run failed before its commit, unless another
/// run committed there since.
pub fn leased_here(output: &Place) -> Option<Option<String>> {
    let leased = LEASED.lock().unwrap_or_else(|e| e.into_inner());
    leased.iter().find(|(s, _)| *s == output.shown()).map(|(_, found)| found.clone())
}

/// The marker at `place`; `None` when it is gone or unreadable (a run that ended).
pub async fn read(place: &Place) -> Result<Option<Marker>, Error> {
    Ok(place.get().await?.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

/// Run `run`'s marker in `output`: in its temporary directory, or beside the parts where an
/// earlier version wrote it; `None` when the run has ended.
pub async fn read_run(output: &Place, run: &str) -> Result<Option<Marker>, Error> {
    if let Some(marker) = read(&marker_place(output, run)).await? {
        return Ok(Some(marker));
    }
    read(&output.child(&format!("{LEGACY_MARKER_PREFIX}{run}.json"))).await
}

fn to_json(marker: &Marker) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(marker).map_err(|source| Error::Encode { what: "run marker", source })
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// This host's name and boot id.
fn host() -> String {
    let read = |path: &str| std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_default();
    format!("{}/{}", read("/proc/sys/kernel/hostname"), read("/proc/sys/kernel/random/boot_id"))
}

/// When process `pid` started (clock ticks after boot); `None` if there is no such process.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces and parentheses): the start time
    // is field 22, the 20th after the name.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_alive_while_its_process_runs() {
        let mine = Marker::now("r", "flatten");
        assert!(mine.alive());
        let reused = Marker { pid_start: mine.pid_start.map(|s| s + 1), ..mine.clone() };
        assert!(!reused.alive());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!Marker { pid, pid_start: Some(1), ..mine.clone() }.alive());
        let elsewhere = Marker { host: "other/boot".into(), ..mine.clone() };
        assert!(elsewhere.alive());
        let stale = Marker { heartbeat_ms: now_ms() - STALE_AFTER.as_millis() as u64 - 1, ..elsewhere };
        assert!(!stale.alive());
    }
}
