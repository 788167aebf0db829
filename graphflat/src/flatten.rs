//! A whole `[flatten]` job: load (map), sample with re-indexing, k rounds over batches of
//! targets, write parts, then `_SUCCESS`. Every worker runs the same phases in the same order;
//! any bad input ends all of them with the same error and no marker.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use arrow_schema::SchemaRef;
use schemas::record::{FlattenMeta, record_schema};
use schemas::{ClusterConfig, FlattenConfig, Sampler, Targets};
use serde::{Deserialize, Serialize};
use tables::commit::{Manifest, PartEntry, Stage, check_output, commit, new_run_id};
use tables::lease::Lease;
use tables::names::Layout;
use tables::parts::PartsOf;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Input, Probe};
use timely::dataflow::{InputHandleVec, ProbeHandle};
use timely::worker::Worker;

use cluster::{Failure, all_gather, broadcast, wait_while};
use sampling::{LayerPlan, NodeStore, SampleSpec, agree, load_edges, load_nodes, sample_in_edges};
use schemas::Record;

use crate::error::Error;
use crate::progress::Progress;
use crate::round::{Request, rounds};
use crate::sink::PartWriter;
use cluster::peak_rss_bytes;
use tables::{Io, Place};

/// What one worker did, gathered into the job's summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WorkerStats {
    pub worker: usize,
    pub nodes: u64,
    pub edges: u64,
    pub targets: u64,
    pub record_nodes: u64,
    pub record_edges: u64,
    pub max_record_nodes: u64,
    pub max_record_edges: u64,
    pub bytes: u64,
    pub parts: u32,
    /// This worker's finished parts, for the manifest.
    pub entries: Vec<PartEntry>,
    pub peak_rss: u64,
    pub reduced_edges: u64,
}

/// The job's summary, the same on every worker.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub nodes: u64,
    pub edges: u64,
    pub targets: u64,
    pub mean_record_nodes: f64,
    pub mean_record_edges: f64,
    pub max_record_nodes: u64,
    pub max_record_edges: u64,
    pub hubs_reindexed: u64,
    pub bytes: u64,
    pub parts: u64,
    pub seconds: f64,
    /// Largest peak resident memory of any process.
    pub peak_rss: u64,
    pub workers: usize,
    /// Seconds in each phase (workers move through phases together).
    pub map_seconds: f64,
    pub sample_seconds: f64,
    pub rounds_seconds: f64,
    /// In-edges taken in by the busiest sampling reducer over the mean: 1.0 is perfect balance.
    pub reducer_skew: f64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "flatten finished in {:.2}s on {} workers", self.seconds, self.workers)?;
        writeln!(
            f,
            "  graph:        {} nodes, {} edges, {} hubs re-indexed",
            self.nodes, self.edges, self.hubs_reindexed
        )?;
        writeln!(
            f,
            "  phases:       map {:.2}s, sample {:.2}s (busiest reducer {:.2}x the mean), rounds and write {:.2}s",
            self.map_seconds, self.sample_seconds, self.reducer_skew, self.rounds_seconds
        )?;
        writeln!(
            f,
            "  records:      {} targets ({:.0} records/s)",
            self.targets,
            self.targets as f64 / self.seconds.max(1e-9)
        )?;
        writeln!(f, "  record nodes: mean {:.1}, max {}", self.mean_record_nodes, self.max_record_nodes)?;
        writeln!(f, "  record edges: mean {:.1}, max {}", self.mean_record_edges, self.max_record_edges)?;
        writeln!(
            f,
            "  written:      {:.1} MB in {} part files ({:.1} MB/s)",
            self.bytes as f64 / 1e6,
            self.parts,
            self.bytes as f64 / 1e6 / self.seconds.max(1e-9)
        )?;
        write!(f, "  peak memory:  {:.0} MB (largest process)", self.peak_rss as f64 / 1e6)
    }
}

/// Runs the flatten job on this process's workers and returns the summary. Any worker's
/// failure ends every worker (see `cluster::execute`).
pub fn run(config: &FlattenConfig, cluster: &ClusterConfig) -> Result<Summary, Failure<Error>> {
    let io = Io::new().map_err(Failure::Worker)?;
    let config = Arc::new(config.clone());
    let progress = Arc::new(Progress::new(config.hops));
    let threads = cluster.threads();
    let started = std::time::Instant::now();
    let summaries = cluster::execute(cluster, move |worker| flatten_worker(worker, &io, &config, &progress, threads))?;
    let mut summary = summaries.into_iter().next().ok_or_else(|| Failure::Panic("no worker ran".into()))?;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

fn flatten_worker(
    worker: &mut Worker,
    io: &Arc<Io>,
    config: &FlattenConfig,
    progress: &Arc<Progress>,
    threads: usize,
) -> Result<Summary, Error> {
    let index = worker.index();
    let reporter = index.is_multiple_of(threads);
    let output = agree(worker, Place::parse_output(&config.output))?;
    let nodes_table = agree(worker, Place::parse(&config.nodes))?;
    let edges_table = agree(worker, Place::parse(&config.edges))?;

    // The output must not touch an input, and a finished output stays unless `overwrite`;
    // nothing is deleted before this run commits (see `tables::commit`).
    let inputs = [&nodes_table, &edges_table];
    let lease = (index == 0).then(|| {
        io.block_on(async {
            check_output(&output, &inputs, config.overwrite, &Layout::TABLE).await?;
            Lease::take(&output, &new_run_id(), Stage::Flatten.name()).await
        })
    });
    let lease = agree(worker, lease.transpose())?;
    let run = broadcast(worker, lease.as_ref().map(|l| l.run().to_owned()))
        .ok_or_else(|| Error::Internal("no run id".into()))?;
    let output = PartsOf { dir: output, run, worker: index };

    let clock = std::time::Instant::now();
    if reporter {
        tracing::info!("flatten: map: reading nodes from {}", nodes_table.shown());
    }
    let nodes = Rc::new(RefCell::new(load_nodes(worker, io, &nodes_table)?));
    if reporter {
        tracing::info!("flatten: map: reading edges from {}", edges_table.shown());
    }
    let edges = load_edges(worker, io, &edges_table, &nodes, config.sampler == Sampler::Weighted)?;
    let local_edges = edges.len() as u64;
    let map_seconds = clock.elapsed().as_secs_f64();

    let plan = LayerPlan::new(config.hop_fanouts());
    let spec = SampleSpec {
        sampler: config.sampler,
        seed: config.seed,
        limit: plan.max_fanout(),
        hub_threshold: config.hub_threshold,
    };
    let sampled = sample_in_edges(worker, &nodes, edges, spec)?;
    let sample_seconds = clock.elapsed().as_secs_f64() - map_seconds;
    if reporter {
        tracing::info!("flatten: sampled in-edges ({}, {} hubs re-indexed)", config.sampler.name(), sampled.hubs);
    }
    let nodes: NodeStore = Rc::try_unwrap(nodes)
        .map(RefCell::into_inner)
        .map_err(|_| Error::Internal("node store still shared".into()))?;

    let meta = FlattenMeta {
        hops: config.hops,
        fanouts: config.recorded_fanouts(),
        sampler: config.sampler,
        seed: config.seed,
        feature_dim: nodes.dim,
        label: nodes.label_kind,
    };
    let schema: SchemaRef = Arc::new(record_schema(&meta));
    let mut stats = flatten_targets(worker, io, config, progress, reporter, nodes, plan, schema, &output)?;
    stats.edges = local_edges;
    stats.reduced_edges = sampled.reduced_edges;
    stats.peak_rss = peak_rss_bytes().unwrap_or(0);
    let rounds_seconds = clock.elapsed().as_secs_f64() - map_seconds - sample_seconds;
    if reporter {
        progress.report(Duration::ZERO, true);
    }

    // Every worker's parts are closed once its stats arrive here: only then the marker.
    let all = all_gather(worker, vec![stats]);
    let mut summary = summarize(&all, sampled.hubs, worker.peers());
    (summary.map_seconds, summary.sample_seconds, summary.rounds_seconds) =
        (map_seconds, sample_seconds, rounds_seconds);
    let marked = match lease {
        Some(lease) => {
            let parts = all.iter().flat_map(|s| s.entries.iter().cloned()).collect();
            let settings = serde_json::to_value(config).unwrap_or_default();
            let manifest = Manifest::new(&output.run, Stage::Flatten, parts, settings);
            io.block_on(commit(&output.dir, &manifest, config.overwrite, &Layout::TABLE, lease))
        }
        None => Ok(()),
    };
    agree(worker, marked)?;
    Ok(summary)
}

fn summarize(all: &[WorkerStats], hubs: u64, workers: usize) -> Summary {
    let targets: u64 = all.iter().map(|s| s.targets).sum();
    let per_target = |total: u64| if targets == 0 { 0.0 } else { total as f64 / targets as f64 };
    Summary {
        nodes: all.iter().map(|s| s.nodes).sum(),
        edges: all.iter().map(|s| s.edges).sum(),
        targets,
        mean_record_nodes: per_target(all.iter().map(|s| s.record_nodes).sum()),
        mean_record_edges: per_target(all.iter().map(|s| s.record_edges).sum()),
        max_record_nodes: all.iter().map(|s| s.max_record_nodes).max().unwrap_or(0),
        max_record_edges: all.iter().map(|s| s.max_record_edges).max().unwrap_or(0),
        hubs_reindexed: hubs,
        bytes: all.iter().map(|s| s.bytes).sum(),
        parts: all.iter().map(|s| u64::from(s.parts)).sum(),
        peak_rss: all.iter().map(|s| s.peak_rss).max().unwrap_or(0),
        workers,
        reducer_skew: {
            let max = all.iter().map(|s| s.reduced_edges).max().unwrap_or(0) as f64;
            let mean = all.iter().map(|s| s.reduced_edges).sum::<u64>() as f64 / all.len().max(1) as f64;
            if mean > 0.0 { max / mean } else { 1.0 }
        },
        ..Summary::default()
    }
}

/// The rounds over this worker's targets, batch by batch, and the part writer behind them.
#[allow(clippy::too_many_arguments)]
fn flatten_targets(
    worker: &mut Worker,
    io: &Arc<Io>,
    config: &FlattenConfig,
    progress: &Arc<Progress>,
    reporter: bool,
    nodes: NodeStore,
    plan: LayerPlan,
    schema: SchemaRef,
    output: &PartsOf,
) -> Result<WorkerStats, Error> {
    let index = worker.index();
    let mut targets: Vec<i64> = (0..nodes.len())
        .filter(|&s| match &config.targets {
            Targets::All => true,
            Targets::Splits(splits) => nodes.splits[s].is_some_and(|split| splits.contains(&split)),
        })
        .map(|s| nodes.ids[s])
        .collect();
    targets.sort_unstable();
    progress.targets.fetch_add(targets.len() as u64, Ordering::Relaxed);
    let batches: Vec<&[i64]> = targets.chunks(config.batch_size).collect();
    let epochs = all_gather(worker, vec![(batches.len() as u64, index)]).iter().map(|b| b.0).max().unwrap_or(0);

    let stats = Rc::new(RefCell::new(WorkerStats { worker: index, nodes: nodes.len() as u64, ..Default::default() }));
    let failure: Rc<RefCell<Option<Error>>> = Rc::default();
    let finished = Rc::new(Cell::new(false));
    let mut writer = PartWriter::new(io.clone(), output.clone(), schema, config.part_size_mb << 20);

    let mut input = InputHandleVec::<u64, Request>::new();
    let probe = ProbeHandle::new();
    let nodes = Rc::new(nodes);
    let plan = Rc::new(plan);
    {
        let (stats, failure, finished, progress) = (stats.clone(), failure.clone(), finished.clone(), progress.clone());
        // Bytes already added to the process's progress counter.
        let mut counted = 0u64;
        let mut pending: HashMap<u64, Vec<Record>> = HashMap::new();
        worker.dataflow::<u64, _, _>(|scope| {
            let requests = scope.input_from(&mut input);
            rounds(scope, requests, nodes, plan, progress.clone()).probe_with(&probe).sink(
                Pipeline,
                "Write",
                move |(input, frontier)| {
                    // Records of a batch arrive in no fixed order: hold each batch until it is
                    // complete, then write it sorted by root, so parts are the same every run.
                    input.for_each(|cap, records| {
                        let time = cap.least().copied().unwrap_or_default();
                        pending.entry(time).or_default().append(records)
                    });
                    let mut done: Vec<u64> = pending.keys().copied().filter(|t| !frontier.less_equal(t)).collect();
                    done.sort_unstable();
                    for time in done {
                        let mut records = pending.remove(&time).unwrap_or_default();
                        records.sort_unstable_by_key(|r| r.root);
                        let mut stats = stats.borrow_mut();
                        for record in records {
                            stats.targets += 1;
                            stats.record_nodes += record.num_nodes() as u64;
                            stats.record_edges += record.num_edges() as u64;
                            stats.max_record_nodes = stats.max_record_nodes.max(record.num_nodes() as u64);
                            stats.max_record_edges = stats.max_record_edges.max(record.num_edges() as u64);
                            if failure.borrow().is_none()
                                && let Err(e) = writer.push(record)
                            {
                                *failure.borrow_mut() = Some(e);
                            }
                            progress.records.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if frontier.is_empty() && !finished.get() {
                        if failure.borrow().is_none()
                            && let Err(e) = writer.finish()
                        {
                            *failure.borrow_mut() = Some(e);
                        }
                        let mut stats = stats.borrow_mut();
                        stats.bytes = writer.bytes_written();
                        stats.parts = writer.parts_written();
                        stats.entries = writer.entries();
                        finished.set(true);
                    }
                    let now = writer.bytes_so_far();
                    progress.bytes.fetch_add(now.saturating_sub(counted), Ordering::Relaxed);
                    counted = now;
                },
            );
        });
    }

    for epoch in 0..epochs {
        if let Some(batch) = batches.get(epoch as usize) {
            for &root in batch.iter() {
                input.send(Request { root, node: root, hop: 0 });
            }
        }
        input.advance_to(epoch + 1);
        // Keep at most `max_in_flight` batches between input and output.
        let oldest = (epoch + 1).saturating_sub(config.max_in_flight as u64);
        wait_while(worker, || probe.less_than(&oldest));
        if reporter {
            progress.report(Duration::from_secs(2), false);
        }
    }
    input.close();
    wait_while(worker, || !finished.get());
    let failure = failure.take();
    agree(worker, failure.map_or(Ok(()), Err))?;
    Ok(stats.take())
}
