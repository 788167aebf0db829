//! A reader's hold on the version of a local output it opened: the directory held open with a
//! shared lock, and every file read through it, so that a switch ([`crate::switch`]) that
//! replaces the output while the reader reads changes nothing the reader sees, and the replaced
//! version stays until its last reader lets go.
//!
//! **How a version is held.** The reader opens the directory, takes a shared `flock` on it, and
//! checks that the path still leads to the directory it opened (a switch between the open and the
//! lock would have handed it a replaced version): then it holds the version the path named at
//! that instant. It reads through `/proc/self/fd/<fd>/`, which leads to the directory it holds
//! wherever a switch moves it. One process holds one version of a directory at a time: every
//! reader in it that opens the directory while another holds it shares that hold ([`shared`]), so
//! the workers of a process read one version.
//!
//! **How a replaced version goes.** Whatever removes a version (the commit that replaced it, a
//! stop, the recovery of a killed run's leftovers) first takes an exclusive lock on it without
//! waiting ([`unread`]). A version that a reader holds is renamed to its kept name and stays; the
//! next command that settles the output removes it once no reader holds it
//! ([`crate::switch::recover`]). A reader never blocks a writer, and a writer never blocks a
//! reader: a reader that finds a version locked exclusively is looking at one being removed,
//! which no path leads to any more, and opens the directory again.
//!
//! Where `/proc` is missing, on a store, or for a single file or a glob, nothing is held: a
//! reader whose table is replaced under it then fails with the retryable error of
//! [`crate::files`].

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How often a reader opens the directory again when a switch moved it between the open and
/// the lock (each time means another run committed there in that window).
const TRIES: usize = 50;

/// One held version of a local directory; the lock goes when the last place holding it goes.
pub struct Pin {
    /// The directory, open, with a shared lock on it.
    _dir: fs::File,
    /// `proc/self/fd/<fd>`: the key of the directory in the local store, wherever it lies.
    pub(crate) key: object_store::path::Path,
    /// The key the reader gave, which messages show in place of `key`.
    pub(crate) shown: object_store::path::Path,
}

/// The versions this process holds, by the directory's real path.
static HELD: Mutex<Option<HashMap<PathBuf, Weak<Pin>>>> = Mutex::new(None);

/// The hold this process has on the version of the directory `dir` (shown as `shown`), taken
/// now if none is (see the module doc); `None` where nothing can be held.
pub(crate) fn shared(dir: &Path, shown: &object_store::path::Path) -> Option<Arc<Pin>> {
    let real = fs::canonicalize(dir).ok()?;
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let held = held.get_or_insert_with(HashMap::new);
    held.retain(|_, pin| pin.strong_count() > 0);
    if let Some(pin) = held.get(&real).and_then(Weak::upgrade) {
        return Some(pin);
    }
    let pin = Arc::new(take(&real, shown)?);
    held.insert(real, Arc::downgrade(&pin));
    Some(pin)
}

/// A shared hold on the directory `real` leads to, checked to be the one it leads to once held.
fn take(real: &Path, shown: &object_store::path::Path) -> Option<Pin> {
    if !Path::new("/proc/self/fd").is_dir() {
        return None;
    }
    for _ in 0..TRIES {
        let dir = fs::File::open(real).ok()?;
        match dir.try_lock_shared() {
            Ok(()) => {}
            // Being removed: the path leads elsewhere by now.
            Err(fs::TryLockError::WouldBlock) => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(fs::TryLockError::Error(_)) => return None,
        }
        let (opened, there) = (dir.metadata().ok()?, fs::metadata(real).ok()?);
        if (opened.dev(), opened.ino()) == (there.dev(), there.ino()) {
            use std::os::fd::AsRawFd;
            let key = object_store::path::Path::from(format!("proc/self/fd/{}", dir.as_raw_fd()));
            return Some(Pin { _dir: dir, key, shown: shown.clone() });
        }
    }
    tracing::warn!("{}: replaced {TRIES} times while it was opened; read without a hold", real.display());
    None
}

/// The exclusive lock of the version `dir` if no reader holds it: whoever removes a version
/// removes it under this lock. `Ok(None)`: a reader holds it. A version already gone is
/// `Err(NotFound)`.
pub fn unread(dir: &Path) -> std::io::Result<Option<fs::File>> {
    let file = fs::File::open(dir)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}
