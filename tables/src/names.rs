//! The names runs of this project give the files they write into an output directory, and how
//! a name found there is told apart from files this project did not write. Cleanup removes
//! only files whose names say which run wrote them (see [`crate::commit`]); anything else under
//! an output is foreign: never deleted, never read.

/// Hex digits in a run id.
pub const RUN_ID_LEN: usize = 19;

/// Stems of the files a run names after itself: `<stem>-<run>` then `-` or `.`.
const RUN_STEMS: [&str; 4] = ["part", "metrics", "timings", "checkpoint"];

/// The job's report (see the `report` crate): in every output the job wrote, whatever its
/// layout, rewritten whole by each job run that writes there.
pub const REPORT: &str = "report.html";

/// How a report starts: a file named [`REPORT`] that does not is someone else's.
pub const REPORT_SIGNATURE: &str = "<!DOCTYPE html>\n<!-- graphflat report -->";

/// No report is larger: a larger file is someone else's, and is not read.
pub const REPORT_MAX_BYTES: u64 = 16 << 20;

/// The prefix of a run's marker (see [`crate::lease`]): `_run-<run>.json`.
pub const MARKER_PREFIX: &str = "_run-";

/// A run id, unique in practice and ordered by start time: the start in milliseconds (11 hex
/// digits) and a random part (8). Worker 0 makes it and every worker of every process uses
/// that one.
pub fn new_run_id() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let noise = std::collections::hash_map::RandomState::new();
    let random = std::hash::BuildHasher::hash_one(&noise, (std::process::id(), now.as_nanos()));
    format!("{:011x}{:08x}", now.as_millis(), random as u32)
}

/// The marker file of run `run`.
pub fn marker_name(run: &str) -> String {
    format!("{MARKER_PREFIX}{run}.json")
}

/// What a name directly under an output directory is, to this project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'a> {
    /// `_SUCCESS`.
    Manifest,
    /// `_run-<run>.json`: a run that has not finished.
    Marker(&'a str),
    /// A file run `.0` named after itself (`part-<run>-00000-00000.parquet`,
    /// `metrics-<run>.jsonl`, a staging copy `part-<run>-….parquet#3`).
    Run(&'a str),
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
}

impl Layout {
    /// Part files and `_SUCCESS`: the layout of every table.
    pub const TABLE: Layout = Layout { files: &[], dirs: &[] };

    /// What `name`, directly under an output of this layout, is.
    pub fn classify<'a>(&self, name: &'a str) -> Name<'a> {
        if name == schemas::SUCCESS_MARKER {
            return Name::Manifest;
        }
        if let Some(run) = name.strip_prefix(MARKER_PREFIX).and_then(|rest| rest.strip_suffix(".json"))
            && is_run_id(run)
        {
            return Name::Marker(run);
        }
        if let Some(run) = run_of(name) {
            return Name::Run(run);
        }
        if name == REPORT || self.files.contains(&name) || self.dirs.contains(&name) {
            return Name::Fixed;
        }
        Name::Foreign
    }
}

/// The run a run-named file belongs to.
pub fn run_of(name: &str) -> Option<&str> {
    let (stem, rest) = name.split_once('-')?;
    if !RUN_STEMS.contains(&stem) || rest.len() <= RUN_ID_LEN {
        return None;
    }
    let (run, after) = rest.split_at(RUN_ID_LEN);
    (is_run_id(run) && after.starts_with(['-', '.'])).then_some(run)
}

fn is_run_id(s: &str) -> bool {
    s.len() == RUN_ID_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_named_files_are_told_from_foreign_ones() {
        let run = new_run_id();
        assert_eq!(run.len(), RUN_ID_LEN);
        let layout = Layout { files: &["model.json"], dirs: &["checkpoints"] };
        let ours = [
            format!("part-{run}-00000-00001.parquet"),
            format!("part-{run}-00003.parquet"),
            format!("part-{run}-00000-00001.parquet#2"),
            format!("part-{run}-00000-00001.parquet#direct"),
            format!("metrics-{run}.jsonl"),
            format!("checkpoint-{run}-00001.json"),
        ];
        for name in &ours {
            assert_eq!(layout.classify(name), Name::Run(&run), "{name}");
        }
        assert_eq!(layout.classify(&marker_name(&run)), Name::Marker(&run));
        assert_eq!(layout.classify("_SUCCESS"), Name::Manifest);
        assert_eq!(layout.classify("model.json"), Name::Fixed);
        for foreign in [
            "part-0.parquet",
            "part-00000.parquet",
            "other",
            "checkpoints",
            "model.json.bak",
            "_run-xyz.json",
            &format!("part-{}-0.parquet", run.to_uppercase()),
            &format!("part-{run}"),
            &format!("parts-{run}-0.parquet"),
        ] {
            assert_eq!(Layout::TABLE.classify(foreign), Name::Foreign, "{foreign}");
        }
    }

    #[test]
    fn run_ids_sort_by_start_time() {
        let first = new_run_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(new_run_id() > first);
    }
}
