//! The edge table: `src: int64`, `dst: int64`, optional `weight: float32` (> 0; `float64`
//! read as `float32`, and other integer widths as `int64`: [`crate::columns`]), optional
//! `features`: `list<float32>` or `fixed_size_list<float32>`, one length on every row (the
//! table's first row's, at least 1), finite, no nulls, optional `split: utf8` (`train`,
//! `valid`, `test` or null). The checks that need more than one batch (that length, the same
//! optional columns in every part) live in `sampling::load`.
//!
//! An edge's split decides its role ([`passes_messages`]): `valid` and `test` edges are held out
//! of message passing in every stage, so that a link model is never shown the edges it is
//! scored on; `train` and null edges pass messages. Every edge with a split is a supervision
//! edge of the link task.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use crate::columns::Floats;
use crate::error::{BadInput, Location};
use crate::ids::IdColumn;
use crate::nodes::{FloatLists, check_features, float_list, float_lists, no_nulls, splits};
use crate::split::Split;

pub const SRC: &str = "src";
pub const DST: &str = "dst";
pub const WEIGHT: &str = "weight";
pub const FEATURES: &str = "features";
pub const SPLIT: &str = "split";

/// Whether an edge of split `split` is a message-passing edge: `train` and null are, `valid`
/// and `test` are held out (the one rule every stage's loader applies).
pub fn passes_messages(split: Option<Split>) -> bool {
    !matches!(split, Some(Split::Valid | Split::Test))
}

/// The `split` column's field as this project writes it (`graphflat split-edges`).
pub fn split_field() -> Field {
    Field::new(SPLIT, DataType::Utf8, true)
}

/// `batch` (any edge table's) with a `split` column of `splits`, one per row: in the place of
/// the batch's own `split` column, or appended (`utf8`, nullable). Every other column and the
/// schema's metadata are kept as they are.
pub fn with_splits(batch: &RecordBatch, splits: &[Option<Split>]) -> RecordBatch {
    assert_eq!(splits.len(), batch.num_rows(), "one split per row");
    let schema = batch.schema();
    let column: ArrayRef = Arc::new(StringArray::from_iter(splits.iter().map(|s| s.map(Split::name))));
    let field = Arc::new(split_field());
    let (mut fields, mut columns): (Vec<_>, Vec<_>) =
        schema.fields().iter().cloned().zip(batch.columns().iter().cloned()).unzip();
    match fields.iter().position(|f| f.name() == SPLIT) {
        Some(i) => (fields[i], columns[i]) = (field, column),
        None => {
            fields.push(field);
            columns.push(column);
        }
    }
    let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns).expect("a split per row, beside columns of the batch's length")
}

/// `batch` (an edge table's) with its `src` and `dst` columns replaced by the canonical arrays
/// `edges` read them as (`int64`, or `utf8` for strings of any encoding): the parts of a table
/// written from input parts of different id types are then one schema, which every reader
/// needs. Every other column and the schema's metadata are kept.
pub fn with_canonical_ids(batch: &RecordBatch, edges: &EdgeBatch) -> RecordBatch {
    let schema = batch.schema();
    let (mut fields, mut columns): (Vec<_>, Vec<_>) =
        schema.fields().iter().cloned().zip(batch.columns().iter().cloned()).unzip();
    for (name, ids) in [(SRC, &edges.src), (DST, &edges.dst)] {
        if let Some(i) = fields.iter().position(|f| f.name() == name) {
            columns[i] = ids.to_array();
            fields[i] = Arc::new(Field::new(name, columns[i].data_type().clone(), false));
        }
    }
    let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns).expect("the same rows, one column for another")
}

/// The schema this project writes for edge tables without features (`import`, `generate`).
pub fn edge_schema() -> Schema {
    edge_schema_with(0)
}

/// The schema this project writes for edge tables, with `features: list<float32>` when
/// `feature_dim > 0`.
pub fn edge_schema_with(feature_dim: usize) -> Schema {
    let mut fields = vec![
        Field::new(SRC, DataType::Int64, false),
        Field::new(DST, DataType::Int64, false),
        Field::new(WEIGHT, DataType::Float32, false),
    ];
    if feature_dim > 0 {
        fields.push(Field::new(FEATURES, float_list(), false));
    }
    Schema::new(fields)
}

/// Edges as a batch of [`edge_schema`]: what `import` and `generate` write.
pub fn to_batch(src: Vec<i64>, dst: Vec<i64>, weight: Vec<f32>) -> RecordBatch {
    to_batch_with(src, dst, weight, None)
}

/// Edges as a batch of [`edge_schema_with`]; `features` holds each edge's values row-major and
/// their width (`None`, or a width of 0: no `features` column).
pub fn to_batch_with(
    src: Vec<i64>,
    dst: Vec<i64>,
    weight: Vec<f32>,
    features: Option<(Vec<f32>, usize)>,
) -> RecordBatch {
    let rows = src.len();
    let mut columns: Vec<ArrayRef> =
        vec![Arc::new(Int64Array::from(src)), Arc::new(Int64Array::from(dst)), Arc::new(Float32Array::from(weight))];
    let dim = match features {
        Some((values, dim)) if dim > 0 => {
            columns.push(Arc::new(float_lists(values, std::iter::repeat_n(dim, rows), None)));
            dim
        }
        _ => 0,
    };
    RecordBatch::try_new(Arc::new(edge_schema_with(dim)), columns).expect("columns match the edge schema")
}

/// The edge table's columns of one record batch, typed and checked.
pub struct EdgeBatch {
    /// Integers or strings (`crate::ids`), checked: no null, no empty string.
    pub src: IdColumn,
    pub dst: IdColumn,
    pub weight: Option<Float32Array>,
    /// The `features` column, when the table has one (rows are checked by [`EdgeBatch::features`]).
    pub features: Option<FloatLists>,
    /// Each row's split, when the table has a `split` column.
    pub splits: Option<Vec<Option<Split>>>,
}

impl EdgeBatch {
    /// Checks presence, types and nulls, and the split values; `require_positive` adds
    /// `weight > 0` (the weighted sampler's condition). A weight must be finite in any case.
    pub fn from_batch(
        batch: &RecordBatch,
        file: &str,
        first_row: u64,
        require_positive: bool,
    ) -> Result<Self, BadInput> {
        let src = IdColumn::read(batch, SRC, file, first_row)?;
        let dst = IdColumn::read(batch, DST, file, first_row)?;
        let weight = match batch.column_by_name(WEIGHT) {
            None => None,
            Some(array) => {
                let floats = Floats::read(array).ok_or_else(|| {
                    BadInput::new(
                        Location::file(file).column(WEIGHT),
                        format!("expected float32 or float64, found {}", array.data_type()),
                    )
                })?;
                no_nulls(&floats.values, WEIGHT, file, first_row)?;
                let weight = floats.values.clone();
                for (i, &w) in weight.values().iter().enumerate() {
                    let bad = if !w.is_finite() {
                        Some(floats.out_of_range(i).unwrap_or_else(|| format!("weight must be finite, found {w}")))
                    } else if require_positive && w <= 0.0 {
                        Some(format!("the weighted sampler needs weight > 0, found {w}"))
                    } else {
                        None
                    };
                    if let Some(problem) = bad {
                        return Err(BadInput::new(
                            Location::file(file).row(first_row + i as u64).column(WEIGHT),
                            problem,
                        ));
                    }
                }
                Some(weight)
            }
        };
        let features = match batch.column_by_name(FEATURES) {
            None => None,
            Some(_) => Some(FloatLists::from_column(batch, FEATURES, file)?),
        };
        let splits = match batch.column_by_name(SPLIT) {
            None => None,
            Some(array) => Some(splits(array, SPLIT, file, first_row)?),
        };
        Ok(EdgeBatch { src, dst, weight, features, splits })
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// Edge `i`'s split; `None` when the row's is null or the table has no `split` column.
    pub fn split(&self, i: usize) -> Option<Split> {
        self.splits.as_ref().and_then(|s| s[i])
    }

    /// Edge `i`'s weight; 1.0 when the table has no weight column.
    pub fn weight(&self, i: usize) -> f32 {
        self.weight.as_ref().map_or(1.0, |w| w.value(i))
    }

    /// Edge `i`'s features, checked: not null, no null value, finite, and `dim` of them (the
    /// table's width, its first row's). Empty when the table has no `features` column. `row`
    /// is the edge's file row, for the error.
    pub fn features(&self, i: usize, dim: usize, file: &str, row: u64) -> Result<&[f32], BadInput> {
        let Some(features) = &self.features else { return Ok(&[]) };
        let values = check_features(features, i, file, row)?;
        if values.len() != dim {
            return Err(BadInput::new(
                Location::file(file).row(row).column(FEATURES),
                format!("feature length {} differs from the table's {dim} (the first row's)", values.len()),
            ));
        }
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_features_read_back_and_bad_rows_are_named() {
        let batch = to_batch_with(vec![1, 2], vec![2, 1], vec![1.0, 0.5], Some((vec![0.5, -1.0, 2.0, 3.0], 2)));
        let edges = EdgeBatch::from_batch(&batch, "e.parquet", 10, false).unwrap();
        assert_eq!(edges.features(1, 2, "e.parquet", 11).unwrap(), &[2.0, 3.0]);
        let err = edges.features(0, 3, "e.parquet", 10).unwrap_err();
        assert_eq!(err.at, Location::file("e.parquet").row(10).column(FEATURES));
        assert!(err.problem.contains("feature length 2 differs from the table's 3"), "{}", err.problem);

        let plain = EdgeBatch::from_batch(&to_batch(vec![1], vec![2], vec![1.0]), "p", 0, false).unwrap();
        assert!(plain.features.is_none() && plain.features(0, 0, "p", 0).unwrap().is_empty());
        let no_width = to_batch_with(vec![1], vec![2], vec![1.0], Some((Vec::new(), 0)));
        assert_eq!(*no_width.schema(), edge_schema(), "a width of 0 writes no features column");
    }

    #[test]
    fn splits_read_back_and_a_bad_split_is_named() {
        let plain = to_batch(vec![1, 2, 3, 4], vec![2, 1, 4, 3], vec![1.0; 4]);
        let (train, valid, test) = (Some(Split::Train), Some(Split::Valid), Some(Split::Test));
        let batch = with_splits(&plain, &[train, None, valid, test]);
        let edges = EdgeBatch::from_batch(&batch, "e", 0, false).unwrap();
        let splits: Vec<Option<Split>> = (0..4).map(|i| edges.split(i)).collect();
        assert_eq!(splits, [train, None, valid, test]);
        let roles: Vec<bool> = splits.iter().map(|&s| passes_messages(s)).collect();
        assert_eq!(roles, [true, true, false, false]);
        assert_eq!(EdgeBatch::from_batch(&plain, "e", 0, false).unwrap().split(0), None);
        let again = with_splits(&batch, &[test; 4]);
        assert_eq!(again.num_columns(), batch.num_columns(), "a split column is replaced in its place");
        assert_eq!(EdgeBatch::from_batch(&again, "e", 0, false).unwrap().split(1), test);

        let mut columns = plain.columns().to_vec();
        columns.push(Arc::new(StringArray::from(vec![None, Some("train"), Some("holdout"), None])));
        let mut fields = plain.schema().fields().to_vec();
        fields.push(Arc::new(Field::new(SPLIT, DataType::Utf8, true)));
        let bad = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let err = EdgeBatch::from_batch(&bad, "e", 7, false).err().unwrap();
        assert_eq!(err.at, Location::file("e").row(9).column(SPLIT));
        assert!(err.problem.contains("\"holdout\""), "{}", err.problem);
    }
}
