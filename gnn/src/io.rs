//! A model in storage (a local directory or a URI, through the `tables` layer): the weights
//! (`model-<run>.bpk`, burn's burnpack record), the description (`model-<run>.json`,
//! [`ModelMeta`]: the kind, sizes and the flatten settings of its records), and the manifest of
//! the two with their sizes and CRC-32 (`_manifest.parquet`, then an empty `_SUCCESS`), written
//! last. Inference needs nothing else.
//!
//! **Why the files carry the run's name.** A model's commit is its manifest: the files must be
//! in place before it, and the files of the model it replaces must stay until it. Under fixed
//! names a run would write over the committed model before its own manifest, and a run killed,
//! or stopped while another committed, inside that window would leave a manifest whose files are
//! another run's. Named by their run, the files of two runs never meet, a run killed at any
//! point leaves the committed model readable, and the commit that replaces a model removes the
//! replaced one's files (`tables::commit`). A reader takes a model only under a manifest whose
//! checksums match the files: files that do not changed after their commit, and are refused,
//! saying so. An earlier version's model (`model.bpk` and `model.json`) is still read.

use burn::prelude::*;
use burn::store::{BurnpackStore, ModuleSnapshot};
use schemas::Task;
use schemas::facts::RunFacts;
use schemas::model::ModelMeta;
use tables::commit::{Manifest, PartEntry, Pending, Stage};
use tables::lease::Lease;
use tables::names::{Layout, staged_name};
use tables::staging::{Staged, StagedFile, StagedPart};
use tables::{Io, Place};

use crate::Error;
use crate::model::Gnn;
use crate::params;

/// How the weights' file ends (`model-<run>.bpk`).
pub const WEIGHTS: &str = ".bpk";
/// How the description's file ends (`model-<run>.json`).
pub const META: &str = ".json";

/// The weights' file of run `run`.
pub fn weights_name(run: &str) -> String {
    format!("model-{run}{WEIGHTS}")
}

/// The description's file of run `run`.
pub fn meta_name(run: &str) -> String {
    format!("model-{run}{META}")
}

/// The files of a model output besides run-named ones (see `tables::names`): the metrics, and
/// an earlier version's fixed names for the model's files.
pub const LAYOUT: Layout = Layout {
    files: &["model.bpk", "model.json", "metrics.jsonl", "timings.jsonl"],
    dirs: &["checkpoints", LEARNED_FOLDER],
    tables: &[LEARNED_FOLDER],
};

/// The folder of a model directory that holds its learned embedding table's parts
/// (`schemas::learned`), listed in the model's manifest as `embeddings/part-<run>-...parquet`.
pub const LEARNED_FOLDER: &str = "embeddings";

/// A model to write: its description, flat parameters (see [`params`]), the training job's
/// settings, and other files written beside it before the commit (the metrics; the manifest
/// lists the two model files, which are all a reader needs).
pub struct Saved<'a> {
    pub meta: &'a ModelMeta,
    pub params: &'a [f32],
    pub settings: serde_json::Value,
    pub files: Vec<(&'static str, Vec<u8>)>,
    /// What the run tells about itself, kept in the manifest.
    pub facts: RunFacts,
    /// Whether the model replaces a committed one (`overwrite`, `resume`); without it the
    /// commit is create-if-absent, and of two runs racing for one directory one commits.
    pub replace: bool,
    /// The learned embedding table's parts (`schemas::learned`), staged in the directory by
    /// the workers that wrote them: listed in the same manifest, committed with the weights.
    pub table: Vec<StagedPart>,
}

/// Writes the model into `dir`, then commits it under a manifest of `lease`'s run.
pub fn save(io: &Io, dir: &Place, lease: Lease, saved: Saved, device: &Device) -> Result<(), Error> {
    let Saved { meta, params, settings, files, facts, replace, table } = saved;
    let model = params::load(Gnn::new(&meta.spec, device), params, device);
    let (weights_name, meta_name) = (weights_name(lease.run()), meta_name(lease.run()));
    let mut store = BurnpackStore::from_bytes(None);
    let weights_place = dir.child(&weights_name);
    let write_error = |problem: String| Error::Write { path: weights_place.shown(), problem };
    model.save_into(&mut store).map_err(|e| write_error(format!("{e:?}")))?;
    let weights = store.get_bytes().map_err(|e| write_error(format!("{e:?}")))?.to_vec();
    let json = serde_json::to_vec_pretty(meta)
        .map_err(|e| Error::Write { path: dir.child(&meta_name).shown(), problem: e.to_string() })?;
    let mut parts = vec![PartEntry::of(&weights_name, 0, &weights), PartEntry::of(&meta_name, 0, &json)];
    parts.extend(table.iter().map(|p| p.entry.clone()));
    let manifest = Manifest::new(lease.run(), Stage::Train, parts, settings).with_facts(facts);
    io.block_on(async {
        // Staged, then published by the commit: a run that dies before it leaves the committed
        // model's files as they were.
        let mut staged = Vec::new();
        let model = [(weights_name.as_str(), weights), (meta_name.as_str(), json)];
        for (name, bytes) in model.into_iter().chain(files) {
            dir.child(&staged_name(lease.run(), name)).put(bytes).await?;
            staged.push(StagedFile { name: name.to_owned(), staged: Staged::File });
        }
        staged.extend(table.iter().map(StagedPart::file));
        let pending = Pending { output: dir, manifest, files: staged, layout: &LAYOUT, lease };
        tables::commit::commit_all(vec![pending], replace).await
    })?;
    Ok(())
}

/// A committed model's metadata and weights, checked against its manifest.
pub struct ModelFiles {
    pub meta: ModelMeta,
    /// The run that committed it (its manifest's): another training is another run.
    pub run: String,
    weights: Vec<u8>,
    /// The weights' and the description's files.
    pub weights_place: Place,
    pub meta_place: Place,
}

impl ModelFiles {
    /// Reads the model under `uri` (a local directory or a URI) with the job's `io`.
    pub fn open(io: &Io, uri: &str) -> Result<ModelFiles, Error> {
        Self::read(io, &io.place(uri)?)
    }

    /// Reads the model in `dir`.
    pub fn read(io: &Io, dir: &Place) -> Result<ModelFiles, Error> {
        io.block_on(Self::read_async(dir))
    }

    async fn read_async(dir: &Place) -> Result<ModelFiles, Error> {
        let missing = |problem: &str| Error::Model { path: dir.shown(), problem: problem.into() };
        let Some(manifest) = tables::commit::read_manifest(dir).await? else {
            return Err(missing(
                "no manifest of a committed model: not a training output, or its training job did not commit",
            ));
        };
        let (meta_place, json) = checked(dir, &manifest, META).await?;
        let (weights_place, weights) = checked(dir, &manifest, WEIGHTS).await?;
        let meta: ModelMeta = serde_json::from_slice(&json).map_err(|e| Error::Corrupt {
            path: meta_place.shown(),
            problem: format!("not a model description: {e}"),
        })?;
        check_sizes(&meta, weights.len())
            .and_then(|()| check_edge_inputs(&meta))
            .and_then(|()| check_types(&meta))
            .map_err(|problem| Error::Corrupt { path: meta_place.shown(), problem })?;
        Ok(ModelFiles { meta, run: manifest.run, weights, weights_place, meta_place })
    }

    /// The size of the weights.
    pub fn weight_bytes(&self) -> usize {
        self.weights.len()
    }

    /// The weights' bytes (burn's burnpack record).
    pub fn weights(&self) -> &[u8] {
        &self.weights
    }

    /// The model on `device`.
    pub fn model(&self, device: &Device) -> Result<Gnn, Error> {
        let mut model = Gnn::new(&self.meta.spec, device);
        let mut store = BurnpackStore::from_bytes(Some(burn::tensor::Bytes::from_bytes_vec(self.weights.clone())));
        model.load_from(&mut store).map_err(|e| Error::Corrupt {
            path: self.weights_place.shown(),
            problem: format!("cannot load the weights: {e:?}"),
        })?;
        Ok(model)
    }
}

/// Whether the sizes in `meta` fit `weight_bytes` of weights (four bytes a parameter): a model
/// is built only after this, so a `model.json` with absurd sizes is an error, not an allocation.
fn check_sizes(meta: &ModelMeta, weight_bytes: usize) -> Result<(), String> {
    // A model this small is built without a second thought; a larger one must be held by the
    // weights (its bound is at most twice its parameters, plus a few vectors a layer).
    const SMALL: u64 = 1 << 24;
    let held = weight_bytes as u64 / 4;
    let spec = &meta.spec;
    let fits =
        spec.parameter_bound().is_some_and(|bound| bound <= SMALL.max(2 * held + 64 * spec.layers as u64 + 1024))
            && (1..=64).contains(&spec.layers)
            && spec.heads.max(spec.output_heads) <= 1024;
    if fits {
        Ok(())
    } else {
        Err(format!(
            "its sizes (input {}, hidden {}, classes {}, {} layers, {} heads, {} parameters) do not fit the {weight_bytes} \
             bytes of model.bpk: the model is corrupt",
            spec.input_dim, spec.hidden, spec.classes, spec.layers, spec.heads, meta.parameters
        ))
    }
}

/// Whether the edge settings in `meta` hold together: statistics, where present, are of the
/// edge width, and a model that standardizes its edges has them (inference standardizes with
/// nothing else).
fn check_edge_inputs(meta: &ModelMeta) -> Result<(), String> {
    let spec = &meta.spec;
    let stats = spec.edge_stats.as_ref().map(|s| (s.dim(), s.std.len()));
    match stats {
        Some((mean, std)) if mean != spec.edge_dim || std != spec.edge_dim => Err(format!(
            "its edge statistics have {mean} means and {std} deviations for edge_dim {}: the model is corrupt",
            spec.edge_dim
        )),
        None if spec.normalize_edge_features && spec.edge_dim > 0 => {
            Err("it standardizes edge features but holds no edge statistics: the model is corrupt".into())
        }
        _ => Ok(()),
    }
}

/// Whether a typed model's types hold together (a model is built from them): at most
/// `MAX_NODE_TYPES` types of positive widths and `MAX_RELATIONS` relations between them, a
/// target among them, one fanout rule per relation (none, or one a hop), at most `MAX_BASES`
/// bases, edge statistics of each relation's width where it standardizes them; a homogeneous
/// model has no relation fanouts or statistics.
fn check_types(meta: &ModelMeta) -> Result<(), String> {
    use schemas::typed::{MAX_NODE_TYPES, MAX_RELATIONS};
    let spec = &meta.spec;
    let Some(types) = &spec.types else {
        let typed_only = !meta.relation_fanouts.is_empty()
            || spec.bases > 0
            || !spec.relation_edge_stats.is_empty()
            || meta.link_relation.is_some();
        return match typed_only {
            false => Ok(()),
            true => {
                Err("a homogeneous model with relation fanouts, bases or a link relation: the model is corrupt".into())
            }
        };
    };
    let link_fits = match (spec.task, meta.link_relation) {
        (Task::Link, Some(r)) => usize::from(r) < types.relations.len(),
        (Task::Node, None) => true,
        _ => false,
    };
    let count = types.node_types.len();
    let known = |t: u8| usize::from(t) < count;
    let fits = (1..=MAX_NODE_TYPES).contains(&count)
        && types.node_types.iter().all(|t| t.input_width() > 0 && [0, spec.learned_embedding_dim].contains(&t.learned))
        && types.relations.len() <= MAX_RELATIONS
        && types.relations.iter().all(|r| known(r.src) && known(r.dst))
        && known(types.target)
        && meta.relation_fanouts.len() == types.relations.len()
        && meta.relation_fanouts.iter().all(|f| f.is_empty() || f.len() == meta.hops)
        && spec.bases <= schemas::job::train::MAX_BASES
        && link_fits;
    let stats_fit = match spec.relation_edge_stats.is_empty() {
        true => !(spec.normalize_edge_features && types.has_edge_features()),
        false => {
            spec.relation_edge_stats.len() == types.relations.len()
                && types.relations.iter().zip(&spec.relation_edge_stats).all(|(r, stats)| match stats {
                    None => r.edge_dim == 0,
                    Some(s) => s.dim() == r.edge_dim && s.std.len() == r.edge_dim,
                })
        }
    };
    if !stats_fit {
        return Err(format!("its relations' edge statistics do not fit their widths ({types}): the model is corrupt"));
    }
    match fits {
        true => Ok(()),
        false => {
            let what = "relation fanouts, bases or link relation";
            Err(format!("its types ({types}), {what} do not hold together: the model is corrupt"))
        }
    }
}

/// The model's file that ends in `ending` ([`WEIGHTS`] or [`META`]) and its bytes, which the
/// manifest must list with these bytes' size and checksum. The model's files are published only
/// by their run's commit under names no other run gives, so files that do not match changed
/// after it, and the message says so with both sizes and checksums.
async fn checked(dir: &Place, manifest: &Manifest, ending: &str) -> Result<(Place, Vec<u8>), Error> {
    let listed = manifest.parts.iter().find(|p| p.name.starts_with("model") && p.name.ends_with(ending));
    let Some(entry) = listed else {
        return Err(Error::Model {
            path: dir.shown(),
            problem: format!("the model's manifest (run {}) lists no model*{ending} file", manifest.run),
        });
    };
    let place = dir.child(&entry.name);
    let fail = |problem: String| Error::Model { path: place.shown(), problem };
    let changed = |found: String| Error::Corrupt {
        path: place.shown(),
        problem: format!(
            "changed after run {} committed it: {found}, where its manifest says {} bytes with CRC-32 {:08x}; train \
             the model again, or put the committed file back",
            manifest.run, entry.bytes, entry.crc32
        ),
    };
    // Never more than the manifest says (a file that grew is read no further than that).
    let Some(bytes) = place.get_at_most(entry.bytes).await.map_err(|e| match e {
        tables::Error::BadData(_) if !place.is_special_local_file() => changed("more bytes".into()),
        e => e.into(),
    })?
    else {
        return Err(fail(format!("missing, though run {} committed it (removed since?)", manifest.run)));
    };
    let crc32 = tables::checksum::Sums::of(&bytes).crc32;
    if bytes.len() as u64 != entry.bytes || crc32 != entry.crc32 {
        return Err(changed(format!("{} bytes with CRC-32 {crc32:08x}", bytes.len())));
    }
    Ok((place, bytes))
}

/// Reads a model written by [`save`] (by a training job).
pub fn load(io: &Io, uri: &str, device: &Device) -> Result<(ModelMeta, Gnn), Error> {
    let files = ModelFiles::open(io, uri)?;
    let model = files.model(device)?;
    Ok((files.meta, model))
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::Sampler;
    use schemas::edge_stats::EdgeStats;
    use schemas::model::{Activation, ModelKind, ModelSpec};

    fn meta(spec: ModelSpec) -> ModelMeta {
        ModelMeta {
            format: 1,
            spec,
            hops: 2,
            fanouts: Vec::new(),
            sampler: Sampler::All,
            flatten_seed: 0,
            parameters: 0,
            relation_fanouts: Vec::new(),
            link_relation: None,
        }
    }

    /// A GINE model with standardized edge features: the specs below are it with changes.
    fn gine() -> ModelSpec {
        ModelSpec {
            kind: ModelKind::Gine,
            input_dim: 4,
            hidden: 8,
            classes: 3,
            layers: 2,
            heads: 1,
            output_heads: 1,
            activation: Activation::Relu,
            normalize_features: false,
            multi_label: false,
            edge_dim: 2,
            normalize_edge_features: true,
            edge_stats: Some(EdgeStats { mean: vec![0.0, 1.0], std: vec![1.0, 2.0] }),
            relation_edge_stats: Vec::new(),
            task: Default::default(),
            decoder: None,
            types: None,
            bases: 0,
            wide_mlp: true,
            learned_embedding_dim: 0,
            precomputed: 0,
            seed: 0,
        }
    }

    #[test]
    fn edge_statistics_must_fit_the_edge_width_and_be_there_to_standardize() {
        let spec = gine();
        assert!(check_edge_inputs(&meta(spec.clone())).is_ok());
        assert!(check_edge_inputs(&meta(ModelSpec { edge_dim: 3, ..spec.clone() })).is_err());
        assert!(check_edge_inputs(&meta(ModelSpec { edge_stats: None, ..spec.clone() })).is_err());
        let raw = ModelSpec { normalize_edge_features: false, edge_stats: None, ..spec.clone() };
        assert!(check_edge_inputs(&meta(raw)).is_ok());

        // Types: relations between known types, a fanout rule per relation, bases in range.
        use schemas::typed::{GraphTypes, NodeType, Relation};
        let types = GraphTypes {
            node_types: vec![NodeType::new("a", 3), NodeType::new("b", 2)],
            relations: vec![Relation::new("ab", 0, 1)],
            target: 1,
        };
        let typed = |types: GraphTypes, relation_fanouts: Vec<Vec<u32>>, bases| ModelMeta {
            relation_fanouts,
            ..meta(ModelSpec { kind: ModelKind::Rgcn, types: Some(types), bases, ..spec.clone() })
        };
        assert!(check_types(&meta(spec.clone())).is_ok());
        assert!(check_types(&typed(types.clone(), vec![vec![]], 2)).is_ok());
        assert!(check_types(&typed(types.clone(), vec![vec![5, 5]], 0)).is_ok());
        assert!(check_types(&typed(types.clone(), vec![], 0)).is_err(), "a relation without its fanouts");
        assert!(check_types(&typed(types.clone(), vec![vec![5]], 0)).is_err(), "fanouts for one hop of two");
        assert!(check_types(&typed(types.clone(), vec![vec![]], 256)).is_err(), "too many bases");
        // A relation with edge features, standardized: its statistics, of its width.
        let mut featured = types.clone();
        featured.relations[0].edge_dim = 2;
        let stats = |dim: usize| vec![Some(EdgeStats { mean: vec![0.0; dim], std: vec![1.0; dim] })];
        let with = |relation_edge_stats| ModelMeta {
            spec: ModelSpec { relation_edge_stats, ..typed(featured.clone(), vec![vec![]], 0).spec },
            ..typed(featured.clone(), vec![vec![]], 0)
        };
        assert!(check_types(&with(stats(2))).is_ok());
        assert!(check_types(&with(stats(3))).is_err(), "statistics of another width");
        assert!(check_types(&with(Vec::new())).is_err(), "standardized without statistics");
        assert!(
            check_types(&ModelMeta {
                relation_fanouts: Vec::new(),
                ..meta(ModelSpec { relation_edge_stats: stats(2), ..spec.clone() })
            })
            .is_err()
        );
        // A typed link model names its relation; no other model does.
        let link = |link_relation| ModelMeta {
            link_relation,
            spec: ModelSpec { task: Task::Link, ..typed(types.clone(), vec![vec![]], 0).spec },
            ..typed(types.clone(), vec![vec![]], 0)
        };
        assert!(check_types(&link(Some(0))).is_ok());
        assert!(check_types(&link(Some(1))).is_err(), "a link relation out of range");
        assert!(check_types(&link(None)).is_err(), "a typed link model without its relation");
        assert!(check_types(&ModelMeta { link_relation: Some(0), ..typed(types.clone(), vec![vec![]], 0) }).is_err());
        assert!(check_types(&ModelMeta { link_relation: Some(0), ..meta(spec.clone()) }).is_err());
        let mut unknown = types;
        unknown.relations[0].dst = 2;
        assert!(check_types(&typed(unknown, vec![vec![]], 0)).is_err(), "a relation into no type");
        assert!(check_types(&ModelMeta { relation_fanouts: vec![vec![]], ..meta(spec) }).is_err());
    }

    /// The count from the sizes is the built model's (every kind, with and without edge
    /// features, typed models, the MLP decoder), and the loader takes any real model's weights:
    /// a GAT of 8 heads over Cora's 1,433 features was refused as corrupt when the count was a
    /// square of the widest layer.
    #[test]
    fn parameter_counts_are_the_built_models_and_real_weights_load() {
        use schemas::Decoder;
        use schemas::typed::{GraphTypes, NodeType, Relation};
        let device = Device::default();
        let base = ModelSpec {
            kind: ModelKind::Gcn,
            input_dim: 1433,
            classes: 7,
            heads: 8,
            edge_dim: 0,
            normalize_edge_features: false,
            edge_stats: None,
            seed: 3,
            ..gine()
        };
        let mut types = GraphTypes {
            node_types: vec![NodeType::new("a", 5), NodeType::new("b", 3)],
            relations: vec![Relation::new("ab", 0, 1), Relation::new("ba", 1, 0)],
            target: 0,
        };
        types.relations[1].edge_dim = 2;
        types.node_types[1].learned = 4;
        let mut specs = Vec::new();
        for kind in [ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat, ModelKind::Gine] {
            for (edge_dim, layers, decoder) in [(0, 2, None), (3, 3, Some(Decoder::Mlp)), (2, 1, Some(Decoder::Dot))] {
                specs.push(ModelSpec { kind, edge_dim, layers, decoder, ..base.clone() });
            }
        }
        specs.push(ModelSpec { input_dim: 4, hidden: 64, classes: 2, ..base.clone() });
        for (kind, bases) in [(ModelKind::Rgcn, 0), (ModelKind::Rgcn, 3), (ModelKind::Sage, 0)] {
            specs.push(ModelSpec { kind, bases, input_dim: 0, types: Some(types.clone()), ..base.clone() });
        }
        for spec in specs {
            let built = crate::params::flatten(&crate::Gnn::new(&spec, &device)).len() as u64;
            let counted = spec.parameter_bound().unwrap();
            let what =
                format!("{:?}, edge_dim {}, {} layers, bases {}", spec.kind, spec.edge_dim, spec.layers, spec.bases);
            assert!(counted >= built && counted <= built + 16 * spec.layers as u64, "{what}: {counted} for {built}");
            let meta = ModelMeta { parameters: built as usize, ..meta(spec) };
            assert!(check_sizes(&meta, built as usize * 4).is_ok(), "{what}");
        }
    }
}
