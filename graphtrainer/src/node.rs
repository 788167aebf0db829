//! Node records: a model with a head over classes (or multi-hot targets), trained with
//! cross-entropy on the labeled training roots and scored by accuracy (or micro-F1). Score
//! counts travel through the parameter server, so every worker sees the same global scores.

use burn::prelude::*;
use gnn::Batch;
use gnn::control_variate::ControlVariate;
use gnn::model::{BatchTensors, Dropout, Gnn, loss, score_values};
use gnn::params;
use schemas::{Label, LabelKind, Record, Split, Task};
use timely::worker::Worker;

use crate::error::Error;
use crate::eval_pass;
use crate::metrics::{Metric, Scores};
use crate::phases::{Lap, Phases};
use crate::ps::{Score, Server, Stats};
use crate::reader::{Counts, Pass, RecordSet};
use crate::task_keys::TaskKeys;
use crate::train::{Gradient, Head, Learner, Setup, TrainConfig, learned_gradient, with_learned};

impl Learner for Record {
    const TASK: Task = Task::Node;

    fn head(config: &TrainConfig, set: &RecordSet, totals: &Counts, keys: &TaskKeys) -> Result<Head, Error> {
        check_learnable(set, totals.train, totals.valid, keys.patience)?;
        let classes = match set.meta.label {
            LabelKind::Targets(n) => n,
            LabelKind::Class => config.classes.unwrap_or(totals.max_class as usize + 1),
        };
        let multi_label = matches!(set.meta.label, LabelKind::Targets(_));
        Ok(Head { classes, multi_label, task: Task::Node, decoder: None })
    }

    /// The gradient sum of a batch's loss over its labeled roots, their count, and training
    /// stats.
    fn gradient(
        setup: &Setup,
        _: &TrainConfig,
        params: &[f32],
        batch: &Batch,
        dropout: Dropout,
        phases: &mut Phases,
        learned: Option<Vec<f32>>,
        cv: Option<ControlVariate>,
    ) -> Gradient {
        let device = &setup.device;
        let mut lap = Lap::start();
        let model = params::load(setup.template.clone(), params, device);
        let tensors = BatchTensors::with_input_dropout(batch, dropout, device, setup.aggregation);
        let tensors = with_learned(tensors, learned, &setup.spec, device);
        // CVD's dropout-free rows read the batch without its masks.
        let clean =
            cv.as_ref().filter(|_| dropout.rate > 0.0).map(|_| BatchTensors::new(batch, device, setup.aggregation));
        phases.tensors_seconds += lap.lap();
        let logits =
            model.forward_estimating(&setup.spec, batch, &tensors, Some(dropout), (cv.as_ref(), clean.as_ref()));
        let (loss, n) = loss(logits.clone(), &batch.labels);
        phases.forward_seconds += lap.lap();
        let grads = loss.backward();
        phases.backward_seconds += lap.lap();
        // The loss, the logits (for the scores) and every gradient, read back in one transfer.
        let [rows, width] = logits.dims();
        let mut parts = vec![loss.inner().reshape([1]), logits.inner().reshape([rows * width])];
        let learned = learned_gradient(&tensors, &grads);
        let learned_len = learned.as_ref().map_or(0, |g| g.dims()[0]);
        parts.extend(learned);
        parts.extend(params::gradient_tensors(&model, &grads));
        let values = Tensor::cat(parts, 0).into_data().try_to_vec::<f32>().expect("f32 values");
        phases.read_seconds += lap.lap();
        let loss_value = f64::from(values[0]);
        let (hits, out_of) = score_values(&values[1..1 + rows * width], width, &batch.labels);
        // Gradients of the mean loss, as sums over the batch's labeled roots.
        let mut grads: Vec<f32> = values[1 + rows * width..].to_vec();
        grads.iter_mut().for_each(|g| *g *= n as f32);
        let grad = grads.split_off(learned_len);
        let mut stats = Stats::default();
        (stats.loss_sum, stats.loss_rows) = (loss_value * n as f64, n as u64);
        stats[Split::Train] = Score { hits, out_of };
        Gradient { grad, count: n as u64, stats, rows: grads }
    }

    /// Every worker's valid and test counts, summed by shard 0 in the evaluation step.
    fn evaluate_epoch(
        worker: &mut Worker,
        config: &TrainConfig,
        setup: &Setup,
        server: &mut Server,
        params: &mut [f32],
        lr: f32,
        train: &mut Stats,
    ) -> Result<Scores, Error> {
        let eval = evaluate(worker, setup, config, params)?;
        let eval_step = server.steps_done();
        let mut evaluated = Stats::default();
        for (step, total) in server.step(worker, &[], 0, lr, eval, params, true, None) {
            if step == eval_step { evaluated = total } else { train.add(&total) }
        }
        Ok(Scores::Node {
            metric: Metric::of(setup.spec.multi_label),
            train: train[Split::Train].ratio(),
            valid: evaluated[Split::Valid].ratio(),
            test: evaluated[Split::Test].ratio(),
        })
    }
}

/// Nothing to learn is an error on every worker alike (they share the plan's totals): no
/// labeled training records, or early stopping without validation records.
fn check_learnable(set: &RecordSet, train: u64, valid: u64, patience: usize) -> Result<(), Error> {
    if train == 0 {
        return Err(Error::NothingToLearn(format!(
            "{}: no training records with a label (split \"train\" and a non-null label); flatten targets that include \
             labeled train nodes",
            set.place.shown()
        )));
    }
    if valid == 0 && patience > 0 {
        return Err(Error::NothingToLearn(format!(
            "{}: patience = {} stops early on the validation score, but there are no labeled validation records; \
             set patience = 0 or flatten the valid split",
            set.place.shown(),
            patience
        )));
    }
    Ok(())
}

/// This worker's valid and test score counts, over its units in one stream.
fn evaluate(worker: &mut Worker, setup: &Setup, config: &TrainConfig, params: &[f32]) -> Result<Stats, Error> {
    let model = params::load(setup.template.clone(), params, &setup.base);
    let mut total = Stats::default();
    let all = [setup.units(Pass::Evaluate).to_vec()];
    let index = worker.index();
    let mut failure = None;
    eval_pass::for_each_batch(setup, config, index, &all, |batch, tensors| {
        let tensors = eval_pass::with_rows(worker, setup, batch, tensors);
        // Right after a refresh: the estimate is the exact sum over every in-edge.
        let cv = match setup.histories.as_ref().map(|h| h.borrow_mut().control_variate(worker, batch, &setup.base)) {
            Some(Err(e)) => {
                failure.get_or_insert(e);
                return;
            }
            other => other.map(Result::unwrap),
        };
        score_batch(setup, &model, batch, (&tensors, cv.as_ref()), &mut total)
    })?;
    failure.map_or(Ok(total), Err)
}

/// Adds one batch's valid and test score counts to `total`, without dropout (see
/// [`gnn::model::score`]), reading the logits back once.
fn score_batch(
    setup: &Setup,
    model: &Gnn,
    batch: &Batch,
    (tensors, cv): (&BatchTensors, Option<&ControlVariate>),
    total: &mut Stats,
) {
    let logits = model.forward_estimating(&setup.spec, batch, tensors, None, (cv, None));
    let [_, width] = logits.dims();
    // Read back once for both splits.
    let values = logits.into_data().try_to_vec::<f32>().expect("f32 logits");
    for split in [Split::Valid, Split::Test] {
        let labels: Vec<Option<Label>> = batch
            .labels
            .iter()
            .zip(&batch.splits)
            .map(|(l, s)| if *s == Some(split) { l.clone() } else { None })
            .collect();
        let (hits, out_of) = score_values(&values, width, &labels);
        total[split].add(Score { hits, out_of });
    }
}
