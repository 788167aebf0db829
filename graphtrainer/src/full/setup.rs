//! What full-graph training reads and the model it builds: the keys it takes (and the ones it
//! does not take yet, refused with the way that works), round 0's sampling (every in-edge),
//! and the model's spec from the loaded graph's widths and labels, the same on every worker.

use cluster::all_gather;
use sampling::{NodeStore, SampleSpec, SupervisionSample};
use schemas::job::flatten::DEFAULT_HUB_THRESHOLD;
use schemas::job::{PsMode, TrainConfig, TypedGraph};
use schemas::model::{ModelKind, ModelMeta, ModelSpec};
use schemas::typed::{GraphTypes, NodeType, Relation};
use schemas::{BatchNegatives, LabelKind, Sampler, Split, Task};
use stage::Reads;
use timely::worker::Worker;

use crate::error::Error;
use crate::full::hubs::Weighting;
use crate::task_keys::TaskKeys;

/// The model's layers when `layers` is not set: two, as the records' usual hops.
pub const DEFAULT_LAYERS: usize = 2;

/// The keys full-graph training does not take yet, and the ones its task does not take: each
/// refused, naming what to do instead.
pub fn check_keys(config: &TrainConfig) -> Result<(), Error> {
    let records = "flatten the graph and train on its records ([flatten], then [train] records = ...)";
    let refused = [
        (config.learned_embedding_dim > 0, "learned_embedding_dim"),
        (config.resume, "resume = true"),
        (config.checkpoint_every > 0, "checkpoint_every"),
    ];
    if let Some((_, key)) = refused.iter().find(|(set, _)| *set) {
        return Err(Error::Usage(format!(
            "full-graph training (nodes and edges, or a typed [graph], in [train]) trains without learned \
             embeddings or checkpoints so far, and this job sets {key}: {records}"
        )));
    }
    if config.mode == PsMode::Async {
        return Err(Error::Usage(
            "full-graph training takes one exact step per epoch: mode = \"async\" has nothing to overlap (leave mode \
             out)"
                .into(),
        ));
    }
    let (link, typed) = (config.task == Some(Task::Link), config.target_type.is_some());
    check_typed_keys(config, link, typed)?;
    if !link && (config.negatives.is_some() || config.negative_sampler.is_some()) {
        return Err(Error::Usage(
            "negatives and negative_sampler are keys of the link task: set task = \"link\", or leave them out".into(),
        ));
    }
    if link && config.negatives == Some(0) {
        return Err(Error::Usage(
            "full-graph link training scores each edge against its drawn negatives, and negatives = 0 draws none; set \
             negatives >= 1"
                .into(),
        ));
    }
    if link && config.classes.is_some() {
        return Err(Error::Usage(
            "[train] classes is a key of the node task, and this job sets task = \"link\"".into(),
        ));
    }
    let grid =
        config.batch_negatives.is_some_and(|b| b != BatchNegatives::None) || config.in_batch_negatives == Some(true);
    if link && grid {
        return Err(Error::Usage(
            "full-graph link training scores every training edge in one step, and batch negatives would pair each with \
             every other (a grid of edges squared): leave batch_negatives out, and raise negatives instead"
                .into(),
        ));
    }
    Ok(())
}

/// A typed graph trains R-GCN or heterogeneous GraphSAGE on its target type's nodes, or on
/// its link relation's edges; R-GCN needs a typed graph.
fn check_typed_keys(config: &TrainConfig, link: bool, typed: bool) -> Result<(), Error> {
    if typed && !matches!(config.model, ModelKind::Rgcn | ModelKind::Sage) {
        return Err(Error::Usage(format!(
            "[train] trains on the job's typed [graph] (target_type or link_relation), whose models are model = \
             \"rgcn\" and \"sage\" (heterogeneous GraphSAGE), and this job sets model = \"{}\"",
            config.model.name()
        )));
    }
    if !typed && config.model == ModelKind::Rgcn {
        return Err(Error::Usage(
            "model = \"rgcn\" reads a typed graph: give the job a [graph] and [train] target_type instead of nodes \
             and edges"
                .into(),
        ));
    }
    if typed && link && config.link_relation.is_none() {
        return Err(Error::Usage(
            "a link task on a typed graph needs [train] link_relation: the relation whose edges it predicts".into(),
        ));
    }
    Ok(())
}

/// The record trainer's keys this job sets that full-graph training has no use for (it reads
/// no records and takes one step an epoch): said in the log, not refused, so that one job file
/// can switch between the modes.
pub fn idle_keys(config: &TrainConfig) -> Vec<&'static str> {
    let default = TrainConfig::default();
    let set = [
        (config.batch_size != default.batch_size, "batch_size"),
        (config.prune != default.prune, "prune"),
        (config.prefetch != default.prefetch, "prefetch"),
        (config.cache_mb != default.cache_mb, "cache_mb"),
        (config.shuffle_mb != default.shuffle_mb, "shuffle_mb"),
        (config.staleness != default.staleness, "staleness"),
    ];
    set.iter().filter(|(set, _)| *set).map(|(_, key)| *key).collect()
}

/// Round 0 for full-graph training: every in-edge, with its source's slot, and for the link
/// task every supervision edge.
pub struct FullReads {
    pub seed: u64,
    pub link: bool,
    /// The node table, as errors name it.
    pub nodes: String,
    /// A typed graph's node types' names and its relations (none: a homogeneous graph).
    pub types: Vec<String>,
    pub relations: usize,
}

impl Reads for FullReads {
    fn sampling(&self) -> SampleSpec {
        SampleSpec {
            sampler: Sampler::All,
            seed: self.seed,
            limit: usize::MAX,
            hub_threshold: DEFAULT_HUB_THRESHOLD,
            relation_limits: vec![usize::MAX; self.relations],
            source_slots: true,
        }
    }

    fn supervision(&self) -> Option<SupervisionSample> {
        self.link.then_some(SupervisionSample::ALL)
    }

    fn check_nodes(&self, nodes: &NodeStore) -> Result<(), tables::Error> {
        if nodes.is_typed() {
            return match nodes.widths.iter().position(|&w| w == 0) {
                Some(t) => Err(tables::Error::Usage(format!(
                    "node type {:?} has no features, and full-graph training projects each type's features \
                     (learned embeddings train on records so far: flatten the graph and train on its records)",
                    self.types.get(t).map_or("?", String::as_str)
                ))),
                None => Ok(()),
            };
        }
        if nodes.dim == 0 {
            return Err(tables::Error::Usage(format!(
                "{}: full-graph training reads node features, and the node table has no features column (learned \
                 embeddings train on records so far: flatten the graph and train on its records)",
                self.nodes
            )));
        }
        Ok(())
    }
}

/// The first row of the node table `table` whose class is not below `classes`, as bad input
/// naming its file, row and column: where a label above `[train] classes` lies (read again
/// only when one is known to be there).
pub fn label_above(io: &tables::Io, table: &str, classes: usize) -> Result<Option<schemas::BadInput>, Error> {
    let place = io.place(table)?;
    for file in tables::open_table(io, &place)? {
        let name = file.name();
        let mut found = None;
        for group in 0..file.row_groups() {
            file.read_row_group(io, group, |batch, first_row| {
                let nodes = schemas::nodes::NodeBatch::from_batch(&batch, &name, first_row)?;
                for i in 0..nodes.len() {
                    let row = first_row + i as u64;
                    let Some(schemas::Label::Class(c)) = nodes.label(i, &name, row)? else { continue };
                    if c as u64 >= classes as u64 && found.is_none() {
                        let at = schemas::Location::file(name.clone()).row(row).column(schemas::nodes::LABEL);
                        found = Some(schemas::BadInput::new(
                            at,
                            format!("class {c} is not below [train] classes = {classes}"),
                        ));
                    }
                }
                Ok(())
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
    }
    Ok(None)
}

/// The labels of every worker's nodes, counted: classes (the largest class plus one, or the
/// targets' width), labeled training and validation nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct LabelCounts {
    pub classes: u64,
    pub multi_label: bool,
    pub train: u64,
    pub valid: u64,
}

impl LabelCounts {
    /// Every worker's counts of `nodes`' labels (a typed graph's: of its `target` type's
    /// nodes only), summed.
    pub fn gather(worker: &mut Worker, nodes: &NodeStore, target: Option<u8>) -> LabelCounts {
        let counted = |slot: usize| target.is_none_or(|t| nodes.node_type(slot) == t);
        let labeled = |split| {
            let slots = (0..nodes.len()).filter(|&s| counted(s));
            slots.filter(|&s| nodes.labels[s].is_some() && nodes.splits[s] == Some(split)).count() as u64
        };
        let (multi_label, width) = match nodes.label_kind {
            LabelKind::Targets(width) => (true, width as u64),
            LabelKind::Class => (false, 0),
        };
        let labels = (0..nodes.len()).filter(|&s| counted(s)).filter_map(|s| nodes.labels[s].as_ref());
        let largest = labels.filter_map(|l| l.class()).max().map_or(0, |c| c as u64 + 1);
        let mine = LabelCounts {
            classes: width.max(largest),
            multi_label,
            train: labeled(Split::Train),
            valid: labeled(Split::Valid),
        };
        let all = all_gather(worker, vec![(worker.index(), mine)]);
        all.iter().fold(LabelCounts::default(), |sum, (_, c)| LabelCounts {
            classes: sum.classes.max(c.classes),
            multi_label: sum.multi_label || c.multi_label,
            train: sum.train + c.train,
            valid: sum.valid + c.valid,
        })
    }

    /// Nothing to learn is an error on every worker alike.
    pub fn check(&self, nodes: &str, patience: usize) -> Result<(), Error> {
        if self.train == 0 {
            return Err(Error::NothingToLearn(format!(
                "{nodes}: no node has split \"train\" and a label; full-graph training learns from them"
            )));
        }
        if self.valid == 0 && patience > 0 {
            return Err(Error::NothingToLearn(format!(
                "{nodes}: patience = {patience} stops early on the validation score, and no node has split \"valid\" \
                 and a label; set patience = 0"
            )));
        }
        Ok(())
    }
}

/// The model's spec from the graph: its feature and edge widths, the classes, the job's keys.
pub fn spec(
    config: &TrainConfig,
    nodes: &NodeStore,
    labels: &LabelCounts,
    typed: Option<&(TypedGraph, u8)>,
) -> Result<ModelSpec, Error> {
    let task = config.task.unwrap_or_default();
    if let Some(precomputed) = nodes.precomputed {
        return Err(Error::Usage(format!(
            "[train] nodes = {}: its features are {} ([precompute]'s output), which records of one hop fewer read \
             (docs/precompute.md); full-graph training aggregates every layer itself: give it the plain node table",
            config.nodes.as_deref().unwrap_or_default(),
            precomputed.formula()
        )));
    }
    let classes = match task {
        Task::Link => config.embedding_dim.unwrap_or(config.hidden),
        Task::Node => config.classes.unwrap_or(labels.classes as usize),
    };
    if task == Task::Node && (labels.classes as usize) > classes {
        return Err(Error::Usage(format!(
            "[train] classes = {classes}, and the node table has labels up to {}",
            labels.classes - 1
        )));
    }
    let available = match typed {
        Some(_) => nodes.relation_edges.any(),
        None => nodes.edge_dim > 0,
    };
    if config.edge_features == Some(true) && !available {
        let tables = if typed.is_some() { "no relation's edge table has a" } else { "the edge table has no" };
        return Err(Error::Usage(format!("[train] edge_features = true, and {tables} features column")));
    }
    // As the record trainer decides: read when the tables have them, the job does not say no,
    // and the kind has a place for them (GCN has none).
    let reads_edges = available && config.edge_features != Some(false) && config.model.uses_edge_features();
    let standardized = reads_edges && config.normalize_edge_features;
    let gat = config.model == ModelKind::Gat;
    Ok(ModelSpec {
        kind: config.model,
        // A typed model's inputs are its types' widths, in `types`.
        input_dim: nodes.dim,
        hidden: config.hidden,
        classes,
        layers: config.layers.unwrap_or(DEFAULT_LAYERS),
        heads: if gat { config.heads } else { 1 },
        output_heads: if gat { config.output_heads } else { 1 },
        activation: config.activation,
        normalize_features: config.normalize_features,
        multi_label: task == Task::Node && labels.multi_label,
        edge_dim: if reads_edges && typed.is_none() { nodes.edge_dim } else { 0 },
        normalize_edge_features: standardized,
        edge_stats: if standardized { nodes.edge_stats.clone() } else { None },
        relation_edge_stats: match standardized && typed.is_some() {
            true => nodes.relation_edges.stats.clone(),
            false => Vec::new(),
        },
        task,
        decoder: (task == Task::Link).then_some(config.decoder),
        types: typed.map(|(graph, target)| graph_types(graph, *target, nodes, reads_edges)),
        bases: config.bases,
        wide_mlp: true,
        learned_embedding_dim: 0,
        // A precomputed table is refused above.
        precomputed: 0,
        seed: config.seed,
    })
}

/// A typed graph's types as the model holds them: each node type's width as loaded, each
/// relation's edge feature width as its table has it (a reversed relation its forward one's)
/// when the model `reads` them, 0 otherwise.
fn graph_types(graph: &TypedGraph, target: u8, nodes: &NodeStore, reads: bool) -> GraphTypes {
    let node_types = graph.node_types.iter().zip(&nodes.widths).map(|((name, _), &w)| NodeType::new(name, w));
    let relations = graph.relations.iter().enumerate().map(|(r, relation)| Relation {
        edge_dim: if reads { nodes.relation_edges.dim(r as u8) } else { 0 },
        ..Relation::new(&relation.name, relation.src, relation.dst)
    });
    GraphTypes { node_types: node_types.collect(), relations: relations.collect(), target }
}

/// How a split hub's runs weigh their in-edges (`crate::full::hubs`): GCN's, or the mean
/// (GraphSAGE; on a typed graph R-GCN's and GraphSAGE's, one per relation); GAT's and GINE's
/// run the layer on their edges (`crate::full::pieces`).
pub fn hub_weighting(spec: &ModelSpec) -> Weighting {
    match spec.kind {
        _ if spec.types.is_some() => Weighting::Mean,
        ModelKind::Gcn => Weighting::Gcn,
        ModelKind::Sage | ModelKind::Rgcn => Weighting::Mean,
        ModelKind::Gat | ModelKind::Gine => Weighting::Layer,
    }
}

/// The run's task keys (weight decay, patience): `can_validate` when there are labeled
/// validation nodes (node task) or valid edges (link task). A link task's batch negatives are
/// none (refused by [`check_keys`]).
pub fn task_keys(config: &TrainConfig, can_validate: bool) -> TaskKeys {
    let task = config.task.unwrap_or_default();
    TaskKeys { batch_negatives: BatchNegatives::None, ..TaskKeys::resolve(config, task, 1, can_validate) }
}

/// The model's description: every in-edge at every layer (no fanouts), as GraphInfer then
/// reads the graph.
pub fn meta(spec: &ModelSpec, parameters: usize, link_relation: Option<u8>) -> ModelMeta {
    ModelMeta {
        format: 1,
        spec: spec.clone(),
        hops: spec.layers,
        fanouts: Vec::new(),
        sampler: Sampler::All,
        flatten_seed: 0,
        parameters,
        // Every in-edge of every relation: GraphInfer reads the graph as trained.
        relation_fanouts: vec![Vec::new(); spec.types.as_ref().map_or(0, |t| t.relations.len())],
        link_relation,
    }
}
