//! Records laid out column by column as they arrive, then handed over as one Arrow batch.
//!
//! A writer that built a `Record` per row and then copied every record into the batch's
//! columns allocated ten vectors a record and copied each feature once more than it needs to.
//! [`RecordColumns`] appends each record's values straight onto the columns' flat buffers, and
//! [`RecordColumns::take_batch`] moves those buffers into Arrow arrays without copying them.
//! [`to_batch`](super::to_batch), which converts `Record`s, builds its arrays with this
//! file's functions, so both lay out the same batch.
//!
//! Invariants:
//! - **One layout.** Every column's Arrow array is built by this file's functions, from the
//!   record schema's field names (columns are found by name, never by position).
//! - **Records are whole.** A record is opened by [`RecordColumns::start`]; its nodes and edges
//!   follow; the next `start` (or `take_batch`) ends it. Each per-record list column gets its
//!   offsets from the record's counts, so no record's values can spill into another's.
//! - **The bytes counted are the bytes held**: [`RecordColumns::bytes`] grows by what
//!   `Record::size_bytes` says of the same record, so a writer cuts its batches and row groups
//!   at the same records whichever way it builds them.

use std::mem::take;
use std::sync::Arc;

use arrow_array::types::{Float32Type, Int32Type, Int64Type, UInt8Type, UInt32Type};
use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray,
    UInt8Array, UInt32Array,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{ArrowError, DataType, Field, SchemaRef};

use super::reclaim;
use super::schema::*;
use crate::label::Label;
use crate::split::Split;

/// The bytes a node takes in memory beside its features (id, in-degree, hop), and an edge
/// beside its features (ends, weight, layers); a typed node or edge adds its type and width.
const NODE_BYTES: usize = 17;
const EDGE_BYTES: usize = 16;
const TYPED_BYTES: usize = 5;

/// A batch of records under construction, one flat buffer per column.
#[derive(Debug, Clone, Default)]
pub struct RecordColumns {
    roots: Vec<i64>,
    labels: Vec<Option<Label>>,
    splits: Vec<Option<Split>>,
    /// Each record's count of nodes and of edges.
    node_counts: Vec<usize>,
    edge_counts: Vec<usize>,
    node_ids: Vec<i64>,
    /// A graph keyed by strings: each node's original string, one after another, and how many
    /// each record has.
    keys: String,
    key_ends: Vec<i32>,
    key_counts: Vec<usize>,
    hops: Vec<u8>,
    in_degrees: Vec<i64>,
    features: Vec<f32>,
    edge_src: Vec<i32>,
    edge_dst: Vec<i32>,
    edge_weights: Vec<f32>,
    edge_layers: Vec<u32>,
    edge_features: Vec<f32>,
    /// Typed records only: each node's type and feature width, each edge's relation and
    /// feature width.
    node_types: Vec<u8>,
    node_widths: Vec<u32>,
    edge_relations: Vec<u8>,
    edge_widths: Vec<u32>,
    /// Records with `root_neighbors`: each record's in-neighbors of its root, one after
    /// another, and how many each record has.
    root_neighbors: Vec<i64>,
    neighbor_counts: Vec<usize>,
    bytes: usize,
}

impl RecordColumns {
    /// Records laid out so far.
    pub fn len(&self) -> usize {
        self.roots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// Roughly the bytes held, as `Record::size_bytes` counts a record's.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The bytes of a record of `nodes` nodes with `values` feature values and `edges` edges
    /// with `edge_values`, `typed` of its nodes and edges typed.
    pub(super) fn bytes_of(nodes: usize, values: usize, edges: usize, edge_values: usize, typed: usize) -> usize {
        nodes * NODE_BYTES + 4 * values + edges * EDGE_BYTES + 4 * edge_values + typed * TYPED_BYTES
    }

    /// Opens the next record; its nodes (root first) and edges follow.
    pub fn start(&mut self, root: i64, label: Option<Label>, split: Option<Split>) {
        self.roots.push(root);
        self.labels.push(label);
        self.splits.push(split);
        self.node_counts.push(0);
        self.edge_counts.push(0);
        self.key_counts.push(0);
        self.neighbor_counts.push(0);
    }

    /// Gives the open record its root's in-neighbors (`ROOT_NEIGHBORS`).
    pub fn root_neighbors(&mut self, ids: &[i64]) {
        *self.neighbor_counts.last_mut().expect("neighbors belong to a started record") += ids.len();
        self.root_neighbors.extend_from_slice(ids);
        self.bytes += 8 * ids.len();
    }

    /// Gives the node just added its original string (a graph keyed by strings).
    pub fn key(&mut self, key: &str) {
        *self.key_counts.last_mut().expect("a key belongs to a started record") += 1;
        self.keys.push_str(key);
        self.key_ends.push(self.keys.len() as i32);
        self.bytes += key.len() + 4;
    }

    /// Adds a node to the open record; a typed record's nodes carry their type.
    pub fn node(&mut self, id: i64, hop: u8, in_degree: i64, features: &[f32], node_type: Option<u8>) {
        *self.node_counts.last_mut().expect("a node belongs to a started record") += 1;
        self.node_ids.push(id);
        self.hops.push(hop);
        self.in_degrees.push(in_degree);
        self.features.extend_from_slice(features);
        self.bytes += NODE_BYTES + 4 * features.len();
        if let Some(t) = node_type {
            self.node_types.push(t);
            self.node_widths.push(features.len() as u32);
            self.bytes += TYPED_BYTES;
        }
    }

    /// Adds an edge (local node indices) to the open record; a typed record's edges carry
    /// their relation.
    pub fn edge(&mut self, src: i32, dst: i32, weight: f32, layers: u32, features: &[f32], relation: Option<u8>) {
        *self.edge_counts.last_mut().expect("an edge belongs to a started record") += 1;
        self.edge_src.push(src);
        self.edge_dst.push(dst);
        self.edge_weights.push(weight);
        self.edge_layers.push(layers);
        self.edge_features.extend_from_slice(features);
        self.bytes += EDGE_BYTES + 4 * features.len();
        if let Some(r) = relation {
            self.edge_relations.push(r);
            self.edge_widths.push(features.len() as u32);
            self.bytes += TYPED_BYTES;
        }
    }

    /// The records laid out so far as one batch of `schema` (a record schema), column by
    /// column name; the columns are left empty.
    pub fn take_batch(&mut self, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
        let RecordColumns {
            mut roots,
            labels: record_labels,
            splits,
            node_counts: nodes,
            edge_counts: edges,
            mut node_ids,
            keys,
            key_ends,
            key_counts,
            mut hops,
            mut in_degrees,
            mut features,
            mut edge_src,
            mut edge_dst,
            mut edge_weights,
            mut edge_layers,
            mut edge_features,
            mut node_types,
            node_widths,
            mut edge_relations,
            edge_widths,
            mut root_neighbors,
            neighbor_counts,
            bytes: _,
        } = std::mem::take(self);
        // Each column is named once in a schema: its buffer moves into its array.
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            columns.push(match field.name().as_str() {
                ROOT_ID => Arc::new(Int64Array::from(take(&mut roots))),
                LABEL => labels(&record_labels, field)?,
                SPLIT => Arc::new(StringArray::from_iter(splits.iter().map(|s| s.map(Split::name)))),
                NODE_IDS => list(&nodes, DataType::Int64, Arc::new(Int64Array::from(take(&mut node_ids))))?,
                NODE_KEYS => list(&key_counts, DataType::Utf8, Arc::new(strings(&keys, &key_ends)?))?,
                NODE_HOPS => list(&nodes, DataType::UInt8, Arc::new(UInt8Array::from(take(&mut hops))))?,
                NODE_IN_DEGREES => list(&nodes, DataType::Int64, Arc::new(Int64Array::from(take(&mut in_degrees))))?,
                NODE_FEATURES if nested(field) => nested_features(field, &nodes, &node_widths, take(&mut features))?,
                NODE_FEATURES => vectors(field, &nodes, take(&mut features))?,
                NODE_TYPES => list(&nodes, DataType::UInt8, Arc::new(UInt8Array::from(take(&mut node_types))))?,
                EDGE_RELATIONS => list(&edges, DataType::UInt8, Arc::new(UInt8Array::from(take(&mut edge_relations))))?,
                EDGE_FEATURES if nested(field) => {
                    nested_features(field, &edges, &edge_widths, take(&mut edge_features))?
                }
                EDGE_FEATURES => vectors(field, &edges, take(&mut edge_features))?,
                EDGE_SRC => list(&edges, DataType::Int32, Arc::new(Int32Array::from(take(&mut edge_src))))?,
                EDGE_DST => list(&edges, DataType::Int32, Arc::new(Int32Array::from(take(&mut edge_dst))))?,
                EDGE_WEIGHTS => list(&edges, DataType::Float32, Arc::new(Float32Array::from(take(&mut edge_weights))))?,
                EDGE_LAYERS => list(&edges, DataType::UInt32, Arc::new(UInt32Array::from(take(&mut edge_layers))))?,
                ROOT_NEIGHBORS => {
                    list(&neighbor_counts, DataType::Int64, Arc::new(Int64Array::from(take(&mut root_neighbors))))?
                }
                other => return Err(ArrowError::SchemaError(format!("no record column is named {other:?}"))),
            });
        }
        RecordBatch::try_new(schema.clone(), columns)
    }

    /// Takes back the buffers of a batch laid out here once it has been written, for the
    /// columns to fill again ([`super::reclaim`]): each empty column gains the capacity of the
    /// batch's, where nothing else holds that buffer. A typed record set's nested features stay
    /// where they are.
    pub fn recycle(&mut self, batch: RecordBatch) {
        let (schema, columns, _) = batch.into_parts();
        for (field, column) in schema.fields().iter().zip(columns) {
            let leaf = |column| reclaim::values(column);
            match field.name().as_str() {
                ROOT_ID => refill(&mut self.roots, reclaim::vector::<Int64Type>(column)),
                NODE_IDS => refill(&mut self.node_ids, leaf(column).and_then(reclaim::vector::<Int64Type>)),
                NODE_HOPS => refill(&mut self.hops, leaf(column).and_then(reclaim::vector::<UInt8Type>)),
                NODE_IN_DEGREES => {
                    refill(&mut self.in_degrees, leaf(column).and_then(reclaim::vector::<Int64Type>));
                }
                NODE_FEATURES if !nested(field) => {
                    let values = leaf(column).and_then(reclaim::values).and_then(reclaim::vector::<Float32Type>);
                    refill(&mut self.features, values);
                }
                EDGE_SRC => refill(&mut self.edge_src, leaf(column).and_then(reclaim::vector::<Int32Type>)),
                EDGE_DST => refill(&mut self.edge_dst, leaf(column).and_then(reclaim::vector::<Int32Type>)),
                EDGE_WEIGHTS => refill(&mut self.edge_weights, leaf(column).and_then(reclaim::vector::<Float32Type>)),
                EDGE_LAYERS => refill(&mut self.edge_layers, leaf(column).and_then(reclaim::vector::<UInt32Type>)),
                EDGE_FEATURES if !nested(field) => {
                    let values = leaf(column).and_then(reclaim::values).and_then(reclaim::vector::<Float32Type>);
                    refill(&mut self.edge_features, values);
                }
                _ => {}
            }
        }
    }
}

/// Gives the empty `column` the capacity of `taken` (emptied) where it is larger.
fn refill<T>(column: &mut Vec<T>, taken: Option<Vec<T>>) {
    if let Some(mut taken) = taken
        && column.is_empty()
        && taken.capacity() > column.capacity()
    {
        taken.clear();
        *column = taken;
    }
}

/// A `list<item>` column: each record's `counts` of the flat `values`.
pub(super) fn list(counts: &[usize], item: DataType, values: ArrayRef) -> Result<ArrayRef, ArrowError> {
    let offsets = OffsetBuffer::from_lengths(counts.iter().copied());
    Ok(Arc::new(ListArray::try_new(Arc::new(Field::new("item", item, false)), offsets, values, None)?))
}

/// Strings laid out one after another in `keys`, each ending at its `ends` entry.
fn strings(keys: &str, ends: &[i32]) -> Result<StringArray, ArrowError> {
    let offsets = OffsetBuffer::new(std::iter::once(0).chain(ends.iter().copied()).collect());
    StringArray::try_new(offsets, keys.as_bytes().to_vec().into(), None)
}

/// The label column of `field`'s type: `int64` classes or fixed-size lists of targets.
pub(super) fn labels(labels: &[Option<Label>], field: &Field) -> Result<ArrayRef, ArrowError> {
    Ok(match field.data_type() {
        DataType::FixedSizeList(item, n) => {
            let n = *n as usize;
            let mut values = Vec::with_capacity(labels.len() * n);
            for label in labels {
                match label.as_ref().and_then(Label::targets) {
                    Some(t) if t.len() == n => values.extend_from_slice(t),
                    _ => values.resize(values.len() + n, 0.0),
                }
            }
            let valid = NullBuffer::from_iter(labels.iter().map(Option::is_some));
            Arc::new(FixedSizeListArray::try_new(
                item.clone(),
                n as i32,
                Arc::new(Float32Array::from(values)),
                Some(valid),
            )?)
        }
        _ => Arc::new(Int64Array::from_iter(labels.iter().map(|l| l.as_ref().and_then(Label::class)))),
    })
}

/// `node_features` or `edge_features`: a list per record (`counts` items) of
/// `fixed_size_list<float32, dim>`, one per node or edge.
pub(super) fn vectors(field: &Field, counts: &[usize], values: Vec<f32>) -> Result<ArrayRef, ArrowError> {
    let name = field.name();
    let DataType::List(per_item) = field.data_type() else {
        return Err(ArrowError::SchemaError(format!("{name} must be a list, found {}", field.data_type())));
    };
    let DataType::FixedSizeList(item, dim) = per_item.data_type() else {
        return Err(ArrowError::SchemaError(format!("{name} items must be fixed-size lists")));
    };
    // The length given: at width 0 (nodes without features) the values cannot tell it.
    let len = counts.iter().sum();
    let items =
        FixedSizeListArray::try_new_with_length(item.clone(), *dim, Arc::new(Float32Array::from(values)), None, len)?;
    let offsets = OffsetBuffer::from_lengths(counts.iter().copied());
    Ok(Arc::new(ListArray::try_new(per_item.clone(), offsets, Arc::new(items), None)?))
}

/// A typed record set's `node_features` or `edge_features`: per record (`counts` items), a
/// `list<float32>` per node or edge of its type's or relation's width (`widths`), so no type or
/// relation is padded to another's.
pub(super) fn nested_features(
    field: &Field,
    counts: &[usize],
    widths: &[u32],
    values: Vec<f32>,
) -> Result<ArrayRef, ArrowError> {
    let DataType::List(per_item) = field.data_type() else {
        return Err(ArrowError::SchemaError(format!("{} must be a list", field.name())));
    };
    let DataType::List(item) = per_item.data_type() else {
        return Err(ArrowError::SchemaError(format!("{} items must be lists", field.name())));
    };
    let widths = OffsetBuffer::from_lengths(widths.iter().map(|&w| w as usize));
    let items = ListArray::try_new(item.clone(), widths, Arc::new(Float32Array::from(values)), None)?;
    let offsets = OffsetBuffer::from_lengths(counts.iter().copied());
    Ok(Arc::new(ListArray::try_new(per_item.clone(), offsets, Arc::new(items), None)?))
}

/// Whether a record column holds nested lists (a typed record set's features).
pub(super) fn nested(field: &Field) -> bool {
    matches!(field.data_type(), DataType::List(item) if matches!(item.data_type(), DataType::List(_)))
}

#[cfg(test)]
mod tests {
    use arrow_schema::Schema;

    use super::*;
    use crate::LabelKind;
    use crate::record::{Record, from_batch, to_batch};

    fn record(root: i64, nodes: usize) -> Record {
        Record {
            root,
            label: Some(Label::Class(root % 3)),
            split: [None, Some(Split::Train), Some(Split::Test)][root as usize % 3],
            node_ids: (0..nodes as i64).map(|i| root + i).collect(),
            hops: (0..nodes).map(|i| i.min(2) as u8).collect(),
            in_degrees: (0..nodes as i64).collect(),
            features: (0..nodes * 2).map(|i| i as f32 + root as f32).collect(),
            edge_src: (1..nodes as i32).collect(),
            edge_dst: vec![0; nodes - 1],
            edge_weights: vec![0.5; nodes - 1],
            edge_layers: vec![0b11; nodes - 1],
            edge_features: (0..nodes - 1).map(|i| -(i as f32)).collect(),
            ..Record::default()
        }
    }

    /// Records laid out one by one make the batch `to_batch` makes of them, and a batch taken
    /// leaves nothing behind for the next.
    #[test]
    fn laid_out_records_are_the_batch_of_the_records() {
        let schema = Arc::new(Schema::new(record_fields(2, LabelKind::Class, 1)));
        let (first, second) = ((0..5).map(|r| record(r, r as usize + 1)).collect::<Vec<_>>(), vec![record(9, 4)]);
        let mut columns = RecordColumns::default();
        first.iter().for_each(|r| columns.push(r));
        assert_eq!(columns.len(), 5);
        assert_eq!(columns.bytes(), first.iter().map(Record::size_bytes).sum::<usize>());
        let batch = columns.take_batch(&schema).unwrap();
        assert!(columns.is_empty() && columns.bytes() == 0, "a taken batch empties the columns");
        assert_eq!(batch, to_batch(&first, &schema).unwrap());
        assert_eq!(from_batch(&batch, "t", 0).unwrap(), first);
        second.iter().for_each(|r| columns.push(r));
        assert_eq!(from_batch(&columns.take_batch(&schema).unwrap(), "t", 0).unwrap(), second);
    }

    /// A written batch's buffers come back to the columns, which lay out the next batch in
    /// them: the same batch as `to_batch` makes, with no buffer allocated anew.
    #[test]
    fn a_recycled_batch_lends_its_buffers_to_the_next() {
        let schema = Arc::new(Schema::new(record_fields(2, LabelKind::Class, 1)));
        let (first, second) = ((0..50).map(|r| record(r, 6)).collect::<Vec<_>>(), vec![record(99, 3), record(7, 2)]);
        let mut columns = RecordColumns::default();
        first.iter().for_each(|r| columns.push(r));
        let batch = columns.take_batch(&schema).unwrap();
        let features_at = batch.column_by_name(NODE_FEATURES).unwrap().to_data().child_data()[0].child_data()[0]
            .buffers()[0]
            .as_ptr();
        columns.recycle(batch);
        assert!(columns.is_empty());
        assert_eq!(columns.features.as_ptr().cast::<u8>(), features_at, "the features buffer comes back");
        for (name, capacity) in [
            ("roots", columns.roots.capacity()),
            ("node ids", columns.node_ids.capacity()),
            ("hops", columns.hops.capacity()),
            ("in-degrees", columns.in_degrees.capacity()),
            ("features", columns.features.capacity()),
            ("edge sources", columns.edge_src.capacity()),
            ("edge targets", columns.edge_dst.capacity()),
            ("edge weights", columns.edge_weights.capacity()),
            ("edge layers", columns.edge_layers.capacity()),
            ("edge features", columns.edge_features.capacity()),
        ] {
            assert!(capacity > 0, "{name}: no buffer came back");
        }
        second.iter().for_each(|r| columns.push(r));
        let again = columns.take_batch(&schema).unwrap();
        assert_eq!(again, to_batch(&second, &schema).unwrap());
        assert_eq!(from_batch(&again, "t", 0).unwrap(), second);
    }

    /// A typed record laid out node by node and edge by edge: each node and edge at its own
    /// width, as `to_batch` writes it from its offsets.
    #[test]
    fn typed_records_keep_each_width() {
        let schema = Arc::new(Schema::new(typed_record_fields(LabelKind::Class, true)));
        let typed = Record {
            node_types: vec![1, 0],
            features: vec![1.0, 2.0, 3.0],
            feature_at: vec![0, 2, 3],
            edge_relations: vec![4],
            edge_features: vec![],
            edge_feature_at: vec![0, 0],
            ..record(7, 2)
        };
        let mut columns = RecordColumns::default();
        columns.start(7, typed.label.clone(), typed.split);
        columns.node(7, 0, 0, &[1.0, 2.0], Some(1));
        columns.node(8, 1, 1, &[3.0], Some(0));
        columns.edge(1, 0, 0.5, 0b11, &[], Some(4));
        assert_eq!(columns.bytes(), typed.size_bytes());
        let batch = columns.take_batch(&schema).unwrap();
        assert_eq!(batch, to_batch(std::slice::from_ref(&typed), &schema).unwrap());
        assert_eq!(from_batch(&batch, "t", 0).unwrap(), vec![typed]);
    }
}
