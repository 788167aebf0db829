//! A `[train]` job: every timely worker streams its share of the records (see [`crate::plan`]
//! and [`crate::stream`]), computes gradients on its batches and trades them with the
//! parameter-server shards (one per worker); evaluation counts go through the same server.
//! Worker 0 writes metrics, checkpoints and the model.
//!
//! A worker's run is four named steps: [`Setup::new`] (the plan, model shape, device),
//! [`Start::new`] (fresh parameters or a checkpoint), [`train_epoch`] and [`evaluate_epoch`],
//! with a [`Tracker`] deciding early stopping and which parameters are written.

use std::sync::Arc;
use std::time::{Duration, Instant};

use burn::prelude::*;
use cluster::Failure;
use gnn::batch::{Batch, BatchSpec};
use gnn::model::{BatchTensors, Dropout, Gnn, loss, score};
use gnn::params;
use schemas::edge_stats::EdgeStats;
use schemas::job::Aggregation;
use schemas::model::{ModelKind, ModelMeta, ModelSpec};
use schemas::{ClusterConfig, Label, LabelKind, Record, Split};
use tables::commit::{Stage, new_run_id};
use tables::lease::Lease;
use tables::{Io, Place};
use timely::worker::Worker;

use crate::checkpoint::{self, Checkpoint};
use crate::error::Error;
use crate::loader::Batches;
use crate::metrics::{EpochMetrics, EpochTiming, METRICS, Metric, MetricsLog, TIMINGS};
use crate::optim::{ShardOptimizer, learning_rate};
use crate::plan::Plan;
use crate::ps::{Score, Server, ShardState, Stats, shard_range};
use crate::reader::{Pass, RecordSet, Unit};
use crate::stream::{Order, RecordStream, Source};
use crate::tracker::Tracker;

pub use schemas::job::TrainConfig;

/// What a training run ended with.
#[derive(Debug, Clone)]
pub struct TrainSummary {
    pub epochs: usize,
    /// `accuracy` or `micro_f1`: what `best_valid` and `test_at_best` measure.
    pub metric: &'static str,
    /// 1-based.
    pub best_epoch: usize,
    pub best_valid: f64,
    pub test_at_best: f64,
    pub seconds: f64,
    pub wait_seconds: f64,
    /// The final flat parameters (the best epoch's when `patience` > 0).
    pub params: Vec<f32>,
    /// This process's peak resident memory, where the platform reports it.
    pub peak_rss: Option<u64>,
    /// Decoded records worker 0 kept between epochs (see `cache_mb`).
    pub cached_bytes: u64,
}

/// Runs a training job on this process's workers. Any worker's failure ends every worker.
pub fn run(io: &Arc<Io>, config: &TrainConfig, cluster: &ClusterConfig) -> Result<TrainSummary, Failure<Error>> {
    let set = RecordSet::open(io.clone(), &config.records).map_err(Failure::Worker)?;
    check_output(config, &set).map_err(Failure::Worker)?;
    let mut config = config.clone();
    // The kernel's threads: the cores shared among this process's workers unless set.
    if config.kernel_threads == 0 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        config.kernel_threads = (cores / cluster.threads()).max(1);
    }
    let (config, set) = (Arc::new(config), Arc::new(set));
    let workers = cluster.threads();
    let summaries = cluster::execute(cluster, move |worker| {
        let source = Arc::new(Source::new(set.clone(), cache_budget(&config, workers)));
        train_worker(worker, &config, &source)
    })?;
    summaries.into_iter().next().ok_or_else(|| Failure::Panic("no worker ran".into()))
}

/// The output is a directory apart from the records, and holds no committed model unless the
/// job replaces it (`overwrite`) or continues it (`resume`).
fn check_output(config: &TrainConfig, set: &RecordSet) -> Result<(), Error> {
    let output = set.io.output(&config.output)?;
    let replace = config.overwrite || config.resume;
    Ok(set.io.block_on(tables::commit::check_output(&output, &[&set.place], replace, &gnn::io::LAYOUT))?)
}

/// A worker's share of the process's `cache_mb`.
pub fn cache_budget(config: &TrainConfig, workers: usize) -> u64 {
    (config.cache_mb << 20) / workers.max(1) as u64
}

/// Where a worker's training batches come from.
#[derive(Clone, Copy)]
pub enum Feed<'a> {
    /// Its share of the record set, in each epoch's seeded order: what [`run`] trains on.
    Share,
    /// The records of each (epoch, step)'s batch, and the steps per epoch: one worker can
    /// then train on the combined batches of several, to compare runs across worker counts.
    Given(&'a dyn Fn(usize, usize) -> Option<Vec<Record>>, usize),
}

/// What a worker trains and evaluates on, and the model's shape and device.
pub struct Setup {
    pub plan: Plan,
    /// This worker's units, ascending, and where their records come from.
    pub units: Vec<Unit>,
    pub source: Arc<Source>,
    pub spec: ModelSpec,
    pub batch_spec: BatchSpec,
    /// The device, and the same with autodiff.
    pub base: Device,
    pub device: Device,
    pub aggregation: Aggregation,
    /// The model's structure: each step loads the current parameters into a clone.
    pub template: Gnn,
    /// When the worker started, and whether its first step has been reported.
    started: Instant,
    first_step: std::sync::Once,
    /// Evaluation batches built once and kept between epochs, when they fit `cache_mb`.
    eval_cache: std::cell::RefCell<EvalCache>,
}

/// Evaluation's batches on the device. The evaluation pass visits the same records in the same
/// order every epoch, so its batches and their tensors are built once when they fit, together
/// with the records cached so far, in the worker's share of `cache_mb`; the evaluation records
/// then leave the record cache. A set with wide features (Cora) then costs a forward pass per
/// epoch, not a decode, a batch build and a copy to the device; a set larger than the cache
/// is streamed every epoch as before, and never holds more than the budget.
#[derive(Default)]
enum EvalCache {
    /// Not known yet: the first pass measures it.
    #[default]
    Unknown,
    Kept(Vec<(Batch, BatchTensors)>),
    /// Larger than the budget: streamed every epoch.
    TooLarge,
}

/// The bytes a built batch and its tensors hold: the feature rows twice, and the edges with
/// their features (twice too).
fn batch_bytes(batch: &Batch) -> u64 {
    let edges: usize = batch.layers.iter().map(|l| l.src.len()).sum();
    let edge_features: usize = batch.layers.iter().map(|l| l.features.len()).sum();
    (batch.features.len() * 8 + edges * 32 + edge_features * 8 + batch.roots.len() * 64) as u64
}

impl Setup {
    pub fn new(worker: &mut Worker, config: &TrainConfig, source: Arc<Source>) -> Result<Setup, Error> {
        let started = Instant::now();
        let set = source.set();
        let plan = Plan::gather(worker, set, config.classes)?;
        let totals = plan.totals();
        if worker.index() == 0 {
            tracing::info!(
                "train: {} row groups hold {} train, {} valid, {} test labeled records; {} steps per epoch (planned in {:.1}s)",
                plan.units.len(),
                totals.train,
                totals.valid,
                totals.test,
                plan.steps(config.batch_size),
                started.elapsed().as_secs_f64()
            );
        }
        check_learnable(config, set, totals.train, totals.valid)?;
        let classes = match set.meta.label {
            LabelKind::Targets(n) => n,
            LabelKind::Class => config.classes.unwrap_or(totals.max_class as usize + 1),
        };
        let gat = config.model == ModelKind::Gat;
        let (edge_dim, edge_stats) = edge_inputs(config, set)?;
        if worker.index() == 0 {
            tracing::info!("train: {}", edge_inputs_line(config, set, edge_dim, edge_stats.is_some()));
        }
        let spec = ModelSpec {
            kind: config.model,
            input_dim: set.meta.feature_dim,
            hidden: config.hidden,
            classes,
            layers: set.meta.hops,
            heads: if gat { config.heads } else { 1 },
            output_heads: if gat { config.output_heads } else { 1 },
            activation: config.activation,
            normalize_features: config.normalize_features,
            multi_label: matches!(set.meta.label, LabelKind::Targets(_)),
            edge_dim,
            normalize_edge_features: edge_stats.is_some(),
            edge_stats,
            task: Default::default(),
            decoder: None,
            seed: config.seed,
        };
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
        let units = plan.shares[worker.index()].iter().map(|&u| plan.units[u]).collect();
        Ok(Setup {
            plan,
            units,
            source: source.clone(),
            aggregation: config.aggregation,
            started,
            first_step: std::sync::Once::new(),
            eval_cache: Default::default(),
            template: Gnn::new(&spec, &base),
            spec,
            batch_spec,
            base,
            device,
        })
    }
}

/// The edge features the model reads: their width (0: none) and, with
/// `normalize_edge_features`, the record set's statistics that standardize them. They are
/// read when the records have them, `edge_features` does not say no, and the kind has a place
/// for them (GCN has none). Asking for edge features the records lack, or for statistics they
/// do not carry, is a usage error.
fn edge_inputs(config: &TrainConfig, set: &RecordSet) -> Result<(usize, Option<EdgeStats>), Error> {
    let available = set.meta.edge_dim;
    if config.edge_features == Some(true) && available == 0 {
        return Err(Error::Usage(format!(
            "[train] edge_features = true, but the records in {} have no edge features (flatten an edge table with a \
             features column, or leave edge_features out)",
            set.place.shown()
        )));
    }
    if available == 0 || config.edge_features == Some(false) || !config.model.uses_edge_features() {
        return Ok((0, None));
    }
    if !config.normalize_edge_features {
        return Ok((available, None));
    }
    let stats = set.meta.edge_stats.clone().ok_or_else(|| {
        Error::Usage(format!(
            "[train] normalize_edge_features = true, but the records in {} carry no edge feature statistics \
             (flatten them again, or set normalize_edge_features = false)",
            set.place.shown()
        ))
    })?;
    Ok((available, Some(stats)))
}

/// The setup's log line on the edge features the model reads (see [`edge_inputs`]).
fn edge_inputs_line(config: &TrainConfig, set: &RecordSet, edge_dim: usize, standardized: bool) -> String {
    let available = set.meta.edge_dim;
    if edge_dim > 0 {
        let how = if standardized { "standardized with the edge table's statistics" } else { "as they are" };
        format!("the {} layers read the records' {edge_dim} edge features, {how}", config.model.name())
    } else if available == 0 {
        "the records have no edge features".into()
    } else if config.edge_features == Some(false) {
        format!("the records' {available} edge features are left out (edge_features = false)")
    } else {
        format!("{} ignores the records' edge features", config.model.name())
    }
}

/// Nothing to learn is an error on every worker alike (they share the plan's totals): no
/// labeled training records, or early stopping without validation records.
fn check_learnable(config: &TrainConfig, set: &RecordSet, train: u64, valid: u64) -> Result<(), Error> {
    if train == 0 {
        return Err(Error::NothingToLearn(format!(
            "{}: no training records with a label (split \"train\" and a non-null label); flatten targets that include \
             labeled train nodes",
            set.place.shown()
        )));
    }
    if valid == 0 && config.patience > 0 {
        return Err(Error::NothingToLearn(format!(
            "{}: patience = {} stops early on the validation score, but there are no labeled validation records; \
             set patience = 0 or flatten the valid split",
            set.place.shown(),
            config.patience
        )));
    }
    Ok(())
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
    fn new(worker: &mut Worker, config: &TrainConfig, setup: &Setup, output: &Place) -> Result<Start, Error> {
        let (index, peers) = (worker.index(), worker.peers());
        if config.resume {
            let c = Checkpoint::resume(worker, &setup.source.set().io, output)?;
            let expected = params::flatten(&setup.template).len();
            if c.params.len() != expected {
                return Err(Error::Resume(format!(
                    "the checkpoints in {} hold {} parameters, this job's model {expected}: resume with the model, \
                     sizes and edge features they were written with",
                    checkpoint::dir(output).shown(),
                    c.params.len()
                )));
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
            optimizer: ShardOptimizer::new(config, range.len()),
        };
        Ok(Start { params, shard, epoch: 0, tracker: Tracker::default(), earlier: None })
    }
}

/// One worker's whole training run on its share of the records.
pub fn train_worker(worker: &mut Worker, config: &TrainConfig, source: &Arc<Source>) -> Result<TrainSummary, Error> {
    train_fed(worker, config, source, Feed::Share)
}

/// One worker's whole training run on the batches `feed` gives.
pub fn train_fed(
    worker: &mut Worker,
    config: &TrainConfig,
    source: &Arc<Source>,
    feed: Feed,
) -> Result<TrainSummary, Error> {
    let started = Instant::now();
    let index = worker.index();
    let setup = Setup::new(worker, config, source.clone())?;
    let set = source.set();
    let io = set.io.clone();
    let output = io.output(&config.output)?;
    // Worker 0 holds the run's lease on the output (see `tables::commit`) and commits.
    let lease =
        if index == 0 { Some(io.block_on(Lease::take(&output, &new_run_id(), Stage::Train.name()))) } else { None };
    let lease = cluster::agree::<_, Error, tables::error::Report>(worker, lease.transpose().map_err(Error::from))?;
    let run = cluster::broadcast(worker, lease.as_ref().map(|l| l.run().to_owned()))
        .ok_or_else(|| Error::Internal("no run id".into()))?;
    let Start { mut params, shard, epoch: first_epoch, mut tracker, earlier } =
        Start::new(worker, config, &setup, &output)?;
    let mut log = (index == 0).then(|| MetricsLog::open(io.clone(), &output, &run, config.epochs, earlier));
    let steps = match feed {
        Feed::Share => setup.plan.steps(config.batch_size),
        Feed::Given(_, steps) => steps,
    };
    let mut server =
        Server::new(worker, shard, params.len(), (first_epoch * (steps + 1)) as u64, config.mode, config.staleness);
    let mut waited = Duration::ZERO;

    for epoch in first_epoch..config.epochs {
        let clock = Instant::now();
        let lr = learning_rate(config, epoch);
        let mut done = train_epoch(worker, config, &setup, &mut server, &mut params, (epoch, steps, lr), feed)?;
        let evaluated = evaluate_epoch(worker, config, &setup, &mut server, &mut params, lr, &mut done.stats)?;
        waited += done.waited;
        let metrics = EpochMetrics {
            epoch: epoch + 1,
            metric: Metric::of(setup.spec.multi_label),
            train_loss: done.stats.loss_sum / done.stats.loss_rows.max(1) as f64,
            train: done.stats[Split::Train].ratio(),
            valid: evaluated[Split::Valid].ratio(),
            test: evaluated[Split::Test].ratio(),
        };
        // A loss or a parameter that is not finite ends the run on every worker, with no model.
        let finite = metrics.train_loss.is_finite() && params.iter().all(|p| p.is_finite());
        let diverged = if finite {
            Ok(())
        } else {
            Err(Error::Diverged(format!(
                "epoch {}: the training loss is {} or a parameter is not finite; lower lr, or check the features \
                 (no model is written)",
                epoch + 1,
                metrics.train_loss
            )))
        };
        cluster::agree::<_, Error, tables::error::Report>(worker, diverged)?;
        tracker.observe(&metrics, &params);
        if let Some(log) = &mut log {
            let seconds = clock.elapsed().as_secs_f64();
            let rate = (done.seen * worker.peers()) as f64 / seconds.max(1e-9);
            log.write(
                &metrics,
                &EpochTiming {
                    epoch: epoch + 1,
                    seconds,
                    records_per_second: rate,
                    wait_seconds: done.waited.as_secs_f64(),
                },
            )?;
        }
        if config.checkpoint_every > 0 && (epoch + 1) % config.checkpoint_every == 0 {
            let shard = server.shard_state().ok_or_else(|| Error::Internal("server shard missing".into()))?;
            let (metrics, timings) = log.as_ref().map(MetricsLog::texts).unwrap_or_default();
            let checkpoint = Checkpoint {
                epoch: epoch + 1,
                workers: worker.peers(),
                params: params.clone(),
                shard,
                tracker: tracker.clone(),
                metrics,
                timings,
            };
            checkpoint.save(&io, &output, &run, index)?;
        }
        if tracker.should_stop(config.patience) {
            if index == 0 {
                tracing::info!(
                    "train: early stop after epoch {} ({} epochs without a better validation score)",
                    epoch + 1,
                    config.patience
                );
            }
            break;
        }
    }
    let params =
        if config.patience > 0 && !tracker.best_params.is_empty() { tracker.best_params.clone() } else { params };
    if let (Some(lease), Some(log)) = (lease, &log) {
        save_model(config, &output, lease, log, &setup.spec, set, &params, &setup.base)?;
    }
    Ok(TrainSummary {
        epochs: tracker.epochs,
        metric: Metric::of(setup.spec.multi_label).name(),
        best_epoch: tracker.best_epoch,
        best_valid: tracker.best_valid,
        test_at_best: tracker.test_at_best,
        seconds: started.elapsed().as_secs_f64(),
        wait_seconds: waited.as_secs_f64(),
        params,
        peak_rss: cluster::memory::peak_rss_bytes(),
        cached_bytes: setup.source.cached_bytes(),
    })
}

/// What an epoch's training steps add up to.
struct EpochDone {
    stats: Stats,
    /// Training roots this worker computed.
    seen: usize,
    /// Time compute waited for batches.
    waited: Duration,
}

/// One epoch of steps: every worker takes part in every step (with an empty push when it has
/// no batch left), so the steps line up across workers.
fn train_epoch(
    worker: &mut Worker,
    config: &TrainConfig,
    setup: &Setup,
    server: &mut Server,
    params: &mut [f32],
    (epoch, steps, lr): (usize, usize, f32),
    feed: Feed,
) -> Result<EpochDone, Error> {
    let order = Order { seed: config.seed, epoch, worker: worker.index() };
    let records = RecordStream::train(setup.source.clone(), &setup.units, order, config.shuffle_mb << 20);
    let mut batches = matches!(feed, Feed::Share)
        .then(|| Batches::new(records, config.batch_size, setup.batch_spec.clone(), config.prefetch));
    let mut done = EpochDone { stats: Stats::default(), seen: 0, waited: Duration::ZERO };
    for step in 0..steps {
        let next = match (&mut batches, feed) {
            (Some(b), _) => b.next_batch()?,
            (None, Feed::Given(given, _)) => {
                given(epoch, step).map(|r| (Batch::build(&r, &setup.batch_spec), Duration::ZERO))
            }
            (None, Feed::Share) => None,
        };
        let (grad, count, stats) = match next {
            None => (Vec::new(), 0, Stats::default()),
            Some((batch, waited)) => {
                if worker.index() == 0 {
                    let since = setup.started.elapsed().as_secs_f64();
                    setup.first_step.call_once(|| tracing::info!("train: first step {since:.1}s after the start"));
                }
                done.waited += waited;
                done.seen += batch.roots.len();
                let dropout = Dropout {
                    seed: config.seed,
                    step: server.steps_done(),
                    rate: config.dropout,
                    attention_rate: config.attention_dropout,
                };
                gradient(setup, params, &batch, dropout)
            }
        };
        for (_, total) in server.step(worker, &grad, count, lr, stats, params, false) {
            done.stats.add(&total);
        }
    }
    if let Some(batches) = &mut batches {
        let planned = setup.plan.share_totals(worker.index()).train as usize;
        if done.seen != planned || batches.next_batch()?.is_some() {
            return Err(Error::Internal(format!(
                "{}: the record set changed during training ({planned} training records planned, {} read)",
                setup.source.set().place.shown(),
                done.seen
            )));
        }
    }
    Ok(done)
}

/// Every worker's valid and test counts, summed by shard 0. The evaluation step waits for every
/// step before it: late training stats (async mode) join the epoch's, and every worker sees the
/// same scores.
fn evaluate_epoch(
    worker: &mut Worker,
    config: &TrainConfig,
    setup: &Setup,
    server: &mut Server,
    params: &mut [f32],
    lr: f32,
    train: &mut Stats,
) -> Result<Stats, Error> {
    let eval = evaluate(setup, config, params, worker.index())?;
    let eval_step = server.steps_done();
    let mut evaluated = Stats::default();
    for (step, total) in server.step(worker, &[], 0, lr, eval, params, true) {
        if step == eval_step { evaluated = total } else { train.add(&total) }
    }
    Ok(evaluated)
}

/// The gradient sum of a batch's loss over its labeled roots, their count, and training stats.
fn gradient(setup: &Setup, params: &[f32], batch: &Batch, dropout: Dropout) -> (Vec<f32>, u64, Stats) {
    let device = &setup.device;
    let model = params::load(setup.template.clone(), params, device);
    let tensors = BatchTensors::with_input_dropout(batch, dropout, device, setup.aggregation);
    let logits = model.forward(&setup.spec, batch, &tensors, Some(dropout));
    let (hits, out_of) = score(logits.clone().detach(), &batch.labels);
    let (loss, n) = loss(logits, &batch.labels);
    let loss_value = f64::from(loss.clone().into_data().try_to_vec::<f32>().map_or(f32::NAN, |v| v[0]));
    let mut grad = params::gradients(&model, &loss.backward());
    grad.iter_mut().for_each(|g| *g *= n as f32);
    let mut stats = Stats::default();
    (stats.loss_sum, stats.loss_rows) = (loss_value * n as f64, n as u64);
    stats[Split::Train] = Score { hits, out_of };
    (grad, n as u64, stats)
}

/// Records per evaluation batch.
const EVAL_BATCH: usize = 2048;

/// The evaluation pass: from the kept batches when the first pass kept them (see
/// [`EvalCache`]), else streamed; the first pass keeps what it built while it fits.
fn evaluate(setup: &Setup, config: &TrainConfig, params: &[f32], index: usize) -> Result<Stats, Error> {
    let model = params::load(setup.template.clone(), params, &setup.base);
    let mut total = Stats::default();
    if let EvalCache::Kept(kept) = &*setup.eval_cache.borrow() {
        kept.iter().for_each(|(batch, tensors)| score_batch(setup, &model, batch, tensors, &mut total));
        return Ok(total);
    }
    let records = RecordStream::evaluate(setup.source.clone(), &setup.units);
    let mut batches = Batches::new(records, EVAL_BATCH, setup.batch_spec.clone(), config.prefetch);
    let mut cache = setup.eval_cache.borrow_mut();
    let (mut kept, mut bytes) = (Vec::new(), 0u64);
    while let Some((batch, _)) = batches.next_batch()? {
        let tensors = BatchTensors::new(&batch, &setup.base, setup.aggregation);
        score_batch(setup, &model, &batch, &tensors, &mut total);
        if matches!(*cache, EvalCache::Unknown) {
            bytes += batch_bytes(&batch);
            if bytes + setup.source.cached_bytes() <= setup.source.budget() {
                kept.push((batch, tensors));
            } else {
                kept.clear();
                *cache = EvalCache::TooLarge;
            }
        }
    }
    if matches!(*cache, EvalCache::Unknown) {
        tracing::info!(
            "train: worker {index} keeps its {} evaluation batches between epochs ({} MB)",
            kept.len(),
            bytes >> 20
        );
        *cache = EvalCache::Kept(kept);
        setup.source.release(Pass::Evaluate);
    }
    Ok(total)
}

/// Adds one batch's valid and test score counts to `total`, without dropout (see
/// [`gnn::model::score`]).
fn score_batch(setup: &Setup, model: &Gnn, batch: &Batch, tensors: &BatchTensors, total: &mut Stats) {
    let logits = model.forward(&setup.spec, batch, tensors, None);
    for split in [Split::Valid, Split::Test] {
        let labels: Vec<Option<Label>> = batch
            .labels
            .iter()
            .zip(&batch.splits)
            .map(|(l, s)| if *s == Some(split) { l.clone() } else { None })
            .collect();
        let (hits, out_of) = score(logits.clone(), &labels);
        total[split].add(Score { hits, out_of });
    }
}

/// The model files (see `gnn::io`), with the flatten settings of the records, and the metrics,
/// committed under a manifest with the job's settings.
#[allow(clippy::too_many_arguments)]
fn save_model(
    config: &TrainConfig,
    output: &Place,
    lease: Lease,
    log: &MetricsLog,
    spec: &ModelSpec,
    set: &RecordSet,
    params: &[f32],
    device: &Device,
) -> Result<(), Error> {
    let meta = ModelMeta {
        format: 1,
        spec: spec.clone(),
        hops: set.meta.hops,
        fanouts: set.meta.fanouts.clone(),
        sampler: set.meta.sampler,
        flatten_seed: set.meta.seed,
        parameters: params.len(),
    };
    let settings =
        serde_json::to_value(config).map_err(|source| tables::Error::Encode { what: "job settings", source })?;
    let (metrics, timings) = log.texts();
    let files = vec![(METRICS, metrics.into_bytes()), (TIMINGS, timings.into_bytes())];
    let saved = gnn::io::Saved { meta: &meta, params, settings, files };
    Ok(gnn::io::save(&set.io, output, lease, saved, device)?)
}
