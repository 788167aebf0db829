//! What a report shows, and reading it back from outputs: a stage's manifest (`_SUCCESS`, with
//! the run's facts), and a model's `metrics.jsonl` and `timings.jsonl`. Reads are bounded: a
//! file larger than [`MAX_FILE`] is left out with a note, never loaded.

use serde_json::{Map, Value};
use tables::commit::{Manifest, Stage, read_manifest};
use tables::{Io, Place};

/// The largest file a report reads (metrics, timings, an earlier page): no report is larger.
pub const MAX_FILE: u64 = tables::names::REPORT_MAX_BYTES;

/// The files a model's output holds per epoch (graphtrainer's `METRICS` and `TIMINGS`).
pub const METRICS: &str = "metrics.jsonl";
pub const TIMINGS: &str = "timings.jsonl";

/// How a stage of the job ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Its output is committed: the manifest describes this run.
    Committed,
    /// It failed with this message; nothing of it was committed.
    Failed(String),
    /// The job ended before it.
    NotRun,
}

/// One stage of a job run, as the report shows it.
#[derive(Debug, Clone)]
pub struct StageRun {
    pub stage: Stage,
    /// Where it writes, as shown to people.
    pub output: String,
    pub outcome: Outcome,
    /// The committed manifest (with the run's facts) when `Committed`.
    pub manifest: Option<Manifest>,
    /// One object a line of `metrics.jsonl` and `timings.jsonl` (a model's output).
    pub metrics: Vec<Map<String, Value>>,
    pub timings: Vec<Map<String, Value>>,
    /// Facts known without a manifest (`[generate]`'s).
    pub lines: Vec<(String, String)>,
    /// What could not be read, shown on the page.
    pub notes: Vec<String>,
}

impl StageRun {
    pub fn new(stage: Stage, output: &str, outcome: Outcome) -> Self {
        StageRun {
            stage,
            output: output.to_owned(),
            outcome,
            manifest: None,
            metrics: Vec::new(),
            timings: Vec::new(),
            lines: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A committed output, read back: its manifest, and a model's epoch files.
    pub async fn read(place: &Place) -> Self {
        let shown = place.shown();
        let manifest = match read_manifest(place).await {
            Ok(Some(manifest)) => manifest,
            Ok(None) => {
                let mut run = StageRun::new(Stage::Flatten, &shown, Outcome::NotRun);
                run.notes.push(format!("{shown} holds no committed output (no _SUCCESS manifest)"));
                return run;
            }
            Err(e) => {
                let mut run = StageRun::new(Stage::Flatten, &shown, Outcome::NotRun);
                run.notes.push(e.to_string());
                return run;
            }
        };
        let mut run = StageRun::new(manifest.stage, &shown, Outcome::Committed);
        if manifest.stage == Stage::Train {
            run.metrics = run.lines_of(&place.child(METRICS)).await;
            run.timings = run.lines_of(&place.child(TIMINGS)).await;
        }
        if manifest.facts.is_none() {
            run.notes.push(format!("the manifest of {shown} carries no run facts (written by an older version)"));
        }
        run.manifest = Some(manifest);
        run
    }

    /// The JSON objects of a JSON-lines file; a note for a file too large, unreadable or bad.
    async fn lines_of(&mut self, place: &Place) -> Vec<Map<String, Value>> {
        let shown = place.shown();
        if place.is_special_local_file() {
            self.notes.push(format!("{shown}: not a regular file; left out"));
            return Vec::new();
        }
        match place.size().await {
            Ok(Some(size)) if size > MAX_FILE => {
                self.notes.push(format!("{shown}: {size} bytes, over the report's limit of {MAX_FILE}; left out"));
                return Vec::new();
            }
            Ok(None) => return Vec::new(),
            Err(e) => {
                self.notes.push(e.to_string());
                return Vec::new();
            }
            Ok(Some(_)) => {}
        }
        let bytes = match place.get().await {
            Ok(bytes) => bytes.unwrap_or_default(),
            Err(e) => {
                self.notes.push(e.to_string());
                return Vec::new();
            }
        };
        let mut lines = Vec::new();
        for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            match serde_json::from_str::<Map<String, Value>>(line) {
                Ok(object) => lines.push(object),
                Err(e) => {
                    self.notes.push(format!("{shown}, line {}: not a JSON object ({e}); the rest left out", i + 1));
                    break;
                }
            }
        }
        lines
    }
}

/// The job around the stages: what a report written by `graphflat run` adds.
#[derive(Debug, Clone, Default)]
pub struct Job {
    /// The job file as given, and its text.
    pub file: String,
    pub text: String,
    /// "2 processes x 4 workers each".
    pub cluster: String,
    /// The exit code and the error; `None`: the job succeeded.
    pub failure: Option<(i32, String)>,
    /// The binary's version and the commit it was built from.
    pub version: String,
}

/// A whole report: the job (when `graphflat run` writes it) and its stages in order.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub job: Option<Job>,
    pub stages: Vec<StageRun>,
}

impl Report {
    /// The report of committed outputs (`graphflat report PATH...`).
    pub fn of_outputs(io: &Io, places: &[Place]) -> Report {
        let stages = io.block_on(async {
            let mut stages = Vec::new();
            for place in places {
                stages.push(StageRun::read(place).await);
            }
            stages
        });
        Report { job: None, stages }
    }
}
