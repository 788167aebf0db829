//! An Arrow array's buffers taken back as vectors once nothing else holds them. A writer that
//! lays out batch after batch refills the vectors of a batch already written instead of
//! allocating new ones: no copy as they grow again, no fresh pages to fault in, and no block
//! freed on one thread and allocated on another (the allocator's arena lock, which the worker
//! and the encoding thread otherwise contend for).
//!
//! Each function takes its array by value and gives up (`None`) where a buffer is shared, is
//! sliced, or was not allocated as a vector of its type: the caller then allocates as before.

use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, ArrowPrimitiveType};
use arrow_schema::DataType;

/// The values of a `list` or `fixed_size_list` column, its offsets dropped.
pub(super) fn values(array: ArrayRef) -> Option<ArrayRef> {
    match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list_opt::<i32>()?.clone();
            // The clone shares the buffers; dropping the original leaves it their only holder.
            drop(array);
            Some(list.into_parts().2)
        }
        DataType::FixedSizeList(..) => {
            let list = array.as_fixed_size_list_opt()?.clone();
            drop(array);
            Some(list.into_parts().2)
        }
        _ => None,
    }
}

/// The values of a primitive array as a vector of its length and capacity.
pub(super) fn vector<T: ArrowPrimitiveType>(array: ArrayRef) -> Option<Vec<T::Native>> {
    let primitive = array.as_primitive_opt::<T>()?.clone();
    drop(array);
    let (_, values, _) = primitive.into_parts();
    values.into_inner().into_vec().ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::{Float32Type, Int64Type};
    use arrow_array::{Array, FixedSizeListArray, Float32Array, Int64Array, ListArray};
    use arrow_buffer::OffsetBuffer;
    use arrow_schema::Field;

    use super::*;

    #[test]
    fn an_only_holder_gets_the_same_allocation_back() {
        let values: Vec<i64> = Vec::with_capacity(100);
        let at = values.as_ptr();
        let mut values = values;
        values.extend(0..10);
        let array: ArrayRef = Arc::new(Int64Array::from(values));
        let back = vector::<Int64Type>(array).expect("the only holder");
        assert_eq!((back.as_ptr(), back.len(), back.capacity()), (at, 10, 100));
        assert_eq!(back, (0..10).collect::<Vec<i64>>());
    }

    #[test]
    fn nested_lists_give_back_their_leaf_values() {
        let floats = Float32Array::from((0..12).map(|v| v as f32).collect::<Vec<_>>());
        let item = Arc::new(Field::new("item", DataType::Float32, false));
        let vectors = FixedSizeListArray::try_new(item, 3, Arc::new(floats), None).unwrap();
        let per_record = Arc::new(Field::new("item", vectors.data_type().clone(), false));
        let list = ListArray::try_new(per_record, OffsetBuffer::from_lengths([1, 3]), Arc::new(vectors), None).unwrap();
        let back = values(Arc::new(list)).and_then(values).and_then(vector::<Float32Type>);
        assert_eq!(back, Some((0..12).map(|v| v as f32).collect()));
    }

    #[test]
    fn shared_or_sliced_buffers_stay_where_they_are() {
        let array: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        let other_holder = array.clone();
        assert_eq!(vector::<Int64Type>(array), None);
        assert_eq!(other_holder.len(), 3);
        let sliced: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]).slice(1, 2));
        assert_eq!(vector::<Int64Type>(sliced), None);
        let wrong_type: ArrayRef = Arc::new(Float32Array::from(vec![1.0]));
        assert_eq!(vector::<Int64Type>(wrong_type), None);
    }
}
