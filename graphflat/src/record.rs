//! A flattened record: built from the pieces the rounds gather, and laid out as Arrow.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray,
    UInt8Array, UInt32Array,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{ArrowError, DataType, Field, SchemaRef};
use schemas::{Label, Split};

/// One node of a record as it arrives: its hop, full in-degree and features.
#[derive(Debug, Clone)]
pub struct GatheredNode {
    pub id: i64,
    pub hop: u8,
    pub in_degree: u64,
    pub features: Vec<f32>,
}

/// One edge of a record by global ids: (dst, src, weight, layer mask).
pub type GatheredEdge = (i64, i64, f32, u32);

/// A finished record, in the order the table stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub root: i64,
    pub label: Option<Label>,
    pub split: Option<Split>,
    pub node_ids: Vec<i64>,
    pub hops: Vec<u8>,
    pub in_degrees: Vec<i64>,
    /// One vector per node, each of the table's feature length.
    pub features: Vec<Vec<f32>>,
    pub edge_src: Vec<i32>,
    pub edge_dst: Vec<i32>,
    pub edge_weights: Vec<f32>,
    pub edge_layers: Vec<u32>,
}

impl Record {
    /// Orders the gathered nodes root first, then by (hop, id), and maps edges to local
    /// indices sorted by (dst, src): the layout depends only on the content.
    pub fn assemble(
        root: i64,
        label: Option<Label>,
        split: Option<Split>,
        mut nodes: Vec<GatheredNode>,
        mut edges: Vec<GatheredEdge>,
    ) -> Record {
        nodes.sort_by_key(|n| (n.id != root, n.hop, n.id));
        let local: HashMap<i64, i32> = nodes.iter().enumerate().map(|(i, n)| (n.id, i as i32)).collect();
        let mut local_edges: Vec<(i32, i32, f32, u32)> =
            edges.drain(..).map(|(dst, src, w, mask)| (local[&dst], local[&src], w, mask)).collect();
        local_edges.sort_by_key(|a| (a.0, a.1, a.2.to_bits(), a.3));
        Record {
            root,
            label,
            split,
            node_ids: nodes.iter().map(|n| n.id).collect(),
            hops: nodes.iter().map(|n| n.hop).collect(),
            in_degrees: nodes.iter().map(|n| n.in_degree as i64).collect(),
            features: nodes.into_iter().map(|n| n.features).collect(),
            edge_src: local_edges.iter().map(|e| e.1).collect(),
            edge_dst: local_edges.iter().map(|e| e.0).collect(),
            edge_weights: local_edges.iter().map(|e| e.2).collect(),
            edge_layers: local_edges.iter().map(|e| e.3).collect(),
        }
    }

    pub fn num_nodes(&self) -> usize {
        self.node_ids.len()
    }

    pub fn num_edges(&self) -> usize {
        self.edge_src.len()
    }

    /// Roughly the bytes this record takes in memory, for batching writes.
    pub fn size_bytes(&self) -> usize {
        self.node_ids.len() * 17 + self.features.iter().map(|f| f.len() * 4).sum::<usize>() + self.edge_src.len() * 16
    }
}

/// A list column from per-record vectors.
fn list<T: Copy>(
    records: &[Record],
    item: DataType,
    get: impl Fn(&Record) -> &[T],
    values: impl FnOnce(Vec<T>) -> ArrayRef,
) -> Result<ArrayRef, ArrowError> {
    let offsets: OffsetBuffer<i32> = OffsetBuffer::from_lengths(records.iter().map(|r| get(r).len()));
    let mut flat: Vec<T> = Vec::with_capacity(offsets.last() as usize);
    for r in records {
        flat.extend_from_slice(get(r));
    }
    Ok(Arc::new(ListArray::try_new(Arc::new(Field::new("item", item, false)), offsets, values(flat), None)?))
}

/// The label column of the schema's type: `int64` classes or fixed-size lists of targets.
fn labels(records: &[Record], schema: &SchemaRef) -> Result<ArrayRef, ArrowError> {
    let field = schema.field_with_name(schemas::record::LABEL)?;
    Ok(match field.data_type() {
        DataType::FixedSizeList(item, n) => {
            let n = *n as usize;
            let mut values = Vec::with_capacity(records.len() * n);
            for r in records {
                match r.label.as_ref().and_then(Label::targets) {
                    Some(t) if t.len() == n => values.extend_from_slice(t),
                    _ => values.resize(values.len() + n, 0.0),
                }
            }
            let valid = NullBuffer::from_iter(records.iter().map(|r| r.label.is_some()));
            Arc::new(FixedSizeListArray::try_new(
                item.clone(),
                n as i32,
                Arc::new(Float32Array::from(values)),
                Some(valid),
            )?)
        }
        _ => Arc::new(Int64Array::from_iter(records.iter().map(|r| r.label.as_ref().and_then(Label::class)))),
    })
}

/// Lays out records as one batch of the record schema (`schema` must be the one for `dim`).
pub fn to_batch(records: &[Record], schema: &SchemaRef, dim: usize) -> Result<RecordBatch, ArrowError> {
    let feature_type = schemas::record::feature_type(dim);
    let features: ArrayRef = {
        let total: usize = records.iter().map(|r| r.num_nodes()).sum();
        let mut values: Vec<f32> = Vec::with_capacity(total * dim);
        for vector in records.iter().flat_map(|r| &r.features) {
            values.extend_from_slice(vector);
        }
        let item = Arc::new(Field::new("item", DataType::Float32, false));
        let per_node = FixedSizeListArray::try_new(item, dim as i32, Arc::new(Float32Array::from(values)), None)?;
        let offsets = OffsetBuffer::from_lengths(records.iter().map(|r| r.num_nodes()));
        Arc::new(ListArray::try_new(
            Arc::new(Field::new("item", feature_type, false)),
            offsets,
            Arc::new(per_node),
            None,
        )?)
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(records.iter().map(|r| r.root))),
        labels(records, schema)?,
        Arc::new(StringArray::from_iter(records.iter().map(|r| r.split.map(Split::name)))),
        list(records, DataType::Int64, |r| &r.node_ids, |v| Arc::new(Int64Array::from(v)))?,
        list(records, DataType::UInt8, |r| &r.hops, |v| Arc::new(UInt8Array::from(v)))?,
        list(records, DataType::Int64, |r| &r.in_degrees, |v| Arc::new(Int64Array::from(v)))?,
        features,
        list(records, DataType::Int32, |r| &r.edge_src, |v| Arc::new(Int32Array::from(v)))?,
        list(records, DataType::Int32, |r| &r.edge_dst, |v| Arc::new(Int32Array::from(v)))?,
        list(records, DataType::Float32, |r| &r.edge_weights, |v| Arc::new(Float32Array::from(v)))?,
        list(records, DataType::UInt32, |r| &r.edge_layers, |v| Arc::new(UInt32Array::from(v)))?,
    ];
    RecordBatch::try_new(schema.clone(), columns)
}
