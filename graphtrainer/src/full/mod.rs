//! Full-graph training: `[train]` given `nodes` and `edges` instead of `records` trains on the
//! graph itself, every node and every edge in every epoch, with no records (the row of
//! SANCUS, decentralized full-graph training). Records repeat a neighborhood in every record
//! that holds it; here each node's layer-`l` row is computed once an epoch.
//!
//! Once, on every worker in step:
//! 1. **round 0** as every stage over the graph runs it (`stage::load_graph`): the worker's
//!    share of the nodes (by hash, or by a partition table's parts) with every in-edge
//!    (sampler `all`) and each in-edge's source slot at its owner;
//! 2. the **halo** ([`halo`]): the remote in-neighbors the worker reads, their owners told
//!    which rows to send, in which order; their in-degrees;
//! 3. the **split hubs** ([`hubs`]): a node with more in-edges than `hub_threshold` has them
//!    summed in runs on other workers (GCN, GraphSAGE, R-GCN; by relation on a typed graph),
//!    each run's partial a *virtual* input row of its owner; GAT's and GINE's runs are
//!    *pieces* that run the layer's per-edge part, merged into the hub's output by its owner
//!    ([`pieces`]); the runs' sources are their reducers' halo;
//! 4. the **local graph** ([`local`]): one layer's edges over the input rows `[own | halo | virtual]`,
//!    on the device, shared by every layer; layer 0's input rows (the features, the halo's
//!    pulled once).
//!
//! Then each epoch ([`steps`], [`epoch`]): the training pass (forward with the halo's rows pulled at each
//! layer, the loss of the worker's labeled training nodes as a sum, backward with the halo's
//! gradients pushed back to their owners at each layer), one parameter-server step on the
//! gradient sums divided by every worker's labeled training nodes (`crate::ps`, sync), and an
//! evaluation pass. The step's gradient is exactly the full-batch gradient of the mean loss:
//! every term of the chain rule is computed once, on the worker that owns the edge's
//! destination, and summed at the node's owner.
//!
//! What a worker holds is stated in `docs/full-graph.md` (bytes per node and per edge).
//! With `halo_staleness` the exchange is SANCUS's ([`stale`]): rows and gradients cross only
//! when they moved enough, copies are reused otherwise, and what crossed is counted. With
//! `halo_precision = "bf16"` they cross at half the bytes ([`wire`]).
//!
//! A link task ([`link`]) scores pairs of the last layer's rows at the owner of each pair's
//! source, its other endpoint pulled as the halo's rows are; on a typed graph the pairs are
//! its `link_relation`'s edges and negatives of its destination type.
//!
//! On a typed graph the per-type input projection runs before layer 0 at each node's owner,
//! its rows exchanged as a layer's outputs ([`local::TypedFeatures`], [`epoch`]).
//!
//! Not yet: learned embeddings and checkpoints ([`setup::check_keys`] refuses them).

pub mod dropout;
pub mod epoch;
pub mod halo;
pub mod hubs;
pub mod link;
pub mod local;
pub mod memory;
pub mod pieces;
pub mod setup;
pub mod sparse;
pub mod stale;
pub mod steps;
pub mod wire;

use std::sync::Arc;
use std::time::Instant;

use cluster::Failure;
use sampling::{NodeStore, SharedOwnerMap, SupervisionEdge};
use schemas::{ClusterConfig, Targets};
use stage::{Clock, Declared, Progress};
use tables::commit::{Stage, new_run_id};
use tables::lease::Lease;
use tables::{Io, Place};
use timely::worker::Worker;

use crate::error::Error;
use crate::full::epoch::{Context, Exchange, Features};
use crate::full::halo::Halo;
use crate::full::hubs::Hubs;
use crate::full::link::LinkTask;
use crate::full::local::{LocalGraph, TypedFeatures};
use crate::full::setup::{FullReads, LabelCounts};
use crate::full::sparse::SparseRows;
use crate::full::stale::Traffic;
use crate::full::steps::Trainer;
use crate::full::wire::Precision;
use crate::metrics::MetricsLog;
use crate::tracker::Tracker;
use crate::train::{Saving, TrainConfig, TrainSummary, metric_of, run_facts, save_model};

/// Trains on the graph on this process's workers (see the module doc). Any worker's failure
/// ends every worker.
pub fn run(io: &Arc<Io>, config: &TrainConfig, cluster: &ClusterConfig) -> Result<TrainSummary, Failure<Error>> {
    setup::check_keys(config).map_err(Failure::Worker)?;
    let idle = setup::idle_keys(config);
    if !idle.is_empty() && cluster.process == 0 {
        tracing::info!(
            "train: full graph: {} are keys of training on records; this job has no use for them",
            idle.join(", ")
        );
    }
    let mut config = config.clone();
    if config.kernel_threads == 0 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        config.kernel_threads = (cores / cluster.threads()).max(1);
    }
    let (io, config, threads) = (io.clone(), Arc::new(config), cluster.threads());
    // The partition table is read once per process, its map shared by the process's workers.
    let shared = SharedOwnerMap::default();
    let summaries = cluster::execute(cluster, move |worker| train_worker(worker, &io, &config, &shared, threads))?;
    summaries.into_iter().next().ok_or_else(|| Failure::Panic("no worker ran".into()))
}

/// Every failure of a step, on every worker alike.
fn agree<T>(worker: &mut Worker, local: Result<T, Error>) -> Result<T, Error> {
    cluster::agree::<_, Error, tables::error::Report>(worker, local)
}

/// The graph's tables as `stage::load_graph` reads them.
fn declared<'a>(config: &'a TrainConfig, shared: &'a SharedOwnerMap) -> Declared<'a> {
    Declared {
        stage: Stage::Train,
        nodes: config.nodes.as_deref().unwrap_or_default(),
        edges: config.edges.as_deref().unwrap_or_default(),
        output: &config.output,
        overwrite: config.overwrite,
        targets: &Targets::All,
        settings: serde_json::Value::Null,
        extras: Vec::new(),
        typed: config.typed(),
        link_relation: config.link_relation_index(),
        partition: None,
    }
    .with_partition(config.partition.as_deref(), shared)
}

/// The output is apart from every input and holds no committed model unless the job replaces
/// it; worker 0 takes the run's lease. Returns the lease (worker 0) and the run id.
fn open_output(
    worker: &mut Worker,
    io: &Io,
    config: &TrainConfig,
    declared: &Declared,
) -> Result<(Option<Lease>, String, Place), Error> {
    let output = agree(worker, io.output(&config.output).map_err(Error::from))?;
    let lease = (worker.index() == 0).then(|| {
        io.block_on(async {
            let inputs = stage::graph_inputs(io, declared)?;
            let inputs: Vec<&Place> = inputs.iter().collect();
            tables::commit::check_output(&output, &inputs, Stage::Train, config.overwrite, &gnn::io::LAYOUT).await?;
            Lease::take(&output, &new_run_id(), Stage::Train.name()).await
        })
    });
    let lease = agree(worker, lease.transpose().map_err(Error::from))?;
    let run = cluster::broadcast(worker, lease.as_ref().map(|l| l.run().to_owned()))
        .ok_or_else(|| Error::Internal("no run id".into()))?;
    Ok((lease, run, output))
}

/// What a worker trains with, built once.
struct Graph {
    local: LocalGraph,
    halo: Halo,
    hubs: Hubs,
    /// Layer 0's input rows, `[own | halo]`; a typed graph's own rows by type instead.
    features: Input,
    labels: LabelCounts,
    spec: schemas::model::ModelSpec,
    /// The link task's edges and pairs (`None`: a node task).
    link: Option<LinkTask>,
    /// Layer 0's rows by their nonzeros, where it runs on them (see [`sparse`]).
    sparse: Option<SparseRows>,
}

/// Layer 0's input as loaded (see [`epoch::Features`]).
enum Input {
    Rows(Vec<f32>),
    Typed(TypedFeatures),
}

impl Input {
    fn features(&self) -> Features<'_> {
        match self {
            Input::Rows(rows) => Features::Rows(rows),
            Input::Typed(typed) => Features::Typed(typed),
        }
    }
}

/// Round 0, the halo, the local graph and the model's spec.
fn load(
    worker: &mut Worker,
    io: &Arc<Io>,
    config: &TrainConfig,
    declared: &Declared,
    threads: usize,
) -> Result<Graph, Error> {
    let loaded = round_zero(worker, io, config, declared)?;
    let mut nodes = loaded.graph.nodes;
    let link = match config.task == Some(schemas::Task::Link) {
        true => Some(link_task(worker, config, declared, &nodes, loaded.graph.supervision)),
        false => None,
    };
    let link = agree(worker, link.transpose())?;
    let target = declared.typed.as_ref().map(|(_, t)| *t);
    let labels = LabelCounts::gather(worker, &nodes, target);
    classes_hold_labels(worker, io, config, declared, &labels)?;
    let spec = agree(worker, setup::spec(config, &nodes, &labels, declared.typed.as_ref()))?;
    nodes.keep_edge_features_for(&spec);
    let source_slots = nodes.take_source_slots();
    let (halo, hubs, sources) = halo_and_hubs(worker, config, &nodes, &spec, source_slots);
    let pairs = link.as_ref().map_or(0, LinkTask::pairs) as u64;
    let share = memory_share(config, &spec, (&nodes, &halo, &hubs), sources.len(), pairs);
    let fit = fits(worker, config, &spec, share, threads);
    agree(worker, fit)?;
    let gat = spec.kind == schemas::model::ModelKind::Gat;
    let layer = (spec.edge_dim, gat, config.kernel_threads);
    let mut local = LocalGraph::new(&nodes, (&halo, &hubs), sources, layer, spec.types.as_ref());
    // The kernel's plans, built once for the training and the evaluation edges.
    if gnn::kernel::uses_kernel(config.aggregation, &gnn::device(config.device)?) {
        local.edges.plans = Some(local.edges.plans());
        if let Some(typed) = &mut local.edges.typed {
            typed.relations.iter_mut().for_each(|r| r.plans = Some(r.plans()));
        }
    }
    if let Some(types) = &spec.types {
        let features = Input::Typed(TypedFeatures::new(&nodes, types, spec.normalize_features));
        return Ok(Graph { local, halo, hubs, features, labels, spec, link, sparse: None });
    }
    let mut own_rows = Vec::with_capacity(nodes.len() * spec.input_dim);
    for slot in 0..nodes.len() {
        gnn::features::push_row(nodes.features(slot), spec.normalize_features, &mut own_rows);
    }
    let halo_rows = halo.pull(worker, &own_rows, spec.input_dim);
    own_rows.extend(halo_rows);
    // A GCN's layer 0 over sparse features runs on their nonzeros, where the kernel runs and
    // no hub is split (a split hub's partials read the dense rows).
    let gcn = spec.kind == schemas::model::ModelKind::Gcn && !hubs.active() && local.edges.plans.is_some();
    let mut sparse = gcn.then(|| SparseRows::of(&own_rows, spec.input_dim, config.kernel_threads)).flatten();
    // Every worker runs layer 0 one way, so that the model does not depend on how the graph
    // was cut.
    if cluster::sum(worker, u64::from(sparse.is_some())) < worker.peers() as u64 {
        sparse = None;
    }
    Ok(Graph { local, halo, hubs, features: Input::Rows(own_rows), labels, spec, link, sparse })
}

/// Round 0 over the declared graph: every node at its owner with its in-edges (and their
/// source slots), and a link task's supervision edges.
fn round_zero(
    worker: &mut Worker,
    io: &Arc<Io>,
    config: &TrainConfig,
    declared: &Declared,
) -> Result<stage::Loaded, Error> {
    let progress = Arc::new(Progress::new("train", "nodes", Vec::new()));
    let reporter = worker.index() == 0;
    let mut stage_worker = stage::Worker {
        timely: worker,
        io,
        progress: &progress,
        reporter,
        clock: Clock::default(),
        extra_outputs: Vec::new(),
    };
    let link = config.task == Some(schemas::Task::Link);
    let (types, relations) = match &declared.typed {
        Some((graph, _)) => (graph.node_types.iter().map(|(name, _)| name.clone()).collect(), graph.relations.len()),
        None => (Vec::new(), 0),
    };
    let reads = FullReads { seed: config.seed, link, nodes: schemas::redact(declared.nodes), types, relations };
    Ok(stage::load_graph(&mut stage_worker, declared, &reads)?)
}

/// The link task over `supervision`, named after its edges' table (on a typed graph, the
/// link relation's, whose destination type the negatives are drawn from).
fn link_task(
    worker: &mut Worker,
    config: &TrainConfig,
    declared: &Declared,
    nodes: &NodeStore,
    supervision: Vec<SupervisionEdge>,
) -> Result<LinkTask, Error> {
    let (edges_table, negatives_type) = match (&declared.typed, declared.link_relation) {
        (Some((graph, _)), Some(r)) => {
            let table = graph.tables.iter().find(|t| t.forward == r).map_or("", |t| t.table.as_str());
            let relation = &graph.relations[usize::from(r)];
            (format!("relation {} ({})", relation.name, schemas::redact(table)), Some(relation.dst))
        }
        _ => (schemas::redact(declared.edges), None),
    };
    LinkTask::new(worker, config, nodes, supervision, (&edges_table, negatives_type))
}

/// Fails on every worker alike where a node task's `classes` is below a label, naming the
/// label's file, row and column (every worker finds it).
fn classes_hold_labels(
    worker: &mut Worker,
    io: &Arc<Io>,
    config: &TrainConfig,
    declared: &Declared,
    labels: &LabelCounts,
) -> Result<(), Error> {
    let link = config.task == Some(schemas::Task::Link);
    let Some(classes) = config.classes.filter(|&c| !link && labels.classes as usize > c) else { return Ok(()) };
    let table = match &declared.typed {
        Some((graph, t)) => graph.node_types[usize::from(*t)].1.clone(),
        None => declared.nodes.to_owned(),
    };
    let found = setup::label_above(io, &table, classes).and_then(|bad| bad.map_or(Ok(()), |b| Err(b.into())));
    agree(worker, found)
}

/// The hubs cut into partial sums, the halo planned over the in-edges' remote sources
/// (`source_slots`, released once planned) and the hub runs', each run placed with its
/// degree. Returns the halo, the hubs and each in-edge's source row (`[own | halo]`), the hub
/// runs' taken off the end.
fn halo_and_hubs(
    worker: &mut Worker,
    config: &TrainConfig,
    nodes: &NodeStore,
    spec: &schemas::model::ModelSpec,
    source_slots: Vec<u32>,
) -> (Halo, Hubs, Vec<i64>) {
    let weighting = setup::hub_weighting(spec);
    let threshold = config.hub_threshold.unwrap_or(schemas::job::flatten::DEFAULT_HUB_THRESHOLD);
    let mut hubs = Hubs::cut(worker, nodes, &source_slots, (threshold, weighting));
    let reads = halo::in_edge_sources(nodes, &source_slots, |slot| hubs.is_hub(slot)).chain(hubs.run_sources());
    let (halo, mut sources) = Halo::plan(worker, nodes, reads);
    drop(source_slots);
    let run_rows = sources.split_off(sources.len() - hubs.run_edges());
    let own = nodes.len();
    let degree = |row: usize| if row < own { nodes.in_degree[row] as f32 } else { halo.degrees[row - own] };
    hubs.place(run_rows, degree, weighting);
    (halo, hubs, sources)
}

/// This worker's share of the training's memory: its rows, halo rows, edges (`sources` in-edges
/// besides the hubs'), link pairs and input features.
fn memory_share(
    config: &TrainConfig,
    spec: &schemas::model::ModelSpec,
    (nodes, halo, hubs): (&NodeStore, &Halo, &Hubs),
    sources: usize,
    pairs: u64,
) -> memory::Share {
    let features = match nodes.is_typed() {
        true => (0..nodes.len()).map(|s| nodes.features(s).len() as u64).sum(),
        false => (nodes.len() + halo.len()) as u64 * spec.input_dim as u64,
    };
    let halo_rows = (halo.len() + hubs.virtual_rows()) as u64;
    let (own, edges) = (nodes.len() as u64, (sources + hubs.virtual_rows() + hubs.run_edges()) as u64);
    let (sent, stale) = (halo.rows_sent() as u64, config.halo_staleness > 0);
    memory::Share { own, halo: halo_rows, edges, pairs, features, sent, stale }
}

/// Whether the workers of this process fit the memory they may use (see [`memory`]); the
/// estimate is logged by worker 0 either way.
fn fits(
    worker: &mut Worker,
    config: &TrainConfig,
    spec: &schemas::model::ModelSpec,
    share: memory::Share,
    threads: usize,
) -> Result<(), Error> {
    let all = cluster::all_gather(worker, vec![(worker.index(), memory::estimate(spec, share))]);
    let process = worker.index() / threads;
    let mine: u64 = all.iter().filter(|(w, _)| w / threads == process).map(|(_, b)| b).sum();
    let largest = all.iter().map(|(_, b)| *b).max().unwrap_or(0);
    let mb = |b: u64| b as f64 / (1u64 << 20) as f64;
    if worker.index() == 0 {
        tracing::info!(
            "train: full graph: about {:.0} MiB per process ({:.0} MiB on the largest worker) for the shares and their \
             activations",
            mb(mine),
            mb(largest)
        );
    }
    match memory::budget(config.memory_mb) {
        Some(budget) if mine > budget => Err(Error::Usage(format!(
            "full-graph training needs about {:.0} MiB on this process for {} layers of the graph, and it may use {:.0} \
             MiB (memory_mb, or what the system has available): run on more machines (processes), or flatten the graph \
             and train on its records ([flatten], then [train] records = ...), whose memory does not grow with the graph",
            mb(mine),
            spec.layers,
            mb(budget)
        ))),
        _ => Ok(()),
    }
}

/// The summary's line on what crossed between workers in the training passes, every
/// worker's: per epoch, against what the exact exchange sends.
fn traffic_line(worker: &mut Worker, exchange: &Exchange, epochs: usize, rows: u64, hubs: &Hubs) -> String {
    let all = cluster::all_gather(worker, vec![(worker.index(), exchange.traffic)]);
    let mut total = Traffic::default();
    all.iter().for_each(|(_, t)| total.add(*t));
    if total.exact_rows == 0 {
        let split = match hubs.split_everywhere {
            0 => String::new(),
            n => format!("; {n} split {} summed in {} partials", plural(n, "hub"), hubs.partials_everywhere),
        };
        return format!("nothing crosses between workers (one worker, or no edge between them){split}");
    }
    let per_epoch = |v: u64| v as f64 / epochs.max(1) as f64 / 1e6;
    let share = |a: u64, b: u64| if b == 0 { 100.0 } else { 100.0 * a as f64 / b as f64 };
    let split = match hubs.split_everywhere {
        0 => String::new(),
        n => format!(" and {} partials of {n} split {}", hubs.crossing_everywhere, plural(n, "hub")),
    };
    format!(
        "{rows} halo rows{split} a layer; training passes sent {:.2} MB an epoch{} of the exact exchange's {:.2} MB \
         ({:.1}%), {:.1}% of its rows",
        per_epoch(total.bytes),
        if exchange.precision == Precision::Bf16 { " (rows at bfloat16)" } else { "" },
        per_epoch(total.exact_bytes),
        share(total.bytes, total.exact_bytes),
        share(total.rows, total.exact_rows)
    )
}

/// `noun`, with an `s` unless `n` is 1.
fn plural(n: u64, noun: &str) -> String {
    if n == 1 { noun.to_owned() } else { format!("{noun}s") }
}

/// One worker's whole run: load, the epochs, the model.
fn train_worker(
    worker: &mut Worker,
    io: &Arc<Io>,
    config: &TrainConfig,
    shared: &SharedOwnerMap,
    threads: usize,
) -> Result<TrainSummary, Error> {
    let started = Instant::now();
    let declared = declared(config, shared);
    let (lease, run, output) = open_output(worker, io, config, &declared)?;
    let graph = load(worker, io, config, &declared, threads)?;
    let keys = task_keys(worker, config, &declared, &graph)?;
    let cx = Context {
        spec: &graph.spec,
        local: &graph.local,
        halo: &graph.halo,
        hubs: &graph.hubs,
        features: graph.features.features(),
        link: graph.link.as_ref(),
        sparse: graph.sparse.as_ref(),
    };
    let mut trainer = Trainer::new(worker, config, &cx, keys.weight_decay)?;
    let sent = report_ready(worker, &graph, started);
    let reporter = worker.index() == 0;
    let mut log = reporter.then(|| MetricsLog::open(io.clone(), &output, &run, config.epochs, None).counting_nodes());
    let tracker = run_epochs(worker, config, &cx, &mut trainer, log.as_mut(), keys.patience)?;
    let best = keys.patience > 0 && !tracker.best_params.is_empty();
    let params = if best { tracker.best_params.clone() } else { trainer.params.clone() };
    let exchange = traffic_line(worker, &trainer.exchange, tracker.epochs, sent, &graph.hubs);
    let mut saved = Ok(());
    if let (Some(lease), Some(log)) = (lease, &log) {
        let lines = vec![("epochs".into(), tracker.epochs.to_string()), ("exchanged".into(), exchange.clone())];
        let facts = run_facts(worker.peers(), started, lines);
        let meta = setup::meta(&graph.spec, params.len(), config.link_relation_index());
        let saving = Saving { log, meta, io, params: &params, device: &trainer.base, facts, table: Vec::new() };
        saved = save_model(config, &output, lease, saving);
    }
    // Worker 0 commits; a commit that fails (another run committed first: 73) fails every
    // process alike, not only the one that holds worker 0.
    agree(worker, saved)?;
    Ok(TrainSummary {
        keys: keys.line(config, graph.spec.task),
        exchanged: Some(exchange),
        ..TrainSummary::tracked(&tracker, best, metric_of(&graph.spec), started, params)
    })
}

/// The run's task keys, once the graph holds what they need on every worker alike: a link
/// task's validation edges for its patience, a node task's labels (a typed graph's target
/// type's table's).
fn task_keys(
    worker: &mut Worker,
    config: &TrainConfig,
    declared: &Declared,
    graph: &Graph,
) -> Result<crate::task_keys::TaskKeys, Error> {
    if let Some(link) = &graph.link {
        let keys = setup::task_keys(config, link.valid_edges > 0);
        agree(worker, link.check_patience(keys.patience))?;
        return Ok(keys);
    }
    let keys = setup::task_keys(config, graph.labels.valid > 0);
    let table = match &declared.typed {
        Some((g, t)) => g.node_types[usize::from(*t)].1.as_str(),
        None => declared.nodes,
    };
    agree(worker, graph.labels.check(&schemas::redact(table), keys.patience))?;
    Ok(keys)
}

/// Logs (worker 0) the graph as loaded: the halo rows that cross a layer, the hubs split,
/// the most edges a worker sums a layer (they set the pace) and the time to get ready.
/// Returns the halo rows sent, summed over the workers.
fn report_ready(worker: &mut Worker, graph: &Graph, started: Instant) -> u64 {
    let sent = cluster::sum(worker, graph.halo.rows_sent() as u64);
    // The edges each worker sums a layer (its in-edges, its hub runs'): the slowest sets the pace.
    let summed = (graph.local.edges.src.len() + graph.hubs.run_edges()) as u64;
    let summed = cluster::all_gather(worker, vec![(worker.index(), summed)]);
    if worker.index() != 0 {
        return sent;
    }
    let layers = graph.spec.layers;
    let (largest, total) = summed.iter().fold((0, 0), |(m, t), (_, e)| (m.max(*e), t + e));
    let balance = largest as f64 * summed.len() as f64 / total.max(1) as f64;
    let ready = started.elapsed().as_secs_f64();
    let hubs = match graph.hubs.split_everywhere {
        0 => String::new(),
        n => format!(
            "; {n} {} split into {} partial sums (more in-edges than hub_threshold = {})",
            plural(n, "hub"),
            graph.hubs.partials_everywhere,
            graph.hubs.threshold()
        ),
    };
    tracing::info!(
        "train: full graph, {layers} layers; {sent} halo rows cross between workers a layer{hubs}; the most \
         edges a worker sums: {largest} ({balance:.2}x the mean); ready in {ready:.1}s"
    );
    sent
}

/// Trains the epochs, until an early stop after `patience` epochs without a better
/// validation score; a loss or a parameter that is not finite ends the run on every worker,
/// with no model. Worker 0 logs each epoch. Returns the tracker of the best epoch.
fn run_epochs(
    worker: &mut Worker,
    config: &TrainConfig,
    cx: &Context<'_>,
    trainer: &mut Trainer,
    mut log: Option<&mut MetricsLog>,
    patience: usize,
) -> Result<Tracker, Error> {
    let mut tracker = Tracker::default();
    for epoch in 0..config.epochs {
        let done = trainer.epoch(worker, config, cx, epoch)?;
        agree(worker, trainer.finite(&done.metrics))?;
        tracker.observe(&done.metrics, &trainer.params);
        if let Some(log) = &mut log {
            log.write(&done.metrics, &done.timing)?;
        }
        if tracker.should_stop(patience) {
            if worker.index() == 0 {
                tracing::info!(
                    "train: early stop after epoch {} ({patience} epochs without a better validation score)",
                    epoch + 1
                );
            }
            break;
        }
    }
    Ok(tracker)
}
