//! Candidate pairs and their scores: GraphInfer's pairs round for a link model.
//!
//! Input (`[infer] pairs`): `src` and `dst`, not null, each a `node_id` of the node table, of
//! its kind (integers or strings, `crate::ids`); other columns are ignored. Output (`[infer]
//! pairs_output`): one row per input row (repeats included), `src`, `dst` (`int64`, or `utf8`
//! holding the original strings), `score: float32`, the decoder's logit (its sigmoid is the link
//! probability the model was trained for).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema};

use crate::error::{BadInput, Location};
use crate::ids::{self, IdColumn, IdKind};

pub const SRC: &str = "src";
pub const DST: &str = "dst";
pub const SCORE: &str = "score";

/// Checks a pairs file's schema before any row is read: `src` and `dst` present, ids of
/// `kind` (the node table's).
pub fn check_schema(schema: &Schema, file: &str, kind: IdKind) -> Result<(), BadInput> {
    for column in [SRC, DST] {
        let at = || Location::file(file).column(column);
        let field = schema.field_with_name(column).map_err(|_| {
            let found: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            BadInput::new(at(), format!("missing required column (found: {})", found.join(", ")))
        })?;
        if IdKind::of(field.data_type()) != Some(kind) {
            return Err(BadInput::new(
                at(),
                format!("expected {} as the node table's ids are, found {}", kind.name(), field.data_type()),
            ));
        }
    }
    Ok(())
}

/// The pair columns of one record batch, typed and checked (no nulls).
pub struct PairBatch {
    pub src: IdColumn,
    pub dst: IdColumn,
}

impl PairBatch {
    pub fn from_batch(batch: &RecordBatch, file: &str, first_row: u64) -> Result<Self, BadInput> {
        let src = IdColumn::read(batch, SRC, file, first_row)?;
        let dst = IdColumn::read(batch, DST, file, first_row)?;
        Ok(PairBatch { src, dst })
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }
}

/// The pair score table's schema for ids of `kind`, with `metadata`.
pub fn score_schema(kind: IdKind, metadata: HashMap<String, String>) -> Schema {
    Schema::new(vec![
        Field::new(SRC, ids::data_type(kind), false),
        Field::new(DST, ids::data_type(kind), false),
        Field::new(SCORE, DataType::Float32, false),
    ])
    .with_metadata(metadata)
}

/// Scored pairs as a batch of `schema` (a [`score_schema`]): `src` and `dst` the original ids.
pub fn score_batch(
    schema: Arc<Schema>,
    src: ArrayRef,
    dst: ArrayRef,
    score: Vec<f32>,
) -> Result<RecordBatch, ArrowError> {
    RecordBatch::try_new(schema, vec![src, dst, Arc::new(Float32Array::from(score))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Key;
    use arrow_array::Int64Array;

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
        check_schema(&ok.schema(), "p.parquet", IdKind::Int).unwrap();
        let pairs = PairBatch::from_batch(&ok, "p.parquet", 0).unwrap();
        assert_eq!((pairs.len(), pairs.src.key(1), pairs.dst.key(1)), (2, Key::Int(1), Key::Int(3)));

        let narrow = batch(vec![
            ("src", Arc::new(arrow_array::Int32Array::from(vec![1])) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(vec![2]))),
        ]);
        check_schema(&narrow.schema(), "p.parquet", IdKind::Int).unwrap();
        assert_eq!(PairBatch::from_batch(&narrow, "p.parquet", 0).unwrap().src.key(0), Key::Int(1));
        let floats = batch(vec![
            ("src", Arc::new(Float32Array::from(vec![1.0])) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(vec![2]))),
        ]);
        let error = check_schema(&floats.schema(), "p.parquet", IdKind::Int).unwrap_err();
        assert_eq!(error.at, Location::file("p.parquet").column("src"));
        assert!(error.to_string().contains("expected integers"), "{error}");
        let strings = check_schema(&ok.schema(), "p.parquet", IdKind::String).unwrap_err();
        assert!(strings.to_string().contains("expected strings"), "{strings}");

        let missing = batch(vec![("src", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]);
        assert_eq!(
            check_schema(&missing.schema(), "p.parquet", IdKind::Int).unwrap_err().at.column.as_deref(),
            Some("dst")
        );

        let nulls = batch(vec![
            ("src", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("dst", Arc::new(Int64Array::from(vec![None]))),
        ]);
        let error = PairBatch::from_batch(&nulls, "p.parquet", 10).err().unwrap();
        assert_eq!(error.at, Location::file("p.parquet").row(10).column("dst"));
    }
}
