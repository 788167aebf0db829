//! A whole `[flatten]` job: the stage skeleton (`stage::run`: output and lease, load and
//! sample, targets, commit) around this stage's body, [`Records`]: k rounds over batches of
//! targets, records written to parts sorted by root. Every worker runs the same phases in the
//! same order; any bad input ends all of them with the same error and no marker.

use std::sync::Arc;
use std::time::Duration;

use arrow_schema::SchemaRef;
use cluster::Failure;
use sampling::{NodeStore, SampleSpec, SharedOwnerMap, SupervisionSample};
use schemas::facts::{Histogram, Log2Counts};
use schemas::job::TypedGraph;
use schemas::layers::Layers;
use schemas::record::{FlattenMeta, record_schema};
use schemas::typed::{GraphTypes, NodeType, Relation};
use schemas::{ClusterConfig, FlattenConfig};
use stage::{Body, Day, Declared, Details, Graph, Progress, Reads, Worker, WorkerStats, Written};
use tables::Io;
use tables::commit::Stage;
use tables::parts::PartsOf;

use crate::error::Error;
use crate::links;
use crate::refresh;
use crate::write::RecordStats;
use stage::refresh::Refreshed;

/// The job's summary.
pub type Summary = stage::Summary<RecordSizes>;

/// The records' sizes over the job.
#[derive(Debug, Clone, Default)]
pub struct RecordSizes {
    pub mean_nodes: f64,
    pub mean_edges: f64,
    pub max_nodes: u64,
    pub max_edges: u64,
    pub node_counts: Log2Counts,
    pub edge_counts: Log2Counts,
    /// Node rows answered in the rounds over the cluster, and those sent between workers.
    pub answered: u64,
    pub exchanged: u64,
    /// A run with `incremental`: what the refresh did, and the parts it carried over
    /// untouched, wrote again without their affected records (holding `kept` records), and
    /// wrote new.
    pub refreshed: Option<Refreshed>,
    pub carried: u64,
    pub rewritten: u64,
    pub kept: u64,
    pub new_parts: u64,
    /// With `keep_graph` or delta tables: what making the kept graph did.
    pub graph: Option<String>,
}

impl Details for RecordSizes {
    fn histograms(&self) -> Vec<Histogram> {
        vec![
            self.node_counts.clone().histogram("nodes per record", "records"),
            self.edge_counts.clone().histogram("edges per record", "records"),
        ]
    }

    fn lines(&self, summary: &Summary) -> Vec<(&'static str, String)> {
        let mut lines = vec![
            ("records", format!("{} targets ({:.0} records/s)", summary.targets, summary.rate())),
            ("record nodes", format!("mean {:.1}, max {}", self.mean_nodes, self.max_nodes)),
            ("record edges", format!("mean {:.1}, max {}", self.mean_edges, self.max_edges)),
            ("exchanged", format!("{} of {} node rows between workers", self.exchanged, self.answered)),
        ];
        if let Some(graph) = &self.graph {
            lines.push(("kept graph", graph.clone()));
        }
        if let Some(refreshed) = &self.refreshed {
            lines.push(("refresh", refreshed.line()));
        }
        if self.refreshed.as_ref().is_some_and(|r| r.from.is_some()) {
            lines.push((
                "parts",
                format!(
                    "{} carried over, {} written again without their affected records ({} records kept), {} new",
                    self.carried, self.rewritten, self.kept, self.new_parts
                ),
            ));
        }
        lines
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
    let owner_map = SharedOwnerMap::default();
    stage::execute(cluster, move |worker| {
        let day = Day::begin(worker, &io, (&config.output, Stage::Flatten), &config.arrival(), config.incremental)?;
        let declared = day.declare(
            Declared::of(Stage::Flatten, &*config)
                .with_link_relation(config.link_relation_index())
                .with_partition(config.partition.as_deref(), &owner_map),
        );
        let mut body = Records::new(&config);
        body.graph = day.graph_line();
        stage::run(worker, &io, &progress, threads, &declared, body)
    })
}

/// GraphFlat's body: one record per target, written to parts.
struct Records<'a> {
    config: &'a FlattenConfig,
    layers: Layers,
    /// A typed graph, and each relation's layer rule and recorded fanouts.
    typed: Option<Typed>,
    /// With `incremental`: what the refresh did.
    refreshed: Option<Refreshed>,
    /// With `keep_graph` or delta tables: the summary's line on the kept graph.
    graph: Option<String>,
}

/// What a typed job adds to the records: the graph's relations and target type, and each
/// relation's fanouts (its own, or the job's).
struct Typed {
    graph: TypedGraph,
    target: u8,
    fanouts: Vec<Vec<u32>>,
}

impl<'a> Records<'a> {
    fn new(config: &'a FlattenConfig) -> Self {
        let typed = config.typed().map(|(graph, target)| {
            let fanouts = graph.relations.iter().map(|r| config.relation_fanouts(r.fanouts.as_deref())).collect();
            Typed { graph, target, fanouts }
        });
        Records { config, layers: config.layers(), typed, refreshed: None, graph: None }
    }

    /// Each relation's layer rule (the job's one rule for a homogeneous graph).
    fn relation_layers(&self) -> Vec<Layers> {
        match &self.typed {
            None => vec![self.layers.clone()],
            Some(t) => t.fanouts.iter().map(|f| Layers::recorded(self.config.hops, f)).collect(),
        }
    }

    /// The types recorded in the metadata, with each type's width and each relation's edge
    /// feature width as loaded.
    fn graph_types(&self, nodes: &NodeStore) -> Option<GraphTypes> {
        let t = self.typed.as_ref()?;
        let node_types = t
            .graph
            .node_types
            .iter()
            .zip(&nodes.widths)
            .map(|((name, _), &width)| NodeType::new(name, width))
            .collect();
        let relations = t
            .graph
            .relations
            .iter()
            .enumerate()
            .map(|(i, r)| Relation {
                edge_dim: nodes.relation_edges.dim(i as u8),
                ..Relation::new(&r.name, r.src, r.dst)
            })
            .collect();
        Some(GraphTypes { node_types, relations, target: t.target })
    }
}

impl Reads for Records<'_> {
    fn sampling(&self) -> SampleSpec {
        let relation_limits = match &self.typed {
            None => Vec::new(),
            Some(_) => self.relation_layers().iter().map(Layers::sample_limit).collect(),
        };
        SampleSpec {
            sampler: self.config.sampler,
            seed: self.config.seed,
            // Every in-edge is kept for the roots' neighbor lists; records take their prefixes.
            limit: if self.config.root_neighbors { usize::MAX } else { self.layers.sample_limit() },
            hub_threshold: self.config.hub_threshold,
            relation_limits,
            // The rounds ask each source's owner for its row by id.
            source_slots: false,
        }
    }

    fn supervision(&self) -> Option<SupervisionSample> {
        let link = self.config.link()?;
        Some(SupervisionSample::new(link.supervision_fraction, self.config.seed).expect("checked with the job"))
    }
}

impl Body for Records<'_> {
    type Own = RecordStats;
    type Details = RecordSizes;

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
            relation_edge_stats: match graph.nodes.relation_edges.any() {
                true => graph.nodes.relation_edges.stats.clone(),
                false => Vec::new(),
            },
            link: self.config.link(),
            types: self.graph_types(&graph.nodes),
            relation_fanouts: self.typed.as_ref().map_or_else(Vec::new, |t| t.fanouts.clone()),
            string_ids: graph.nodes.strings.is_some(),
            precomputed: graph.nodes.precomputed,
            root_neighbors: self.config.root_neighbors,
        };
        let schema: SchemaRef = Arc::new(record_schema(&meta));
        let layers = self.relation_layers();
        let written = if meta.link.is_some() && self.config.incremental {
            // A typed graph's link records are keyed by the link relation's source type.
            let src = self
                .typed
                .as_ref()
                .zip(self.config.link_relation_index())
                .map(|(t, r)| t.graph.relations[usize::from(r)].src);
            let (written, refreshed) = refresh::links(worker, self.config, graph, (layers, src), schema, output)?;
            self.refreshed = Some(refreshed);
            written
        } else if meta.link.is_some() {
            let tasks = links::tasks(worker, self.config, &graph.nodes, graph.supervision)?;
            links::write_links(worker, self.config, graph.nodes, tasks, layers, schema, output)?
        } else if self.config.incremental {
            let target = self.typed.as_ref().map(|t| t.target);
            let (written, refreshed) = refresh::targets(worker, self.config, graph, (layers, target), schema, output)?;
            self.refreshed = Some(refreshed);
            written
        } else {
            let targets: Vec<i64> = graph.targets.iter().map(|t| t.0).collect();
            crate::targets::flatten_targets(worker, self.config, graph.nodes, &targets, layers, schema, output)?
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
            node_counts: Log2Counts::sum(all.iter().map(|s| &s.own.node_counts)),
            edge_counts: Log2Counts::sum(all.iter().map(|s| &s.own.edge_counts)),
            answered: all.iter().map(|s| s.own.answered).sum(),
            exchanged: all.iter().map(|s| s.own.exchanged).sum(),
            refreshed: self.refreshed.clone(),
            carried: all.iter().map(|s| s.carried.len() as u64).sum(),
            rewritten: all.iter().map(|s| s.own.rewritten).sum(),
            kept: all.iter().map(|s| s.own.kept).sum(),
            new_parts: all.iter().map(|s| s.own.new_parts).sum(),
            graph: self.graph.clone(),
        }
    }
}
