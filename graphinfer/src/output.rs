//! Round k + 1, the head, and the output table: one row per target node,
//!
//! | column | type |
//! | --- | --- |
//! | `node_id` | `int64` |
//! | `embedding` | `fixed_size_list<float32, H>`: the output of layer `[infer] embedding` |
//! | `prediction` | `int64` class (softmax models); `fixed_size_list<bool, C>` for multi-hot targets (logit > 0) |
//! | `scores` | `fixed_size_list<float32, C>`: softmax over classes, or one sigmoid per target |
//!
//! The schema's metadata names the model and the settings (`graphinfer.*` keys).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::BooleanBuilder;
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};

pub const NODE_ID: &str = "node_id";
pub const EMBEDDING: &str = "embedding";
pub const PREDICTION: &str = "prediction";
pub const SCORES: &str = "scores";

/// What the head turns logits into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Softmax over classes; the prediction is the most likely class.
    Classes,
    /// One sigmoid per target; the prediction is every target whose logit is positive.
    MultiHot,
    /// A link model: no node head, so no `prediction` or `scores` columns.
    Embedding,
}

impl Head {
    /// Scores from one node's logits, into `scores`; returns the class for [`Head::Classes`].
    pub fn scores(self, logits: &[f32], scores: &mut [f32]) -> Option<i64> {
        match self {
            Head::Classes => {
                let (best, max) = logits
                    .iter()
                    .enumerate()
                    .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) });
                let mut total = 0.0;
                for (s, &x) in scores.iter_mut().zip(logits) {
                    *s = (x - max).exp();
                    total += *s;
                }
                scores.iter_mut().for_each(|s| *s /= total);
                Some(best as i64)
            }
            Head::MultiHot => {
                for (s, &x) in scores.iter_mut().zip(logits) {
                    *s = 1.0 / (1.0 + (-x).exp());
                }
                None
            }
            Head::Embedding => None,
        }
    }
}

fn list(item: DataType, size: usize) -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", item, false)), size as i32)
}

/// The output schema for embeddings of `width` and `classes` scores.
pub fn schema(head: Head, width: usize, classes: usize, metadata: HashMap<String, String>) -> Schema {
    let prediction = match head {
        Head::Classes => DataType::Int64,
        Head::MultiHot => list(DataType::Boolean, classes),
        Head::Embedding => {
            let fields = vec![
                Field::new(NODE_ID, DataType::Int64, false),
                Field::new(EMBEDDING, list(DataType::Float32, width), false),
            ];
            return Schema::new(fields).with_metadata(metadata);
        }
    };
    Schema::new(vec![
        Field::new(NODE_ID, DataType::Int64, false),
        Field::new(EMBEDDING, list(DataType::Float32, width), false),
        Field::new(PREDICTION, prediction, false),
        Field::new(SCORES, list(DataType::Float32, classes), false),
    ])
    .with_metadata(metadata)
}

/// Rows for nodes `ids`, with their embeddings and logits (row-major).
pub fn batch(
    schema: &SchemaRef,
    head: Head,
    ids: &[i64],
    embedding: &[f32],
    logits: &[f32],
) -> Result<RecordBatch, ArrowError> {
    let n = ids.len();
    let (width, classes) = (embedding.len() / n.max(1), logits.len() / n.max(1));
    let mut scores = vec![0f32; logits.len()];
    let mut classes_out = Vec::with_capacity(n);
    for i in 0..n {
        let range = i * classes..(i + 1) * classes;
        if let Some(c) = head.scores(&logits[range.clone()], &mut scores[range]) {
            classes_out.push(c);
        }
    }
    let fixed = |values: Vec<f32>, size: usize| -> Result<ArrayRef, ArrowError> {
        let item = Arc::new(Field::new("item", DataType::Float32, false));
        Ok(Arc::new(FixedSizeListArray::try_new(item, size as i32, Arc::new(Float32Array::from(values)), None)?))
    };
    let prediction: ArrayRef = match head {
        Head::Embedding => {
            let columns = vec![Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef, fixed(embedding.to_vec(), width)?];
            return RecordBatch::try_new(schema.clone(), columns);
        }
        Head::Classes => Arc::new(Int64Array::from(classes_out)),
        Head::MultiHot => {
            let mut bits = BooleanBuilder::with_capacity(logits.len());
            logits.iter().for_each(|&x| bits.append_value(gnn::model::predicts_target(x)));
            let item = Arc::new(Field::new("item", DataType::Boolean, false));
            Arc::new(FixedSizeListArray::try_new(item, classes as i32, Arc::new(bits.finish()), None)?)
        }
    };
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            fixed(embedding.to_vec(), width)?,
            prediction,
            fixed(scores, classes)?,
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_scores_sum_to_one_and_predict_the_largest() {
        let mut s = [0.0; 3];
        assert_eq!(Head::Classes.scores(&[1.0, 3.0, -2.0], &mut s), Some(1));
        assert!((s.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(s[1] > s[0] && s[0] > s[2]);
        // Large logits stay finite.
        assert_eq!(Head::Classes.scores(&[1000.0, 999.0, 0.0], &mut s), Some(0));
        assert!(s.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn sigmoid_scores_and_multi_hot_predictions() {
        let schema: SchemaRef = Arc::new(schema(Head::MultiHot, 2, 2, HashMap::new()));
        let b = batch(&schema, Head::MultiHot, &[7], &[0.5, 0.25], &[2.0, -1.0]).unwrap();
        assert_eq!(b.num_rows(), 1);
        let mut s = [0.0; 2];
        Head::MultiHot.scores(&[0.0, -1.0], &mut s);
        assert_eq!(s[0], 0.5);
    }
}
