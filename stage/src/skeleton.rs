//! The sequence every worker of a stage over the graph runs; a [`Body`] plugs in the stage's
//! own work. Every step that can fail ends in [`agree`], so all workers leave a step with the
//! same result: a bad table, an output that would touch an input, a body's error, all end
//! every worker with one error, before `_SUCCESS`.
//!
//! Nothing is deleted before the commit: the output is checked against every input (after
//! symlinks, by exact key) and the run's lease is taken by worker 0 before any part is written;
//! parts carry the run id in their names; the manifest is written once every worker's parts are
//! closed, which the gather of [`WorkerStats`] proves (see `tables::commit`). A body's extra
//! outputs ([`crate::extra_output`]) are checked and leased with the output, and committed
//! after it, together.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use cluster::{Failure, all_gather, broadcast, peak_rss_bytes};
use sampling::load::{RelationRead, in_type, load_typed_nodes};
use sampling::{
    EdgeRead, NodeStore, PartitionTable, ReadEdges, SampleSpec, Sampled, SharedOwnerMap, SupervisionEdge,
    SupervisionSample, agree, load_edges, load_nodes, sample_in_edges,
};
use schemas::facts::{Log2Counts, RunFacts};
use schemas::job::TypedGraph;
use schemas::{ClusterConfig, FlattenConfig, InferConfig, PartitionConfig, PrecomputeConfig, Sampler, Targets};
use tables::commit::{Manifest, PartEntry, Pending, Stage, check_output, commit_all, new_run_id};
use tables::lease::Lease;
use tables::names::Layout;
use tables::parts::PartsOf;
use tables::staging::StagedPart;
use tables::{Error, Io, Place};
use timely::ExchangeData;

use crate::extra_output::{self, Extra, ExtraPlace};
use crate::{Clock, Details, Progress, Summary, WorkerStats, Written};

/// What a stage declares: its tables, its output and how it picks targets.
#[derive(Debug, Clone)]
pub struct Declared<'a> {
    pub stage: Stage,
    pub nodes: &'a str,
    pub edges: &'a str,
    pub output: &'a str,
    pub overwrite: bool,
    pub targets: &'a Targets,
    /// The job's settings, kept in the manifests.
    pub settings: serde_json::Value,
    /// Tables the body writes besides `output` (see [`crate::extra_output`]).
    pub extras: Vec<Extra<'a>>,
    /// A typed graph's tables, read instead of `nodes` and `edges`, and its target type.
    pub typed: Option<(TypedGraph, u8)>,
    /// A typed graph's link relation: its table may have a split (its `valid` and `test`
    /// edges are held out), its edges with a split are the supervision edges the body asks for
    /// ([`Body::supervision`]), and the target type needs no labels.
    pub link_relation: Option<u8>,
    /// The partition table that owns the nodes it names (`partition = "PATH"`), and this
    /// process's copy of its map (see `sampling::owner_map`).
    pub partition: Option<(&'a str, &'a SharedOwnerMap)>,
}

impl<'a> Declared<'a> {
    /// What a job section over the graph declares.
    pub fn of(stage: Stage, section: &'a impl Section) -> Self {
        Declared {
            stage,
            nodes: section.nodes(),
            edges: section.edges(),
            output: section.output(),
            overwrite: section.overwrite(),
            targets: section.targets(),
            settings: serde_json::to_value(section).unwrap_or_default(),
            extras: Vec::new(),
            typed: section.typed(),
            link_relation: None,
            partition: None,
        }
    }

    /// With the section's partition table as the owner map, read once per process into
    /// `shared` (made before the workers start, so that they share it).
    pub fn with_partition(mut self, uri: Option<&'a str>, shared: &'a SharedOwnerMap) -> Self {
        self.partition = uri.map(|uri| (uri, shared));
        self
    }

    /// With a typed graph's link relation.
    pub fn with_link_relation(mut self, relation: Option<u8>) -> Self {
        self.link_relation = relation;
        self
    }

    /// With an extra output, named by `key` in the job's section, at `uri`.
    pub fn with_extra(mut self, key: &'static str, uri: &'a str) -> Self {
        self.extras.push(Extra { key, uri, remedy: None });
        self
    }

    /// With an extra output at `uri` that the stage places itself (named `what` in messages),
    /// where a refusal to write says `remedy` in place of choosing another directory.
    pub fn with_own_extra(mut self, what: &'static str, uri: &'a str, remedy: &'static str) -> Self {
        self.extras.push(Extra { key: what, uri, remedy: Some(remedy) });
        self
    }
}

/// The keys every job section of a stage over the graph has.
pub trait Section: serde::Serialize {
    fn nodes(&self) -> &str;
    fn edges(&self) -> &str;
    fn output(&self) -> &str;
    fn overwrite(&self) -> bool;
    fn targets(&self) -> &Targets;
    /// A typed graph and its target type (`None`: the homogeneous `nodes` and `edges`).
    fn typed(&self) -> Option<(TypedGraph, u8)> {
        None
    }
}

/// `Section` for a job section with the keys `nodes`, `edges`, `output`, `overwrite` and
/// `targets`, and the section's own `typed` when it has one.
macro_rules! section {
    ($config:ty $(, $typed:item)?) => {
        impl Section for $config {
            fn nodes(&self) -> &str {
                &self.nodes
            }
            fn edges(&self) -> &str {
                &self.edges
            }
            fn output(&self) -> &str {
                &self.output
            }
            fn overwrite(&self) -> bool {
                self.overwrite
            }
            fn targets(&self) -> &Targets {
                &self.targets
            }
            $($typed)?
        }
    };
}

section!(
    FlattenConfig,
    fn typed(&self) -> Option<(TypedGraph, u8)> {
        FlattenConfig::typed(self)
    }
);
section!(
    PartitionConfig,
    fn typed(&self) -> Option<(TypedGraph, u8)> {
        PartitionConfig::typed(self)
    }
);
section!(PrecomputeConfig);
section!(
    InferConfig,
    fn typed(&self) -> Option<(TypedGraph, u8)> {
        InferConfig::typed(self)
    }
);

/// Round 0 on this worker: its share of the nodes with their sampled in-edges, its targets and
/// its supervision edges. The in-edges, in-degrees and edge statistics are the message-passing
/// edges' only (split `train` or null): `valid` and `test` edges never enter them.
pub struct Graph {
    pub nodes: NodeStore,
    /// This worker's targets as (id, slot), sorted by id.
    pub targets: Vec<(i64, u32)>,
    /// The supervision edges (edges with a split) whose `src` this worker owns, sorted by
    /// (src, dst, split), as [`Body::supervision`] sampled them; empty when it asks for none.
    /// The same list on any number of workers and processes, up to which worker holds it.
    pub supervision: Vec<SupervisionEdge>,
}

/// What a body runs with besides the graph.
pub struct Worker<'a> {
    pub timely: &'a mut timely::worker::Worker,
    pub io: &'a Arc<Io>,
    pub progress: &'a Arc<Progress>,
    /// Whether this worker logs for its process (the first worker of each).
    pub reporter: bool,
    pub clock: Clock,
    /// Where the parts of each extra output go, in [`Declared::extras`] order.
    pub extra_outputs: Vec<PartsOf>,
}

/// What round 0 reads of the graph and how it samples it: every stage over the graph says
/// it ([`Body`] extends it); a stage that writes no table of its own ([`load_graph`]) says
/// only this.
pub trait Reads {
    /// How round 0 samples every node's in-edges.
    fn sampling(&self) -> SampleSpec;

    /// The supervision edges round 0 collects into [`Graph::supervision`] (the link task's);
    /// `None`, the default, collects none.
    fn supervision(&self) -> Option<SupervisionSample> {
        None
    }

    /// Checks the loaded node table before the edges are read.
    fn check_nodes(&self, _nodes: &NodeStore) -> Result<(), Error> {
        Ok(())
    }

    /// Checks the edge tables' feature widths (`edge_dim`, 0: none; a typed graph's per
    /// relation in `relation_edges`) before sampling; every worker sees the same widths.
    fn check_edges(&self, _edges: &ReadEdges) -> Result<(), Error> {
        Ok(())
    }
}

/// A stage's own work over the sampled graph.
pub trait Body: Reads {
    /// This stage's facts per worker, gathered for the summary.
    type Own: ExchangeData + Clone + Ord + Default;
    type Details: Details;

    /// Inputs besides the node and edge tables that the output must not touch (a model).
    fn other_inputs(&self) -> Vec<&Place> {
        Vec::new()
    }

    /// The stage's work on this worker: writes its parts under `output`'s names (and those of
    /// its extra outputs under `worker.extra_outputs`) and closes them before it returns. Ends
    /// its phases on `worker.clock`.
    fn run(&mut self, worker: &mut Worker, graph: Graph, output: &PartsOf) -> Result<Written<Self::Own>, Error>;

    /// The stage's summary lines from every worker's stats.
    fn details(&self, all: &[WorkerStats<Self::Own>]) -> Self::Details;
}

/// Runs `work` (a call of [`run`]) on every worker of this process and returns the summary,
/// timed as a whole. Any worker's failure ends every worker (see `cluster::execute`).
pub fn execute<D, F>(cluster: &ClusterConfig, work: F) -> Result<Summary<D>, Failure<Error>>
where
    D: Send + 'static,
    F: Fn(&mut timely::worker::Worker) -> Result<Summary<D>, Error> + Send + Sync + 'static,
{
    let started = Instant::now();
    let summaries = cluster::execute(cluster, work)?;
    let mut summary = summaries.into_iter().next().ok_or_else(|| Failure::Panic("no worker ran".into()))?;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// The stage on this worker: output and lease, round 0, targets, the body, the commit.
pub fn run<B: Body>(
    timely: &mut timely::worker::Worker,
    io: &Arc<Io>,
    progress: &Arc<Progress>,
    threads: usize,
    declared: &Declared,
    mut body: B,
) -> Result<Summary<B::Details>, Error> {
    let reporter = timely.index().is_multiple_of(threads);
    let clock = Clock::default();
    let output = agree(timely, io.output(declared.output))?;
    let tables = agree(timely, GraphTables::place(io, declared))?;
    let extras = agree(timely, extra_output::places(io, &declared.extras))?;
    let mut inputs = tables.all();
    inputs.extend(body.other_inputs());
    let (leases, output, extra_outputs) = open_output(timely, io, declared, output, &extras, &inputs)?;

    let mut worker = Worker { timely, io, progress, reporter, clock, extra_outputs };
    let (nodes, sampled, edges, supervision) = round_zero(&mut worker, &body, &tables)?;
    let target_type = declared.typed.as_ref().map(|(_, t)| *t);
    let targets = targets(&nodes, declared.targets, target_type);
    let own_nodes = nodes.len() as u64;
    let mut in_degrees = Log2Counts::default();
    nodes.in_degree.iter().for_each(|&d| in_degrees.add(d));
    let written = body.run(&mut worker, Graph { nodes, targets, supervision }, &output)?;
    let stats = WorkerStats {
        worker: worker.timely.index(),
        nodes: own_nodes,
        edges,
        reduced_edges: sampled.reduced_edges,
        targets: written.targets,
        bytes: written.bytes,
        parts: written.parts,
        entries: written.entries,
        extra_entries: written.extra_entries,
        carried: written.carried,
        peak_rss: peak_rss_bytes().unwrap_or(0),
        in_degrees,
        own: written.own,
    };

    // Every worker's parts are closed once its stats arrive here: only then the manifest.
    let all = all_gather(worker.timely, vec![stats]);
    let details = body.details(&all);
    let seconds = worker.clock.elapsed();
    let mut summary = Summary::gather(declared.stage, &all, sampled.hubs, worker.clock.into_phases(), details);
    summary.seconds = seconds;
    let facts = summary.facts(seconds, threads, body.sampling().hub_threshold);
    let committed = match leases {
        Some(leases) => io.block_on(commit_outputs(declared, &output, &extras, leases, &all, facts)),
        None => Ok(()),
    };
    agree(worker.timely, committed)?;
    Ok(summary)
}

/// Round 0 alone, for a stage that commits its own way (full-graph training writes a model,
/// not a table): the tables `declared` names (its `output` is not read), read and sampled
/// as [`run`] reads them, on every worker in step. Returns the graph with every target (the
/// nodes in `declared.targets`) and the round's facts.
pub fn load_graph(worker: &mut Worker, declared: &Declared, reads: &impl Reads) -> Result<Loaded, Error> {
    let tables = agree(worker.timely, GraphTables::place(worker.io, declared))?;
    let (nodes, sampled, edges, supervision) = round_zero(worker, reads, &tables)?;
    let target_type = declared.typed.as_ref().map(|(_, t)| *t);
    let targets = targets(&nodes, declared.targets, target_type);
    Ok(Loaded { graph: Graph { nodes, targets, supervision }, edges, hubs: sampled.hubs })
}

/// What [`load_graph`] read.
pub struct Loaded {
    pub graph: Graph,
    /// Message-passing edges this worker read.
    pub edges: u64,
    /// Hubs whose in-edges were re-indexed (every worker's).
    pub hubs: u64,
}

/// Every input table `declared` names (the graph's and its partition table), for an output's
/// check by a stage that commits its own way.
pub fn graph_inputs(io: &Io, declared: &Declared) -> Result<Vec<Place>, Error> {
    Ok(GraphTables::place(io, declared)?.all().into_iter().cloned().collect())
}

/// Worker 0's commit: the output's manifest of every worker's parts, then each extra output's,
/// together (`tables::commit::commit_all`).
async fn commit_outputs<X>(
    declared: &Declared<'_>,
    output: &PartsOf,
    extras: &[ExtraPlace],
    (lease, extra_leases): Leases,
    all: &[WorkerStats<X>],
    facts: RunFacts,
) -> Result<(), Error> {
    let pending = |place, lease, parts: Vec<&StagedPart>, carried: Vec<PartEntry>| Pending {
        output: place,
        manifest: Manifest::new(
            &output.run,
            declared.stage,
            parts.iter().map(|p| p.entry.clone()).chain(carried).collect(),
            declared.settings.clone(),
        )
        .with_facts(facts.clone()),
        files: parts.iter().map(|p| p.file()).collect(),
        layout: &Layout::TABLE,
        lease,
    };
    let carried = all.iter().flat_map(|s| s.carried.iter().cloned()).collect();
    let mut all_pending = vec![pending(&output.dir, lease, all.iter().flat_map(|s| &s.entries).collect(), carried)];
    for (i, (extra, lease)) in extras.iter().zip(extra_leases).enumerate() {
        let parts = all.iter().flat_map(|s| s.extra_entries.get(i).into_iter().flatten()).collect();
        all_pending.push(pending(&extra.place, lease, parts, Vec::new()));
    }
    let pending = all_pending;
    commit_all(pending, declared.overwrite).await
}

/// The leases worker 0 holds: the main output's, then each extra output's.
type Leases = (Lease, Vec<Lease>);

/// Checks the output and the extra outputs against every input and each other, takes the
/// run's leases on them (worker 0, which commits) and shares the run id that names every
/// worker's parts. Nothing is written anywhere before every check has passed.
fn open_output(
    timely: &mut timely::worker::Worker,
    io: &Io,
    declared: &Declared,
    output: Place,
    extras: &[ExtraPlace],
    inputs: &[&Place],
) -> Result<(Option<Leases>, PartsOf, Vec<PartsOf>), Error> {
    let index = timely.index();
    let leases = (index == 0).then(|| {
        io.block_on(async {
            check_output(&output, inputs, declared.stage, declared.overwrite, &Layout::TABLE).await?;
            extra_output::check(extras, &output, inputs, declared.stage, declared.overwrite).await?;
            let stage = declared.stage.name();
            let lease = Lease::take(&output, &new_run_id(), stage).await?;
            let extra_leases = extra_output::take(extras, lease.run(), stage).await?;
            Ok((lease, extra_leases))
        })
    });
    let leases = agree(timely, leases.transpose())?;
    let run = broadcast(timely, leases.as_ref().map(|l| l.0.run().to_owned()))
        .ok_or_else(|| Error::Internal("no run id".into()))?;
    let parts_of = |dir: Place| PartsOf { dir, run: run.clone(), worker: index };
    let extra_outputs = extras.iter().map(|e| parts_of(e.place.clone())).collect();
    Ok((leases, parts_of(output), extra_outputs))
}

/// The tables a stage over the graph reads: the homogeneous node and edge tables, or a typed
/// graph's table per node type and per relation.
struct GraphTables {
    graph: GraphInputs,
    /// The partition table the owners come from, and the process's map of it.
    partition: Option<(Place, SharedOwnerMap)>,
}

/// The node and edge tables of [`GraphTables`].
enum GraphInputs {
    Plain { nodes: Place, edges: Place },
    Typed(TypedInputs),
}

/// A typed graph's tables: one per node type, one per relation (a reversed relation reads
/// its forward one's).
struct TypedInputs {
    node_types: Vec<(String, Place)>,
    relations: Vec<(String, RelationRead, Place)>,
    /// Relations in all, reversed ones included.
    relation_count: usize,
    target: u8,
    /// Whether the target type's table must have labels: node records need them, link
    /// records and scores do not.
    labeled: bool,
}

impl GraphTables {
    fn place(io: &Io, declared: &Declared) -> Result<Self, Error> {
        let partition = match declared.partition {
            Some((uri, shared)) => Some((io.place(uri)?, shared.clone())),
            None => None,
        };
        Ok(GraphTables { graph: GraphInputs::place(io, declared)?, partition })
    }

    /// Every input table, for the output's check.
    fn all(&self) -> Vec<&Place> {
        let mut all = self.graph.all();
        all.extend(self.partition.as_ref().map(|(place, _)| place));
        all
    }

    /// The partition table the loader routes by.
    fn partition(&self) -> Option<PartitionTable<'_>> {
        self.partition.as_ref().map(|(place, shared)| PartitionTable { place, shared })
    }
}

impl GraphInputs {
    fn place(io: &Io, declared: &Declared) -> Result<Self, Error> {
        let Some((graph, target)) = &declared.typed else {
            return Ok(GraphInputs::Plain { nodes: io.place(declared.nodes)?, edges: io.place(declared.edges)? });
        };
        let node_types = graph
            .node_types
            .iter()
            .map(|(name, table)| Ok((name.clone(), io.place(table)?)))
            .collect::<Result<_, Error>>()?;
        let relations = graph
            .tables
            .iter()
            .map(|t| {
                let r = &graph.relations[usize::from(t.forward)];
                let split = declared.link_relation == Some(t.forward);
                let read =
                    RelationRead { forward: t.forward, reverse: t.reverse, src_type: r.src, dst_type: r.dst, split };
                let shown = format!(
                    "relation {} ({} -> {})",
                    r.name,
                    graph.node_types[usize::from(r.src)].0,
                    graph.node_types[usize::from(r.dst)].0
                );
                Ok((shown, read, io.place(&t.table)?))
            })
            .collect::<Result<_, Error>>()?;
        let labeled = declared.stage == Stage::Flatten && declared.link_relation.is_none();
        Ok(GraphInputs::Typed(TypedInputs {
            node_types,
            relations,
            relation_count: graph.relations.len(),
            target: *target,
            labeled,
        }))
    }

    /// Every input table, for the output's check.
    fn all(&self) -> Vec<&Place> {
        match self {
            GraphInputs::Plain { nodes, edges } => vec![nodes, edges],
            GraphInputs::Typed(TypedInputs { node_types, relations, .. }) => {
                node_types.iter().map(|(_, p)| p).chain(relations.iter().map(|(_, _, p)| p)).collect()
            }
        }
    }
}

/// The map of a typed graph: every node type's table, then every relation's edge table (a
/// relation with a split gives its supervision edges).
fn map_typed<B: Reads>(
    worker: &mut Worker,
    body: &B,
    typed: &TypedInputs,
    partition: Option<PartitionTable<'_>>,
    read: EdgeRead,
) -> Result<(Rc<RefCell<NodeStore>>, ReadEdges), Error> {
    let TypedInputs { node_types, relations, relation_count, target, labeled } = typed;
    let stage = worker.progress.stage();
    if worker.reporter {
        tracing::info!("{stage}: map: reading {} node types", node_types.len());
    }
    let nodes = load_typed_nodes(worker.timely, worker.io, node_types, *target, *labeled, partition)?;
    agree(worker.timely, body.check_nodes(&nodes))?;
    let nodes = Rc::new(RefCell::new(nodes));
    let mut read_tables = Vec::with_capacity(relations.len());
    for (shown, relation, table) in relations {
        if worker.reporter {
            tracing::info!("{stage}: map: reading {shown} from {}", table.shown());
        }
        let supervision = read.supervision.filter(|_| relation.split);
        let read = EdgeRead { relation: Some(*relation), supervision, ..read };
        let edges = load_edges(worker.timely, worker.io, table, &nodes, read).map_err(|e| in_type(e, shown))?;
        read_tables.push((*relation, edges));
    }
    Ok((nodes, ReadEdges::typed(read_tables, *relation_count)))
}

/// Round 0: this worker's share of the nodes and edges (the map), then every node's in-edges
/// sampled with hub re-indexing. Returns the nodes, the sampling's facts, the message-passing
/// edges read and the supervision edges this worker owns.
fn round_zero<B: Reads>(
    worker: &mut Worker,
    body: &B,
    tables: &GraphTables,
) -> Result<(NodeStore, Sampled, u64, Vec<SupervisionEdge>), Error> {
    let stage = worker.progress.stage();
    let spec = body.sampling();
    let read = EdgeRead {
        require_positive_weight: spec.sampler == Sampler::Weighted,
        supervision: body.supervision(),
        relation: None,
    };
    let partition = tables.partition();
    let (nodes, mut edges) = match &tables.graph {
        GraphInputs::Plain { nodes, edges } => {
            if worker.reporter {
                tracing::info!("{stage}: map: reading nodes from {}", nodes.shown());
            }
            let nodes = load_nodes(worker.timely, worker.io, nodes, partition)?;
            agree(worker.timely, body.check_nodes(&nodes))?;
            let nodes = Rc::new(RefCell::new(nodes));
            if worker.reporter {
                tracing::info!("{stage}: map: reading edges from {}", edges.shown());
            }
            let edges = load_edges(worker.timely, worker.io, edges, &nodes, read)?;
            (nodes, edges)
        }
        GraphInputs::Typed(typed) => map_typed(worker, body, typed, partition, read)?,
    };
    let supervision = std::mem::take(&mut edges.supervision);
    let read = edges.len() as u64;
    agree(worker.timely, body.check_edges(&edges))?;
    worker.clock.lap("map");
    let sampler = spec.sampler;
    let sampled = sample_in_edges(worker.timely, &nodes, edges, spec)?;
    worker.clock.lap("sample");
    if worker.reporter {
        tracing::info!("{stage}: sampled in-edges ({}, {} hubs re-indexed)", sampler.name(), sampled.hubs);
    }
    let nodes = Rc::try_unwrap(nodes)
        .map(RefCell::into_inner)
        .map_err(|_| Error::Internal("node store still shared after sampling".into()))?;
    Ok((nodes, sampled, read, supervision))
}

/// This worker's nodes in the chosen splits (of the target type in a typed graph), as (id,
/// slot) sorted by id (by typed key in a typed graph).
fn targets(nodes: &NodeStore, chosen: &Targets, target_type: Option<u8>) -> Vec<(i64, u32)> {
    let mut targets: Vec<(i64, u32)> = (0..nodes.len())
        .filter(|&s| target_type.is_none_or(|t| nodes.node_type(s) == t))
        .filter(|&s| match chosen {
            Targets::All => true,
            Targets::Splits(splits) => nodes.splits[s].is_some_and(|split| splits.contains(&split)),
        })
        .map(|s| (nodes.ids[s], s as u32))
        .collect();
    targets.sort_unstable();
    targets
}
