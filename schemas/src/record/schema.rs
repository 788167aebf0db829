//! The record table's columns, its Arrow schema, and the flatten settings it carries as
//! metadata.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Metadata, Schema};

use crate::edge_stats::EdgeStats;
use crate::label::LabelKind;
use crate::layers::Layers;
use crate::sampler::Sampler;
use crate::task::{LinkSpec, NegativeSampler, Task};

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
/// Present only when the edge table has features: `edge_dim` values per edge, aligned with
/// `edge_src` / `edge_dst`.
pub const EDGE_FEATURES: &str = "edge_features";

/// Link records: the supervision edge's source and destination.
pub const LINK_SRC: &str = "link_src";
pub const LINK_DST: &str = "link_dst";
/// Link records: the negative destinations drawn for the edge, in draw order.
pub const NEGATIVES: &str = "negatives";
/// Link records: how many of the row's nodes (and edges) each endpoint's neighborhood holds,
/// in endpoint order: source, destination, then each negative.
pub const ENDPOINT_NODES: &str = "endpoint_nodes";
pub const ENDPOINT_EDGES: &str = "endpoint_edges";

/// Schema-level metadata keys: the flatten settings a record set was made with.
pub mod meta {
    pub const HOPS: &str = "graphflat.hops";
    pub const FANOUTS: &str = "graphflat.fanouts";
    pub const SAMPLER: &str = "graphflat.sampler";
    pub const SEED: &str = "graphflat.seed";
    pub const FEATURE_DIM: &str = "graphflat.feature_dim";
    /// `class` or `targets:<n>`; absent means `class`.
    pub const LABEL: &str = "graphflat.label";
    /// Width of `edge_features`; absent means the records have none.
    pub const EDGE_FEATURE_DIM: &str = "graphflat.edge_feature_dim";
    /// Per-column mean and standard deviation of the whole edge table's features
    /// (comma-separated; see `crate::edge_stats`).
    pub const EDGE_FEATURE_MEAN: &str = "graphflat.edge_feature_mean";
    pub const EDGE_FEATURE_STD: &str = "graphflat.edge_feature_std";
    /// `node` or `link`; absent means `node`.
    pub const TASK: &str = "graphflat.task";
    /// Link records: the `[flatten]` link keys.
    pub const NEGATIVES: &str = "graphflat.negatives";
    pub const NEGATIVE_SAMPLER: &str = "graphflat.negative_sampler";
    pub const DISJOINT_TRAIN: &str = "graphflat.disjoint_train";
    pub const SUPERVISION_FRACTION: &str = "graphflat.supervision_fraction";
}

fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, false)))
}

/// The feature vector type of one node: `fixed_size_list<float32, feature_dim>`.
pub fn feature_type(feature_dim: usize) -> DataType {
    DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, false)), feature_dim as i32)
}

/// The label column's type: `int64`, or `fixed_size_list<float32, n>` for multi-hot targets.
pub fn label_type(kind: LabelKind) -> DataType {
    match kind {
        LabelKind::Class => DataType::Int64,
        LabelKind::Targets(n) => feature_type(n),
    }
}

/// The record table's schema, without metadata; `edge_dim > 0` adds `edge_features`.
pub fn record_fields(feature_dim: usize, label: LabelKind, edge_dim: usize) -> Vec<Field> {
    let mut fields = vec![
        Field::new(ROOT_ID, DataType::Int64, false),
        Field::new(LABEL, label_type(label), true),
        Field::new(SPLIT, DataType::Utf8, true),
        Field::new(NODE_IDS, list_of(DataType::Int64), false),
        Field::new(NODE_HOPS, list_of(DataType::UInt8), false),
        Field::new(NODE_IN_DEGREES, list_of(DataType::Int64), false),
        Field::new(NODE_FEATURES, list_of(feature_type(feature_dim)), false),
        Field::new(EDGE_SRC, list_of(DataType::Int32), false),
        Field::new(EDGE_DST, list_of(DataType::Int32), false),
        Field::new(EDGE_WEIGHTS, list_of(DataType::Float32), false),
        Field::new(EDGE_LAYERS, list_of(DataType::UInt32), false),
    ];
    if edge_dim > 0 {
        fields.push(Field::new(EDGE_FEATURES, list_of(feature_type(edge_dim)), false));
    }
    fields
}

/// The link record table's schema, without metadata: the supervision edge, its negatives, the
/// sizes of each endpoint's neighborhood, then the node and edge columns of node records (the
/// neighborhoods one after another; edge ends index the row's node list).
pub fn link_record_fields(feature_dim: usize, edge_dim: usize) -> Vec<Field> {
    let mut fields = vec![
        Field::new(LINK_SRC, DataType::Int64, false),
        Field::new(LINK_DST, DataType::Int64, false),
        Field::new(SPLIT, DataType::Utf8, true),
        Field::new(NEGATIVES, list_of(DataType::Int64), false),
        Field::new(ENDPOINT_NODES, list_of(DataType::Int32), false),
        Field::new(ENDPOINT_EDGES, list_of(DataType::Int32), false),
    ];
    // The node and edge columns, after root_id, label and split.
    fields.extend(record_fields(feature_dim, LabelKind::Class, edge_dim).into_iter().skip(3));
    fields
}

/// The settings a record table was flattened with, kept in its schema metadata so that the
/// trainer and inference need nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct FlattenMeta {
    pub hops: usize,
    /// Nearest hop first; empty when records hold every edge (see `schemas::layers`).
    pub fanouts: Vec<u32>,
    pub sampler: Sampler,
    pub seed: u64,
    pub feature_dim: usize,
    pub label: LabelKind,
    /// Width of `edge_features` (0: the records have none).
    pub edge_dim: usize,
    /// The whole edge table's feature statistics (present when `edge_dim > 0`).
    pub edge_stats: Option<EdgeStats>,
    /// Link records: the link task's settings (`None`: node records).
    pub link: Option<LinkSpec>,
}

impl FlattenMeta {
    pub fn task(&self) -> Task {
        if self.link.is_some() { Task::Link } else { Task::Node }
    }

    /// The layer rule the records were flattened with.
    pub fn layers(&self) -> Layers {
        Layers::recorded(self.hops, &self.fanouts)
    }

    pub fn to_metadata(&self) -> Metadata {
        let fanouts: Vec<String> = self.fanouts.iter().map(|f| f.to_string()).collect();
        let mut metadata = Metadata::from([
            (meta::HOPS.to_owned(), self.hops.to_string()),
            (meta::FANOUTS.to_owned(), fanouts.join(",")),
            (meta::SAMPLER.to_owned(), self.sampler.name().to_owned()),
            (meta::SEED.to_owned(), self.seed.to_string()),
            (meta::FEATURE_DIM.to_owned(), self.feature_dim.to_string()),
            (meta::LABEL.to_owned(), self.label.to_text()),
        ]);
        if self.edge_dim > 0 {
            metadata.insert(meta::EDGE_FEATURE_DIM.to_owned(), self.edge_dim.to_string());
        }
        if let Some(stats) = &self.edge_stats {
            let (mean, std) = stats.to_text();
            metadata.insert(meta::EDGE_FEATURE_MEAN.to_owned(), mean);
            metadata.insert(meta::EDGE_FEATURE_STD.to_owned(), std);
        }
        if let Some(link) = &self.link {
            metadata.insert(meta::TASK.to_owned(), Task::Link.name().to_owned());
            metadata.insert(meta::NEGATIVES.to_owned(), link.negatives.to_string());
            metadata.insert(meta::NEGATIVE_SAMPLER.to_owned(), link.negative_sampler.name().to_owned());
            metadata.insert(meta::DISJOINT_TRAIN.to_owned(), link.disjoint_train.to_string());
            metadata.insert(meta::SUPERVISION_FRACTION.to_owned(), link.supervision_fraction.to_string());
        }
        metadata
    }

    /// Reads the settings back from a schema's metadata; `None` if any key is missing or bad.
    pub fn from_metadata(metadata: &Metadata) -> Option<Self> {
        Self::read(metadata).ok()
    }

    /// Reads the settings back from a schema's metadata, or says why not: no flatten settings
    /// at all (not a record table), or the key that is missing or bad.
    pub fn read(metadata: &Metadata) -> Result<Self, MetaError> {
        if !metadata.keys().any(|k| k.starts_with("graphflat.")) {
            return Err(MetaError::Missing);
        }
        let text = |key: &'static str| metadata.get(key).map(String::as_str).ok_or(MetaError::Bad(key));
        let number = |key: &'static str| text(key)?.parse::<u64>().map_err(|_| MetaError::Bad(key));
        let fanouts: Vec<u32> = match text(meta::FANOUTS)? {
            "" => Vec::new(),
            listed => {
                listed.split(',').map(|f| f.parse().ok()).collect::<Option<_>>().ok_or(MetaError::Bad(meta::FANOUTS))?
            }
        };
        let hops = number(meta::HOPS)? as usize;
        // One fanout per hop, or none (every edge): what `layers` reads.
        if !fanouts.is_empty() && fanouts.len() != hops {
            return Err(MetaError::Bad(meta::FANOUTS));
        }
        let edge_dim = match metadata.get(meta::EDGE_FEATURE_DIM) {
            None => 0,
            Some(_) => number(meta::EDGE_FEATURE_DIM)? as usize,
        };
        let edge_stats = match (metadata.get(meta::EDGE_FEATURE_MEAN), metadata.get(meta::EDGE_FEATURE_STD)) {
            (Some(mean), Some(std)) if edge_dim > 0 => {
                Some(EdgeStats::parse(mean, std, edge_dim).ok_or(MetaError::Bad(meta::EDGE_FEATURE_MEAN))?)
            }
            (None, None) => None,
            _ => return Err(MetaError::Bad(meta::EDGE_FEATURE_MEAN)),
        };
        let link = match metadata.get(meta::TASK) {
            None => None,
            Some(task) => match Task::parse(task).ok_or(MetaError::Bad(meta::TASK))? {
                Task::Node => None,
                Task::Link => Some(LinkSpec {
                    negatives: number(meta::NEGATIVES)? as usize,
                    negative_sampler: NegativeSampler::parse(text(meta::NEGATIVE_SAMPLER)?)
                        .ok_or(MetaError::Bad(meta::NEGATIVE_SAMPLER))?,
                    disjoint_train: text(meta::DISJOINT_TRAIN)?
                        .parse()
                        .map_err(|_| MetaError::Bad(meta::DISJOINT_TRAIN))?,
                    supervision_fraction: text(meta::SUPERVISION_FRACTION)?
                        .parse()
                        .map_err(|_| MetaError::Bad(meta::SUPERVISION_FRACTION))?,
                }),
            },
        };
        Ok(FlattenMeta {
            hops,
            fanouts,
            sampler: Sampler::parse(text(meta::SAMPLER)?).ok_or(MetaError::Bad(meta::SAMPLER))?,
            seed: number(meta::SEED)?,
            feature_dim: number(meta::FEATURE_DIM)? as usize,
            label: match metadata.get(meta::LABEL) {
                None => LabelKind::Class,
                Some(text) => LabelKind::parse(text).ok_or(MetaError::Bad(meta::LABEL))?,
            },
            edge_dim,
            edge_stats,
            link,
        })
    }
}

/// Why a schema's metadata holds no flatten settings ([`FlattenMeta::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaError {
    /// No `graphflat.` key: not a record table.
    Missing,
    /// This key is missing or its value is not one GraphFlat writes.
    Bad(&'static str),
}

/// The record table's schema with its flatten settings as metadata.
pub fn record_schema(meta: &FlattenMeta) -> Schema {
    let fields = match meta.link {
        None => record_fields(meta.feature_dim, meta.label, meta.edge_dim),
        Some(_) => link_record_fields(meta.feature_dim, meta.edge_dim),
    };
    Schema::new(fields).with_metadata(meta.to_metadata())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips() {
        let meta = FlattenMeta {
            hops: 2,
            fanouts: vec![10, 5],
            sampler: Sampler::Uniform,
            seed: 7,
            feature_dim: 32,
            label: LabelKind::Targets(121),
            edge_dim: 0,
            edge_stats: None,
            link: None,
        };
        assert_eq!(FlattenMeta::from_metadata(&meta.to_metadata()), Some(meta.clone()));
        let all = FlattenMeta { fanouts: vec![], sampler: Sampler::All, label: LabelKind::Class, ..meta };
        assert_eq!(FlattenMeta::from_metadata(&all.to_metadata()), Some(all.clone()));
        // Record sets written before multi-label support carry class labels.
        let mut old = all.to_metadata();
        old.remove(meta::LABEL);
        assert_eq!(FlattenMeta::from_metadata(&old).map(|m| m.label), Some(LabelKind::Class));
        let edges = FlattenMeta {
            edge_dim: 2,
            edge_stats: Some(EdgeStats { mean: vec![0.5, -1.25], std: vec![1.0, 0.1] }),
            ..all
        };
        assert_eq!(FlattenMeta::from_metadata(&edges.to_metadata()), Some(edges.clone()));
        let mut wrong = edges.to_metadata();
        wrong.insert(meta::EDGE_FEATURE_DIM.to_owned(), "3".to_owned());
        assert_eq!(FlattenMeta::from_metadata(&wrong), None, "stats of another width");
        let link = FlattenMeta {
            link: Some(LinkSpec {
                negatives: 3,
                negative_sampler: NegativeSampler::Degree,
                disjoint_train: true,
                supervision_fraction: 0.1,
            }),
            ..edges
        };
        assert_eq!(FlattenMeta::from_metadata(&link.to_metadata()), Some(link.clone()));
        let mut half = link.to_metadata();
        half.remove(meta::NEGATIVES);
        assert_eq!(FlattenMeta::from_metadata(&half), None, "a link record set without its negatives");
        assert_eq!(FlattenMeta::read(&half), Err(MetaError::Bad(meta::NEGATIVES)));
        let mut bogus = link.to_metadata();
        bogus.insert(meta::TASK.to_owned(), "bogus".to_owned());
        assert_eq!(FlattenMeta::read(&bogus), Err(MetaError::Bad(meta::TASK)));
        assert_eq!(FlattenMeta::read(&wrong), Err(MetaError::Bad(meta::EDGE_FEATURE_MEAN)));
        let foreign = Metadata::from([("pandas".to_owned(), "{}".to_owned())]);
        assert_eq!(FlattenMeta::read(&foreign), Err(MetaError::Missing));
    }
}
