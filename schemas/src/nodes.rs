//! The node table: `node_id: int64` (unique), optional `features: list<float32>` or
//! `fixed_size_list<float32>` (one length on every row; a table without the column has nodes
//! of no features, whose model input is a learned embedding), optional `label` (nullable): `int64`
//! class ids (-1 or null: unlabeled), or multi-hot targets as `list<float32>` /
//! `fixed_size_list<float32>` (one length on every labeled row, values in [0, 1]), optional
//! `split: utf8` (`train`, `valid`, `test` or null). Other integer and float widths and
//! dictionary-encoded columns are read as these types ([`crate::columns`]).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, Float32Array, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};

pub(crate) use crate::columns::required;
use crate::columns::{self, Floats};
use crate::error::{BadInput, Location};
use crate::ids::IdColumn;
use crate::label::{Label, LabelKind};
use crate::split::Split;

pub const NODE_ID: &str = "node_id";
/// The schema metadata key of a node table whose features were precomputed (`[precompute]`'s
/// output), with a [`Precomputed`]'s value; flattened records say so in their own metadata
/// (`graphflat.precomputed`), and a model trained on them has a dense first layer.
pub const PRECOMPUTED: &str = "graphprecompute.features";

/// What a precomputed node table's features are: a model's first aggregation, applied once
/// over every in-edge, so that the model's first layer is dense. Each is for one model kind
/// (`Precomputed::model`, in `crate::model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precomputed {
    /// `Â X`, GCN's normalized adjacency applied once (`gcn:1`): as wide as `X`.
    #[default]
    Gcn,
    /// `[X | mean X]`, each node's features and then its in-neighbors' mean (`sage:1`):
    /// GraphSAGE's first layer's two inputs, twice as wide as `X`.
    Sage,
}

impl Precomputed {
    /// The metadata value.
    pub fn value(self) -> &'static str {
        match self {
            Precomputed::Gcn => "gcn:1",
            Precomputed::Sage => "sage:1",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [Precomputed::Gcn, Precomputed::Sage].into_iter().find(|p| p.value() == value)
    }

    /// The product, as messages name it.
    pub fn formula(self) -> &'static str {
        match self {
            Precomputed::Gcn => "Â X",
            Precomputed::Sage => "[X | mean X]",
        }
    }

    /// Values per node for `dim` input features.
    pub fn width(self, dim: usize) -> usize {
        match self {
            Precomputed::Gcn => dim,
            Precomputed::Sage => 2 * dim,
        }
    }
}
pub const FEATURES: &str = "features";
pub const LABEL: &str = "label";
pub const SPLIT: &str = "split";

/// The class label that marks an unlabeled node, as null does.
pub const UNLABELED: i64 = -1;

pub(crate) fn float_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Float32, false)))
}

/// The schema this project writes for node tables (`import`, `generate`): `int64` class labels,
/// or `list<float32>` multi-hot targets.
pub fn node_schema(label: LabelKind) -> Schema {
    Schema::new(vec![
        Field::new(NODE_ID, DataType::Int64, false),
        Field::new(FEATURES, float_list(), false),
        Field::new(LABEL, if label == LabelKind::Class { DataType::Int64 } else { float_list() }, true),
        Field::new(SPLIT, DataType::Utf8, true),
    ])
}

/// Node table rows to write, one entry per node in each field.
pub struct NodeRows<'a> {
    pub ids: Vec<i64>,
    /// Row-major, `dim` values per node.
    pub features: Vec<f32>,
    pub dim: usize,
    /// Every present label is of kind `label`.
    pub labels: &'a [Option<Label>],
    pub label: LabelKind,
    pub splits: &'a [Option<Split>],
}

impl NodeRows<'_> {
    /// The rows as a batch of [`node_schema`]: what `import` and `generate` write, and what
    /// [`NodeBatch::from_batch`] reads back.
    pub fn to_batch(self) -> RecordBatch {
        let rows = self.ids.len();
        let features = float_lists(self.features, std::iter::repeat_n(self.dim, rows), None);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(self.ids)),
            Arc::new(features),
            label_column(self.labels, self.label),
            Arc::new(StringArray::from_iter(self.splits.iter().map(|s| s.map(Split::name)))),
        ];
        RecordBatch::try_new(Arc::new(node_schema(self.label)), columns).expect("columns match the node schema")
    }

    /// The rows without the optional `label` and `split` columns (a node type of a typed graph
    /// that is not a target), ignoring `labels` and `splits`.
    pub fn to_batch_unlabeled(self) -> RecordBatch {
        let rows = self.ids.len();
        let features = float_lists(self.features, std::iter::repeat_n(self.dim, rows), None);
        let fields: Vec<Field> = node_schema(self.label).fields().iter().take(2).map(|f| f.as_ref().clone()).collect();
        let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(self.ids)), Arc::new(features)];
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("columns match the node schema")
    }
}

/// A `list<float32>` column of rows of `lengths`, null where `valid` says.
pub(crate) fn float_lists(
    values: Vec<f32>,
    lengths: impl Iterator<Item = usize>,
    valid: Option<NullBuffer>,
) -> ListArray {
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    ListArray::new(item, OffsetBuffer::from_lengths(lengths), Arc::new(Float32Array::from(values)), valid)
}

/// A label column in the node schema's type for `kind`; a null list only when a label is missing.
fn label_column(labels: &[Option<Label>], kind: LabelKind) -> ArrayRef {
    match kind {
        LabelKind::Class => Arc::new(Int64Array::from_iter(labels.iter().map(|l| l.as_ref().and_then(Label::class)))),
        LabelKind::Targets(n) => {
            let mut values = Vec::with_capacity(labels.len() * n);
            for l in labels {
                values.extend_from_slice(l.as_ref().and_then(Label::targets).unwrap_or(&[]));
            }
            let lengths = labels.iter().map(|l| l.as_ref().map_or(0, |_| n));
            let valid =
                labels.iter().any(Option::is_none).then(|| NullBuffer::from_iter(labels.iter().map(Option::is_some)));
            Arc::new(float_lists(values, lengths, valid))
        }
    }
}

/// A column of float vectors, whichever list layout and float width the file used.
pub struct FloatLists {
    offsets: Vec<usize>,
    values: Floats,
    nulls: Option<NullBuffer>,
}

impl FloatLists {
    /// Reads `column` of `batch` as a list of float32 vectors (list, large list or fixed-size list).
    pub fn from_column(batch: &RecordBatch, column: &str, file: &str) -> Result<Self, BadInput> {
        let array = required(batch, column, file)?;
        Self::from_array(array, column, file)
    }

    pub fn from_array(array: &ArrayRef, column: &str, file: &str) -> Result<Self, BadInput> {
        let mistyped = || {
            BadInput::new(
                Location::file(file).column(column),
                format!(
                    "expected list<float32> or fixed_size_list<float32> (or of float64), found {}",
                    array.data_type()
                ),
            )
        };
        let nulls = array.nulls().cloned();
        let (offsets, values): (Vec<usize>, ArrayRef) = match array.data_type() {
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                (list.offsets().iter().map(|&o| o as usize).collect(), list.values().clone())
            }
            DataType::LargeList(_) => {
                let list = array.as_list::<i64>();
                (list.offsets().iter().map(|&o| o as usize).collect(), list.values().clone())
            }
            DataType::FixedSizeList(_, size) => {
                let list = array.as_fixed_size_list();
                let size = *size as usize;
                ((0..=list.len()).map(|i| i * size).collect(), list.values().clone())
            }
            _ => return Err(mistyped()),
        };
        let values = Floats::read(&values).ok_or_else(mistyped)?;
        Ok(FloatLists { offsets, values, nulls })
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`'s values, or `None` where the row is null.
    pub fn row(&self, i: usize) -> Option<&[f32]> {
        if self.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            return None;
        }
        Some(&self.values.values.values()[self.offsets[i]..self.offsets[i + 1]])
    }

    /// The position of the first null value inside row `i`, if any.
    pub fn null_value_in_row(&self, i: usize) -> Option<usize> {
        let nulls = self.values.values.nulls()?;
        (self.offsets[i]..self.offsets[i + 1]).find(|&j| nulls.is_null(j)).map(|j| j - self.offsets[i])
    }

    /// Why value `j` of row `i`, infinite as `float32`, is bad input when it was a finite
    /// `float64` (see [`Floats::out_of_range`]).
    fn out_of_range(&self, i: usize, j: usize) -> Option<String> {
        self.values.out_of_range(self.offsets[i] + j)
    }
}

/// A node table's label column.
pub enum Labels {
    Classes(Int64Array),
    Targets(FloatLists),
}

/// The node table's columns of one record batch, typed and checked.
pub struct NodeBatch {
    /// Integers or strings (`crate::ids`), checked: no null, no empty string.
    pub ids: IdColumn,
    /// `None`: the table has no `features` column (every node has 0 features).
    pub features: Option<FloatLists>,
    pub labels: Option<Labels>,
    pub splits: Option<Vec<Option<Split>>>,
}

impl NodeBatch {
    /// Checks the columns' presence and types, and the split values. Values that need the whole
    /// table (uniqueness, feature length) are checked by the reader; finiteness by
    /// [`check_features`].
    /// `first_row` is the file row of this batch's row 0, for error locations.
    pub fn from_batch(batch: &RecordBatch, file: &str, first_row: u64) -> Result<Self, BadInput> {
        let ids = IdColumn::read(batch, NODE_ID, file, first_row)?;
        let features = match batch.column_by_name(FEATURES) {
            None => None,
            Some(_) => Some(FloatLists::from_column(batch, FEATURES, file)?),
        };
        let labels = match batch.column_by_name(LABEL) {
            None => None,
            Some(array) if columns::is_integer(array.data_type()) => {
                Some(Labels::Classes(int64(batch, LABEL, file, first_row)?))
            }
            Some(array) => Some(Labels::Targets(FloatLists::from_array(array, LABEL, file).map_err(|_| {
                BadInput::new(
                    Location::file(file).column(LABEL),
                    format!(
                        "expected an integer (a class id) or list<float32> (multi-hot targets), found {}",
                        array.data_type()
                    ),
                )
            })?)),
        };
        let splits = match batch.column_by_name(SPLIT) {
            None => None,
            Some(array) => Some(splits(array, SPLIT, file, first_row)?),
        };
        Ok(NodeBatch { ids, features, labels, splits })
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Row `i`'s label: a class id of at least 0 (-1 and null: unlabeled, the conventions of
    /// pandas and scikit-learn users); targets checked (no null, each in [0, 1]). `row` is its
    /// file row.
    pub fn label(&self, i: usize, file: &str, row: u64) -> Result<Option<Label>, BadInput> {
        match &self.labels {
            None => Ok(None),
            Some(Labels::Classes(c)) if c.is_null(i) || c.value(i) == UNLABELED => Ok(None),
            Some(Labels::Classes(c)) if c.value(i) < 0 => Err(BadInput::new(
                Location::file(file).row(row).column(LABEL),
                format!("class id {}: class ids are 0 or more, and -1 or null marks an unlabeled node", c.value(i)),
            )),
            Some(Labels::Classes(c)) => Ok(Some(Label::Class(c.value(i)))),
            Some(Labels::Targets(t)) => {
                let Some(values) = t.row(i) else { return Ok(None) };
                let at = || Location::file(file).row(row).column(LABEL);
                if let Some(j) = t.null_value_in_row(i) {
                    return Err(BadInput::new(at(), format!("null target at position {j}")));
                }
                if let Some(j) = values.iter().position(|v| !(0.0..=1.0).contains(v)) {
                    return Err(BadInput::new(at(), format!("target {} at position {j} is not in [0, 1]", values[j])));
                }
                Ok(Some(Label::Targets(values.to_vec())))
            }
        }
    }

    pub fn split(&self, i: usize) -> Option<Split> {
        self.splits.as_ref().and_then(|s| s[i])
    }

    /// Row `i`'s features, checked ([`check_features`]); none without a `features` column.
    /// `row` is its file row.
    pub fn features(&self, i: usize, file: &str, row: u64) -> Result<&[f32], BadInput> {
        match &self.features {
            None => Ok(&[]),
            Some(features) => check_features(features, i, file, row),
        }
    }
}

/// Checks one feature row: present, finite. Returns the row's values.
pub fn check_features<'a>(features: &'a FloatLists, i: usize, file: &str, row: u64) -> Result<&'a [f32], BadInput> {
    let at = || Location::file(file).row(row).column(FEATURES);
    let values = features.row(i).ok_or_else(|| BadInput::new(at(), "features are null"))?;
    if let Some(j) = features.null_value_in_row(i) {
        return Err(BadInput::new(at(), format!("null value at position {j}")));
    }
    if let Some(j) = values.iter().position(|v| !v.is_finite()) {
        if let Some(why) = features.out_of_range(i, j) {
            return Err(BadInput::new(at(), format!("value at position {j}: {why}")));
        }
        let what = if values[j].is_nan() { "NaN" } else { "infinite value" };
        return Err(BadInput::new(at(), format!("{what} at position {j}")));
    }
    Ok(values)
}

/// Column `column` of `batch` (from file row `first_row`) as `int64`, from any integer type
/// ([`columns::int64`]).
pub(crate) fn int64(batch: &RecordBatch, column: &str, file: &str, first_row: u64) -> Result<Int64Array, BadInput> {
    columns::int64(required(batch, column, file)?, column, file, first_row)
}

pub(crate) fn no_nulls(array: &dyn Array, column: &str, file: &str, first_row: u64) -> Result<(), BadInput> {
    if let Some(nulls) = array.nulls()
        && let Some(i) = (0..array.len()).find(|&i| nulls.is_null(i))
    {
        return Err(BadInput::new(
            Location::file(file).row(first_row + i as u64).column(column),
            "null value in a column that must not be null",
        ));
    }
    Ok(())
}

/// A `split` column's values (`utf8`, `large_utf8` or `utf8_view`, or a dictionary of them):
/// `train`, `valid`, `test` or null; any other value is bad input at its row of `column`.
pub(crate) fn splits(
    array: &ArrayRef,
    column: &str,
    file: &str,
    first_row: u64,
) -> Result<Vec<Option<Split>>, BadInput> {
    let parse = |i: usize, value: Option<&str>| -> Result<Option<Split>, BadInput> {
        match value {
            None => Ok(None),
            Some(s) => Split::parse(s).map(Some).ok_or_else(|| {
                BadInput::new(
                    Location::file(file).row(first_row + i as u64).column(column),
                    format!("split must be train, valid, test or null, found {s:?}"),
                )
            }),
        }
    };
    let array = &columns::plain(array);
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().iter().enumerate().map(|(i, v)| parse(i, v)).collect(),
        DataType::LargeUtf8 => array.as_string::<i64>().iter().enumerate().map(|(i, v)| parse(i, v)).collect(),
        DataType::Utf8View => array.as_string_view().iter().enumerate().map(|(i, v)| parse(i, v)).collect(),
        other => Err(BadInput::new(Location::file(file).column(column), format!("expected utf8, found {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_rows_read_back() {
        let labels = [Some(Label::Targets(vec![1.0, 0.0])), None];
        let splits = [Some(Split::Train), None];
        let rows = NodeRows {
            ids: vec![7, 9],
            features: vec![0.5, 1.5, 2.5, 3.5],
            dim: 2,
            labels: &labels,
            label: LabelKind::Targets(2),
            splits: &splits,
        };
        let back = NodeBatch::from_batch(&rows.to_batch(), "f", 0).unwrap();
        assert_eq!(back.ids.ints().unwrap().values().to_vec(), vec![7, 9]);
        let features = back.features.as_ref().unwrap();
        assert_eq!((features.row(0), features.row(1)), (Some(&[0.5, 1.5][..]), Some(&[2.5, 3.5][..])));
        assert_eq!((back.label(0, "f", 0).unwrap(), back.label(1, "f", 1).unwrap()), (labels[0].clone(), None));
        assert_eq!(back.splits, Some(splits.to_vec()));
    }
}
