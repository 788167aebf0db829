//! The edge table: `src: int64`, `dst: int64`, optional `weight: float32` (> 0), optional
//! `features: list<float32>` (validated for type; not carried into records).

use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use crate::error::{BadInput, Location};
use crate::nodes::{FloatLists, int64, no_nulls};

pub const SRC: &str = "src";
pub const DST: &str = "dst";
pub const WEIGHT: &str = "weight";
pub const FEATURES: &str = "features";

/// The schema this project writes for edge tables (`import`, `generate`).
pub fn edge_schema() -> Schema {
    Schema::new(vec![
        Field::new(SRC, DataType::Int64, false),
        Field::new(DST, DataType::Int64, false),
        Field::new(WEIGHT, DataType::Float32, false),
    ])
}

/// Edges as a batch of [`edge_schema`]: what `import` and `generate` write.
pub fn to_batch(src: Vec<i64>, dst: Vec<i64>, weight: Vec<f32>) -> RecordBatch {
    let columns: Vec<ArrayRef> =
        vec![Arc::new(Int64Array::from(src)), Arc::new(Int64Array::from(dst)), Arc::new(Float32Array::from(weight))];
    RecordBatch::try_new(Arc::new(edge_schema()), columns).expect("columns match the edge schema")
}

/// The edge table's columns of one record batch, typed and checked.
pub struct EdgeBatch {
    pub src: Int64Array,
    pub dst: Int64Array,
    pub weight: Option<Float32Array>,
}

impl EdgeBatch {
    /// Checks presence, types and nulls; `require_positive` adds `weight > 0` (the weighted
    /// sampler's condition). A weight must be finite in any case.
    pub fn from_batch(
        batch: &RecordBatch,
        file: &str,
        first_row: u64,
        require_positive: bool,
    ) -> Result<Self, BadInput> {
        let src = int64(batch, SRC, file)?;
        no_nulls(&src, SRC, file, first_row)?;
        let dst = int64(batch, DST, file)?;
        no_nulls(&dst, DST, file, first_row)?;
        let weight = match batch.column_by_name(WEIGHT) {
            None => None,
            Some(array) => {
                if array.data_type() != &DataType::Float32 {
                    return Err(BadInput::new(
                        Location::file(file).column(WEIGHT),
                        format!("expected float32, found {}", array.data_type()),
                    ));
                }
                let weight = array.as_primitive::<Float32Type>().clone();
                no_nulls(&weight, WEIGHT, file, first_row)?;
                for (i, &w) in weight.values().iter().enumerate() {
                    let bad = if !w.is_finite() {
                        Some(format!("weight must be finite, found {w}"))
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
        if batch.column_by_name(FEATURES).is_some() {
            FloatLists::from_column(batch, FEATURES, file)?;
        }
        Ok(EdgeBatch { src, dst, weight })
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// Edge `i`'s weight; 1.0 when the table has no weight column.
    pub fn weight(&self, i: usize) -> f32 {
        self.weight.as_ref().map_or(1.0, |w| w.value(i))
    }
}
