//! The report of a `graphflat run` (see the `report` crate): what each stage did, kept as the
//! job goes, then written, succeeded or failed, as `report.html` into the job's model directory
//! and to `[report] output`. A table's directory gets none: every reader of a table must find
//! only Parquet files there (polars refuses a directory that holds a page).
//!
//! A report goes only where this project may write: a model directory some run committed, or
//! one this process took a run's lease on (its output check passed: it is not an input, nor
//! holds foreign files unless `overwrite` keeps them) and no other run committed since, and
//! `[report] output`, which lies outside every table ([`check_place`]). A report never changes
//! the job's result: a report that cannot be written is a warning. Only process 0 writes it.

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

    /// Writes the report into the model directory it may go to and to `page` (`[report]
    /// output`); returns where it went. Problems are logged, never returned.
    pub fn write(self, io: &Io, job: Job, page: Option<Place>) -> Vec<String> {
        let (stages, outputs): (Vec<StageRun>, Vec<Vec<Place>>) = self.stages.into_iter().unzip();
        let models = stages
            .iter()
            .zip(outputs)
            .filter(|(run, _)| run.stage == Stage::Train)
            .flat_map(|(run, places)| places.into_iter().map(|p| (run.outcome.clone(), p)))
            .filter(|(outcome, output)| *outcome == Outcome::Committed || unchanged_since_lease(io, output))
            .map(|(_, output)| output.child(REPORT));
        let places: Vec<Place> = models.chain(page).collect();
        let html = report::render(&Report { job: Some(job), stages });
        let mut written = Vec::new();
        for place in places {
            match io.block_on(report::write(&place, &html)) {
                Ok(()) => written.push(place.shown()),
                Err(e) => tracing::warn!("the job's report was not written: {e}"),
            }
        }
        written
    }
}

/// Whether this process took a lease on the model directory `output` and no other run committed
/// there since: a failed run's page must not replace the page of a run that won the output.
fn unchanged_since_lease(io: &Io, output: &Place) -> bool {
    let Some(found) = tables::lease::leased_here(output) else { return false };
    let now = io.block_on(tables::commit::read_manifest(output)).ok().flatten().map(|m| m.run);
    now == found
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
    refuse_table_dirs(&io, &place)?;
    io.block_on(report::write(&place, &report::render(&report))).map_err(|e| match e {
        report::Error::Foreign(_) => Exit::new(Cause::CantCreate, e),
        report::Error::Store(e) => Exit::new(e.cause(), e),
    })?;
    println!("report of {} outputs: {}", report.stages.len(), place.shown());
    Ok(())
}

/// Whether the page `out` would lie in a table's directory (one holding a manifest or Parquet
/// files, a model's aside), whose readers would take it for a data file or refuse (polars).
fn in_table_dir(io: &Io, out: &Place) -> bool {
    let Some(path) = out.local_dir() else {
        // A store: the directory's manifest or _SUCCESS says.
        let Some(dir) = out.parent() else { return false };
        let marker = |name: &str| io.block_on(dir.child(name).exists());
        return marker(tables::names::MANIFEST) || marker(schemas::SUCCESS_MARKER);
    };
    let Some(dir) = path.parent() else { return false };
    let names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let model = names.iter().any(|n| n.starts_with("model") && n.ends_with(gnn::io::META));
    let table = names.iter().any(|n| n == schemas::SUCCESS_MARKER || n.ends_with(".parquet"));
    table && !model
}

/// A page inside a table's directory (see [`in_table_dir`]), or in a folder inside any
/// committed output (`tables::guard`): refused.
fn refuse_table_dirs(io: &Io, out: &Place) -> crate::Result<()> {
    if let Some((dir, what)) = out.parent().and_then(|d| io.block_on(tables::guard::output_above(&d))) {
        return Err(Exit::new(
            Cause::CantCreate,
            anyhow::anyhow!(
                "{} lies inside {}, which holds {what}; a report is never written into another output: choose a \
                 place outside it",
                out.shown(),
                dir.shown()
            ),
        ));
    }
    match in_table_dir(io, out) {
        true => Err(Exit::new(
            Cause::CantCreate,
            anyhow::anyhow!(
                "{} lies in a table's directory, whose readers would take it for a data file or refuse the \
                 directory; choose a place outside it",
                out.shown()
            ),
        )),
        false => Ok(()),
    }
}

/// Checks `[report] output` against the job's tables: a page inside a table's directory would
/// break its readers (exit 64). A model's directory may hold it.
pub fn check_place(page: &Place, job: &schemas::JobFile, io: &Io) -> crate::Result<()> {
    let mut tables: Vec<&str> = Vec::new();
    if let Some(c) = &job.generate {
        tables.push(&c.output);
    }
    if let Some(c) = &job.flatten {
        tables.extend([c.output.as_str(), c.nodes.as_str(), c.edges.as_str()]);
    }
    if let Some(c) = &job.train {
        tables.extend(c.inputs());
    }
    if let Some(c) = &job.infer {
        tables.extend([c.output.as_str(), c.nodes.as_str(), c.edges.as_str()]);
        tables.extend(c.pairs.as_deref());
        tables.extend(c.pairs_output.as_deref());
    }
    if let Some(graph) = &job.graph {
        tables.extend(graph.node_types.values().map(|t| t.table.as_str()));
        tables.extend(graph.relations.values().map(|r| r.table.as_str()));
    }
    let inside =
        tables.into_iter().filter(|t| !t.is_empty()).filter_map(|t| io.place(t).ok()).find(|t| page.overlaps(t));
    if inside.is_none() && in_table_dir(io, page) {
        return Err(Exit::new(
            Cause::Usage,
            anyhow::anyhow!(
                "[report] output {} lies in a table's directory, whose readers would take the page for a data file; \
                 choose a place outside it",
                page.shown()
            ),
        ));
    }
    match inside {
        Some(table) => Err(Exit::new(
            Cause::Usage,
            anyhow::anyhow!(
                "[report] output {} lies in the table {}, whose readers would take the page for a data file; \
                 choose a place outside it",
                page.shown(),
                table.shown()
            ),
        )),
        None => Ok(()),
    }
}
