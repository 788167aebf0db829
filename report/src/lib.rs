//! The job's report: one static HTML page a person looks at before reading logs. It shows,
//! for each stage that ran, what it wrote, how long each phase took, peak memory per process,
//! and its charts: a flatten's in-degree distribution (log-log, hub threshold marked) and
//! record sizes; a training's loss and scores per epoch (best epoch marked) and time per epoch;
//! an inference's predicted classes or pair scores. `graphflat run` writes it as `report.html`
//! into every output the job wrote, with the job file, the cluster and the exit status, for a
//! failed job too; `graphflat report PATH...` builds one from committed outputs.
//!
//! - **Self-contained**: inline CSS and SVG ([`chart`], drawn by plotters' SVG backend), no
//!   script, nothing fetched: it opens offline and attaches to a ticket.
//! - **Exact**: a chart carries the values it draws in its `data-chart` attribute, read from
//!   the run's manifest facts (`schemas::facts`) and a model's `metrics.jsonl` and
//!   `timings.jsonl` ([`run`]), never re-derived from pixels.
//! - **Harmless**: a report never fails a job ([`write`] returns an error the caller logs), and
//!   never replaces a `report.html` it did not write ([`page::SIGNATURE`]).

pub mod chart;
pub mod escape;
pub mod page;
pub mod run;

pub use page::render;
pub use run::{Job, Outcome, Report, StageRun};

use tables::Place;

/// Why a report was not written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} exists and is not a graphflat report; it is left as it is")]
    Foreign(String),
    #[error(transparent)]
    Store(#[from] tables::Error),
}

/// Writes `html` to `place` (one put: readers see the old page or the new one), unless
/// something there is not a report of this project.
pub async fn write(place: &Place, html: &str) -> Result<(), Error> {
    if (place.is_special_local_file() || place.size().await?.is_some())
        && !tables::report_page::is_report(place).await?
    {
        return Err(Error::Foreign(place.shown()));
    }
    place.put(html.as_bytes().to_vec()).await?;
    Ok(())
}
