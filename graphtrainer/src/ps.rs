//! The parameter server, on timely. Every timely worker is also a server shard: the flat
//! parameter vector is cut into `peers` contiguous slices and worker `s` owns slice `s` with its
//! optimizer state. At each step (a timely epoch) workers push per-shard gradient sums and their
//! counts. In `sync` mode, once the step is complete (the frontier passes it) each shard divides
//! by the total count, runs its optimizer and broadcasts its new slice. In `async` mode a shard
//! applies each push as it arrives and broadcasts at once; workers wait only when they are more
//! than `staleness` steps ahead of the last complete step. What crosses the wire:
//!
//! - `Push { shard, grad, count, stats, row_ids, row_grads }` to the shard's owner (stats only
//!   to shard 0; the learned embedding rows' gradients to the rows' owner, see
//!   [`crate::learned`]);
//! - `Update { shard, values, stats, step, last }` from each owner to every worker (`last`: the
//!   step is complete, and `stats` are its sums).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::vec::Broadcast;
use timely::dataflow::operators::{Capability, Input, Inspect, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle};
use timely::worker::Worker;

use crate::learned::RowShard;
use crate::optim::ShardOptimizer;
use schemas::Split;
pub use schemas::job::PsMode;

/// Score counts of one split: `hits / out_of` is the accuracy, or the micro-F1 for multi-label
/// targets (see `gnn::model::score`). Additive across batches and workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Score {
    pub hits: u64,
    pub out_of: u64,
}

impl Score {
    pub fn add(&mut self, other: Score) {
        self.hits += other.hits;
        self.out_of += other.out_of;
    }

    pub fn ratio(&self) -> f64 {
        if self.out_of == 0 { f64::NAN } else { self.hits as f64 / self.out_of as f64 }
    }
}

/// Sums a step reports: training loss, and score counts per split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub loss_sum: f64,
    /// The labeled training roots `loss_sum` adds up over.
    pub loss_rows: u64,
    scores: [Score; 3],
}

impl std::ops::Index<Split> for Stats {
    type Output = Score;
    fn index(&self, split: Split) -> &Score {
        &self.scores[split as usize]
    }
}

impl std::ops::IndexMut<Split> for Stats {
    fn index_mut(&mut self, split: Split) -> &mut Score {
        &mut self.scores[split as usize]
    }
}

impl Stats {
    pub fn add(&mut self, other: &Stats) {
        self.loss_sum += other.loss_sum;
        self.loss_rows += other.loss_rows;
        for (mine, theirs) in self.scores.iter_mut().zip(other.scores) {
            mine.add(theirs);
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Push {
    pub shard: u32,
    /// The pushing worker: a step's pushes are summed in worker order, so the sum (and with it
    /// every parameter) is the same whatever order they arrived in.
    pub from: u32,
    /// Sum of per-root gradients over this worker's batch (empty: no gradient this step).
    pub grad: Vec<f32>,
    pub count: u64,
    pub lr: f32,
    pub stats: Stats,
    /// The learned rows this shard owns that the batch touched, and their gradient sums (`dim`
    /// a row), applied with `row_lr` as the weights are (summed in worker order, divided by
    /// the step's count).
    pub row_ids: Vec<i64>,
    pub row_grads: Vec<f32>,
    pub row_lr: f32,
}

/// A step's learned-row gradients, as [`Server::step`] takes them.
#[derive(Debug, Clone, Copy)]
pub struct RowGrads<'a> {
    /// Each touched row's id once.
    pub ids: &'a [i64],
    /// Gradient sums, `dim` a row in `ids` order.
    pub grads: &'a [f32],
    pub lr: f32,
}

/// A shard's learned rows: adds up pushes' row gradients by id, in the order they are given.
#[derive(Default)]
struct RowSums {
    ids: Vec<i64>,
    at: cluster::hash::IdMap<i64, usize>,
    sums: Vec<f32>,
    lr: f32,
}

impl RowSums {
    fn add(&mut self, p: &Push, dim: usize) {
        for (&id, g) in p.row_ids.iter().zip(p.row_grads.chunks(dim.max(1))) {
            let slot = *self.at.entry(id).or_insert_with(|| {
                self.ids.push(id);
                self.sums.extend(std::iter::repeat_n(0.0, dim));
                self.ids.len() - 1
            });
            self.sums[slot * dim..(slot + 1) * dim].iter_mut().zip(g).for_each(|(s, g)| *s += g);
        }
        if !p.row_ids.is_empty() {
            self.lr = p.row_lr;
        }
    }

    /// Divides by `count` and steps the rows' optimizer.
    fn apply(mut self, rows: &RefCell<RowShard>, count: u64) {
        if self.ids.is_empty() || count == 0 {
            return;
        }
        self.sums.iter_mut().for_each(|s| *s /= count as f32);
        rows.borrow_mut().step(&self.ids, &self.sums, self.lr);
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Update {
    pub shard: u32,
    pub values: Vec<f32>,
    pub stats: Stats,
    pub step: u64,
    pub last: bool,
}

/// The contiguous slice of `len` parameters that shard `s` of `shards` owns.
pub fn shard_range(len: usize, shards: usize, s: usize) -> Range<usize> {
    (s * len / shards)..((s + 1) * len / shards)
}

/// One server shard's state: its slice of the parameters and its optimizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardState {
    pub shard: u32,
    pub values: Vec<f32>,
    pub optimizer: ShardOptimizer,
}

/// This worker's handle on the parameter-server dataflow.
pub struct Server {
    input: InputHandleVec<u64, Push>,
    probe: ProbeHandle<u64>,
    updates: Rc<RefCell<Vec<Update>>>,
    state: Rc<RefCell<Option<ShardState>>>,
    step: u64,
    staleness: u64,
    pub len: usize,
    pub shards: usize,
}

impl Server {
    /// Builds the dataflow; `state` is this worker's shard (slice `index` of `params`), `rows`
    /// its share of the learned embedding table, if the model has one.
    pub fn new(
        worker: &mut Worker,
        state: ShardState,
        rows: Option<Rc<RefCell<RowShard>>>,
        len: usize,
        first_step: u64,
        mode: PsMode,
        staleness: usize,
    ) -> Self {
        let dim = rows.as_ref().map_or(0, |r| r.borrow().dim);
        let shards = worker.peers();
        let mut input = InputHandleVec::<u64, Push>::new();
        let probe = ProbeHandle::new();
        let updates = Rc::new(RefCell::new(Vec::new()));
        let state = Rc::new(RefCell::new(Some(state)));
        let sink = updates.clone();
        let server = ShardServer { owned: state.clone(), rows, dim };
        worker.dataflow::<u64, _, _>(|scope| {
            scope
                .input_from(&mut input)
                .unary_frontier::<CapacityContainerBuilder<Vec<Update>>, _, _, _>(
                    Exchange::new(|p: &Push| u64::from(p.shard)),
                    "Server",
                    move |_, _| {
                        let mut pending: HashMap<u64, (Capability<u64>, Vec<Push>)> = HashMap::new();
                        move |(input, frontier), output| {
                            input.for_each(|cap, data| {
                                let Some(cap) = cap.retain_least(0) else { return };
                                if mode == PsMode::Async && server.owned.borrow().is_some() {
                                    let mut session = output.session(&cap);
                                    server.apply_now(data, *cap.time(), |u| {
                                        session.give(u);
                                    });
                                }
                                pending.entry(*cap.time()).or_insert_with(|| (cap, Vec::new())).1.append(data);
                            });
                            let mut done: Vec<u64> =
                                pending.keys().copied().filter(|t| !frontier.less_equal(t)).collect();
                            done.sort_unstable();
                            for time in done {
                                let (cap, pushes) = pending.remove(&time).expect("listed above");
                                if let Some(update) = server.complete(time, pushes) {
                                    output.session(&cap).give(update);
                                }
                            }
                        }
                    },
                )
                .broadcast()
                .inspect(move |u| sink.borrow_mut().push(u.clone()))
                .probe_with(&probe);
        });
        input.advance_to(first_step);
        let staleness = if mode == PsMode::Sync { 0 } else { staleness as u64 };
        Server { input, probe, updates, state, step: first_step, staleness, len, shards }
    }

    /// Pushes this worker's contribution to step `self.step` and waits: for the step to complete
    /// everywhere (`sync` mode, or `complete`), or until no more than `staleness` steps are
    /// incomplete (`async`). Writes the newest parameters it received into `params` and returns
    /// the summed statistics of every step that completed meanwhile, by step. `rows`: the
    /// learned rows' gradients, each sent to its row's owner.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        worker: &mut Worker,
        grad: &[f32],
        count: u64,
        lr: f32,
        stats: Stats,
        params: &mut [f32],
        complete: bool,
        rows: Option<RowGrads>,
    ) -> Vec<(u64, Stats)> {
        let mut row_pushes: Vec<(Vec<i64>, Vec<f32>)> = vec![(Vec::new(), Vec::new()); self.shards];
        let mut row_lr = lr;
        if let Some(r) = rows.filter(|r| !r.ids.is_empty()) {
            let dim = r.grads.len() / r.ids.len();
            for (&id, g) in r.ids.iter().zip(r.grads.chunks(dim.max(1))) {
                let (ids, grads) = &mut row_pushes[crate::learned::owner(id, self.shards)];
                ids.push(id);
                grads.extend_from_slice(g);
            }
            row_lr = r.lr;
        }
        for (s, (row_ids, row_grads)) in row_pushes.into_iter().enumerate() {
            let range = shard_range(self.len, self.shards, s);
            let grad = if grad.is_empty() { Vec::new() } else { grad[range].to_vec() };
            let stats = if s == 0 { stats } else { Stats::default() };
            let from = worker.index() as u32;
            self.input.send(Push { shard: s as u32, from, grad, count, lr, stats, row_ids, row_grads, row_lr });
        }
        self.step += 1;
        self.input.advance_to(self.step);
        let wait_for = if complete { self.step } else { self.step.saturating_sub(self.staleness) };
        cluster::wait_while(worker, || self.probe.less_than(&wait_for));
        let mut completed = Vec::new();
        for update in self.updates.borrow_mut().drain(..) {
            let range = shard_range(self.len, self.shards, update.shard as usize);
            params[range].copy_from_slice(&update.values);
            if update.shard == 0 && update.last {
                completed.push((update.step, update.stats));
            }
        }
        completed
    }

    /// This worker's shard state, for checkpoints.
    pub fn shard_state(&self) -> Option<ShardState> {
        self.state.borrow().clone()
    }

    pub fn steps_done(&self) -> u64 {
        self.step
    }
}

/// A server shard in the dataflow: its slice and optimizer (`None` once the worker has taken
/// it), and its share of the learned rows, `dim` wide, if the model has them.
struct ShardServer {
    owned: Rc<RefCell<Option<ShardState>>>,
    rows: Option<Rc<RefCell<RowShard>>>,
    dim: usize,
}

impl ShardServer {
    /// Async mode: applies each push's gradient (and learned rows) at `step` as it arrives,
    /// handing `give` the shard's values after each; the pushes keep their stats (and counts
    /// of 0) for the step's completion.
    fn apply_now(&self, data: &mut [Push], step: u64, mut give: impl FnMut(Update)) {
        let mut owned = self.owned.borrow_mut();
        let Some(shard) = owned.as_mut() else { return };
        for p in data.iter_mut().filter(|p| p.count > 0) {
            if let Some(rows) = &self.rows {
                let mut sums = RowSums::default();
                sums.add(p, self.dim);
                sums.apply(rows, p.count);
                (p.row_ids, p.row_grads) = (Vec::new(), Vec::new());
            }
            if p.grad.is_empty() {
                continue;
            }
            p.grad.iter_mut().for_each(|g| *g /= p.count as f32);
            shard.optimizer.step(&mut shard.values, &p.grad, p.lr);
            p.grad = Vec::new();
            p.count = 0;
            give(Update {
                shard: shard.shard,
                values: shard.values.clone(),
                stats: Stats::default(),
                step,
                last: false,
            });
        }
    }

    /// Completes step `time`: sums its `pushes` in worker order (the same bits every run),
    /// steps the optimizer on their mean, applies the learned rows' sums before the update
    /// goes out (a worker's next pull sees these rows), and returns the step's last update
    /// with its summed stats; `None` once the shard is taken.
    fn complete(&self, time: u64, mut pushes: Vec<Push>) -> Option<Update> {
        pushes.sort_by_key(|p| p.from);
        let mut owned = self.owned.borrow_mut();
        let shard = owned.as_mut()?;
        let mut sum = vec![0.0f32; shard.values.len()];
        let (mut count, mut stats, mut lr) = (0u64, Stats::default(), 0.0f32);
        let mut row_sums = RowSums::default();
        for p in &pushes {
            if !p.grad.is_empty() {
                sum.iter_mut().zip(&p.grad).for_each(|(s, g)| *s += g);
            }
            row_sums.add(p, self.dim);
            count += p.count;
            stats.add(&p.stats);
            lr = p.lr;
        }
        if count > 0 {
            sum.iter_mut().for_each(|s| *s /= count as f32);
            shard.optimizer.step(&mut shard.values, &sum, lr);
        }
        if let Some(rows) = &self.rows {
            row_sums.apply(rows, count);
        }
        Some(Update { shard: shard.shard, values: shard.values.clone(), stats, step: time, last: true })
    }
}
