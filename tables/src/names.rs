//! The names runs of this project give what they write into an output directory, and how a name
//! found there is told apart from files this project did not write. Cleanup removes only files
//! whose names say which run wrote them (see [`crate::commit`]); anything else under an output is
//! foreign: never deleted, never read.
//!
//! **What a reader sees.** A committed table's directory holds its parts
//! (`part-<run>-….parquet`), [`MANIFEST`] and an empty `_SUCCESS`, and nothing else once no run
//! is writing there: every file whose name does not start with `_` or `.` is a committed part
//! (the Hadoop and Spark rule, which pyarrow, pandas and Spark follow), every non-empty file is a
//! Parquet file of the table's schema (polars reads every non-empty file of a directory and
//! refuses one of another extension, whatever its name), and [`MANIFEST`] holds no rows. What a
//! run writes before its commit lies under [`TEMPORARY`]`/<run>/` with names that do not end in
//! `.parquet`, so that no glob over `*.parquet` or `**/*.parquet` finds it.

/// Hex digits in a run id.
pub const RUN_ID_LEN: usize = 19;

/// Stems of the files a run names after itself: `<stem>-<run>` then `-` or `.`.
const RUN_STEMS: [&str; 5] = ["part", "model", "metrics", "timings", "checkpoint"];

/// The manifest of a committed output (see [`crate::manifest`]): a Parquet file of no rows, with
/// the table's schema, whose footer holds the manifest. Its create-if-absent write is the commit.
pub const MANIFEST: &str = "_manifest.parquet";

/// The directory of runs that have not committed: `_temporary/<run>/` holds a run's marker
/// ([`MARKER`]) and what it stages for its commit ([`staged_name`], [`upload_name`]), as in
/// Hadoop's output committer.
pub const TEMPORARY: &str = "_temporary";

/// A run's marker inside its [`TEMPORARY`] directory (see [`crate::lease`]).
pub const MARKER: &str = "run.json";

/// The job's report (see the `report` crate) in a model directory, whose files keep their names;
/// a table's directory holds none (a page there is a file polars refuses).
pub const REPORT: &str = "report.html";

/// How a report starts: a file named [`REPORT`] that does not is someone else's.
pub const REPORT_SIGNATURE: &str = "<!DOCTYPE html>\n<!-- graphflat report -->";

/// No report is larger: a larger file is someone else's, and is not read.
pub const REPORT_MAX_BYTES: u64 = 16 << 20;

/// The prefix of the markers earlier versions wrote beside the parts (`_run-<run>.json`):
/// cleanup still knows them.
pub const LEGACY_MARKER_PREFIX: &str = "_run-";

/// A run id, unique in practice and ordered by start time: the start in milliseconds (11 hex
/// digits) and a random part (8). Worker 0 makes it and every worker of every process uses
/// that one.
pub fn new_run_id() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let noise = std::collections::hash_map::RandomState::new();
    let random = std::hash::BuildHasher::hash_one(&noise, (std::process::id(), now.as_nanos()));
    format!("{:011x}{:08x}", now.as_millis(), random as u32)
}

/// The directory of run `run`'s marker and staged files, relative to its output.
pub fn run_dir(run: &str) -> String {
    format!("{TEMPORARY}/{run}")
}

/// Where run `run` stages the file that its commit names `name`, relative to the output: a name
/// that no `*.parquet` glob matches.
pub fn staged_name(run: &str, name: &str) -> String {
    format!("{}/{name}.staged", run_dir(run))
}

/// Where run `run` records the multipart upload of `name` (an S3 part that appears at the
/// commit), so that a later run can abort it when this one dies.
pub fn upload_name(run: &str, name: &str) -> String {
    format!("{}/{name}.upload", run_dir(run))
}

/// What a name directly under an output directory is, to this project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'a> {
    /// [`MANIFEST`], or `_SUCCESS` (empty beside it; a JSON manifest in earlier versions).
    Manifest,
    /// `_run-<run>.json`, an earlier version's marker of a run that had not finished.
    Marker(&'a str),
    /// A file run `.0` named after itself (`part-<run>-00000-00000.parquet`,
    /// `metrics-<run>.jsonl`, an earlier version's staging copy `part-<run>-….parquet#direct`).
    Run(&'a str),
    /// [`TEMPORARY`]: the markers and staged files of runs that have not committed.
    Temporary,
    /// One of the fixed names of the stage's output layout.
    Fixed,
    /// A file or directory this project did not write.
    Foreign,
}

/// The files and directories a stage's output holds besides run-named files and markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Files with fixed names (a model's `model.json`).
    pub files: &'static [&'static str],
    /// Directories of run-named files (a model's `checkpoints/`).
    pub dirs: &'static [&'static str],
    /// Those of `dirs` that hold a table (a model's `embeddings/`): readers open them as one, so
    /// nothing but the runs' parts may be there.
    pub tables: &'static [&'static str],
}

impl Layout {
    /// Part files, [`MANIFEST`] and `_SUCCESS`: the layout of every table.
    pub const TABLE: Layout = Layout { files: &[], dirs: &[], tables: &[] };

    /// What `name`, directly under an output of this layout, is.
    pub fn classify<'a>(&self, name: &'a str) -> Name<'a> {
        if name == schemas::SUCCESS_MARKER || name == MANIFEST {
            return Name::Manifest;
        }
        if name == TEMPORARY {
            return Name::Temporary;
        }
        if let Some(run) = name.strip_prefix(LEGACY_MARKER_PREFIX).and_then(|rest| rest.strip_suffix(".json"))
            && is_run_id(run)
        {
            return Name::Marker(run);
        }
        if let Some(run) = run_of(name) {
            return Name::Run(run);
        }
        // An earlier version's report in a table's directory is ours to remove.
        if name == REPORT || self.files.contains(&name) || self.dirs.contains(&name) {
            return Name::Fixed;
        }
        Name::Foreign
    }
}

/// The run a run-named file belongs to (in a folder too: `embeddings/part-<run>-...`).
pub fn run_of(name: &str) -> Option<&str> {
    let name = name.rsplit_once('/').map_or(name, |(_, file)| file);
    let (stem, rest) = name.split_once('-')?;
    if !RUN_STEMS.contains(&stem) || rest.len() <= RUN_ID_LEN {
        return None;
    }
    let (run, after) = rest.split_at(RUN_ID_LEN);
    (is_run_id(run) && after.starts_with(['-', '.'])).then_some(run)
}

/// Whether `name` names a file of a table's own directory: not empty, not `.` or `..`, no
/// separator and no NUL (a manifest naming `../x` would send a reader out of the table).
pub fn is_plain_name(name: &str) -> bool {
    !matches!(name, "" | "." | "..") && !name.contains(['/', '\\', '\0'])
}

/// Whether `name` is what a manifest may list: a plain name ([`is_plain_name`]), or one in a
/// folder of the directory (`embeddings/part-....parquet`, a model's learned table), each of
/// the two plain: never out of the directory.
pub fn is_listed_name(name: &str) -> bool {
    match name.split_once('/') {
        None => is_plain_name(name),
        Some((folder, file)) => is_plain_name(folder) && is_plain_name(file),
    }
}

/// Whether `s` is a run id (a directory of [`TEMPORARY`] is named by one).
pub fn is_run_id(s: &str) -> bool {
    s.len() == RUN_ID_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_in_their_directory() {
        assert!(is_plain_name("part-0.parquet") && is_plain_name("..x") && is_plain_name("a b?*"));
        assert!(is_listed_name("embeddings/part-0.parquet") && is_listed_name("part-0.parquet"));
        for name in ["../x", "a/../b", "a/b/c", "/x", "a/", "a\\b/c"] {
            assert!(!is_listed_name(name), "{name:?}");
        }
        for name in ["", ".", "..", "../x", "a/b", "/abs", "a\\b", "a\0b"] {
            assert!(!is_plain_name(name), "{name:?}");
        }
    }

    #[test]
    fn run_named_files_are_told_from_foreign_ones() {
        let run = new_run_id();
        assert_eq!(run.len(), RUN_ID_LEN);
        let layout = Layout { files: &["model.json"], dirs: &["checkpoints"], tables: &[] };
        let ours = [
            format!("part-{run}-00000-00001.parquet"),
            format!("part-{run}-00003.parquet"),
            format!("part-{run}-00000-00001.parquet#2"),
            format!("part-{run}-00000-00001.parquet#direct"),
            format!("metrics-{run}.jsonl"),
            format!("model-{run}.bpk"),
            format!("checkpoint-{run}-00001.json"),
        ];
        for name in &ours {
            assert_eq!(layout.classify(name), Name::Run(&run), "{name}");
        }
        assert_eq!(layout.classify(&format!("_run-{run}.json")), Name::Marker(&run));
        assert_eq!(layout.classify("_SUCCESS"), Name::Manifest);
        assert_eq!(layout.classify("_manifest.parquet"), Name::Manifest);
        assert_eq!(layout.classify("_temporary"), Name::Temporary);
        assert_eq!(layout.classify("model.json"), Name::Fixed);
        for foreign in [
            "part-0.parquet",
            "part-00000.parquet",
            "other",
            "checkpoints",
            "model.json.bak",
            "_run-xyz.json",
            "_temporary2",
            &format!("part-{}-0.parquet", run.to_uppercase()),
            &format!("part-{run}"),
            &format!("parts-{run}-0.parquet"),
        ] {
            assert_eq!(Layout::TABLE.classify(foreign), Name::Foreign, "{foreign}");
        }
    }

    /// What a run writes before its commit is hidden from every directory reader: under a
    /// `_`-prefixed directory, and named so that no `*.parquet` glob matches it.
    #[test]
    fn staged_names_are_hidden_from_globs() {
        let run = new_run_id();
        let name = format!("part-{run}-00000-00000.parquet");
        for staged in [staged_name(&run, &name), upload_name(&run, &name), format!("{}/{MARKER}", run_dir(&run))] {
            assert!(staged.starts_with("_temporary/"), "{staged}");
            assert!(!staged.ends_with(".parquet"), "{staged}");
        }
    }

    #[test]
    fn run_ids_sort_by_start_time() {
        let first = new_run_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(new_run_id() > first);
    }
}
