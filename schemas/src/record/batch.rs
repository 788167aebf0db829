//! One flattened record as plain data, and its Arrow layout both ways. Columns are found by
//! name, never by position: a writer or reader that orders them differently still pairs every
//! value with its column. Reading checks each record's structure, so a bad record is an error
//! naming its file, row and column rather than a panic later.

use serde::{Deserialize, Serialize};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int32Type, Int64Type, UInt8Type, UInt32Type};
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, FixedSizeListArray, Float32Array, Int32Array, Int64Array, ListArray,
    PrimitiveArray, RecordBatch, StringArray, UInt8Array, UInt32Array,
};
use arrow_schema::{ArrowError, DataType, Field, SchemaRef};

use super::columns::{self, RecordColumns};
use super::schema::*;
use crate::error::{BadInput, Location};
use crate::label::Label;
use crate::split::Split;

/// One target node's k-hop neighborhood (see [`crate::record`] for the layout rules).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Record {
    pub root: i64,
    pub label: Option<Label>,
    pub split: Option<Split>,
    /// Root first, then by (hop, node id).
    pub node_ids: Vec<i64>,
    /// A graph keyed by strings: each node's original string, aligned with `node_ids` (which
    /// are internal ids, `crate::ids`); empty for integer ids.
    #[serde(default)]
    pub node_keys: Vec<String>,
    pub hops: Vec<u8>,
    /// Each node's in-degree in the whole graph.
    pub in_degrees: Vec<i64>,
    /// Row-major, `node_ids.len() * dim`.
    pub features: Vec<f32>,
    pub edge_src: Vec<i32>,
    pub edge_dst: Vec<i32>,
    pub edge_weights: Vec<f32>,
    pub edge_layers: Vec<u32>,
    /// Row-major, `num_edges() * edge_dim` when the record set has edge features; empty when
    /// it has none (a record set without the column means the same as before it existed).
    pub edge_features: Vec<f32>,
    /// Typed records: each node's type (`schemas::typed`); empty for a homogeneous graph.
    #[serde(default)]
    pub node_types: Vec<u8>,
    /// Typed records: node `i`'s features are `features[feature_at[i]..feature_at[i + 1]]`
    /// (each type has its own width); empty for a homogeneous graph, where each node has
    /// [`Record::dim`] of them.
    #[serde(default)]
    pub feature_at: Vec<u32>,
    /// Typed records: each edge's relation, aligned with `edge_src`; empty for a homogeneous
    /// graph.
    #[serde(default)]
    pub edge_relations: Vec<u8>,
    /// Typed records with edge features: edge `j`'s features are
    /// `edge_features[edge_feature_at[j]..edge_feature_at[j + 1]]`, at its relation's width (0
    /// for a relation without features); empty otherwise.
    #[serde(default)]
    pub edge_feature_at: Vec<u32>,
    /// Records flattened with `root_neighbors`: the source of every in-edge of the root, in
    /// sampling-key order (`ROOT_NEIGHBORS`); empty otherwise.
    #[serde(default)]
    pub root_neighbors: Vec<i64>,
}

impl Record {
    pub fn num_nodes(&self) -> usize {
        self.node_ids.len()
    }

    pub fn num_edges(&self) -> usize {
        self.edge_src.len()
    }

    /// Whether the record holds typed nodes and edges.
    pub fn is_typed(&self) -> bool {
        !self.feature_at.is_empty()
    }

    /// The feature length (0 for a record without nodes; not meaningful for a typed record,
    /// whose widths differ by type).
    pub fn dim(&self) -> usize {
        self.features.len().checked_div(self.num_nodes()).unwrap_or(0)
    }

    /// The edge feature width (0 without edge features, or for a record without edges; not
    /// meaningful for a typed record, whose widths differ by relation).
    pub fn edge_dim(&self) -> usize {
        self.edge_features.len().checked_div(self.num_edges()).unwrap_or(0)
    }

    /// Edge `j`'s features (empty without edge features).
    pub fn edge_features_of(&self, j: usize) -> &[f32] {
        if !self.edge_feature_at.is_empty() {
            return &self.edge_features[self.edge_feature_at[j] as usize..self.edge_feature_at[j + 1] as usize];
        }
        let dim = self.edge_dim();
        &self.edge_features[j * dim..(j + 1) * dim]
    }

    /// Node `i`'s features.
    pub fn node_features(&self, i: usize) -> &[f32] {
        if self.is_typed() {
            return &self.features[self.feature_at[i] as usize..self.feature_at[i + 1] as usize];
        }
        let dim = self.dim();
        &self.features[i * dim..(i + 1) * dim]
    }

    /// What breaks the layer rule of a `hops`-layer model in this record, by column: a hop
    /// above `hops`, a layer mask with bits for layers the model does not have, an edge that
    /// serves layer `l` from a node farther than `hops - l + 1` hops or into one farther than
    /// `hops - l` (see `schemas::layers`), a feature that is not finite. A record that passes
    /// builds a batch without an index out of range.
    pub fn check_layers(&self, hops: usize) -> Result<(), (&'static str, String)> {
        if let Some(&h) = self.hops.iter().find(|&&h| usize::from(h) > hops) {
            return Err((NODE_HOPS, format!("root {}: hop {h} in a record set of {hops} hops", self.root)));
        }
        let layers = if hops >= 32 { u32::MAX } else { (1u32 << hops) - 1 };
        for j in 0..self.num_edges() {
            let mask = self.edge_layers[j];
            if mask & !layers != 0 {
                return Err((
                    EDGE_LAYERS,
                    format!("root {}: edge {j} has layer mask {mask:#b}, but there are {hops} layers", self.root),
                ));
            }
            let hop = |end: i32| usize::from(self.hops[end as usize]);
            let (src, dst) = (hop(self.edge_src[j]), hop(self.edge_dst[j]));
            let last = (1..=hops).filter(|l| mask & (1 << (l - 1)) != 0).max();
            if let Some(l) = last
                && (src > hops - l + 1 || dst > hops - l)
            {
                return Err((
                    EDGE_LAYERS,
                    format!(
                        "root {}: edge {j} ({src} -> {dst} hops from the root) cannot serve layer {l} of {hops}",
                        self.root
                    ),
                ));
            }
        }
        if let Some(v) = self.features.iter().find(|v| !v.is_finite()) {
            return Err((NODE_FEATURES, format!("root {}: a feature value of {v}", self.root)));
        }
        if let Some(v) = self.edge_features.iter().find(|v| !v.is_finite()) {
            return Err((EDGE_FEATURES, format!("root {}: an edge feature value of {v}", self.root)));
        }
        Ok(())
    }

    /// Roughly the bytes this record takes in memory, for batching writes (what laying it
    /// out adds to [`RecordColumns::bytes`]).
    pub fn size_bytes(&self) -> usize {
        let typed = if self.is_typed() { self.num_nodes() + self.num_edges() } else { 0 };
        let keys: usize = self.node_keys.iter().map(|k| k.len() + 4).sum();
        keys + 8 * self.root_neighbors.len()
            + RecordColumns::bytes_of(
                self.num_nodes(),
                self.features.len(),
                self.num_edges(),
                self.edge_features.len(),
                typed,
            )
    }
}

impl RecordColumns {
    /// Lays out a whole record, which keeps the layout (each node's hop, in-degree and
    /// features; each edge's ends, weight, layers and features); [`to_batch`](super::to_batch)
    /// writes any record as it is.
    pub fn push(&mut self, r: &Record) {
        self.start(r.root, r.label.clone(), r.split);
        let typed = r.is_typed();
        for i in 0..r.num_nodes() {
            let node_type = typed.then(|| r.node_types.get(i).copied().unwrap_or_default());
            self.node(r.node_ids[i], r.hops[i], r.in_degrees[i], r.node_features(i), node_type);
            if let Some(key) = r.node_keys.get(i) {
                self.key(key);
            }
        }
        for j in 0..r.num_edges() {
            let relation = typed.then(|| r.edge_relations.get(j).copied().unwrap_or_default());
            let (w, layers) = (r.edge_weights[j], r.edge_layers[j]);
            self.edge(r.edge_src[j], r.edge_dst[j], w, layers, r.edge_features_of(j), relation);
        }
        self.root_neighbors(&r.root_neighbors);
    }
}

/// Lays out records as one batch of `schema` (a record schema), column by column name.
///
/// Each list column takes each record's vector as it is, so a record that breaks the layout
/// (the reader's tests write such records) is written as it is; a writer that builds records
/// as it goes lays them out with [`RecordColumns`] instead. Both build their arrays with the
/// same functions (`columns`).
pub fn to_batch(records: &[Record], schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let nodes: Vec<usize> = records.iter().map(Record::num_nodes).collect();
    let edges: Vec<usize> = records.iter().map(Record::num_edges).collect();
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        arrays.push(match field.name().as_str() {
            ROOT_ID => Arc::new(Int64Array::from_iter_values(records.iter().map(|r| r.root))),
            LABEL => columns::labels(&records.iter().map(|r| r.label.clone()).collect::<Vec<_>>(), field)?,
            SPLIT => Arc::new(StringArray::from_iter(records.iter().map(|r| r.split.map(Split::name)))),
            NODE_IDS => list(records, DataType::Int64, |r| &r.node_ids, |v| Arc::new(Int64Array::from(v)))?,
            NODE_KEYS => {
                let lengths: Vec<usize> = records.iter().map(|r| r.node_keys.len()).collect();
                let keys: StringArray = records.iter().flat_map(|r| r.node_keys.iter().map(Some)).collect();
                columns::list(&lengths, DataType::Utf8, Arc::new(keys))?
            }
            NODE_HOPS => list(records, DataType::UInt8, |r| &r.hops, |v| Arc::new(UInt8Array::from(v)))?,
            NODE_IN_DEGREES => list(records, DataType::Int64, |r| &r.in_degrees, |v| Arc::new(Int64Array::from(v)))?,
            NODE_FEATURES if columns::nested(field) => nested(records, field, |r| &r.features, |r| &r.feature_at)?,
            NODE_FEATURES => columns::vectors(field, &nodes, flat(records, |r| &r.features))?,
            NODE_TYPES => list(records, DataType::UInt8, |r| &r.node_types, |v| Arc::new(UInt8Array::from(v)))?,
            EDGE_RELATIONS => list(records, DataType::UInt8, |r| &r.edge_relations, |v| Arc::new(UInt8Array::from(v)))?,
            EDGE_FEATURES if columns::nested(field) => {
                nested(records, field, |r| &r.edge_features, |r| &r.edge_feature_at)?
            }
            EDGE_FEATURES => columns::vectors(field, &edges, flat(records, |r| &r.edge_features))?,
            EDGE_SRC => list(records, DataType::Int32, |r| &r.edge_src, |v| Arc::new(Int32Array::from(v)))?,
            EDGE_DST => list(records, DataType::Int32, |r| &r.edge_dst, |v| Arc::new(Int32Array::from(v)))?,
            EDGE_WEIGHTS => list(records, DataType::Float32, |r| &r.edge_weights, |v| Arc::new(Float32Array::from(v)))?,
            EDGE_LAYERS => list(records, DataType::UInt32, |r| &r.edge_layers, |v| Arc::new(UInt32Array::from(v)))?,
            ROOT_NEIGHBORS => list(records, DataType::Int64, |r| &r.root_neighbors, |v| Arc::new(Int64Array::from(v)))?,
            other => return Err(ArrowError::SchemaError(format!("no record column is named {other:?}"))),
        });
    }
    RecordBatch::try_new(schema.clone(), arrays)
}

/// Each record's `get` slice, one after another.
fn flat<T: Copy>(records: &[Record], get: impl Fn(&Record) -> &[T]) -> Vec<T> {
    let mut flat = Vec::with_capacity(records.iter().map(|r| get(r).len()).sum());
    records.iter().for_each(|r| flat.extend_from_slice(get(r)));
    flat
}

/// A `list<item>` column of each record's `get` slice.
fn list<T: Copy>(
    records: &[Record],
    item: DataType,
    get: impl Fn(&Record) -> &[T],
    values: impl FnOnce(Vec<T>) -> ArrayRef,
) -> Result<ArrayRef, ArrowError> {
    let lengths: Vec<usize> = records.iter().map(|r| get(r).len()).collect();
    columns::list(&lengths, item, values(flat(records, get)))
}

/// A typed record set's features: per record, one item per offset in `at` after the first.
fn nested(
    records: &[Record],
    field: &Field,
    values: impl Fn(&Record) -> &[f32],
    at: impl Fn(&Record) -> &[u32],
) -> Result<ArrayRef, ArrowError> {
    let counts: Vec<usize> = records.iter().map(|r| at(r).len().saturating_sub(1)).collect();
    let widths: Vec<u32> = records.iter().flat_map(|r| at(r).windows(2).map(|w| w[1] - w[0])).collect();
    columns::nested_features(field, &counts, &widths, flat(records, values))
}

/// Where a problem of a batch's row lies.
pub(super) struct At<'a> {
    pub(super) file: &'a str,
    pub(super) first_row: u64,
}

impl At<'_> {
    pub(super) fn column(&self, column: &str) -> Location {
        Location::file(self.file).column(column)
    }

    pub(super) fn bad(&self, row: usize, column: &str, problem: impl Into<String>) -> BadInput {
        BadInput::new(self.column(column).row(self.first_row + row as u64), problem)
    }
}

pub(super) fn column<'a>(batch: &'a RecordBatch, name: &str, at: &At) -> Result<&'a ArrayRef, BadInput> {
    batch.column_by_name(name).ok_or_else(|| BadInput::new(at.column(name), "missing record column"))
}

/// A `list<primitive>` column, resolved once per batch.
pub(super) struct ListColumn<'a, T: ArrowPrimitiveType> {
    name: &'static str,
    list: &'a ListArray,
    values: &'a [T::Native],
    /// The items' nulls, where the column's item type allows them (GraphFlat writes none).
    nulls: Option<&'a arrow_buffer::NullBuffer>,
}

impl<'a, T: ArrowPrimitiveType> ListColumn<'a, T> {
    pub(super) fn new(batch: &'a RecordBatch, name: &'static str, at: &At) -> Result<Self, BadInput> {
        let array = column(batch, name, at)?;
        let mistyped =
            || BadInput::new(at.column(name), format!("expected list<{}>, found {}", T::DATA_TYPE, array.data_type()));
        let list = array.as_list_opt::<i32>().ok_or_else(mistyped)?;
        let values: &PrimitiveArray<T> = list.values().as_primitive_opt::<T>().ok_or_else(mistyped)?;
        let nulls = values.nulls().filter(|n| n.null_count() > 0);
        Ok(ListColumn { name, list, values: values.values(), nulls })
    }

    /// Row `row`'s length, its items unread; a null list is an error.
    pub(super) fn len(&self, row: usize, at: &At) -> Result<usize, BadInput> {
        if self.list.is_null(row) {
            return Err(at.bad(row, self.name, "null list"));
        }
        let offsets = self.list.value_offsets();
        Ok((offsets[row + 1] - offsets[row]) as usize)
    }

    /// Row `row`'s first item (its root's, for a node column), checked as [`Self::row`]
    /// checks; `None` for an empty list.
    pub(super) fn first(&self, row: usize, at: &At) -> Result<Option<T::Native>, BadInput> {
        if self.list.is_null(row) {
            return Err(at.bad(row, self.name, "null list"));
        }
        let offsets = self.list.value_offsets();
        let (from, to) = (offsets[row] as usize, offsets[row + 1] as usize);
        if from < to && self.nulls.is_some_and(|n| n.is_null(from)) {
            return Err(at.bad(row, self.name, "item 0 of the list is null"));
        }
        Ok((from < to).then(|| self.values[from]))
    }

    pub(super) fn row(&self, row: usize, at: &At) -> Result<Vec<T::Native>, BadInput> {
        if self.list.is_null(row) {
            return Err(at.bad(row, self.name, "null list"));
        }
        let offsets = self.list.value_offsets();
        let (from, to) = (offsets[row] as usize, offsets[row + 1] as usize);
        if let Some(item) = self.nulls.and_then(|n| (from..to).find(|&i| n.is_null(i))) {
            return Err(at.bad(row, self.name, format!("item {} of the list is null", item - from)));
        }
        Ok(self.values[from..to].to_vec())
    }
}

/// The label column: class ids, or fixed-size lists of multi-hot targets.
enum Labels<'a> {
    Classes(&'a Int64Array),
    Targets(&'a FixedSizeListArray, &'a [f32]),
}

impl<'a> Labels<'a> {
    fn new(batch: &'a RecordBatch, at: &At) -> Result<Self, BadInput> {
        let array = column(batch, LABEL, at)?;
        if let Some(classes) = array.as_primitive_opt::<Int64Type>() {
            return Ok(Labels::Classes(classes));
        }
        let mistyped = || {
            BadInput::new(
                at.column(LABEL),
                format!("expected int64 or fixed_size_list<float32>, found {}", array.data_type()),
            )
        };
        let targets = array.as_fixed_size_list_opt().ok_or_else(mistyped)?;
        let values = targets.values().as_primitive_opt::<Float32Type>().ok_or_else(mistyped)?;
        Ok(Labels::Targets(targets, values.values()))
    }

    fn get(&self, row: usize) -> Option<Label> {
        match self {
            Labels::Classes(c) => c.is_valid(row).then(|| Label::Class(c.value(row))),
            Labels::Targets(t, values) => {
                let n = t.value_length() as usize;
                let start = (t.offset() + row) * n;
                t.is_valid(row).then(|| Label::Targets(values[start..start + n].to_vec()))
            }
        }
    }
}

const NULL_FEATURE: &str = "a null feature vector or value";

/// The first row of a feature column (a list per record of vectors, fixed-size or lists) that
/// holds a null vector or a null value; `None` where there is none, as GraphFlat writes them.
/// The readers take the values as they lie, so a null must be refused, not read as a number.
pub(super) fn first_null(array: &ArrayRef) -> Option<usize> {
    let list = array.as_list_opt::<i32>()?;
    let items = list.values();
    let values = match items.as_fixed_size_list_opt() {
        Some(fixed) => fixed.values(),
        None => items.as_list_opt::<i32>()?.values(),
    };
    if items.null_count() == 0 && values.null_count() == 0 {
        return None;
    }
    let item = (0..items.len()).find(|&j| items.is_null(j) || item_values(items, j).any(|k| values.is_null(k)))?;
    Some(list.value_offsets().partition_point(|&o| o as usize <= item).saturating_sub(1))
}

/// Where item `j`'s values lie in the child array of `items` (fixed-size lists or lists).
fn item_values(items: &ArrayRef, j: usize) -> std::ops::Range<usize> {
    match items.as_fixed_size_list_opt() {
        Some(fixed) => fixed.value_offset_at(j)..fixed.value_offset_at(j) + fixed.value_length() as usize,
        None => {
            let offsets = items.as_list::<i32>().value_offsets();
            offsets[j] as usize..offsets[j + 1] as usize
        }
    }
}

/// `node_features` or `edge_features`: per record, a list of fixed-size float vectors.
pub(super) struct Features<'a> {
    list: &'a ListArray,
    pub(super) dim: usize,
    values: &'a [f32],
}

impl<'a> Features<'a> {
    pub(super) fn new(batch: &'a RecordBatch, name: &str, at: &At) -> Result<Self, BadInput> {
        let array = column(batch, name, at)?;
        let mistyped = || {
            BadInput::new(
                at.column(name),
                format!("expected list<fixed_size_list<float32>>, found {}", array.data_type()),
            )
        };
        let list = array.as_list_opt::<i32>().ok_or_else(mistyped)?;
        let nodes = list.values().as_fixed_size_list_opt().ok_or_else(mistyped)?;
        let values = nodes.values().as_primitive_opt::<Float32Type>().ok_or_else(mistyped)?;
        if let Some(row) = first_null(array) {
            return Err(at.bad(row, name, NULL_FEATURE));
        }
        let dim = nodes.value_length() as usize;
        Ok(Features { list, dim, values: &values.values()[nodes.offset() * dim..] })
    }

    /// Row `row`'s first vector (its root's, for `node_features`), without copying it; `None`
    /// for a null or empty list.
    pub(super) fn first(&self, row: usize) -> Option<&'a [f32]> {
        let offsets = self.list.value_offsets();
        let first = offsets[row] as usize;
        (self.list.is_valid(row) && offsets[row + 1] as usize > first)
            .then(|| &self.values[first * self.dim..(first + 1) * self.dim])
    }

    pub(super) fn row(&self, row: usize) -> Vec<f32> {
        let offsets = self.list.value_offsets();
        self.values[offsets[row] as usize * self.dim..offsets[row + 1] as usize * self.dim].to_vec()
    }
}

/// A typed record set's `node_features` or `edge_features`: per record, a `list<float32>` per
/// node or edge.
pub(super) struct NestedFeatures<'a> {
    list: &'a ListArray,
    nodes: &'a ListArray,
    values: &'a [f32],
}

impl<'a> NestedFeatures<'a> {
    fn new(array: &'a ArrayRef) -> Option<Self> {
        let list = array.as_list_opt::<i32>()?;
        let nodes = list.values().as_list_opt::<i32>()?;
        let values = nodes.values().as_primitive_opt::<Float32Type>()?;
        Some(NestedFeatures { list, nodes, values: values.values() })
    }

    /// Row `row`'s features, flat, and where each item's start (one offset per node or edge,
    /// and the end).
    fn row(&self, row: usize) -> (Vec<f32>, Vec<u32>) {
        let nodes = self.list.value_offsets();
        let (first, last) = (nodes[row] as usize, nodes[row + 1] as usize);
        let at = &self.nodes.value_offsets()[first..=last];
        let (start, end) = (at[0] as usize, at[at.len() - 1] as usize);
        (self.values[start..end].to_vec(), at.iter().map(|&o| (o as usize - start) as u32).collect())
    }
}

/// `node_features` or `edge_features` as fixed-size vectors (a homogeneous record set) or
/// lists of each node's type's or edge's relation's width (a typed one).
pub(super) enum FeatureColumn<'a> {
    Fixed(Features<'a>),
    Nested(NestedFeatures<'a>),
}

impl<'a> FeatureColumn<'a> {
    fn new(batch: &'a RecordBatch, name: &str, at: &At) -> Result<Self, BadInput> {
        let array = column(batch, name, at)?;
        match NestedFeatures::new(array) {
            Some(_) if let Some(row) = first_null(array) => Err(at.bad(row, name, NULL_FEATURE)),
            Some(nested) => Ok(FeatureColumn::Nested(nested)),
            None => Features::new(batch, name, at).map(FeatureColumn::Fixed),
        }
    }

    /// Row `row`'s values, and for nested lists where each item's start.
    fn row(&self, row: usize) -> (Vec<f32>, Vec<u32>) {
        match self {
            FeatureColumn::Fixed(f) => (f.row(row), Vec::new()),
            FeatureColumn::Nested(f) => f.row(row),
        }
    }

    /// The width of fixed-size vectors (0 for nested lists, whose widths differ).
    fn dim(&self) -> usize {
        match self {
            FeatureColumn::Fixed(f) => f.dim,
            FeatureColumn::Nested(_) => 0,
        }
    }
}

/// The `node_keys` column: a list of strings per record.
pub(super) struct KeyColumn<'a> {
    lists: &'a ListArray,
    keys: &'a StringArray,
}

impl<'a> KeyColumn<'a> {
    fn new(batch: &'a RecordBatch, at: &At) -> Result<Self, BadInput> {
        let lists = column(batch, NODE_KEYS, at)?
            .as_list_opt::<i32>()
            .ok_or_else(|| BadInput::new(at.column(NODE_KEYS), "expected list<utf8>"))?;
        let keys = lists
            .values()
            .as_string_opt::<i32>()
            .ok_or_else(|| BadInput::new(at.column(NODE_KEYS), "expected list<utf8>"))?;
        Ok(KeyColumn { lists, keys })
    }

    fn row(&self, row: usize) -> Vec<String> {
        let offsets = self.lists.value_offsets();
        (offsets[row] as usize..offsets[row + 1] as usize).map(|i| self.keys.value(i).to_owned()).collect()
    }
}

/// The node and edge columns of a batch of records (node or link records), resolved once.
pub(super) struct GraphColumns<'a> {
    features: FeatureColumn<'a>,
    node_types: Option<ListColumn<'a, UInt8Type>>,
    edge_relations: Option<ListColumn<'a, UInt8Type>>,
    edge_features: Option<FeatureColumn<'a>>,
    node_ids: ListColumn<'a, Int64Type>,
    node_keys: Option<KeyColumn<'a>>,
    hops: ListColumn<'a, UInt8Type>,
    in_degrees: ListColumn<'a, Int64Type>,
    edge_src: ListColumn<'a, Int32Type>,
    edge_dst: ListColumn<'a, Int32Type>,
    edge_weights: ListColumn<'a, Float32Type>,
    edge_layers: ListColumn<'a, UInt32Type>,
    root_neighbors: Option<ListColumn<'a, Int64Type>>,
}

impl<'a> GraphColumns<'a> {
    pub(super) fn new(batch: &'a RecordBatch, at: &At) -> Result<Self, BadInput> {
        let features = FeatureColumn::new(batch, NODE_FEATURES, at)?;
        let typed = matches!(features, FeatureColumn::Nested(_));
        let edge_features = match batch.column_by_name(EDGE_FEATURES) {
            Some(_) => Some(FeatureColumn::new(batch, EDGE_FEATURES, at)?),
            None => None,
        };
        if edge_features.as_ref().is_some_and(|f| matches!(f, FeatureColumn::Nested(_)) != typed) {
            let problem = "typed records have lists of features per edge, homogeneous ones fixed-size vectors";
            return Err(BadInput::new(at.column(EDGE_FEATURES), problem));
        }
        let (node_types, edge_relations) = match typed {
            true => (Some(ListColumn::new(batch, NODE_TYPES, at)?), Some(ListColumn::new(batch, EDGE_RELATIONS, at)?)),
            false => (None, None),
        };
        Ok(GraphColumns {
            features,
            node_types,
            edge_relations,
            edge_features,
            node_ids: ListColumn::new(batch, NODE_IDS, at)?,
            node_keys: match batch.column_by_name(NODE_KEYS) {
                Some(_) => Some(KeyColumn::new(batch, at)?),
                None => None,
            },
            hops: ListColumn::new(batch, NODE_HOPS, at)?,
            in_degrees: ListColumn::new(batch, NODE_IN_DEGREES, at)?,
            edge_src: ListColumn::new(batch, EDGE_SRC, at)?,
            edge_dst: ListColumn::new(batch, EDGE_DST, at)?,
            edge_weights: ListColumn::new(batch, EDGE_WEIGHTS, at)?,
            edge_layers: ListColumn::new(batch, EDGE_LAYERS, at)?,
            root_neighbors: match batch.column_by_name(ROOT_NEIGHBORS) {
                Some(_) => Some(ListColumn::new(batch, ROOT_NEIGHBORS, at)?),
                None => None,
            },
        })
    }

    /// The feature width of a homogeneous record set (0 for a typed one: see [`check`]).
    pub(super) fn dim(&self) -> usize {
        self.features.dim()
    }

    /// The edge feature width of a homogeneous record set (0 without them, and for a typed
    /// one, whose widths are its relations').
    pub(super) fn edge_dim(&self) -> usize {
        self.edge_features.as_ref().map_or(0, FeatureColumn::dim)
    }

    /// Row `row`'s nodes and edges, unchecked, as a record without root, label or split.
    pub(super) fn row(&self, row: usize, at: &At) -> Result<Record, BadInput> {
        let (features, feature_at) = self.features.row(row);
        let (edge_features, edge_feature_at) =
            self.edge_features.as_ref().map_or_else(Default::default, |f| f.row(row));
        let optional =
            |column: &Option<ListColumn<'a, UInt8Type>>| column.as_ref().map_or(Ok(Vec::new()), |c| c.row(row, at));
        let in_degrees: Vec<i64> = self.in_degrees.row(row, at)?;
        let root_neighbors = match &self.root_neighbors {
            None => Vec::new(),
            Some(column) => {
                let ids: Vec<i64> = column.row(row, at)?;
                // One entry an in-edge of the root: what control variates sum over.
                if let Some(&d) = in_degrees.first().filter(|&&d| d != ids.len() as i64) {
                    let problem = format!("{} in-neighbors for a root of in-degree {d}", ids.len());
                    return Err(at.bad(row, ROOT_NEIGHBORS, problem));
                }
                ids
            }
        };
        Ok(Record {
            node_ids: self.node_ids.row(row, at)?,
            node_keys: self.node_keys.as_ref().map_or(Vec::new(), |k| k.row(row)),
            hops: self.hops.row(row, at)?,
            in_degrees,
            features,
            feature_at,
            node_types: optional(&self.node_types)?,
            edge_relations: optional(&self.edge_relations)?,
            edge_src: self.edge_src.row(row, at)?,
            edge_dst: self.edge_dst.row(row, at)?,
            edge_weights: self.edge_weights.row(row, at)?,
            edge_layers: self.edge_layers.row(row, at)?,
            edge_features,
            edge_feature_at,
            root_neighbors,
            ..Record::default()
        })
    }
}

/// Decodes every record of `batch` (rows `first_row..` of `file`); see [`from_batch_where`].
pub fn from_batch(batch: &RecordBatch, file: &str, first_row: u64) -> Result<Vec<Record>, BadInput> {
    Ok(from_batch_where(batch, file, first_row, |_, _| true)?.into_iter().map(|(_, r)| r).collect())
}

/// Decodes the records of `batch` (rows `first_row..` of `file`) for which `keep(root, split)`
/// holds, with the row each came from, checking each one's structure: one hop, in-degree and
/// feature vector per node, the root first, edges whose ends are nodes of the record. Rows not
/// kept are not decoded.
pub fn from_batch_where(
    batch: &RecordBatch,
    file: &str,
    first_row: u64,
    keep: impl Fn(i64, Option<Split>) -> bool,
) -> Result<Vec<(u64, Record)>, BadInput> {
    let at = At { file, first_row };
    let (roots, splits) = (roots(batch, &at)?, Splits::new(batch, &at)?);
    let labels = Labels::new(batch, &at)?;
    let graph = GraphColumns::new(batch, &at)?;
    // The rows kept, listed first: a record is large, and growing the vector copies them all.
    let mut kept = Vec::new();
    for row in 0..batch.num_rows() {
        let split = splits.get(row, &at)?;
        if keep(roots.value(row), split) {
            kept.push((row, split));
        }
    }
    let mut out = Vec::with_capacity(kept.len());
    for (row, split) in kept {
        let record = Record { root: roots.value(row), label: labels.get(row), split, ..graph.row(row, &at)? };
        check(&record, graph.dim(), graph.edge_dim()).map_err(|(column, problem)| at.bad(row, column, problem))?;
        out.push((first_row + row as u64, record));
    }
    Ok(out)
}

/// What a record is for, without its graph: enough to count and plan a pass over a record set.
#[derive(Debug, Clone, PartialEq)]
pub struct Tag {
    pub root: i64,
    pub split: Option<Split>,
    pub label: Option<Label>,
}

/// The tags of every row of `batch` (rows `first_row..` of `file`), with the row each came
/// from. `batch` needs only the root, split and label columns: a reader projects to those.
pub fn tags(batch: &RecordBatch, file: &str, first_row: u64) -> Result<Vec<(u64, Tag)>, BadInput> {
    let at = At { file, first_row };
    let (roots, splits, labels) = (roots(batch, &at)?, Splits::new(batch, &at)?, Labels::new(batch, &at)?);
    (0..batch.num_rows())
        .map(|row| {
            Ok((
                first_row + row as u64,
                Tag { root: roots.value(row), split: splits.get(row, &at)?, label: labels.get(row) },
            ))
        })
        .collect()
}

pub(super) fn roots<'a>(batch: &'a RecordBatch, at: &At) -> Result<&'a Int64Array, BadInput> {
    column(batch, ROOT_ID, at)?
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| BadInput::new(at.column(ROOT_ID), "expected int64"))
}

/// The split column: null, or one of the split names.
pub(super) struct Splits<'a>(&'a StringArray);

impl<'a> Splits<'a> {
    pub(super) fn new(batch: &'a RecordBatch, at: &At) -> Result<Self, BadInput> {
        let array = column(batch, SPLIT, at)?.as_string_opt::<i32>();
        array.map(Splits).ok_or_else(|| BadInput::new(at.column(SPLIT), "expected utf8"))
    }

    pub(super) fn get(&self, row: usize, at: &At) -> Result<Option<Split>, BadInput> {
        if self.0.is_null(row) {
            return Ok(None);
        }
        let text = self.0.value(row);
        Split::parse(text).map(Some).ok_or_else(|| at.bad(row, SPLIT, format!("unknown split {text:?}")))
    }
}

/// What is structurally wrong with a record, by column.
pub(super) fn check(r: &Record, dim: usize, edge_dim: usize) -> Result<(), (&'static str, String)> {
    let n = r.num_nodes();
    if n == 0 || r.node_ids[0] != r.root {
        return Err((NODE_IDS, format!("the record of root {} must list its root first", r.root)));
    }
    for (column, len) in [(NODE_HOPS, r.hops.len()), (NODE_IN_DEGREES, r.in_degrees.len())] {
        if len != n {
            return Err((column, format!("{len} values for {n} nodes")));
        }
    }
    if r.is_typed() {
        check_typed(r)?;
    } else if r.features.len() != n * dim {
        return Err((NODE_FEATURES, format!("{} feature vectors for {n} nodes", r.features.len() / dim.max(1))));
    }
    let edges = r.num_edges();
    for (column, len) in
        [(EDGE_DST, r.edge_dst.len()), (EDGE_WEIGHTS, r.edge_weights.len()), (EDGE_LAYERS, r.edge_layers.len())]
    {
        if len != edges {
            return Err((column, format!("{len} values for {edges} edges ({EDGE_SRC} has {edges})")));
        }
    }
    if r.edge_feature_at.is_empty() && r.edge_features.len() != edges * edge_dim {
        let vectors = r.edge_features.len() / edge_dim.max(1);
        return Err((EDGE_FEATURES, format!("{vectors} edge feature vectors for {edges} edges")));
    }
    for (column, ends) in [(EDGE_SRC, &r.edge_src), (EDGE_DST, &r.edge_dst)] {
        if let Some(bad) = ends.iter().find(|&&i| i < 0 || i as usize >= n) {
            return Err((column, format!("edge end {bad} is out of range for a record of {n} nodes")));
        }
    }
    Ok(())
}

/// A typed record's own columns: a type per node, a relation per edge, a feature vector per
/// node (each type's width is the trainer's to check against the record set's types).
pub(super) fn check_typed(r: &Record) -> Result<(), (&'static str, String)> {
    let (n, edges) = (r.num_nodes(), r.num_edges());
    if r.node_types.len() != n {
        return Err((NODE_TYPES, format!("{} values for {n} nodes", r.node_types.len())));
    }
    if r.feature_at.len() != n + 1 {
        return Err((NODE_FEATURES, format!("{} feature vectors for {n} nodes", r.feature_at.len().saturating_sub(1))));
    }
    if r.edge_relations.len() != edges {
        return Err((EDGE_RELATIONS, format!("{} values for {edges} edges", r.edge_relations.len())));
    }
    if !r.edge_feature_at.is_empty() && r.edge_feature_at.len() != edges + 1 {
        let vectors = r.edge_feature_at.len() - 1;
        return Err((EDGE_FEATURES, format!("{vectors} edge feature vectors for {edges} edges")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow_buffer::OffsetBuffer;
    use arrow_schema::Schema;

    use super::*;
    use crate::LabelKind;

    fn record(root: i64, label: Option<Label>) -> Record {
        Record {
            root,
            label,
            split: Some(Split::Train),
            node_ids: vec![root, root + 1, root + 2],
            hops: vec![0, 1, 2],
            in_degrees: vec![1, 1, 0],
            features: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            edge_src: vec![1, 2],
            edge_dst: vec![0, 1],
            edge_weights: vec![1.0, 0.5],
            edge_layers: vec![0b11, 0b01],
            ..Record::default()
        }
    }

    /// `batch` with one value of its `node_features` made null: value `at` of the flat values.
    fn with_a_null_feature(batch: &RecordBatch, at: usize) -> RecordBatch {
        let list = batch.column_by_name(NODE_FEATURES).unwrap().as_list::<i32>();
        let nodes = list.values().as_fixed_size_list();
        let values = nodes.values().as_primitive::<Float32Type>();
        let values: Float32Array = values.iter().enumerate().map(|(i, v)| v.filter(|_| i != at)).collect();
        let item = Arc::new(Field::new("item", DataType::Float32, true));
        let nodes = FixedSizeListArray::new(item, nodes.value_length(), Arc::new(values), None);
        let node = Arc::new(Field::new("item", nodes.data_type().clone(), false));
        let list = ListArray::new(node, list.offsets().clone(), Arc::new(nodes), None);
        let old = batch.schema();
        let (mut fields, mut columns) = (Vec::new(), Vec::new());
        for (f, c) in old.fields().iter().zip(batch.columns()) {
            let replaced = f.name() == NODE_FEATURES;
            fields.push(if replaced {
                Arc::new(Field::new(NODE_FEATURES, list.data_type().clone(), false))
            } else {
                f.clone()
            });
            columns.push(if replaced { Arc::new(list.clone()) as ArrayRef } else { c.clone() });
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    /// A null feature value is refused with its row and column, by the record reader and by
    /// the roots' (the values are read as they lie: a null would read as a number).
    #[test]
    fn a_null_feature_value_names_its_row() {
        let schema = Arc::new(Schema::new(record_fields(2, LabelKind::Class, 0)));
        let batch = to_batch(&[record(1, None), record(2, None)], &schema).unwrap();
        // Three nodes of two values a record: value 9 is the second record's second node's.
        let bad = with_a_null_feature(&batch, 9);
        let e = from_batch(&bad, "t.parquet", 0).unwrap_err().to_string();
        assert!(e.contains("t.parquet, row 1, column \"node_features\"") && e.contains("null"), "{e}");
        let e = super::super::RootColumns::new(&bad, "t.parquet", 0).err().unwrap().to_string();
        assert!(e.contains("row 1") && e.contains("null"), "{e}");
        assert!(from_batch(&with_a_null_feature(&batch, 0), "t.parquet", 0).unwrap_err().to_string().contains("row 0"));
    }

    fn round_trip(records: &[Record], label: LabelKind) -> Vec<Record> {
        let edge_dim = records.first().map_or(0, Record::edge_dim);
        let schema = Arc::new(Schema::new(record_fields(2, label, edge_dim)));
        let batch = to_batch(records, &schema).unwrap();
        from_batch(&batch, "t.parquet", 0).unwrap()
    }

    #[test]
    fn class_and_multi_hot_labels_round_trip() {
        let classes = vec![record(10, Some(Label::Class(3))), record(20, None)];
        assert_eq!(round_trip(&classes, LabelKind::Class), classes);
        let targets = vec![record(10, Some(Label::Targets(vec![1.0, 0.0, 1.0]))), record(20, None)];
        assert_eq!(round_trip(&targets, LabelKind::Targets(3)), targets);
    }

    #[test]
    fn edge_features_round_trip_aligned_with_the_edges() {
        let mut with = vec![record(10, Some(Label::Class(3))), record(20, None)];
        with[0].edge_features = vec![0.5, -1.0, 2.0, 1.5, 0.0, 3.25];
        with[1].edge_features = vec![7.0, 8.0, 9.0, -7.0, -8.0, -9.0];
        let back = round_trip(&with, LabelKind::Class);
        assert_eq!(back, with);
        assert_eq!((back[0].edge_dim(), back[0].edge_features_of(1)), (3, &[1.5, 0.0, 3.25][..]));
        // A schema without the column reads as records without edge features.
        assert!(round_trip(&[record(1, None)], LabelKind::Class)[0].edge_features.is_empty());
    }

    #[test]
    fn bad_edge_features_name_file_row_and_column() {
        let schema = Arc::new(Schema::new(record_fields(2, LabelKind::Class, 2)));
        let mut nan = record(5, None);
        nan.edge_features = vec![1.0, f32::NAN, 0.0, 0.0];
        let records = from_batch(&to_batch(&[nan], &schema).unwrap(), "p", 0).unwrap();
        assert_eq!(records[0].check_layers(2).unwrap_err().0, EDGE_FEATURES);

        // A file written elsewhere: record 1 lists one edge feature vector for its two edges.
        let two = |root| Record { edge_features: vec![1.0, 2.0, 3.0, 4.0], ..record(root, None) };
        let records = [two(1), two(2)];
        let batch = to_batch(&records, &schema).unwrap();
        let at = schema.index_of(EDGE_FEATURES).unwrap();
        let DataType::List(per_item) = schema.field(at).data_type() else { panic!("a list column") };
        let DataType::FixedSizeList(item, dim) = per_item.data_type() else { panic!("of vectors") };
        let values = Arc::new(Float32Array::from([1.0, 2.0, 3.0, 4.0].repeat(2)));
        let vectors = Arc::new(FixedSizeListArray::try_new(item.clone(), *dim, values, None).unwrap());
        let lengths = OffsetBuffer::from_lengths([1, 3]);
        let skewed: ArrayRef = Arc::new(ListArray::try_new(per_item.clone(), lengths, vectors, None).unwrap());
        let mut columns = batch.columns().to_vec();
        columns[at] = skewed;
        let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
        let err = from_batch(&batch, "part-3.parquet", 10).unwrap_err();
        assert_eq!(err.at, Location::file("part-3.parquet").row(10).column(EDGE_FEATURES));
    }

    #[test]
    fn columns_are_matched_by_name_not_position() {
        // A writer that puts edge_dst before edge_src: every edge keeps its direction.
        let mut fields = record_fields(2, LabelKind::Class, 2);
        let (s, d) = (
            fields.iter().position(|f| f.name() == EDGE_SRC).unwrap(),
            fields.iter().position(|f| f.name() == EDGE_DST).unwrap(),
        );
        fields.swap(s, d);
        fields.reverse();
        let records = vec![Record { edge_features: vec![1.0, 2.0, 3.0, 4.0], ..record(1, Some(Label::Class(0))) }];
        let batch = to_batch(&records, &Arc::new(Schema::new(fields))).unwrap();
        assert_eq!(from_batch(&batch, "t", 0).unwrap(), records);
    }

    #[test]
    fn bad_records_name_file_row_and_column() {
        let mut bad = record(5, None);
        bad.edge_src[1] = 7;
        let schema = Arc::new(Schema::new(record_fields(2, LabelKind::Class, 0)));
        let batch = to_batch(&[record(1, None), bad], &schema).unwrap();
        let err = from_batch(&batch, "part-0.parquet", 100).unwrap_err();
        assert_eq!(err.at, Location::file("part-0.parquet").row(101).column(EDGE_SRC));
        assert!(err.problem.contains("out of range"), "{err}");
    }

    /// A null item in a list column (a writer other than GraphFlat's may allow them) is bad at
    /// its row, not read as some value.
    #[test]
    fn a_null_item_in_a_list_names_its_row_and_column() {
        let schema = Arc::new(Schema::new(record_fields(2, LabelKind::Class, 0)));
        let batch = to_batch(&[record(1, None), record(5, None)], &schema).unwrap();
        let ids = batch.column_by_name(NODE_IDS).unwrap().as_list::<i32>();
        let items = Int64Array::from(vec![Some(1), Some(2), Some(3), Some(5), None, Some(7)]);
        let nullable = Arc::new(Field::new("item", DataType::Int64, true));
        let ids = ListArray::new(nullable.clone(), ids.offsets().clone(), Arc::new(items), None);
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        let at = schema.index_of(NODE_IDS).unwrap();
        fields[at] = Field::new(NODE_IDS, DataType::List(nullable), false);
        let mut columns = batch.columns().to_vec();
        columns[at] = Arc::new(ids);
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let err = from_batch(&batch, "part-0.parquet", 0).unwrap_err();
        assert_eq!(err.at, Location::file("part-0.parquet").row(1).column(NODE_IDS));
        assert!(err.problem.contains("item 1 of the list is null"), "{err}");
    }

    /// A typed record: nodes of widths 2, 3 and 1 by type, and a relation per edge.
    fn typed(root: i64) -> Record {
        Record {
            node_types: vec![1, 0, 2],
            features: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            feature_at: vec![0, 2, 5, 6],
            edge_relations: vec![3, 0],
            ..record(root, Some(Label::Class(1)))
        }
    }

    #[test]
    fn typed_records_round_trip_without_padding() {
        let schema = Arc::new(Schema::new(typed_record_fields(LabelKind::Class, false)));
        let records = vec![typed(1), typed(9)];
        let batch = to_batch(&records, &schema).unwrap();
        let back = from_batch(&batch, "t", 0).unwrap();
        assert_eq!(back, records);
        assert_eq!((back[0].node_features(1), back[0].node_features(2)), (&[3.0, 4.0, 5.0][..], &[6.0][..]));
        let nodes = batch.column_by_name(NODE_FEATURES).unwrap().as_list::<i32>().value(0);
        assert_eq!(nodes.as_list::<i32>().value_offsets(), &[0, 2, 5, 6], "each node its own width");

        let mut short = typed(2);
        short.edge_relations.pop();
        let err = from_batch(&to_batch(&[short], &schema).unwrap(), "p", 4).unwrap_err();
        assert_eq!(err.at, Location::file("p").row(4).column(EDGE_RELATIONS));
    }

    /// Edge features at each edge's relation's width: 3 on the first edge, none on the second.
    #[test]
    fn typed_edge_features_round_trip_at_each_relations_width() {
        let schema = Arc::new(Schema::new(typed_record_fields(LabelKind::Class, true)));
        let featured =
            |root| Record { edge_features: vec![0.5, -1.0, 2.0], edge_feature_at: vec![0, 3, 3], ..typed(root) };
        let records = vec![featured(1), featured(9)];
        let batch = to_batch(&records, &schema).unwrap();
        let back = from_batch(&batch, "t", 0).unwrap();
        assert_eq!(back, records);
        assert_eq!((back[1].edge_features_of(0), back[1].edge_features_of(1)), (&[0.5, -1.0, 2.0][..], &[][..]));

        let mut short = featured(2);
        short.edge_feature_at.pop();
        let err = from_batch(&to_batch(&[short], &schema).unwrap(), "p", 4).unwrap_err();
        assert_eq!(
            (err.at, err.problem.as_str()),
            (Location::file("p").row(4).column(EDGE_FEATURES), "1 edge feature vectors for 2 edges")
        );
        // A homogeneous column of fixed-size vectors beside typed node features is refused.
        let mut fields = typed_record_fields(LabelKind::Class, false);
        fields.push(Field::new(
            EDGE_FEATURES,
            record_fields(2, LabelKind::Class, 3).pop().unwrap().data_type().clone(),
            false,
        ));
        let fixed = Record { edge_features: vec![0.0; 6], ..typed(3) };
        let err = from_batch(&to_batch(&[fixed], &Arc::new(Schema::new(fields))).unwrap(), "q", 0).unwrap_err();
        assert_eq!(err.at, Location::file("q").column(EDGE_FEATURES));
    }

    #[test]
    fn keep_filters_by_split() {
        let mut valid = record(2, None);
        valid.split = Some(Split::Valid);
        let schema = Arc::new(Schema::new(record_fields(2, LabelKind::Class, 0)));
        let batch = to_batch(&[record(1, None), valid], &schema).unwrap();
        let kept = from_batch_where(&batch, "t", 10, |_, s| s == Some(Split::Valid)).unwrap();
        assert_eq!(kept.iter().map(|(row, r)| (*row, r.root)).collect::<Vec<_>>(), vec![(11, 2)]);
    }
}
