//! A `[train]` job: every timely worker streams its share of the records (see [`crate::plan`]
//! and [`crate::stream`]), computes gradients on its batches and trades them with the
//! parameter-server shards (one per worker). Worker 0 writes metrics, checkpoints and the model.
//!
//! A worker's run is four named steps: [`Setup::new`] (the plan, model shape, device),
//! [`Start::new`] (fresh parameters or a checkpoint), [`train_epoch`] and the task's
//! [`Learner::evaluate_epoch`], with a [`Tracker`] deciding early stopping and which
//! parameters are written. What differs between node and link records (the model's head, a
//! step's gradient, the evaluation) is the [`Learner`] trait, in [`crate::node`] and
//! [`crate::link`].

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use burn::prelude::*;
use cluster::Failure;
use gnn::batch::{BatchSpec, Redraw};
use gnn::control_variate::{ControlVariate, Weighing};
use gnn::model::{BatchTensors, Dropout, Gnn};
use gnn::params;
use schemas::facts::RunFacts;
use schemas::job::Aggregation;
use schemas::model::{ModelKind, ModelMeta, ModelSpec};
use schemas::record::FlattenMeta;
use schemas::record::LinkRecord;
use schemas::task::Decoder;
use schemas::typed::GraphTypes;
use schemas::{ClusterConfig, Record, Task};
use tables::commit::{Stage, new_run_id};
use tables::lease::Lease;
use tables::{Io, Place};
use timely::worker::Worker;

use crate::checkpoint::{self, Checkpoint};
use crate::error::Error;
use crate::eval::EvalCache;
use crate::example::Example;
use crate::histories::Histories;
use crate::learned::Learned;
use crate::loader::Batches;
use crate::metrics::{EpochMetrics, EpochTiming, METRICS, Metric, MetricsLog, Scores, TIMINGS};
use crate::optim::{ShardOptimizer, learning_rate};
use crate::phases::{Lap, Phases};
use crate::plan::Plan;
use crate::ps::RowGrads;
use crate::ps::{Server, ShardState, Stats, shard_range};
use crate::reader::{Counts, Pass, RecordSet, Unit};
use crate::stream::{Order, RecordStream, Source};
use crate::task_keys::TaskKeys;
use crate::tracker::Tracker;

pub use schemas::job::TrainConfig;

/// What a training run ended with.
#[derive(Debug, Clone)]
pub struct TrainSummary {
    pub epochs: usize,
    /// `accuracy`, `micro_f1` or (link models) `auc`: what `best_valid` and `test_at_best`
    /// measure.
    pub metric: &'static str,
    /// 1-based.
    pub best_epoch: usize,
    pub best_valid: f64,
    pub test_at_best: f64,
    pub seconds: f64,
    pub wait_seconds: f64,
    /// The final flat parameters (the best epoch's when `patience` > 0).
    pub params: Vec<f32>,
    /// The epoch whose parameters the model holds (1-based): the best validation's when
    /// `patience` > 0, else the last.
    pub written_epoch: usize,
    /// This process's peak resident memory, where the platform reports it.
    pub peak_rss: Option<u64>,
    /// Decoded records worker 0 kept between epochs (see `cache_mb`).
    pub cached_bytes: u64,
    /// The learned embedding table: its rows, width and largest share, in words.
    pub learned: Option<String>,
    /// The keys whose defaults depend on the task, as the run took them (`TaskKeys::line`).
    pub keys: String,
    /// Full-graph training: what crossed between workers (see `crate::full`).
    pub exchanged: Option<String>,
    /// Control variates: the histories kept and their refreshes, in words.
    pub histories: Option<String>,
}

/// Runs a training job on this process's workers, on node or link records as the record set
/// holds. Any worker's failure ends every worker.
pub fn run(io: &Arc<Io>, config: &TrainConfig, cluster: &ClusterConfig) -> Result<TrainSummary, Failure<Error>> {
    let mut set = RecordSet::open(io.clone(), &config.records).map_err(Failure::Worker)?;
    set.keys = config.learned_embedding_dim > 0;
    set.neighbors = config.control_variate;
    check_task(config, &set).map_err(Failure::Worker)?;
    check_output(config, &set).map_err(Failure::Worker)?;
    match set.meta.task() {
        Task::Node => run_on::<Record>(config, set, cluster),
        Task::Link => run_on::<LinkRecord>(config, set, cluster),
    }
}

fn run_on<T: Learner>(
    config: &TrainConfig,
    set: RecordSet,
    cluster: &ClusterConfig,
) -> Result<TrainSummary, Failure<Error>> {
    let mut config = config.clone();
    // The kernel's threads: the cores shared among this process's workers unless set.
    if config.kernel_threads == 0 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        config.kernel_threads = (cores / cluster.threads()).max(1);
    }
    let (config, set) = (Arc::new(config), Arc::new(set));
    let workers = cluster.threads();
    let summaries = cluster::execute(cluster, move |worker| {
        let source = Arc::new(Source::<T>::new(set.clone(), cache_budget(&config, workers)));
        train_worker(worker, &config, &source)
    })?;
    summaries.into_iter().next().ok_or_else(|| Failure::Panic("no worker ran".into()))
}

/// The job's task is the records' (`[train] task` defaults to it), and the link task's keys
/// are not set for node records.
pub fn check_task(config: &TrainConfig, set: &RecordSet) -> Result<(), Error> {
    let records = set.meta.task();
    let asked = config.task.unwrap_or(records);
    if asked != records {
        return Err(Error::Usage(format!(
            "[train] task = \"{}\", but the records in {} are {} records (flattened with [flatten] task = \"{}\"): \
             train them with task = \"{}\" (or leave task out), or flatten the graph for the {} task",
            asked.name(),
            set.place.shown(),
            records.name(),
            records.name(),
            records.name(),
            asked.name()
        )));
    }
    let link_keys = [
        ("embedding_dim", config.embedding_dim.is_some()),
        ("batch_negatives", config.batch_negatives.is_some()),
        ("in_batch_negatives", config.in_batch_negatives.is_some()),
        ("decoder", config.decoder != Decoder::default()),
    ];
    match link_keys.iter().find(|(_, set)| *set) {
        Some((key, _)) if records == Task::Node => Err(Error::Usage(format!(
            "[train] {key} is a key of the link task, and the records in {} are node records",
            set.place.shown()
        ))),
        _ => Ok(()),
    }
}

/// The output is a directory apart from the records, and holds no committed model unless the
/// job replaces it (`overwrite`) or continues it (`resume`).
fn check_output(config: &TrainConfig, set: &RecordSet) -> Result<(), Error> {
    let output = set.io.output(&config.output)?;
    let replace = config.overwrite || config.resume;
    Ok(set.io.block_on(tables::commit::check_output(
        &output,
        &[&set.place],
        tables::commit::Stage::Train,
        replace,
        &gnn::io::LAYOUT,
    ))?)
}

/// A worker's share of the process's `cache_mb`.
pub fn cache_budget(config: &TrainConfig, workers: usize) -> u64 {
    schemas::job::mb_bytes(config.cache_mb) / workers.max(1) as u64
}

/// Where a worker's training batches come from.
pub enum Feed<'a, T = Record> {
    /// Its share of the record set, in each epoch's seeded order: what [`run`] trains on.
    Share,
    /// The records of each (epoch, step)'s batch, and the steps per epoch: one worker can
    /// then train on the combined batches of several, to compare runs across worker counts.
    Given(&'a dyn Fn(usize, usize) -> Option<Vec<T>>, usize),
}

impl<T> Clone for Feed<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Feed<'_, T> {}

/// The last layer of a task's model: its width and what it means.
pub struct Head {
    /// Classes (node models) or the embedding width (link models).
    pub classes: usize,
    pub multi_label: bool,
    pub task: Task,
    pub decoder: Option<Decoder>,
}

/// A step's gradient on one worker's batch (see [`Learner::gradient`]).
#[derive(Debug, Default)]
pub struct Gradient {
    /// Sums over the batch's rows, like `rows`.
    pub grad: Vec<f32>,
    pub count: u64,
    pub stats: Stats,
    /// The learned rows' gradient sums, in input-row order (empty without learned rows).
    pub rows: Vec<f32>,
}

/// The batch tensors with the learned rows attached (see `gnn::model::BatchTensors::learned`).
pub fn with_learned(
    tensors: BatchTensors,
    learned: Option<Vec<f32>>,
    spec: &ModelSpec,
    device: &Device,
) -> BatchTensors {
    match learned {
        Some(rows) => tensors.with_learned(rows, spec.learned_embedding_dim, device),
        None => tensors,
    }
}

/// The learned rows' gradient sums of a step (`count` scales them as the weights'), as
/// tensors to read back with the rest; none without learned rows.
pub fn learned_gradient(tensors: &BatchTensors, grads: &burn::tensor::Gradients) -> Option<Tensor<1>> {
    let learned = tensors.learned.as_ref()?;
    let [rows, width] = learned.dims();
    let device = learned.clone().inner().device();
    Some(learned.grad(grads).map_or_else(|| Tensor::zeros([rows * width], &device), |g| g.reshape([rows * width])))
}

/// What differs between node and link records: the model's head (with the checks that the
/// records hold something to learn), a step's gradient, and an epoch's evaluation.
pub trait Learner: Example {
    const TASK: Task;

    /// The model's last layer, once the records are known to hold something to learn with the
    /// run's `keys`.
    fn head(config: &TrainConfig, set: &RecordSet, totals: &Counts, keys: &TaskKeys) -> Result<Head, Error>;

    /// The gradient sum of a batch's loss, the count it sums over (the parameter server
    /// divides by the step's total), and the step's training stats; adds the step's tensors,
    /// forward, backward and read times to `phases`. `learned`: the batch's learned rows in
    /// input-row order, whose gradient sums come back in [`Gradient::rows`]; `cv`: what the
    /// last layer's estimate reads, with control variates.
    #[allow(clippy::too_many_arguments)]
    fn gradient(
        setup: &Setup<Self>,
        config: &TrainConfig,
        params: &[f32],
        batch: &Self::Batch,
        dropout: Dropout,
        phases: &mut Phases,
        learned: Option<Vec<f32>>,
        cv: Option<ControlVariate>,
    ) -> Gradient;

    /// Evaluates the parameters on this worker's valid and test records, and waits for every
    /// step before it (late training stats of async mode join `train`): every worker returns
    /// the same scores.
    #[allow(clippy::too_many_arguments)]
    fn evaluate_epoch(
        worker: &mut Worker,
        config: &TrainConfig,
        setup: &Setup<Self>,
        server: &mut Server,
        params: &mut [f32],
        lr: f32,
        train: &mut Stats,
    ) -> Result<Scores, Error>;
}

/// What a worker trains and evaluates on, and the model's shape and device.
pub struct Setup<T: Example = Record> {
    pub plan: Plan,
    /// This worker's units that hold training records, ascending (see [`Setup::units`]).
    train_units: Vec<Unit>,
    /// This worker's units that hold validation or test records, ascending.
    eval_units: Vec<Unit>,
    /// Where the units' records come from.
    pub source: Arc<Source<T>>,
    pub spec: ModelSpec,
    pub batch_spec: BatchSpec,
    /// The device, and the same with autodiff.
    pub base: Device,
    pub device: Device,
    pub aggregation: Aggregation,
    /// The model's structure: each step loads the current parameters into a clone.
    pub template: Gnn,
    /// The keys whose defaults depend on the task and the records.
    pub keys: TaskKeys,
    /// This worker's share of the learned embedding table, if the model has one.
    pub learned: Option<RefCell<Learned>>,
    /// This worker's share of the histories, with control variates.
    pub histories: Option<RefCell<Histories>>,
    /// When the worker started, and whether its first step has been reported.
    started: Instant,
    first_step: std::sync::Once,
    /// Evaluation batches built once and kept between epochs, when they fit `cache_mb`.
    pub(crate) eval_cache: std::cell::RefCell<EvalCache<T::Batch>>,
}

impl<T: Example> Setup<T> {
    /// Whether the evaluation passes run from the batches the first one kept.
    pub(crate) fn evaluates_kept_batches(&self) -> bool {
        matches!(*self.eval_cache.borrow(), EvalCache::Kept(_))
    }

    /// This worker's units that hold records `pass` takes, ascending (see [`Plan::units_of`]).
    pub fn units(&self, pass: Pass) -> &[Unit] {
        match pass {
            Pass::Train => &self.train_units,
            Pass::Evaluate => &self.eval_units,
        }
    }
}

impl<T: Learner> Setup<T> {
    pub fn new(worker: &mut Worker, config: &TrainConfig, source: Arc<Source<T>>) -> Result<Setup<T>, Error> {
        let started = Instant::now();
        let set = source.set();
        let plan = Self::plan(worker, config, set, started)?;
        let totals = plan.totals();
        let negatives = set.meta.link.as_ref().map_or(0, |l| l.negatives);
        let can_validate = totals.valid > 0 && (T::TASK == Task::Node || negatives > 0);
        let keys = TaskKeys::resolve(config, T::TASK, negatives, can_validate);
        let head = T::head(config, set, &totals, &keys)?;
        if worker.index() == 0 {
            tracing::info!("train: {}", keys.line(config, T::TASK));
        }
        let edge_inputs = edge_inputs(config, set)?;
        if worker.index() == 0 {
            tracing::info!("train: {}", edge_inputs.line(config, &set.meta));
        }
        check_learned_input(config, set)?;
        let weighing = check_control_variate(config, set, edge_inputs)?;
        let spec = learned_types(config, edge_inputs.apply(&set.meta, model_spec(config, set, head)))?;
        let histories =
            weighing.map(|w| RefCell::new(Histories::new(worker, (spec.hidden, w), set.place.shown().to_string())));
        let names = spec.types.as_ref().map(|t| t.node_types.iter().map(|n| n.name.clone()).collect());
        let learned = config.learned().map(|l| RefCell::new(Learned::new(worker, &l, config.seed, names)));
        let base = gnn::device(config.device)?;
        let device = base.clone().autodiff();
        // The node and edge features as the model reads them (see gnn::batch).
        let batch_spec = BatchSpec {
            prune: config.prune,
            kernel_plans: gnn::kernel::uses_kernel(config.aggregation, &device),
            kernel_threads: config.kernel_threads,
            // Each node's input row once per batch.
            distinct_inputs: true,
            ..BatchSpec::plain(set.meta.layers()).reading(&spec)
        };
        let (train_units, eval_units) =
            (plan.units_of(worker.index(), Pass::Train), plan.units_of(worker.index(), Pass::Evaluate));
        Ok(Setup {
            plan,
            train_units,
            eval_units,
            source: source.clone(),
            aggregation: config.aggregation,
            started,
            first_step: std::sync::Once::new(),
            eval_cache: Default::default(),
            template: Gnn::new(&spec, &base),
            keys,
            learned,
            histories,
            spec,
            batch_spec,
            base,
            device,
        })
    }

    /// The run's plan over the record set's units, once the records suit the job (the
    /// version, the task and the label kind) and this trainer's task; worker 0 logs it.
    fn plan(worker: &mut Worker, config: &TrainConfig, set: &RecordSet, started: Instant) -> Result<Plan, Error> {
        // Before anything the processes compare: each checks the version it opened alone.
        set.one_version(worker)?;
        check_task(config, set)?;
        check_kind(config, set)?;
        if set.meta.task() != T::TASK {
            return Err(Error::Internal(format!("a {} trainer on {} records", T::TASK.name(), set.meta.task().name())));
        }
        let plan = Plan::gather(worker, set, config.classes)?;
        let totals = plan.totals();
        if worker.index() == 0 {
            let what = if T::TASK == Task::Link { "link" } else { "labeled" };
            tracing::info!(
                "train: {} row groups hold {} train, {} valid, {} test {what} records; {} steps per epoch (planned in {:.1}s)",
                plan.units.len(),
                totals.train,
                totals.valid,
                totals.test,
                plan.steps(config.batch_size),
                started.elapsed().as_secs_f64()
            );
        }
        Ok(plan)
    }
}

/// The model the job asks for on records of `set`, its last layer `head`: before the edge
/// inputs and the learned types are applied.
fn model_spec(config: &TrainConfig, set: &RecordSet, head: Head) -> ModelSpec {
    let gat = config.model == ModelKind::Gat;
    ModelSpec {
        kind: config.model,
        // A typed model's inputs are its types' widths (in `types`); a homogeneous one's
        // the features, then the learned embedding.
        input_dim: set.meta.feature_dim + config.learned_embedding_dim,
        hidden: config.hidden,
        classes: head.classes,
        // Records over precomputed features train a dense first layer before the records' hops.
        layers: set.meta.hops + usize::from(set.meta.precomputed.is_some()),
        heads: if gat { config.heads } else { 1 },
        output_heads: if gat { config.output_heads } else { 1 },
        activation: config.activation,
        normalize_features: config.normalize_features,
        multi_label: head.multi_label,
        edge_dim: 0,
        normalize_edge_features: false,
        edge_stats: None,
        relation_edge_stats: Vec::new(),
        task: head.task,
        decoder: head.decoder,
        types: None,
        bases: config.bases,
        wide_mlp: true,
        learned_embedding_dim: config.learned_embedding_dim,
        precomputed: usize::from(set.meta.precomputed.is_some()),
        seed: config.seed,
    }
}

/// Control variates estimate the last layer of a GCN or a GraphSAGE over its precomputed
/// inputs (a dense first layer), on records of one hop that list their roots' in-neighbors
/// (see `crate::histories`); GraphSAGE's mean without edge features. The weighing of the
/// estimated layer, when the job asks for control variates.
fn check_control_variate(config: &TrainConfig, set: &RecordSet, edges: EdgeInputs) -> Result<Option<Weighing>, Error> {
    if !config.control_variate {
        return Ok(None);
    }
    let meta = &set.meta;
    let weighing = match config.model {
        ModelKind::Gcn => Weighing::Gcn,
        ModelKind::Sage if !edges.read => Weighing::Mean,
        ModelKind::Sage => {
            return Err(Error::Usage(format!(
                "control_variate estimates GraphSAGE's mean of its in-neighbors' rows, and the records in {} carry \
                 edge features, which its messages would add: set [train] edge_features = false",
                set.place.shown()
            )));
        }
        kind => return Err(Error::Usage(format!("control_variate is not for model = \"{}\"", kind.name()))),
    };
    let missing = match () {
        _ if meta.precomputed.is_none() => {
            "were not flattened over [precompute]'s output (its node table as [flatten] nodes)"
        }
        _ if !meta.root_neighbors => "do not list their roots' in-neighbors ([flatten] root_neighbors = true)",
        _ if meta.hops != 1 => "are not of one hop ([flatten] hops = 1: the sampled layer is the last)",
        _ if meta.types.is_some() => "are of a typed graph",
        _ => return Ok(Some(weighing)),
    };
    Err(Error::Usage(format!("control_variate: the records in {} {missing}", set.place.shown())))
}

/// A model reads something of every node: its features, or a learned embedding; and only a
/// typed model names types with learned rows.
fn check_learned_input(config: &TrainConfig, set: &RecordSet) -> Result<(), Error> {
    let place = set.place.shown();
    if !config.learned_embedding_types.is_empty() && set.meta.types.is_none() {
        return Err(Error::Usage(format!(
            "[train] learned_embedding_types names node types, and the records in {place} are of a homogeneous \
             graph (every node gets a learned row): leave it out"
        )));
    }
    if config.learned_embedding_dim == 0 && set.meta.feature_dim == 0 && set.meta.types.is_none() {
        return Err(Error::Usage(format!(
            "the records in {place} carry no node features (the node table has no features column): give every \
             node a learned embedding with [train] learned_embedding_dim (for example 64)"
        )));
    }
    Ok(())
}

/// A typed model's learned widths: `learned_embedding_dim` for each type
/// `learned_embedding_types` names (every type when it names none). Every type must then have
/// something to read: its features, or a learned row.
fn learned_types(config: &TrainConfig, mut spec: ModelSpec) -> Result<ModelSpec, Error> {
    let Some(types) = &mut spec.types else { return Ok(spec) };
    let named = &config.learned_embedding_types;
    if let Some(unknown) = named.iter().find(|n| !types.node_types.iter().any(|t| &t.name == *n)) {
        let known: Vec<&str> = types.node_types.iter().map(|t| t.name.as_str()).collect();
        return Err(Error::Usage(format!(
            "[train] learned_embedding_types names {unknown:?}, which is no node type of the records ({})",
            known.join(", ")
        )));
    }
    for t in &mut types.node_types {
        if named.is_empty() || named.contains(&t.name) {
            t.learned = config.learned_embedding_dim;
        }
        if t.input_width() == 0 {
            let how = if config.learned_embedding_dim == 0 {
                "learned_embedding_dim (for example 64)"
            } else {
                "learned_embedding_types (or leave it out: every type)"
            };
            return Err(Error::Usage(format!(
                "node type {} has no features (its table has no features column): give its nodes learned \
                 embeddings with [train] {how}",
                t.name
            )));
        }
    }
    Ok(spec)
}

/// Whether the model's kind runs on the records' graph: R-GCN and heterogeneous GraphSAGE on
/// a typed graph, every kind but R-GCN on a homogeneous one.
fn check_kind(config: &TrainConfig, set: &RecordSet) -> Result<(), Error> {
    let kind = config.model;
    if let Some(precomputed) = set.meta.precomputed {
        if config.normalize_features {
            return Err(Error::Usage(format!(
                "[train] normalize_features = true, but the records in {} hold {} ([precompute]'s output), whose \
                 rows hold sums of neighbors' rows: normalize X before the product with [precompute] \
                 normalize_features, and leave it out here",
                set.place.shown(),
                precomputed.formula()
            )));
        }
        if kind != precomputed.model() {
            return Err(Error::Usage(format!(
                "[train] model = \"{}\", but the records in {} were flattened over [precompute]'s output for \
                 model = \"{}\" (features {}): they train that model (its first layer dense)",
                kind.name(),
                set.place.shown(),
                precomputed.model().name(),
                precomputed.formula()
            )));
        }
    }
    match &set.meta.types {
        Some(types) if !kind.runs_typed() => Err(Error::Usage(format!(
            "[train] model = \"{}\", but the records in {} are of a typed graph ({types}); typed graphs train \
             model = \"rgcn\" or \"sage\" (heterogeneous GraphSAGE)",
            kind.name(),
            set.place.shown()
        ))),
        None if !kind.runs_plain() => Err(Error::Usage(format!(
            "[train] model = \"{}\" needs records of a typed graph (a [graph] in the flatten job); the records in \
             {} are of a homogeneous graph",
            kind.name(),
            set.place.shown()
        ))),
        _ => Ok(()),
    }
}

/// The edge features the model reads: whether it reads the records' (their widths are the
/// record set's: `edge_dim`, or each relation's in a typed set) and whether it standardizes
/// them with the record set's statistics (`normalize_edge_features`). They are read when the
/// records have them, `edge_features` does not say no, and the kind has a place for them (GCN
/// has none). Asking for edge features the records lack, or for statistics they do not
/// carry, is a usage error.
fn edge_inputs(config: &TrainConfig, set: &RecordSet) -> Result<EdgeInputs, Error> {
    let meta = &set.meta;
    let available = meta.edge_dim > 0 || meta.types.as_ref().is_some_and(GraphTypes::has_edge_features);
    if config.edge_features == Some(true) && !available {
        return Err(Error::Usage(format!(
            "[train] edge_features = true, but the records in {} have no edge features (flatten an edge table with a \
             features column, or leave edge_features out)",
            set.place.shown()
        )));
    }
    if !available || config.edge_features == Some(false) || !config.model.uses_edge_features() {
        return Ok(EdgeInputs { read: false, standardized: false });
    }
    let has_stats = meta.edge_stats.is_some() || !meta.relation_edge_stats.is_empty();
    if config.normalize_edge_features && !has_stats {
        return Err(Error::Usage(format!(
            "[train] normalize_edge_features = true, but the records in {} carry no edge feature statistics \
             (flatten them again, or set normalize_edge_features = false)",
            set.place.shown()
        )));
    }
    Ok(EdgeInputs { read: true, standardized: config.normalize_edge_features })
}

/// What [`edge_inputs`] decided.
#[derive(Debug, Clone, Copy)]
struct EdgeInputs {
    read: bool,
    standardized: bool,
}

impl EdgeInputs {
    /// The spec's edge fields for records with `meta`: the homogeneous width and statistics,
    /// or a typed model's types with each relation's width it reads (0 for all when it reads
    /// none) and their statistics.
    fn apply(self, meta: &FlattenMeta, spec: ModelSpec) -> ModelSpec {
        let mut types = meta.types.clone();
        if !self.read {
            types.iter_mut().flat_map(|t| &mut t.relations).for_each(|r| r.edge_dim = 0);
        }
        let standardized = self.read && self.standardized;
        ModelSpec {
            edge_dim: if self.read && types.is_none() { meta.edge_dim } else { 0 },
            normalize_edge_features: standardized,
            edge_stats: if standardized { meta.edge_stats.clone() } else { None },
            relation_edge_stats: if standardized { meta.relation_edge_stats.clone() } else { Vec::new() },
            types,
            ..spec
        }
    }

    /// The setup's log line on the edge features the model reads.
    fn line(self, config: &TrainConfig, meta: &FlattenMeta) -> String {
        // "3 edge features" on a homogeneous graph, "edge features per relation (buys 4, ...)" on a typed one.
        let features = match &meta.types {
            None => format!("{} edge features", meta.edge_dim),
            Some(types) => {
                let featured = types.relations.iter().filter(|r| r.edge_dim > 0);
                let each: Vec<String> = featured.map(|r| format!("{} {}", r.name, r.edge_dim)).collect();
                format!("edge features per relation ({})", each.join(", "))
            }
        };
        let available = meta.edge_dim > 0 || meta.types.as_ref().is_some_and(GraphTypes::has_edge_features);
        if self.read {
            let how = if self.standardized { "standardized with the edge tables' statistics" } else { "as they are" };
            format!("the {} layers read the records' {features}, {how}", config.model.name())
        } else if !available {
            "the records have no edge features".into()
        } else {
            // Said, not refused: a job file shared by a GCN and an edge-aware model stays valid.
            let idle = if config.normalize_edge_features { "; normalize_edge_features has nothing to do" } else { "" };
            match config.edge_features {
                Some(false) => format!("the records' {features} are left out (edge_features = false{idle})"),
                _ => format!("{} ignores the records' edge features{idle}", config.model.name()),
            }
        }
    }
}

/// Where a worker starts: fresh parameters, or a checkpoint every worker agrees on.
struct Start {
    params: Vec<f32>,
    shard: ShardState,
    epoch: usize,
    tracker: Tracker,
    /// The metrics and timings lines of the run resumed.
    earlier: Option<(String, String)>,
}

impl Start {
    fn new<T: Learner>(
        worker: &mut Worker,
        config: &TrainConfig,
        setup: &Setup<T>,
        output: &Place,
    ) -> Result<Start, Error> {
        let (index, peers) = (worker.index(), worker.peers());
        if config.resume {
            let expected = params::flatten(&setup.template).len();
            let c = Checkpoint::resume(worker, &setup.source.set().io, output, expected)?;
            if c.params.len() != expected {
                return Err(Error::Resume(format!(
                    "the checkpoints in {} hold {} parameters, this job's model {expected}: resume with the model, \
                     sizes and edge features they were written with",
                    checkpoint::dir(output).shown(),
                    c.params.len()
                )));
            }
            if let Some(learned) = &setup.learned {
                let Some(rows) = &c.learned_rows else {
                    return Err(Error::Resume(format!(
                        "the checkpoints in {} hold no learned table: resume with the learned_embedding_dim they were \
                         written with",
                        checkpoint::dir(output).shown()
                    )));
                };
                let place = checkpoint::dir(output).child(rows);
                let io = &setup.source.set().io;
                crate::learned::checkpoint::load(io, &place, &mut learned.borrow().shard.borrow_mut())?;
            }
            if index == 0 {
                tracing::info!("train: resuming after epoch {} from {}", c.epoch, checkpoint::dir(output).shown());
            }
            let earlier = Some((c.metrics, c.timings));
            return Ok(Start { params: c.params, shard: c.shard, epoch: c.epoch, tracker: c.tracker, earlier });
        }
        let params = params::flatten(&setup.template);
        let range = shard_range(params.len(), peers, index);
        let shard = ShardState {
            shard: index as u32,
            values: params[range.clone()].to_vec(),
            optimizer: ShardOptimizer::new(config, setup.keys.weight_decay, range.len()),
        };
        Ok(Start { params, shard, epoch: 0, tracker: Tracker::default(), earlier: None })
    }
}

/// One worker's whole training run on its share of the records.
pub fn train_worker<T: Learner>(
    worker: &mut Worker,
    config: &TrainConfig,
    source: &Arc<Source<T>>,
) -> Result<TrainSummary, Error> {
    train_fed(worker, config, source, Feed::Share)
}

/// One worker's whole training run on the batches `feed` gives.
pub fn train_fed<T: Learner>(
    worker: &mut Worker,
    config: &TrainConfig,
    source: &Arc<Source<T>>,
    feed: Feed<T>,
) -> Result<TrainSummary, Error> {
    let started = Instant::now();
    let index = worker.index();
    let setup = Setup::new(worker, config, source.clone())?;
    let io = source.set().io.clone();
    let output = io.output(&config.output)?;
    let (lease, run) = take_lease(worker, &io, &output)?;
    let Start { params, shard, epoch: first_epoch, tracker, earlier } = Start::new(worker, config, &setup, &output)?;
    let log = (index == 0).then(|| MetricsLog::open(io.clone(), &output, &run, config.epochs, earlier));
    let steps = match feed {
        Feed::Share => setup.plan.steps(config.batch_size),
        Feed::Given(_, steps) => steps,
    };
    let rows = setup.learned.as_ref().map(|l| l.borrow().shard.clone());
    let first_step = (first_epoch * (steps + 1)) as u64;
    let server = Server::new(worker, shard, rows, params.len(), first_step, config.mode, config.staleness);
    let out = RunOutput { io, output, run };
    let mut fed = FedRun { config, setup: &setup, out: &out, feed, steps, server, params, tracker, log };
    let waited = fed.epochs(worker, first_epoch)?;
    let best = setup.keys.patience > 0 && !fed.tracker.best_params.is_empty();
    if best {
        fed.params = fed.tracker.best_params.clone();
    }
    let (table, table_line) = write_learned(worker, &setup, &out, best)?;
    let saved = match lease {
        Some(lease) => fed.save(worker, lease, started, waited, table, table_line.as_ref()),
        None => Ok(()),
    };
    // Worker 0 commits; a commit that fails (another run committed first: 73) fails every
    // process alike, not only the one that holds worker 0.
    cluster::agree::<_, Error, tables::error::Report>(worker, saved)?;
    let FedRun { params, tracker, .. } = fed;
    Ok(TrainSummary {
        wait_seconds: waited.as_secs_f64(),
        cached_bytes: setup.source.records_bytes(),
        histories: histories_line(worker, &setup),
        learned: table_line,
        keys: setup.keys.line(config, T::TASK),
        ..TrainSummary::tracked(&tracker, best, metric_of(&setup.spec), started, params)
    })
}

impl TrainSummary {
    /// A run's summary as its `tracker` saw it, `metric` its scores', the model's `params`
    /// the best epoch's with `best` (else the last's); no wait, cache, learned table, keys
    /// or exchange (each stage sets its own).
    pub(crate) fn tracked(tracker: &Tracker, best: bool, metric: Metric, started: Instant, params: Vec<f32>) -> Self {
        TrainSummary {
            epochs: tracker.epochs,
            metric: metric.name(),
            best_epoch: tracker.best_epoch,
            best_valid: tracker.best_valid,
            test_at_best: tracker.test_at_best,
            seconds: started.elapsed().as_secs_f64(),
            wait_seconds: 0.0,
            params,
            written_epoch: if best { tracker.best_epoch } else { tracker.epochs },
            peak_rss: cluster::memory::peak_rss_bytes(),
            cached_bytes: 0,
            learned: None,
            keys: String::new(),
            exchanged: None,
            histories: None,
        }
    }
}

/// Worker 0's lease on `output` (see `tables::commit`; worker 0 commits), agreed on every
/// worker, and the run's id, the same on every worker.
fn take_lease(worker: &mut Worker, io: &Io, output: &Place) -> Result<(Option<Lease>, String), Error> {
    let lease = if worker.index() == 0 {
        Some(io.block_on(Lease::take(output, &new_run_id(), Stage::Train.name())))
    } else {
        None
    };
    let lease = cluster::agree::<_, Error, tables::error::Report>(worker, lease.transpose().map_err(Error::from))?;
    let run = cluster::broadcast(worker, lease.as_ref().map(|l| l.run().to_owned()))
        .ok_or_else(|| Error::Internal("no run id".into()))?;
    Ok((lease, run))
}

/// Where a run writes: the store, the model's directory and the run's id.
struct RunOutput {
    io: Arc<Io>,
    output: Place,
    run: String,
}

/// A record trainer's run in progress: its parameters (the latest, every worker's alike), the
/// parameter server, the tracker of the best epoch and worker 0's metrics log.
struct FedRun<'a, T: Learner> {
    config: &'a TrainConfig,
    setup: &'a Setup<T>,
    out: &'a RunOutput,
    feed: Feed<'a, T>,
    steps: usize,
    server: Server,
    params: Vec<f32>,
    tracker: Tracker,
    log: Option<MetricsLog>,
}

impl<'a, T: Learner> FedRun<'a, T> {
    /// Trains and evaluates epochs `first..epochs`, until an early stop; each epoch's
    /// batches start loading at the last step of the one before. Returns the time compute
    /// waited for data.
    fn epochs(&mut self, worker: &mut Worker, first: usize) -> Result<Duration, Error> {
        let (config, setup, index) = (self.config, self.setup, worker.index());
        let mut waited = Duration::ZERO;
        let mut next = None;
        // The first epoch's histories; each later one starts from the refresh before the
        // evaluation of the one before.
        refresh_histories(worker, setup, &self.params)?;
        for epoch in first..config.epochs {
            let clock = Instant::now();
            let lr = learning_rate(config, epoch);
            let batches = next.take().unwrap_or_else(|| EpochBatches::new(config, setup, index, epoch, self.feed));
            let (server, params) = (&mut self.server, &mut self.params);
            let mut done = train_epoch(worker, config, setup, server, params, (epoch, self.steps, lr), batches)?;
            next = done.next.take();
            done.phases.histories_seconds = refresh_histories(worker, setup, &self.params)?;
            let (server, params) = (&mut self.server, &mut self.params);
            let scores = T::evaluate_epoch(worker, config, setup, server, params, lr, &mut done.stats)?;
            waited += done.waited;
            let train_loss = done.stats.loss_sum / done.stats.loss_rows.max(1) as f64;
            let metrics = EpochMetrics { epoch: epoch + 1, train_loss, scores };
            self.epoch_done(worker, &metrics, done, clock)?;
            if config.checkpoint_every > 0 && (epoch + 1) % config.checkpoint_every == 0 {
                self.checkpoint(worker, epoch + 1)?;
            }
            if self.tracker.should_stop(setup.keys.patience) {
                if index == 0 {
                    tracing::info!(
                        "train: early stop after epoch {} ({} epochs without a better validation score)",
                        epoch + 1,
                        setup.keys.patience
                    );
                }
                break;
            }
        }
        Ok(waited)
    }

    /// Ends an epoch (`clock` its start): fails on every worker alike when its loss or a
    /// parameter is not finite (no model is written), tracks the best epoch (keeping the
    /// learned rows' best when early stop needs them), and logs its metrics and timing.
    fn epoch_done(
        &mut self,
        worker: &mut Worker,
        metrics: &EpochMetrics,
        done: EpochDone<'_, T>,
        clock: Instant,
    ) -> Result<(), Error> {
        let finite = metrics.train_loss.is_finite() && self.params.iter().all(|p| p.is_finite());
        let diverged = if finite {
            Ok(())
        } else {
            let rates = if self.setup.learned.is_some() { "lr or learned_embedding_lr" } else { "lr" };
            Err(Error::Diverged(format!(
                "epoch {}: the training loss is {} or a parameter is not finite; lower {rates}, or check the \
                 features (no model is written)",
                metrics.epoch, metrics.train_loss
            )))
        };
        cluster::agree::<_, Error, tables::error::Report>(worker, diverged)?;
        let best = self.tracker.observe(metrics, &self.params);
        if let Some(learned) = self.setup.learned.as_ref().filter(|_| best && self.setup.keys.patience > 0) {
            learned.borrow().shard.borrow_mut().keep_best();
        }
        let Some(log) = &mut self.log else { return Ok(()) };
        let seconds = clock.elapsed().as_secs_f64();
        let rate = (done.seen * worker.peers()) as f64 / seconds.max(1e-9);
        let timing = EpochTiming {
            epoch: metrics.epoch,
            seconds,
            records_per_second: rate,
            wait_seconds: done.waited.as_secs_f64(),
            phases: done.phases,
        };
        log.write(metrics, &timing)
    }

    /// Writes this worker's checkpoint after `epochs` epochs: its learned rows first (the
    /// checkpoint that names them is written after them), then the parameters, its shard and
    /// the metrics so far; the previous checkpoint's rows, no checkpoint's now, are removed.
    fn checkpoint(&self, worker: &Worker, epochs: usize) -> Result<(), Error> {
        let (RunOutput { io, output, run }, index, every) = (self.out, worker.index(), self.config.checkpoint_every);
        let shard = self.server.shard_state().ok_or_else(|| Error::Internal("server shard missing".into()))?;
        let (metrics, timings) = self.log.as_ref().map(MetricsLog::texts).unwrap_or_default();
        let learned_rows = match &self.setup.learned {
            Some(learned) => {
                let name = crate::learned::checkpoint::name(run, index, epochs);
                let place = checkpoint::dir(output).child(&name);
                crate::learned::checkpoint::save(io, place, &learned.borrow().shard.borrow())?;
                Some(name)
            }
            None => None,
        };
        let checkpoint = Checkpoint {
            epoch: epochs,
            workers: worker.peers(),
            params: self.params.clone(),
            shard,
            tracker: self.tracker.clone(),
            metrics,
            timings,
            learned_rows,
        };
        checkpoint.save(io, output, run, index)?;
        if self.setup.learned.is_some() && epochs > every {
            let old = crate::learned::checkpoint::name(run, index, epochs - every);
            io.block_on(checkpoint::dir(output).child(&old).remove())?;
        }
        Ok(())
    }

    /// Worker 0 (the lease's holder) writes the model, with the run's facts and every
    /// worker's learned rows (`table`, `learned` its line), and commits it.
    fn save(
        &self,
        worker: &Worker,
        lease: Lease,
        started: Instant,
        waited: Duration,
        table: Vec<tables::staging::StagedPart>,
        learned: Option<&String>,
    ) -> Result<(), Error> {
        let Some(log) = &self.log else { return Ok(()) };
        let (setup, set) = (self.setup, self.setup.source.set());
        let mut lines = vec![
            ("epochs".into(), self.tracker.epochs.to_string()),
            ("waited".into(), format!("{:.2}s for data (worker 0)", waited.as_secs_f64())),
            ("cached".into(), format!("{:.0} MB of records (worker 0)", setup.source.records_bytes() as f64 / 1e6)),
        ];
        if let Some(line) = learned {
            lines.push(("learned".into(), line.clone()));
        }
        let facts = run_facts(worker.peers(), started, lines);
        let mut meta = records_meta(&setup.spec, set, self.params.len());
        if self.config.control_variate {
            // Trained to estimate the sum over every in-edge: GraphInfer runs it over all of them.
            (meta.fanouts, meta.sampler) = (Vec::new(), schemas::Sampler::All);
        }
        let saved = Saving { log, meta, io: &set.io, params: &self.params, device: &setup.base, facts, table };
        save_model(self.config, &self.out.output, lease, saved)
    }
}

/// Every worker writes its learned rows (the kept best ones with `best`), for worker 0 to
/// commit with the weights: returns every worker's parts and the table's line for the
/// summary (nothing without a learned table).
fn write_learned<T: Learner>(
    worker: &mut Worker,
    setup: &Setup<T>,
    out: &RunOutput,
    best: bool,
) -> Result<(Vec<tables::staging::StagedPart>, Option<String>), Error> {
    let Some(learned) = &setup.learned else { return Ok((Vec::new(), None)) };
    let index = worker.index();
    let learned = learned.borrow();
    let written = learned.write_parts(&out.io, &out.output, &out.run, index, best);
    let parts = cluster::agree::<_, Error, tables::error::Report>(worker, written)?;
    // Read, then let go: no borrow of the rows outlives a step of the worker.
    let (len, bytes_per_row, dim) = {
        let shard = learned.shard.borrow();
        (shard.len() as u64, shard.bytes_per_row(), shard.dim)
    };
    let held = cluster::all_gather(worker, vec![(index, len)]);
    let (rows, most) = (held.iter().map(|(_, n)| n).sum::<u64>(), held.iter().map(|(_, n)| *n).max());
    let mb = most.unwrap_or(0) as f64 * bytes_per_row as f64 / 1e6;
    let line = format!("{rows} rows of {dim} (at most {mb:.1} MB with the optimizer's state on a worker)");
    Ok((cluster::all_gather(worker, parts), Some(line)))
}

/// What an epoch's training steps add up to.
struct EpochDone<'a, T: Example> {
    /// The next epoch's batches, whose loader started at this epoch's last step (none after
    /// the run's last epoch).
    next: Option<EpochBatches<'a, T>>,
    stats: Stats,
    /// Training records (roots, or supervision edges) this worker computed.
    seen: usize,
    /// Time compute waited for batches.
    waited: Duration,
    /// Where the steps spent their time.
    phases: Phases,
}

/// Where one epoch's training batches come from.
enum EpochBatches<'a, T: Example> {
    /// This worker's share in the epoch's seeded order, from a loader thread.
    Share(Batches<T>),
    /// The batches [`Feed::Given`] gives.
    Given(&'a dyn Fn(usize, usize) -> Option<Vec<T>>),
}

impl<'a, T: Example> EpochBatches<'a, T> {
    /// Epoch `epoch`'s batches on worker `index`; a share's loader starts building at once.
    fn new(config: &TrainConfig, setup: &Setup<T>, index: usize, epoch: usize, feed: Feed<'a, T>) -> Self {
        match feed {
            Feed::Share => {
                let order = Order { seed: config.seed, epoch, worker: index };
                let units = setup.units(Pass::Train);
                let records =
                    RecordStream::train(setup.source.clone(), units, order, schemas::job::mb_bytes(config.shuffle_mb));
                let spec = BatchSpec { redraw: redraw(config, epoch), ..setup.batch_spec.clone() };
                EpochBatches::Share(Batches::new(records, config.batch_size, spec, config.prefetch))
            }
            Feed::Given(given, _) => EpochBatches::Given(given),
        }
    }

    /// The same feed's batches for epoch `epoch`.
    fn following(&self, config: &TrainConfig, setup: &Setup<T>, index: usize, epoch: usize) -> Self {
        match self {
            EpochBatches::Share(_) => EpochBatches::new(config, setup, index, epoch, Feed::Share),
            EpochBatches::Given(given) => EpochBatches::Given(*given),
        }
    }
}

/// Epoch `epoch`'s draw of the last layer's in-edges (`control_variate_fanout`), keyed on the
/// seed and the epoch: the same on any cluster shape.
fn redraw(config: &TrainConfig, epoch: usize) -> Option<Redraw> {
    let fanout = config.control_variate_fanout?;
    Some(Redraw { fanout, key: cluster::hash::hash3(config.seed, epoch as u64, REDRAW) })
}

/// The tag of [`redraw`]'s keys.
const REDRAW: u64 = 0x7265_6472_6177;

/// One epoch of steps: every worker takes part in every step (with an empty push when it has
/// no batch left), so the steps line up across workers.
///
/// When the evaluation runs from kept batches, the next epoch's loader starts once this
/// epoch's last batch is taken, and builds its first batches while the last step computes and
/// the epoch is evaluated (on Cora, a whole epoch's wait). Its order depends on (seed, epoch,
/// worker), not on the parameters, so the batches are the same. Memory stays within a
/// training pass's: this epoch's loader has nothing left to hold by then, and an evaluation
/// from kept batches streams nothing. A streamed evaluation keeps the later start, so two
/// passes' read-ahead never coexist.
fn train_epoch<'a, T: Learner>(
    worker: &mut Worker,
    config: &TrainConfig,
    setup: &Setup<T>,
    server: &mut Server,
    params: &mut [f32],
    (epoch, steps, lr): (usize, usize, f32),
    mut batches: EpochBatches<'a, T>,
) -> Result<EpochDone<'a, T>, Error> {
    let phases = Phases::default();
    let mut done = EpochDone { next: None, stats: Stats::default(), seen: 0, waited: Duration::ZERO, phases };
    for step in 0..steps {
        let next = match &mut batches {
            EpochBatches::Share(b) => b.next_batch()?,
            EpochBatches::Given(given) => given(epoch, step).map(|r| (T::build(&r, &setup.batch_spec), Duration::ZERO)),
        };
        if step + 1 == steps && epoch + 1 < config.epochs && setup.evaluates_kept_batches() {
            done.next = Some(batches.following(config, setup, worker.index(), epoch + 1));
        }
        let (gradient, ids) = match next {
            None => (Gradient::default(), Vec::new()),
            Some((batch, waited)) => {
                if worker.index() == 0 {
                    let since = setup.started.elapsed().as_secs_f64();
                    setup.first_step.call_once(|| tracing::info!("train: first step {since:.1}s after the start"));
                }
                done.waited += waited;
                done.seen += T::len(&batch);
                let dropout = Dropout {
                    seed: config.seed,
                    step: server.steps_done(),
                    rate: config.dropout,
                    attention_rate: config.attention_dropout,
                };
                let (ids, keys) =
                    if setup.learned.is_some() { T::graph(&batch).learned_keys() } else { Default::default() };
                let mut lap = Lap::start();
                let learned = setup.learned.as_ref().map(|l| l.borrow_mut().pull(worker, &ids, &keys));
                let cv = match &setup.histories {
                    Some(h) => Some(h.borrow_mut().control_variate(worker, T::graph(&batch), &setup.device)?),
                    None => None,
                };
                done.phases.exchange_seconds += lap.lap();
                (T::gradient(setup, config, params, &batch, dropout, &mut done.phases, learned, cv), ids)
            }
        };
        let mut lap = Lap::start();
        let row_lr = setup.learned.as_ref().map_or(lr, |l| l.borrow().lr(lr));
        let rows = RowGrads { ids: &ids, grads: &gradient.rows, lr: row_lr };
        let Gradient { grad, count, stats, .. } = &gradient;
        for (_, total) in server.step(worker, grad, *count, lr, *stats, params, false, Some(rows)) {
            done.stats.add(&total);
        }
        done.phases.exchange_seconds += lap.lap();
    }
    if let EpochBatches::Share(batches) = &mut batches {
        whole_share_read(worker.index(), setup, batches, &mut done)?;
    }
    Ok(done)
}

/// With control variates, sets every node's history with `params` on every worker; returns the
/// seconds it took (0 without).
fn refresh_histories<T: Learner>(worker: &mut Worker, setup: &Setup<T>, params: &[f32]) -> Result<f64, Error> {
    let Some(histories) = &setup.histories else { return Ok(0.0) };
    let clock = Instant::now();
    histories.borrow_mut().refresh(worker, setup, params)?;
    let seconds = clock.elapsed().as_secs_f64();
    let mut histories = histories.borrow_mut();
    (histories.refreshes, histories.seconds) = (histories.refreshes + 1, histories.seconds + seconds);
    Ok(seconds)
}

/// The summary's line on the histories, every worker's: "2708 nodes, 16 wide (0.2 MB on the
/// largest share), refreshed 201 times in 3.1 s; their roots kept between refreshes (0.4 MB on
/// the largest share)"; nothing without control variates.
fn histories_line<T: Learner>(worker: &mut Worker, setup: &Setup<T>) -> Option<String> {
    let histories = setup.histories.as_ref()?.borrow();
    let shard = histories.shard.borrow();
    let kept = histories.kept_roots_bytes();
    let share = (shard.len() as u64, shard.bytes() as u64, kept.unwrap_or(0), u64::from(kept.is_some()));
    let shares = cluster::all_gather(worker, vec![share]);
    let nodes: u64 = shares.iter().map(|s| s.0).sum();
    let largest = shares.iter().map(|s| s.1).max().unwrap_or(0);
    let roots = match shares.iter().filter(|s| s.3 == 1).count() {
        k if k == shares.len() => {
            let largest = shares.iter().map(|s| s.2).max().unwrap_or(0);
            format!("their roots kept between refreshes ({:.1} MB on the largest share)", largest as f64 / 1e6)
        }
        0 => "their roots read from the records at each refresh (they do not fit in cache_mb)".to_owned(),
        k => format!("their roots kept between refreshes on {k} of {} workers (cache_mb)", shares.len()),
    };
    Some(format!(
        "{nodes} nodes' histories, {} wide ({:.1} MB on the largest share), refreshed {} times in {:.1}s; {roots}",
        shard.width,
        largest as f64 / 1e6,
        histories.refreshes,
        histories.seconds
    ))
}

/// Once an epoch's steps are done: adds the loader's build time to `done`'s phases, and fails
/// where the worker (`index`) did not read exactly its planned share of the training records
/// (the record set changed during training).
fn whole_share_read<T: Learner>(
    index: usize,
    setup: &Setup<T>,
    batches: &mut Batches<T>,
    done: &mut EpochDone<'_, T>,
) -> Result<(), Error> {
    done.phases.add_build(batches.build_time());
    let planned = setup.plan.share_totals(index).train as usize;
    if done.seen != planned || batches.next_batch()?.is_some() {
        return Err(Error::Internal(format!(
            "{}: the record set changed during training ({planned} training records planned, {} read)",
            setup.source.set().place.shown(),
            done.seen
        )));
    }
    Ok(())
}

/// What `best_valid` and `test_at_best` measure for a model of `spec`.
pub(crate) fn metric_of(spec: &ModelSpec) -> Metric {
    match spec.task {
        Task::Node => Metric::of(spec.multi_label),
        Task::Link => Metric::Auc,
    }
}

/// What worker 0 saves at the end of a run.
pub(crate) struct Saving<'a> {
    pub log: &'a MetricsLog,
    pub meta: ModelMeta,
    pub io: &'a Arc<Io>,
    pub params: &'a [f32],
    pub device: &'a Device,
    pub facts: RunFacts,
    /// The learned embedding table's parts, every worker's.
    pub table: Vec<tables::staging::StagedPart>,
}

/// The description of a model of `spec` trained on the records of `set`: their flatten
/// settings, so that inference samples the graph as the records did.
fn records_meta(spec: &ModelSpec, set: &RecordSet, parameters: usize) -> ModelMeta {
    ModelMeta {
        format: 1,
        spec: spec.clone(),
        hops: set.meta.hops,
        fanouts: set.meta.fanouts.clone(),
        sampler: set.meta.sampler,
        flatten_seed: set.meta.seed,
        parameters,
        relation_fanouts: set.meta.relation_fanouts.clone(),
        link_relation: set.meta.link.as_ref().and_then(|l| l.relation),
    }
}

/// A run's facts for its model: the time since `started`, its `workers`, this process's peak
/// memory and the stage's `lines`.
pub(crate) fn run_facts(workers: usize, started: Instant, lines: Vec<(String, String)>) -> RunFacts {
    RunFacts {
        seconds: started.elapsed().as_secs_f64(),
        workers,
        peak_rss: vec![cluster::memory::peak_rss_bytes().unwrap_or(0)],
        lines,
        ..RunFacts::default()
    }
}

/// The model files (see `gnn::io`) with their description, and the metrics, committed under
/// a manifest with the job's settings.
pub(crate) fn save_model(config: &TrainConfig, output: &Place, lease: Lease, saving: Saving) -> Result<(), Error> {
    let Saving { log, meta, io, params, device, facts, table } = saving;
    let settings =
        serde_json::to_value(config).map_err(|source| tables::Error::Encode { what: "job settings", source })?;
    let (metrics, timings) = log.texts();
    let files = vec![(METRICS, metrics.into_bytes()), (TIMINGS, timings.into_bytes())];
    let replace = config.overwrite || config.resume;
    let saved = gnn::io::Saved { meta: &meta, params, settings, files, facts, replace, table };
    Ok(gnn::io::save(io, output, lease, saved, device)?)
}
