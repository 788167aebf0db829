//! The partition table `[partition]` writes and `[flatten]`/`[infer]` read as their owner map
//! (`partition = "PATH"`): one row per node, `node_id` (`int64`, or `utf8` holding the original
//! strings of a graph keyed by strings), `part` (`int32`; any integer type reads, as
//! `crate::columns` reads ids), and in a typed graph a `node_type` column (`utf8`, the type's
//! name) first. A table written by another tool (METIS's output joined with the ids) reads
//! alike.

use arrow_array::{Array, RecordBatch};

use crate::columns::{int64, required};
use crate::error::{BadInput, Location};
use crate::ids::IdColumn;
use crate::nodes::NODE_ID;
use crate::typed;

pub const PART: &str = "part";

/// A batch of the table, checked: ids and parts without nulls, parts in `[0, 2^31)`.
pub struct PartBatch {
    pub ids: IdColumn,
    /// A typed graph's table: each row's typed key (`crate::typed::pack`, a string's `h`).
    typed_keys: Option<Vec<i64>>,
    pub parts: Vec<u32>,
}

impl PartBatch {
    /// `first_row`: the file row of the batch's row 0, for error locations. `types`: a typed
    /// graph's node type names, in type order (its table names each row's type).
    pub fn from_batch(
        batch: &RecordBatch,
        file: &str,
        first_row: u64,
        types: Option<&[String]>,
    ) -> Result<Self, BadInput> {
        let ids = IdColumn::read(batch, NODE_ID, file, first_row)?;
        let typed_keys =
            types.map(|names| typed::typed_keys(batch, &ids, names, "the graph", file, first_row)).transpose()?;
        let values = int64(required(batch, PART, file)?, PART, file, first_row)?;
        let at = |i: usize| Location::file(file).row(first_row + i as u64).column(PART);
        let parts = (0..values.len())
            .map(|i| match values.is_valid(i).then(|| values.value(i)) {
                None => Err(BadInput::new(at(i), "a null part: every row names its node's part".to_owned())),
                Some(p) if !(0..=i64::from(i32::MAX)).contains(&p) => {
                    Err(BadInput::new(at(i), format!("part {p} is outside [0, 2^31)")))
                }
                Some(p) => Ok(p as u32),
            })
            .collect::<Result<_, _>>()?;
        Ok(PartBatch { ids, typed_keys, parts })
    }

    /// Row `i`'s key in the stages before strings are resolved: its typed key in a typed
    /// graph's table, else its id as [`IdColumn::hashed`] reads it.
    pub fn key(&self, i: usize) -> i64 {
        self.typed_keys.as_ref().map_or_else(|| self.ids.hashed(i), |keys| keys[i])
    }

    pub fn len(&self) -> usize {
        self.parts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int32Array, Int64Array, StringArray};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn ids_and_parts_read_back_in_any_integer_type() {
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![7, -3]));
        let read = |parts: ArrayRef| {
            let b =
                PartBatch::from_batch(&batch(vec![("node_id", ids.clone()), ("part", parts)]), "p.parquet", 0, None);
            let b = b.unwrap();
            (b.key(0), b.key(1), b.parts.clone())
        };
        assert_eq!(read(Arc::new(Int32Array::from(vec![2, 0]))), (7, -3, vec![2, 0]));
        // pandas writes int64.
        assert_eq!(read(Arc::new(Int64Array::from(vec![1, 5]))), (7, -3, vec![1, 5]));
    }

    #[test]
    fn a_null_or_negative_part_and_a_missing_column_are_named() {
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        let error = |parts: ArrayRef| {
            let b = batch(vec![("node_id", ids.clone()), ("part", parts)]);
            PartBatch::from_batch(&b, "p.parquet", 10, None).err().unwrap().to_string()
        };
        let null = error(Arc::new(Int32Array::from(vec![Some(0), None, Some(1)])));
        assert!(null.contains("p.parquet") && null.contains("row 11") && null.contains("part"), "{null}");
        let negative = error(Arc::new(Int64Array::from(vec![0, 1, -4])));
        assert!(negative.contains("row 12") && negative.contains("-4"), "{negative}");
        let big = error(Arc::new(Int64Array::from(vec![0, 1 << 40, 0])));
        assert!(big.contains("row 11") && big.contains("2^31"), "{big}");
        let missing = PartBatch::from_batch(&batch(vec![("node_id", ids)]), "p.parquet", 0, None);
        assert!(missing.err().unwrap().to_string().contains("part"));
    }

    #[test]
    fn a_typed_table_keys_rows_by_type_and_names_an_unknown_type() {
        let names = ["paper".to_owned(), "author".to_owned()];
        let types: ArrayRef = Arc::new(StringArray::from(vec!["author", "paper"]));
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![4, 4]));
        let parts: ArrayRef = Arc::new(Int32Array::from(vec![1, 0]));
        let b = batch(vec![("node_type", types), ("node_id", ids.clone()), ("part", parts.clone())]);
        let read = PartBatch::from_batch(&b, "p.parquet", 0, Some(&names)).unwrap();
        assert_eq!((read.key(0), read.key(1)), (typed::pack(1, 4).unwrap(), typed::pack(0, 4).unwrap()));
        let unknown: ArrayRef = Arc::new(StringArray::from(vec!["author", "venue"]));
        let b = batch(vec![("node_type", unknown), ("node_id", ids), ("part", parts)]);
        let error = PartBatch::from_batch(&b, "p.parquet", 0, Some(&names)).err().unwrap().to_string();
        assert!(error.contains("row 1") && error.contains("\"venue\"") && error.contains("the graph"), "{error}");
    }
}
