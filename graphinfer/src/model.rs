//! The trained model GraphInfer runs, checked against the tables it will run on.

use burn::prelude::Device;
use gnn::Gnn;
use gnn::io::ModelFiles;
use schemas::model::ModelMeta;

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
/// layer per hop of its records, one fanout per hop.
pub fn load(files: &ModelFiles, dir: &Place, device: &Device) -> Result<(ModelMeta, Gnn), Error> {
    let model = files.model(device).map_err(model_error)?;
    let meta = files.meta.clone();
    let json = dir.child(gnn::io::META).shown();
    if let Some(types) = &meta.spec.types {
        return Err(Error::Usage(format!(
            "{json}: a model of a typed graph ({types}); GraphInfer over typed graphs is not built yet"
        )));
    }
    if meta.spec.layers != meta.hops {
        return Err(Error::BadData(format!(
            "{json}: the model has {} layers but was trained on {}-hop records; GraphInfer needs one layer per hop",
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

/// The node table must have the features the model's first layer takes.
pub fn check_input_width(meta: &ModelMeta, dir: &Place, nodes: &str, dim: usize) -> Result<(), Error> {
    if meta.spec.input_dim != dim {
        return Err(Error::BadData(format!(
            "the model in {} takes {} input features, but the node table {nodes} has {dim} per node",
            dir.shown(),
            meta.spec.input_dim
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
