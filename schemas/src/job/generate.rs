//! The `[generate]` stage (also `graphflat generate`, whose flags default to the same constants):
//! a synthetic graph with power-law in-degrees, real hubs, planted communities,
//! label-correlated node features and, on request, label-correlated edge features.

use super::JobError;

use serde::{Deserialize, Serialize};

/// Nodes of the graph when a job sets none.
pub const DEFAULT_NODES: u64 = 10_000;
/// In-edges per node on average when a job sets none.
pub const DEFAULT_AVG_DEGREE: u64 = 10;
/// Width of the feature vectors when a job sets none.
pub const DEFAULT_FEATURE_DIM: usize = 32;
/// Planted communities, and so label classes, when a job sets none.
pub const DEFAULT_CLASSES: usize = 8;
/// Zipf exponent of the in-degrees when a job sets none.
pub const DEFAULT_SKEW: f64 = 0.9;
/// Share of a node's in-edges from its own community when a job sets none.
pub const DEFAULT_HOMOPHILY: f64 = 0.8;
/// Scale of the class centroids in the features when a job sets none.
pub const DEFAULT_FEATURE_SIGNAL: f64 = 0.5;
/// Width of the edge features when a job sets none: 0, an edge table without features.
pub const DEFAULT_EDGE_FEATURE_DIM: usize = 0;
/// Scale of the per-class edge centroids in the edge features when a job sets none.
pub const DEFAULT_EDGE_FEATURE_SIGNAL: f64 = 1.0;
/// Share of nodes in the train split when a job sets none.
pub const DEFAULT_TRAIN_FRACTION: f64 = 0.5;
/// Share of nodes in the valid split when a job sets none; the rest is test.
pub const DEFAULT_VALID_FRACTION: f64 = 0.25;
/// The generator's seed when a job sets none.
pub const DEFAULT_SEED: u64 = 0;

/// The `[generate]` table. The output is required; every other key takes the `Default` below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateConfig {
    /// Directory that receives `nodes/` and `edges/`.
    pub output: String,
    #[serde(default = "default_nodes")]
    pub nodes: u64,
    /// Edges on average per node.
    #[serde(default = "default_avg_degree")]
    pub avg_degree: u64,
    #[serde(default = "default_feature_dim")]
    pub feature_dim: usize,
    #[serde(default = "default_classes")]
    pub classes: usize,
    /// Zipf exponent of the in-degree distribution; larger makes bigger hubs.
    #[serde(default = "default_skew")]
    pub skew: f64,
    /// Fraction of a node's in-edges that come from its own community.
    #[serde(default = "default_homophily")]
    pub homophily: f64,
    /// Strength of the class signal in the features (noise has unit variance).
    #[serde(default = "default_feature_signal")]
    pub feature_signal: f64,
    /// Width of the edge features (0: the edge table has no `features` column). Edge `u -> v`
    /// gets `edge_feature_signal` times a centroid of `v`'s class plus unit normal noise, so
    /// with `feature_signal = 0` and `homophily = 0` only the edges tell the classes apart.
    #[serde(default = "default_edge_feature_dim")]
    pub edge_feature_dim: usize,
    #[serde(default = "default_edge_feature_signal")]
    pub edge_feature_signal: f64,
    /// Fractions of nodes in train and valid; the rest is test.
    #[serde(default = "default_train_fraction")]
    pub train_fraction: f64,
    #[serde(default = "default_valid_fraction")]
    pub valid_fraction: f64,
    /// Multi-hot targets (`list<float32>` labels) instead of class ids: a node's community, and
    /// for even communities the next one too.
    #[serde(default)]
    pub multi_label: bool,
    /// A typed graph instead (users, items and shops; four relations; see
    /// `graphflat::hetero`): `<output>/nodes/<type>/` and `<output>/edges/<relation>/`.
    #[serde(default)]
    pub hetero: bool,
    /// With `hetero`: also `<output>/erased/nodes/` and `<output>/erased/edges/`, the same graph
    /// with its types and relations erased (one id space, features zero-padded to the widest
    /// type, every edge in both directions): the baseline a typed model must beat.
    #[serde(default)]
    pub erased: bool,
    /// With `hetero`: the node types whose tables are written without a `features` column
    /// (`["user"]`: featureless users, who need learned embeddings to train on).
    #[serde(default)]
    pub featureless: Vec<String>,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Replace the tables of an earlier `generate` there (never another command's or stage's
    /// output: `tables::guard`).
    #[serde(default)]
    pub overwrite: bool,
}

serde_defaults! {
    default_nodes: u64 = DEFAULT_NODES;
    default_avg_degree: u64 = DEFAULT_AVG_DEGREE;
    default_feature_dim: usize = DEFAULT_FEATURE_DIM;
    default_classes: usize = DEFAULT_CLASSES;
    default_skew: f64 = DEFAULT_SKEW;
    default_homophily: f64 = DEFAULT_HOMOPHILY;
    default_feature_signal: f64 = DEFAULT_FEATURE_SIGNAL;
    default_edge_feature_dim: usize = DEFAULT_EDGE_FEATURE_DIM;
    default_edge_feature_signal: f64 = DEFAULT_EDGE_FEATURE_SIGNAL;
    default_train_fraction: f64 = DEFAULT_TRAIN_FRACTION;
    default_valid_fraction: f64 = DEFAULT_VALID_FRACTION;
    default_seed: u64 = DEFAULT_SEED;
}

impl Default for GenerateConfig {
    /// Every knob's default, with an empty output: a job must name it (see `with_output`).
    fn default() -> Self {
        GenerateConfig {
            output: String::new(),
            nodes: DEFAULT_NODES,
            avg_degree: DEFAULT_AVG_DEGREE,
            feature_dim: DEFAULT_FEATURE_DIM,
            classes: DEFAULT_CLASSES,
            skew: DEFAULT_SKEW,
            homophily: DEFAULT_HOMOPHILY,
            feature_signal: DEFAULT_FEATURE_SIGNAL,
            edge_feature_dim: DEFAULT_EDGE_FEATURE_DIM,
            edge_feature_signal: DEFAULT_EDGE_FEATURE_SIGNAL,
            train_fraction: DEFAULT_TRAIN_FRACTION,
            valid_fraction: DEFAULT_VALID_FRACTION,
            multi_label: false,
            erased: false,
            hetero: false,
            featureless: Vec::new(),
            seed: DEFAULT_SEED,
            overwrite: false,
        }
    }
}

impl GenerateConfig {
    /// Defaults for everything but the output directory.
    pub fn with_output(output: impl Into<String>) -> Self {
        GenerateConfig { output: output.into(), ..GenerateConfig::default() }
    }

    pub fn check(&self) -> Result<(), JobError> {
        if self.nodes < 2 || self.avg_degree == 0 || self.feature_dim == 0 || self.classes < 2 {
            return Err(JobError::invalid(
                "generate",
                "needs nodes >= 2, avg_degree >= 1, feature_dim >= 1, classes >= 2",
            ));
        }
        if !((0.0..=1.0).contains(&self.homophily) && self.skew.is_finite() && self.skew > 0.0) || self.skew == 1.0 {
            return Err(JobError::invalid(
                "generate",
                "homophily must be in [0, 1] and skew positive (and not exactly 1)",
            ));
        }
        if !(0.0..=1.0).contains(&self.train_fraction)
            || !(0.0..=1.0).contains(&self.valid_fraction)
            || self.train_fraction + self.valid_fraction > 1.0
            || !self.feature_signal.is_finite()
        {
            return Err(JobError::invalid("generate", "train_fraction + valid_fraction must be within [0, 1]"));
        }
        if !self.edge_feature_signal.is_finite() {
            return Err(JobError::invalid("generate", "edge_feature_signal must be finite"));
        }
        if !self.featureless.is_empty() && !self.hetero {
            return Err(JobError::invalid(
                "generate",
                "featureless is a key of hetero = true (node types whose tables have no features)",
            ));
        }
        if self.erased && !self.hetero {
            return Err(JobError::invalid(
                "generate",
                "erased is a key of hetero = true (the typed graph's erased view)",
            ));
        }
        Ok(())
    }
}
