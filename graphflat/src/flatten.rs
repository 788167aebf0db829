//! A whole `[flatten]` job: the stage skeleton (`stage::run`: output and lease, load and
//! sample, targets, commit) around this stage's body, [`Records`]: k rounds over batches of
//! targets, records written to parts sorted by root. Every worker runs the same phases in the
//! same order; any bad input ends all of them with the same error and no marker.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use arrow_schema::SchemaRef;
use cluster::{Failure, all_gather, wait_while};
use sampling::{NodeStore, SampleSpec, SupervisionSample, agree};
use schemas::layers::Layers;
use schemas::record::{FlattenMeta, record_schema};
use schemas::{ClusterConfig, FlattenConfig};
use serde::{Deserialize, Serialize};
use stage::{Body, Declared, Details, Graph, Progress, Worker, WorkerStats, Written};
use tables::Io;
use tables::commit::Stage;
use tables::parts::PartsOf;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Input, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle, Scope, StreamVec};

use crate::error::Error;
use crate::links::flatten_links;
use crate::round::{Request, rounds};
use crate::sink::{PartWriter, Row};

/// The job's summary.
pub type Summary = stage::Summary<RecordSizes>;

/// The records' sizes on one worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecordStats {
    pub nodes: u64,
    pub edges: u64,
    pub max_nodes: u64,
    pub max_edges: u64,
}

impl RecordStats {
    fn add(&mut self, (nodes, edges): (u64, u64)) {
        self.nodes += nodes;
        self.edges += edges;
        self.max_nodes = self.max_nodes.max(nodes);
        self.max_edges = self.max_edges.max(edges);
    }
}

/// The records' sizes over the job.
#[derive(Debug, Clone, Default)]
pub struct RecordSizes {
    pub mean_nodes: f64,
    pub mean_edges: f64,
    pub max_nodes: u64,
    pub max_edges: u64,
}

impl Details for RecordSizes {
    fn lines(&self, summary: &Summary) -> Vec<(&'static str, String)> {
        vec![
            ("records", format!("{} targets ({:.0} records/s)", summary.targets, summary.rate())),
            ("record nodes", format!("mean {:.1}, max {}", self.mean_nodes, self.max_nodes)),
            ("record edges", format!("mean {:.1}, max {}", self.mean_edges, self.max_edges)),
        ]
    }
}

/// Runs the flatten job on this process's workers and returns the summary. Any worker's
/// failure ends every worker (see `cluster::execute`).
pub fn run(io: &Arc<Io>, config: &FlattenConfig, cluster: &ClusterConfig) -> Result<Summary, Failure<Error>> {
    let io = io.clone();
    let config = Arc::new(config.clone());
    let progress = Arc::new(
        Progress::new("flatten", "records", vec!["rounds".into()]).with_tally("requests per round", config.hops + 1),
    );
    let threads = cluster.threads();
    stage::execute(cluster, move |worker| {
        let declared = Declared::of(Stage::Flatten, &*config);
        let body = Records { config: &config, layers: config.layers() };
        stage::run(worker, &io, &progress, threads, &declared, body)
    })
}

/// GraphFlat's body: one record per target, written to parts.
struct Records<'a> {
    config: &'a FlattenConfig,
    layers: Layers,
}

impl Body for Records<'_> {
    type Own = RecordStats;
    type Details = RecordSizes;

    fn sampling(&self) -> SampleSpec {
        SampleSpec {
            sampler: self.config.sampler,
            seed: self.config.seed,
            limit: self.layers.sample_limit(),
            hub_threshold: self.config.hub_threshold,
        }
    }

    fn supervision(&self) -> Option<SupervisionSample> {
        let link = self.config.link()?;
        Some(SupervisionSample::new(link.supervision_fraction, self.config.seed).expect("checked with the job"))
    }

    fn run(&mut self, worker: &mut Worker, graph: Graph, output: &PartsOf) -> Result<Written<RecordStats>, Error> {
        let meta = FlattenMeta {
            hops: self.config.hops,
            fanouts: self.config.recorded_fanouts(),
            sampler: self.config.sampler,
            seed: self.config.seed,
            feature_dim: graph.nodes.dim,
            label: graph.nodes.label_kind,
            edge_dim: graph.nodes.edge_dim,
            edge_stats: graph.nodes.edge_stats.clone(),
            link: self.config.link(),
        };
        let schema: SchemaRef = Arc::new(record_schema(&meta));
        let layers = self.layers.clone();
        let written = if meta.link.is_some() {
            flatten_links(worker, self.config, graph.nodes, graph.supervision, layers, schema, output)?
        } else {
            let targets: Vec<i64> = graph.targets.iter().map(|t| t.0).collect();
            flatten_targets(worker, self.config, graph.nodes, &targets, layers, schema, output)?
        };
        worker.clock.lap("rounds and write");
        if worker.reporter {
            worker.progress.report(0, Duration::ZERO, true);
        }
        Ok(written)
    }

    fn details(&self, all: &[WorkerStats<RecordStats>]) -> RecordSizes {
        let targets: u64 = all.iter().map(|s| s.targets).sum();
        let per_target = |total: u64| if targets == 0 { 0.0 } else { total as f64 / targets as f64 };
        RecordSizes {
            mean_nodes: per_target(all.iter().map(|s| s.own.nodes).sum()),
            mean_edges: per_target(all.iter().map(|s| s.own.edges).sum()),
            max_nodes: all.iter().map(|s| s.own.max_nodes).max().unwrap_or(0),
            max_edges: all.iter().map(|s| s.own.max_edges).max().unwrap_or(0),
        }
    }
}

/// The rounds over this worker's targets, batch by batch, and the part writer behind them.
fn flatten_targets(
    worker: &mut Worker,
    config: &FlattenConfig,
    nodes: NodeStore,
    targets: &[i64],
    layers: Layers,
    schema: SchemaRef,
    output: &PartsOf,
) -> Result<Written<RecordStats>, Error> {
    let progress = worker.progress.clone();
    progress.add_total(0, targets.len() as u64);
    let batches: Vec<Vec<Request>> = targets
        .chunks(config.batch_size)
        .map(|batch| batch.iter().map(|&root| Request { root, node: root, hop: 0 }).collect())
        .collect();
    let (nodes, layers) = (Rc::new(nodes), Rc::new(layers));
    write_batches(worker, config, schema, output, batches, move |scope, requests| {
        rounds(scope, requests, nodes, layers, progress)
    })
}

/// Runs `batches` through the dataflow that `build` makes, one timely epoch per batch with at
/// most `max_in_flight` in flight, and writes the rows it emits to parts, each batch sorted
/// (`Row::sort`) once it is complete, so parts are the same every run. Every worker calls
/// this at the same point; a worker with fewer batches sends empty epochs.
pub(crate) fn write_batches<I, R>(
    worker: &mut Worker,
    config: &FlattenConfig,
    schema: SchemaRef,
    output: &PartsOf,
    batches: Vec<Vec<I>>,
    build: impl for<'s> FnOnce(Scope<'s, u64>, StreamVec<'s, u64, I>) -> StreamVec<'s, u64, R>,
) -> Result<Written<RecordStats>, Error>
where
    I: timely::ExchangeData + Clone,
    R: Row,
{
    let (progress, reporter) = (worker.progress.clone(), worker.reporter);
    let timely = &mut *worker.timely;
    let index = timely.index();
    let epochs = all_gather(timely, vec![(batches.len() as u64, index)]).iter().map(|b| b.0).max().unwrap_or(0);

    let written: Rc<RefCell<Written<RecordStats>>> = Rc::default();
    let failure: Rc<RefCell<Option<Error>>> = Rc::default();
    let finished = Rc::new(Cell::new(false));
    let mut writer = PartWriter::<R>::new(worker.io.clone(), output.clone(), schema, config.part_size_mb << 20);

    let mut input = InputHandleVec::<u64, I>::new();
    let probe = ProbeHandle::new();
    {
        let (written, failure, finished, progress) =
            (written.clone(), failure.clone(), finished.clone(), progress.clone());
        // Bytes already added to the process's progress counter.
        let mut counted = 0u64;
        let mut pending: HashMap<u64, Vec<R>> = HashMap::new();
        timely.dataflow::<u64, _, _>(|scope| {
            let items = scope.input_from(&mut input);
            build(scope, items).probe_with(&probe).sink(Pipeline, "Write", move |(input, frontier)| {
                // Rows of a batch arrive in no fixed order: hold each batch until it is complete.
                input.for_each(|cap, rows| {
                    let time = cap.least().copied().unwrap_or_default();
                    pending.entry(time).or_default().append(rows)
                });
                let mut done: Vec<u64> = pending.keys().copied().filter(|t| !frontier.less_equal(t)).collect();
                done.sort_unstable();
                for time in done {
                    let mut rows = pending.remove(&time).unwrap_or_default();
                    R::sort(&mut rows);
                    let mut written = written.borrow_mut();
                    for row in rows {
                        written.targets += 1;
                        written.own.add(row.sizes());
                        if failure.borrow().is_none()
                            && let Err(e) = writer.push(row)
                        {
                            *failure.borrow_mut() = Some(e);
                        }
                        progress.advance(0, 1);
                    }
                }
                if frontier.is_empty() && !finished.get() {
                    if failure.borrow().is_none()
                        && let Err(e) = writer.finish()
                    {
                        *failure.borrow_mut() = Some(e);
                    }
                    let mut written = written.borrow_mut();
                    written.bytes = writer.bytes_written();
                    written.parts = writer.parts_written();
                    written.entries = writer.entries();
                    finished.set(true);
                }
                let now = writer.bytes_so_far();
                progress.add_bytes(now.saturating_sub(counted));
                counted = now;
            });
        });
    }

    let mut batches = batches.into_iter();
    for epoch in 0..epochs {
        for item in batches.next().into_iter().flatten() {
            input.send(item);
        }
        input.advance_to(epoch + 1);
        // Keep at most `max_in_flight` batches between input and output.
        let oldest = (epoch + 1).saturating_sub(config.max_in_flight as u64);
        wait_while(timely, || probe.less_than(&oldest));
        if reporter {
            progress.report(0, Duration::from_secs(2), false);
        }
    }
    input.close();
    wait_while(timely, || !finished.get());
    let failure = failure.take();
    agree(timely, failure.map_or(Ok(()), Err))?;
    Ok(written.take())
}
