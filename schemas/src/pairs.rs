//! Candidate pairs and their scores: GraphInfer's pairs round for a link model.
//!
//! Input (`[infer] pairs`): `src: int64` and `dst: int64`, not null, each a `node_id` of the
//! node table; other columns are ignored. Output (`[infer] pairs_output`): one row per input
//! row (repeats included), `src: int64`, `dst: int64`, `score: float32`, the decoder's logit
//! (its sigmoid is the link probability the model was trained for).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema};

use crate::error::{BadInput, Location};
use crate::nodes::{int64, no_nulls};

pub const SRC: &str = "src";
pub const DST: &str = "dst";
pub const SCORE: &str = "score";

/// Checks a pairs file's schema before any row is read: `src` and `dst` present, integers.
pub fn check_schema(schema: &Schema, file: &str) -> Result<(), BadInput> {
    for column in [SRC, DST] {
        let at = || Location::file(file).column(column);
        let field = schema.field_with_name(column).map_err(|_| {
            let found: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            BadInput::new(at(), format!("missing required column (found: {})", found.join(", ")))
        })?;
        if !crate::columns::is_integer(field.data_type()) {
            return Err(BadInput::new(
                at(),
                format!("expected an integer (int64, int32, ...), found {}", field.data_type()),
            ));
        }
    }
    Ok(())
}

/// The pair columns of one record batch, typed and checked (no nulls).
pub struct PairBatch {
    pub src: Int64Array,
    pub dst: Int64Array,
}

impl PairBatch {
    pub fn from_batch(batch: &RecordBatch, file: &str, first_row: u64) -> Result<Self, BadInput> {
        let src = int64(batch, SRC, file, first_row)?;
        no_nulls(&src, SRC, file, first_row)?;
        let dst = int64(batch, DST, file, first_row)?;
        no_nulls(&dst, DST, file, first_row)?;
        Ok(PairBatch { src, dst })
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }
}

/// The pair score table's schema, with `metadata`.
pub fn score_schema(metadata: HashMap<String, String>) -> Schema {
    Schema::new(vec![
        Field::new(SRC, DataType::Int64, false),
        Field::new(DST, DataType::Int64, false),
        Field::new(SCORE, DataType::Float32, false),
    ])
    .with_metadata(metadata)
}

/// Scored pairs as a batch of `schema` (a [`score_schema`]).
pub fn score_batch(
    schema: Arc<Schema>,
    src: Vec<i64>,
    dst: Vec<i64>,
    score: Vec<f32>,
) -> Result<RecordBatch, ArrowError> {
    let columns: Vec<ArrayRef> =
        vec![Arc::new(Int64Array::from(src)), Arc::new(Int64Array::from(dst)), Arc::new(Float32Array::from(score))];
    RecordBatch::try_new(schema, columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn pair_columns_are_integers_without_nulls_and_others_are_ignored() {
        let ok = batch(vec![
            ("dst", Arc::new(Int64Array::from(vec![2, 3])) as ArrayRef),
            ("src", Arc::new(Int64Array::from(vec![1, 1]))),
            ("note", Arc::new(Float32Array::from(vec![0.5, 0.5]))),
        ]);
        check_schema(&ok.schema(), "p.parquet").unwrap();
        let pairs = PairBatch::from_batch(&ok, "p.parquet", 0).unwrap();
        assert_eq!((pairs.len(), pairs.src.value(1), pairs.dst.value(1)), (2, 1, 3));

        let narrow = batch(vec![
            ("src", Arc::new(arrow_array::Int32Array::from(vec![1])) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(vec![2]))),
        ]);
        check_schema(&narrow.schema(), "p.parquet").unwrap();
        assert_eq!(PairBatch::from_batch(&narrow, "p.parquet", 0).unwrap().src.value(0), 1);
        let floats = batch(vec![
            ("src", Arc::new(Float32Array::from(vec![1.0])) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(vec![2]))),
        ]);
        let error = check_schema(&floats.schema(), "p.parquet").unwrap_err();
        assert_eq!(error.at, Location::file("p.parquet").column("src"));
        assert!(error.to_string().contains("expected an integer"), "{error}");

        let missing = batch(vec![("src", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]);
        assert_eq!(check_schema(&missing.schema(), "p.parquet").unwrap_err().at.column.as_deref(), Some("dst"));

        let nulls = batch(vec![
            ("src", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(vec![None]))),
        ]);
        let error = PairBatch::from_batch(&nulls, "p.parquet", 10).err().unwrap();
        assert_eq!(error.at, Location::file("p.parquet").row(10).column("dst"));
    }
}
