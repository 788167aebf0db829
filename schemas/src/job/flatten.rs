//! The `[flatten]` stage: k-hop records for every target node.

use super::JobError;

use serde::{Deserialize, Serialize};

use super::changes::Arrival;
use super::graph::{GraphConfig, TypedGraph, section_graph};
use super::targets::Targets;
use crate::layers::Layers;
use crate::sampler::Sampler;
use crate::task::{DEFAULT_NEGATIVES, LinkSpec, NegativeSampler, Task};

/// The most hops a record can serve: `edge_layers` is a 32-bit mask.
pub const MAX_HOPS: usize = 32;

/// k, the hops of a record (and the layers of the models it serves), when a job sets none.
pub const DEFAULT_HOPS: usize = 2;
/// In-edges kept per node at every hop when a job lists no `fanouts`.
pub const DEFAULT_FANOUT: u32 = 10;
/// The sampler when a job names none.
pub const DEFAULT_SAMPLER: Sampler = Sampler::Uniform;
/// In-edges past which a node is re-indexed over several reducers, when a job sets none.
pub const DEFAULT_HUB_THRESHOLD: u64 = 100_000;
/// Targets per worker per batch when a job sets none.
pub const DEFAULT_BATCH_SIZE: usize = 2048;
/// Batches a worker lets run at once when a job sets none.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 2;
/// MiB past which a worker starts a new part file, when a job sets none.
pub const DEFAULT_PART_SIZE_MB: u64 = 256;
/// The most negatives a link record holds (each is one more k-hop neighborhood in it).
pub const MAX_NEGATIVES: usize = 1024;

/// The `[flatten]` table. The paths are required; every other key takes the `Default` below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlattenConfig {
    /// Node table: a Parquet file or a directory (prefix) of them; local path or URI. Empty
    /// (absent) when the job's `[graph]` names a typed graph.
    #[serde(default)]
    pub nodes: String,
    /// Edge table, as `nodes`.
    #[serde(default)]
    pub edges: String,
    /// A typed graph: the node type whose nodes get records (required with `[graph]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// The job's `[graph]`, set by `JobFile::parse` (a typed graph instead of `nodes` and
    /// `edges`); kept in the manifest's settings.
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphConfig>,
    /// A partition table (`[partition]`'s output: `node_id`, `part`) whose parts own the nodes
    /// it names: part `p` of `P` on worker `p * workers / P`, every other node at its hash
    /// owner, and each worker's nodes laid out part by part. The outputs are the same as
    /// without it; fewer edges cross workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Output directory for record part files and `_SUCCESS`.
    pub output: String,
    /// k: the number of hops, and so the number of GNN layers the records serve.
    #[serde(default = "default_hops")]
    pub hops: usize,
    /// In-edges kept per node at each hop, nearest hop first. Default: `DEFAULT_FANOUT` per hop.
    #[serde(default)]
    pub fanouts: Option<Vec<u32>>,
    #[serde(default = "default_sampler")]
    pub sampler: Sampler,
    #[serde(default)]
    pub seed: u64,
    /// A node with more in-edges than this has them spread over several reducers by a salted
    /// key, sampled there in part and merged. 0 turns re-indexing off.
    #[serde(default = "default_hub_threshold")]
    pub hub_threshold: u64,
    #[serde(default)]
    pub targets: Targets,
    /// Targets per worker per batch. Memory is bounded by `batch_size * max_in_flight` records
    /// per worker, whatever the size of the whole output.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Batches a worker lets run at once.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// A worker starts a new part file when its current one passes this size.
    #[serde(default = "default_part_size_mb")]
    pub part_size_mb: u64,
    /// Replace an output that already holds a finished run of this stage. Without it such a
    /// job fails and leaves the output as it was; another kind of output is never replaced
    /// (`tables::guard`).
    #[serde(default)]
    pub overwrite: bool,
    /// Refresh the output instead of recomputing it: over a version this stage committed with
    /// the same settings, recompute only the records today's graph can change and carry the
    /// others over (`docs/refresh.md`). A run with no such version runs in full, and says why.
    /// Implies `overwrite`; every run with it keeps its nodes' digests beside the output, in
    /// `.<name>.graphflat-state/`.
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
    /// `node`: one record per target node. `link`: one record per supervision edge (an edge
    /// whose `split` is train, valid or test), holding the neighborhoods of its source, its
    /// destination and its negatives.
    #[serde(default)]
    pub task: Task,
    /// Link task: negative destinations drawn per positive.
    #[serde(default = "default_negatives")]
    pub negatives: usize,
    /// Link task: how negatives are drawn.
    #[serde(default)]
    pub negative_sampler: NegativeSampler,
    /// Link task: hold each training edge (both directions) out of its own record's
    /// message-passing edges, so the model cannot read the answer.
    #[serde(default)]
    pub disjoint_train: bool,
    /// Link task: the share of supervision edges that get a record, each kept by a hash of
    /// (seed, src, dst).
    #[serde(default = "default_supervision_fraction")]
    pub supervision_fraction: f64,
    /// Link task on a typed graph: the relation (of `[graph.relations]`) whose table's edges
    /// with a split are the supervision edges; its source type is the records' target type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_relation: Option<String>,
    /// Node records list every in-neighbor of their root (`root_neighbors`, 8 bytes an
    /// in-edge before compression), which control-variate training reads
    /// (`docs/control-variates.md`). The flatten keeps every in-edge of each node in memory, as
    /// `sampler = "all"` does; the records' sampled edges are the same as without it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_neighbors: bool,
}

serde_defaults! {
    default_hops: usize = DEFAULT_HOPS;
    default_sampler: Sampler = DEFAULT_SAMPLER;
    default_hub_threshold: u64 = DEFAULT_HUB_THRESHOLD;
    default_batch_size: usize = DEFAULT_BATCH_SIZE;
    default_max_in_flight: usize = DEFAULT_MAX_IN_FLIGHT;
    default_part_size_mb: u64 = DEFAULT_PART_SIZE_MB;
    default_negatives: usize = DEFAULT_NEGATIVES;
    default_supervision_fraction: f64 = 1.0;
}

impl Default for FlattenConfig {
    /// Every knob's default, with empty paths: a job must name its tables and output.
    fn default() -> Self {
        FlattenConfig {
            nodes: String::new(),
            edges: String::new(),
            target_type: None,
            graph: None,
            partition: None,
            output: String::new(),
            hops: DEFAULT_HOPS,
            fanouts: None,
            sampler: DEFAULT_SAMPLER,
            seed: 0,
            hub_threshold: DEFAULT_HUB_THRESHOLD,
            targets: Targets::All,
            batch_size: DEFAULT_BATCH_SIZE,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            part_size_mb: DEFAULT_PART_SIZE_MB,
            overwrite: false,
            incremental: false,
            keep_graph: false,
            delta_nodes: None,
            delta_edges: None,
            task: Task::Node,
            negatives: DEFAULT_NEGATIVES,
            negative_sampler: NegativeSampler::Uniform,
            disjoint_train: false,
            supervision_fraction: 1.0,
            link_relation: None,
            root_neighbors: false,
        }
    }
}

impl FlattenConfig {
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

    pub fn check(&self) -> Result<(), JobError> {
        super::check_partition("flatten", self.partition.as_deref())?;
        if self.hops == 0 || self.hops > MAX_HOPS {
            return Err(JobError::invalid(
                "flatten",
                format!("hops must be between 1 and {MAX_HOPS}, found {}", self.hops),
            ));
        }
        if let Some(fanouts) = &self.fanouts {
            if fanouts.len() != self.hops {
                return Err(JobError::invalid(
                    "flatten",
                    format!(
                        "fanouts lists {} values for {} hops (one per hop, nearest first)",
                        fanouts.len(),
                        self.hops
                    ),
                ));
            }
            if fanouts.contains(&0) {
                return Err(JobError::invalid(
                    "flatten",
                    "a fanout of 0 would cut the neighborhood; use sampler = \"all\" for every edge",
                ));
            }
        }
        if self.batch_size == 0 || self.max_in_flight == 0 || self.part_size_mb == 0 {
            return Err(JobError::invalid("flatten", "batch_size, max_in_flight and part_size_mb must be positive"));
        }
        self.targets.check("flatten")?;
        self.check_root_neighbors()?;
        self.check_link()
    }

    /// `root_neighbors` serves control variates over node records, each day in full.
    fn check_root_neighbors(&self) -> Result<(), JobError> {
        let refused = match () {
            _ if !self.root_neighbors => return Ok(()),
            _ if self.task == Task::Link => "link records (task = \"link\")",
            _ if self.incremental => "a refresh (incremental = true): run it in full",
            _ => return Ok(()),
        };
        Err(JobError::invalid("flatten", format!("root_neighbors is for node records, not for {refused}")))
    }

    /// A link job's records are its supervision edges, kept in the share asked for; the link
    /// keys on a node job are a forgotten `task = "link"`.
    fn check_link(&self) -> Result<(), JobError> {
        let link_keys = [
            ("negatives", self.negatives != DEFAULT_NEGATIVES),
            ("negative_sampler", self.negative_sampler != NegativeSampler::default()),
            ("disjoint_train", self.disjoint_train),
            ("supervision_fraction", self.supervision_fraction != 1.0),
            ("link_relation", self.link_relation.is_some()),
        ];
        if let (Task::Node, Some((key, _))) = (self.task, link_keys.iter().find(|(_, set)| *set)) {
            return Err(JobError::invalid(
                "flatten",
                format!(
                    "{key} is a key of the link task, and this job flattens node records (task = \"node\"); add task = \"link\""
                ),
            ));
        }
        if self.negatives > MAX_NEGATIVES {
            return Err(JobError::invalid(
                "flatten",
                format!(
                    "negatives = {}: a link record holds a neighborhood per negative, so at most {MAX_NEGATIVES} \
                     (in_batch_negatives in [train] adds more at no cost to the records)",
                    self.negatives
                ),
            ));
        }
        if self.task == Task::Link && self.targets != Targets::All {
            return Err(JobError::invalid(
                "flatten",
                "targets chooses nodes; a link job's records are its supervision edges \
                 (the edge table's split column; supervision_fraction samples them)",
            ));
        }
        let f = self.supervision_fraction;
        if !(f > 0.0 && f <= 1.0) {
            return Err(JobError::invalid("flatten", format!("supervision_fraction must be in (0, 1], found {f}")));
        }
        Ok(())
    }

    /// Takes the job's `[graph]` (or its absence): a typed graph replaces `nodes` and `edges`
    /// and needs a `target_type` of its types; a homogeneous job names both tables.
    pub fn set_graph(&mut self, graph: Option<&GraphConfig>) -> Result<(), JobError> {
        let bad = |problem: String| Err(JobError::invalid("flatten", problem));
        if graph.is_some() && self.root_neighbors {
            return bad(
                "root_neighbors is for a homogeneous graph's node records, and the job has a typed [graph]".into()
            );
        }
        match graph {
            Some(graph) if self.task == Task::Link => {
                let graph = graph.resolve()?;
                let (relation, target) = (self.link_relation.as_deref(), self.target_type.as_deref());
                self.target_type = Some(super::graph::link_source_type("flatten", &graph, relation, target)?);
            }
            None if self.link_relation.is_some() => {
                return bad("link_relation names a relation of [graph], and the job has no [graph]".into());
            }
            _ => {}
        }
        self.arrival().check("flatten", graph.is_some())?;
        // A delta day's tables are the kept graph's.
        let tables = match self.arrival().is_delta() {
            true => ("kept", "kept"),
            false => (self.nodes.as_str(), self.edges.as_str()),
        };
        let Some(resolved) = section_graph("flatten", tables, self.target_type.as_deref(), graph)? else {
            return Ok(());
        };
        if let Some(r) = resolved.relations.iter().find(|r| r.fanouts.as_ref().is_some_and(|f| f.len() != self.hops)) {
            return bad(format!(
                "relation {} lists {} fanouts for {} hops (one per hop, nearest first)",
                r.name,
                r.fanouts.as_ref().map_or(0, Vec::len),
                self.hops
            ));
        }
        self.graph = graph.cloned();
        Ok(())
    }

    /// A typed link job's relation, numbered (`None`: a node job, or a homogeneous graph).
    pub fn link_relation_index(&self) -> Option<u8> {
        let (graph, _) = self.typed()?;
        let name = self.link_relation.as_deref()?;
        graph.relations.iter().position(|r| r.name == name).map(|r| r as u8)
    }

    /// The typed graph this job reads, numbered, and its target type (`None`: a homogeneous
    /// graph).
    pub fn typed(&self) -> Option<(TypedGraph, u8)> {
        let graph = self.graph.as_ref()?.resolve().expect("resolved when the job was parsed");
        let target = self.target_type.as_deref().and_then(|t| graph.node_type(t)).expect("checked with the job");
        Some((graph, target))
    }

    /// The link task's settings; `None` for the node task.
    pub fn link(&self) -> Option<LinkSpec> {
        (self.task == Task::Link).then_some(LinkSpec {
            negatives: self.negatives,
            negative_sampler: self.negative_sampler,
            disjoint_train: self.disjoint_train,
            supervision_fraction: self.supervision_fraction,
            relation: self.link_relation_index(),
        })
    }

    /// The layer rule of this job's records: every in-edge at every hop for the `all`
    /// sampler, else each hop's fanout.
    pub fn layers(&self) -> Layers {
        Layers::recorded(self.hops, &self.recorded_fanouts())
    }

    /// A typed graph's relation's recorded fanouts: its own `fanouts` (in `[graph]`) or the
    /// job's (every edge with the `all` sampler either way).
    pub fn relation_fanouts(&self, own: Option<&[u32]>) -> Vec<u32> {
        match (self.sampler, own) {
            (Sampler::All, _) => Vec::new(),
            (_, Some(f)) => f.to_vec(),
            (_, None) => self.recorded_fanouts(),
        }
    }

    /// The fanouts recorded in the output's metadata, nearest hop first (empty for `all`: see
    /// `schemas::layers` for the recorded form).
    pub fn recorded_fanouts(&self) -> Vec<u32> {
        match (self.sampler, &self.fanouts) {
            (Sampler::All, _) => Vec::new(),
            (_, Some(f)) => f.clone(),
            (_, None) => vec![DEFAULT_FANOUT; self.hops],
        }
    }
}
