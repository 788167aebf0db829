//! The model contract between GraphTrainer and GraphInfer: what a model is (kind, sizes,
//! activation, the flatten settings its records had), written beside its weights as
//! `model.json`, so that inference needs nothing else.

use serde::{Deserialize, Serialize};

use crate::job::Sampler;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Gcn,
    Sage,
    Gat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    Relu,
    Elu,
}

/// The shape of a model: enough to rebuild it and load its weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub kind: ModelKind,
    pub input_dim: usize,
    pub hidden: usize,
    pub classes: usize,
    /// k: one layer per hop of the records.
    pub layers: usize,
    /// GAT attention heads of the hidden layers (concatenated); 1 otherwise.
    pub heads: usize,
    /// GAT attention heads of the last layer (averaged); 1 otherwise.
    pub output_heads: usize,
    pub activation: Activation,
    /// Divide each input feature row by its sum clamped at 1 (PyG's NormalizeFeatures).
    pub normalize_features: bool,
    /// Multi-hot targets: one independent sigmoid per class (binary cross-entropy, micro-F1)
    /// instead of a softmax over classes.
    #[serde(default)]
    pub multi_label: bool,
    /// Seed of the initial weights.
    pub seed: u64,
}

/// `model.json`: the spec plus the flatten settings of the records the model was trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMeta {
    pub format: u32,
    pub spec: ModelSpec,
    pub hops: usize,
    /// Nearest hop first; empty when records held every edge.
    pub fanouts: Vec<u32>,
    pub sampler: Sampler,
    pub flatten_seed: u64,
    pub parameters: usize,
}
