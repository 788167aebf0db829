//! The `[train]` stage: a GNN on GraphFlat's records, with a parameter server.

use super::JobError;

use serde::{Deserialize, Serialize};

use super::device::{Aggregation, DEFAULT_DEVICE, DeviceKind};
use crate::model::{Activation, ModelKind};
use crate::task::{BatchNegatives, Decoder, NegativeSampler, Task};

/// The model when a job names none.
pub const DEFAULT_MODEL: ModelKind = ModelKind::Gcn;
/// The widest hidden layer or embedding a job may ask for (a Cora-sized input at this width is
/// 23M parameters; a typo like 100000000 would be gigabytes before the first step).
pub const MAX_WIDTH: usize = 16_384;
/// The most classes a node model's head has: class ids are below it. (A label of 2^62 would
/// otherwise size the output layer.)
pub const MAX_CLASSES: usize = 1 << 20;
/// The largest in-batch negative grid, in floats (1 GiB; see [`TrainConfig::check`]).
pub const MAX_GRID_FLOATS: u128 = 1 << 28;
/// The most bases an R-GCN layer may combine its relation weights from.
pub const MAX_BASES: usize = 255;
/// Width of the hidden layers when a job sets none.
pub const DEFAULT_HIDDEN: usize = 16;
/// GAT attention heads of the hidden layers when a job sets none.
pub const DEFAULT_HEADS: usize = 8;
/// GAT attention heads of the last layer when a job sets none.
pub const DEFAULT_OUTPUT_HEADS: usize = 1;
/// Dropout on every layer's input when a job sets none.
pub const DEFAULT_DROPOUT: f32 = 0.5;
/// The hidden layers' activation when a job names none.
pub const DEFAULT_ACTIVATION: Activation = Activation::Relu;
/// Epochs when a job sets none (fewer with `patience`).
pub const DEFAULT_EPOCHS: usize = 200;
/// Records per step per worker when a job sets none.
pub const DEFAULT_BATCH_SIZE: usize = 512;
/// The optimizer when a job names none.
pub const DEFAULT_OPTIMIZER: OptimizerKind = OptimizerKind::Adam;
/// The learning rate when a job sets none.
pub const DEFAULT_LR: f32 = 0.01;
/// L2 weight decay of the node task when a job sets none: Kipf and Welling's setting for
/// node classification.
pub const DEFAULT_NODE_WEIGHT_DECAY: f32 = 5e-4;
/// L2 weight decay of the link task when a job sets none: none, as PyG's link recipe (with
/// 5e-4 its Cora AUC falls from 0.90 to 0.74: the decay pulls every embedding towards 0, and a
/// dot product of small embeddings cannot tell edges apart).
pub const DEFAULT_LINK_WEIGHT_DECAY: f32 = 0.0;
/// Early stopping of the link task when a job sets none: 10 epochs without a better validation
/// AUC. A link model overfits its training edges after a few hundred steps (PyG's full-batch
/// recipe on Cora too: test AUC 0.911 after 100 steps, 0.858 after 1000), and a record epoch
/// is many steps (17 on Cora at 512 records a step), so the model written is the best
/// validation epoch's. The node task does not stop unless asked (0).
pub const DEFAULT_LINK_PATIENCE: usize = 10;
/// The learning rate's factor every `lr_step_epochs` when a job sets none: 1, no decay.
pub const DEFAULT_LR_GAMMA: f32 = 1.0;
/// Whether layer l computes only the nodes within k - l hops, when a job does not say.
pub const DEFAULT_PRUNE: bool = true;
/// Batches prepared ahead of compute when a job sets none.
pub const DEFAULT_PREFETCH: usize = 4;
/// MiB of decoded records a process keeps between epochs when a job sets none.
pub const DEFAULT_CACHE_MB: u64 = 512;
/// MiB of the training shuffle buffer per worker when a job sets none.
pub const DEFAULT_SHUFFLE_MB: u64 = 64;
/// The parameter server's mode when a job names none.
pub const DEFAULT_MODE: PsMode = PsMode::Sync;
/// `async` only: steps a worker may run ahead of the slowest, when a job sets none.
pub const DEFAULT_STALENESS: usize = 2;

/// How the parameter server applies gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PsMode {
    /// Every step averages all workers' gradients: the same result as one worker on the
    /// combined batch.
    Sync,
    /// Each worker's gradient is applied as soon as it arrives; a worker runs at most
    /// `staleness` steps ahead of the last step every worker has finished. Not deterministic.
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    Adam,
    Sgd,
}

/// The precision full-graph training's halo rows and gradients cross at (`halo_precision`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HaloPrecision {
    /// As computed: the exact exchange.
    #[default]
    F32,
    /// bfloat16 (`f32`'s range, 8 significant bits): half the bytes.
    Bf16,
}

/// The optimizer of the learned embedding rows: each step updates only the rows it touched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SparseOptimizerKind {
    /// Lazy Adam (PyTorch's `SparseAdam`): a touched row's moments and values move; the bias
    /// correction counts the steps that touched the row's shard.
    #[default]
    Adam,
    /// Row-wise Adagrad (PyTorch-BigGraph's): one accumulated mean square per row, 4 bytes a
    /// row of state instead of Adam's `8 D`.
    Adagrad,
}

/// The learned embedding table's settings, from the `learned_embedding_*` keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedConfig {
    pub dim: usize,
    pub optimizer: SparseOptimizerKind,
    /// `None`: the model's `lr`.
    pub lr: Option<f32>,
    pub init_std: f32,
    pub weight_decay: f32,
}

/// A learned row's initial spread when a job sets none: `N(0, 1)`, as `torch.nn.Embedding`.
pub const DEFAULT_LEARNED_INIT_STD: f32 = 1.0;

/// The `[train]` table. The paths are required; every other key takes the `Default` below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// A finished flatten output (with `_SUCCESS`): a local path or a URI, read through
    /// object_store as GraphFlat writes it. Empty when the job trains on the graph itself
    /// (`nodes` and `edges`, full-graph training).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub records: String,
    /// Full-graph training: the node table (as `[flatten] nodes`), instead of `records`. Every
    /// epoch runs the model over every node and every edge in rounds, with no records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// Full-graph training: the edge table (as `[flatten] edges`), with `nodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges: Option<String>,
    /// Full-graph training: the model's layers (records fix it by their hops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<usize>,
    /// Full-graph training: a partition table whose parts own the nodes (as `[flatten]
    /// partition`), so that fewer rows cross between workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Full-graph training: the memory, in MiB, a process may hold for its workers' shares of
    /// the graph and their activations (default: what the system has available when the job
    /// starts). A graph that needs more is refused before the first epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Full-graph training, SANCUS's exchange: epochs a worker may reuse its copy of a remote
    /// node's row (and an owner its copy of a remote gradient) while the row has moved less
    /// than `halo_threshold` since it was last sent (0: every row crosses every epoch, exact).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub halo_staleness: usize,
    /// Full-graph training: the relative change (`|new - sent| / |sent|`) below which a row is
    /// not sent while its copy is younger than `halo_staleness` epochs.
    #[serde(default, skip_serializing_if = "is_zero_f32")]
    pub halo_threshold: f32,
    /// Full-graph training: the precision halo rows and their gradients cross at in training
    /// passes (`bf16`: half the bytes, each value within 2^-8 of itself; default `f32`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub halo_precision: HaloPrecision,
    /// Full-graph training: a node with more in-edges than this has them cut into runs reduced
    /// on other workers and merged at its owner (partial sums for GCN, GraphSAGE and R-GCN,
    /// the layer's per-edge part for GAT and GINE; default `[flatten]`'s, 100000; 0 splits
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_threshold: Option<u64>,
    /// Full-graph link task on a typed graph: the relation whose edges (its table's `split`
    /// column) the model learns to predict; the target type is then its source type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_relation: Option<String>,
    /// Full-graph training on a typed graph (the job's `[graph]`, instead of `nodes` and
    /// `edges`): the node type whose labeled nodes the model learns from and scores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// The job's `[graph]` when this section trains on it (see [`TrainConfig::set_graph`]).
    #[serde(skip)]
    pub graph: Option<super::GraphConfig>,
    /// Full-graph training, link task: negative destinations drawn per supervision edge
    /// (default 1): afresh every epoch for the training edges, once for the valid and test ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negatives: Option<usize>,
    /// Full-graph training, link task: how negatives are drawn (as `[flatten]
    /// negative_sampler`; default `uniform`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negative_sampler: Option<NegativeSampler>,
    /// Directory (a local path or a URI) that receives `model-<run>.bpk`, `model-<run>.json`,
    /// `metrics.jsonl`, `timings.jsonl`, checkpoints, and `_SUCCESS` last.
    pub output: String,
    /// Replace a committed model (one with `_SUCCESS`); without it the job refuses to.
    #[serde(default)]
    pub overwrite: bool,
    #[serde(default = "default_model")]
    pub model: ModelKind,
    #[serde(default = "default_hidden")]
    pub hidden: usize,
    /// R-GCN only: combine each relation's weight from this many shared bases (0: a full
    /// weight per relation).
    #[serde(default)]
    pub bases: usize,
    /// GAT attention heads of the hidden layers (concatenated).
    #[serde(default = "default_heads")]
    pub heads: usize,
    /// GAT attention heads of the last layer (averaged; the GAT paper uses 1 on Cora).
    #[serde(default = "default_output_heads")]
    pub output_heads: usize,
    #[serde(default = "default_dropout")]
    pub dropout: f32,
    /// GAT only: dropout on attention coefficients.
    #[serde(default)]
    pub attention_dropout: f32,
    #[serde(default = "default_activation")]
    pub activation: Activation,
    /// Classes of the label; default: the largest label seen plus one.
    #[serde(default)]
    pub classes: Option<usize>,
    /// Divide each feature row by its sum clamped at 1 (PyG's NormalizeFeatures; for
    /// non-negative features such as bag-of-words).
    #[serde(default)]
    pub normalize_features: bool,
    /// Whether the layers read the records' edge features. Default: yes when the records have
    /// them and the model's kind uses them (SAGE, GAT, GINE; GCN never does).
    #[serde(default)]
    pub edge_features: Option<bool>,
    /// Standardize each edge feature column with the statistics of the whole edge table (the
    /// flatten job writes them into the records' metadata; `model-<run>.json` keeps them).
    #[serde(default)]
    pub normalize_edge_features: bool,
    #[serde(default = "default_epochs")]
    pub epochs: usize,
    /// Records per step per worker: a step's batch over all workers is this times the workers.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    #[serde(default = "default_optimizer")]
    pub optimizer: OptimizerKind,
    #[serde(default = "default_lr")]
    pub lr: f32,
    /// Default: [`DEFAULT_NODE_WEIGHT_DECAY`] for node models, [`DEFAULT_LINK_WEIGHT_DECAY`]
    /// for link models (see [`TrainConfig::weight_decay_for`]).
    #[serde(default)]
    pub weight_decay: Option<f32>,
    /// SGD momentum.
    #[serde(default)]
    pub momentum: f32,
    /// The learning rate is multiplied by `lr_gamma` every `lr_step_epochs` epochs (0: never).
    #[serde(default = "default_lr_gamma")]
    pub lr_gamma: f32,
    #[serde(default)]
    pub lr_step_epochs: usize,
    /// Stop after this many epochs without a better validation score (0: never). The model
    /// written is the one of the best validation epoch. Default: 0 for node models,
    /// [`DEFAULT_LINK_PATIENCE`] for link models that have validation records with negatives.
    #[serde(default)]
    pub patience: Option<usize>,
    /// Layer l computes only the nodes within k - l hops of the roots.
    #[serde(default = "default_prune")]
    pub prune: bool,
    /// Batches a reader thread prepares ahead of compute (0: no pipelining).
    #[serde(default = "default_prefetch")]
    pub prefetch: usize,
    /// Decoded records a process keeps between epochs, in MiB, shared among its workers; the
    /// rest is read from storage again every epoch. Evaluation batches are kept too when they
    /// fit beside the records. It changes memory and time, never results.
    #[serde(default = "default_cache_mb")]
    pub cache_mb: u64,
    /// The training shuffle buffer, in MiB per worker: each epoch visits row groups in a seeded
    /// order and draws records at random from a buffer this large.
    #[serde(default = "default_shuffle_mb")]
    pub shuffle_mb: u64,
    /// Write a checkpoint every this many epochs (0: never).
    #[serde(default)]
    pub checkpoint_every: usize,
    /// Continue from the latest checkpoint in `output`.
    #[serde(default)]
    pub resume: bool,
    /// Control variates (VR-GCN): the last layer's sum over sampled in-edges corrected with
    /// every node's history, kept on the parameter server (`docs/control-variates.md`). A GCN on
    /// records over `[precompute]`'s `Â X`, flattened with `root_neighbors = true`, in `sync` mode.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control_variate: bool,
    /// With `control_variate`: each epoch the last layer reads this many of each root's
    /// in-edges in its record, drawn afresh (records flattened with a larger fanout are the
    /// pool); default: every one the record holds, the same each epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_variate_fanout: Option<usize>,
    #[serde(default = "default_mode")]
    pub mode: PsMode,
    /// `async` only: how many steps a worker may run ahead of the slowest.
    #[serde(default = "default_staleness")]
    pub staleness: usize,
    #[serde(default = "default_device")]
    pub device: DeviceKind,
    #[serde(default)]
    pub aggregation: Aggregation,
    /// Threads the CPU aggregation kernel uses per training worker (0: the cores divided among
    /// the process's workers).
    #[serde(default)]
    pub kernel_threads: usize,
    /// Seeds the initial weights, the shuffling and dropout.
    #[serde(default)]
    pub seed: u64,
    /// `node` or `link`; default: the task the records were flattened for (the two must agree).
    #[serde(default)]
    pub task: Option<Task>,
    /// Link task: the encoder's output width, the embedding GraphInfer writes (default `hidden`).
    #[serde(default)]
    pub embedding_dim: Option<usize>,
    /// Link task: how a pair is scored from its two embeddings.
    #[serde(default)]
    pub decoder: Decoder,
    /// Link task: which other endpoints of the batch each positive's source is scored against,
    /// besides its record's own negatives. Default: `negatives` (the other records' drawn
    /// negatives) when the records hold negatives, else `destinations` (see
    /// [`TrainConfig::batch_negatives_for`]).
    #[serde(default)]
    pub batch_negatives: Option<BatchNegatives>,
    /// Link task, the older name of `batch_negatives`: `true` is `destinations`, `false` `none`.
    #[serde(default)]
    pub in_batch_negatives: Option<bool>,
    /// Gives every node a learned vector this wide as model input, after its features (alone
    /// where the node table has none): a table sharded over the workers by node owner, on the
    /// parameter server (0: none). In a typed graph, each node type's projection reads its
    /// features and then the learned vector.
    #[serde(default)]
    pub learned_embedding_dim: usize,
    /// A typed graph: the node types whose nodes get learned vectors (empty: every type). A
    /// type left out must have features.
    #[serde(default)]
    pub learned_embedding_types: Vec<String>,
    /// The learned rows' optimizer: `adam` (lazy) or `adagrad` (row-wise).
    #[serde(default)]
    pub learned_embedding_optimizer: SparseOptimizerKind,
    /// The learned rows' learning rate (default: `lr`).
    #[serde(default)]
    pub learned_embedding_lr: Option<f32>,
    /// The learned rows' initial standard deviation (`N(0, std)`, drawn from the seed and the
    /// node id).
    #[serde(default = "default_learned_init_std")]
    pub learned_embedding_init_std: f32,
    /// L2 decay of the learned rows, applied to a row when a step touches it.
    #[serde(default)]
    pub learned_embedding_weight_decay: f32,
}

serde_defaults! {
    default_model: ModelKind = DEFAULT_MODEL;
    default_hidden: usize = DEFAULT_HIDDEN;
    default_heads: usize = DEFAULT_HEADS;
    default_output_heads: usize = DEFAULT_OUTPUT_HEADS;
    default_dropout: f32 = DEFAULT_DROPOUT;
    default_activation: Activation = DEFAULT_ACTIVATION;
    default_epochs: usize = DEFAULT_EPOCHS;
    default_batch_size: usize = DEFAULT_BATCH_SIZE;
    default_optimizer: OptimizerKind = DEFAULT_OPTIMIZER;
    default_lr: f32 = DEFAULT_LR;
    default_lr_gamma: f32 = DEFAULT_LR_GAMMA;
    default_prune: bool = DEFAULT_PRUNE;
    default_prefetch: usize = DEFAULT_PREFETCH;
    default_cache_mb: u64 = DEFAULT_CACHE_MB;
    default_shuffle_mb: u64 = DEFAULT_SHUFFLE_MB;
    default_mode: PsMode = DEFAULT_MODE;
    default_staleness: usize = DEFAULT_STALENESS;
    default_device: DeviceKind = DEFAULT_DEVICE;
    default_learned_init_std: f32 = DEFAULT_LEARNED_INIT_STD;
}

impl Default for TrainConfig {
    /// Every knob's default, with empty paths: a job must name its records and output.
    fn default() -> Self {
        TrainConfig {
            records: String::new(),
            nodes: None,
            edges: None,
            layers: None,
            partition: None,
            memory_mb: None,
            halo_staleness: 0,
            halo_threshold: 0.0,
            halo_precision: HaloPrecision::F32,
            hub_threshold: None,
            link_relation: None,
            target_type: None,
            graph: None,
            negatives: None,
            negative_sampler: None,
            output: String::new(),
            overwrite: false,
            model: DEFAULT_MODEL,
            hidden: DEFAULT_HIDDEN,
            bases: 0,
            heads: DEFAULT_HEADS,
            output_heads: DEFAULT_OUTPUT_HEADS,
            dropout: DEFAULT_DROPOUT,
            attention_dropout: 0.0,
            activation: DEFAULT_ACTIVATION,
            classes: None,
            normalize_features: false,
            edge_features: None,
            normalize_edge_features: false,
            epochs: DEFAULT_EPOCHS,
            batch_size: DEFAULT_BATCH_SIZE,
            optimizer: DEFAULT_OPTIMIZER,
            lr: DEFAULT_LR,
            weight_decay: None,
            momentum: 0.0,
            lr_gamma: DEFAULT_LR_GAMMA,
            lr_step_epochs: 0,
            patience: None,
            prune: DEFAULT_PRUNE,
            prefetch: DEFAULT_PREFETCH,
            cache_mb: DEFAULT_CACHE_MB,
            shuffle_mb: DEFAULT_SHUFFLE_MB,
            checkpoint_every: 0,
            resume: false,
            mode: DEFAULT_MODE,
            staleness: DEFAULT_STALENESS,
            device: DEFAULT_DEVICE,
            aggregation: Aggregation::default(),
            kernel_threads: 0,
            seed: 0,
            task: None,
            embedding_dim: None,
            decoder: Decoder::Dot,
            batch_negatives: None,
            in_batch_negatives: None,
            learned_embedding_dim: 0,
            learned_embedding_types: Vec::new(),
            learned_embedding_optimizer: SparseOptimizerKind::Adam,
            learned_embedding_lr: None,
            learned_embedding_init_std: DEFAULT_LEARNED_INIT_STD,
            learned_embedding_weight_decay: 0.0,
            control_variate: false,
            control_variate_fanout: None,
        }
    }
}

impl TrainConfig {
    /// When the job's `[flatten]` writes the records this section reads: every name of
    /// `learned_embedding_types` is one of the node types of the job's `[graph]` (`None`: a
    /// homogeneous graph, which has none), found before any stage runs (the records name their
    /// types only once flattened).
    pub fn check_learned_types(&self, graph: Option<&super::GraphConfig>) -> Result<(), JobError> {
        let Some(graph) = graph else {
            return match self.learned_embedding_types.is_empty() {
                true => Ok(()),
                false => Err(JobError::invalid(
                    "train",
                    "learned_embedding_types names node types, and the records [flatten] writes are of a homogeneous \
                     graph (the job has no [graph]; every node gets a learned row): leave it out",
                )),
            };
        };
        let Some(unknown) = self.learned_embedding_types.iter().find(|t| !graph.node_types.contains_key(*t)) else {
            return Ok(());
        };
        let known: Vec<&str> = graph.node_types.keys().map(String::as_str).collect();
        let problem =
            format!("learned_embedding_types names {unknown:?}, no node type of [graph] ({})", known.join(", "));
        Err(JobError::invalid("train", problem))
    }

    /// The learned embedding table's settings, `None` without one.
    pub fn learned(&self) -> Option<LearnedConfig> {
        (self.learned_embedding_dim > 0).then_some(LearnedConfig {
            dim: self.learned_embedding_dim,
            optimizer: self.learned_embedding_optimizer,
            lr: self.learned_embedding_lr,
            init_std: self.learned_embedding_init_std,
            weight_decay: self.learned_embedding_weight_decay,
        })
    }

    /// The L2 weight decay of a `task` model: the job's, or the task's default.
    pub fn weight_decay_for(&self, task: Task) -> f32 {
        self.weight_decay.unwrap_or(match task {
            Task::Node => DEFAULT_NODE_WEIGHT_DECAY,
            Task::Link => DEFAULT_LINK_WEIGHT_DECAY,
        })
    }

    /// The link task's batch negatives on records holding `negatives` drawn negatives each: the
    /// job's (under either name), or the other records' negatives where there are some, else
    /// the other positives' destinations.
    pub fn batch_negatives_for(&self, negatives: usize) -> BatchNegatives {
        match (self.batch_negatives, self.in_batch_negatives) {
            (Some(kind), _) => kind,
            (None, Some(true)) => BatchNegatives::Destinations,
            (None, Some(false)) => BatchNegatives::None,
            (None, None) if negatives > 0 => BatchNegatives::Negatives,
            (None, None) => BatchNegatives::Destinations,
        }
    }

    /// Batch negatives score every source of a batch against every other record's destination
    /// or negatives: a grid of `batch_size`² scores (times the negatives per record), and for
    /// the mlp decoder of `width`-wide products. The error names the key that asked for it.
    pub fn check_batch_grid(&self, kind: BatchNegatives, negatives: usize) -> Result<(), JobError> {
        let width = self.embedding_dim.unwrap_or(self.hidden);
        let per_pair = if self.decoder == Decoder::Mlp { width } else { 1 };
        let columns = if kind == BatchNegatives::Negatives { negatives.max(1) } else { 1 };
        let floats = (self.batch_size as u128).pow(2) * (columns * per_pair) as u128;
        if kind != BatchNegatives::None && floats > MAX_GRID_FLOATS {
            return Err(JobError::invalid(
                "train",
                format!(
                    "batch_negatives = \"{}\"{} with batch_size = {} and the {} decoder scores a grid of {} MB a step \
                     (at most {} MB): lower batch_size, or set batch_negatives = \"none\"",
                    kind.name(),
                    if self.batch_negatives.is_none() && self.in_batch_negatives.is_none() {
                        " (the default)"
                    } else {
                        ""
                    },
                    self.batch_size,
                    self.decoder.name(),
                    (floats * 4) >> 20,
                    (MAX_GRID_FLOATS * 4) >> 20
                ),
            ));
        }
        Ok(())
    }

    pub fn check(&self) -> Result<(), JobError> {
        self.check_numbers()?;
        self.check_link_keys()?;
        if self.classes == Some(0) || self.classes.is_some_and(|c| c > MAX_CLASSES) {
            return Err(JobError::invalid(
                "train",
                format!("classes must be at least 1 and at most {MAX_CLASSES} (or left out to count them)"),
            ));
        }
        if self.bases > 0 && self.model != ModelKind::Rgcn {
            return Err(JobError::invalid("train", "bases is a key of model = \"rgcn\" (R-GCN's basis decomposition)"));
        }
        self.check_learned_keys()?;
        self.check_control_variate()?;
        if self.bases > MAX_BASES {
            return Err(JobError::invalid("train", format!("bases is at most {MAX_BASES} (found {})", self.bases)));
        }
        self.check_source()
    }

    /// What control variates need of the job; what they need of the records is the trainer's
    /// to check once it has read them.
    fn check_control_variate(&self) -> Result<(), JobError> {
        if self.control_variate_fanout.is_some_and(|fanout| !self.control_variate || fanout == 0) {
            return Err(JobError::invalid(
                "train",
                "control_variate_fanout draws the in-edges control variates estimate from: set control_variate = \
                 true, and a fanout of at least 1",
            ));
        }
        let refused = match () {
            _ if !self.control_variate => return Ok(()),
            _ if self.records.is_empty() => "full-graph training, which reads every in-edge already",
            _ if !matches!(self.model, ModelKind::Gcn | ModelKind::Sage) => {
                "a model other than model = \"gcn\" or \"sage\""
            }
            _ if self.mode != PsMode::Sync => "mode = \"async\": histories are refreshed at points every worker shares",
            _ if self.learned_embedding_dim > 0 => "learned embeddings",
            _ if self.task == Some(Task::Link) => "link records",
            _ => return Ok(()),
        };
        Err(JobError::invalid("train", format!("control_variate is not for {refused}")))
    }

    /// The training's numbers: widths, counts and rates in range.
    fn check_numbers(&self) -> Result<(), JobError> {
        if self.hidden == 0 || self.heads == 0 || self.output_heads == 0 || self.epochs == 0 || self.batch_size == 0 {
            return Err(JobError::invalid(
                "train",
                "hidden, heads, output_heads, epochs and batch_size must be positive",
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) || !(0.0..1.0).contains(&self.attention_dropout) {
            return Err(JobError::invalid("train", "dropout rates must be in [0, 1)"));
        }
        let decay = self.weight_decay.unwrap_or(0.0);
        if !(self.lr.is_finite() && self.lr > 0.0 && decay.is_finite() && decay >= 0.0) {
            return Err(JobError::invalid(
                "train",
                "lr must be a positive number and weight_decay a number not below 0",
            ));
        }
        if !(self.momentum.is_finite() && self.lr_gamma.is_finite() && self.lr_gamma > 0.0) {
            return Err(JobError::invalid("train", "momentum and lr_gamma must be numbers, lr_gamma positive"));
        }
        let width = self.embedding_dim.unwrap_or(self.hidden);
        if self.hidden > MAX_WIDTH || width > MAX_WIDTH {
            return Err(JobError::invalid(
                "train",
                format!("hidden and embedding_dim are at most {MAX_WIDTH} (found {} and {width})", self.hidden),
            ));
        }
        Ok(())
    }

    /// The link task's keys: one name for batch negatives (on a grid that suits them), and an
    /// embedding width only for a link task, at least 1.
    fn check_link_keys(&self) -> Result<(), JobError> {
        if self.batch_negatives.is_some() && self.in_batch_negatives.is_some() {
            return Err(JobError::invalid(
                "train",
                "in_batch_negatives is the older name of batch_negatives: set one of them",
            ));
        }
        if let Some(kind) = self
            .batch_negatives
            .or(self.in_batch_negatives.map(|on| if on { BatchNegatives::Destinations } else { BatchNegatives::None }))
        {
            self.check_batch_grid(kind, 1)?;
        }
        if self.embedding_dim == Some(0) {
            return Err(JobError::invalid("train", "embedding_dim must be at least 1 (or left out for hidden)"));
        }
        if self.task == Some(Task::Node) && self.embedding_dim.is_some() {
            return Err(JobError::invalid(
                "train",
                "embedding_dim is a key of the link task, and this job sets task = \"node\"",
            ));
        }
        Ok(())
    }

    /// The learned embedding's keys: numbers in range, each type named once, and no key of it
    /// without its width.
    fn check_learned_keys(&self) -> Result<(), JobError> {
        let learned_numbers = [
            self.learned_embedding_lr.unwrap_or(1.0),
            self.learned_embedding_init_std + 1.0,
            self.learned_embedding_weight_decay + 1.0,
        ];
        if self.learned_embedding_dim > MAX_WIDTH || learned_numbers.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(JobError::invalid(
                "train",
                format!(
                    "learned_embedding_dim is at most {MAX_WIDTH}, learned_embedding_lr a positive number, \
                     learned_embedding_init_std and learned_embedding_weight_decay numbers not below 0"
                ),
            ));
        }
        let types = &self.learned_embedding_types;
        if let Some(twice) = types.iter().enumerate().find(|(i, t)| types[..*i].contains(t)).map(|(_, t)| t) {
            return Err(JobError::invalid("train", format!("learned_embedding_types names {twice:?} twice")));
        }
        let learned_keys = self.learned_embedding_optimizer != SparseOptimizerKind::Adam
            || self.learned_embedding_lr.is_some()
            || self.learned_embedding_init_std != DEFAULT_LEARNED_INIT_STD
            || self.learned_embedding_weight_decay != 0.0
            || !self.learned_embedding_types.is_empty();
        if learned_keys && self.learned_embedding_dim == 0 {
            return Err(JobError::invalid(
                "train",
                "learned_embedding_optimizer, _lr, _init_std, _weight_decay and _types are keys of a learned embedding: set \
                 learned_embedding_dim (the learned row's width), or leave them out",
            ));
        }
        Ok(())
    }

    /// Whether the job trains on the graph itself (`nodes` and `edges`, or a typed `[graph]`
    /// and `target_type`) rather than records.
    pub fn full_graph(&self) -> bool {
        self.records.is_empty() && (self.nodes.is_some() || self.target_type.is_some())
    }

    /// Takes the job's `[graph]` when this section trains on it (`target_type` set): the
    /// tables are then the graph's, and the target type one of its node types.
    pub fn set_graph(&mut self, graph: Option<&super::GraphConfig>) -> Result<(), JobError> {
        if let Some(relation) = self.link_relation.as_deref() {
            let Some(graph) = graph else {
                let problem = "link_relation names a relation of [graph], and the job has no [graph]";
                return Err(JobError::invalid("train", problem));
            };
            if self.task != Some(Task::Link) {
                let problem = "link_relation is a key of the link task: set task = \"link\", or leave it out";
                return Err(JobError::invalid("train", problem));
            }
            let target = self.target_type.as_deref();
            let source = super::graph::link_source_type("train", &graph.resolve()?, Some(relation), target)?;
            self.target_type = Some(source);
        }
        let Some(target) = self.target_type.as_deref() else { return Ok(()) };
        let tables = (self.nodes.as_deref().unwrap_or_default(), self.edges.as_deref().unwrap_or_default());
        super::graph::section_graph("train", tables, Some(target), graph)?;
        self.graph = graph.cloned();
        Ok(())
    }

    /// The typed graph full-graph training reads, numbered, and its target type (`None`: a
    /// homogeneous graph).
    pub fn typed(&self) -> Option<(super::TypedGraph, u8)> {
        let graph = self.graph.as_ref()?.resolve().expect("resolved when the job was parsed");
        let target = self.target_type.as_deref().and_then(|t| graph.node_type(t)).expect("checked with the job");
        Some((graph, target))
    }

    /// A typed link task's relation, numbered (`None`: a node task, or a homogeneous graph).
    pub fn link_relation_index(&self) -> Option<u8> {
        let (graph, _) = self.typed()?;
        let name = self.link_relation.as_deref()?;
        graph.relations.iter().position(|r| r.name == name).map(|r| r as u8)
    }

    /// The input tables: `records`, or `nodes`, `edges` and `partition` (full-graph training;
    /// a typed graph's tables are its `[graph]`'s).
    pub fn inputs(&self) -> Vec<&str> {
        if !self.full_graph() {
            return vec![self.records.as_str()];
        }
        let graph = self.graph.iter().flat_map(|g| g.tables());
        [&self.nodes, &self.edges, &self.partition].into_iter().flatten().map(String::as_str).chain(graph).collect()
    }

    /// Records, or a graph: exactly one of the two, and the graph's keys only with a graph.
    fn check_source(&self) -> Result<(), JobError> {
        let typed = self.target_type.is_some();
        let graph = self.nodes.is_some() || self.edges.is_some() || typed;
        if graph != self.records.is_empty() {
            return Err(JobError::invalid(
                "train",
                "name the records to train on (records = \"DIR\", a flatten output), or the graph itself for \
                 full-graph training (nodes = \"DIR\" and edges = \"DIR\", or a typed [graph] and target_type), \
                 not both",
            ));
        }
        if graph && !typed && (self.nodes.is_none() || self.edges.is_none()) {
            return Err(JobError::invalid("train", "full-graph training reads nodes and edges: set both"));
        }
        let full_keys = self.layers.is_some()
            || self.partition.is_some()
            || self.memory_mb.is_some()
            || self.halo_staleness > 0
            || self.halo_threshold != 0.0
            || self.halo_precision != HaloPrecision::F32
            || self.hub_threshold.is_some()
            || self.negatives.is_some()
            || self.negative_sampler.is_some()
            || typed;
        if !graph && full_keys {
            return Err(JobError::invalid(
                "train",
                "layers, partition, memory_mb, halo_staleness, halo_threshold, halo_precision, hub_threshold, \
                 negatives, negative_sampler, link_relation and target_type are keys of full-graph training (nodes and edges, or a typed [graph]); records fix \
                 their layers, target type and negatives when they are flattened",
            ));
        }
        if self.negatives.is_some_and(|n| n > crate::job::flatten::MAX_NEGATIVES) {
            return Err(JobError::invalid(
                "train",
                format!("negatives is at most {} per edge", crate::job::flatten::MAX_NEGATIVES),
            ));
        }
        if [&self.nodes, &self.edges, &self.partition].into_iter().flatten().any(|p| p.trim().is_empty()) {
            return Err(JobError::invalid("train", "nodes, edges and partition name tables: they cannot be empty"));
        }
        if !(self.halo_threshold.is_finite() && self.halo_threshold >= 0.0) {
            return Err(JobError::invalid("train", "halo_threshold must be a number not below 0"));
        }
        if self.halo_staleness > u32::MAX as usize {
            return Err(JobError::invalid("train", format!("halo_staleness is at most {} epochs", u32::MAX)));
        }
        if self.memory_mb == Some(0) {
            return Err(JobError::invalid("train", "memory_mb must be at least 1 (or left out: the memory available)"));
        }
        if self.layers.is_some_and(|l| l == 0 || l > crate::job::MAX_HOPS) {
            return Err(JobError::invalid("train", format!("layers must be between 1 and {}", crate::job::MAX_HOPS)));
        }
        Ok(())
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_zero_f32(x: &f32) -> bool {
    *x == 0.0
}
