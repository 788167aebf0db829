//! The trained model GraphInfer runs, checked against the tables it will run on.

use burn::prelude::Device;
use gnn::Gnn;
use gnn::io::ModelFiles;
use sampling::{NodeStore, RelationEdges};
use schemas::job::TypedGraph;
use schemas::model::ModelMeta;
use schemas::nodes::Precomputed;

use tables::{Io, Place};

use crate::Error;

/// A model error as the table layer's error, keeping its exit cause: a store's failure while
/// reading the model stays the store's error (75 on a remote failure: retry), never "missing".
pub fn model_error(e: gnn::Error) -> Error {
    let message = e.to_string();
    match e {
        gnn::Error::Table(e) => e,
        gnn::Error::Model { .. } => Error::NoInput(message),
        gnn::Error::Corrupt { .. } => Error::BadData(message),
        gnn::Error::Write { .. } => Error::Output(message),
        gnn::Error::Device(_) => Error::Usage(message),
    }
}

/// The model directory of `[infer] model`: a local path or a URI.
pub fn model_dir(io: &Io, model: &str) -> Result<Place, Error> {
    let dir = io.place(model)?;
    if dir.local_dir().is_some_and(|d| !d.is_dir()) {
        return Err(Error::NoInput(format!("[infer] model {model}: no such directory (a training job's output)")));
    }
    Ok(dir)
}

/// The committed model read from `dir` (see `gnn::io`) on `device`, once its parts agree: one
/// layer per hop of its records (and a dense first layer over precomputed features), one
/// fanout per hop.
pub fn load(files: &ModelFiles, device: &Device) -> Result<(ModelMeta, Gnn), Error> {
    let model = files.model(device).map_err(model_error)?;
    let meta = files.meta.clone();
    let json = files.meta_place.shown();
    if meta.spec.layers != meta.hops + meta.spec.precomputed || meta.spec.precomputed > 1 {
        let dense = match meta.spec.precomputed {
            0 => String::new(),
            n => format!(" over precomputed features ({n} dense layers first)"),
        };
        return Err(Error::BadData(format!(
            "{json}: the model has {} layers but was trained on {}-hop records{dense}; GraphInfer needs one layer \
             per hop, after one dense layer where the features were precomputed",
            meta.spec.layers, meta.hops
        )));
    }
    if !meta.fanouts.is_empty() && meta.fanouts.len() != meta.hops {
        return Err(Error::BadData(format!(
            "{json}: {} fanouts for {} hops (one per hop, nearest first)",
            meta.fanouts.len(),
            meta.hops
        )));
    }
    Ok((meta, model))
}

/// A typed job runs a model of the same typed graph: the same node types and relations, by
/// name and in the same order (each relation between the same types), scoring the same
/// target type; a homogeneous job runs a homogeneous model.
pub fn check_graph(meta: &ModelMeta, description: &Place, job: Option<&(TypedGraph, u8)>) -> Result<(), Error> {
    let json = description.shown();
    let usage = |problem: String| Err(Error::Usage(format!("{json}: {problem}")));
    let (types, (graph, target)) = match (&meta.spec.types, job) {
        (None, None) => return Ok(()),
        (Some(types), None) => {
            return usage(format!(
                "a model of a typed graph ({types}); the job names nodes and edges: give it the [graph] and a target_type"
            ));
        }
        (None, Some(_)) => {
            return usage(
                "a model of a homogeneous graph, and the job names a typed [graph]: give it nodes and edges".into(),
            );
        }
        (Some(types), Some(job)) => (types, job),
    };
    let model_types: Vec<&str> = types.node_types.iter().map(|t| t.name.as_str()).collect();
    let job_types: Vec<&str> = graph.node_types.iter().map(|(name, _)| name.as_str()).collect();
    if model_types != job_types {
        return usage(format!(
            "the model's node types are {}, and the job's [graph] has {}",
            model_types.join(", "),
            job_types.join(", ")
        ));
    }
    let model_relations: Vec<(&str, u8, u8)> =
        types.relations.iter().map(|r| (r.name.as_str(), r.src, r.dst)).collect();
    let job_relations: Vec<(&str, u8, u8)> = graph.relations.iter().map(|r| (r.name.as_str(), r.src, r.dst)).collect();
    if model_relations != job_relations {
        let text = |relations: &[(&str, u8, u8)]| {
            let name = |t: u8| job_types.get(usize::from(t)).copied().unwrap_or("?");
            relations
                .iter()
                .map(|(r, s, d)| format!("{r} ({} -> {})", name(*s), name(*d)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return usage(format!(
            "the model's relations are {}, and the job's [graph] has {}",
            text(&model_relations),
            text(&job_relations)
        ));
    }
    if *target != types.target {
        return usage(format!(
            "the model scores node type {}, and the job's target_type is {}",
            job_types[usize::from(types.target)],
            job_types[usize::from(*target)]
        ));
    }
    Ok(())
}

/// A typed graph's node tables must have each type's features as the model's projections
/// take them (types already checked against the model's by [`check_graph`]).
pub fn check_type_widths(meta: &ModelMeta, dir: &Place, graph: &TypedGraph, nodes: &NodeStore) -> Result<(), Error> {
    let Some(types) = &meta.spec.types else { return Ok(()) };
    for (t, (wanted, (name, table))) in types.node_types.iter().zip(&graph.node_types).enumerate() {
        let found = nodes.width(t as u8);
        if found != wanted.width {
            return Err(Error::BadData(format!(
                "the model in {} takes {} input features for node type {name}, but its table {table} has {found} per node",
                dir.shown(),
                wanted.width
            )));
        }
    }
    Ok(())
}

/// A typed graph's relation tables must have the edge features the model's layers read of
/// each relation, of the width it was trained with (a relation whose features it does not
/// read may have any).
pub fn check_relation_edge_widths(
    meta: &ModelMeta,
    dir: &Place,
    graph: &TypedGraph,
    found: &RelationEdges,
) -> Result<(), Error> {
    let Some(types) = &meta.spec.types else { return Ok(()) };
    for table in &graph.tables {
        let r = usize::from(table.forward);
        let (wanted, has) = (types.relations[r].edge_dim, found.dim(table.forward));
        if wanted > 0 && wanted != has {
            let has = if has == 0 { "no features column".to_owned() } else { format!("{has} features per edge") };
            return Err(Error::BadData(format!(
                "the model in {} reads {wanted} edge features per edge of relation {}, but its table {} has {has}",
                dir.shown(),
                types.relations[r].name,
                table.table
            )));
        }
    }
    Ok(())
}

/// The node table must have the features the model's first layer takes.
/// A model reads the features it was trained on: `[precompute]`'s output for its kind (`Â X`
/// for a GCN, `[X | mean X]` for GraphSAGE) for a model with a dense first layer (the only
/// models trained on it), the plain table's for every other.
pub fn check_precomputed(
    meta: &ModelMeta,
    dir: &Place,
    nodes: &str,
    precomputed: Option<Precomputed>,
) -> Result<(), Error> {
    let kind = meta.spec.kind;
    match (meta.spec.precomputed > 0, precomputed) {
        (true, None) => Err(Error::Usage(format!(
            "the model in {} was trained on records over [precompute]'s output (its first layer is dense), and the \
             node table {nodes} holds plain features: give [infer] nodes the [precompute] output",
            dir.shown()
        ))),
        (false, Some(p)) => Err(Error::Usage(format!(
            "the node table {nodes} holds [precompute]'s {}, and the model in {} was trained on plain features: \
             give [infer] nodes the table the model's records were flattened from",
            p.formula(),
            dir.shown()
        ))),
        (true, Some(p)) if p.model() != kind => Err(Error::Usage(format!(
            "the node table {nodes} holds [precompute]'s {} (for model = \"{}\"), and the model in {} is a {}: give \
             [infer] nodes the table its records were flattened from",
            p.formula(),
            p.model().name(),
            dir.shown(),
            kind.name()
        ))),
        _ => Ok(()),
    }
}

pub fn check_input_width(meta: &ModelMeta, dir: &Place, nodes: &str, dim: usize) -> Result<(), Error> {
    if meta.spec.feature_dim() != dim {
        return Err(Error::BadData(format!(
            "the model in {} takes {} input features, but the node table {nodes} has {dim} per node",
            dir.shown(),
            meta.spec.feature_dim()
        )));
    }
    Ok(())
}

/// The edge table must have the edge features the model's layers read, of the width it was
/// trained with (a model that reads none runs on any edge table).
pub fn check_edge_width(meta: &ModelMeta, dir: &Place, edges: &str, edge_dim: usize) -> Result<(), Error> {
    let wanted = meta.spec.edge_dim;
    if wanted == 0 || wanted == edge_dim {
        return Ok(());
    }
    let found = if edge_dim == 0 { "no features column".to_owned() } else { format!("{edge_dim} features per edge") };
    Err(Error::BadData(format!(
        "the model in {} reads {wanted} edge features per edge, but the edge table {edges} has {found}",
        dir.shown()
    )))
}
