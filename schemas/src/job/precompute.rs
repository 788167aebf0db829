//! The `[precompute]` stage: the node table with every node's features replaced by a model's
//! first aggregation over every in-edge (GCN's `Â X`, or GraphSAGE's `[X | mean X]`), so that
//! records built over it need one hop fewer (DGL 0.3's and VR-GCN's preprocessing;
//! `docs/precompute.md`).

use serde::{Deserialize, Serialize};

use super::JobError;
use super::flatten::{DEFAULT_HUB_THRESHOLD, DEFAULT_PART_SIZE_MB};
use super::infer::DEFAULT_BATCH_SIZE;
use super::targets::Targets;
use crate::nodes::Precomputed;

/// The `[precompute]` table. `nodes`, `edges` and `output` are required; every other key takes
/// the `Default` below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrecomputeConfig {
    /// Node table, as in `[flatten]`: its features are multiplied; its ids, labels and splits
    /// are written again as they are.
    pub nodes: String,
    /// Edge table, as in `[flatten]`: its message-passing edges (split null or `train`) make
    /// the adjacency.
    pub edges: String,
    /// Output directory: a node table (`node_id`, `features`, `label`, `split`), parts and
    /// `_SUCCESS`.
    pub output: String,
    /// The model the features are for: `"gcn"` writes `Â X` (as wide as the features),
    /// `"sage"` writes `[X | mean X]` (each node's features, then the mean of its
    /// in-neighbors': twice as wide), GraphSAGE's first layer's inputs.
    #[serde(default)]
    pub model: Precomputed,
    /// Divide each feature row by its sum (clamped below at 1) before the product, as
    /// `[train] normalize_features` does (PyG's `NormalizeFeatures`, GCN's preprocessing): a
    /// model trained on the output then leaves `normalize_features` off.
    #[serde(default)]
    pub normalize_features: bool,
    /// A partition table `(node_id, part)` to route nodes by (as in `[flatten]`); the output
    /// is the same without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Rows per transform on the device, as in `[infer]`.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// A node with more in-edges than this has its sum split over salted reducers and merged
    /// in salt order (0: never), as in `[infer]`.
    #[serde(default = "default_hub_threshold")]
    pub hub_threshold: u64,
    /// A worker starts a new part file when its current one passes this size.
    #[serde(default = "default_part_size_mb")]
    pub part_size_mb: u64,
    /// Replace an output that already holds a finished run of this stage (never another kind
    /// of output: `tables::guard`).
    #[serde(default)]
    pub overwrite: bool,
    /// Every node gets a row; kept for the stage skeleton.
    #[serde(skip)]
    pub targets: Targets,
}

serde_defaults! {
    default_batch_size: usize = DEFAULT_BATCH_SIZE;
    default_hub_threshold: u64 = DEFAULT_HUB_THRESHOLD;
    default_part_size_mb: u64 = DEFAULT_PART_SIZE_MB;
}

impl Default for PrecomputeConfig {
    fn default() -> Self {
        PrecomputeConfig {
            nodes: String::new(),
            edges: String::new(),
            output: String::new(),
            model: Precomputed::Gcn,
            normalize_features: false,
            partition: None,
            batch_size: DEFAULT_BATCH_SIZE,
            hub_threshold: DEFAULT_HUB_THRESHOLD,
            part_size_mb: DEFAULT_PART_SIZE_MB,
            overwrite: false,
            targets: Targets::All,
        }
    }
}

impl PrecomputeConfig {
    pub fn check(&self) -> Result<(), JobError> {
        super::check_partition("precompute", self.partition.as_deref())?;
        if self.batch_size == 0 || self.part_size_mb == 0 {
            return Err(JobError::invalid("precompute", "batch_size and part_size_mb must be positive"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_checks() {
        let c: PrecomputeConfig = toml::from_str("nodes = \"n\"\nedges = \"e\"\noutput = \"o\"").unwrap();
        assert_eq!(
            c,
            PrecomputeConfig { nodes: "n".into(), edges: "e".into(), output: "o".into(), ..Default::default() }
        );
        assert!(c.check().is_ok());
        let zero = PrecomputeConfig { batch_size: 0, ..c.clone() };
        assert!(zero.check().unwrap_err().to_string().contains("batch_size"));
        let typo = toml::from_str::<PrecomputeConfig>("nodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nhops = 2");
        assert!(typo.unwrap_err().to_string().contains("hops"));
        let sage: PrecomputeConfig =
            toml::from_str("nodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nmodel = \"sage\"").unwrap();
        assert_eq!(sage.model, Precomputed::Sage);
        assert!(
            toml::from_str::<PrecomputeConfig>("nodes = \"n\"\nedges = \"e\"\noutput = \"o\"\nmodel = \"gat\"")
                .is_err()
        );
    }
}
