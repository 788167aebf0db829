//! What a training run reports per epoch: `metrics.jsonl` holds what was learned (the same
//! bytes for the same inputs and seeds), `timings.jsonl` how long it took; both number epochs
//! from 1, as the log does. While a run trains they are `metrics-<run>.jsonl` and
//! `timings-<run>.jsonl` in the output, rewritten every epoch; the commit writes them under
//! their own names beside the model, so a run that does not finish never changes a committed
//! model's files.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tables::{Io, Place};

use crate::error::Error;

pub const METRICS: &str = "metrics.jsonl";
pub const TIMINGS: &str = "timings.jsonl";

/// One epoch's line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    /// 1-based.
    pub epoch: usize,
    /// What the three scores below measure: `accuracy` (class labels) or `micro_f1` (multi-hot
    /// targets).
    pub metric: String,
    pub train_loss: f64,
    pub train_accuracy: f64,
    pub valid_accuracy: f64,
    pub test_accuracy: f64,
}

/// One epoch's line of `timings.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochTiming {
    pub epoch: usize,
    pub seconds: f64,
    pub records_per_second: f64,
    /// Time this worker's compute waited for batches this epoch (worker 0 reports).
    pub wait_seconds: f64,
}

/// The metric's name for a model's targets.
pub fn metric_name(multi_label: bool) -> &'static str {
    if multi_label { "micro_f1" } else { "accuracy" }
}

/// Worker 0's writer of the two files and the epoch log line. Each epoch rewrites both files
/// whole (one put each: object stores have no append), from lines kept here: a few hundred
/// bytes an epoch.
pub struct MetricsLog {
    io: Arc<Io>,
    dir: Place,
    run: String,
    epochs: usize,
    /// The text of each file so far.
    metrics: String,
    timings: String,
}

impl MetricsLog {
    /// Starts run `run`'s log in `dir`, after the lines of the run it resumes (`earlier`).
    pub fn open(io: Arc<Io>, dir: &Place, run: &str, epochs: usize, earlier: Option<(String, String)>) -> Self {
        let (metrics, timings) = earlier.unwrap_or_default();
        MetricsLog { io, dir: dir.clone(), run: run.to_owned(), epochs, metrics, timings }
    }

    /// The text of `metrics.jsonl` and `timings.jsonl` so far.
    pub fn texts(&self) -> (String, String) {
        (self.metrics.clone(), self.timings.clone())
    }

    pub fn write(&mut self, m: &EpochMetrics, t: &EpochTiming) -> Result<(), Error> {
        tracing::info!(
            "train: epoch {}/{}: loss {:.4}, {} train {:.3}, valid {:.3}, test {:.3}, {:.2}s, {:.0} records/s, waited {:.3}s for data",
            m.epoch,
            self.epochs,
            m.train_loss,
            m.metric,
            m.train_accuracy,
            m.valid_accuracy,
            m.test_accuracy,
            t.seconds,
            t.records_per_second,
            t.wait_seconds
        );
        append(&mut self.metrics, m)?;
        append(&mut self.timings, t)?;
        self.io.block_on(async {
            self.dir.child(&format!("metrics-{}.jsonl", self.run)).put(self.metrics.clone().into_bytes()).await?;
            self.dir.child(&format!("timings-{}.jsonl", self.run)).put(self.timings.clone().into_bytes()).await
        })?;
        Ok(())
    }
}

fn append(text: &mut String, line: &impl Serialize) -> Result<(), Error> {
    text.push_str(&serde_json::to_string(line).map_err(|e| Error::Internal(e.to_string()))?);
    text.push('\n');
    Ok(())
}
