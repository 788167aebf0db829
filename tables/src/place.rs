//! A place in some store: a local path or a URI, parsed once with the exact key it names, and
//! what a stage does with it (list a table's files, read and write whole objects).

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};

use schemas::{Cause, StorageConfig};

use crate::error::Error;
use crate::pin::Pin;

/// A file or directory in some store, with the text that names it in messages.
#[derive(Clone)]
pub struct Place {
    pub store: Arc<dyn ObjectStore>,
    /// The store's multipart uploads (S3): a dead run's are aborted by a later commit.
    pub multipart: Option<Arc<dyn MultipartStore>>,
    /// Whether a run's parts wait for its commit as uploads (S3, unless `[storage] staging =
    /// "copy"`; see [`crate::staging`]).
    pub stage_uploads: bool,
    pub path: Path,
    /// How files under this store are shown: `scheme://authority/` (or `/` on the local file
    /// system) + path.
    prefix: String,
    /// A glob on file names (`*`, `?`) from the last component of the path it was parsed from;
    /// `path` is then the directory.
    pattern: Option<String>,
    /// On the local file system (a plain path or a `file://` URI).
    local: bool,
    /// A job's output (or a place inside one), not an input: a path the store refuses or a
    /// missing bucket is an output that cannot be written (73) here, an input that cannot be
    /// read (66) anywhere else ([`Place::store_error`]).
    output: bool,
    /// The version of a local directory this place reads through ([`crate::pin`]): `path`
    /// then lies under the pin's key, and messages show the reader's own path.
    pin: Option<Arc<Pin>>,
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place")
            .field("shown", &self.shown())
            .field("stage_uploads", &self.stage_uploads)
            .field("local", &self.local)
            .field("output", &self.output)
            .finish()
    }
}

impl Place {
    /// An input: a local path (relative to the working directory) or a URI. A last component
    /// with `*` or `?` is a glob over the file names of its directory. A remote store is built
    /// with `storage` (the job's `[storage]`).
    pub fn parse(uri: &str, storage: &StorageConfig) -> Result<Place, Error> {
        // A local path that exists as written is that path, whatever characters it holds (an
        // output this project wrote to `out?q` reads back).
        if !uri.contains("://") && std::path::Path::new(uri).exists() {
            return Self::parse_exact(uri, uri, storage);
        }
        let (dir, pattern) = match uri.rsplit_once('/') {
            Some((dir, last)) if last.contains(['*', '?']) => (dir, Some(last.to_owned())),
            None if uri.contains(['*', '?']) => (".", Some(uri.to_owned())),
            _ => (uri, None),
        };
        let mut place = Self::parse_exact(uri, dir, storage)?;
        place.pattern = pattern;
        Ok(place)
    }

    /// An output: a local path or a URI naming one directory, every character of it taken as
    /// it is (no globs).
    pub fn parse_output(uri: &str, storage: &StorageConfig) -> Result<Place, Error> {
        Ok(Place { output: true, ..Self::parse_exact(uri, uri, storage)? })
    }

    /// `location` (the part of `uri` that names a directory or file) without URL decoding: an
    /// object key keeps `?`, `#` and `%` as written. Keys with an empty, `.` or `..` segment are
    /// refused, as object stores and file systems disagree on what they mean.
    fn parse_exact(uri: &str, location: &str, storage: &StorageConfig) -> Result<Place, Error> {
        let usage = |problem: &str| Error::Usage(format!("{}: {problem}", schemas::redact(uri)));
        let Some((scheme, rest)) = location.split_once("://") else {
            return Self::local(uri, location);
        };
        if scheme == "file" {
            return match rest.strip_prefix("localhost").unwrap_or(rest) {
                path if path.starts_with('/') => Self::local(uri, path),
                _ => Err(usage("a file:// URI must name an absolute path (file:///dir)")),
            };
        }
        let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.contains('@') {
            return Err(usage(
                "credentials in a URI are not used: set them in the environment (AWS_ACCESS_KEY_ID, ...)",
            ));
        }
        if authority.is_empty() {
            return Err(usage("the URI names no bucket or host (scheme://bucket/key)"));
        }
        let key = key.strip_suffix('/').unwrap_or(key);
        if !key.is_empty() && key.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
            return Err(usage("a key with an empty, `.` or `..` segment"));
        }
        let path = Path::parse(key).map_err(|e| usage(&format!("not a valid key: {e}")))?;
        let store = crate::backends::open(uri, scheme, authority, storage)?;
        Ok(Place {
            store: store.objects,
            multipart: store.multipart,
            stage_uploads: store.stage_uploads,
            path,
            prefix: format!("{scheme}://{authority}/"),
            pattern: None,
            local: false,
            output: false,
            pin: None,
        })
    }

    fn local(uri: &str, location: &str) -> Result<Place, Error> {
        let usage = |problem: String| Error::Usage(format!("{}: {problem}", schemas::redact(uri)));
        let mut absolute = std::path::absolute(location).map_err(|e| usage(e.to_string()))?;
        if absolute.components().any(|c| c == std::path::Component::ParentDir) {
            // `..` means what the file system says it means (after symlinks).
            absolute = resolved(&absolute);
        }
        let path =
            Path::from_absolute_path(&absolute).map_err(|e| usage(format!("not a path this store can hold: {e}")))?;
        let prefix = "/".to_owned();
        Ok(Place {
            store: Arc::new(LocalFileSystem::new()),
            multipart: None,
            stage_uploads: false,
            path,
            prefix,
            pattern: None,
            local: true,
            output: false,
            pin: None,
        })
    }

    /// The place `name` inside this directory (`a/b` names `b` inside its child `a`).
    pub fn child(&self, name: &str) -> Place {
        Place {
            store: self.store.clone(),
            multipart: self.multipart.clone(),
            stage_uploads: self.stage_uploads,
            path: name.split('/').fold(self.path.clone(), |path, part| path.join(part)),
            prefix: self.prefix.clone(),
            pattern: None,
            local: self.local,
            output: self.output,
            pin: self.pin.clone(),
        }
    }

    /// The directory this place lies in; `None` at a store's root. A held version's parent
    /// is the directory its reader named's: nothing holds it.
    pub fn parent(&self) -> Option<Place> {
        let path = self.unpinned(&self.path);
        let parts: Vec<_> = path.parts().collect();
        let (_, above) = parts.split_last()?;
        Some(Place { path: above.iter().cloned().collect(), pattern: None, pin: None, ..self.clone() })
    }

    /// This place reading through a hold on the version its local directory holds now
    /// ([`crate::pin`]), which every place made from it keeps; itself where nothing can be held
    /// (a store, a file, a glob, no `/proc`).
    pub fn held(&self) -> Place {
        let dir = self.local_dir().filter(|d| self.pattern.is_none() && self.pin.is_none() && d.is_dir());
        match dir.and_then(|d| crate::pin::shared(&d, &self.path)) {
            Some(pin) => self.pinned(pin),
            None => self.clone(),
        }
    }

    /// This place reading through `pin`, a hold on its directory's version.
    fn pinned(&self, pin: Arc<Pin>) -> Place {
        let below: Vec<_> = self.path.prefix_match(&pin.shown).map(|p| p.collect()).unwrap_or_default();
        let path = below.into_iter().fold(pin.key.clone(), |path, part| path.join(part));
        Place { path, pin: Some(pin), ..self.clone() }
    }

    /// `path` with a held version's key replaced by the path its reader named.
    fn unpinned(&self, path: &Path) -> Path {
        let Some(pin) = &self.pin else { return path.clone() };
        match path.prefix_match(&pin.key) {
            Some(below) => below.fold(pin.shown.clone(), |path, part| path.join(part)),
            None => path.clone(),
        }
    }

    /// How an object of this store is named in messages.
    pub fn show(&self, path: &Path) -> String {
        format!("{}{}", self.prefix, self.unpinned(path))
    }

    pub fn shown(&self) -> String {
        match &self.pattern {
            Some(p) => format!("{}/{p}", self.show(&self.path)),
            None => self.show(&self.path),
        }
    }

    /// Where this place really is, for comparing places: on the local file system the path
    /// with every symlink of its existing part resolved (and those that lead to a directory not
    /// made yet followed), elsewhere the store's name and key.
    pub fn identity(&self) -> String {
        match self.local_dir() {
            Some(dir) => resolved_within(&dir, SYMLINKS_FOLLOWED).to_string_lossy().into_owned(),
            None => self.show(&self.path),
        }
    }

    /// Whether one of the two is the other or lies inside it, after symlinks (an output must
    /// not touch an input).
    pub fn overlaps(&self, other: &Place) -> bool {
        let (a, b) = (self.identity(), other.identity());
        let inside = |a: &str, b: &str| a.strip_prefix(b).is_some_and(|r| r.starts_with('/') || b.ends_with('/'));
        a == b || inside(&a, &b) || inside(&b, &a)
    }

    /// Whether this place is a glob over the file names of its directory.
    pub fn is_glob(&self) -> bool {
        self.pattern.is_some()
    }

    /// Whether this place is on the local file system.
    pub fn is_local(&self) -> bool {
        self.local
    }

    /// The directory on the local file system, for a local place.
    pub fn local_dir(&self) -> Option<std::path::PathBuf> {
        self.local.then(|| std::path::PathBuf::from(format!("/{}", self.path)))
    }

    /// Whether this local place is something other than a regular file (a directory, a FIFO,
    /// a device), following symlinks: reading one may block or never end.
    pub fn is_special_local_file(&self) -> bool {
        self.local_dir().and_then(|p| std::fs::metadata(p).ok()).is_some_and(|m| !m.is_file())
    }

    /// Every object below this directory.
    pub async fn list_files(&self) -> Result<Vec<ObjectMeta>, Error> {
        self.store.list(Some(&self.path)).try_collect().await.map_err(|source| self.store_error("cannot list", source))
    }

    /// The objects and common prefixes directly under this directory (a store's listing).
    pub(crate) async fn list_here(&self) -> Result<object_store::ListResult, Error> {
        self.store.list_with_delimiter(Some(&self.path)).await.map_err(|source| self.store_error("cannot list", source))
    }

    /// A listed file is data unless a component below this directory is hidden or `_`-prefixed,
    /// or it fails the glob.
    pub(crate) fn is_data_file(&self, location: &Path) -> bool {
        let below: Vec<String> = location
            .prefix_match(&self.path)
            .map(|parts| parts.map(|p| p.as_ref().to_owned()).collect())
            .unwrap_or_default();
        let visible = below.iter().all(|part| !part.starts_with(['_', '.']));
        // The job's report beside a table that a failed run left without a manifest.
        let report = below.len() == 1 && below[0] == crate::names::REPORT;
        let matches = match &self.pattern {
            Some(pattern) => below.len() == 1 && glob_matches(pattern, &below[0]),
            None => true,
        };
        visible && matches && !report
    }

    /// Whether this local place is a FIFO, a socket or a device: opening one may block until a
    /// writer comes, and reading one may never end.
    pub fn is_local_stream(&self) -> bool {
        self.local_dir().is_some_and(|p| is_stream(&p))
    }

    /// Bad data, named, if this is a local directory, FIFO, socket or device where a file is
    /// expected: for reading one, or telling whether it exists.
    pub fn refuse_special(&self) -> Result<(), Error> {
        match self.is_special_local_file() {
            true => Err(not_regular(self.shown())),
            false => Ok(()),
        }
    }

    /// The object's bytes if it holds at most `limit` of them; `None` if there is none. A larger
    /// one is bad data, named, and never read; so is a local directory, FIFO, socket or device.
    pub async fn get_at_most(&self, limit: u64) -> Result<Option<Vec<u8>>, Error> {
        self.refuse_special()?;
        match self.head().await? {
            None => Ok(None),
            Some(meta) if meta.size > limit => Err(Error::BadData(format!(
                "{}: {} bytes, more than the {limit} it can hold; not read",
                self.shown(),
                meta.size
            ))),
            Some(_) => self.get().await,
        }
    }

    /// Bad data, named, if this is a local FIFO, socket or device.
    pub(crate) fn refuse_stream(&self) -> Result<(), Error> {
        match self.is_local_stream() {
            true => Err(not_regular(self.shown())),
            false => Ok(()),
        }
    }

    /// The object's metadata; `None` if there is none. A local FIFO, socket or device is bad
    /// data, named, and never opened (object_store's local store opens a file to read its
    /// metadata).
    pub(crate) async fn head(&self) -> Result<Option<ObjectMeta>, Error> {
        self.refuse_stream()?;
        match self.store.head(&self.path).await {
            Ok(meta) => Ok(Some(meta)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(self.store_error("cannot read", source)),
        }
    }

    pub async fn exists(&self) -> bool {
        matches!(self.head().await, Ok(Some(_)))
    }

    /// Whether the object exists; a store that fails to say is an error, not a "no".
    pub async fn found(&self) -> Result<bool, Error> {
        self.head().await.map(|meta| meta.is_some())
    }

    /// Writes the object whole, in one put.
    ///
    /// On the local file system the store makes the file's folders, so a put that finds its
    /// folder gone lost a race with a commit that moved that folder into the next version
    /// (`crate::moved::again_if_moved`, whose count it keeps).
    pub async fn put(&self, bytes: Vec<u8>) -> Result<(), Error> {
        let payload = PutPayload::from(bytes);
        let mut tries = 1;
        loop {
            match self.store.put(&self.path, payload.clone()).await {
                Ok(_) => return Ok(()),
                Err(source) if self.local && tries < crate::moved::TRIES_IF_MOVED && folder_gone(&source) => tries += 1,
                Err(source) => return Err(self.store_error("cannot write", source)),
            }
        }
    }

    /// Removes the object; one that is not there is no error.
    pub async fn remove(&self) -> Result<(), Error> {
        match self.store.delete(&self.path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(self.store_error("cannot remove", source)),
        }
    }

    /// The object's size in bytes; `None` if there is none.
    pub async fn size(&self) -> Result<Option<u64>, Error> {
        self.head().await.map(|meta| meta.map(|m| m.size))
    }

    /// The object's bytes; `None` if there is none.
    pub async fn get(&self) -> Result<Option<Vec<u8>>, Error> {
        match self.store.get(&self.path).await {
            Ok(got) => {
                got.bytes().await.map(|b| Some(b.to_vec())).map_err(|source| self.store_error("cannot read", source))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(self.store_error("cannot read", source)),
        }
    }

    /// The store's failure at this place, whose cause ([`Error::cause`]) depends on the side:
    /// a path the store refuses (a permission, a file where a directory must be) is an input
    /// that cannot be read (66) or an output that cannot be written (73), and so is a missing
    /// bucket (a missing object is no error: `head` and `get` say `None`).
    pub(crate) fn store_error(&self, what: &str, source: object_store::Error) -> Error {
        let error = Error::Store { what: format!("{what} {}", self.shown()), source };
        match (error.cause(), self.output) {
            (Cause::CantCreate, false) => Error::Unreadable(Box::new(error)),
            (Cause::NoInput, true) => Error::Unwritable(Box::new(error)),
            _ => error,
        }
    }
}

/// Whether a local store's failure is a file or folder not found (its staging file's rename).
fn folder_gone(error: &object_store::Error) -> bool {
    schemas::message::sources(error)
        .any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound))
}

/// The error for a directory, FIFO, socket or device where a file was expected.
pub(crate) fn not_regular(shown: impl std::fmt::Display) -> Error {
    Error::BadData(format!("{shown}: not a regular file (a directory, FIFO, socket or device)"))
}

/// Whether the local `path` is a FIFO, a socket or a device (following symlinks).
pub(crate) fn is_stream(path: &std::path::Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// `path` with every symlink and `..` of its longest existing ancestor resolved, then the rest
/// as written (`..` in the rest taken lexically).
fn resolved(path: &std::path::Path) -> std::path::PathBuf {
    resolved_within(path, 0)
}

/// How many symlinks that lead nowhere yet [`Place::identity`] follows, as Linux's
/// `MAXSYMLINKS`.
const SYMLINKS_FOLLOWED: usize = 40;

/// [`resolved`], also following at most `links` symlinks that lead nowhere yet (to a directory
/// a stage will make), so that two names of one future directory resolve alike; past that
/// (a loop), the rest is taken as written.
fn resolved_within(path: &std::path::Path, links: usize) -> std::path::PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        let lexically = |base: std::path::PathBuf, rest: &[&std::ffi::OsStr]| {
            rest.iter().rev().fold(base, |mut path: std::path::PathBuf, part: &&std::ffi::OsStr| {
                if *part == ".." {
                    path.pop();
                } else if *part != "." {
                    path.push(part);
                }
                path
            })
        };
        if let Ok(real) = std::fs::canonicalize(existing) {
            return lexically(real, &rest);
        }
        if let (Some(target), true) = (std::fs::read_link(existing).ok(), links > 0) {
            let target = existing.parent().map_or(target.clone(), |parent| parent.join(&target));
            return lexically(resolved_within(&target, links - 1), &rest);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            // `..` or `.` as the last component: let the parent resolve them.
            (Some(parent), None) => {
                rest.push(existing.components().next_back().map_or("".as_ref(), |c| c.as_os_str()));
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// `*` (any run of characters) and `?` (one character) against a whole file name.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic two-pointer match with backtracking to the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path through a file: the store refuses it alike at an input and at an output, and
    /// the exit code says which of the two cannot go on.
    #[test]
    fn a_path_the_store_refuses_is_an_unreadable_input_or_an_unwritable_output() {
        let dir = std::env::temp_dir().join(format!("graphflat-place-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a-file");
        std::fs::write(&file, "not a directory").unwrap();
        let through = file.join("table").join(schemas::SUCCESS_MARKER);
        let through = through.to_str().unwrap();
        let storage = StorageConfig::default();
        let input = Place::parse(through, &storage).unwrap();
        let output = Place::parse_output(through, &storage).unwrap();
        let input_error = futures::executor::block_on(input.head()).unwrap_err();
        let output_error = futures::executor::block_on(output.child("part").head()).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(input_error.cause(), Cause::NoInput, "{input_error:?}");
        assert_eq!(output_error.cause(), Cause::CantCreate, "{output_error:?}");
        assert!(input_error.to_string().contains("a-file/table"), "{input_error}");
    }

    #[test]
    fn globs_match_whole_names() {
        assert!(glob_matches("*.parquet", "part-0.parquet"));
        assert!(!glob_matches("*.parquet", "part-0.parquet.tmp"));
        assert!(glob_matches("part-?-*", "part-1-x"));
        assert!(!glob_matches("part-?-*", "part-12-x"));
        assert!(glob_matches("*", "anything"));
    }

    #[test]
    fn places_overlap_when_one_holds_the_other() {
        let place = |p: &str| Place::parse(p, &StorageConfig::default()).unwrap();
        assert!(place("/data/g").overlaps(&place("/data/g/nodes")));
        assert!(place("/data/g/nodes").overlaps(&place("/data/g")));
        assert!(place("/data/g").overlaps(&place("/data/g")));
        assert!(!place("/data/g").overlaps(&place("/data/graph")));
        let glob = place("/data/g/*.parquet");
        assert_eq!(glob.shown(), "/data/g/*.parquet");
        assert!(glob.overlaps(&place("/data/g")));
    }

    #[test]
    fn keys_keep_every_character() {
        let place = Place::parse_output("s3://bucket/dir/a?b#c%41 d", &StorageConfig::default()).unwrap();
        assert_eq!(place.path.as_ref(), "dir/a?b#c%41 d");
        assert_eq!(place.shown(), "s3://bucket/dir/a?b#c%41 d");
        // An output is never a glob, on disk either.
        let local = Place::parse_output("/tmp/what?", &StorageConfig::default()).unwrap();
        assert_eq!(local.shown(), "/tmp/what?");
        assert!(!local.overlaps(&Place::parse_output("/tmp/other", &StorageConfig::default()).unwrap()));
    }

    #[test]
    fn odd_uris_are_usage_errors() {
        for uri in ["s3:///x", "s3://b/a/../c", "s3://b/a//c", "s3://b/./c", "file://relative/path"] {
            let error = Place::parse_output(uri, &StorageConfig::default()).unwrap_err();
            assert!(matches!(error, Error::Usage(_)), "{uri}: {error:?}");
        }
    }

    #[test]
    fn credentials_in_a_uri_are_never_shown() {
        for uri in ["s3://key:secret@/x", "s3://key:secret@bucket/x"] {
            let error = Place::parse_output(uri, &StorageConfig::default()).unwrap_err();
            assert!(matches!(error, Error::Usage(_)) && !error.to_string().contains("secret"), "{error}");
        }
    }

    #[test]
    fn symlinks_are_resolved_before_places_are_compared() {
        let dir = std::env::temp_dir().join(format!("tables-symlink-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("nodes")).unwrap();
        std::os::unix::fs::symlink(dir.join("nodes"), dir.join("link")).unwrap();
        let place =
            |p: std::path::PathBuf| Place::parse_output(p.to_str().unwrap(), &StorageConfig::default()).unwrap();
        assert!(place(dir.join("link")).overlaps(&place(dir.join("nodes"))));
        assert!(place(dir.join("link/new")).overlaps(&place(dir.join("nodes"))));
        assert!(!place(dir.join("linked")).overlaps(&place(dir.join("nodes"))));
        // Symlinks to directories that a stage will make: relative, through a chain, inside one.
        std::os::unix::fs::symlink("later", dir.join("soon")).unwrap();
        std::os::unix::fs::symlink(dir.join("soon"), dir.join("sooner")).unwrap();
        std::os::unix::fs::symlink("later/sub", dir.join("within")).unwrap();
        assert!(place(dir.join("soon")).overlaps(&place(dir.join("later"))));
        assert!(place(dir.join("sooner/x")).overlaps(&place(dir.join("later"))));
        assert!(place(dir.join("within")).overlaps(&place(dir.join("later"))));
        assert!(!place(dir.join("soon")).overlaps(&place(dir.join("nodes"))));
        // A loop resolves to itself, as written, and ends.
        std::os::unix::fs::symlink("loop-b", dir.join("loop-a")).unwrap();
        std::os::unix::fs::symlink("loop-a", dir.join("loop-b")).unwrap();
        assert!(!place(dir.join("loop-a")).overlaps(&place(dir.join("nodes"))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_local_put_whose_folder_is_gone_is_not_found() {
        let gone = object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(std::io::Error::from(std::io::ErrorKind::NotFound)),
        };
        assert!(folder_gone(&gone));
        let full = object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(std::io::Error::from(std::io::ErrorKind::StorageFull)),
        };
        assert!(!folder_gone(&full));
    }
}
