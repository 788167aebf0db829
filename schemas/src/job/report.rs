//! The `[report]` table: where the job's report page goes (see the `report` crate). A table's
//! directory holds only its data, so the page goes into the model directory of a job that
//! trains, and wherever `output` says.

use serde::{Deserialize, Serialize};

use super::JobError;

/// The `[report]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    /// The page's path or URI (a file, for example `data/job/report.html`), outside every
    /// table of the job.
    pub output: String,
}

impl ReportConfig {
    pub fn check(&self) -> Result<(), JobError> {
        if self.output.is_empty() || self.output.ends_with('/') {
            return Err(JobError::invalid("report", "output must name a file (for example data/job/report.html)"));
        }
        Ok(())
    }
}
