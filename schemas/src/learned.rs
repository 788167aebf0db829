//! The learned embedding table a model with `[train] learned_embedding_dim = D` carries: one row
//! per node the trainer computed with, `node_id` (`int64`, or `utf8` holding the original string
//! ids of a graph keyed by strings: `crate::ids`), `embedding: fixed_size_list<float32, D>`.
//! The trainer's workers write it in parallel, each its owned rows sorted by id, as Parquet
//! parts in the model directory's `embeddings/` folder, listed in the model's manifest
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

pub const EMBEDDING: &str = "embedding";

/// The table's schema at width `dim`, ids of `kind`.
pub fn learned_schema(dim: usize, kind: IdKind) -> SchemaRef {
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    Arc::new(Schema::new(vec![
        Field::new(NODE_ID, ids::data_type(kind), false),
        Field::new(EMBEDDING, DataType::FixedSizeList(item, dim as i32), false),
    ]))
}

/// Rows as a batch of [`learned_schema`]: `ids` an `int64` or `utf8` column, `values` `dim` a row.
pub fn learned_batch(ids: ArrayRef, values: Vec<f32>, dim: usize) -> RecordBatch {
    let kind = if ids.data_type() == &DataType::Utf8 { IdKind::String } else { IdKind::Int };
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let embeddings = FixedSizeListArray::try_new(item, dim as i32, Arc::new(Float32Array::from(values)), None)
        .expect("each row holds dim values");
    let columns: Vec<ArrayRef> = vec![ids, Arc::new(embeddings)];
    RecordBatch::try_new(learned_schema(dim, kind), columns).expect("columns match the learned schema")
}

/// Integer rows `(id, values)` as a batch of [`learned_schema`].
pub fn int_learned_batch(rows: &[(i64, Vec<f32>)], dim: usize) -> RecordBatch {
    let ids = Int64Array::from_iter_values(rows.iter().map(|(id, _)| *id));
    learned_batch(Arc::new(ids), rows.iter().flat_map(|(_, v)| v.iter().copied()).collect(), dim)
}

/// A batch of the table, checked: ids without nulls, embeddings `dim` wide and finite.
pub struct LearnedBatch {
    pub ids: IdColumn,
    values: Float32Array,
    dim: usize,
}

impl LearnedBatch {
    /// `first_row`: the file row of the batch's row 0, for error locations.
    pub fn from_batch(batch: &RecordBatch, file: &str, first_row: u64, dim: usize) -> Result<Self, BadInput> {
        let ids = IdColumn::read(batch, NODE_ID, file, first_row)?;
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
        Ok(LearnedBatch { ids, values, dim })
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
        let back = LearnedBatch::from_batch(&batch, "t.parquet", 10, 2).unwrap();
        assert_eq!((back.ids.key(1), back.row(1)), (crate::ids::Key::Int(9), &[-1.0, 2.0][..]));
        let wrong = LearnedBatch::from_batch(&batch, "t.parquet", 10, 3).err().unwrap().to_string();
        assert!(wrong.contains("t.parquet") && wrong.contains("embedding") && wrong.contains("3"), "{wrong}");
        let nan = int_learned_batch(&[(1, vec![f32::NAN, 0.0])], 2);
        let bad = LearnedBatch::from_batch(&nan, "t.parquet", 7, 2).err().unwrap().to_string();
        assert!(bad.contains("row 7") && bad.contains("not finite"), "{bad}");
    }
}
