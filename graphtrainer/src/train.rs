//! A `[train]` job: every timely worker reads its share of the records, computes gradients on
//! its batches and trades them with the parameter-server shards (one per worker); evaluation
//! counts go through the same server. Worker 0 writes metrics, checkpoints and the model.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use burn::prelude::*;
use burn::store::{BurnpackStore, ModuleSnapshot};
use gnn::batch::{Batch, BatchSpec};
use gnn::model::{BatchTensors, Dropout, Gnn, loss, score};
use gnn::{RecordGraph, params};
use schemas::LabelKind;
use schemas::job::{Aggregation, DeviceKind};
use schemas::model::{ModelMeta, ModelSpec};
use schemas::{ClusterConfig, Split};
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::error::Error;
use crate::loader::{Batches, epoch_order};
use crate::optim::{ShardOptimizer, learning_rate};
use crate::ps::{Server, ShardState, Stats, shard_range};
use crate::reader::RecordSet;

pub use schemas::job::TrainConfig;

/// One epoch's line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    pub epoch: usize,
    /// What the three scores below measure: `accuracy` (class labels) or `micro_f1` (multi-hot
    /// targets).
    pub metric: String,
    pub train_loss: f64,
    pub train_accuracy: f64,
    pub valid_accuracy: f64,
    pub test_accuracy: f64,
    pub seconds: f64,
    pub records_per_second: f64,
    /// Time this worker's compute waited for batches this epoch (worker 0 reports).
    pub wait_seconds: f64,
}

/// What a training run ended with.
#[derive(Debug, Clone)]
pub struct TrainSummary {
    pub epochs: usize,
    /// `accuracy` or `micro_f1`: what `best_valid` and `test_at_best` measure.
    pub metric: &'static str,
    pub best_epoch: usize,
    pub best_valid: f64,
    pub test_at_best: f64,
    pub seconds: f64,
    pub wait_seconds: f64,
    /// The final flat parameters (the best epoch's when `patience` > 0).
    pub params: Vec<f32>,
}

/// Runs a training job on this process's workers.
pub fn run(config: &TrainConfig, cluster: &ClusterConfig) -> Result<TrainSummary, Error> {
    let set = RecordSet::open(&config.records)?;
    // The kernel's threads: the cores shared among this process's workers unless set.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    gnn::kernel::set_threads(match config.kernel_threads {
        0 => (cores / cluster.threads()).max(1),
        n => n,
    });
    let config = Arc::new(config.clone());
    let set = Arc::new(set);
    let guards = timely::execute(cluster.timely(), move |worker| {
        train_worker(worker, &config, &set, None).map_err(|e| e.to_string())
    })
    .map_err(|e| Error::Job(format!("cannot start the timely workers: {e}")))?;
    let mut first = None;
    for result in guards.join() {
        let summary = result.map_err(Error::Job)?.map_err(Error::Job)?;
        first = first.or(Some(summary));
    }
    first.ok_or_else(|| Error::Job("no worker ran".into()))
}

/// The device a job computes on (without autodiff). The GPU is probed with a small computation
/// so that a machine without a usable adapter gets an error, not a panic mid-run.
pub fn device(kind: DeviceKind) -> Result<Device, Error> {
    match kind {
        DeviceKind::Cpu => Ok(Device::flex()),
        #[cfg(feature = "gpu")]
        DeviceKind::Gpu => {
            let probe = std::panic::catch_unwind(|| {
                let device = Device::wgpu(burn::tensor::DeviceKind::DefaultDevice);
                let sum = Tensor::<1>::from_floats([1.0, 2.0], &device).sum().into_scalar::<f32>();
                (sum == 3.0).then_some(device)
            });
            match probe {
                Ok(Some(device)) => Ok(device),
                _ => Err(Error::Job(
                    "device = \"gpu\": no usable wgpu adapter (install a Vulkan driver; \
                     Debian's mesa-vulkan-drivers runs it in software)"
                        .into(),
                )),
            }
        }
        #[cfg(not(feature = "gpu"))]
        DeviceKind::Gpu => Err(Error::Job(
            "device = \"gpu\" needs a build with the `gpu` feature: cargo build --release --features gpu".into(),
        )),
    }
}

/// Batches given per (epoch, step), and the steps per epoch: see [`train_worker`].
pub type FixedBatches<'a> = (&'a dyn Fn(usize, usize) -> Option<Vec<RecordGraph>>, usize);

/// One worker's whole training run. `fixed` (a batch per (epoch, step), and the steps per
/// epoch) replaces the worker's own batches: tests use it to feed one worker the combined
/// batches of several.
pub fn train_worker(
    worker: &mut Worker,
    config: &TrainConfig,
    set: &RecordSet,
    fixed: Option<FixedBatches>,
) -> Result<TrainSummary, Error> {
    let started = Instant::now();
    let (index, peers) = (worker.index(), worker.peers());
    let mine: Vec<(usize, usize)> =
        set.units().into_iter().enumerate().filter(|(u, _)| u % peers == index).map(|(_, x)| x).collect();
    let records = set.read(&mine, |s| s.is_some())?;
    let by_split = |split: Split| -> Vec<RecordGraph> {
        records.iter().filter(|r| r.split == Some(split) && r.label.is_some()).cloned().collect()
    };
    let train = Arc::new(by_split(Split::Train));
    let (valid, test) = (by_split(Split::Valid), by_split(Split::Test));
    let multi_label = matches!(set.meta.label, LabelKind::Targets(_));
    let classes = match set.meta.label {
        LabelKind::Targets(n) => n,
        LabelKind::Class => {
            let max_label = records.iter().filter_map(|r| r.label.as_ref()?.class()).max().unwrap_or(0).max(0) as u64;
            config.classes.unwrap_or(crate::collective::max(worker, max_label) as usize + 1)
        }
    };
    let dim =
        records.iter().find(|r| !r.hops.is_empty()).map_or(set.meta.feature_dim, |r| r.features.len() / r.hops.len());
    drop(records);

    let spec = ModelSpec {
        kind: config.model,
        input_dim: dim,
        hidden: config.hidden,
        classes,
        layers: set.meta.hops,
        heads: if config.model == schemas::model::ModelKind::Gat { config.heads } else { 1 },
        output_heads: if config.model == schemas::model::ModelKind::Gat { config.output_heads } else { 1 },
        activation: config.activation,
        normalize_features: config.normalize_features,
        multi_label,
        seed: config.seed,
    };
    let base = device(config.device)?;
    let device = base.clone().autodiff();
    let batch_spec = BatchSpec {
        hops: set.meta.hops,
        fanouts: set.meta.fanouts.clone(),
        prune: config.prune,
        normalize_features: config.normalize_features,
        kernel_plans: gnn::kernel::uses_kernel(config.aggregation, &device),
    };
    // Evaluation batches do not change between epochs: build them once.
    let aggregation = config.aggregation;
    let (valid, test) =
        (EvalSet::new(&valid, &batch_spec, &base, aggregation), EvalSet::new(&test, &batch_spec, &base, aggregation));
    // The model's structure, built once: each step loads the current parameters into a clone.
    let template = Gnn::new(&spec, &base);
    let mut params = params::flatten(&template);
    let len = params.len();
    let output = PathBuf::from(&config.output);
    let mut start_epoch = 0;
    let mut shard = ShardState {
        shard: index as u32,
        values: params[shard_range(len, peers, index)].to_vec(),
        optimizer: ShardOptimizer::new(config, shard_range(len, peers, index).len()),
    };
    let mut tracker = Tracker::default();
    if config.resume
        && let Some(c) = Checkpoint::load(&output, index)?
    {
        (params, shard, start_epoch, tracker) = (c.params, c.shard, c.epoch, c.tracker);
    }
    if index == 0 {
        std::fs::create_dir_all(&output).map_err(|e| Error::Job(format!("{}: {e}", output.display())))?;
        if !config.resume {
            // A fresh run must not append to an old run's metrics or resume from its checkpoints
            // later. (No other worker writes before the first step, which needs this one.)
            let _ = std::fs::remove_file(output.join("metrics.jsonl"));
            let _ = std::fs::remove_dir_all(output.join("checkpoints"));
        }
    }
    let local_steps = match fixed {
        Some((_, steps)) => steps,
        None => train.len().div_ceil(config.batch_size),
    };
    let steps_per_epoch = crate::collective::max(worker, local_steps as u64) as usize;
    let mut server =
        Server::new(worker, shard, len, (start_epoch * (steps_per_epoch + 1)) as u64, config.mode, config.staleness);
    let mut wait_total = Duration::ZERO;

    for epoch in start_epoch..config.epochs {
        let epoch_started = Instant::now();
        let lr = learning_rate(config, epoch);
        let mut batches = match fixed {
            Some(_) => None,
            None => Some(Batches::new(
                train.clone(),
                epoch_order(train.len(), config.seed, epoch, index),
                config.batch_size,
                batch_spec.clone(),
                config.prefetch,
            )),
        };
        let (mut epoch_stats, mut wait, mut seen) = (Stats::default(), Duration::ZERO, 0usize);
        for step in 0..steps_per_epoch {
            let next = match (&mut batches, fixed) {
                (Some(b), _) => b.next_batch(),
                (None, Some((feed, _))) => feed(epoch, step).map(|r| (Batch::build(&r, &batch_spec), Duration::ZERO)),
                (None, None) => None,
            };
            let (grad, count, stats) = match next {
                None => (Vec::new(), 0, Stats::default()),
                Some((batch, waited)) => {
                    wait += waited;
                    seen += batch.roots.len();
                    let dropout = Dropout {
                        seed: config.seed,
                        step: server.steps_done(),
                        rate: config.dropout,
                        attention_rate: config.attention_dropout,
                    };
                    gradient(&spec, &template, &params, &batch, (&device, aggregation), dropout)
                }
            };
            for (_, total) in server.step(worker, &grad, count, lr, stats, &mut params, false) {
                epoch_stats.add(&total);
            }
        }
        // Evaluation: counts of every worker's valid and test records, summed by shard 0.
        let mut eval = Stats::default();
        for (split, batches) in [(1, &valid), (2, &test)] {
            let (correct, total) = evaluate(&spec, &template, &params, batches, &base);
            (eval.correct[split], eval.total[split]) = (correct, total);
        }
        // The evaluation step waits for every step before it: late training stats (async mode)
        // join the epoch's, and every worker sees the same accuracies.
        let eval_step = server.steps_done();
        let mut evaluated = Stats::default();
        for (step, total) in server.step(worker, &[], 0, lr, eval, &mut params, true) {
            if step == eval_step { evaluated = total } else { epoch_stats.add(&total) }
        }
        wait_total += wait;
        let metrics = EpochMetrics {
            epoch,
            metric: metric_name(multi_label).into(),
            train_loss: epoch_stats.loss_sum / epoch_stats.loss_rows.max(1) as f64,
            train_accuracy: epoch_stats.accuracy(0),
            valid_accuracy: evaluated.accuracy(1),
            test_accuracy: evaluated.accuracy(2),
            seconds: epoch_started.elapsed().as_secs_f64(),
            records_per_second: (seen * peers) as f64 / epoch_started.elapsed().as_secs_f64().max(1e-9),
            wait_seconds: wait.as_secs_f64(),
        };
        let improved = tracker.observe(&metrics, &params);
        if index == 0 {
            report(&output, &metrics, config.epochs)?;
        }
        if config.checkpoint_every > 0 && (epoch + 1) % config.checkpoint_every == 0 {
            let shard = server.shard_state().ok_or_else(|| Error::Job("server shard missing".into()))?;
            Checkpoint { epoch: epoch + 1, params: params.clone(), shard, tracker: tracker.clone() }
                .save(&output, index)?;
        }
        if config.patience > 0 && !improved && epoch - tracker.best_epoch >= config.patience {
            if index == 0 {
                tracing::info!(
                    "train: early stop after epoch {epoch} ({} epochs without a better validation accuracy)",
                    config.patience
                );
            }
            break;
        }
    }
    let final_params =
        if config.patience > 0 && !tracker.best_params.is_empty() { tracker.best_params.clone() } else { params };
    if index == 0 {
        save_model(&output, &spec, set, &final_params, &base)?;
    }
    Ok(TrainSummary {
        epochs: tracker.epochs,
        metric: metric_name(multi_label),
        best_epoch: tracker.best_epoch,
        best_valid: tracker.best_valid,
        test_at_best: tracker.test_at_best,
        seconds: started.elapsed().as_secs_f64(),
        wait_seconds: wait_total.as_secs_f64(),
        params: final_params,
    })
}

/// The gradient sum of a batch's loss over its labeled roots, their count, and training stats.
fn gradient(
    spec: &ModelSpec,
    template: &Gnn,
    params: &[f32],
    batch: &Batch,
    (device, aggregation): (&Device, Aggregation),
    dropout: Dropout,
) -> (Vec<f32>, u64, Stats) {
    let model = params::load(template.clone(), params, device);
    let logits = model.forward(spec, batch, &BatchTensors::new(batch, device, aggregation), Some(dropout));
    let (hits, out_of) = score(logits.clone().detach(), &batch.labels);
    let (loss, n) = loss(logits, &batch.labels);
    let loss_value = f64::from(loss.clone().into_data().try_to_vec::<f32>().map_or(f32::NAN, |v| v[0]));
    let mut grad = params::gradients(&model, &loss.backward());
    grad.iter_mut().for_each(|g| *g *= n as f32);
    let mut stats = Stats { loss_sum: loss_value * n as f64, loss_rows: n as u64, ..Stats::default() };
    (stats.correct[0], stats.total[0]) = (hits, out_of);
    (grad, n as u64, stats)
}

/// Records to evaluate on, batched once and kept on the device.
pub struct EvalSet(Vec<(Batch, BatchTensors)>);

impl EvalSet {
    pub fn new(records: &[RecordGraph], spec: &BatchSpec, device: &Device, aggregation: Aggregation) -> Self {
        EvalSet(
            records
                .chunks(2048)
                .map(|chunk| {
                    let batch = Batch::build(chunk, spec);
                    let tensors = BatchTensors::new(&batch, device, aggregation);
                    (batch, tensors)
                })
                .collect(),
        )
    }
}

/// Score counts over an evaluation set, without dropout: (correct, labeled), or (2 TP,
/// 2 TP + FP + FN) for multi-label targets; see [`gnn::model::score`].
pub fn evaluate(spec: &ModelSpec, template: &Gnn, params: &[f32], set: &EvalSet, device: &Device) -> (u64, u64) {
    let model = params::load(template.clone(), params, device);
    let (mut correct, mut total) = (0, 0);
    for (batch, tensors) in &set.0 {
        let logits = model.forward(spec, batch, tensors, None);
        let (hits, out_of) = score(logits, &batch.labels);
        (correct, total) = (correct + hits, total + out_of);
    }
    (correct, total)
}

fn metric_name(multi_label: bool) -> &'static str {
    if multi_label { "micro_f1" } else { "accuracy" }
}

/// Best validation accuracy so far (for early stopping and the model written).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Tracker {
    epochs: usize,
    best_epoch: usize,
    best_valid: f64,
    test_at_best: f64,
    best_params: Vec<f32>,
}

impl Tracker {
    fn observe(&mut self, m: &EpochMetrics, params: &[f32]) -> bool {
        self.epochs = m.epoch + 1;
        if self.best_params.is_empty() || m.valid_accuracy > self.best_valid {
            (self.best_epoch, self.best_valid, self.test_at_best) = (m.epoch, m.valid_accuracy, m.test_accuracy);
            self.best_params = params.to_vec();
            return true;
        }
        false
    }
}

fn report(output: &Path, m: &EpochMetrics, epochs: usize) -> Result<(), Error> {
    tracing::info!(
        "train: epoch {}/{epochs}: loss {:.4}, {} train {:.3}, valid {:.3}, test {:.3}, {:.2}s, {:.0} records/s, waited {:.3}s for data",
        m.epoch + 1,
        m.train_loss,
        m.metric,
        m.train_accuracy,
        m.valid_accuracy,
        m.test_accuracy,
        m.seconds,
        m.records_per_second,
        m.wait_seconds
    );
    let path = output.join("metrics.jsonl");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::Job(format!("{}: {e}", path.display())))?;
    let line = serde_json::to_string(m).map_err(|e| Error::Job(e.to_string()))?;
    writeln!(file, "{line}").map_err(|e| Error::Job(format!("{}: {e}", path.display())))
}

/// `model.bpk` (burn's burnpack record) and `model.json` (the spec and flatten settings).
fn save_model(output: &Path, spec: &ModelSpec, set: &RecordSet, params: &[f32], device: &Device) -> Result<(), Error> {
    let model = params::load(Gnn::new(spec, device), params, device);
    let mut store = BurnpackStore::from_file(output.join("model.bpk")).overwrite(true);
    model.save_into(&mut store).map_err(|e| Error::Job(format!("writing the model record: {e:?}")))?;
    let meta = ModelMeta {
        format: 1,
        spec: spec.clone(),
        hops: set.meta.hops,
        fanouts: set.meta.fanouts.clone(),
        sampler: set.meta.sampler.clone(),
        flatten_seed: set.meta.seed,
        parameters: params.len(),
    };
    let json = serde_json::to_string_pretty(&meta).map_err(|e| Error::Job(e.to_string()))?;
    let path = output.join("model.json");
    std::fs::write(&path, json).map_err(|e| Error::Job(format!("{}: {e}", path.display())))
}

/// Reads a model written by a training job.
pub fn load_model(dir: &Path, device: &Device) -> Result<(ModelMeta, Gnn), Error> {
    let path = dir.join("model.json");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
    let meta: ModelMeta = serde_json::from_str(&text).map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
    let mut model = Gnn::new(&meta.spec, device);
    let mut store = BurnpackStore::from_file(dir.join("model.bpk"));
    model.load_from(&mut store).map_err(|e| Error::Input(format!("{}: {e:?}", dir.join("model.bpk").display())))?;
    Ok((meta, model))
}

/// A worker's checkpoint: the parameters, its server shard (with optimizer state), the epoch to
/// continue from and the best-so-far tracker. Resume needs the same number of workers.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Checkpoint {
    epoch: usize,
    params: Vec<f32>,
    shard: ShardState,
    tracker: Tracker,
}

impl Checkpoint {
    fn path(output: &Path, worker: usize) -> PathBuf {
        output.join("checkpoints").join(format!("worker-{worker:05}.json"))
    }

    fn save(&self, output: &Path, worker: usize) -> Result<(), Error> {
        let path = Self::path(output, worker);
        let io = |e: std::io::Error| Error::Job(format!("{}: {e}", path.display()));
        std::fs::create_dir_all(path.parent().expect("has a parent")).map_err(io)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(self).map_err(|e| Error::Job(e.to_string()))?).map_err(io)?;
        // Rename last, so a crash never leaves a half-written checkpoint in place.
        std::fs::rename(&tmp, &path).map_err(io)
    }

    fn load(output: &Path, worker: usize) -> Result<Option<Self>, Error> {
        let path = Self::path(output, worker);
        if !path.exists() {
            return Ok(None);
        }
        let bytes = std::fs::read(&path).map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::Input(format!("{}: {e}", path.display())))
    }
}
