//! What a refresh of the control variates' histories reads of a record: its root's id,
//! feature vector and in-degree, read off a batch's buffers without building the record
//! ([`RootColumns`]).
//!
//! A refresh reads every record of every split, and of most of them it needs nothing else: the
//! training step reads the training records again, the evaluation the others. Building each
//! as a [`super::Record`] (its node, edge and neighbor lists copied out of the batch) took a
//! third of the refresh before the first step on the generated 1M graph (BENCHMARKS.md,
//! section 27). What is read is checked as a record's reading checks it (a null list or item, a
//! root missing from its own record, a width that is not the set's, a value that is null or not
//! finite, an in-degree that is negative or not the length of the root's in-neighbor list), so
//! a bad root is an error naming its file, row and column here too, even in a record that no
//! pass reads (one without a label); the rest of the record is checked where a pass reads it.

use arrow_array::types::Int64Type;
use arrow_array::{Array, Int64Array, RecordBatch};

use super::batch::{At, Features, ListColumn, roots};
use super::schema::{NODE_FEATURES, NODE_IDS, NODE_IN_DEGREES, ROOT_ID, ROOT_NEIGHBORS};
use crate::error::BadInput;

/// One record's root, as a refresh reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Root<'a> {
    pub id: i64,
    /// The root's feature vector: the record's first node's.
    pub features: &'a [f32],
    /// Its in-degree in the whole graph.
    pub in_degree: i64,
}

/// The columns of a batch of homogeneous node records that a refresh reads, resolved once.
pub struct RootColumns<'a> {
    at: At<'a>,
    roots: &'a Int64Array,
    node_ids: ListColumn<'a, Int64Type>,
    features: Features<'a>,
    in_degrees: ListColumn<'a, Int64Type>,
    /// The roots' in-neighbor lists, where the set has them: one entry an in-edge.
    neighbors: Option<ListColumn<'a, Int64Type>>,
}

impl<'a> RootColumns<'a> {
    /// The columns of `batch`, rows `first_row..` of `file`; an error names a column missing
    /// or of another type (typed records' nested features among them).
    pub fn new(batch: &'a RecordBatch, file: &'a str, first_row: u64) -> Result<Self, BadInput> {
        let at = At { file, first_row };
        Ok(RootColumns {
            roots: roots(batch, &at)?,
            node_ids: ListColumn::new(batch, NODE_IDS, &at)?,
            features: Features::new(batch, NODE_FEATURES, &at)?,
            in_degrees: ListColumn::new(batch, NODE_IN_DEGREES, &at)?,
            neighbors: match batch.column_by_name(ROOT_NEIGHBORS) {
                Some(_) => Some(ListColumn::new(batch, ROOT_NEIGHBORS, &at)?),
                None => None,
            },
            at,
        })
    }

    /// Rows in the batch.
    pub fn len(&self) -> usize {
        self.roots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// The width of a feature vector.
    pub fn dim(&self) -> usize {
        self.features.dim
    }

    /// Row `row`'s root, checked.
    pub fn root(&self, row: usize) -> Result<Root<'a>, BadInput> {
        let bad = |column, problem: String| Err(self.at.bad(row, column, problem));
        if self.roots.is_null(row) {
            return bad(ROOT_ID, "null root".into());
        }
        let id = self.roots.value(row);
        if self.node_ids.first(row, &self.at)? != Some(id) {
            return bad(NODE_IDS, format!("the record of root {id} must list its root first"));
        }
        let Some(in_degree) = self.in_degrees.first(row, &self.at)? else {
            return bad(NODE_IN_DEGREES, format!("root {id}: no in-degree for its root"));
        };
        if in_degree < 0 {
            return bad(NODE_IN_DEGREES, format!("root {id}: an in-degree of {in_degree}"));
        }
        // The degree weighs the root's history: it must be the in-edges the list holds.
        if let Some(neighbors) = &self.neighbors
            && let n = neighbors.len(row, &self.at)?
            && n as i64 != in_degree
        {
            return bad(ROOT_NEIGHBORS, format!("{n} in-neighbors for a root of in-degree {in_degree}"));
        }
        let Some(features) = self.features.first(row) else {
            return bad(NODE_FEATURES, format!("root {id}: no feature vector for its root"));
        };
        if let Some(v) = features.iter().find(|v| !v.is_finite()) {
            return bad(NODE_FEATURES, format!("root {id}: a feature value of {v}"));
        }
        Ok(Root { id, features, in_degree })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, Schema};

    use super::*;
    use crate::label::{Label, LabelKind};
    use crate::record::schema::list_of;
    use crate::record::{Record, record_fields, to_batch};
    use crate::split::Split;

    fn batch(records: &[Record]) -> RecordBatch {
        to_batch(records, &Arc::new(Schema::new(record_fields(2, LabelKind::Class, 0)))).unwrap()
    }

    fn record(root: i64, split: Option<Split>, labeled: bool) -> Record {
        Record {
            root,
            label: labeled.then_some(Label::Class(1)),
            split,
            node_ids: vec![root, root + 100],
            hops: vec![0, 1],
            in_degrees: vec![root * 3, 7],
            features: vec![root as f32, 0.5, -1.0, 2.0],
            edge_src: vec![1],
            edge_dst: vec![0],
            edge_weights: vec![1.0],
            edge_layers: vec![1],
            ..Record::default()
        }
    }

    /// Every root read off the columns equals the one the record built from the same row holds.
    #[test]
    fn roots_equal_the_records_roots() {
        let records =
            vec![record(4, Some(Split::Train), true), record(9, Some(Split::Test), false), record(2, None, true)];
        let batch = batch(&records);
        let columns = RootColumns::new(&batch, "f.parquet", 10).unwrap();
        assert_eq!((columns.len(), columns.dim()), (3, 2));
        for (row, r) in records.iter().enumerate() {
            let root = columns.root(row).unwrap();
            assert_eq!((root.id, root.features, root.in_degree), (r.root, r.node_features(0), r.in_degrees[0]));
        }
    }

    /// A root that is not finite, or not its record's first node, is an error naming the file,
    /// the row and the column.
    #[test]
    fn a_bad_root_names_its_row_and_column() {
        let mut nan = record(5, Some(Split::Valid), true);
        nan.features[1] = f32::NAN;
        let mut moved = record(6, Some(Split::Valid), true);
        moved.node_ids.swap(0, 1);
        let mut negative = record(7, None, false);
        negative.in_degrees[0] = -5;
        let batch = batch(&[record(1, None, false), nan, moved, negative]);
        let columns = RootColumns::new(&batch, "f.parquet", 10).unwrap();
        let e = columns.root(1).unwrap_err().to_string();
        assert!(e.contains("f.parquet") && e.contains("row 11") && e.contains(NODE_FEATURES), "{e}");
        let e = columns.root(2).unwrap_err().to_string();
        assert!(e.contains("row 12") && e.contains(NODE_IDS), "{e}");
        let e = columns.root(3).unwrap_err().to_string();
        assert!(e.contains("row 13") && e.contains(NODE_IN_DEGREES) && e.contains("-5"), "{e}");
    }

    /// With the roots' in-neighbor lists, an in-degree that is not a list's length is an error,
    /// as where the whole record is read.
    #[test]
    fn an_in_degree_is_its_lists_length() {
        let listed = |root: i64, degree: i64, neighbors: usize| Record {
            in_degrees: vec![degree, 7],
            root_neighbors: (0..neighbors as i64).collect(),
            ..record(root, None, false)
        };
        let fields = record_fields(2, LabelKind::Class, 0);
        let fields = fields.into_iter().chain([Field::new(ROOT_NEIGHBORS, list_of(DataType::Int64), false)]);
        let schema = Arc::new(Schema::new(fields.collect::<Vec<_>>()));
        let batch = to_batch(&[listed(1, 3, 3), listed(2, 1 << 62, 6)], &schema).unwrap();
        let columns = RootColumns::new(&batch, "f.parquet", 0).unwrap();
        assert_eq!(columns.root(0).unwrap().in_degree, 3);
        let e = columns.root(1).unwrap_err().to_string();
        assert!(e.contains("row 1") && e.contains(ROOT_NEIGHBORS) && e.contains("6 in-neighbors"), "{e}");
    }
}
