//! The switch on a local file system: a run's whole version of an output directory is built
//! as a hidden sibling, then exchanged with the output in one step, so that a reader of the
//! directory sees one committed version at every instant (never a part of each, never a
//! manifest beside parts it does not list).
//!
//! **The steps**, under the [`ParentLock`] of the output's parent directory (an advisory lock
//! that only the switches and recoveries of this project take; a killed process drops it):
//!
//! 1. **build** the version `.<name>.graphflat-<run>` beside the output: a hard link to every
//!    file the output keeps (files this project did not write, other runs' files, the
//!    checkpoints), not the replaced version's parts; this run's staged files renamed in; the
//!    manifest and `_SUCCESS` written. Nothing a reader sees has changed yet;
//! 2. **move in** `_temporary/` (the markers and staged files of the runs writing there) and
//!    the folders this project did not write: renames, so that they are whole on either side;
//! 3. **exchange** the version with the output: `renameat2(RENAME_EXCHANGE)`, one step. Where
//!    the file system lacks it, three renames (output aside, version in, aside to the
//!    version's name): a reader between the first two finds no directory ("not found", which
//!    it may retry), never a mix. The sibling then holds the replaced version, which goes when
//!    every output of the run has committed ([`remove_version`]), or comes back when a later
//!    output fails ([`exchange`] again). A replaced version that a reader of this project still
//!    reads ([`crate::pin`]) is renamed `.<name>.graphflat-<its own run>.kept` instead, and goes
//!    when the next command that settles the output finds no reader holding it.
//!
//! **A kill at any moment** leaves the output whole (the exchange is one step) and at most a
//! sibling behind, which [`recover`] settles under the lock when the next command opens the
//! output: a sibling of a run that is not alive goes (after `_temporary/` and foreign folders
//! that were moved into it go back); with the three renames, an output found missing is put
//! back from the sibling that holds a committed version of its own run, where that run had put
//! the replaced version aside (its switch began; a version whose switch never began is never
//! put in, even where someone removed the output).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::manifest::Manifest;
use crate::names::{Layout, MANIFEST, TEMPORARY, is_run_id, run_of, staged_name};
use crate::staging::{Staged, StagedFile};

/// How a version's sibling is named: `.<output's name>` then this, then the run.
const INFIX: &str = ".graphflat-";

/// The suffix of the replaced version while three renames stand in for the exchange.
const ASIDE: &str = ".aside";

/// The suffix of a replaced version that stays while a reader holds it ([`crate::pin`]).
const KEPT: &str = ".kept";

/// How long a switch waits for another to release the parent's lock before it gives up.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Where the output `out` really is: an output given as a symlink to a directory is switched
/// where the directory lies (the symlink then leads to the new version), not in the link's
/// place.
pub fn real(out: &Path) -> PathBuf {
    fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf())
}

/// Where run `run`'s version of `out` waits for the exchange (and the replaced version lies
/// after it).
pub fn sibling(out: &Path, run: &str) -> Result<PathBuf, Error> {
    let (parent, name) = parts(out)?;
    Ok(parent.join(format!(".{name}{INFIX}{run}")))
}

fn parts(out: &Path) -> Result<(&Path, String), Error> {
    match (out.parent(), out.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name.to_string_lossy().into_owned())),
        _ => Err(Error::Usage(format!("{}: an output must be a directory inside another", out.display()))),
    }
}

/// The exclusive lock of an output's parent directory, held through a switch or a recovery.
pub struct ParentLock {
    _dir: fs::File,
}

impl ParentLock {
    /// Takes the lock of `out`'s parent, waiting at most [`LOCK_WAIT`] for another process's
    /// switch (milliseconds) to end: a process stopped while it held it must not hang this one.
    /// `None` where the parent cannot be opened (no permission to read it).
    pub fn take(out: &Path) -> Result<Option<ParentLock>, Error> {
        let (parent, _) = parts(out)?;
        let local = |source: std::io::Error| Error::List { dir: parent.display().to_string(), source };
        let dir = match fs::File::open(parent) {
            Ok(dir) => dir,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(None),
            Err(e) => return Err(local(e)),
        };
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match dir.try_lock() {
                Ok(()) => return Ok(Some(ParentLock { _dir: dir })),
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(Error::Retry(format!(
                        "{}: another process has held this directory's commit lock for {} s (a switch takes \
                         milliseconds; is one stopped?); run again",
                        parent.display(),
                        LOCK_WAIT.as_secs()
                    )));
                }
                Err(fs::TryLockError::Error(e)) => return Err(local(e)),
            }
        }
    }
}

/// Step 1 (see the module doc): run `run`'s version of `out` at `next`, holding what `out`
/// keeps (all but `previous`'s files, except the parts `manifest` carries over from it: a
/// refresh's untouched parts), `files` (staged under `out/_temporary/<run>/`) and the
/// `manifest` with `_SUCCESS`. On an error, `next` is removed.
pub fn build(
    out: &Path,
    next: &Path,
    files: &[StagedFile],
    (previous, manifest): (Option<&Manifest>, &Manifest),
    layout: &Layout,
) -> Result<(), Error> {
    fs::create_dir_all(next).map_err(|e| written(next, e))?;
    // The directory readers find keeps its mode, owner and group (a group's shared directory
    // stays shared); a process that may not give it the owner keeps its own.
    let kept = fs::metadata(out).and_then(|m| {
        use std::os::unix::fs::MetadataExt;
        let _ = std::os::unix::fs::chown(next, Some(m.uid()), Some(m.gid()));
        fs::set_permissions(next, m.permissions())
    });
    let built = kept.map_err(|e| written(next, e)).and_then(|()| fill(out, next, files, (previous, manifest), layout));
    if built.is_err() {
        remove_tree(next);
    }
    built
}

/// Whether the version `next` can be made beside the output `out`: on the same file system
/// (an output that is a mount point, a container's volume, cannot be exchanged with a
/// directory of its parent's), under a name the file system takes, and made now (empty:
/// [`build`] fills it), not refused for want of permission or on a read-only file system.
pub fn can_build(out: &Path, next: &Path) -> bool {
    use std::io::ErrorKind::{PermissionDenied, ReadOnlyFilesystem};
    use std::os::unix::fs::MetadataExt;
    let device = |p: &Path| fs::metadata(p).map(|m| m.dev()).ok();
    let same = out.parent().is_some_and(|parent| device(parent) == device(out) || device(out).is_none());
    let named = next.file_name().is_some_and(|n| n.len() + ASIDE.len() <= 255);
    same && named
        && !matches!(fs::create_dir(next), Err(e) if matches!(e.kind(), PermissionDenied | ReadOnlyFilesystem))
}

/// A local file or directory that cannot be written, as the commit's error.
pub fn written(path: &Path, source: std::io::Error) -> Error {
    Error::Write { file: path.display().to_string(), source: parquet::errors::ParquetError::External(Box::new(source)) }
}

/// [`build`]'s links and renames into `next`.
fn fill(
    out: &Path,
    next: &Path,
    files: &[StagedFile],
    (previous, manifest): (Option<&Manifest>, &Manifest),
    layout: &Layout,
) -> Result<(), Error> {
    let run = manifest.run.as_str();
    let carried: std::collections::HashSet<&str> = manifest.parts.iter().map(|p| p.name.as_str()).collect();
    let replaced = |name: &str| {
        previous.is_some_and(|m| run_of(name) == Some(m.run.as_str()) || m.parts.iter().any(|p| p.name == name))
            && !carried.contains(name)
    };
    keep_into(out, next, "", layout, &replaced).map_err(|e| written(out, e))?;
    for file in files {
        if file.staged != Staged::File {
            return Err(Error::Internal(format!("{}: an upload staged on a local disk", file.name)));
        }
        let to = next.join(&file.name);
        if let Some(folder) = to.parent() {
            fs::create_dir_all(folder).map_err(|e| written(folder, e))?;
        }
        let from = out.join(staged_name(run, &file.name));
        fs::rename(&from, &to).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => lost_to_another_run(out, &from),
            _ => written(&from, e),
        })?;
    }
    Ok(())
}

/// The error for a file this run staged in `out` that is gone at its commit: another run's
/// commit, switching `out` while this run made its `_temporary/` folder, took it away with the
/// version it replaced. Two runs writing one output at once: a retry runs alone (75).
fn lost_to_another_run(out: &Path, staged: &Path) -> Error {
    Error::Retry(format!(
        "{}: this run's staged file is gone; another run committed {} while this one wrote it (two \
         runs into one output at once); run again",
        staged.display(),
        out.display()
    ))
}

/// Links into `next` every file of `out` (in `folder`, "" for the top) that the new version
/// keeps: not the manifest, `_SUCCESS` or `_temporary/` (step 2 moves it), not what `replaced`
/// says the replaced version wrote; folders of the layout are made and filled, other folders
/// are left to step 2.
fn keep_into(
    out: &Path,
    next: &Path,
    folder: &str,
    layout: &Layout,
    replaced: &dyn Fn(&str) -> bool,
) -> std::io::Result<()> {
    for entry in fs::read_dir(out.join(folder))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let listed = if folder.is_empty() { name.clone() } else { format!("{folder}/{name}") };
        let top = folder.is_empty();
        if top && (name == MANIFEST || name == schemas::SUCCESS_MARKER || name == TEMPORARY) {
            continue;
        }
        if replaced(&listed) {
            continue;
        }
        if entry.file_type()?.is_dir() {
            // A layout's folder, and any folder inside one (another tool's, kept as it is).
            if !top || layout.dirs.contains(&name.as_str()) {
                fs::create_dir(next.join(&listed))?;
                keep_into(out, next, &listed, layout, replaced)?;
                if top && layout.tables.contains(&name.as_str()) {
                    // A table's folder that only the replaced version's parts filled goes
                    // with them (this run's own parts make it again).
                    let _ = fs::remove_dir(next.join(&listed));
                }
            }
            continue;
        }
        match fs::hard_link(entry.path(), next.join(&listed)) {
            // Renamed or removed since it was listed: another run's file that it writes whole
            // again (a trainer's metrics, an object store's staging file), not this output's.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            linked => linked?,
        }
    }
    Ok(())
}

/// Step 2 (see the module doc): renames `_temporary/` and every folder this project did not
/// write from `from` into `to`, where `to` has none of that name. Returns what it moved.
pub fn move_folders(from: &Path, to: &Path, layout: &Layout) -> std::io::Result<Vec<String>> {
    let mut moved = Vec::new();
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = layout.dirs.contains(&name.as_str());
        if !entry.file_type()?.is_dir() || ours || fs::symlink_metadata(to.join(&name)).is_ok() {
            continue;
        }
        fs::rename(entry.path(), to.join(&name))?;
        moved.push(name);
    }
    Ok(moved)
}

/// The variable that holds a switch between steps 2 and 3 for that many milliseconds: the
/// end-to-end tests stop a process there (`tests/switch.rs`); unset, nothing waits.
pub const PAUSE_VAR: &str = "GRAPHFLAT_TEST_SWITCH_PAUSE_MS";

/// Waits as [`PAUSE_VAR`] says, if it is set.
pub fn pause_for_tests() {
    if let Some(ms) = std::env::var(PAUSE_VAR).ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Step 3 (see the module doc): `a` and `b` exchanged, in one step where the file system can,
/// else in three renames through `a` + [`ASIDE`].
pub fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (ca, cb) = (c(a)?, c(b)?);
    // SAFETY: two NUL-terminated paths that live across the call.
    let done =
        unsafe { libc::renameat2(libc::AT_FDCWD, ca.as_ptr(), libc::AT_FDCWD, cb.as_ptr(), libc::RENAME_EXCHANGE) };
    if done == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    if !matches!(error.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)) {
        return Err(error);
    }
    let aside = aside(a);
    fs::rename(b, &aside)?;
    fs::rename(a, b)?;
    fs::rename(&aside, a)
}

fn aside(version: &Path) -> PathBuf {
    let mut name = version.as_os_str().to_owned();
    name.push(ASIDE);
    PathBuf::from(name)
}

/// The replaced versions this process's switches left beside their outputs, until
/// [`remove_version`] removes them: a stop removes them before the process exits
/// ([`remove_pending_versions`]).
static PENDING: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Notes `version`, a replaced version beside its output, for [`remove_pending_versions`].
pub fn pending(version: &Path) {
    PENDING.lock().unwrap_or_else(|e| e.into_inner()).push(version.to_path_buf());
}

/// Removes a version's directory (the replaced one, after every output of its run committed),
/// unless a reader holds it ([`unread_gone`]).
///
/// The removals of a process run one at a time, under [`PENDING`]'s lock: a stop removing the
/// pending versions while the commit removes the one it replaced would otherwise find the
/// commit's exclusive lock, take it for a reader's hold, and rename the half-removed tree kept.
pub fn remove_version(version: &Path) {
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    unread_gone(version);
    pending.retain(|v| v != version);
}

/// Removes every replaced version this process's switches left (the caller, stopped by a
/// signal, is about to exit): nothing of its stays beside an output but what a reader holds.
pub fn remove_pending_versions() {
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    for version in std::mem::take(&mut *pending) {
        unread_gone(&version);
    }
}

/// Removes the version `dir` under its exclusive lock ([`crate::pin::unread`]); one a reader
/// holds is renamed to its [`KEPT`] name and stays for [`recover`] to remove once no reader
/// holds it. Whether it is gone.
fn unread_gone(dir: &Path) -> bool {
    match crate::pin::unread(dir) {
        Ok(Some(_lock)) => return remove_tree(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!("cannot lock {} to remove it: {e}", dir.display());
            return false;
        }
        Ok(None) => {
            let kept = kept(dir);
            if kept != dir && fs::rename(dir, &kept).is_ok() {
                tracing::info!("{}: a reader still reads this version; it stays until the reader ends", kept.display());
                // The reader may have ended between the first look and the rename.
                return unread_gone(&kept);
            }
            return false;
        }
    }
    true
}

/// The name a version keeps while a reader holds it: `.<output>.graphflat-<run>.kept`, with
/// the run whose manifest it holds (the sibling's own name carries the run that replaced it),
/// or its own name then [`KEPT`] where its manifest does not read.
fn kept(version: &Path) -> PathBuf {
    let name = version.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if name.ends_with(KEPT) {
        return version.to_path_buf();
    }
    match (name.rsplit_once(INFIX), manifest_run(version)) {
        (Some((output, _)), Some(run)) => version.with_file_name(format!("{output}{INFIX}{run}{KEPT}")),
        _ => version.with_file_name(format!("{name}{KEPT}")),
    }
}

/// Removes the tree at `path`; whether it is gone (a failure is logged).
fn remove_tree(path: &Path) -> bool {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match fs::remove_dir_all(path) {
        Ok(()) => true,
        Err(e) if gone(&e) => true,
        // Another removal of the same tree raced this one: try once more.
        Err(_) => match fs::remove_dir_all(path) {
            Ok(()) => true,
            Err(e) if gone(&e) => true,
            Err(e) => {
                tracing::warn!("cannot remove {}: {e}", path.display());
                false
            }
        },
    }
}

/// What a sibling of an output is, by its name's suffix.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sibling {
    /// A run's version: built for its switch, or the one it replaced.
    Version,
    /// The replaced version while three renames stand in for the exchange.
    Aside,
    /// A replaced version that a reader held when it was to go.
    Kept,
}

/// The run of a sibling of `out` named as [`sibling`] names one (or its [`ASIDE`] or [`KEPT`]),
/// if `entry` is one, and what it is.
fn sibling_run<'a>(name: &'a str, out_name: &str) -> Option<(&'a str, Sibling)> {
    let rest = name.strip_prefix('.')?.strip_prefix(out_name)?.strip_prefix(INFIX)?;
    let (run, kind) = match (rest.strip_suffix(ASIDE), rest.strip_suffix(KEPT)) {
        (Some(run), _) => (run, Sibling::Aside),
        (_, Some(run)) => (run.strip_suffix(ASIDE).unwrap_or(run), Sibling::Kept),
        _ => (rest, Sibling::Version),
    };
    is_run_id(run).then_some((run, kind))
}

/// Whether `name` is named as a version a switch keeps beside some output
/// (`.<output>.graphflat-<run>`, or its [`ASIDE`] or [`KEPT`]): this project removes such a
/// directory, so no command writes one ([`crate::guard`]).
pub fn is_version_name(name: &str) -> bool {
    let Some((output, _)) = name.strip_prefix('.').and_then(|n| n.rsplit_once(INFIX)) else { return false };
    sibling_run(name, output).is_some()
}

/// The runs of the siblings beside `out` (see [`sibling`]).
pub fn sibling_runs(out: &Path) -> Result<Vec<String>, Error> {
    let (parent, name) = parts(out)?;
    let list = |source| Error::List { dir: parent.display().to_string(), source };
    let mut runs = Vec::new();
    for entry in fs::read_dir(parent).map_err(list)? {
        let file = entry.map_err(list)?.file_name().to_string_lossy().into_owned();
        if let Some((run, _)) = sibling_run(&file, &name) {
            runs.push(run.to_owned());
        }
    }
    Ok(runs)
}

/// Whether anything a switch leaves lies beside `out` (a cheap look before taking the lock).
pub fn has_siblings(out: &Path) -> bool {
    sibling_runs(out).is_ok_and(|runs| !runs.is_empty())
}

/// The run whose manifest `dir` holds, if it holds one that reads.
fn manifest_run(dir: &Path) -> Option<String> {
    let file = dir.join(MANIFEST);
    let bytes = fs::read(&file).ok()?;
    crate::manifest::parse_manifest_file(&file.display().to_string(), bytes).ok().map(|m| m.run)
}

/// Settles what a killed switch left beside `out` (see the module doc); the caller holds the
/// [`ParentLock`]. `alive` says whether a run may still be running (its sibling is then its
/// switch's, and stays). A version a reader holds stays, [`KEPT`], until no reader holds it.
/// Returns what it did, for the log.
pub fn recover(out: &Path, layout: &Layout, alive: &dyn Fn(&str) -> bool) -> Result<Vec<String>, Error> {
    let (parent, name) = parts(out)?;
    let list = |source| Error::List { dir: parent.display().to_string(), source };
    let mut siblings: Vec<(PathBuf, String, Sibling)> = Vec::new();
    for entry in fs::read_dir(parent).map_err(list)? {
        let entry = entry.map_err(list)?;
        let file = entry.file_name().to_string_lossy().into_owned();
        if let Some((run, kind)) = sibling_run(&file, &name) {
            siblings.push((entry.path(), run.to_owned(), kind));
        }
    }
    let mut done = Vec::new();
    let io = written;
    if fs::symlink_metadata(out).is_err() {
        // Three renames stopped between the first two: the version whose manifest is its own
        // run's is the new one, whole, when the replaced one was put aside under its name (the
        // switch began); else the one put aside goes back. A built version with nothing put
        // aside never began its switch: an output missing then was removed by someone else, and
        // the version, never committed, never takes its place.
        let began = |run: &str| siblings.iter().any(|(_, r, k)| *k == Sibling::Aside && r == run);
        let whole = |(p, run, kind): &&(PathBuf, String, Sibling)| {
            *kind == Sibling::Version && began(run) && manifest_run(p).as_deref() == Some(run)
        };
        let back = siblings.iter().find(whole).or_else(|| siblings.iter().find(|(_, _, k)| *k == Sibling::Aside));
        if let Some((path, run, _)) = back {
            fs::rename(path, out).map_err(|e| io(out, e))?;
            done.push(format!("put run {run}'s version back in place (a switch stopped half way)"));
        }
    }
    for (path, run, kind) in siblings {
        if !fs::exists(&path).unwrap_or(false) || (kind != Sibling::Kept && alive(&run)) {
            continue;
        }
        // A build stopped after step 2: what it moved goes back.
        if kind != Sibling::Kept && fs::exists(out).unwrap_or(false) {
            move_folders(&path, out, layout).map_err(|e| io(&path, e))?;
        }
        match (unread_gone(&path), kind) {
            (true, Sibling::Kept) => done.push(format!("removed {} (its readers ended)", path.display())),
            (true, _) => done.push(format!("removed {} (left by run {run}, which ended)", path.display())),
            (false, _) => {}
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn exchange_swaps_two_directories_in_one_step() {
        let dir = std::env::temp_dir().join(format!("tables-switch-exchange-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let (a, b) = (dir.join("a"), dir.join("b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        fs::write(a.join("x"), b"a").unwrap();
        fs::write(b.join("y"), b"b").unwrap();
        exchange(&a, &b).unwrap();
        assert_eq!((tree(&a), tree(&b)), (vec!["y".to_owned()], vec!["x".to_owned()]));
        assert!(!aside(&a).exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn siblings_are_told_by_their_names() {
        let run = crate::names::new_run_id();
        assert_eq!(sibling_run(&format!(".flat{INFIX}{run}"), "flat"), Some((run.as_str(), Sibling::Version)));
        assert_eq!(sibling_run(&format!(".flat{INFIX}{run}{ASIDE}"), "flat"), Some((run.as_str(), Sibling::Aside)));
        assert_eq!(sibling_run(&format!(".flat{INFIX}{run}{KEPT}"), "flat"), Some((run.as_str(), Sibling::Kept)));
        let both = format!(".flat{INFIX}{run}{ASIDE}{KEPT}");
        assert_eq!(sibling_run(&both, "flat"), Some((run.as_str(), Sibling::Kept)));
        assert!(is_version_name(&both) && is_version_name(&format!(".a.b{INFIX}{run}")));
        assert!(!is_version_name(&format!("flat{INFIX}{run}")) && !is_version_name(&format!(".flat{INFIX}x")));
        assert_eq!(sibling_run(&format!(".flat2{INFIX}{run}"), "flat"), None);
        assert_eq!(sibling_run(&format!(".flat{INFIX}xyz"), "flat"), None);
        assert_eq!(sibling(Path::new("/a/flat"), &run).unwrap(), Path::new(&format!("/a/.flat{INFIX}{run}")));
    }

    /// A scratch directory `dir` for the output `out` (absent), beside which a run's version
    /// was built (its own manifest in it, not yet switched in): `(dir, out, run, version)`.
    fn built_version(test: &str) -> (PathBuf, PathBuf, String, PathBuf) {
        let dir = std::env::temp_dir().join(format!("tables-switch-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let out = dir.join("out");
        let run = crate::names::new_run_id();
        let next = sibling(&out, &run).unwrap();
        fs::create_dir_all(&next).unwrap();
        let m = Manifest::new(&run, crate::manifest::Stage::Infer, Vec::new(), serde_json::Value::Null);
        fs::write(next.join(MANIFEST), m.to_parquet(None).unwrap()).unwrap();
        (dir, out, run, next)
    }

    /// A switch stopped between the first two of its three renames: the output is missing,
    /// and the new version (its manifest its own run's) goes in its place.
    #[test]
    fn recovery_puts_a_whole_version_back() {
        let (dir, out, run, next) = built_version("recover");
        let old = aside(&next);
        fs::create_dir_all(old.join(TEMPORARY)).unwrap();
        let done = recover(&out, &Layout::TABLE, &|_| false).unwrap();
        assert_eq!(manifest_run(&out), Some(run.clone()), "{done:?}");
        assert!(!next.exists() && !old.exists(), "{done:?}");
        assert!(out.join(TEMPORARY).is_dir(), "the replaced version's _temporary/ comes back: {done:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A stop's removal of the pending versions and a commit's removal of the one it replaced,
    /// at once (a signal at the end of a switch): the version goes, and neither takes the
    /// other's exclusive lock for a reader's hold (which would rename the half-removed tree
    /// kept).
    #[test]
    fn a_stop_and_a_commit_removing_one_version_at_once_leave_nothing() {
        let dir = std::env::temp_dir().join(format!("tables-switch-race-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let out = dir.join("out");
        fs::create_dir_all(&out).unwrap();
        for round in 0..40 {
            let replaced = sibling(&out, &crate::names::new_run_id()).unwrap();
            fs::create_dir_all(&replaced).unwrap();
            for i in 0..200 {
                fs::write(replaced.join(format!("part-{i}")), b"old").unwrap();
            }
            pending(&replaced);
            let commit = std::thread::spawn({
                let replaced = replaced.clone();
                move || remove_version(&replaced)
            });
            remove_pending_versions();
            commit.join().unwrap();
            assert_eq!(tree(&dir), vec!["out".to_owned()], "round {round}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A version built by a run killed before its switch began (nothing put aside), beside an
    /// output someone removed: it was never committed, so it never takes the output's place.
    #[test]
    fn recovery_never_puts_in_a_version_whose_switch_did_not_begin() {
        let (dir, out, _, next) = built_version("unbegun");
        let done = recover(&out, &Layout::TABLE, &|_| false).unwrap();
        assert!(!out.exists() && !next.exists(), "{done:?}: {:?}", tree(&dir));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A replaced version a reader holds is not removed: it is renamed kept, stays through a
    /// recovery while held, and goes at the first recovery after its reader let go.
    #[test]
    fn a_held_version_stays_until_its_reader_goes() {
        let dir = std::env::temp_dir().join(format!("tables-switch-held-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let out = dir.join("out");
        fs::create_dir_all(&out).unwrap();
        let run = crate::names::new_run_id();
        let replaced = sibling(&out, &run).unwrap();
        fs::create_dir_all(&replaced).unwrap();
        fs::write(replaced.join("part"), b"old").unwrap();
        let reader = fs::File::open(&replaced).unwrap();
        reader.lock_shared().unwrap();

        pending(&replaced);
        remove_version(&replaced);
        let kept = kept(&replaced);
        assert!(!replaced.exists() && kept.join("part").exists(), "{:?}", tree(&dir));
        remove_pending_versions();
        assert!(recover(&out, &Layout::TABLE, &|_| true).unwrap().is_empty());
        assert!(kept.exists(), "held, it stays, whether its run is alive or not");
        assert!(recover(&out, &Layout::TABLE, &|_| false).unwrap().is_empty());
        assert!(kept.exists());

        drop(reader);
        let done = recover(&out, &Layout::TABLE, &|_| true).unwrap();
        assert!(!kept.exists(), "{done:?}");
        assert_eq!(tree(&dir), vec!["out".to_owned()]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
