//! A model on disk: `model.bpk` (burn's burnpack record of the weights) and `model.json`
//! ([`ModelMeta`]: the kind, sizes and the flatten settings of its records), so that inference
//! needs nothing else. Both are written to a temporary name and renamed, so a reader never sees
//! half a file.

use std::path::Path;

use burn::prelude::*;
use burn::store::{BurnpackStore, ModuleSnapshot};
use schemas::model::ModelMeta;

use crate::Error;
use crate::model::Gnn;
use crate::params;

pub const WEIGHTS: &str = "model.bpk";
pub const META: &str = "model.json";

fn write_error(path: &Path, problem: impl ToString) -> Error {
    Error::Write { path: path.display().to_string(), problem: problem.to_string() }
}

/// Writes the model with parameters `params` (flat, see [`params`]) into `dir`.
pub fn save(dir: &Path, meta: &ModelMeta, params: &[f32], device: &Device) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
    let model = params::load(Gnn::new(&meta.spec, device), params, device);
    let (weights, weights_tmp) = (dir.join(WEIGHTS), dir.join(format!(".{WEIGHTS}.tmp")));
    let mut store = BurnpackStore::from_file(&weights_tmp).overwrite(true);
    model.save_into(&mut store).map_err(|e| write_error(&weights, format!("{e:?}")))?;
    std::fs::rename(&weights_tmp, &weights).map_err(|e| write_error(&weights, e))?;
    let json = serde_json::to_string_pretty(meta).map_err(|e| write_error(dir, e))?;
    let (path, tmp) = (dir.join(META), dir.join(format!(".{META}.tmp")));
    std::fs::write(&tmp, json).map_err(|e| write_error(&path, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| write_error(&path, e))
}

/// Reads `model.json` alone.
pub fn load_meta(dir: &Path) -> Result<ModelMeta, Error> {
    let path = dir.join(META);
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::Model { path: shown.clone(), problem: format!("cannot read the model's metadata: {e}") })?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Corrupt { path: shown, problem: format!("not a model description (model.json): {e}") })
}

/// Reads a model written by [`save`] (by a training job).
pub fn load(dir: &Path, device: &Device) -> Result<(ModelMeta, Gnn), Error> {
    let meta = load_meta(dir)?;
    let mut model = Gnn::new(&meta.spec, device);
    let path = dir.join(WEIGHTS);
    if !path.exists() {
        return Err(Error::Model { path: path.display().to_string(), problem: "missing: the training job did not finish".into() });
    }
    let mut store = BurnpackStore::from_file(&path);
    model
        .load_from(&mut store)
        .map_err(|e| Error::Corrupt { path: path.display().to_string(), problem: format!("cannot load the weights: {e:?}") })?;
    Ok((meta, model))
}
