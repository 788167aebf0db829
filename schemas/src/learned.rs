//! The learned embedding table a model with `[train] learned_embedding_dim = D` carries: one row
//! per node the trainer computed with, `node_id` (`int64`, or `utf8` holding the original string
//! ids of a graph keyed by strings: `crate::ids`), `embedding: fixed_size_list<float32, D>`; a
//! typed model's table has a `node_type` column (`utf8`, the type's name) first, and rows of
//! the types with learned rows only. The trainer's workers write it in parallel, each its
//! owned rows sorted by key (type, then id), as Parquet parts in the model directory's
//! `embeddings/` folder, listed in the model's manifest
//! (`embeddings/part-<run>-<worker>-<n>.parquet`, committed with `model-<run>.bpk`): the folder
//! holds the committed table alone, for any Parquet reader; GraphInfer reads each node's row at
//! its owner.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::error::{BadInput, Location};
use crate::ids::{self, IdColumn, IdKind};
use crate::nodes::{NODE_ID, required};
use crate::typed::{self, NODE_TYPE};

pub const EMBEDDING: &str = "embedding";

/// The table's schema at width `dim`, ids of `kind`, with the `node_type` column when `typed`.
pub fn learned_schema(dim: usize, kind: IdKind, typed: bool) -> SchemaRef {
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let mut fields = Vec::with_capacity(3);
    if typed {
        fields.push(Field::new(NODE_TYPE, DataType::Utf8, false));
    }
    fields.push(Field::new(NODE_ID, ids::data_type(kind), false));
    fields.push(Field::new(EMBEDDING, DataType::FixedSizeList(item, dim as i32), false));
    Arc::new(Schema::new(fields))
}

/// Rows as a batch of [`learned_schema`]: `types` the rows' type names (a typed model's),
/// `ids` an `int64` or `utf8` column, `values` `dim` a row.
pub fn learned_batch(types: Option<ArrayRef>, ids: ArrayRef, values: Vec<f32>, dim: usize) -> RecordBatch {
    let kind = if ids.data_type() == &DataType::Utf8 { IdKind::String } else { IdKind::Int };
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let embeddings = FixedSizeListArray::try_new(item, dim as i32, Arc::new(Float32Array::from(values)), None)
        .expect("each row holds dim values");
    let schema = learned_schema(dim, kind, types.is_some());
    let columns: Vec<ArrayRef> = types.into_iter().chain([ids, Arc::new(embeddings) as ArrayRef]).collect();
    RecordBatch::try_new(schema, columns).expect("columns match the learned schema")
}

/// Integer rows `(id, values)` as a batch of [`learned_schema`].
pub fn int_learned_batch(rows: &[(i64, Vec<f32>)], dim: usize) -> RecordBatch {
    let ids = Int64Array::from_iter_values(rows.iter().map(|(id, _)| *id));
    learned_batch(None, Arc::new(ids), rows.iter().flat_map(|(_, v)| v.iter().copied()).collect(), dim)
}

/// A batch of the table, checked: ids without nulls, embeddings `dim` wide and finite.
pub struct LearnedBatch {
    pub ids: IdColumn,
    /// A typed model's table: each row's typed key (`crate::typed::pack`).
    typed_keys: Option<Vec<i64>>,
    values: Float32Array,
    dim: usize,
}

impl LearnedBatch {
    /// `first_row`: the file row of the batch's row 0, for error locations. `types`: a typed
    /// model's node type names, in type order (its table names each row's type).
    pub fn from_batch(
        batch: &RecordBatch,
        file: &str,
        first_row: u64,
        dim: usize,
        types: Option<&[String]>,
    ) -> Result<Self, BadInput> {
        let ids = IdColumn::read(batch, NODE_ID, file, first_row)?;
        let typed_keys =
            types.map(|names| typed::typed_keys(batch, &ids, names, "the model", file, first_row)).transpose()?;
        let column = required(batch, EMBEDDING, file)?;
        let at = |row: Option<u64>| {
            let place = Location::file(file).column(EMBEDDING);
            match row {
                Some(r) => place.row(r),
                None => place,
            }
        };
        let list = match column.data_type() {
            DataType::FixedSizeList(item, size) if *size as usize == dim && item.data_type() == &DataType::Float32 => {
                column.as_fixed_size_list()
            }
            other => {
                return Err(BadInput::new(
                    at(None),
                    format!("expected fixed_size_list<float32, {dim}>, found {other}"),
                ));
            }
        };
        if let Some(r) = (0..list.len()).find(|&r| list.is_null(r)) {
            return Err(BadInput::new(at(Some(first_row + r as u64)), "a null embedding"));
        }
        let values = list.values().as_primitive::<Float32Type>().clone();
        if let Some(j) = (0..values.len()).find(|&j| values.is_null(j) || !values.value(j).is_finite()) {
            return Err(BadInput::new(
                at(Some(first_row + (j / dim.max(1)) as u64)),
                "a value that is null or not finite",
            ));
        }
        Ok(LearnedBatch { ids, typed_keys, values, dim })
    }

    /// Row `i`'s key in the stages: its typed key in a typed model's table, else its id as
    /// [`IdColumn::hashed`] reads it.
    pub fn key(&self, i: usize) -> i64 {
        self.typed_keys.as_ref().map_or_else(|| self.ids.hashed(i), |keys| keys[i])
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Row `i`'s embedding.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.values.values()[i * self.dim..(i + 1) * self.dim]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_batch_reads_back_and_a_wrong_width_is_named() {
        let rows = vec![(4, vec![0.5, 1.5]), (9, vec![-1.0, 2.0])];
        let batch = int_learned_batch(&rows, 2);
        let back = LearnedBatch::from_batch(&batch, "t.parquet", 10, 2, None).unwrap();
        assert_eq!((back.ids.key(1), back.row(1)), (crate::ids::Key::Int(9), &[-1.0, 2.0][..]));
        let wrong = LearnedBatch::from_batch(&batch, "t.parquet", 10, 3, None).err().unwrap().to_string();
        assert!(wrong.contains("t.parquet") && wrong.contains("embedding") && wrong.contains("3"), "{wrong}");
        let nan = int_learned_batch(&[(1, vec![f32::NAN, 0.0])], 2);
        let bad = LearnedBatch::from_batch(&nan, "t.parquet", 7, 2, None).err().unwrap().to_string();
        assert!(bad.contains("row 7") && bad.contains("not finite"), "{bad}");
    }

    #[test]
    fn a_typed_table_keys_each_row_by_its_type_and_names_a_type_it_does_not_know() {
        let names = ["item".to_owned(), "user".to_owned()];
        let types = |t: &[&str]| Some(Arc::new(arrow_array::StringArray::from(t.to_vec())) as ArrayRef);
        let ids = || Arc::new(Int64Array::from(vec![3, 3])) as ArrayRef;
        let batch = learned_batch(types(&["user", "item"]), ids(), vec![1.0, 2.0], 1);
        assert_eq!(batch.schema().field(0).name(), NODE_TYPE);
        let back = LearnedBatch::from_batch(&batch, "t.parquet", 0, 1, Some(&names)).unwrap();
        assert_eq!((back.key(0), back.key(1)), (typed::pack(1, 3).unwrap(), typed::pack(0, 3).unwrap()));
        let bad = learned_batch(types(&["user", "shop"]), ids(), vec![1.0, 2.0], 1);
        let error = LearnedBatch::from_batch(&bad, "t.parquet", 5, 1, Some(&names)).err().unwrap().to_string();
        assert!(error.contains("row 6") && error.contains("node_type") && error.contains("\"shop\""), "{error}");
        // pandas writes a category column as a dictionary: read as its values.
        let dictionary: arrow_array::DictionaryArray<arrow_array::types::Int32Type> =
            vec!["user", "item"].into_iter().collect();
        let columns: Vec<ArrayRef> = vec![Arc::new(dictionary), ids(), batch.column(2).clone()];
        let categories = RecordBatch::try_from_iter(["node_type", "node_id", "embedding"].into_iter().zip(columns));
        let back = LearnedBatch::from_batch(&categories.unwrap(), "t.parquet", 0, 1, Some(&names)).unwrap();
        assert_eq!(back.key(0), typed::pack(1, 3).unwrap());
        let nulls: ArrayRef = Arc::new(arrow_array::StringArray::from(vec![None, Some("item")]));
        let columns = vec![nulls, ids(), batch.column(2).clone()];
        let null = RecordBatch::try_from_iter(["node_type", "node_id", "embedding"].into_iter().zip(columns)).unwrap();
        let error = LearnedBatch::from_batch(&null, "t.parquet", 0, 1, Some(&names)).err().unwrap().to_string();
        assert!(error.contains("a null node type") && !error.contains("None"), "{error}");
        let untyped =
            LearnedBatch::from_batch(&int_learned_batch(&[(3, vec![1.0])], 1), "t.parquet", 0, 1, Some(&names));
        assert!(untyped.err().unwrap().to_string().contains("node_type"));
    }
}
