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
use crate::phases::Phases;
use crate::rank::RankScores;

pub const METRICS: &str = "metrics.jsonl";
pub const TIMINGS: &str = "timings.jsonl";

/// What an epoch's scores measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Class labels: correct over labeled.
    Accuracy,
    /// Multi-hot targets: 2 TP over 2 TP + FP + FN.
    MicroF1,
    /// Link models: the ROC AUC of positives against negatives (with MRR and Hits@K beside it).
    Auc,
}

impl Metric {
    /// The metric of a node model's targets.
    pub fn of(multi_label: bool) -> Self {
        if multi_label { Metric::MicroF1 } else { Metric::Accuracy }
    }

    /// Its name in `metrics.jsonl`: the `metric` value, and the suffix of the score keys.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Accuracy => "accuracy",
            Metric::MicroF1 => "micro_f1",
            Metric::Auc => "auc",
        }
    }
}

/// An epoch's scores: a node model's on the three splits, or a link model's ranking metrics on
/// the validation and test edges.
#[derive(Debug, Clone, PartialEq)]
pub enum Scores {
    Node { metric: Metric, train: f64, valid: f64, test: f64 },
    Link { valid: RankScores, test: RankScores },
}

/// One epoch's line of `metrics.jsonl`. Node models: `epoch`, `metric`, `train_loss`, then the
/// scores keyed by the metric's name (`train_accuracy`, `valid_accuracy`, `test_accuracy` for
/// class labels; `train_micro_f1`, `valid_micro_f1`, `test_micro_f1` for multi-hot targets).
/// Link models: `epoch`, `metric` (`auc`), `loss`, then `valid_auc`, `test_auc`, `valid_mrr`,
/// `test_mrr`, `valid_hits@10`, `test_hits@10`, `valid_hits@50`, `test_hits@50` (null where a
/// split has no positive or no negative).
#[derive(Debug, Clone, PartialEq)]
pub struct EpochMetrics {
    /// 1-based.
    pub epoch: usize,
    pub train_loss: f64,
    pub scores: Scores,
}

impl EpochMetrics {
    pub fn metric(&self) -> Metric {
        match self.scores {
            Scores::Node { metric, .. } => metric,
            Scores::Link { .. } => Metric::Auc,
        }
    }

    /// The validation score early stopping watches: accuracy, micro-F1, or AUC.
    pub fn valid(&self) -> f64 {
        match &self.scores {
            Scores::Node { valid, .. } => *valid,
            Scores::Link { valid, .. } => valid.auc,
        }
    }

    /// The test score reported beside it.
    pub fn test(&self) -> f64 {
        match &self.scores {
            Scores::Node { test, .. } => *test,
            Scores::Link { test, .. } => test.auc,
        }
    }

    /// The scores part of the epoch's log line.
    fn log_text(&self) -> String {
        match &self.scores {
            Scores::Node { metric, train, valid, test } => {
                format!("{} train {train:.3}, valid {valid:.3}, test {test:.3}", metric.name())
            }
            Scores::Link { valid, test } => {
                // A split without pairs has no scores (metrics.jsonl holds nulls).
                let split = |s: &RankScores| match s.auc.is_nan() {
                    true => "none".to_owned(),
                    false => {
                        format!("auc {:.3} mrr {:.3} hits@10 {:.3} hits@50 {:.3}", s.auc, s.mrr, s.hits10, s.hits50)
                    }
                };
                format!("valid {}, test {}", split(valid), split(test))
            }
        }
    }
}

impl Serialize for EpochMetrics {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("epoch", &self.epoch)?;
        map.serialize_entry("metric", self.metric().name())?;
        match &self.scores {
            Scores::Node { metric, train, valid, test } => {
                let name = metric.name();
                map.serialize_entry("train_loss", &self.train_loss)?;
                map.serialize_entry(&format!("train_{name}"), train)?;
                map.serialize_entry(&format!("valid_{name}"), valid)?;
                map.serialize_entry(&format!("test_{name}"), test)?;
            }
            Scores::Link { valid, test } => {
                map.serialize_entry("loss", &self.train_loss)?;
                for ((key, v), (_, t)) in valid.named().into_iter().zip(test.named()) {
                    map.serialize_entry(&format!("valid_{key}"), &v)?;
                    map.serialize_entry(&format!("test_{key}"), &t)?;
                }
            }
        }
        map.end()
    }
}

/// One epoch's line of `timings.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochTiming {
    pub epoch: usize,
    pub seconds: f64,
    pub records_per_second: f64,
    /// Time this worker's compute waited for batches this epoch (worker 0 reports).
    pub wait_seconds: f64,
    /// Where worker 0's training steps spent their time (`build_seconds`, `tensors_seconds`,
    /// `forward_seconds`, `backward_seconds`, `read_seconds`, `exchange_seconds`); evaluation
    /// is the rest.
    #[serde(flatten)]
    pub phases: Phases,
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
    /// What an epoch's rate counts, in its log line: records, or nodes in full-graph training
    /// (which waits for no data, so its line leaves the wait out).
    unit: &'static str,
}

impl MetricsLog {
    /// Starts run `run`'s log in `dir`, after the lines of the run it resumes (`earlier`).
    pub fn open(io: Arc<Io>, dir: &Place, run: &str, epochs: usize, earlier: Option<(String, String)>) -> Self {
        let (metrics, timings) = earlier.unwrap_or_default();
        MetricsLog { io, dir: dir.clone(), run: run.to_owned(), epochs, metrics, timings, unit: "records" }
    }

    /// The log with epoch lines that count nodes (full-graph training).
    pub fn counting_nodes(mut self) -> Self {
        self.unit = "nodes";
        self
    }

    /// The text of `metrics.jsonl` and `timings.jsonl` so far.
    pub fn texts(&self) -> (String, String) {
        (self.metrics.clone(), self.timings.clone())
    }

    pub fn write(&mut self, m: &EpochMetrics, t: &EpochTiming) -> Result<(), Error> {
        let wait =
            if self.unit == "records" { format!(", waited {:.3}s for data", t.wait_seconds) } else { String::new() };
        tracing::info!(
            "train: epoch {}/{}: loss {:.4}, {}, {:.2}s, {:.0} {}/s{wait}; steps: {}",
            m.epoch,
            self.epochs,
            m.train_loss,
            m.log_text(),
            t.seconds,
            t.records_per_second,
            self.unit,
            t.phases.log_text()
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
    text.push_str(
        &serde_json::to_string(line).map_err(|source| tables::Error::Encode { what: "metrics line", source })?,
    );
    text.push('\n');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_keys_name_the_metric() {
        let line = |metric| {
            let m = EpochMetrics {
                epoch: 3,
                train_loss: 0.5,
                scores: Scores::Node { metric, train: 0.75, valid: 0.25, test: 1.0 },
            };
            serde_json::to_string(&m).unwrap()
        };
        assert_eq!(
            line(Metric::Accuracy),
            r#"{"epoch":3,"metric":"accuracy","train_loss":0.5,"train_accuracy":0.75,"valid_accuracy":0.25,"test_accuracy":1.0}"#
        );
        assert_eq!(
            line(Metric::MicroF1),
            r#"{"epoch":3,"metric":"micro_f1","train_loss":0.5,"train_micro_f1":0.75,"valid_micro_f1":0.25,"test_micro_f1":1.0}"#
        );
        let valid = RankScores { auc: 0.5, mrr: 0.25, hits10: 1.0, hits50: 1.0 };
        let link = EpochMetrics { epoch: 1, train_loss: 0.75, scores: Scores::Link { valid, test: RankScores::NONE } };
        assert_eq!(
            serde_json::to_string(&link).unwrap(),
            r#"{"epoch":1,"metric":"auc","loss":0.75,"valid_auc":0.5,"test_auc":null,"valid_mrr":0.25,"test_mrr":null,"valid_hits@10":1.0,"test_hits@10":null,"valid_hits@50":1.0,"test_hits@50":null}"#
        );
    }
}
