//! `[precompute]`: the node table with every node's features replaced by a model's first
//! aggregation over the message-passing edges (split null or `train`), with `d_v` counting
//! `v`'s in-edges among them:
//!
//! - `model = "gcn"`: `Â X`, where `Â = D^-1/2 (A + I) D^-1/2` is GCN's normalized adjacency,
//!   `(Â X)_v = x_v / (d_v + 1) + sum over in-edges (u, v) of x_u / sqrt((d_u + 1)(d_v + 1))`;
//! - `model = "sage"`: `[X | mean X]`, each node's features, then the mean of its in-neighbors'
//!   (zeros without in-edges): GraphSAGE's first layer's two inputs, twice as wide.
//!
//! It is GraphInfer's round over every in-edge with a one-layer model of that kind whose weights
//! are identities placed in zeros and whose bias is zero (`x I` is `x` exactly in floating
//! point, since every other term of each sum is a zero): the same plan, hub split and fold
//! order as inference, so the result has the same bits on any cluster shape. Records flattened
//! over the output need one hop fewer for a model whose first layer reads this product (DGL
//! 0.3's and VR-GCN's preprocessing; `docs/precompute.md`).
//!
//! The output is a node table (`schemas/README.md`): `node_id` as `int64` (integer ids of any
//! width or encoding) or the original strings of a graph keyed by strings, `features` as
//! `fixed_size_list<float32, D>`, and `label` and `split` as the input's rows hold them (null
//! where they have none, or -1). Other columns of the input are not carried. Rows are sorted
//! by id within each worker's parts.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, Int64Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use burn::module::Param;
use burn::prelude::{Device, Tensor};
use burn::tensor::TensorData;
use cluster::Failure;
use gnn::Gnn;
use gnn::model::Layer;
use sampling::{NodeStore, SampleSpec, SharedOwnerMap};
use schemas::model::{Activation, ModelMeta, ModelSpec};
use schemas::nodes::Precomputed as Product;
use schemas::{ClusterConfig, Label, LabelKind, PrecomputeConfig, Sampler};
use stage::{Body, Declared, Details, Graph, Progress, Reads, Worker, WorkerStats, Written};
use tables::commit::Stage;
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::{Error, Io};

use crate::plan::plan;
use crate::round::{Context, Input, layer, transform_rows};
use crate::rule::LayerRule;

/// The job's summary.
pub type Summary = stage::Summary<Precomputed>;

/// What the job did, for its summary.
#[derive(Debug, Clone, Default)]
pub struct Precomputed {
    /// The product written, and its values per node.
    pub product: Product,
    pub dim: usize,
    /// `X`'s rows were divided by their sums first (`normalize_features`).
    pub normalized: bool,
    /// In-edges summed over (message-passing edges) and source rows read from other workers.
    pub in_edges: u64,
    pub remote_rows: u64,
    pub hubs_split: u64,
}

impl Details for Precomputed {
    fn lines(&self, _: &Summary) -> Vec<(&'static str, String)> {
        vec![
            (
                "features",
                format!(
                    "{} per node: {} over {} in-edges{}",
                    self.dim,
                    self.product.formula(),
                    self.in_edges,
                    if self.normalized { " (rows of X normalized first)" } else { "" }
                ),
            ),
            ("exchanged", format!("{} source rows between workers; {} hubs split", self.remote_rows, self.hubs_split)),
        ]
    }
}

/// One worker's facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Own {
    dim: usize,
    in_edges: u64,
    remote_rows: u64,
    hubs_split: u64,
}

/// Runs the precompute job on this process's workers. Any worker's failure ends every worker.
pub fn run(io: &Arc<Io>, config: &PrecomputeConfig, cluster: &ClusterConfig) -> Result<Summary, Failure<Error>> {
    let io = io.clone();
    let config = Arc::new(config.clone());
    let phases = vec!["layer 1/1".to_owned(), "write".to_owned()];
    let progress = Arc::new(Progress::new("precompute", "nodes", phases));
    let threads = cluster.threads();
    let owner_map = SharedOwnerMap::default();
    stage::execute(cluster, move |worker| {
        let declared =
            Declared::of(Stage::Precompute, &*config).with_partition(config.partition.as_deref(), &owner_map);
        let body = Propagation { config: &config, device: Device::flex() };
        stage::run(worker, &io, &progress, threads, &declared, body)
    })
}

/// The body: one round of an identity GCN over every in-edge, then the node table.
struct Propagation<'a> {
    config: &'a PrecomputeConfig,
    device: Device,
}

impl Reads for Propagation<'_> {
    fn sampling(&self) -> SampleSpec {
        SampleSpec {
            sampler: Sampler::All,
            seed: 0,
            limit: usize::MAX,
            hub_threshold: self.config.hub_threshold,
            relation_limits: Vec::new(),
            // The plan reads each local source's row by its slot.
            source_slots: true,
        }
    }

    fn check_nodes(&self, nodes: &NodeStore) -> Result<(), Error> {
        let nodes_table = &self.config.nodes;
        if nodes.dim == 0 {
            return Err(Error::Usage(format!(
                "[precompute] {nodes_table}: the node table has no features column; there is nothing to multiply"
            )));
        }
        if let Some(product) = nodes.precomputed {
            return Err(Error::Usage(format!(
                "[precompute] {nodes_table}: the node table's features are {} already (a [precompute] output); \
                 precompute reads the plain node table",
                product.formula()
            )));
        }
        Ok(())
    }
}

impl Body for Propagation<'_> {
    type Own = Own;
    type Details = Precomputed;

    fn run(&mut self, worker: &mut Worker, graph: Graph, output: &PartsOf) -> Result<Written<Own>, Error> {
        let mut nodes = graph.nodes;
        let product = self.config.model;
        let in_edges = nodes.in_degree.iter().sum();
        let meta = identity_meta(product, nodes.dim);
        let model = identity_model(product, &meta.spec, &self.device);
        let dim = meta.spec.classes;
        let rule = LayerRule::of(&meta);
        let rows: Vec<(u32, usize)> = graph.targets.iter().map(|&(_, slot)| (slot, 1)).collect();
        let source_slots = nodes.take_source_slots();
        let features = nodes.take_features();
        let nodes = Rc::new(nodes);
        let plan = plan(worker.timely, &nodes, source_slots, &rule, &rows, true, self.config.hub_threshold)?;
        worker.clock.lap("plan");
        let cx = Context {
            nodes: &nodes,
            plan: &plan,
            rule: &rule,
            model: &model,
            spec: &meta.spec,
            device: &self.device,
            batch_size: self.config.batch_size,
            progress: worker.progress,
            reporter: worker.reporter,
        };
        let first = Input::Features { values: features, normalize: self.config.normalize_features, learned: None };
        let product = layer(worker.timely, &cx, 1, first)?;
        debug_assert_eq!(product.len(), nodes.len() * dim, "one product row per node");
        if cx.reporter {
            cx.progress.report(0, Duration::ZERO, true);
        }
        worker.clock.lap("layer 1");
        let finite = finite(&nodes, (&product, dim), self.config);
        sampling::agree(worker.timely, finite)?;
        let written = self.write(worker, &cx, output, &graph.targets, (&product, dim))?;
        worker.clock.lap("write");
        let own = Own { dim, in_edges, remote_rows: plan.remote_rows as u64, hubs_split: plan.hub_count[1] };
        Ok(Written { own, ..written })
    }

    fn details(&self, all: &[WorkerStats<Own>]) -> Precomputed {
        Precomputed {
            product: self.config.model,
            dim: all.iter().map(|s| s.own.dim).max().unwrap_or(0),
            normalized: self.config.normalize_features,
            in_edges: all.iter().map(|s| s.own.in_edges).sum(),
            remote_rows: all.iter().map(|s| s.own.remote_rows).sum(),
            hubs_split: all.first().map_or(0, |s| s.own.hubs_split),
        }
    }
}

/// Every product row (`dim` wide) finite: each input value is, but a sum of values near f32's
/// largest is not (a node table's features must be finite, so such a table could not be read
/// back).
fn finite(nodes: &NodeStore, (product, dim): (&[f32], usize), config: &PrecomputeConfig) -> Result<(), Error> {
    let Some(at) = product.iter().position(|v| !v.is_finite()) else { return Ok(()) };
    let id = nodes.key(at / dim).map_or_else(|| nodes.ids[at / dim].to_string(), str::to_owned);
    Err(Error::BadData(format!(
        "{}, column \"features\": node {id}'s {} overflows float32 at value {} (its features and its \
         in-neighbors' sum past 3.4e38); scale the features down",
        config.nodes,
        config.model.formula(),
        at % dim
    )))
}

/// A one-layer model of `product`'s kind over every in-edge, `dim` wide in, the product's
/// width out.
fn identity_meta(product: Product, dim: usize) -> ModelMeta {
    let width = product.width(dim);
    let spec = ModelSpec {
        kind: product.model(),
        input_dim: dim,
        hidden: width,
        classes: width,
        layers: 1,
        heads: 1,
        output_heads: 1,
        activation: Activation::Relu,
        normalize_features: false,
        multi_label: false,
        edge_dim: 0,
        normalize_edge_features: false,
        edge_stats: None,
        relation_edge_stats: Vec::new(),
        task: Default::default(),
        decoder: None,
        types: None,
        bases: 0,
        wide_mlp: true,
        learned_embedding_dim: 0,
        precomputed: 0,
        seed: 0,
    };
    ModelMeta {
        format: 1,
        spec,
        hops: 1,
        fanouts: Vec::new(),
        sampler: Sampler::All,
        flatten_seed: 0,
        parameters: (1 + usize::from(product == Product::Sage)) * dim * width + width,
        relation_fanouts: Vec::new(),
        link_relation: None,
    }
}

/// The model of `spec` whose weights place the input in the product's columns (its bias is
/// zero): a GCN's weight is the identity; GraphSAGE's self weight is `[I | 0]` and its
/// neighbor weight `[0 | I]`, so that its output is `[x_v | mean of x_u]`.
fn identity_model(product: Product, spec: &ModelSpec, device: &Device) -> Gnn {
    let mut model = Gnn::new(spec, device);
    let (dim, width) = (spec.input_dim, spec.classes);
    let placed = |offset: usize| {
        let mut eye = vec![0f32; dim * width];
        (0..dim).for_each(|i| eye[i * width + offset + i] = 1.0);
        Param::from_tensor(Tensor::from_data(TensorData::new(eye, [dim, width]), device))
    };
    match (product, model.layers.first_mut()) {
        (Product::Gcn, Some(Layer::Gcn(gcn))) => gcn.weight = placed(0),
        (Product::Sage, Some(Layer::Sage(sage))) => {
            sage.self_weight = placed(0);
            sage.neighbor_weight = placed(dim);
        }
        _ => unreachable!("identity_meta gives the product's kind"),
    }
    model
}

impl Propagation<'_> {
    /// This worker's rows (its targets, every node it owns, by id) in batches.
    fn write(
        &self,
        worker: &mut Worker,
        cx: &Context,
        output: &PartsOf,
        targets: &[(i64, u32)],
        product: (&[f32], usize),
    ) -> Result<Written<Own>, Error> {
        let nodes = cx.nodes;
        let schema = node_schema(nodes, self.config.model, product.1);
        let limit = schemas::job::mb_bytes(self.config.part_size_mb);
        let mut writer =
            PartWriter::new(worker.io.clone(), output.clone(), schema.clone(), part_properties().build(), limit);
        let phase = cx.progress.last_phase();
        cx.progress.add_total(phase, targets.len() as u64);
        let rows = transform_rows(self.config.batch_size, nodes.dim);
        let result = targets
            .chunks(rows)
            .try_for_each(|chunk| {
                let batch = node_batch(&schema, nodes, chunk, product)
                    .map_err(|source| Error::Arrow { file: writer.current_name(), source })?;
                writer.write(&batch)?;
                cx.progress.advance(phase, chunk.len() as u64);
                if cx.reporter {
                    cx.progress.report(phase, Duration::from_secs(2), false);
                }
                Ok(())
            })
            .and_then(|()| writer.finish());
        if cx.reporter {
            cx.progress.report(phase, Duration::ZERO, true);
        }
        sampling::agree(worker.timely, result)?;
        Ok(Written {
            targets: targets.len() as u64,
            bytes: writer.bytes_written,
            parts: writer.parts_written,
            entries: writer.parts.clone(),
            extra_entries: Vec::new(),
            carried: Vec::new(),
            own: Own::default(),
        })
    }
}

/// The output's schema: the node table's columns, the features `dim` wide and said to be
/// `product`, the labels of the input's kind.
fn node_schema(nodes: &NodeStore, product: Product, dim: usize) -> SchemaRef {
    let item = || Arc::new(Field::new("item", DataType::Float32, false));
    let label = match nodes.label_kind {
        LabelKind::Class => DataType::Int64,
        // Nullable: pyarrow cannot read a null fixed-size list back from Parquet.
        LabelKind::Targets(_) => DataType::List(item()),
    };
    let fields = vec![
        Field::new("node_id", schemas::ids::data_type(nodes.id_kind()), false),
        Field::new("features", DataType::FixedSizeList(item(), dim as i32), false),
        Field::new("label", label, true),
        Field::new("split", DataType::Utf8, true),
    ];
    let metadata = HashMap::from([(schemas::nodes::PRECOMPUTED.to_owned(), product.value().to_owned())]);
    Arc::new(Schema::new(fields).with_metadata(metadata))
}

/// The rows of `chunk` (id, slot): ids as the input names them, `product`'s rows (`dim` wide)
/// by slot, and the input's labels and splits.
fn node_batch(
    schema: &SchemaRef,
    nodes: &NodeStore,
    chunk: &[(i64, u32)],
    (product, dim): (&[f32], usize),
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let slots = || chunk.iter().map(|&(_, slot)| slot as usize);
    let ids: ArrayRef = match nodes.strings {
        Some(_) => Arc::new(slots().map(|s| nodes.key(s)).collect::<StringArray>()),
        None => Arc::new(Int64Array::from_iter_values(slots().map(|s| nodes.ids[s]))),
    };
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let mut features =
        FixedSizeListBuilder::with_capacity(Float32Builder::new(), dim as i32, chunk.len()).with_field(item.clone());
    for s in slots() {
        features.values().append_slice(&product[s * dim..(s + 1) * dim]);
        features.append(true);
    }
    let label: ArrayRef = match nodes.label_kind {
        LabelKind::Class => {
            let mut b = Int64Builder::with_capacity(chunk.len());
            slots().for_each(|s| b.append_option(nodes.labels[s].as_ref().and_then(Label::class)));
            Arc::new(b.finish())
        }
        LabelKind::Targets(_) => {
            let mut b = ListBuilder::new(Float32Builder::new()).with_field(item);
            for s in slots() {
                match &nodes.labels[s] {
                    Some(Label::Targets(t)) => {
                        b.values().append_slice(t);
                        b.append(true);
                    }
                    _ => b.append(false),
                }
            }
            Arc::new(b.finish())
        }
    };
    let mut split = StringBuilder::new();
    slots().for_each(|s| split.append_option(nodes.splits[s].map(|x| x.name())));
    RecordBatch::try_new(schema.clone(), vec![ids, Arc::new(features.finish()), label, Arc::new(split.finish())])
}
