//! An epoch of full-graph training on one worker, as named steps: the training pass, the
//! parameter server's step, the evaluation pass and its step, and the epoch's metrics. Every
//! worker runs them in step (see [`crate::full`]).

use std::time::Instant;

use burn::prelude::Device;
use gnn::Gnn;
use gnn::aggregate::EdgeTensors;
use gnn::model::Dropout;
use gnn::params;
use schemas::Split;
use schemas::job::TrainConfig;
use timely::worker::Worker;

use crate::error::Error;
use crate::full::epoch::{Context, Exchange, Features, Objective, evaluate, last_rows, train_pass};
use crate::full::link;
use crate::metrics::{EpochMetrics, EpochTiming, Metric, Scores};
use crate::optim::{ShardOptimizer, learning_rate};
use crate::phases::{Lap, Phases};
use crate::ps::{Server, ShardState, Stats, shard_range};

/// What a worker trains with between epochs: the model's template and parameters, the server,
/// the edges on both devices and the exchange's copies.
pub struct Trainer {
    pub template: Gnn,
    pub params: Vec<f32>,
    server: Server,
    /// The device with autodiff (training) and without (evaluation).
    pub base: Device,
    device: Device,
    train_edges: EdgeTensors,
    eval_edges: EdgeTensors,
    pub exchange: Exchange,
}

/// An epoch's metrics and where its training pass spent its time.
pub struct Epoch {
    pub metrics: EpochMetrics,
    pub timing: EpochTiming,
}

impl Trainer {
    /// Fresh parameters from `cx.spec`'s seed, this worker's server shard, the edges on the
    /// job's device.
    pub fn new(worker: &mut Worker, config: &TrainConfig, cx: &Context, weight_decay: f32) -> Result<Self, Error> {
        let base = gnn::device(config.device)?;
        let device = base.clone().autodiff();
        let template = Gnn::new(cx.spec, &base);
        let params = params::flatten(&template);
        let (index, peers) = (worker.index(), worker.peers());
        let range = shard_range(params.len(), peers, index);
        let shard = ShardState {
            shard: index as u32,
            values: params[range.clone()].to_vec(),
            optimizer: ShardOptimizer::new(config, weight_decay, range.len()),
        };
        let server = Server::new(worker, shard, None, params.len(), 0, config.mode, config.staleness);
        let (train_edges, eval_edges) =
            (cx.local.tensors(&device, config.aggregation), cx.local.tensors(&base, config.aggregation));
        let staleness =
            crate::full::stale::Staleness { epochs: config.halo_staleness as u32, threshold: config.halo_threshold };
        // A typed graph's projection is exchanged as a layer's output is.
        let exchanged = cx.spec.layers + usize::from(matches!(cx.features, Features::Typed(_)));
        let exchange = Exchange::new(staleness, config.halo_precision, exchanged);
        Ok(Trainer { template, params, server, base, device, train_edges, eval_edges, exchange })
    }

    /// Epoch `epoch` (0-based): the training pass and its step, the evaluation pass and its
    /// step (the caller checks [`Trainer::finite`] on every worker).
    pub fn epoch(
        &mut self,
        worker: &mut Worker,
        config: &TrainConfig,
        cx: &Context,
        epoch: usize,
    ) -> Result<Epoch, Error> {
        let clock = Instant::now();
        let lr = learning_rate(config, epoch);
        let dropout = Dropout {
            seed: config.seed,
            step: epoch as u64,
            rate: config.dropout,
            attention_rate: config.attention_dropout,
        };
        let mut phases = Phases::default();
        let mut lap = Lap::start();
        let pairs = cx.link.map(|task| task.train_pairs(worker, epoch)).transpose()?;
        let objective = pairs.as_ref().map_or(Objective::Node, Objective::Link);
        phases.exchange_seconds += lap.lap();
        let model = params::load(self.template.clone(), &self.params, &self.device);
        let trained =
            train_pass(worker, cx, &model, &self.train_edges, dropout, objective, &mut self.exchange, &mut phases);
        lap.lap();
        let mut train = Stats::default();
        let pushed = (&trained.grad, trained.count, trained.stats);
        for (_, total) in self.server.step(worker, pushed.0, pushed.1, lr, pushed.2, &mut self.params, false, None) {
            train.add(&total);
        }
        phases.exchange_seconds += lap.lap();
        let scores = self.evaluate(worker, cx, lr, &mut train);
        let metrics =
            EpochMetrics { epoch: epoch + 1, train_loss: train.loss_sum / train.loss_rows.max(1) as f64, scores };
        let seconds = clock.elapsed().as_secs_f64();
        let nodes = cx.local.own() * worker.peers();
        let timing = EpochTiming {
            epoch: epoch + 1,
            seconds,
            records_per_second: nodes as f64 / seconds.max(1e-9),
            wait_seconds: 0.0,
            phases,
        };
        Ok(Epoch { metrics, timing })
    }

    /// The evaluation pass with the step's parameters: a node task's valid and test scores
    /// (summed over workers by the server's evaluation step, whose late training stats join
    /// `train`), or a link task's metrics over its valid and test pairs.
    fn evaluate(&mut self, worker: &mut Worker, cx: &Context, lr: f32, train: &mut Stats) -> Scores {
        let model = params::load(self.template.clone(), &self.params, &self.base);
        if let Some(task) = cx.link {
            let (rows, d) = last_rows(worker, cx, &model, &self.eval_edges);
            return link::evaluate(worker, &task.eval, (&model, cx.spec, &self.base), &rows, d);
        }
        let (eval, _) = evaluate(worker, cx, &model, &self.eval_edges);
        let eval_step = self.server.steps_done();
        let mut evaluated = Stats::default();
        for (step, total) in self.server.step(worker, &[], 0, lr, eval, &mut self.params, true, None) {
            if step == eval_step { evaluated = total } else { train.add(&total) }
        }
        Scores::Node {
            metric: Metric::of(cx.spec.multi_label),
            train: train[Split::Train].ratio(),
            valid: evaluated[Split::Valid].ratio(),
            test: evaluated[Split::Test].ratio(),
        }
    }

    /// The epoch's loss and the parameters are finite, or the run ends with no model.
    pub fn finite(&self, metrics: &EpochMetrics) -> Result<(), Error> {
        if metrics.train_loss.is_finite() && self.params.iter().all(|p| p.is_finite()) {
            return Ok(());
        }
        Err(Error::Diverged(format!(
            "epoch {}: the training loss is {} or a parameter is not finite; lower lr, or check the features (no model is \
             written)",
            metrics.epoch, metrics.train_loss
        )))
    }
}
