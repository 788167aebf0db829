//! The `[partition]` stage: an owner for every node that keeps most edges inside one owner
//! (DistDGL's locality), computed on the job's cluster, as a table `(node_id, part)` that
//! `[flatten]` and `[infer]` can read as their owner map.

use serde::{Deserialize, Serialize};

use super::JobError;
use super::flatten::DEFAULT_PART_SIZE_MB;
use super::graph::{GraphConfig, TypedGraph};
use super::targets::Targets;

/// The largest part's weight against the mean a job may ask for when it sets none: METIS's
/// default `ufactor` (30, that is 1.03).
pub const DEFAULT_BALANCE: f64 = 1.03;
/// Label-propagation rounds per level, coarsening and refining.
pub const DEFAULT_ROUNDS: usize = 8;
/// The coarsening stops once the graph has at most this many nodes; that graph is partitioned
/// on one worker.
pub const DEFAULT_COARSE_NODES: u64 = 16_384;
pub const DEFAULT_SEED: u64 = 0;
/// The most parts a job may ask for.
pub const MAX_PARTS: usize = 1 << 16;

/// The `[partition]` table. The paths are required (or the job's `[graph]`); every other key
/// takes the `Default` below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionConfig {
    /// Node table, as in `[flatten]`; empty when the job's `[graph]` names a typed graph.
    #[serde(default)]
    pub nodes: String,
    /// Edge table, as in `[flatten]`: its message-passing edges (split null or `train`) are
    /// the edges the partition keeps inside parts.
    #[serde(default)]
    pub edges: String,
    /// The job's `[graph]`, set by `JobFile::parse`; every relation is partitioned over.
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphConfig>,
    /// Output directory: the table `(node_id, part)`, parts and `_SUCCESS`.
    pub output: String,
    /// How many parts (default: the job's workers in all, processes times workers).
    #[serde(default)]
    pub parts: Option<usize>,
    /// The largest part may hold at most `balance` times the mean number of nodes.
    #[serde(default = "default_balance")]
    pub balance: f64,
    /// Label-propagation rounds per level.
    #[serde(default = "default_rounds")]
    pub rounds: usize,
    /// The coarsening stops at this many nodes (at least 8 a part), which one worker
    /// partitions.
    #[serde(default = "default_coarse_nodes")]
    pub coarse_nodes: u64,
    /// The seed of every tie and of the order nodes move in.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// A worker starts a new part file when its current one passes this size.
    #[serde(default = "default_part_size_mb")]
    pub part_size_mb: u64,
    /// Replace an output that already holds a finished run of this stage (never another kind
    /// of output: `tables::guard`).
    #[serde(default)]
    pub overwrite: bool,
    /// Every node is partitioned; kept for the stage skeleton.
    #[serde(skip)]
    pub targets: Targets,
}

serde_defaults! {
    default_balance: f64 = DEFAULT_BALANCE;
    default_rounds: usize = DEFAULT_ROUNDS;
    default_coarse_nodes: u64 = DEFAULT_COARSE_NODES;
    default_seed: u64 = DEFAULT_SEED;
    default_part_size_mb: u64 = DEFAULT_PART_SIZE_MB;
}

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            nodes: String::new(),
            edges: String::new(),
            graph: None,
            output: String::new(),
            parts: None,
            balance: DEFAULT_BALANCE,
            rounds: DEFAULT_ROUNDS,
            coarse_nodes: DEFAULT_COARSE_NODES,
            seed: DEFAULT_SEED,
            part_size_mb: DEFAULT_PART_SIZE_MB,
            overwrite: false,
            targets: Targets::All,
        }
    }
}

impl PartitionConfig {
    /// Keeps the job's `[graph]` (a typed graph is partitioned over all its relations), or
    /// checks that the section names its own tables.
    pub fn set_graph(&mut self, graph: Option<&GraphConfig>) -> Result<(), JobError> {
        let bad = |problem: &str| Err(JobError::invalid("partition", problem));
        match graph {
            None if self.nodes.is_empty() || self.edges.is_empty() => {
                bad("names no nodes and edges tables (nor does the job have a [graph])")
            }
            Some(_) if !self.nodes.is_empty() || !self.edges.is_empty() => {
                bad("names nodes and edges, and the job has a [graph]: a typed graph's tables are in [graph]")
            }
            _ => {
                self.graph = graph.cloned();
                Ok(())
            }
        }
    }

    /// The typed graph this job partitions, numbered (`None`: a homogeneous graph). Its
    /// "target" is type 0: every type's nodes are partitioned alike.
    pub fn typed(&self) -> Option<(TypedGraph, u8)> {
        let graph = self.graph.as_ref()?.resolve().expect("resolved when the job was parsed");
        Some((graph, 0))
    }

    /// The parts of a cluster of `workers` workers in all.
    pub fn parts_for(&self, workers: usize) -> usize {
        self.parts.unwrap_or(workers)
    }

    pub fn check(&self) -> Result<(), JobError> {
        let bad = |problem: String| Err(JobError::invalid("partition", problem));
        if self.parts.is_some_and(|p| p == 0 || p > MAX_PARTS) {
            return bad(format!("parts = {}: from 1 to {MAX_PARTS}", self.parts.unwrap_or(0)));
        }
        if !(self.balance.is_finite() && (1.0..=100.0).contains(&self.balance)) {
            return bad(format!(
                "balance = {}: the largest part against the mean, from 1.0 (exact) to 100",
                self.balance
            ));
        }
        if self.rounds == 0 || self.rounds > 1000 {
            return bad(format!("rounds = {}: from 1 to 1000", self.rounds));
        }
        if self.coarse_nodes < 2 || self.part_size_mb == 0 {
            return bad("coarse_nodes must be at least 2 and part_size_mb positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_checks() {
        let c: PartitionConfig = toml::from_str("nodes = \"n\"\nedges = \"e\"\noutput = \"o\"").unwrap();
        assert_eq!(
            c,
            PartitionConfig { nodes: "n".into(), edges: "e".into(), output: "o".into(), ..Default::default() }
        );
        assert_eq!(c.parts_for(6), 6);
        assert!(c.check().is_ok());
        for bad in ["parts = 0", "balance = 0.9", "balance = nan", "rounds = 0", "coarse_nodes = 1"] {
            let c: PartitionConfig =
                toml::from_str(&format!("nodes = \"n\"\nedges = \"e\"\noutput = \"o\"\n{bad}")).unwrap();
            assert!(c.check().is_err(), "{bad}");
        }
    }
}
