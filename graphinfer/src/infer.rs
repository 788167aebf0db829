//! A whole `[infer]` job: model, map and sampling, plan, k rounds, head and write, then
//! `_SUCCESS`. Every worker runs the same phases in the same order; any failure ends all of
//! them with one error and no marker.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_schema::SchemaRef;
use cluster::{Failure, all_gather, broadcast, peak_rss_bytes};
use parquet::file::properties::EnabledStatistics;
use parquet::schema::types::ColumnPath;
use sampling::{NodeStore, SampleSpec, agree, load_edges, load_nodes, sample_in_edges};
use schemas::model::ModelMeta;
use schemas::{ClusterConfig, InferConfig, Sampler, Targets};
use serde::{Deserialize, Serialize};
use tables::commit::{Manifest, PartEntry, Stage, check_output, commit, new_run_id};
use tables::lease::Lease;
use tables::names::Layout;
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::{Io, Place};
use timely::worker::Worker;

use crate::Error;
use crate::model::{Layers, check_input_width, load, model_dir};
use crate::output::{self, Head};
use crate::plan::plan;
use crate::progress::Progress;
use crate::round::{Context, Input, layer};

/// What one worker did, gathered into the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct WorkerStats {
    worker: usize,
    nodes: u64,
    edges: u64,
    targets: u64,
    remote_rows: u64,
    bytes: u64,
    parts: u32,
    /// This worker's finished parts, for the manifest.
    entries: Vec<PartEntry>,
    peak_rss: u64,
}

/// The job's summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub nodes: u64,
    pub edges: u64,
    /// Rows written: the target nodes scored.
    pub targets: u64,
    /// Hubs whose aggregation was split, per layer (layer 1 first).
    pub hubs: Vec<u64>,
    /// Rows read from other workers, summed over layers and workers.
    pub remote_rows: u64,
    pub bytes: u64,
    pub parts: u64,
    pub workers: usize,
    pub seconds: f64,
    /// Seconds in each phase: load (map), sample, plan, each layer, head and write.
    pub phases: Vec<(String, f64)>,
    /// Largest peak resident memory of any process.
    pub peak_rss: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "infer finished in {:.2}s on {} workers", self.seconds, self.workers)?;
        writeln!(
            f,
            "  graph:        {} nodes, {} edges; hubs split per layer {:?}",
            self.nodes, self.edges, self.hubs
        )?;
        let phases: Vec<String> = self.phases.iter().map(|(name, s)| format!("{name} {s:.2}s")).collect();
        writeln!(f, "  phases:       {}", phases.join(", "))?;
        writeln!(
            f,
            "  scored:       {} nodes ({:.0} nodes/s)",
            self.targets,
            self.targets as f64 / self.seconds.max(1e-9)
        )?;
        writeln!(f, "  exchanged:    {} rows between workers", self.remote_rows)?;
        writeln!(f, "  written:      {:.1} MB in {} part files", self.bytes as f64 / 1e6, self.parts)?;
        write!(f, "  peak memory:  {:.0} MB (largest process)", self.peak_rss as f64 / 1e6)
    }
}

/// Runs the infer job on this process's workers. Any worker's failure ends every worker.
pub fn run(config: &InferConfig, cluster: &ClusterConfig) -> Result<Summary, Failure<Error>> {
    let io = Io::new().map_err(Failure::Worker)?;
    let config = Arc::new(config.clone());
    // The model first, read once for every worker of this process: a missing or corrupt model
    // fails before any table is read.
    let dir = model_dir(&config.model).map_err(Failure::Worker)?;
    let files = gnn::io::ModelFiles::read(&io, &dir).map_err(|e| Failure::Worker(crate::model::model_error(e)))?;
    let progress = Arc::new(Progress::new(files.meta.hops));
    let model = Arc::new((dir, files));
    let threads = cluster.threads();
    let started = Instant::now();
    let summaries =
        cluster::execute(cluster, move |worker| infer_worker(worker, &io, &config, &model, &progress, threads))?;
    let mut summary = summaries.into_iter().next().ok_or_else(|| Failure::Panic("no worker ran".into()))?;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Phase timings, as every worker sees them (workers move through phases together).
struct Clock {
    started: Instant,
    phases: Vec<(String, f64)>,
}

impl Clock {
    fn lap(&mut self, name: impl Into<String>) {
        let total: f64 = self.phases.iter().map(|p| p.1).sum();
        self.phases.push((name.into(), self.started.elapsed().as_secs_f64() - total));
    }
}

fn infer_worker(
    worker: &mut Worker,
    io: &Arc<Io>,
    config: &InferConfig,
    (dir, files): &(Place, gnn::io::ModelFiles),
    progress: &Arc<Progress>,
    threads: usize,
) -> Result<Summary, Error> {
    let reporter = worker.index().is_multiple_of(threads);
    let mut clock = Clock { started: Instant::now(), phases: Vec::new() };
    let output = agree(worker, Place::parse_output(&config.output))?;
    let nodes_table = agree(worker, Place::parse(&config.nodes))?;
    let edges_table = agree(worker, Place::parse(&config.edges))?;
    let device = agree(worker, gnn::device(config.device).map_err(crate::model::model_error))?;
    let (meta, model) = agree(worker, load(files, dir, &device))?;
    let layers = Layers::of(&meta);
    let k = layers.hops;
    let embedding = config.embedding.unwrap_or(if k > 1 { k - 1 } else { k });
    if embedding > k {
        let problem = format!("[infer] embedding = {embedding}, but the model has {k} layers");
        return agree(worker, Err(Error::Usage(problem)));
    }
    if reporter {
        tracing::info!(
            "infer: {:?} model from {} ({k} layers, sampler {}, fanouts {:?}); embedding from layer {embedding}",
            meta.spec.kind,
            dir.shown(),
            meta.sampler.name(),
            meta.fanouts
        );
    }

    // The output must not touch an input, and a finished output stays unless `overwrite`;
    // nothing is deleted before this run commits (see `tables::commit`).
    let index = worker.index();
    let inputs = [&nodes_table, &edges_table, dir];
    let lease = (index == 0).then(|| {
        io.block_on(async {
            check_output(&output, &inputs, config.overwrite, &Layout::TABLE).await?;
            Lease::take(&output, &new_run_id(), Stage::Infer.name()).await
        })
    });
    let lease = agree(worker, lease.transpose())?;
    let run = broadcast(worker, lease.as_ref().map(|l| l.run().to_owned()))
        .ok_or_else(|| Error::Internal("no run id".into()))?;
    let output = PartsOf { dir: output, run, worker: index };

    // Round 0: the map and the sampling, as GraphFlat ran them for the model's records.
    if reporter {
        tracing::info!("infer: map: reading nodes from {}", nodes_table.shown());
    }
    let store = load_nodes(worker, io, &nodes_table)?;
    agree(worker, check_input_width(&meta, dir, &config.nodes, store.dim))?;
    let nodes = Rc::new(RefCell::new(store));
    if reporter {
        tracing::info!("infer: map: reading edges from {}", edges_table.shown());
    }
    let edges = load_edges(worker, io, &edges_table, &nodes, meta.sampler == Sampler::Weighted)?;
    let local_edges = edges.len() as u64;
    clock.lap("map");
    let fanouts = layers.hop_fanouts();
    let spec = SampleSpec {
        sampler: meta.sampler,
        seed: meta.flatten_seed,
        limit: fanouts.iter().copied().max().unwrap_or(0) as usize,
        hub_threshold: config.hub_threshold,
    };
    sample_in_edges(worker, &nodes, edges, spec)?;
    clock.lap("sample");
    let nodes: Rc<NodeStore> = Rc::new(
        Rc::try_unwrap(nodes)
            .map(RefCell::into_inner)
            .map_err(|_| Error::Internal("node store still shared".into()))?,
    );

    let mut targets: Vec<(i64, u32)> = (0..nodes.len())
        .filter(|&s| match &config.targets {
            Targets::All => true,
            Targets::Splits(splits) => nodes.splits[s].is_some_and(|split| splits.contains(&split)),
        })
        .map(|s| (nodes.ids[s], s as u32))
        .collect();
    targets.sort_unstable();
    let target_slots: Vec<u32> = targets.iter().map(|t| t.1).collect();
    let plan = plan(worker, &nodes, &layers, &target_slots, config.targets == Targets::All, config.hub_threshold)?;
    clock.lap("plan");

    let cx = Context {
        nodes: &nodes,
        plan: &plan,
        layers: &layers,
        model: &model,
        spec: &meta.spec,
        device: &device,
        batch_size: config.batch_size,
        progress,
        reporter,
    };
    let (logits, kept) = rounds(worker, &cx, &mut clock, embedding, &targets)?;

    let stats = write(worker, io, config, &cx, &meta, dir, &output, &targets, &logits, &kept, embedding)?;
    clock.lap("head and write");
    let stats = WorkerStats {
        edges: local_edges,
        remote_rows: plan.remote_ids.len() as u64,
        peak_rss: peak_rss_bytes().unwrap_or(0),
        ..stats
    };

    // Every worker's parts are closed once its stats arrive here: only then the marker.
    let all = all_gather(worker, vec![stats]);
    let summary = Summary {
        nodes: all.iter().map(|s| s.nodes).sum(),
        edges: all.iter().map(|s| s.edges).sum(),
        targets: all.iter().map(|s| s.targets).sum(),
        hubs: plan.hub_count[1..].to_vec(),
        remote_rows: all.iter().map(|s| s.remote_rows).sum(),
        bytes: all.iter().map(|s| s.bytes).sum(),
        parts: all.iter().map(|s| u64::from(s.parts)).sum(),
        workers: worker.peers(),
        peak_rss: all.iter().map(|s| s.peak_rss).max().unwrap_or(0),
        phases: clock.phases,
        seconds: 0.0,
    };
    let marked = match lease {
        Some(lease) => {
            let parts = all.iter().flat_map(|s| s.entries.iter().cloned()).collect();
            let settings = serde_json::to_value(config).unwrap_or_default();
            let manifest = Manifest::new(&output.run, Stage::Infer, parts, settings);
            io.block_on(commit(&output.dir, &manifest, config.overwrite, &Layout::TABLE, lease))
        }
        None => Ok(()),
    };
    agree(worker, marked)?;
    Ok(summary)
}

/// Rounds 1..=k: the targets' logits, and their rows of the embedding layer (both in target
/// order, row-major).
fn rounds(
    worker: &mut Worker,
    cx: &Context,
    clock: &mut Clock,
    embedding: usize,
    targets: &[(i64, u32)],
) -> Result<(Vec<f32>, Vec<f32>), Error> {
    let k = cx.layers.hops;
    let mut current: Vec<f32> = Vec::new();
    let mut width = cx.nodes.dim;
    let mut kept = Vec::new();
    for l in 1..=k {
        let input = if l == 1 {
            Input::Features { normalize: cx.spec.normalize_features }
        } else {
            Input::Rows { values: &current, width }
        };
        current = layer(worker, cx, l, input)?;
        width = cx.model.slice(cx.spec, l - 1).output_width();
        if l == embedding {
            kept = rows_of(&current, width, targets);
        }
        if cx.reporter {
            cx.progress.report(l - 1, Duration::ZERO, true);
        }
        clock.lap(format!("layer {l}"));
    }
    Ok((rows_of(&current, width, targets), kept))
}

fn rows_of(values: &[f32], width: usize, targets: &[(i64, u32)]) -> Vec<f32> {
    targets.iter().flat_map(|&(_, s)| values[s as usize * width..(s as usize + 1) * width].iter().copied()).collect()
}

/// Round k + 1 and the sink: this worker's targets, sorted by id, in batches.
#[allow(clippy::too_many_arguments)]
fn write(
    worker: &mut Worker,
    io: &Arc<Io>,
    config: &InferConfig,
    cx: &Context,
    meta: &ModelMeta,
    dir: &Place,
    output: &PartsOf,
    targets: &[(i64, u32)],
    logits: &[f32],
    embedding: &[f32],
    embedding_layer: usize,
) -> Result<WorkerStats, Error> {
    let head = if meta.spec.multi_label { Head::MultiHot } else { Head::Classes };
    let n = targets.len();
    let classes = meta.spec.classes;
    let width = cx.model.slice(cx.spec, embedding_layer - 1).output_width();
    let metadata = HashMap::from([
        ("graphinfer.model".to_owned(), dir.shown()),
        ("graphinfer.model_json".to_owned(), serde_json::to_string(meta).unwrap_or_default()),
        ("graphinfer.embedding_layer".to_owned(), embedding_layer.to_string()),
        ("graphinfer.targets".to_owned(), config.targets.to_string()),
        ("graphinfer.hub_threshold".to_owned(), config.hub_threshold.to_string()),
    ]);
    let schema: SchemaRef = Arc::new(output::schema(head, width, classes, metadata));
    let props = part_properties()
        .set_column_statistics_enabled(ColumnPath::from(output::NODE_ID), EnabledStatistics::Chunk)
        .build();
    let mut writer = PartWriter::new(io.clone(), output.clone(), schema.clone(), props, config.part_size_mb << 20);
    let phase = cx.progress.write_phase();
    cx.progress.add_total(phase, n as u64);
    let result = (|| {
        let rows = crate::round::transform_rows(config.batch_size, width + classes);
        for start in (0..n).step_by(rows) {
            let end = (start + rows).min(n);
            let ids: Vec<i64> = targets[start..end].iter().map(|t| t.0).collect();
            let batch = output::batch(
                &schema,
                head,
                &ids,
                &embedding[start * width..end * width],
                &logits[start * classes..end * classes],
            )
            .map_err(|source| Error::Arrow { file: writer.current_name(), source })?;
            writer.write(&batch)?;
            cx.progress.advance(phase, (end - start) as u64);
            if cx.reporter {
                cx.progress.report(phase, Duration::from_secs(2), false);
            }
        }
        writer.finish()
    })();
    if cx.reporter {
        cx.progress.report(phase, Duration::ZERO, true);
    }
    agree(worker, result)?;
    Ok(WorkerStats {
        worker: worker.index(),
        nodes: cx.nodes.len() as u64,
        targets: n as u64,
        bytes: writer.bytes_written,
        parts: writer.parts_written,
        entries: writer.parts.clone(),
        ..WorkerStats::default()
    })
}
