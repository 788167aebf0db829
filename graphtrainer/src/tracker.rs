//! The best validation score so far: what early stopping watches and which parameters the
//! model written at the end holds.

use serde::{Deserialize, Serialize};

use crate::metrics::EpochMetrics;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tracker {
    /// Epochs done.
    pub epochs: usize,
    /// 1-based, as in `metrics.jsonl`.
    pub best_epoch: usize,
    /// NaN without validation records: kept as JSON's null in checkpoints.
    #[serde(with = "nan_as_null")]
    pub best_valid: f64,
    #[serde(with = "nan_as_null")]
    pub test_at_best: f64,
    pub best_params: Vec<f32>,
}

impl Tracker {
    /// Takes an epoch's metrics; returns whether its validation score is the best so far.
    pub fn observe(&mut self, m: &EpochMetrics, params: &[f32]) -> bool {
        self.epochs = m.epoch;
        if self.best_params.is_empty() || m.valid() > self.best_valid {
            (self.best_epoch, self.best_valid, self.test_at_best) = (m.epoch, m.valid(), m.test());
            self.best_params = params.to_vec();
            return true;
        }
        false
    }

    /// Whether `patience` epochs have passed without a better validation score.
    pub fn should_stop(&self, patience: usize) -> bool {
        patience > 0 && self.epochs - self.best_epoch >= patience
    }
}

/// JSON has no NaN: serde_json writes it as null, which must read back as NaN.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
        if value.is_nan() { s.serialize_none() } else { s.serialize_some(value) }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}
