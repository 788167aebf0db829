//! The names directly under an output directory, as the commit's checks and cleanup see them:
//! files, directories, and anything else (a symlink is never followed).

use object_store::ObjectStoreExt;
use object_store::path::Path;

use crate::error::Error;
use crate::names::{Layout, Name};
use crate::place::Place;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    /// A symlink, or anything else that is neither.
    Other,
}

/// A name directly under a directory.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) path: Path,
    /// On the local file system, the file's real path (object_store's paths escape some
    /// characters of local names).
    pub(crate) local: Option<std::path::PathBuf>,
    pub(crate) kind: Kind,
}

impl Entry {
    /// Whether this project may have written it: a file with one of its names, or a directory
    /// of the layout, or `_temporary/`.
    pub(crate) fn ours(&self, layout: &Layout) -> bool {
        match (layout.classify(&self.name), self.kind) {
            (Name::Foreign, _) | (_, Kind::Other) => false,
            (Name::Temporary, Kind::Dir) => true,
            (Name::Fixed, Kind::Dir) => layout.dirs.contains(&self.name.as_str()),
            (_, Kind::Dir) => false,
            (_, Kind::File) => true,
        }
    }
}

/// The names directly under `dir`, without following symlinks; none if it does not exist.
pub(crate) async fn entries(dir: &Place) -> Result<Vec<Entry>, Error> {
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
    let listed = dir.list_here().await?;
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

/// Removes `files` of `output` (best effort: a failure is logged).
pub(crate) async fn remove(output: &Place, files: &[Entry]) {
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
