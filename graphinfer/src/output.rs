//! Round k + 1, the head, and the output table: one row per target node,
//!
//! | column | type |
//! | --- | --- |
//! | `node_type` | `utf8`, a typed graph only: the row's node type |
//! | `node_id` | `int64` (in a typed graph, the id within its type), or `utf8`: the original strings of a graph keyed by strings |
//! | `embedding` | `fixed_size_list<float32, H>`: the output of layer `[infer] embedding` |
//! | `prediction` | `int64` class (softmax models); `fixed_size_list<bool, C>` for multi-hot targets (logit > 0) |
//! | `scores` | `fixed_size_list<float32, C>`: softmax over classes, or one sigmoid per target |
//!
//! In a typed graph, only the target type's rows are scored: `prediction` and `scores` are
//! null on rows of other types, and their lists are `list<...>` rather than fixed-size (pyarrow
//! cannot read a null fixed-size list back from Parquet: its null slot holds no values). The
//! schema's metadata names the model and the settings (`graphinfer.*` keys).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::BooleanBuilder;
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use schemas::ids::IdKind;

pub use schemas::typed::NODE_TYPE;
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

/// Adds the predictions of nodes' `logits` (row-major, `counts.len()` a row) to `counts`: a
/// class's count is the rows that predict it (rows of several targets count in each).
pub fn count_predictions(head: Head, logits: &[f32], counts: &mut [u64]) {
    let classes = counts.len();
    if classes == 0 {
        return;
    }
    let mut scores = vec![0f32; classes];
    for row in logits.chunks_exact(classes) {
        match head {
            Head::Classes => {
                if let Some(c) = head.scores(row, &mut scores) {
                    counts[c as usize] += 1;
                }
            }
            Head::MultiHot => {
                for (count, &x) in counts.iter_mut().zip(row) {
                    *count += u64::from(gnn::model::predicts_target(x));
                }
            }
            Head::Embedding => {}
        }
    }
}

fn list(item: DataType, size: usize) -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", item, false)), size as i32)
}

/// The type of a scored list column: fixed-size, or a plain list where rows may be null (see
/// the module doc).
fn scored_list(item: DataType, size: usize, nullable: bool) -> DataType {
    if nullable { DataType::List(Arc::new(Field::new("item", item, false))) } else { list(item, size) }
}

/// `values`, `size` a row, as the column [`scored_list`] types: rows that `nulls` marks are null.
fn scored_column(values: ArrayRef, size: usize, nulls: Option<NullBuffer>) -> Result<ArrayRef, ArrowError> {
    let item = Arc::new(Field::new("item", values.data_type().clone(), false));
    Ok(match nulls {
        None => Arc::new(FixedSizeListArray::try_new(item, size as i32, values, None)?),
        Some(nulls) => {
            let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(size, nulls.len()));
            Arc::new(ListArray::try_new(item, offsets, values, Some(nulls))?)
        }
    })
}

/// A typed graph's rows: each row's node type, the types' names, and the target type (the
/// only one scored).
#[derive(Debug, Clone, Copy)]
pub struct TypedRows<'a> {
    pub types: &'a [u8],
    pub names: &'a [String],
    pub target: u8,
}

/// How the output names its nodes: by id of `ids`' kind (`utf8` holding the original strings
/// of a graph keyed by strings), and with a `node_type` column when `typed`.
#[derive(Debug, Clone, Copy)]
pub struct Naming {
    pub ids: IdKind,
    pub typed: bool,
}

/// The output schema for embeddings of `width` and `classes` scores; `typed` adds the
/// `node_type` column and lets the scores be null.
pub fn schema(head: Head, width: usize, classes: usize, naming: Naming, metadata: HashMap<String, String>) -> Schema {
    let (typed, mut fields) = (naming.typed, Vec::new());
    if typed {
        fields.push(Field::new(NODE_TYPE, DataType::Utf8, false));
    }
    fields.push(Field::new(NODE_ID, schemas::ids::data_type(naming.ids), false));
    fields.push(Field::new(EMBEDDING, list(DataType::Float32, width), false));
    let prediction = match head {
        Head::Classes => DataType::Int64,
        Head::MultiHot => scored_list(DataType::Boolean, classes, typed),
        Head::Embedding => return Schema::new(fields).with_metadata(metadata),
    };
    fields.push(Field::new(PREDICTION, prediction, typed));
    fields.push(Field::new(SCORES, scored_list(DataType::Float32, classes, typed), typed));
    Schema::new(fields).with_metadata(metadata)
}

/// Rows for nodes `ids` (the `node_id` column: their ids or original strings; of `typed`'s
/// types in a typed graph), with their embeddings and logits (row-major; a typed graph's rows
/// of other types than the target have logits that are not written).
pub fn batch(
    schema: &SchemaRef,
    head: Head,
    ids: ArrayRef,
    typed: Option<TypedRows>,
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
    // A typed graph: the target type's rows are scored, the others' are null.
    let scored = typed.map(|t| NullBuffer::from_iter(t.types.iter().map(|&x| x == t.target)));

    let mut columns: Vec<ArrayRef> = Vec::new();
    if let Some(t) = typed {
        let names = t.types.iter().map(|&x| t.names[usize::from(x)].as_str());
        columns.push(Arc::new(StringArray::from_iter_values(names)));
    }
    columns.push(ids);
    columns.push(scored_column(Arc::new(Float32Array::from(embedding.to_vec())), width, None)?);
    let prediction: ArrayRef = match head {
        Head::Embedding => return RecordBatch::try_new(schema.clone(), columns),
        Head::Classes => Arc::new(Int64Array::new(classes_out.into(), scored.clone())),
        Head::MultiHot => {
            let mut bits = BooleanBuilder::with_capacity(logits.len());
            logits.iter().for_each(|&x| bits.append_value(gnn::model::predicts_target(x)));
            scored_column(Arc::new(bits.finish()), classes, scored.clone())?
        }
    };
    columns.push(prediction);
    columns.push(scored_column(Arc::new(Float32Array::from(scores)), classes, scored)?);
    RecordBatch::try_new(schema.clone(), columns)
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
        let naming = Naming { ids: IdKind::Int, typed: false };
        let schema: SchemaRef = Arc::new(schema(Head::MultiHot, 2, 2, naming, HashMap::new()));
        let b = batch(&schema, Head::MultiHot, ids(&[7]), None, &[0.5, 0.25], &[2.0, -1.0]).unwrap();
        assert_eq!(b.num_rows(), 1);
        let mut s = [0.0; 2];
        Head::MultiHot.scores(&[0.0, -1.0], &mut s);
        assert_eq!(s[0], 0.5);
    }

    fn ids(ids: &[i64]) -> ArrayRef {
        Arc::new(Int64Array::from(ids.to_vec()))
    }

    #[test]
    fn string_ids_name_their_rows() {
        let naming = Naming { ids: IdKind::String, typed: false };
        let schema: SchemaRef = Arc::new(schema(Head::Embedding, 1, 0, naming, HashMap::new()));
        let keys: ArrayRef = Arc::new(StringArray::from(vec!["user_8f3a", "sku-1201"]));
        let b = batch(&schema, Head::Embedding, keys.clone(), None, &[0.5, 0.25], &[]).unwrap();
        assert_eq!(b.column_by_name(NODE_ID).unwrap(), &keys);
    }

    #[test]
    fn typed_rows_name_their_type_and_only_the_target_type_is_scored() {
        let naming = Naming { ids: IdKind::Int, typed: true };
        let schema: SchemaRef = Arc::new(schema(Head::Classes, 1, 2, naming, HashMap::new()));
        let names = ["item".to_owned(), "user".to_owned()];
        let typed = TypedRows { types: &[0, 1, 1], names: &names, target: 1 };
        let b = batch(&schema, Head::Classes, ids(&[5, 5, 6]), Some(typed), &[0.1, 0.2, 0.3], &[0.0; 6]).unwrap();
        let node_type = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(node_type.iter().collect::<Vec<_>>(), [Some("item"), Some("user"), Some("user")]);
        for column in [PREDICTION, SCORES] {
            let c = b.column_by_name(column).unwrap();
            assert_eq!((0..3).map(|i| c.is_null(i)).collect::<Vec<_>>(), [true, false, false], "{column}");
        }
    }
}
