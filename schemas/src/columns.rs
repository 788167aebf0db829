//! Columns as data teams write them, read as this project's types:
//!
//! - integers of any width for ids and class labels: `int8` to `int64`, and `uint8` to `uint64`
//!   below 2^63 (Spark's `IntegerType` is `int32`; a `uint64` of 2^63 or more is bad input at its
//!   row, never a wrapped id);
//! - `float64` feature values and weights (numpy's default), read as the nearest `float32`; a
//!   finite value beyond `float32`'s range is bad input at its row;
//! - dictionary-encoded columns of any of these, or of strings (pandas' `category`, which
//!   pyarrow writes as dictionaries and reads back as such).
//!
//! Every stage reads its tables through these, so each variant gives the same records, scores
//! and pairs as the canonical types (`tests/inputs.rs`).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, Float32Array, Int64Array, PrimitiveArray, RecordBatch, UInt32Array,
};
use arrow_schema::DataType;

use crate::error::{BadInput, Location};

/// Column `column` of `batch` (of file `file`), or bad input naming the columns it has.
pub(crate) fn required<'a>(batch: &'a RecordBatch, column: &str, file: &str) -> Result<&'a ArrayRef, BadInput> {
    batch.column_by_name(column).ok_or_else(|| {
        let found: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
        BadInput::new(
            Location::file(file).column(column),
            format!("missing required column (found: {})", found.join(", ")),
        )
    })
}

/// `array` with its dictionary, if it has one, expanded to the dictionary's values (nulls kept).
pub fn plain(array: &ArrayRef) -> ArrayRef {
    let Some(dictionary) = array.as_any_dictionary_opt() else { return array.clone() };
    let keys: Vec<u32> = dictionary.normalized_keys().into_iter().map(|k| k as u32).collect();
    let indices = UInt32Array::new(keys.into(), dictionary.keys().logical_nulls());
    arrow_select::take::take(dictionary.values().as_ref(), &indices, None)
        .expect("normalized keys index the dictionary's values")
}

/// Whether `data_type` is an integer type (or a dictionary of one) that [`int64`] reads.
pub fn is_integer(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, values) => is_integer(values),
        t => t.is_integer(),
    }
}

/// `array` (column `column` of `file`, from row `first_row`) as `int64`: any integer type or a
/// dictionary of one. A `uint64` of 2^63 or more is bad input at its row.
pub fn int64(array: &ArrayRef, column: &str, file: &str, first_row: u64) -> Result<Int64Array, BadInput> {
    let array = plain(array);
    let widened = match array.data_type() {
        DataType::Int64 => return Ok(array.as_primitive::<Int64Type>().clone()),
        DataType::Int8 => widen::<Int8Type>(&array),
        DataType::Int16 => widen::<Int16Type>(&array),
        DataType::Int32 => widen::<Int32Type>(&array),
        DataType::UInt8 => widen::<UInt8Type>(&array),
        DataType::UInt16 => widen::<UInt16Type>(&array),
        DataType::UInt32 => widen::<UInt32Type>(&array),
        DataType::UInt64 => {
            let values = array.as_primitive::<UInt64Type>();
            if let Some(i) = (0..values.len()).find(|&i| values.is_valid(i) && values.value(i) > i64::MAX as u64) {
                return Err(BadInput::new(
                    Location::file(file).row(first_row + i as u64).column(column),
                    format!("{} is 2^63 or more: integers here must fit int64", values.value(i)),
                ));
            }
            values.unary::<_, Int64Type>(|v| v as i64)
        }
        other => {
            return Err(BadInput::new(
                Location::file(file).column(column),
                format!(
                    "expected an integer (int64, int32, uint64 below 2^63, or a dictionary of them), found {other}"
                ),
            ));
        }
    };
    Ok(widened)
}

fn widen<T: ArrowPrimitiveType>(array: &ArrayRef) -> Int64Array
where
    T::Native: Into<i64>,
{
    array.as_primitive::<T>().unary::<_, Int64Type>(|v| v.into())
}

/// Float values read as `float32`, with the `float64` values they came from where they were
/// wider (for messages about a value beyond `float32`'s range).
#[derive(Debug, Clone)]
pub struct Floats {
    pub values: Float32Array,
    wide: Option<PrimitiveArray<Float64Type>>,
}

impl Floats {
    /// `array` (`float32` or `float64`, or a dictionary of them) as `float32`; `None` for any
    /// other type.
    pub fn read(array: &ArrayRef) -> Option<Floats> {
        let array = plain(array);
        match array.data_type() {
            DataType::Float32 => Some(Floats { values: array.as_primitive::<Float32Type>().clone(), wide: None }),
            DataType::Float64 => {
                let wide = array.as_primitive::<Float64Type>().clone();
                let values = wide.unary::<_, Float32Type>(|v| v as f32);
                Some(Floats { values, wide: Some(wide) })
            }
            _ => None,
        }
    }

    /// Why value `i`, not finite as `float32`, is bad input: a `float64` beyond `float32`'s range
    /// is said as such; `None` when it was not finite to begin with.
    pub fn out_of_range(&self, i: usize) -> Option<String> {
        let wide = self.wide.as_ref()?.value(i);
        wide.is_finite().then(|| format!("{wide:e} is beyond float32's range (float64 values are read as float32)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int32Type;
    use arrow_array::{DictionaryArray, Float64Array, Int32Array, StringArray, UInt64Array};
    use std::sync::Arc;

    #[test]
    fn integers_of_every_width_read_as_int64() {
        let want = Int64Array::from(vec![Some(3), None, Some(7)]);
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(3), None, Some(7)])),
            Arc::new(UInt64Array::from(vec![Some(3), None, Some(7)])),
            Arc::new(PrimitiveArray::<arrow_array::types::Int8Type>::from(vec![Some(3), None, Some(7)])),
            Arc::new(DictionaryArray::<Int32Type>::new(
                Int32Array::from(vec![Some(1), None, Some(0)]),
                Arc::new(Int64Array::from(vec![7, 3])),
            )),
        ];
        for array in arrays {
            assert_eq!(int64(&array, "c", "f", 0).unwrap(), want, "{}", array.data_type());
        }
    }

    #[test]
    fn a_uint64_beyond_int64_is_bad_input_at_its_row() {
        let array: ArrayRef = Arc::new(UInt64Array::from(vec![1, u64::MAX]));
        let error = int64(&array, "node_id", "f", 10).unwrap_err();
        assert_eq!((error.at.row, error.at.column.as_deref()), (Some(11), Some("node_id")));
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        assert!(int64(&strings, "node_id", "f", 0).unwrap_err().problem.contains("found Utf8"));
    }

    #[test]
    fn float64_reads_as_the_nearest_float32_and_names_what_does_not_fit() {
        let array: ArrayRef = Arc::new(Float64Array::from(vec![0.1, 1e300, f64::NAN]));
        let floats = Floats::read(&array).unwrap();
        assert_eq!(floats.values.value(0), 0.1f32);
        assert!(floats.values.value(1).is_infinite());
        assert!(floats.out_of_range(1).unwrap().contains("beyond float32's range"));
        assert_eq!(floats.out_of_range(2), None, "a NaN was never finite");
    }

    #[test]
    fn dictionaries_of_strings_expand() {
        let array: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::new(
            Int32Array::from(vec![Some(1), None, Some(1)]),
            Arc::new(StringArray::from(vec!["test", "train"])),
        ));
        let plain = plain(&array);
        let strings = plain.as_string::<i32>();
        assert_eq!(strings.iter().collect::<Vec<_>>(), vec![Some("train"), None, Some("train")]);
    }
}
