//! The flattened record table GraphFlat writes: one row per target node, self-contained.
//!
//! Nodes are listed root first, then by (hop, node_id). Edges are local index pairs into that
//! list, sorted by (dst, src). `edge_layers` says which GNN layers each edge serves: bit `l-1` is
//! set when layer `l` (1 = the layer nearest the input) aggregates over the edge. A node at hop
//! `d` is computed by layers `1..=k-d`, and the record holds exactly the edges those layers need
//! (see `README.md`).

use std::sync::Arc;

use arrow_schema::{DataType, Field, Metadata, Schema};

pub const ROOT_ID: &str = "root_id";
pub const LABEL: &str = "label";
pub const SPLIT: &str = "split";
pub const NODE_IDS: &str = "node_ids";
pub const NODE_HOPS: &str = "node_hops";
pub const NODE_IN_DEGREES: &str = "node_in_degrees";
pub const NODE_FEATURES: &str = "node_features";
pub const EDGE_SRC: &str = "edge_src";
pub const EDGE_DST: &str = "edge_dst";
pub const EDGE_WEIGHTS: &str = "edge_weights";
pub const EDGE_LAYERS: &str = "edge_layers";

/// Schema-level metadata keys: the flatten settings a record set was made with.
pub mod meta {
    pub const HOPS: &str = "graphflat.hops";
    pub const FANOUTS: &str = "graphflat.fanouts";
    pub const SAMPLER: &str = "graphflat.sampler";
    pub const SEED: &str = "graphflat.seed";
    pub const FEATURE_DIM: &str = "graphflat.feature_dim";
}

fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, false)))
}

/// The feature vector type of one node: `fixed_size_list<float32, feature_dim>`.
pub fn feature_type(feature_dim: usize) -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, false)), feature_dim as i32)
}

/// The record table's schema, without metadata.
pub fn record_fields(feature_dim: usize) -> Vec<Field> {
    vec![
        Field::new(ROOT_ID, DataType::Int64, false),
        Field::new(LABEL, DataType::Int64, true),
        Field::new(SPLIT, DataType::Utf8, true),
        Field::new(NODE_IDS, list_of(DataType::Int64), false),
        Field::new(NODE_HOPS, list_of(DataType::UInt8), false),
        Field::new(NODE_IN_DEGREES, list_of(DataType::Int64), false),
        Field::new(NODE_FEATURES, list_of(feature_type(feature_dim)), false),
        Field::new(EDGE_SRC, list_of(DataType::Int32), false),
        Field::new(EDGE_DST, list_of(DataType::Int32), false),
        Field::new(EDGE_WEIGHTS, list_of(DataType::Float32), false),
        Field::new(EDGE_LAYERS, list_of(DataType::UInt32), false),
    ]
}

/// The settings a record table was flattened with, kept in its schema metadata so that the
/// trainer and inference need nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlattenMeta {
    pub hops: usize,
    pub fanouts: Vec<u32>,
    pub sampler: String,
    pub seed: u64,
    pub feature_dim: usize,
}

impl FlattenMeta {
    pub fn to_metadata(&self) -> Metadata {
        let fanouts: Vec<String> = self.fanouts.iter().map(|f| f.to_string()).collect();
        Metadata::from([
            (meta::HOPS.to_owned(), self.hops.to_string()),
            (meta::FANOUTS.to_owned(), fanouts.join(",")),
            (meta::SAMPLER.to_owned(), self.sampler.clone()),
            (meta::SEED.to_owned(), self.seed.to_string()),
            (meta::FEATURE_DIM.to_owned(), self.feature_dim.to_string()),
        ])
    }

    /// Reads the settings back from a schema's metadata; `None` if any key is missing or bad.
    pub fn from_metadata(metadata: &Metadata) -> Option<Self> {
        let fanouts = metadata.get(meta::FANOUTS)?;
        Some(FlattenMeta {
            hops: metadata.get(meta::HOPS)?.parse().ok()?,
            fanouts: if fanouts.is_empty() {
                Vec::new()
            } else {
                fanouts.split(',').map(|f| f.parse().ok()).collect::<Option<_>>()?
            },
            sampler: metadata.get(meta::SAMPLER)?.clone(),
            seed: metadata.get(meta::SEED)?.parse().ok()?,
            feature_dim: metadata.get(meta::FEATURE_DIM)?.parse().ok()?,
        })
    }
}

/// The record table's schema with its flatten settings as metadata.
pub fn record_schema(meta: &FlattenMeta) -> Schema {
    Schema::new(record_fields(meta.feature_dim)).with_metadata(meta.to_metadata())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips() {
        let meta = FlattenMeta { hops: 2, fanouts: vec![10, 5], sampler: "uniform".into(), seed: 7, feature_dim: 32 };
        assert_eq!(FlattenMeta::from_metadata(&meta.to_metadata()), Some(meta.clone()));
        let all = FlattenMeta { fanouts: vec![], sampler: "all".into(), ..meta };
        assert_eq!(FlattenMeta::from_metadata(&all.to_metadata()), Some(all));
    }
}
