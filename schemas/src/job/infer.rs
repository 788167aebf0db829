//! The `[infer]` stage (GraphInfer): scores and embeds nodes from the node and edge tables and
//! a trained model, in k + 1 rounds over the graph, without k-hop records. The sampler, fanouts
//! and seed come from the model's `model-<run>.json` (the flatten settings it was trained on), so
//! every node aggregates over the same sampled in-edges as its training record.

use super::JobError;

use serde::{Deserialize, Serialize};

use super::changes::Arrival;
use super::device::{DEFAULT_DEVICE, DeviceKind};
use super::flatten::{DEFAULT_HUB_THRESHOLD, DEFAULT_PART_SIZE_MB};
use super::graph::{GraphConfig, TypedGraph, section_graph};
use super::targets::Targets;

/// What GraphInfer gives a node that has no row in the model's learned embedding table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MissingEmbedding {
    /// Zeros, counted in the summary.
    #[default]
    Zero,
    /// The job fails (exit 65), naming the first such node.
    Error,
}

/// Rows per transform on the device when a job sets none.
pub const DEFAULT_BATCH_SIZE: usize = 4096;

/// The `[infer]` table. The paths are required; every other key takes the `Default` below, the
/// hub threshold and part size those of `[flatten]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferConfig {
    /// Node table, as in `[flatten]`. Empty (absent) when the job's `[graph]` names a typed
    /// graph.
    #[serde(default)]
    pub nodes: String,
    /// Edge table, as in `[flatten]`.
    #[serde(default)]
    pub edges: String,
    /// A typed graph: the node type the model scores, the model's target type (required with
    /// `[graph]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// A typed graph: the node types whose nodes get a row (default: every type). Rows of the
    /// target type are the nodes `targets` chooses, with scores; other types' rows hold every
    /// node of the type, with its embedding only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_types: Option<Vec<String>>,
    /// The job's `[graph]`, set by `JobFile::parse`; kept in the manifest's settings.
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphConfig>,
    /// A training output directory (`model-<run>.json` and `model-<run>.bpk`); a local path.
    pub model: String,
    /// A partition table (`[partition]`'s output: `node_id`, `part`) whose parts own the nodes
    /// it names: part `p` of `P` on worker `p * workers / P`, every other node at its hash
    /// owner, and each worker's nodes laid out part by part. The outputs are the same as
    /// without it; fewer edges cross workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Output directory for the part files and `_SUCCESS`.
    pub output: String,
    /// Which layer's output is the `embedding` column, 1-based (layer k gives the logits).
    /// Default: the last hidden layer, k - 1 (k for a one-layer model).
    #[serde(default)]
    pub embedding: Option<usize>,
    /// Which nodes get a row: "all", or a list of splits. Only the nodes these need at each
    /// layer are computed.
    #[serde(default)]
    pub targets: Targets,
    /// Rows per transform on the device; every transform is padded to this many rows, so a
    /// node's result does not depend on which nodes share its batch.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    #[serde(default = "default_device")]
    pub device: DeviceKind,
    /// A node whose sampled in-edges at a layer number more than this has its aggregation split
    /// over salted reducers and merged in salt order (0: never). Also the re-indexing threshold
    /// of the sampling round, as in `[flatten]`.
    #[serde(default = "default_hub_threshold")]
    pub hub_threshold: u64,
    /// A model with learned embeddings: what a node without a learned row (new since
    /// training) gets, `zero` (counted in the summary) or `error` (the job fails, exit 65).
    #[serde(default)]
    pub missing_embedding: MissingEmbedding,
    /// A worker starts a new part file when its current one passes this size.
    #[serde(default = "default_part_size_mb")]
    pub part_size_mb: u64,
    /// Replace an output that already holds a finished run of this stage, as in `[flatten]`.
    #[serde(default)]
    pub overwrite: bool,
    /// Refresh the output instead of recomputing it: over a version this stage committed with
    /// the same settings and the same model (the same training run), compute only the rows
    /// today's graph can change and carry the others over (`docs/refresh.md`). A run with no
    /// such version runs in full, and says why. Implies `overwrite`; every run with it keeps
    /// its nodes' digests beside the output, in `.<name>.graphflat-state/`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incremental: bool,
    /// Keep a copy of this run's graph beside the output (`.<name>.graphflat-nodes-<slot>/` and
    /// `.<name>.graphflat-edges-<slot>/`, the slot the output's manifest then names), so that
    /// the runs after it can take delta tables instead of a full snapshot. A run with
    /// `delta_nodes` or `delta_edges` keeps the graph it makes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_graph: bool,
    /// Changes to the kept node table since the previous run: the node table's columns and
    /// `op` (`upsert` or `delete`); see `schemas/README.md`, "Delta tables". With it (or
    /// `delta_edges`) the graph is the kept one with the changes applied, and `nodes` and
    /// `edges` are not named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_nodes: Option<String>,
    /// Changes to the kept edge table, as `delta_nodes`: rows of `(src, dst)` pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_edges: Option<String>,
    /// Link models: a table of candidate pairs (`src: int64`, `dst: int64`, Parquet) to score
    /// with the model's decoder; every id must be a node of the node table.
    #[serde(default)]
    pub pairs: Option<String>,
    /// Where the pair scores go (`src`, `dst`, `score`, parts and `_SUCCESS`); required with
    /// `pairs`, and apart from `output` and every input. Its `_SUCCESS` is written after
    /// `output`'s; after a failure neither holds the run's.
    #[serde(default)]
    pub pairs_output: Option<String>,
}

serde_defaults! {
    default_batch_size: usize = DEFAULT_BATCH_SIZE;
    default_device: DeviceKind = DEFAULT_DEVICE;
    default_hub_threshold: u64 = DEFAULT_HUB_THRESHOLD;
    default_part_size_mb: u64 = DEFAULT_PART_SIZE_MB;
}

impl Default for InferConfig {
    /// Every knob's default, with empty paths: a job must name its tables, model and output.
    fn default() -> Self {
        InferConfig {
            nodes: String::new(),
            edges: String::new(),
            target_type: None,
            node_types: None,
            graph: None,
            model: String::new(),
            partition: None,
            output: String::new(),
            embedding: None,
            targets: Targets::All,
            batch_size: DEFAULT_BATCH_SIZE,
            device: DEFAULT_DEVICE,
            hub_threshold: DEFAULT_HUB_THRESHOLD,
            missing_embedding: MissingEmbedding::Zero,
            part_size_mb: DEFAULT_PART_SIZE_MB,
            overwrite: false,
            incremental: false,
            keep_graph: false,
            delta_nodes: None,
            delta_edges: None,
            pairs: None,
            pairs_output: None,
        }
    }
}

impl InferConfig {
    /// How this section's graph arrives (see `super::changes`).
    pub fn arrival(&self) -> Arrival<'_> {
        Arrival {
            nodes: &self.nodes,
            edges: &self.edges,
            keep_graph: self.keep_graph,
            delta_nodes: self.delta_nodes.as_deref(),
            delta_edges: self.delta_edges.as_deref(),
        }
    }

    /// Takes the job's `[graph]` (or its absence), as `[flatten]` does; `node_types` names
    /// types of it.
    pub fn set_graph(&mut self, graph: Option<&GraphConfig>) -> Result<(), JobError> {
        self.arrival().check("infer", graph.is_some())?;
        // A delta day's tables are the kept graph's.
        let tables = match self.arrival().is_delta() {
            true => ("kept", "kept"),
            false => (self.nodes.as_str(), self.edges.as_str()),
        };
        let resolved = section_graph("infer", tables, self.target_type.as_deref(), graph)?;
        match (&resolved, &self.node_types) {
            (None, Some(_)) => {
                return Err(JobError::invalid(
                    "infer",
                    "node_types names types of [graph], and the job has no [graph]",
                ));
            }
            (Some(g), Some(chosen)) => {
                if let Some(unknown) = chosen.iter().find(|t| g.node_type(t).is_none()) {
                    let known: Vec<&str> = g.node_types.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(JobError::invalid(
                        "infer",
                        format!("node_types: {unknown:?} is not a node type of [graph] ({})", known.join(", ")),
                    ));
                }
                if chosen.is_empty() {
                    return Err(JobError::invalid("infer", "node_types is empty: name the types whose nodes get rows"));
                }
            }
            _ => {}
        }
        self.graph = resolved.and(graph.cloned());
        Ok(())
    }

    /// The typed graph this job reads, numbered, and its target type (`None`: a homogeneous
    /// graph).
    pub fn typed(&self) -> Option<(TypedGraph, u8)> {
        let graph = self.graph.as_ref()?.resolve().expect("resolved when the job was parsed");
        let target = self.target_type.as_deref().and_then(|t| graph.node_type(t)).expect("checked with the job");
        Some((graph, target))
    }

    /// A typed graph: whether nodes of type `t` get rows (`node_types`, every type by default).
    pub fn has_rows(&self, graph: &TypedGraph, t: u8) -> bool {
        self.node_types.as_ref().is_none_or(|chosen| chosen.iter().any(|n| graph.node_type(n) == Some(t)))
    }

    pub fn check(&self) -> Result<(), JobError> {
        super::check_partition("infer", self.partition.as_deref())?;
        if self.batch_size == 0 || self.part_size_mb == 0 {
            return Err(JobError::invalid("infer", "batch_size and part_size_mb must be positive"));
        }
        if self.embedding == Some(0) {
            return Err(JobError::invalid("infer", "embedding names a layer, 1-based (1 is the first layer's output)"));
        }
        if self.pairs.is_some() != self.pairs_output.is_some() {
            return Err(JobError::invalid(
                "infer",
                "pairs and pairs_output go together: the candidates and where their scores go",
            ));
        }
        self.targets.check("infer")
    }
}
