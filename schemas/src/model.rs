//! The model contract between GraphTrainer and GraphInfer: what a model is (kind, sizes,
//! activation, the flatten settings its records had), written beside its weights as
//! `model-<run>.json`, so that inference needs nothing else.

use serde::{Deserialize, Serialize};

use crate::edge_stats::EdgeStats;
use crate::layers::Layers;
use crate::sampler::Sampler;
use crate::task::{Decoder, Task};
use crate::typed::GraphTypes;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Gcn,
    Sage,
    Gat,
    /// GINE (Hu et al. 2020): `h_v' = MLP((1 + eps) h_v + sum_u ReLU(h_u + W_e e_uv))`, eps = 0.
    Gine,
    /// R-GCN (Schlichtkrull et al. 2018), typed graphs only: a self weight and a weight per
    /// relation (or per relation a combination of shared bases) over each relation's mean.
    Rgcn,
}

impl crate::nodes::Precomputed {
    /// The model kind the features are for.
    pub fn model(self) -> ModelKind {
        match self {
            crate::nodes::Precomputed::Gcn => ModelKind::Gcn,
            crate::nodes::Precomputed::Sage => ModelKind::Sage,
        }
    }
}

impl ModelKind {
    /// Whether the kind's layers take edge features (GCN's normalization has no place for them).
    pub fn uses_edge_features(self) -> bool {
        self != ModelKind::Gcn
    }

    /// Whether the kind runs on a typed graph (its layers take a weight per relation): R-GCN,
    /// and SAGE as heterogeneous GraphSAGE.
    pub fn runs_typed(self) -> bool {
        matches!(self, ModelKind::Rgcn | ModelKind::Sage)
    }

    /// Whether the kind runs on a homogeneous graph: all but R-GCN.
    pub fn runs_plain(self) -> bool {
        self != ModelKind::Rgcn
    }

    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Gcn => "gcn",
            ModelKind::Sage => "sage",
            ModelKind::Gat => "gat",
            ModelKind::Gine => "gine",
            ModelKind::Rgcn => "rgcn",
        }
    }
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
    /// The last layer's width: the classes of a node model, the embedding width
    /// (`[train] embedding_dim`) of a link model.
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
    /// Width of the edge features the model's layers read (0: it reads none; GCN always 0).
    #[serde(default)]
    pub edge_dim: usize,
    /// Standardize each edge feature column with `edge_stats` before the layers read it.
    #[serde(default)]
    pub normalize_edge_features: bool,
    /// The record set's edge feature statistics (`crate::edge_stats`), kept so that GraphInfer
    /// standardizes edges as training did.
    #[serde(default)]
    pub edge_stats: Option<EdgeStats>,
    /// A typed model that standardizes edge features: each relation's statistics, in relation
    /// order (`None` for a relation whose features it does not read); empty otherwise. The
    /// widths its layers read are `types`' relations' `edge_dim`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relation_edge_stats: Vec<Option<EdgeStats>>,
    /// What the model learned: node classes (its last layer feeds a softmax or sigmoids) or
    /// links (its last layer is the embedding, `decoder` scores pairs of them).
    #[serde(default)]
    pub task: Task,
    /// Link models: how a pair is scored from its two embeddings (`None` for node models).
    #[serde(default)]
    pub decoder: Option<Decoder>,
    /// A typed model's node types and relations (its records' `GraphTypes`): each type's
    /// input is projected to `hidden` by a weight of its own, and the layers hold weights per
    /// relation (see `gnn::hetero`). `None`: a homogeneous model.
    #[serde(default)]
    pub types: Option<GraphTypes>,
    /// R-GCN's basis decomposition: each relation's weight is a combination of this many
    /// shared bases (0: a full weight per relation).
    #[serde(default)]
    pub bases: usize,
    /// GINE: each layer's MLP is [`ModelSpec::mlp_width`] units wide, at least `hidden`; `false`
    /// only in a model written before (issue 51), whose MLPs are as wide as their layer's output
    /// (the last layer's only `classes` wide). Trainers write `true` for every kind.
    #[serde(default)]
    pub wide_mlp: bool,
    /// Width of each node's learned embedding (`[train] learned_embedding_dim`; 0: none): the
    /// last `learned_embedding_dim` columns of layer 0's `input_dim`, after the node's
    /// features. The rows are a table beside the weights (`gnn::io`, parts of the model
    /// directory), not parameters of the flat vector.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub learned_embedding_dim: usize,
    /// Layers whose aggregation the input features hold already (0, or 1 for records over
    /// `[precompute]`'s `Â X`): the first layer is then dense (`Layers::dense_first`), and
    /// `layers` is the records' hops plus this.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub precomputed: usize,
    /// Seed of the initial weights.
    pub seed: u64,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl ModelSpec {
    /// The width of the node features the model reads: layer 0's input less the learned
    /// embedding.
    pub fn feature_dim(&self) -> usize {
        self.input_dim.saturating_sub(self.learned_embedding_dim)
    }

    /// Layer 0's input width: the features, or for a typed model its projections' `hidden`.
    pub fn layer_input(&self, layer: usize) -> usize {
        match (layer, &self.types, self.kind) {
            (0, None, _) => self.input_dim,
            (0, Some(_), _) => self.hidden,
            (_, _, ModelKind::Gat) => self.hidden * self.heads,
            _ => self.hidden,
        }
    }

    /// Layer `layer`'s output width: `classes` for the last layer, `hidden` before it (per head
    /// for GAT).
    pub fn layer_output(&self, layer: usize) -> usize {
        if layer + 1 == self.layers { self.classes } else { self.hidden }
    }

    /// GINE's MLP width in layer `layer` (`Linear(in, m) -> ReLU -> Linear(m, out)`): `m =
    /// max(hidden, out)`, so the last layer's MLP is `hidden` wide, not `classes`: a ReLU layer
    /// of `classes` units, fed only non-negative sums, dies whole early in training (issue 51,
    /// `docs/graphtrainer.md`). A model written before ([`ModelSpec::wide_mlp`] false): `out`.
    pub fn mlp_width(&self, layer: usize) -> usize {
        let out = self.layer_output(layer);
        if self.wide_mlp { out.max(self.hidden) } else { out }
    }

    /// The model's parameters counted from its sizes alone (each kind's weights and vectors,
    /// as `gnn` builds them; at most a few vectors more), `None` when it overflows: sizes read
    /// from a file are checked against the bytes that hold the weights before anything of
    /// that size is allocated (`gnn::io`; `gnn`'s tests hold the count to the built models).
    pub fn parameter_bound(&self) -> Option<u64> {
        let mut total = 0u64;
        let (relations, edge_sum, node_types) = match &self.types {
            Some(types) => {
                for t in &types.node_types {
                    total = total.checked_add((t.input_width() as u64 + 1).checked_mul(self.hidden as u64)?)?;
                }
                let edges = types.relations.iter().try_fold(0u64, |sum, r| sum.checked_add(r.edge_dim as u64))?;
                (types.relations.len() as u64, edges, types.node_types.len() as u64)
            }
            None => (0, 0, 0),
        };
        for l in 0..self.layers {
            let (input, output) = (self.layer_input(l) as u64, self.layer_output(l) as u64);
            let layer = self.layer_parameters(l, input, output, (relations, edge_sum, node_types))?;
            total = total.checked_add(layer)?;
        }
        if self.decoder == Some(Decoder::Mlp) {
            // W1 (d x d), b1 (d), w2 (d), b2.
            let d = self.classes as u64;
            total = total.checked_add(d.checked_mul(d)?.checked_add(2 * d + 1)?)?;
        }
        Some(total)
    }

    /// Layer `l`'s parameters, from `input` to `output` columns; a typed model's `relations`,
    /// the sum of their edge widths and its node types.
    fn layer_parameters(&self, l: usize, input: u64, output: u64, typed: (u64, u64, u64)) -> Option<u64> {
        let (relations, edge_sum, node_types) = typed;
        let e = self.edge_dim as u64;
        let product = |a: u64, b: u64| a.checked_mul(b);
        let weight = product(input, output)?;
        match self.kind {
            ModelKind::Gcn => weight.checked_add(output),
            ModelKind::Sage if self.types.is_some() => {
                let own = product(node_types, weight.checked_add(output)?)?;
                own.checked_add(product(relations, weight)?)?.checked_add(product(edge_sum, output)?)
            }
            ModelKind::Sage => product(weight, 2)?.checked_add(output)?.checked_add(product(e, output)?),
            ModelKind::Gat => {
                let heads = if l + 1 == self.layers { self.output_heads } else { self.heads } as u64;
                // Its weight's columns, two attention vectors and the bias (hidden layers
                // concatenate the heads); with edge features their projection and attention.
                let edge = product(e + u64::from(e > 0), output)?;
                let per_head = weight.checked_add(product(output, 3)?)?.checked_add(edge)?;
                product(heads, per_head)
            }
            ModelKind::Gine => {
                let m = self.mlp_width(l) as u64;
                let mlp = product(input, m)?.checked_add(product(m, output)?)?.checked_add(m + output)?;
                // The edge projection to the input's width, and its bias.
                mlp.checked_add(product(e + u64::from(e > 0), input)?)
            }
            ModelKind::Rgcn => {
                let bases = self.bases as u64;
                let relation_weights = match bases {
                    0 => product(relations, weight)?,
                    _ => product(bases, weight)?.checked_add(product(relations, bases)?)?,
                };
                weight.checked_add(output)?.checked_add(relation_weights)?.checked_add(product(edge_sum, output)?)
            }
        }
    }
}

/// `model-<run>.json`: the spec plus the flatten settings of the records the model was trained on.
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
    /// A typed model's records: each relation's fanouts in the recorded form (see `fanouts`),
    /// in relation order, so that inference samples each relation as the records did; empty for
    /// a homogeneous model.
    #[serde(default)]
    pub relation_fanouts: Vec<Vec<u32>>,
    /// A typed link model's relation (an index into `spec.types`' relations): candidate pairs
    /// are sources of its source type and destinations of its destination type. `None` for
    /// every other model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_relation: Option<u8>,
}

impl ModelMeta {
    /// The layer rule of the model's records (`fanouts` in its recorded form). A model over
    /// precomputed features has a dense first layer before these (`Layers::dense_first`).
    pub fn layers(&self) -> Layers {
        Layers::recorded(self.hops, &self.fanouts)
    }

    /// The layer rule of each relation of a typed model's records, in relation order (one
    /// rule, [`ModelMeta::layers`], for a homogeneous model).
    pub fn relation_layers(&self) -> Vec<Layers> {
        match &self.spec.types {
            None => vec![self.layers()],
            Some(_) => self.relation_fanouts.iter().map(|f| Layers::recorded(self.hops, f)).collect(),
        }
    }
}
