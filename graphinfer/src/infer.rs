//! A whole `[infer]` job: the stage skeleton (`stage::run`: outputs and leases, round 0's map
//! and sampling, targets, commit) around this stage's body, [`Scores`]: the plan, k rounds,
//! the head and, for a link model given `pairs`, the pairs round ([`crate::pairs`]) into the
//! extra output `pairs_output`. Every worker runs the same phases in the same order; any
//! failure ends all of them with one error and no marker.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, Int64Array, StringArray};
use arrow_schema::SchemaRef;
use burn::prelude::Device;
use cluster::Failure;
use gnn::Gnn;
use gnn::decoder::PairScorer;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use sampling::{NodeStore, ReadEdges, SampleSpec, SharedOwnerMap, agree};
use schemas::job::MissingEmbedding;
use schemas::job::TypedGraph;
use schemas::model::ModelMeta;
use schemas::{ClusterConfig, InferConfig, Targets, Task};
use stage::refresh::Refreshed;
use stage::{Body, Clock, Day, Declared, Details, Graph, Progress, Reads, Worker, WorkerStats, Written};
use tables::commit::Stage;
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::{Io, Place};

use crate::Error;
use crate::model::{
    check_edge_width, check_graph, check_input_width, check_precomputed, check_relation_edge_widths, check_type_widths,
    load, model_dir, model_error,
};
use crate::output::{self, Head, TypedRows};
use crate::pairs::{self, Candidates, Embeddings, PairTypes};
use crate::plan::{Plan, plan};
use crate::refresh::Refresh;
use crate::round::{Context, Input, LearnedInput, layer};
use crate::rule::LayerRule;
use schemas::facts::{Bins, Histogram, LinearCounts};

/// The job's summary.
pub type Summary = stage::Summary<Rounds>;

/// What the rounds did over the job.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    /// Hubs whose aggregation was split, per layer (layer 1 first).
    pub hubs_split: Vec<u64>,
    /// Rows read from other workers, summed over layers and workers.
    pub remote_rows: u64,
    /// Candidate pairs scored, when the job has `pairs`.
    pub pairs: Option<u64>,
    /// Scored nodes predicting each class (none for a link model).
    pub predictions: Vec<u64>,
    pub pair_scores: LinearCounts,
    /// A model with learned embeddings: nodes without a row (given zeros), and rows of nodes
    /// the graph does not hold.
    pub learned: Option<(u64, u64)>,
    /// A run with `incremental`: what the refresh did, and the parts it carried over untouched
    /// and wrote again without their affected rows (holding `kept` rows).
    pub refreshed: Option<Refreshed>,
    pub carried: u64,
    pub rewritten: u64,
    pub kept: u64,
    /// With `keep_graph` or delta tables: what making the kept graph did.
    pub graph: Option<String>,
}

impl Details for Rounds {
    fn lines(&self, summary: &Summary) -> Vec<(&'static str, String)> {
        let mut lines = vec![
            ("scored", format!("{} nodes ({:.0} nodes/s)", summary.targets, summary.rate())),
            ("hubs split", format!("{:?} per layer", self.hubs_split)),
            ("exchanged", format!("{} rows between workers", self.remote_rows)),
        ];
        if let Some(pairs) = self.pairs {
            lines.push(("pairs", format!("{pairs} candidate pairs scored")));
        }
        if let Some((missing, unknown)) = self.learned {
            let line =
                format!("{missing} nodes without a learned row (zeros), {unknown} rows of nodes not in the graph");
            lines.push(("learned", line));
        }
        if let Some(graph) = &self.graph {
            lines.push(("kept graph", graph.clone()));
        }
        if let Some(refreshed) = &self.refreshed {
            lines.push(("refresh", refreshed.line()));
        }
        if self.refreshed.as_ref().is_some_and(|r| r.from.is_some()) {
            let line = format!(
                "{} carried over, {} written again without their affected rows ({} rows kept)",
                self.carried, self.rewritten, self.kept
            );
            lines.push(("parts", line));
        }
        lines
    }

    fn histograms(&self) -> Vec<Histogram> {
        let mut histograms = Vec::new();
        if !self.predictions.is_empty() {
            let classes = (0..self.predictions.len()).map(|c| c.to_string()).collect();
            // A refresh counts the rows it computed, not those it carried over.
            let refreshed = self.refreshed.as_ref().is_some_and(|r| r.from.is_some());
            histograms.push(Histogram::new(
                if refreshed { "predicted class (rows computed again)" } else { "predicted class" },
                "nodes",
                Bins::Categories(classes),
                self.predictions.clone(),
            ));
        }
        if self.pairs.is_some() {
            let bins = Bins::Linear { lo: 0.0, hi: 1.0 };
            histograms.push(Histogram::new("pair score (sigmoid)", "pairs", bins, self.pair_scores.0.clone()));
        }
        histograms
    }
}

/// The progress phases: `layer 1/k` ..= `layer k/k`, then `write`.
fn phases(hops: usize) -> Vec<String> {
    (1..=hops).map(|l| format!("layer {l}/{hops}")).chain(["write".to_owned()]).collect()
}

/// Runs the infer job on this process's workers. Any worker's failure ends every worker.
pub fn run(io: &Arc<Io>, config: &InferConfig, cluster: &ClusterConfig) -> Result<Summary, Failure<Error>> {
    let io = io.clone();
    let config = Arc::new(config.clone());
    // The model first, read once for every worker of this process: a missing or corrupt model
    // fails before any table is read.
    let dir = model_dir(&io, &config.model).map_err(Failure::Worker)?;
    let files = gnn::io::ModelFiles::read(&io, &dir).map_err(|e| Failure::Worker(model_error(e)))?;
    let progress = Arc::new(Progress::new("infer", "nodes", phases(files.meta.spec.layers)));
    let model = Arc::new((dir, files));
    let threads = cluster.threads();
    let typed = Arc::new(config.typed());
    let owner_map = SharedOwnerMap::default();
    stage::execute(cluster, move |worker| {
        let (dir, files) = &*model;
        let device = agree(worker, gnn::device(config.device).map_err(model_error))?;
        let (meta, model) = agree(worker, load(files, &device))?;
        agree(worker, check_graph(&meta, &files.meta_place, typed.as_ref().as_ref()))?;
        let rule = LayerRule::of(&meta);
        let embedding = agree(worker, embedding_layer(&config, meta.spec.layers, meta.spec.task))?;
        agree(worker, check_pairs(&config, &meta, dir))?;
        let candidates = agree(worker, config.pairs.as_deref().map(|p| Candidates::open(&io, p)).transpose())?;
        if worker.index().is_multiple_of(threads) {
            log_model(&meta, dir, embedding);
        }
        let day = Day::begin(worker, &io, (&config.output, Stage::Infer), &config.arrival(), config.incremental)?;
        let mut declared = Declared::of(Stage::Infer, &*config)
            .with_link_relation(meta.link_relation)
            .with_partition(config.partition.as_deref(), &owner_map);
        if let Some(uri) = &config.pairs_output {
            declared = declared.with_extra("pairs_output", uri);
        }
        let declared = day.declare(declared);
        let scorer = candidates.is_some().then(|| PairScorer::of(&meta.spec, model.decoder.as_ref()));
        let pairs = candidates.as_ref().zip(scorer);
        let body = Scores {
            config: &config,
            dir,
            model_run: &files.run,
            meta: &meta,
            model: &model,
            device: &device,
            rule,
            typed: typed.as_ref().as_ref(),
            embedding,
            pairs,
            refreshed: None,
            graph: day.graph_line(),
        };
        stage::run(worker, &io, &progress, threads, &declared, body)
    })
}

/// The log's line on the model a job runs.
fn log_model(meta: &ModelMeta, dir: &Place, embedding: usize) {
    tracing::info!(
        "infer: {:?} model from {} ({} layers, sampler {}, fanouts {:?}); embedding from layer {embedding}",
        meta.spec.kind,
        dir.shown(),
        meta.spec.layers,
        meta.sampler.name(),
        meta.fanouts
    );
}

/// The layer whose output is the embedding: `[infer] embedding`, by default the last hidden
/// layer of a node model and the last layer (the encoder's output) of a link model.
fn embedding_layer(config: &InferConfig, k: usize, task: Task) -> Result<usize, Error> {
    let default = if k > 1 && task == Task::Node { k - 1 } else { k };
    let embedding = config.embedding.unwrap_or(default);
    if embedding > k {
        return Err(Error::Usage(format!("[infer] embedding = {embedding}, but the model has {k} layers")));
    }
    Ok(embedding)
}

/// `pairs` needs a link model: its decoder scores them.
fn check_pairs(config: &InferConfig, meta: &ModelMeta, dir: &Place) -> Result<(), Error> {
    if config.pairs.is_some() && meta.spec.task != Task::Link {
        return Err(Error::Usage(format!(
            "[infer] pairs: the model {} is a node model (task = \"node\"); candidate pairs are scored by a link \
             model's decoder (train with task = \"link\")",
            dir.shown()
        )));
    }
    Ok(())
}

/// GraphInfer's body: the plan, k rounds and the head over the sampled graph, then the pairs
/// round when the job has `pairs`.
struct Scores<'a> {
    config: &'a InferConfig,
    dir: &'a Place,
    /// The training run that committed the model.
    model_run: &'a str,
    meta: &'a ModelMeta,
    model: &'a Gnn,
    device: &'a Device,
    rule: LayerRule,
    /// A typed graph and its target type (checked against the model's).
    typed: Option<&'a (TypedGraph, u8)>,
    embedding: usize,
    /// The candidate pairs and the decoder that scores them.
    pairs: Option<(&'a Candidates, PairScorer)>,
    /// With `incremental`: what the refresh did.
    refreshed: Option<Refreshed>,
    /// With `keep_graph` or delta tables: the summary's line on the kept graph.
    graph: Option<String>,
}

/// Rows read from other workers: the only fact of a worker's rounds the summary needs that
/// the skeleton does not gather (hub counts are the same on every worker).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct RoundStats {
    pub remote_rows: u64,
    /// Hubs split per layer (layer 1 first), the same on every worker.
    pub hubs_split: Vec<u64>,
    /// Candidate pairs this worker scored.
    pub pairs: u64,
    /// Scored nodes predicting each class.
    pub predictions: Vec<u64>,
    /// Candidate pairs by the sigmoid of their score, in `pairs::SCORE_BINS` bins over [0, 1].
    pub pair_scores: LinearCounts,
    /// Learned embeddings: this worker's nodes without a row, and rows of unknown nodes.
    pub learned: (u64, u64),
    /// A refresh: parts written again without their affected rows, and the rows they kept.
    pub rewritten: u64,
    pub kept: u64,
}

impl Reads for Scores<'_> {
    fn sampling(&self) -> SampleSpec {
        // Round 0 as GraphFlat ran it for the model's records: the same samples.
        let (limit, relation_limits) = self.rule.sample_limits();
        SampleSpec {
            sampler: self.meta.sampler,
            seed: self.meta.flatten_seed,
            limit,
            hub_threshold: self.config.hub_threshold,
            relation_limits,
            // The plan reads each local source's row by its slot (`plan::own_rows`).
            source_slots: true,
        }
    }

    fn check_nodes(&self, nodes: &NodeStore) -> Result<(), Error> {
        if let Some((candidates, _)) = &self.pairs {
            candidates.check_kind(nodes.id_kind())?;
        }
        check_precomputed(self.meta, self.dir, &self.config.nodes, nodes.precomputed)?;
        match self.typed {
            Some((graph, _)) => check_type_widths(self.meta, self.dir, graph, nodes),
            None => check_input_width(self.meta, self.dir, &self.config.nodes, nodes.dim),
        }
    }

    fn check_edges(&self, edges: &ReadEdges) -> Result<(), Error> {
        match self.typed {
            Some((graph, _)) => check_relation_edge_widths(self.meta, self.dir, graph, &edges.relation_edges),
            None => check_edge_width(self.meta, self.dir, &self.config.edges, edges.edge_dim),
        }
    }
}

impl Body for Scores<'_> {
    type Own = RoundStats;
    type Details = Rounds;

    fn other_inputs(&self) -> Vec<&Place> {
        let pairs = self.pairs.as_ref().map(|(c, _)| &c.place);
        std::iter::once(self.dir).chain(pairs).collect()
    }

    fn run(&mut self, worker: &mut Worker, graph: Graph, output: &PartsOf) -> Result<Written<RoundStats>, Error> {
        let mut nodes = graph.nodes;
        nodes.keep_edge_features_for(&self.meta.spec);
        let table = self.table(&nodes);
        let mut rows = self.output_rows(&nodes, graph.targets);
        // The digests read the features, which layer 1 takes.
        let digests = self.config.incremental.then(|| sampling::digest::digests(&nodes));
        let source_slots = nodes.take_source_slots();
        // Layer 1 reads them once and frees them (see `round::Input`).
        let features = nodes.take_features();
        let nodes = Rc::new(nodes);
        let mut refresh = match digests {
            Some(digests) => Some(self.refresh(worker, (&nodes, &digests), &mut rows, (output, &table))?),
            None => None,
        };
        let k = self.meta.spec.layers;
        let wanted: Vec<(u32, usize)> =
            rows.iter().map(|r| (r.slot, if r.scored { k } else { self.embedding })).collect();
        // A candidate pair may name any node: with pairs, every node's last layer is computed,
        // or over a previous version read back where no change reaches it.
        let partial = refresh.as_ref().is_some_and(|r| r.partial.is_some());
        let all = (self.config.targets == Targets::All && self.every_row() || self.pairs.is_some()) && !partial;
        let plan = plan(worker.timely, &nodes, source_slots, &self.rule, &wanted, all, self.config.hub_threshold)?;
        worker.clock.lap("plan");
        let cx = Context {
            nodes: &nodes,
            plan: &plan,
            rule: &self.rule,
            model: self.model,
            spec: &self.meta.spec,
            device: self.device,
            batch_size: self.config.batch_size,
            progress: worker.progress,
            reporter: worker.reporter,
        };
        let (first, learned) = self.first_input(worker, &nodes, features, &plan)?;
        let Outputs { mut last, width, embedding } =
            rounds(worker.timely, &cx, &mut worker.clock, self.embedding, first)?;
        if let Some(yesterday) = refresh.as_mut().and_then(|r| r.last.take()) {
            carry_last_layer(&mut last, yesterday, width, &rows);
        }
        let written = write(worker, self, &cx, (output, &table), &rows, &last, embedding.as_deref().unwrap_or(&last))?;
        worker.clock.lap("head and write");
        let written = with_refresh(written, refresh);
        // The embedding layer's rows go; the last layer stays for the pairs round.
        drop(embedding);
        let own = RoundStats {
            remote_rows: plan.remote_rows as u64,
            hubs_split: plan.hub_count[1..].to_vec(),
            pairs: 0,
            predictions: written.own.predictions.clone(),
            pair_scores: LinearCounts::default(),
            learned,
            rewritten: written.own.rewritten,
            kept: written.own.kept,
        };
        let written = Written { own, ..written };
        let Some((candidates, scorer)) = &self.pairs else { return Ok(written) };
        let embeddings = Embeddings { nodes: nodes.clone(), rows: last, width };
        let scored = score_pairs(worker, self, candidates, embeddings, scorer.clone())?;
        Ok(with_pairs(written, scored))
    }

    fn details(&self, all: &[WorkerStats<RoundStats>]) -> Rounds {
        Rounds {
            graph: self.graph.clone(),
            refreshed: self.refreshed.clone(),
            carried: all.iter().map(|s| s.carried.len() as u64).sum(),
            rewritten: all.iter().map(|s| s.own.rewritten).sum(),
            kept: all.iter().map(|s| s.own.kept).sum(),
            hubs_split: all.first().map(|s| s.own.hubs_split.clone()).unwrap_or_default(),
            remote_rows: all.iter().map(|s| s.own.remote_rows).sum(),
            pairs: self.pairs.as_ref().map(|_| all.iter().map(|s| s.own.pairs).sum()),
            predictions: all.iter().fold(Vec::new(), |mut sum, s| {
                sum.resize(sum.len().max(s.own.predictions.len()), 0);
                sum.iter_mut().zip(&s.own.predictions).for_each(|(a, b)| *a += b);
                sum
            }),
            pair_scores: all.iter().fold(LinearCounts::new(pairs::SCORE_BINS), |mut sum, s| {
                sum.merge(&s.own.pair_scores);
                sum
            }),
            learned: (self.meta.spec.learned_embedding_dim > 0)
                .then(|| all.iter().fold((0, 0), |(m, u), s| (m + s.own.learned.0, u + s.own.learned.1))),
        }
    }
}

/// What the worker wrote, with what its refresh adds: today's digests (the extra output after
/// any `pairs_output`), and over a previous version its parts carried and written again.
fn with_refresh(mut written: Written<RoundStats>, refresh: Option<Refresh>) -> Written<RoundStats> {
    let Some(refresh) = refresh else { return written };
    written.extra_entries.push(refresh.state);
    if let Some((carried, writer)) = refresh.partial {
        written.own.rewritten = writer.parts.len() as u64;
        written.own.kept = carried.kept_rows;
        written.bytes += writer.bytes_written;
        written.parts += writer.parts_written;
        written.entries.extend(writer.parts);
        written.carried = carried.carried;
    }
    written
}

/// What the worker wrote, with its part of the pair output (the extra output).
fn with_pairs(written: Written<RoundStats>, pairs: pairs::PairsWritten) -> Written<RoundStats> {
    Written {
        bytes: written.bytes + pairs.bytes,
        parts: written.parts + pairs.parts,
        extra_entries: std::iter::once(pairs.entries).chain(written.extra_entries).collect(),
        own: RoundStats { pairs: pairs.rows, pair_scores: pairs.scores, ..written.own },
        ..written
    }
}

/// The pairs round (see [`crate::pairs`]): scores every candidate pair from the model's last
/// layer and writes this worker's share into the extra output `pairs_output`.
fn score_pairs(
    worker: &mut Worker,
    body: &Scores,
    candidates: &Candidates,
    embeddings: Embeddings,
    scorer: PairScorer,
) -> Result<pairs::PairsWritten, Error> {
    if worker.reporter {
        tracing::info!("infer: pairs: scoring the candidates in {}", candidates.place.shown());
    }
    let typed = body.meta.spec.types.as_ref().zip(body.meta.link_relation).map(|(types, r)| {
        let relation = &types.relations[usize::from(r)];
        let name = |t: u8| types.node_types[usize::from(t)].name.clone();
        PairTypes { types: [relation.src, relation.dst], names: [name(relation.src), name(relation.dst)] }
    });
    let embeddings_kind = embeddings.nodes.id_kind();
    let scored = pairs::score(worker.timely, worker.io, candidates, embeddings, scorer, typed.as_ref())?;
    let to = worker.extra_outputs.first().cloned().ok_or_else(|| Error::Internal("no pairs_output".into()))?;
    let metadata = HashMap::from([
        ("graphinfer.model".to_owned(), body.dir.shown()),
        ("graphinfer.decoder".to_owned(), body.meta.spec.decoder.unwrap_or_default().name().to_owned()),
        ("graphinfer.pairs".to_owned(), candidates.place.shown()),
    ]);
    let kind = embeddings_kind;
    let written = pairs::write(worker, &to, &scored, kind, metadata, schemas::job::mb_bytes(body.config.part_size_mb))?;
    worker.clock.lap("pairs");
    Ok(written)
}

/// A node that gets an output row: its key, its slot and whether it is scored (a target; in
/// a typed graph, a node of another type gets its embedding only).
#[derive(Debug, Clone, Copy)]
struct OutputRow {
    key: i64,
    slot: u32,
    scored: bool,
}

impl Scores<'_> {
    /// This worker's output rows, by key: the targets (`targets` of the target type), then
    /// in a typed graph every node of the other types in `node_types`.
    fn output_rows(&self, nodes: &NodeStore, targets: Vec<(i64, u32)>) -> Vec<OutputRow> {
        let mut rows: Vec<OutputRow> =
            targets.into_iter().map(|(key, slot)| OutputRow { key, slot, scored: true }).collect();
        if let Some((graph, target)) = self.typed {
            let others = (0..nodes.len()).filter(|&s| {
                let t = nodes.node_type(s);
                t != *target && self.config.has_rows(graph, t)
            });
            rows.extend(others.map(|s| OutputRow { key: nodes.ids[s], slot: s as u32, scored: false }));
            rows.sort_unstable_by_key(|r| r.key);
            if !self.config.has_rows(graph, *target) {
                rows.retain(|r| !r.scored);
            }
        }
        rows
    }
}

/// The output table's shape: the head, the score and embedding widths, and the schema.
struct Table {
    head: Head,
    classes: usize,
    width: usize,
    schema: SchemaRef,
}

impl Scores<'_> {
    /// The output table of this model over `nodes` (see [`crate::output`]); its metadata names
    /// the model, its training run and the settings.
    fn table(&self, nodes: &NodeStore) -> Table {
        let (config, meta, embedding_layer) = (self.config, self.meta, self.embedding);
        let head = match (meta.spec.task, meta.spec.multi_label) {
            (Task::Link, _) => Head::Embedding,
            (Task::Node, true) => Head::MultiHot,
            (Task::Node, false) => Head::Classes,
        };
        // A link model's last layer is its embedding: no logits are written.
        let classes = if head == Head::Embedding { 0 } else { meta.spec.classes };
        let width = self.model.slice(&meta.spec, embedding_layer - 1).output_width();
        let mut metadata = HashMap::from([
            ("graphinfer.model".to_owned(), self.dir.shown()),
            ("graphinfer.model_run".to_owned(), self.model_run.to_owned()),
            ("graphinfer.model_json".to_owned(), serde_json::to_string(meta).unwrap_or_default()),
            ("graphinfer.embedding_layer".to_owned(), embedding_layer.to_string()),
            ("graphinfer.targets".to_owned(), config.targets.to_string()),
            ("graphinfer.hub_threshold".to_owned(), config.hub_threshold.to_string()),
        ]);
        if let Some(strings) = &nodes.strings {
            metadata.insert(crate::refresh::COLLIDED_STRINGS.to_owned(), strings.ids.collided().to_string());
        }
        let naming = output::Naming { ids: nodes.id_kind(), typed: self.typed.is_some() };
        let schema = Arc::new(output::schema(head, width, classes, naming, metadata));
        Table { head, classes, width, schema }
    }

    /// With `incremental` (see [`crate::refresh`]): today's digests kept beside the output,
    /// then, over a previous version that qualifies, its parts carried or written again and
    /// `rows` cut to the affected nodes'; otherwise every row, as in a full run.
    fn refresh(
        &mut self,
        worker: &mut Worker,
        (nodes, digests): (&Rc<NodeStore>, &[sampling::digest::Digest]),
        rows: &mut Vec<OutputRow>,
        (output, table): (&PartsOf, &Table),
    ) -> Result<Refresh, Error> {
        // The digests' table comes after `pairs_output` among the extra outputs.
        let kept = worker.extra_outputs[usize::from(self.pairs.is_some())].clone();
        let state = agree(worker.timely, stage::refresh::write_state(worker.io, &kept, nodes, digests, None))?;
        worker.clock.lap("digests");
        let mut refresh = Refresh { state, ..Refresh::default() };
        let pairs = self.pairs.as_ref().and_then(|_| {
            let every_node = self.config.targets == Targets::All && self.every_row();
            crate::refresh::pairs_in_full(self.embedding == self.meta.spec.layers, every_node)
        });
        if let Some(reason) = crate::refresh::in_full(nodes).or(pairs.map(String::from)) {
            refresh.refreshed = Refreshed::full(reason);
        } else {
            let keys: Vec<i64> = rows.iter().map(|r| r.key).collect();
            let qualify = crate::refresh::qualify(self.config, &table.schema);
            let places = (&output.dir, &kept.dir);
            // A change reaches as far as the records do: a dense first layer reads no edge.
            let hops = self.meta.hops;
            let (refreshed, base) = stage::refresh::plan(worker, places, &qualify, (nodes, digests), hops, &keys)?;
            worker.clock.lap("affected set");
            refresh.refreshed = refreshed;
            if let Some((base, affected)) = base {
                let run = base.run.clone();
                let last = match self.pairs.is_some() {
                    true => self.last_layer_read_back(worker, nodes, (&base, &affected), table.width),
                    false => Ok(None),
                };
                let Some(last) = stage::refresh::carried_or_full(last, &run, &mut refresh.refreshed)? else {
                    self.refreshed = Some(refresh.refreshed.clone());
                    return Ok(refresh);
                };
                let names = self.typed.map(|(g, _)| g.node_types.iter().map(|(n, _)| n.clone()).collect());
                let key = crate::refresh::key(names, nodes.strings.as_ref().map(|s| s.ids.clone()));
                let writing = (part_properties_of_scores(), schemas::job::mb_bytes(self.config.part_size_mb));
                let done = crate::refresh::carry(worker, (base, &key), &affected, (output, &table.schema), writing);
                if let Some(done) = stage::refresh::carried_or_full(done, &run, &mut refresh.refreshed)? {
                    rows.retain(|r| affected.contains(r.key));
                    refresh.partial = Some(done);
                    refresh.last = last;
                }
                worker.clock.lap("parts carried or rewritten");
            }
        }
        self.refreshed = Some(refresh.refreshed.clone());
        Ok(refresh)
    }

    /// Whether every node of the graph gets an output row (in a typed graph, `node_types` may
    /// leave some types out).
    fn every_row(&self) -> bool {
        self.typed.is_none_or(|(g, _)| (0..g.node_types.len()).all(|t| self.config.has_rows(g, t as u8)))
    }

    /// Yesterday's last layer of this worker's nodes, by slot, read back from `base`'s rows at
    /// each node's owner (`width` values a row; see [`crate::refresh::pairs_in_full`]). A node
    /// no change reaches must have its row there: one missing makes the version one that does
    /// not read (a full run).
    fn last_layer_read_back(
        &self,
        worker: &mut Worker,
        nodes: &Rc<NodeStore>,
        (base, affected): (&stage::refresh::Base, &sampling::affected::Affected),
        width: usize,
    ) -> Result<Option<Vec<f32>>, Error> {
        let spec = &self.meta.spec;
        let names: Vec<String> = spec.types.iter().flat_map(|t| &t.node_types).map(|n| n.name.clone()).collect();
        let reads = vec![true; names.len()];
        let table = crate::learned::Table { dim: width, types: spec.types.as_ref().map(|_| (&names[..], &reads[..])) };
        let mine = (0..base.parts.len()).flat_map(|f| (0..base.parts[f].row_groups()).map(move |rg| (f, rg))).collect();
        let unchanged = |slot: usize| !affected.contains(nodes.ids[slot]);
        let rows = crate::learned::read_rows(worker.timely, worker.io, (&base.parts, mine), nodes, table, unchanged)?;
        // The same count on every worker, so that all run in full or none.
        let missing = cluster::sum(worker.timely, rows.missing);
        if missing > 0 {
            return Err(Error::BadData(format!("its rows lack {missing} nodes that no change reaches")));
        }
        worker.clock.lap("last layer read back");
        Ok(Some(rows.values))
    }
}

/// Yesterday's last-layer rows (`yesterday`, by slot) into `last` where today's run did not
/// compute one: every node but those of `rows`, the affected rows a refresh computes.
fn carry_last_layer(last: &mut [f32], yesterday: Vec<f32>, width: usize, rows: &[OutputRow]) {
    let mut computed = vec![false; last.len() / width.max(1)];
    rows.iter().for_each(|r| computed[r.slot as usize] = true);
    for (slot, _) in computed.iter().enumerate().filter(|(_, c)| !**c) {
        last[slot * width..(slot + 1) * width].copy_from_slice(&yesterday[slot * width..(slot + 1) * width]);
    }
}

/// The output's part properties: statistics of `node_id` per column chunk, for readers that
/// skip row groups by id.
fn part_properties_of_scores() -> WriterProperties {
    part_properties().set_column_statistics_enabled(ColumnPath::from(output::NODE_ID), EnabledStatistics::Chunk).build()
}

/// What the layers leave for the writer and the pairs round.
struct Outputs {
    /// Every node's output of the last layer, by slot, row-major (rows of nodes the plan does
    /// not compute are zero).
    last: Vec<f32>,
    width: usize,
    /// The embedding layer's outputs, by slot, when that is an earlier layer (`None`: the last
    /// layer's are the embeddings).
    embedding: Option<Vec<f32>>,
}

impl Scores<'_> {
    /// Layer 1's input: the node features in slot order (`NodeStore::take_features`), or for a
    /// model with learned embeddings each node's features (normalized as the model asks) and
    /// then its learned row, read at this owner (see [`crate::learned`]); with the learned
    /// rows' counts (missing among the nodes whose layer-1 input the `plan` needs, unknown).
    fn first_input(
        &self,
        worker: &mut Worker,
        nodes: &Rc<NodeStore>,
        features: Vec<f32>,
        plan: &Plan,
    ) -> Result<(Input, (u64, u64)), Error> {
        let (spec, d) = (&self.meta.spec, self.meta.spec.learned_embedding_dim);
        let normalize = spec.normalize_features;
        if d == 0 {
            return Ok((Input::Features { values: features, normalize, learned: None }, (0, 0)));
        }
        let names: Vec<String> = spec.types.iter().flat_map(|t| &t.node_types).map(|n| n.name.clone()).collect();
        let reads: Vec<bool> = spec.types.iter().flat_map(|t| &t.node_types).map(|n| n.learned > 0).collect();
        let table = crate::learned::Table { dim: d, types: spec.types.as_ref().map(|_| (&names[..], &reads[..])) };
        let rows = crate::learned::read(worker.timely, worker.io, self.dir, nodes, table, |s| plan.needs(s, 0))?;
        let total = cluster::sum(worker.timely, rows.missing);
        let missing = rows.first_missing.filter(|_| self.config.missing_embedding == MissingEmbedding::Error);
        let missing = missing.map(|id| {
            Error::BadData(format!(
                "node {id} of {} has no row in the learned embedding table of the model in {} ({total} nodes have \
                 none: new since training, or never in a record it trained or evaluated on); [infer] \
                 missing_embedding = \"zero\" gives them zeros",
                if self.typed.is_some() { "the [graph]'s node tables" } else { self.config.nodes.as_str() },
                self.dir.shown(),
            ))
        });
        agree(worker.timely, missing.map_or(Ok(()), Err))?;
        let counts = (rows.missing, rows.unknown);
        if spec.types.is_some() {
            // Each type's rows have their own width: appended as a layer-1 batch is built.
            let learned = Some(LearnedInput { values: rows.values, dim: d, types: reads });
            worker.clock.lap("learned rows");
            return Ok((Input::Features { values: features, normalize, learned }, counts));
        }
        let width = nodes.dim + d;
        let mut values = Vec::with_capacity(nodes.len() * width);
        for slot in 0..nodes.len() {
            gnn::features::push_row(nodes.feature_row(&features, slot), normalize, &mut values);
            values.extend_from_slice(&rows.values[slot * d..(slot + 1) * d]);
        }
        worker.clock.lap("learned rows");
        Ok((Input::Rows { values: Rc::new(values), width }, counts))
    }
}

/// Rounds 1..=k from `first`, layer 1's input, which layer 1 frees once it has transformed it.
fn rounds(
    worker: &mut timely::worker::Worker,
    cx: &Context,
    clock: &mut Clock,
    embedding: usize,
    first: Input,
) -> Result<Outputs, Error> {
    let k = cx.rule.hops();
    let mut current: Vec<f32> = Vec::new();
    let mut width = cx.nodes.dim;
    // Held beside the next layer's input, not copied: that layer lets its own handle go.
    let mut kept = None;
    let mut first = Some(first);
    for l in 1..=k {
        let input = if l == 1 {
            first.take().ok_or_else(|| Error::Internal("layer 1's input taken".into()))?
        } else {
            let values = Rc::new(std::mem::take(&mut current));
            if l - 1 == embedding {
                kept = Some(values.clone());
            }
            Input::Rows { values, width }
        };
        current = layer(worker, cx, l, input)?;
        width = cx.model.slice(cx.spec, l - 1).output_width();
        if cx.reporter {
            cx.progress.report(l - 1, Duration::ZERO, true);
        }
        clock.lap(format!("layer {l}"));
    }
    Ok(Outputs { last: current, width, embedding: kept.map(Rc::unwrap_or_clone) })
}

/// The rows of `values` (by slot, `width` each) of `rows`, in their order.
fn rows_of(values: &[f32], width: usize, rows: &[OutputRow]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * width);
    for r in rows {
        out.extend_from_slice(&values[r.slot as usize * width..(r.slot as usize + 1) * width]);
    }
    out
}

/// Round k + 1 and the sink: this worker's rows, sorted by key (by type, then id, in a typed
/// graph), in batches, each gathering its logits from `last` and its embeddings from
/// `embedding` (both by slot).
fn write(
    worker: &mut Worker,
    body: &Scores,
    cx: &Context,
    (output, table): (&PartsOf, &Table),
    targets: &[OutputRow],
    last: &[f32],
    embedding: &[f32],
) -> Result<Written<RoundStats>, Error> {
    let n = targets.len();
    let props = part_properties_of_scores();
    let limit = schemas::job::mb_bytes(body.config.part_size_mb);
    let mut writer = PartWriter::new(worker.io.clone(), output.clone(), table.schema.clone(), props, limit);
    let phase = cx.progress.last_phase();
    cx.progress.add_total(phase, n as u64);
    let mut predictions = vec![0u64; table.classes];
    let result = write_rows(&mut writer, body, cx, table, targets, (last, embedding), &mut predictions)
        .and_then(|()| writer.finish());
    if cx.reporter {
        cx.progress.report(phase, Duration::ZERO, true);
    }
    agree(worker.timely, result)?;
    Ok(Written {
        targets: n as u64,
        bytes: writer.bytes_written,
        parts: writer.parts_written,
        entries: writer.parts.clone(),
        extra_entries: Vec::new(),
        carried: Vec::new(),
        own: RoundStats { predictions, ..RoundStats::default() },
    })
}

/// `targets`' rows in batches of as many as one transform holds: their ids (the strings,
/// where the graph has them), embeddings and logits, gathered by slot; counts the target
/// type's predictions into `predictions`.
fn write_rows(
    writer: &mut PartWriter,
    body: &Scores,
    cx: &Context,
    table: &Table,
    targets: &[OutputRow],
    (last, embedding): (&[f32], &[f32]),
    predictions: &mut [u64],
) -> Result<(), Error> {
    let Table { head, classes, width, ref schema } = *table;
    let names: Vec<String> =
        body.typed.map_or_else(Vec::new, |(g, _)| g.node_types.iter().map(|(n, _)| n.clone()).collect());
    let phase = cx.progress.last_phase();
    let rows = crate::round::transform_rows(body.config.batch_size, width + classes);
    for chunk in targets.chunks(rows) {
        // A typed graph's keys hold the type: the table has it in `node_type`, and the id.
        let (types, ids): (Vec<u8>, Vec<i64>) = match body.typed {
            Some(_) => chunk.iter().map(|r| schemas::typed::unpack(r.key)).unzip(),
            None => chunk.iter().map(|r| (0, r.key)).unzip(),
        };
        let typed = body.typed.map(|(_, target)| TypedRows { types: &types, names: &names, target: *target });
        // The batch's rows, gathered by slot (a node task's last layer is its logits).
        let (logits, embedding) = (rows_of(last, classes, chunk), rows_of(embedding, width, chunk));
        for (i, row) in logits.chunks_exact(classes.max(1)).enumerate() {
            if typed.as_ref().is_none_or(|t| t.types[i] == t.target) {
                output::count_predictions(head, row, predictions);
            }
        }
        let ids: ArrayRef = match cx.nodes.strings {
            Some(_) => Arc::new(chunk.iter().map(|r| cx.nodes.key(r.slot as usize)).collect::<StringArray>()),
            None => Arc::new(Int64Array::from(ids)),
        };
        let batch = output::batch(schema, head, ids, typed, &embedding, &logits)
            .map_err(|source| Error::Arrow { file: writer.current_name(), source })?;
        writer.write(&batch)?;
        cx.progress.advance(phase, chunk.len() as u64);
        if cx.reporter {
            cx.progress.report(phase, Duration::from_secs(2), false);
        }
    }
    Ok(())
}
