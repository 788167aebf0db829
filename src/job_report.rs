//! The report of a `graphflat run` (see the `report` crate): what each stage did, kept as the
//! job goes, then written as `report.html` into every output of the job, succeeded or failed.
//!
//! A report goes only where this project may write: an output some run committed, or one this
//! process took a run's lease on (its output check passed: it is not an input, nor holds
//! foreign files unless `overwrite` keeps them). A report never changes the job's result: a
//! report that cannot be written is a warning. Only process 0 writes it.

use report::{Job, Outcome, Report, StageRun};
use schemas::{Cause, StorageConfig};
use tables::commit::Stage;
use tables::names::REPORT;
use tables::{Io, Place};

use crate::exit::{Exit, WithCause};

/// The stages of a job as they end, with the outputs a report may go to.
#[derive(Default)]
pub struct Ledger {
    stages: Vec<(StageRun, Vec<Place>)>,
}

impl Ledger {
    /// A stage that committed `outputs` (the first is its output): its manifest, read back.
    pub fn committed(&mut self, io: &Io, stage: Stage, outputs: Vec<Place>) {
        let Some(first) = outputs.first() else { return };
        let mut run = io.block_on(StageRun::read(first));
        run.stage = stage;
        self.stages.push((run, outputs));
    }

    /// A stage that ran without a table output of its own (`[generate]`), with its facts.
    pub fn done(&mut self, stage: Stage, output: &str, lines: Vec<(String, String)>) {
        let mut run = StageRun::new(stage, &schemas::redact(output), Outcome::Committed);
        run.lines = lines;
        self.stages.push((run, Vec::new()));
    }

    /// A stage that failed; `outputs` are parsed where they could be.
    pub fn failed(&mut self, io: &Io, stage: Stage, output: &str, outputs: Vec<Place>, exit: &Exit) {
        let message = exit.message();
        let mut run = StageRun::new(stage, &schemas::redact(output), Outcome::Failed(message));
        // An earlier run's commit is still what readers of the output get.
        if let Some(first) = outputs.first()
            && let Ok(Some(earlier)) = io.block_on(tables::commit::read_manifest(first))
        {
            run.notes.push(format!("{} still holds the output run {} committed", first.shown(), earlier.run));
        }
        self.stages.push((run, outputs));
    }

    /// A stage the job did not reach, unless it ended already.
    pub fn not_run_unless_seen(&mut self, stage: Stage, output: &str) {
        if !self.stages.iter().any(|(run, _)| run.stage == stage) {
            self.stages.push((StageRun::new(stage, &schemas::redact(output), Outcome::NotRun), Vec::new()));
        }
    }

    /// Writes the report into every output it may go to; returns where it went. Problems are
    /// logged, never returned.
    pub fn write(self, io: &Io, job: Job) -> Vec<String> {
        let (stages, outputs): (Vec<StageRun>, Vec<Vec<Place>>) = self.stages.into_iter().unzip();
        let allowed: Vec<(Outcome, Place)> = stages
            .iter()
            .zip(outputs)
            .flat_map(|(run, places)| places.into_iter().map(|p| (run.outcome.clone(), p)))
            .collect();
        let html = report::render(&Report { job: Some(job), stages });
        let mut written = Vec::new();
        for (outcome, output) in allowed {
            if outcome != Outcome::Committed && !tables::lease::leased_here(&output) {
                continue;
            }
            let place = output.child(REPORT);
            match io.block_on(report::write(&place, &html)) {
                Ok(()) => written.push(place.shown()),
                Err(e) => tracing::warn!("the job's report was not written: {e}"),
            }
        }
        written
    }
}

/// `graphflat report`: the page of committed `outputs`, written to `out`.
pub fn of_outputs(outputs: &[String], out: &str) -> crate::Result<()> {
    // No job file: the environment's store settings.
    let io = Io::new(&StorageConfig::default()).cause(Cause::Internal)?;
    let mut places = Vec::new();
    for uri in outputs {
        let place = io.place(uri).map_err(|e| Exit::new(e.cause(), e))?;
        // A manifest that cannot be read exits by its cause (bad data, a store error); the page
        // would only carry it as a note.
        io.block_on(tables::commit::read_manifest(&place))
            .map_err(|e| Exit::new(e.cause(), anyhow::anyhow!("cannot report on {}: {e}", place.shown())))?;
        places.push(place);
    }
    let report = Report::of_outputs(&io, &places);
    if let Some(run) = report.stages.iter().find(|run| run.manifest.is_none()) {
        let why = run.notes.join("; ");
        return Err(Exit::new(Cause::NoInput, anyhow::anyhow!("cannot report on {}: {why}", run.output)));
    }
    let place = io.output(out).map_err(|e| Exit::new(e.cause(), e))?;
    refuse_table_dirs(&place)?;
    io.block_on(report::write(&place, &report::render(&report))).map_err(|e| match e {
        report::Error::Foreign(_) => Exit::new(Cause::CantCreate, e),
        report::Error::Store(e) => Exit::new(e.cause(), e),
    })?;
    println!("report of {} outputs: {}", report.stages.len(), place.shown());
    Ok(())
}

/// A page named anything but report.html inside a table's directory (one holding `_SUCCESS` or
/// Parquet files) would be read as one of its files: refused.
fn refuse_table_dirs(out: &Place) -> crate::Result<()> {
    let Some(path) = out.local_dir() else { return Ok(()) };
    if path.file_name().is_some_and(|n| n == REPORT) {
        return Ok(());
    }
    let Some(dir) = path.parent() else { return Ok(()) };
    let table = std::fs::read_dir(dir).into_iter().flatten().flatten().any(|entry| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        name == schemas::SUCCESS_MARKER || name.ends_with(".parquet")
    });
    match table {
        true => Err(Exit::new(
            Cause::CantCreate,
            anyhow::anyhow!(
                "{} lies in a table's directory, whose readers would take it for a data file; name it {REPORT} or choose another place",
                out.shown()
            ),
        )),
        false => Ok(()),
    }
}
