//! One link record as plain data, and its Arrow layout both ways.
//!
//! A link record is one row per supervision edge: the edge (`link_src`, `link_dst`, `split`),
//! its negative destinations, and the k-hop neighborhood of every endpoint (source,
//! destination, then each negative) laid one after another in the node and edge columns of
//! node records. `endpoint_nodes` and `endpoint_edges` say how many nodes and edges each
//! neighborhood holds; edge ends index the row's whole node list, and every edge stays inside
//! its endpoint's nodes. Each neighborhood is exactly the endpoint's own node record (its root
//! first), so a reader splits the row back into records that the node path already handles.
//! Nodes shared by two neighborhoods appear in both, as in two node records.

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{ArrayRef, Int32Array, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};

use super::batch::{At, GraphColumns, ListColumn, Record, Splits, check, check_typed, column, to_batch};
use super::schema::*;
use crate::error::BadInput;
use crate::split::Split;

/// A supervision edge with the neighborhoods a link model scores it from.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LinkRecord {
    pub src: i64,
    pub dst: i64,
    /// The edge's split (`train`, `valid` or `test`).
    pub split: Option<Split>,
    /// Negative destinations, in draw order.
    pub negatives: Vec<i64>,
    /// Source, destination, then each negative: each endpoint's node record (its `root` is the
    /// endpoint; `label` and `split` are `None`). Shared, so that a reader can keep one copy of
    /// a neighborhood that many records hold (see `graphtrainer`'s record cache).
    pub endpoints: Vec<Arc<Record>>,
}

impl LinkRecord {
    /// The endpoints' ids in endpoint order: source, destination, negatives.
    pub fn endpoint_ids(&self) -> Vec<i64> {
        [self.src, self.dst].into_iter().chain(self.negatives.iter().copied()).collect()
    }

    pub fn num_nodes(&self) -> usize {
        self.endpoints.iter().map(|e| e.num_nodes()).sum()
    }

    pub fn num_edges(&self) -> usize {
        self.endpoints.iter().map(|e| e.num_edges()).sum()
    }

    /// Roughly the bytes this record takes in memory, for batching writes.
    pub fn size_bytes(&self) -> usize {
        self.endpoints.iter().map(|e| e.size_bytes()).sum::<usize>() + 8 * self.negatives.len() + 32
    }

    /// The endpoints' neighborhoods as one record: nodes and edges one after another, edge
    /// ends shifted to index the whole node list, a typed record's feature offsets to index
    /// the whole feature lists (the row's node and edge columns).
    fn concatenated(&self) -> Record {
        let mut row = Record::default();
        for e in &self.endpoints {
            let shift = row.node_ids.len() as i32;
            row.node_ids.extend_from_slice(&e.node_ids);
            row.node_keys.extend_from_slice(&e.node_keys);
            row.hops.extend_from_slice(&e.hops);
            row.in_degrees.extend_from_slice(&e.in_degrees);
            append_offsets(&mut row.feature_at, &e.feature_at, row.features.len());
            row.features.extend_from_slice(&e.features);
            row.node_types.extend_from_slice(&e.node_types);
            row.edge_src.extend(e.edge_src.iter().map(|&i| i + shift));
            row.edge_dst.extend(e.edge_dst.iter().map(|&i| i + shift));
            row.edge_weights.extend_from_slice(&e.edge_weights);
            row.edge_layers.extend_from_slice(&e.edge_layers);
            row.edge_relations.extend_from_slice(&e.edge_relations);
            append_offsets(&mut row.edge_feature_at, &e.edge_feature_at, row.edge_features.len());
            row.edge_features.extend_from_slice(&e.edge_features);
        }
        row
    }
}

/// Appends a typed record's feature offsets (`0, ..., len`) to a row's, shifted past the
/// `before` values the row holds; an empty list (a homogeneous record) adds nothing.
fn append_offsets(row: &mut Vec<u32>, offsets: &[u32], before: usize) {
    if let Some((_, rest)) = offsets.split_first() {
        if row.is_empty() {
            row.push(0);
        }
        row.extend(rest.iter().map(|&o| o + before as u32));
    }
}

/// The values and offsets of items `items` of a typed feature list (`offsets` over `values`),
/// the offsets rebased to 0; homogeneous (`offsets` empty): `width` values per item.
fn cut_features(values: &[f32], offsets: &[u32], width: usize, items: &Range<usize>) -> (Vec<f32>, Vec<u32>) {
    if offsets.is_empty() {
        return (values[items.start * width..items.end * width].to_vec(), Vec::new());
    }
    let at = &offsets[items.start..=items.end];
    let values = values[at[0] as usize..at[at.len() - 1] as usize].to_vec();
    (values, at.iter().map(|&o| o - at[0]).collect())
}

fn int_list(item: DataType, lengths: impl Iterator<Item = usize>, values: ArrayRef) -> Result<ArrayRef, ArrowError> {
    Ok(Arc::new(ListArray::try_new(
        Arc::new(Field::new("item", item, false)),
        OffsetBuffer::from_lengths(lengths),
        values,
        None,
    )?))
}

/// Lays out link records as one batch of `schema` (a link record schema), column by name.
pub fn links_to_batch(links: &[LinkRecord], schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let link_columns = [LINK_SRC, LINK_DST, SPLIT, NEGATIVES, ENDPOINT_NODES, ENDPOINT_EDGES];
    let graph_fields: Vec<Field> =
        schema.fields().iter().filter(|f| !link_columns.contains(&f.name().as_str())).map(|f| (**f).clone()).collect();
    let graph_schema = Arc::new(Schema::new(graph_fields));
    let rows: Vec<Record> = links.iter().map(LinkRecord::concatenated).collect();
    let graph = to_batch(&rows, &graph_schema)?;
    let sizes = |count: fn(&Record) -> usize| -> Vec<i32> {
        links.iter().flat_map(|l| l.endpoints.iter().map(move |e| count(e) as i32)).collect()
    };
    let columns = schema
        .fields()
        .iter()
        .map(|field| -> Result<ArrayRef, ArrowError> {
            Ok(match field.name().as_str() {
                LINK_SRC => Arc::new(Int64Array::from_iter_values(links.iter().map(|l| l.src))),
                LINK_DST => Arc::new(Int64Array::from_iter_values(links.iter().map(|l| l.dst))),
                SPLIT => Arc::new(StringArray::from_iter(links.iter().map(|l| l.split.map(Split::name)))),
                NEGATIVES => int_list(
                    DataType::Int64,
                    links.iter().map(|l| l.negatives.len()),
                    Arc::new(Int64Array::from_iter_values(links.iter().flat_map(|l| l.negatives.iter().copied()))),
                )?,
                ENDPOINT_NODES => int_list(
                    DataType::Int32,
                    links.iter().map(|l| l.endpoints.len()),
                    Arc::new(Int32Array::from(sizes(Record::num_nodes))),
                )?,
                ENDPOINT_EDGES => int_list(
                    DataType::Int32,
                    links.iter().map(|l| l.endpoints.len()),
                    Arc::new(Int32Array::from(sizes(Record::num_edges))),
                )?,
                name => graph
                    .column_by_name(name)
                    .cloned()
                    .ok_or_else(|| ArrowError::SchemaError(format!("no link record column is named {name:?}")))?,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

fn int64s<'a>(batch: &'a RecordBatch, name: &str, at: &At) -> Result<&'a Int64Array, BadInput> {
    column(batch, name, at)?
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| BadInput::new(at.column(name), "expected int64"))
}

/// The split of every row of `batch` (rows `first_row..` of `file`), with the row each came
/// from: what a reader counts link records by. `batch` needs only the split column.
pub fn link_splits(batch: &RecordBatch, file: &str, first_row: u64) -> Result<Vec<(u64, Option<Split>)>, BadInput> {
    let at = At { file, first_row };
    let splits = Splits::new(batch, &at)?;
    (0..batch.num_rows()).map(|row| Ok((first_row + row as u64, splits.get(row, &at)?))).collect()
}

/// Decodes the link records of `batch` (rows `first_row..` of `file`) whose split `keep`
/// accepts, with the row each came from, checking each one's structure: one neighborhood per
/// endpoint, each rooted at its endpoint and closed (its edges end at its own nodes), and each a
/// well-formed node record. Rows not kept are not decoded.
pub fn links_from_batch(
    batch: &RecordBatch,
    file: &str,
    first_row: u64,
    keep: impl Fn(Option<Split>) -> bool,
) -> Result<Vec<(u64, LinkRecord)>, BadInput> {
    let at = At { file, first_row };
    let (srcs, dsts, splits) = (int64s(batch, LINK_SRC, &at)?, int64s(batch, LINK_DST, &at)?, Splits::new(batch, &at)?);
    let negatives = ListColumn::<Int64Type>::new(batch, NEGATIVES, &at)?;
    let endpoint_nodes = ListColumn::<Int32Type>::new(batch, ENDPOINT_NODES, &at)?;
    let endpoint_edges = ListColumn::<Int32Type>::new(batch, ENDPOINT_EDGES, &at)?;
    let graph = GraphColumns::new(batch, &at)?;
    let (dim, edge_dim) = (graph.dim(), graph.edge_dim());
    let mut out = Vec::new();
    for row in 0..batch.num_rows() {
        let split = splits.get(row, &at)?;
        if !keep(split) {
            continue;
        }
        let whole = Record { root: srcs.value(row), split, ..graph.row(row, &at)? };
        let link = LinkRecord {
            src: srcs.value(row),
            dst: dsts.value(row),
            split,
            negatives: negatives.row(row, &at)?,
            endpoints: Vec::new(),
        };
        let sizes = (endpoint_nodes.row(row, &at)?, endpoint_edges.row(row, &at)?);
        let link = split_endpoints(link, &whole, sizes, dim, edge_dim).map_err(|(c, p)| at.bad(row, c, p))?;
        out.push((first_row + row as u64, link));
    }
    Ok(out)
}

/// Cuts a row's node and edge lists into one node record per endpoint.
fn split_endpoints(
    mut link: LinkRecord,
    whole: &Record,
    (nodes, edges): (Vec<i32>, Vec<i32>),
    dim: usize,
    edge_dim: usize,
) -> Result<LinkRecord, (&'static str, String)> {
    let ids = link.endpoint_ids();
    check_whole(&link, whole, (&nodes, &edges), dim, edge_dim)?;
    let (mut node_start, mut edge_start) = (0usize, 0usize);
    for (e, (&n, &m)) in nodes.iter().zip(&edges).enumerate() {
        let (nodes_at, edges_at) = (node_start..node_start + n as usize, edge_start..edge_start + m as usize);
        let record = endpoint(whole, ids[e], (nodes_at.clone(), edges_at.clone()), dim, edge_dim);
        check(&record, dim, edge_dim).map_err(|(column, problem)| (column, format!("endpoint {e}: {problem}")))?;
        link.endpoints.push(Arc::new(record));
        (node_start, edge_start) = (nodes_at.end, edges_at.end);
    }
    Ok(link)
}

/// A link row's columns before they are cut: a size per endpoint that add up to the row's
/// nodes and edges, and every per-node and per-edge column as long as they are.
fn check_whole(
    link: &LinkRecord,
    whole: &Record,
    (nodes, edges): (&[i32], &[i32]),
    dim: usize,
    edge_dim: usize,
) -> Result<(), (&'static str, String)> {
    let ids = link.endpoint_ids();
    let endpoints = format!("{} endpoints (source, destination, {} negatives)", ids.len(), link.negatives.len());
    for (column, sizes, total) in
        [(ENDPOINT_NODES, nodes, whole.num_nodes()), (ENDPOINT_EDGES, edges, whole.num_edges())]
    {
        if sizes.len() != ids.len() {
            return Err((column, format!("{} sizes for {endpoints}", sizes.len())));
        }
        if sizes.iter().any(|&n| n < 0) || sizes.iter().map(|&n| n as usize).sum::<usize>() != total {
            return Err((column, format!("sizes {sizes:?} do not add up to the row's {total}")));
        }
    }
    if whole.hops.len() != whole.num_nodes() || whole.in_degrees.len() != whole.num_nodes() {
        return Err((NODE_HOPS, format!("hops and in-degrees for {} nodes", whole.num_nodes())));
    }
    if whole.is_typed() {
        check_typed(whole)?;
    } else if whole.features.len() != whole.num_nodes() * dim
        || whole.edge_features.len() != whole.num_edges() * edge_dim
    {
        return Err((NODE_FEATURES, "feature vectors that do not match the nodes and edges".to_owned()));
    }
    let columns = [whole.edge_dst.len(), whole.edge_weights.len(), whole.edge_layers.len()];
    if columns.iter().any(|&n| n != whole.num_edges()) {
        return Err((EDGE_DST, format!("edge columns of lengths {columns:?} for {} edges", whole.num_edges())));
    }
    Ok(())
}

/// The node record of the endpoint `root` whose nodes and edges lie at `nodes_at` and
/// `edges_at` of the whole row (its edges' ends made local to its nodes).
fn endpoint(
    whole: &Record,
    root: i64,
    (nodes_at, edges_at): (Range<usize>, Range<usize>),
    dim: usize,
    edge_dim: usize,
) -> Record {
    let shift = nodes_at.start as i32;
    let local = |ends: &[i32]| ends[edges_at.clone()].iter().map(|&i| i - shift).collect::<Vec<i32>>();
    let (features, feature_at) = cut_features(&whole.features, &whole.feature_at, dim, &nodes_at);
    let (edge_features, edge_feature_at) =
        cut_features(&whole.edge_features, &whole.edge_feature_at, edge_dim, &edges_at);
    let typed =
        |values: &[u8], at: &Range<usize>| if values.is_empty() { Vec::new() } else { values[at.clone()].to_vec() };
    Record {
        root,
        label: None,
        split: None,
        node_ids: whole.node_ids[nodes_at.clone()].to_vec(),
        node_keys: whole.node_keys.get(nodes_at.clone()).map_or(Vec::new(), <[String]>::to_vec),
        hops: whole.hops[nodes_at.clone()].to_vec(),
        in_degrees: whole.in_degrees[nodes_at.clone()].to_vec(),
        features,
        feature_at,
        node_types: typed(&whole.node_types, &nodes_at),
        edge_src: local(&whole.edge_src),
        edge_dst: local(&whole.edge_dst),
        edge_weights: whole.edge_weights[edges_at.clone()].to_vec(),
        edge_layers: whole.edge_layers[edges_at.clone()].to_vec(),
        edge_relations: typed(&whole.edge_relations, &edges_at),
        edge_features,
        edge_feature_at,
        root_neighbors: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::LabelKind;
    use crate::record::FlattenMeta;
    use crate::sampler::Sampler;
    use crate::task::{LinkSpec, NegativeSampler};

    fn endpoint(root: i64, others: &[i64], dim: usize, edge_dim: usize) -> Record {
        let n = 1 + others.len();
        Record {
            root,
            node_ids: std::iter::once(root).chain(others.iter().copied()).collect(),
            hops: std::iter::once(0).chain(others.iter().map(|_| 1)).collect(),
            in_degrees: vec![others.len() as i64; n],
            features: (0..n * dim).map(|i| root as f32 + i as f32 / 8.0).collect(),
            edge_src: (1..n as i32).collect(),
            edge_dst: vec![0; n - 1],
            edge_weights: vec![1.0; n - 1],
            edge_layers: vec![0b11; n - 1],
            edge_features: (0..(n - 1) * edge_dim).map(|i| -(i as f32)).collect(),
            ..Record::default()
        }
    }

    fn schema(edge_dim: usize) -> SchemaRef {
        let meta = FlattenMeta {
            hops: 2,
            fanouts: vec![],
            sampler: Sampler::All,
            seed: 1,
            feature_dim: 3,
            label: LabelKind::Class,
            edge_dim,
            edge_stats: None,
            relation_edge_stats: Vec::new(),
            types: None,
            relation_fanouts: Vec::new(),
            string_ids: false,
            precomputed: None,
            root_neighbors: false,
            link: Some(LinkSpec {
                negatives: 2,
                negative_sampler: NegativeSampler::Uniform,
                disjoint_train: false,
                supervision_fraction: 1.0,
                relation: None,
            }),
        };
        Arc::new(record_schema(&meta))
    }

    fn links(edge_dim: usize) -> Vec<LinkRecord> {
        let link = |src, dst, split, negatives: Vec<i64>| LinkRecord {
            src,
            dst,
            split,
            endpoints: [src, dst]
                .into_iter()
                .chain(negatives.iter().copied())
                .map(|id| Arc::new(endpoint(id, &[id + 100, id + 200][..(id % 3) as usize], 3, edge_dim)))
                .collect(),
            negatives,
        };
        vec![link(1, 2, Some(Split::Train), vec![5, 7]), link(4, 3, Some(Split::Test), vec![4, 9])]
    }

    #[test]
    fn link_records_round_trip_by_column_name() {
        for edge_dim in [0, 2] {
            let (schema, links) = (schema(edge_dim), links(edge_dim));
            let batch = links_to_batch(&links, &schema).unwrap();
            let back: Vec<LinkRecord> =
                links_from_batch(&batch, "f", 0, |_| true).unwrap().into_iter().map(|(_, l)| l).collect();
            assert_eq!(back, links);
            // Columns in another order mean the same.
            let reversed: Vec<usize> = (0..batch.num_columns()).rev().collect();
            let shuffled = batch.project(&reversed).unwrap();
            let again: Vec<LinkRecord> =
                links_from_batch(&shuffled, "f", 0, |_| true).unwrap().into_iter().map(|(_, l)| l).collect();
            assert_eq!(again, links);
            let tests = links_from_batch(&batch, "f", 10, |s| s == Some(Split::Test)).unwrap();
            let splits = link_splits(&batch.project(&[batch.schema().index_of(SPLIT).unwrap()]).unwrap(), "f", 10);
            assert_eq!(splits.unwrap(), vec![(10, Some(Split::Train)), (11, Some(Split::Test))]);
            assert_eq!(tests.iter().map(|(row, l)| (*row, l.src)).collect::<Vec<_>>(), vec![(11, 4)]);
        }
    }

    /// A typed endpoint: the root (type 0, 2 features), `others` of type 1 (3 features), an
    /// edge of relation 0 (1 edge feature) from each other node to the root.
    fn typed_endpoint(root: i64, others: &[i64]) -> Record {
        let n = 1 + others.len();
        Record {
            node_types: std::iter::once(0).chain(others.iter().map(|_| 1)).collect(),
            feature_at: std::iter::once(0).chain((0..n as u32).map(|i| 2 + 3 * i)).collect(),
            features: (0..2 + 3 * others.len()).map(|i| root as f32 - i as f32).collect(),
            edge_relations: vec![0; n - 1],
            edge_feature_at: (0..n as u32).collect(),
            edge_features: others.iter().map(|&o| o as f32 / 4.0).collect(),
            ..endpoint(root, others, 0, 0)
        }
    }

    #[test]
    fn typed_link_records_round_trip_with_their_own_widths() {
        use crate::typed::{GraphTypes, NodeType, Relation};
        let types = GraphTypes {
            node_types: vec![NodeType::new("a", 2), NodeType::new("b", 3)],
            relations: vec![Relation { edge_dim: 1, ..Relation::new("r", 1, 0) }],
            target: 0,
        };
        let mut meta = FlattenMeta::read(schema(0).metadata()).unwrap();
        meta.types = Some(types);
        meta.relation_fanouts = vec![Vec::new()];
        meta.link.as_mut().unwrap().relation = Some(0);
        assert_eq!(FlattenMeta::read(&meta.to_metadata()), Ok(meta.clone()), "the link relation round trips");
        let schema = Arc::new(record_schema(&meta));
        let link = |src: i64, dst: i64, negatives: Vec<i64>| LinkRecord {
            src,
            dst,
            split: Some(Split::Valid),
            endpoints: [src, dst]
                .into_iter()
                .chain(negatives.iter().copied())
                .map(|id| Arc::new(typed_endpoint(id, &[id + 10, id + 20][..(id % 3) as usize])))
                .collect(),
            negatives,
        };
        let links = vec![link(1, 2, vec![3, 6]), link(5, 4, vec![7, 9])];
        let batch = links_to_batch(&links, &schema).unwrap();
        let back: Vec<LinkRecord> =
            links_from_batch(&batch, "f", 0, |_| true).unwrap().into_iter().map(|(_, l)| l).collect();
        assert_eq!(back, links);
    }

    #[test]
    fn an_edge_that_leaves_its_endpoint_is_bad_input() {
        let schema = schema(0);
        let mut links = links(0);
        // Endpoint 1 of the first link (node 2: one in-neighbor) points into endpoint 0.
        let batch = links_to_batch(&links, &schema).unwrap();
        let sizes = batch.column_by_name(ENDPOINT_NODES).unwrap().as_list::<i32>().value(0);
        assert_eq!(sizes.as_primitive::<Int32Type>().values().to_vec(), vec![2, 3, 3, 2]);
        Arc::make_mut(&mut links[0].endpoints[1]).edge_src[0] = -2;
        let batch = links_to_batch(&links, &schema).unwrap();
        let error = links_from_batch(&batch, "part-0.parquet", 0, |_| true).unwrap_err().to_string();
        assert!(error.contains("part-0.parquet") && error.contains(EDGE_SRC) && error.contains("row 0"), "{error}");
        assert!(error.contains("endpoint 1"), "{error}");
    }
}
