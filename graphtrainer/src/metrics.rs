//! What a training run reports per epoch: `metrics.jsonl` holds what was learned (the same
//! bytes for the same inputs and seeds), `timings.jsonl` how long it took; both number epochs
//! from 1, as the log does.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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

/// Worker 0's writer of the two files and the epoch log line.
pub struct MetricsLog {
    dir: PathBuf,
    epochs: usize,
}

impl MetricsLog {
    /// Starts the log in `dir`; a fresh run (`resume` false) drops an old run's lines.
    pub fn open(dir: &Path, epochs: usize, resume: bool) -> Result<Self, Error> {
        if !resume {
            for name in [METRICS, TIMINGS] {
                match std::fs::remove_file(dir.join(name)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(output_error(&dir.join(name), e)),
                    _ => {}
                }
            }
        }
        Ok(MetricsLog { dir: dir.to_owned(), epochs })
    }

    pub fn write(&self, m: &EpochMetrics, t: &EpochTiming) -> Result<(), Error> {
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
        append(&self.dir.join(METRICS), m)?;
        append(&self.dir.join(TIMINGS), t)
    }
}

fn output_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Output(format!("{}: {e}", path.display()))
}

fn append(path: &Path, line: &impl Serialize) -> Result<(), Error> {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| output_error(path, e))?;
    let text = serde_json::to_string(line).map_err(|e| Error::Internal(e.to_string()))?;
    writeln!(file, "{text}").map_err(|e| output_error(path, e))
}
