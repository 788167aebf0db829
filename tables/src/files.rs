//! The files of a table, as every reader of this project takes them:
//!
//! - a single file;
//! - a committed output (a manifest, see [`crate::manifest`]): the parts it lists and nothing
//!   else, each checked against the directory before anything is read (there, a regular file
//!   of the listed size) and then as it is read ([`Listed`]: its rows, and its bytes block by
//!   block, in [`crate::fetch`]);
//! - a directory: every file below it, skipping hidden and `_`-prefixed names (the Hadoop and
//!   Spark convention for markers and temporary files) and an earlier version's `report.html`
//!   directly in it;
//! - a glob: the files of its directory whose names match.
//!
//! **A table replaced while it is read.** On a local disk a reader holds the version it opened
//! ([`crate::pin`]) and reads it whole whatever commits meanwhile. Elsewhere (a store, or an
//! output published in place): runs never reuse a part's name, and a commit removes the parts
//! of the run it replaced. A reader that finds a part of its manifest gone reads the manifest
//! again: when another run's manifest stands there now, the reader fails with one retryable
//! error (75) that names that run ([`replaced`]); running the job again reads the new output
//! whole. A reader never mixes two runs' parts.

use std::collections::HashMap;
use std::sync::Arc;

use object_store::ObjectMeta;

use crate::checksum::Expected;
use crate::error::Error;
use crate::manifest::{Manifest, PartEntry, read_manifest};
use crate::place::Place;

/// One file of a table: the object, and what it checks against when a manifest lists it.
#[derive(Debug, Clone)]
pub struct TableFile {
    pub meta: ObjectMeta,
    pub listed: Option<Arc<Listed>>,
}

/// A part as its manifest lists it.
#[derive(Debug)]
pub struct Listed {
    /// The run whose manifest lists it.
    pub run: String,
    pub entry: PartEntry,
    pub expected: Arc<Expected>,
}

/// The files of `table`, in name order (see the module doc).
pub async fn table_files(table: &Place) -> Result<Vec<TableFile>, Error> {
    if !table.is_glob() && table.local_dir().is_some_and(|d| !d.exists()) {
        // Three renames standing in for the exchange, stopped between the first two: the
        // version beside the directory goes back in its place (crate::switch).
        crate::commit::settle(table, &crate::names::Layout::TABLE).await?;
    }
    if !table.is_glob()
        && let Some(manifest) = read_manifest(table).await?
    {
        check_listed(table, &manifest).await?;
        crate::together::opened(table, &manifest)?;
        return Ok(listed(table, &manifest));
    }
    let mut files: Vec<ObjectMeta> = match table.list_files().await? {
        files if files.is_empty() && !table.is_glob() => match table.head().await? {
            Some(meta) => vec![meta],
            None => {
                let what = if table.local_dir().is_some_and(|d| d.is_dir()) {
                    "no data files in this directory"
                } else {
                    "does not exist"
                };
                return Err(Error::NoInput(format!("{}: {what}", table.shown())));
            }
        },
        files => files.into_iter().filter(|m| table.is_data_file(&m.location)).collect(),
    };
    files.sort_by(|a, b| a.location.cmp(&b.location));
    if files.is_empty() {
        let what = if table.is_glob() { "no file matches" } else { "no data files in this directory" };
        return Err(Error::NoInput(format!("{}: {what}", table.shown())));
    }
    Ok(files.into_iter().map(|meta| TableFile { meta, listed: None }).collect())
}

/// The parts a manifest lists, as objects of the table's directory of the listed sizes.
/// Listed parts carry no modification time; readers do not use it.
fn listed(table: &Place, manifest: &Manifest) -> Vec<TableFile> {
    listed_entries(table, &manifest.run, &manifest.parts)
}

/// `entries` of run `run`'s manifest, as [`listed`] gives its parts.
pub(crate) fn listed_entries(table: &Place, run: &str, entries: &[PartEntry]) -> Vec<TableFile> {
    entries
        .iter()
        .map(|p| TableFile {
            meta: ObjectMeta {
                location: table.child(&p.name).path,
                last_modified: chrono::DateTime::UNIX_EPOCH,
                size: p.bytes,
                e_tag: None,
                version: None,
            },
            listed: Some(Arc::new(Listed { run: run.to_owned(), entry: p.clone(), expected: Arc::new(p.expected()) })),
        })
        .collect()
}

/// Checks each part `manifest` lists against the directory: there (or the table was replaced:
/// [`replaced`]), a regular file (a FIFO, socket or device would block its reader, a directory
/// never reads), of the size listed. Sizes come from one listing of the directory on a store,
/// from each file's metadata on disk.
pub(crate) async fn check_listed(table: &Place, manifest: &Manifest) -> Result<(), Error> {
    let sizes = sizes(table, manifest).await?;
    for part in &manifest.parts {
        let shown = table.child(&part.name).shown();
        match sizes.get(part.name.as_str()) {
            None => {
                if let Some(error) = replaced(table, &manifest.run).await {
                    return Err(error);
                }
                return Err(Error::NoInput(format!(
                    "{shown}: missing; the manifest of run {} lists it (removed after its commit?)",
                    manifest.run
                )));
            }
            Some(Size::Special) => return Err(crate::place::not_regular(shown)),
            Some(&Size::Bytes(bytes)) if bytes != part.bytes => {
                return Err(Error::BadData(format!(
                    "{shown}: {bytes} bytes where the manifest of run {} says {}: the part changed after its commit",
                    manifest.run, part.bytes
                )));
            }
            Some(Size::Bytes(_)) => {}
        }
    }
    Ok(())
}

/// What a listed name is in the directory.
enum Size {
    Bytes(u64),
    /// A directory, FIFO, socket or device.
    Special,
}

/// The listed parts found in `table`'s directory, by name.
async fn sizes<'a>(table: &Place, manifest: &'a Manifest) -> Result<HashMap<&'a str, Size>, Error> {
    let mut found = HashMap::new();
    if let Some(dir) = table.local_dir() {
        for part in &manifest.parts {
            let size = match std::fs::metadata(dir.join(&part.name)) {
                Ok(meta) if meta.is_file() => Size::Bytes(meta.len()),
                Ok(_) => Size::Special,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(Error::Read { file: table.child(&part.name).shown(), source }),
            };
            found.insert(part.name.as_str(), size);
        }
        return Ok(found);
    }
    let listing = table.list_here().await?;
    let mut listed: HashMap<String, u64> =
        listing.objects.into_iter().filter_map(|m| m.location.filename().map(|n| (n.to_owned(), m.size))).collect();
    // Parts in a folder (a model's `embeddings/`): one listing of each folder.
    let folders: std::collections::BTreeSet<&str> =
        manifest.parts.iter().filter_map(|p| p.name.split_once('/').map(|(folder, _)| folder)).collect();
    for folder in folders {
        for m in table.child(folder).list_here().await?.objects {
            if let Some(name) = m.location.filename() {
                listed.insert(format!("{folder}/{name}"), m.size);
            }
        }
    }
    for part in &manifest.parts {
        if let Some(&bytes) = listed.get(&part.name) {
            found.insert(part.name.as_str(), Size::Bytes(bytes));
        }
    }
    Ok(found)
}

/// When `table`'s manifest is no longer run `run`'s: the retryable error (75) a reader that
/// started with run `run`'s output ends with, naming the run that replaced it.
pub(crate) async fn replaced(table: &Place, run: &str) -> Option<Error> {
    match read_manifest(table).await {
        Ok(Some(now)) if now.run != run => Some(Error::Retry(format!(
            "{}: run {} replaced this output while this job read it (it was reading run {run}'s); run the job \
             again to read the new one",
            table.shown(),
            now.run
        ))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use schemas::{Cause, StorageConfig};

    use crate::commit::Stage;
    use crate::table::TableWriter;
    use crate::{Io, Place, open_table};

    /// Commits a table of two parts of `rows` rows each to `dir`, replacing any there.
    fn commit(io: &Io, dir: &Place, rows: i64) -> String {
        let writer = TableWriter::start(io, dir, Stage::Generate, &[], true).unwrap();
        for i in 0..2 {
            let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows));
            let batch = RecordBatch::try_from_iter([("node_id", ids)]).unwrap();
            writer.write(i, batch.schema(), &[batch]).unwrap();
        }
        writer.commit().unwrap();
        io.block_on(crate::manifest::read_manifest(dir)).unwrap().unwrap().run
    }

    /// A reader that opened run A's output without a hold on it (as on a store), which run B
    /// then replaced, fails its next read with the retryable error naming B.
    #[test]
    fn a_reader_of_a_replaced_table_fails_with_a_retry_naming_the_new_run() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let root = std::env::temp_dir().join(format!("tables-replaced-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = Place::parse_output(root.to_str().unwrap(), &StorageConfig::default()).unwrap();
        commit(&io, &dir, 10);
        let chunks = Arc::new(crate::chunks::ChunkBuffers::default());
        let files = io.block_on(async {
            let mut files = Vec::new();
            for file in super::table_files(&dir).await.unwrap() {
                files.push(crate::ParquetFile::open(&dir, file, chunks.clone()).await.unwrap());
            }
            files
        });
        let replacing = commit(&io, &dir, 20);
        let error = files[0].read_row_group(&io, 0, |_, _| Ok(())).unwrap_err();
        assert_eq!(error.cause(), Cause::Retry, "{error}");
        assert!(error.to_string().contains(&format!("run {replacing} replaced this output")), "{error}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A reader of this project holds the local version it opened: replaced under it, it reads
    /// that version whole, which stays beside the output (hidden, kept) until the reader ends;
    /// a reader that starts after reads the new version, and the next settle removes the kept
    /// one. Messages name the reader's own path.
    #[test]
    fn a_reader_reads_the_version_it_opened_while_another_replaces_it() {
        let io = Io::new(&StorageConfig::default()).unwrap();
        let parent = std::env::temp_dir().join(format!("tables-held-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&parent);
        let root = parent.join("out");
        let dir = Place::parse_output(root.to_str().unwrap(), &StorageConfig::default()).unwrap();
        let first = commit(&io, &dir, 10);
        let files = open_table(&io, &dir).unwrap();
        assert!(files[0].name().starts_with(&root.display().to_string()), "{}", files[0].name());
        commit(&io, &dir, 20);
        let rows = |files: &[crate::ParquetFile]| {
            let mut read = 0;
            for file in files {
                file.read_row_group(&io, 0, |batch, _| {
                    read += batch.num_rows();
                    Ok(())
                })
                .unwrap();
            }
            read
        };
        assert_eq!(rows(&files), 20, "both parts of run {first}, read after the switch");
        assert_eq!(files[0].run(), Some(first.as_str()));
        let hidden = |p: &std::path::Path| {
            std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect::<Vec<_>>()
        };
        let beside: Vec<String> = hidden(&parent).into_iter().filter(|n| n != "out").collect();
        assert!(beside.len() == 1 && beside[0].starts_with(".out.") && beside[0].ends_with(".kept"), "{beside:?}");
        assert!(beside[0].contains(&first), "named after the run it holds: {beside:?}");

        drop(files);
        let files = open_table(&io, &dir).unwrap();
        assert_eq!(rows(&files), 40);
        io.block_on(crate::commit::settle(&dir, &crate::names::Layout::TABLE)).unwrap();
        assert_eq!(hidden(&parent), vec!["out".to_owned()], "the kept version goes once its reader ended");
        std::fs::remove_dir_all(&parent).unwrap();
    }
}
