//! A mini-batch of records as one block-diagonal graph.
//!
//! Nodes of all records are ordered by (hop, record, position in record). A k-layer GNN's layer
//! `l` only needs the nodes within `k - l` hops of a root, which with this order are a prefix of
//! the rows: pruning is "layer l computes rows `0..prefix(k - l)`". The roots are rows
//! `0..records`, in record order.
//!
//! Records repeat nodes: Cora's 1,500 evaluation records hold 55k node rows of 2,708 nodes.
//! The batch can keep each distinct input row once ([`BatchSpec::distinct_inputs`]): rows of
//! one node id with equal features share a feature row, and layer 1 reads the distinct rows (its
//! `src` and [`LayerEdges::own`] index them). Input dropout keys on the node id, so a kept row
//! is dropped as each of its copies would be. Every layer starts with a linear map of its input
//! rows, so layer 1 then multiplies the distinct rows only, and an output row reads its own
//! input through `own`. The result is the same as over the repeated rows; only layer 1's input
//! and its indices change.
//!
//! Edge features ([`BatchSpec::edge_dim`] > 0) travel with each layer's edges, in the layer's
//! edge order, standardized when the spec carries the record set's statistics (see
//! [`crate::features::push_edge_row`], which GraphInfer calls too).

use std::borrow::Borrow;
use std::sync::Arc;

use schemas::edge_stats::EdgeStats;
use schemas::layers::Layers;
use schemas::mix::IdMap;
use schemas::model::ModelSpec;
use schemas::typed::GraphTypes;
use schemas::{Label, Record, Split};

use crate::hetero::TypeGroups;
use crate::kernel::{EdgePlan, PlanRef};

/// The edges one layer aggregates over, by batch row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerEdges {
    /// Rows this layer reads (its input is `rows_in x width`).
    pub rows_in: usize,
    /// Rows this layer computes.
    pub rows_out: usize,
    pub src: Vec<i64>,
    pub dst: Vec<i64>,
    /// GCN's symmetric normalization of each edge: 1 / sqrt((deg(dst) + 1)(deg(src) + 1)).
    pub gcn_coef: Vec<f32>,
    /// GCN's self-loop weight of each output row: 1 / (deg + 1).
    pub gcn_self: Vec<f32>,
    /// The mean aggregator's weight of each edge: 1 / (number of this layer's in-edges of dst).
    pub mean_coef: Vec<f32>,
    /// (root, index) of each edge within its record, for dropout on attention: the same edge
    /// gets the same mask however records are batched.
    pub edge_keys: Vec<(i64, u32)>,
    /// Width of each edge's features (0: the layer reads none).
    pub edge_dim: usize,
    /// Row-major `edges x edge_dim`, in edge order, as the model reads them (standardized when
    /// the model standardizes); empty when `edge_dim` is 0.
    pub features: Vec<f32>,
    /// The aggregation kernel's plans (see [`LayerEdges::plans`]), when the batch was built for
    /// it: building them on the loader thread keeps them off the compute thread.
    pub plans: Option<LayerPlans>,
    /// Threads the kernel runs these edges on (0: one per core).
    pub threads: usize,
    /// Build [`LayerPlans::attention`] (the batch is for an attention model).
    pub attention: bool,
    /// The input row of each output row, when that is not the row of the same index: layer 1
    /// of a batch that keeps distinct input rows.
    pub own: Option<Vec<i64>>,
    /// Typed records: the layer's edges split by relation, and its output rows by type.
    pub typed: Option<Box<LayerRelations>>,
}

/// A typed layer's edges by relation, and its output rows by node type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerRelations {
    /// Per relation (by number), the layer's edges of that relation over the same rows, with
    /// their mean coefficients (over the relation's in-edges of each row) and plans; their GCN
    /// coefficients are not meaningful (typed models have no GCN layer).
    pub relations: Vec<LayerEdges>,
    /// The layer's output rows by node type.
    pub out_types: TypeGroups,
}

impl LayerRelations {
    /// Splits `e`'s edges (relation `edge_relations[j]` each) over `types`' relations, with
    /// their features (`features`: each edge's at its relation's `edge_dim` in `types`, one
    /// after another); `out_types` are the types of `e`'s output rows.
    pub fn split(
        e: &LayerEdges,
        edge_relations: &[u8],
        types: &GraphTypes,
        features: &[f32],
        out_types: &[u8],
    ) -> Self {
        let mut ends = vec![(Vec::new(), Vec::new(), Vec::new()); types.relations.len()];
        let mut at = 0;
        for ((&s, &d), &r) in e.src.iter().zip(&e.dst).zip(edge_relations) {
            let (src, dst, values) = &mut ends[usize::from(r)];
            src.push(s);
            dst.push(d);
            let width = types.relations[usize::from(r)].edge_dim;
            values.extend_from_slice(&features[at..at + width]);
            at += width;
        }
        // Only the GCN coefficients read degrees: of input rows (sources) and output rows.
        let degree = vec![0.0; e.rows_in.max(e.rows_out)];
        let relations = ends
            .into_iter()
            .zip(&types.relations)
            .map(|((src, dst, features), relation)| LayerEdges {
                threads: e.threads,
                own: e.own.clone(),
                edge_dim: relation.edge_dim,
                features,
                ..LayerEdges::new(e.rows_in, e.rows_out, src, dst, &degree)
            })
            .collect();
        LayerRelations { relations, out_types: TypeGroups::new(out_types, types.node_types.len()) }
    }
}

/// A layer's plans for the edge-partitioned kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerPlans {
    /// Node rows into node rows: `out[dst] += coef * x[src]`.
    pub edges: PlanRef,
    /// The same edges followed by one self-loop per output row (GAT's attention runs over those).
    pub looped: PlanRef,
    /// Each output row's own input row, when that is not the row of the same index
    /// ([`LayerEdges::own`]): a plan whose edges are the output rows (`out[r] = x[own[r]]`).
    pub own: Option<PlanRef>,
    /// Attention layers: each looped edge's source and destination rows, as plans whose
    /// edges are the looped edges ([`AttentionPlans`]).
    pub attention: Option<AttentionPlans>,
    /// Edge rows into node rows, when the layer has edge features: source row `e` is edge `e`
    /// itself, so `out[dst[e]] += coef[e] * m[e]` sums one row per edge (edge features, or
    /// per-edge messages) into its destination, with the kernel's own backward.
    pub edge_rows: Option<PlanRef>,
}

/// Plans that copy rows to the looped edges (`out[e] = x[src[e]]`, `out[e] = x[dst[e]]`): as
/// plans, their backward passes (sums over each row's edges) run on the kernel, not on a
/// scatter. The destination plan transposed sums edge rows into their destinations.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionPlans {
    pub src: PlanRef,
    pub dst: PlanRef,
}

impl LayerEdges {
    /// A layer's edges from plain lists, with every model's coefficients: `src[e]` indexes the
    /// `rows_in` input rows and `dst[e]` the `rows_out` output rows (output row `r` is input
    /// row `r`), and `degree[row]` is each input row's in-degree as this layer counts it (the
    /// whole graph's, capped by the layer's fanout; see `schemas::layers::Layers::degree`).
    /// GCN's symmetric normalization uses those degrees; the mean uses the edges present.
    pub fn new(rows_in: usize, rows_out: usize, src: Vec<i64>, dst: Vec<i64>, degree: &[f32]) -> LayerEdges {
        let mut count = vec![0u32; rows_out];
        for &d in &dst {
            count[d as usize] += 1;
        }
        let norm = |row: i64| degree[row as usize] + 1.0;
        LayerEdges {
            rows_in,
            rows_out,
            gcn_coef: src.iter().zip(&dst).map(|(&s, &d)| 1.0 / (norm(d) * norm(s)).sqrt()).collect(),
            gcn_self: (0..rows_out as i64).map(|row| 1.0 / norm(row)).collect(),
            mean_coef: dst.iter().map(|&d| 1.0 / count[d as usize] as f32).collect(),
            src,
            dst,
            ..LayerEdges::default()
        }
    }

    /// The kernel's plans (see [`LayerPlans`]); the edge-row plan only with edge features.
    pub fn plans(&self) -> LayerPlans {
        if let Some(plans) = &self.plans {
            return plans.clone();
        }
        let src: Vec<u32> = self.src.iter().map(|&s| s as u32).collect();
        let dst: Vec<u32> = self.dst.iter().map(|&d| d as u32).collect();
        let looped = |ends: &[u32], own: &[u32]| ends.iter().chain(own).copied().collect::<Vec<_>>();
        let out: Vec<u32> = (0..self.rows_out as u32).collect();
        let own: Vec<u32> = self.own_rows().iter().map(|&r| r as u32).collect();
        let plan = |rows_in, src: &[u32], dst: &[u32]| {
            Arc::new(EdgePlan::new(rows_in, self.rows_out, src, dst).with_threads(self.threads))
        };
        let edge_rows = (self.edge_dim > 0).then(|| {
            let edges: Vec<u32> = (0..dst.len() as u32).collect();
            plan(dst.len(), &edges, &dst)
        });
        // A plan whose edges are rows `0..n`, each reading `rows[i]` of `rows_in`.
        let rows_of = |rows_in: usize, rows: &[u32]| {
            let edges: Vec<u32> = (0..rows.len() as u32).collect();
            Arc::new(EdgePlan::new(rows_in, rows.len(), rows, &edges).with_threads(self.threads))
        };
        let (looped_src, looped_dst) = (looped(&src, &own), looped(&dst, &out));
        let attention = self.attention.then(|| AttentionPlans {
            src: rows_of(self.rows_in, &looped_src),
            dst: rows_of(self.rows_out, &looped_dst),
        });
        LayerPlans {
            edges: plan(self.rows_in, &src, &dst),
            looped: plan(self.rows_in, &looped_src, &looped_dst),
            own: self.own.is_some().then(|| rows_of(self.rows_in, &own)),
            attention,
            edge_rows,
        }
    }

    /// Edge `j`'s features (empty when the layer reads none).
    pub fn edge_row(&self, j: usize) -> &[f32] {
        &self.features[j * self.edge_dim..(j + 1) * self.edge_dim]
    }

    /// The input row of each output row (`0..rows_out` unless [`LayerEdges::own`] says other).
    pub fn own_rows(&self) -> Vec<i64> {
        self.own.clone().unwrap_or_else(|| (0..self.rows_out as i64).collect())
    }

    /// Makes the layer read `distinct` rows instead of the batch's rows: `input_row[r]` is the
    /// distinct row batch row `r` reads. Coefficients stay: they belong to the edges.
    fn read_distinct(&mut self, input_row: &[u32], distinct: usize) {
        for s in &mut self.src {
            *s = i64::from(input_row[*s as usize]);
        }
        self.own = Some(input_row[..self.rows_out].iter().map(|&r| i64::from(r)).collect());
        self.rows_in = distinct;
    }
}

/// A block-diagonal batch of records.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub dim: usize,
    /// Row-major `rows x dim`, rows in (hop, record, position) order; with
    /// [`BatchSpec::distinct_inputs`], the distinct rows only (`layers[0].rows_in` of them).
    pub features: Vec<f32>,
    /// (root, position in record) of each row, for the dropout masks of layers after the first.
    pub row_keys: Vec<(i64, u32)>,
    /// The node id of each row of `features`, for the input dropout mask (one per node).
    pub input_ids: Vec<i64>,
    /// Records of a graph keyed by strings: each input row's original string, aligned with
    /// `input_ids` (a learned row is saved under it); empty for integer ids.
    pub input_keys: Vec<String>,
    /// Layer 1 first.
    pub layers: Vec<LayerEdges>,
    pub roots: Vec<i64>,
    pub labels: Vec<Option<Label>>,
    pub splits: Vec<Option<Split>>,
    /// Typed records: the input rows by node type, with their features (`features` is then
    /// empty and `dim` 0).
    pub typed: Option<TypedInputs>,
    /// Each batch row's node id and whole-graph in-degree, in row order (what control variates
    /// key their histories and weights on: `crate::control_variate`).
    pub row_ids: Vec<i64>,
    pub row_degrees: Vec<i64>,
    /// Records with `root_neighbors`: each root's every in-neighbor (empty lists otherwise).
    pub root_neighbors: Vec<Vec<i64>>,
}

/// A typed batch's input rows: grouped by node type, each type's rows with its own width.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedInputs {
    pub groups: TypeGroups,
    /// Per node type, its rows' features, row-major, the type's width each.
    pub features: Vec<Vec<f32>>,
    pub widths: Vec<usize>,
    /// The node type of each input row (its input dropout mask keys on it with the id).
    pub types: Vec<u8>,
    /// Per node type, whether its nodes read a learned row (the model's `NodeType::learned`).
    pub learned: Vec<bool>,
}

/// How batches are built.
#[derive(Debug, Clone)]
pub struct BatchSpec {
    /// The records' layer rule: k, and the fanout that caps each layer's degrees.
    pub layers: Layers,
    /// Layer `l` computes only rows within `k - l` hops of a root.
    pub prune: bool,
    /// Divide each feature row by its sum, clamped below at 1 (see [`crate::features`]).
    pub normalize_features: bool,
    /// Build the aggregation kernel's plans with the batch.
    pub kernel_plans: bool,
    /// Threads the kernel runs each layer on (0: one per core).
    pub kernel_threads: usize,
    /// The kernel's plans include the attention plans (GAT's; see [`AttentionPlans`]).
    pub attention: bool,
    /// Keep each distinct input row once (see the module doc).
    pub distinct_inputs: bool,
    /// Width of the edge features the layers read: every record with edges must have this many
    /// per edge. 0: the records' edge features are left out.
    pub edge_dim: usize,
    /// Standardize each edge row with these statistics (the model's, see
    /// [`crate::features::edge_standardization`]); `None`: raw.
    pub edge_stats: Option<EdgeStats>,
    /// Typed records: standardize each relation's edge rows with its statistics (a typed
    /// model's `relation_edge_stats`); empty: raw. The widths read are `types`' relations'.
    pub relation_edge_stats: Vec<Option<EdgeStats>>,
    /// The types of typed records (a typed model's); `None` for homogeneous records.
    pub types: Option<Arc<GraphTypes>>,
    /// The last layer reads a fresh draw of each root's in-edges in its record (see
    /// [`Redraw`]); `None`: every one it marks.
    pub redraw: Option<Redraw>,
}

/// Of each root's in-edges that a record's last layer marks, `fanout` drawn by `key` (without
/// replacement, uniformly: the smallest hashes of `(key, root, source)`): a trainer that keys it
/// on the epoch draws a new sample each epoch from records that hold more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redraw {
    pub fanout: usize,
    pub key: u64,
}

impl BatchSpec {
    /// The plainest batch of `layers` (the records' rule): pruned, raw features, no kernel
    /// plans, one input row per (record, node). Other specs set what differs from it.
    pub fn plain(layers: Layers) -> Self {
        BatchSpec {
            layers,
            prune: true,
            normalize_features: false,
            kernel_plans: false,
            kernel_threads: 0,
            attention: false,
            distinct_inputs: false,
            edge_dim: 0,
            edge_stats: None,
            relation_edge_stats: Vec::new(),
            types: None,
            redraw: None,
        }
    }

    /// The same batches as the model with `spec` reads them: its feature normalization, its
    /// edge features (their width and standardization), and its dense first layer over
    /// precomputed features (`spec.precomputed`: added to the records' rule once).
    pub fn reading(self, spec: &ModelSpec) -> Self {
        let dense_first = spec.precomputed > 0 && !self.layers.has_dense_first();
        BatchSpec {
            layers: if dense_first { self.layers.dense_first() } else { self.layers },
            attention: spec.kind == schemas::model::ModelKind::Gat,
            normalize_features: spec.normalize_features,
            edge_dim: spec.edge_dim,
            edge_stats: crate::features::edge_standardization(spec).cloned(),
            relation_edge_stats: match spec.normalize_edge_features {
                true => spec.relation_edge_stats.clone(),
                false => Vec::new(),
            },
            types: spec.types.clone().map(Arc::new),
            ..self
        }
    }
}

impl Batch {
    pub fn rows(&self) -> usize {
        self.row_keys.len()
    }

    /// The input rows that read a learned row, in the order the model takes their rows
    /// (`BatchTensors::learned`): every input row of a homogeneous batch; a typed batch's rows
    /// of the types with learned rows, type by type, each type's in row order.
    pub fn learned_rows(&self) -> Vec<usize> {
        match &self.typed {
            None => (0..self.input_ids.len()).collect(),
            Some(typed) => {
                let learned = typed.groups.rows.iter().zip(&typed.learned).filter(|(_, l)| **l);
                learned.flat_map(|(rows, _)| rows.iter().map(|&r| r as usize)).collect()
            }
        }
    }

    /// The keys of the [`Batch::learned_rows`]' nodes, as the learned table keys them: the
    /// node id, or in a typed batch its typed key (`schemas::typed::pack`), with their
    /// original strings where the graph is keyed by strings (else empty).
    pub fn learned_keys(&self) -> (Vec<i64>, Vec<String>) {
        let rows = self.learned_rows();
        let key = |r: usize| match &self.typed {
            // Records hold ids in the typed range (`GraphTypes::check_record`).
            Some(typed) => schemas::typed::pack(typed.types[r], self.input_ids[r]).unwrap_or(i64::MIN),
            None => self.input_ids[r],
        };
        let ids = rows.iter().map(|&r| key(r)).collect();
        let keys = match self.input_keys.is_empty() {
            true => Vec::new(),
            false => rows.iter().map(|&r| self.input_keys[r].clone()).collect(),
        };
        (ids, keys)
    }

    /// The rows of [`Batch::features`]: the batch's rows, or its distinct input rows.
    pub fn input_rows(&self) -> usize {
        // Layer 1 reads every row (its input is never pruned).
        self.layers.first().map_or(self.rows(), |e| e.rows_in)
    }

    /// Batch rows that are copies of an earlier row: the same node (id, and type in a typed
    /// batch) with the same features.
    fn distinct_rows(records: &[&Record], order: &[(u8, u32, u32)]) -> (Vec<u32>, Vec<usize>) {
        let mut first: IdMap<(u8, i64), u32> = IdMap::with_capacity_and_hasher(order.len(), Default::default());
        let mut input_row = Vec::with_capacity(order.len());
        let mut kept = Vec::new(); // the batch row each distinct row copies
        // Compared bit for bit, as integers: a memcmp, where float equality goes value by value.
        let features = |row: usize| -> &[u32] {
            let (_, r, i) = order[row];
            bytemuck::cast_slice(records[r as usize].node_features(i as usize))
        };
        for (row, &(_, r, i)) in order.iter().enumerate() {
            let rec = records[r as usize];
            let node_type = rec.node_types.get(i as usize).copied().unwrap_or(0);
            let next = kept.len() as u32;
            let d = *first.entry((node_type, rec.node_ids[i as usize])).or_insert(next);
            // Records of one flatten run hold equal copies; a hand-made set might not.
            if d != next && features(kept[d as usize]) == features(row) {
                input_row.push(d);
            } else {
                input_row.push(next);
                kept.push(row);
            }
        }
        (input_row, kept)
    }

    /// The batch of `records` (records, or references to them: a link batch builds from its
    /// endpoints' records in place).
    pub fn build<R: Borrow<Record>>(records: &[R], spec: &BatchSpec) -> Batch {
        let records: Vec<&Record> = records.iter().map(Borrow::borrow).collect();
        let dim = match spec.types {
            Some(_) => 0,
            None => records.iter().find(|r| r.num_nodes() > 0).map_or(0, |r| r.dim()),
        };
        let rows = BatchRows::new(&records, spec.layers.hops());
        // `input_row`: the feature row each batch row reads (None: its own); `kept`: the batch
        // row each feature row copies.
        let (input_row, kept) = match spec.distinct_inputs {
            true => {
                let (input_row, kept) = Self::distinct_rows(&records, &rows.order);
                (Some(input_row), kept)
            }
            false => (None, (0..rows.order.len()).collect()),
        };
        let inputs = Inputs::gather(&records, &rows.order, &kept, spec, dim);
        // A typed batch's output rows by type, per layer (a prefix of the batch rows).
        let row_types: Vec<u8> = match &inputs.typed {
            Some(_) => rows.order.iter().map(|&(_, r, i)| records[r as usize].node_types[i as usize]).collect(),
            None => Vec::new(),
        };
        let cx = LayerContext {
            records: &records,
            spec,
            rows: &rows,
            input_row: input_row.as_deref(),
            distinct: kept.len(),
            row_types: &row_types,
        };
        let layers = (1..=spec.layers.hops()).map(|l| cx.layer(l)).collect();
        Batch {
            dim,
            features: inputs.features,
            row_keys: rows.row_keys,
            input_ids: inputs.ids,
            input_keys: inputs.keys,
            layers,
            roots: records.iter().map(|r| r.root).collect(),
            labels: records.iter().map(|r| r.label.clone()).collect(),
            splits: records.iter().map(|r| r.split).collect(),
            typed: inputs.typed,
            row_ids: rows.order.iter().map(|&(_, r, i)| records[r as usize].node_ids[i as usize]).collect(),
            row_degrees: rows.in_degree,
            root_neighbors: records.iter().map(|r| r.root_neighbors.clone()).collect(),
        }
    }
}

/// A batch's rows: every (record, position), sorted by (hop, record, position), so that the
/// rows within `h` hops of their roots are a prefix of them.
struct BatchRows {
    /// Each row's (hop, record, position).
    order: Vec<(u8, u32, u32)>,
    /// Each record's rows, by position.
    row_of: Vec<Vec<u32>>,
    /// `prefix[h]`: the rows with hop < h (`k + 2` entries).
    prefix: Vec<usize>,
    /// Each row's (root, position).
    row_keys: Vec<(i64, u32)>,
    /// Each row's in-degree in its record.
    in_degree: Vec<i64>,
    /// Hops `k` of the records.
    k: usize,
}

impl BatchRows {
    /// The rows of `records`, `k` hops each.
    fn new(records: &[&Record], k: usize) -> Self {
        let mut order: Vec<(u8, u32, u32)> = records
            .iter()
            .enumerate()
            .flat_map(|(r, rec)| rec.hops.iter().enumerate().map(move |(i, &h)| (h, r as u32, i as u32)))
            .collect();
        order.sort_unstable();
        let mut row_of: Vec<Vec<u32>> = records.iter().map(|r| vec![0; r.num_nodes()]).collect();
        let mut prefix = vec![0usize; k + 2];
        let mut row_keys = Vec::with_capacity(order.len());
        let mut in_degree = Vec::with_capacity(order.len());
        for (row, &(hop, r, i)) in order.iter().enumerate() {
            let rec = &records[r as usize];
            row_of[r as usize][i as usize] = row as u32;
            row_keys.push((rec.root, i));
            in_degree.push(rec.in_degrees[i as usize]);
            for p in prefix.iter_mut().skip(usize::from(hop) + 1) {
                *p = row + 1;
            }
        }
        BatchRows { order, row_of, prefix, row_keys, in_degree, k }
    }

    /// The rows within `hops` of their roots: a prefix when the spec prunes, else all.
    fn within(&self, prune: bool, hops: usize) -> usize {
        if prune { self.prefix[(hops + 1).min(self.k + 1)] } else { self.order.len() }
    }
}

/// A batch's input rows (one per `kept` batch row): their features (homogeneous, normalized
/// as the spec asks) or typed inputs, their node ids and, keyed by strings, their keys.
struct Inputs {
    features: Vec<f32>,
    typed: Option<TypedInputs>,
    ids: Vec<i64>,
    keys: Vec<String>,
}

impl Inputs {
    fn gather(records: &[&Record], order: &[(u8, u32, u32)], kept: &[usize], spec: &BatchSpec, dim: usize) -> Self {
        let mut features = Vec::with_capacity(kept.len() * dim);
        let mut typed = spec.types.as_deref().map(TypedInputs::empty);
        let mut ids = Vec::with_capacity(kept.len());
        let mut keys = Vec::new();
        for &row in kept {
            let (_, r, i) = order[row];
            let rec = records[r as usize];
            ids.push(rec.node_ids[i as usize]);
            if let Some(key) = rec.node_keys.get(i as usize) {
                keys.push(key.clone());
            }
            let x = rec.node_features(i as usize);
            match &mut typed {
                Some(typed) => typed.push(rec.node_types[i as usize], x, spec.normalize_features),
                None => crate::features::push_row(x, spec.normalize_features, &mut features),
            }
        }
        Inputs { features, typed, ids, keys }
    }
}

/// What each layer's edges are built from: the records, the spec, the batch's rows, the
/// feature row each batch row reads (`None`: its own) and how many there are, and a typed
/// batch's row types.
struct LayerContext<'a> {
    records: &'a [&'a Record],
    spec: &'a BatchSpec,
    rows: &'a BatchRows,
    input_row: Option<&'a [u32]>,
    distinct: usize,
    row_types: &'a [u8],
}

/// One layer's edges as collected from the records: endpoints as batch rows, each edge's
/// (root, position), and its features and relation where the batch reads them.
#[derive(Default)]
struct LayerLists {
    src: Vec<i64>,
    dst: Vec<i64>,
    edge_keys: Vec<(i64, u32)>,
    features: Vec<f32>,
    relations: Vec<u8>,
}

impl LayerContext<'_> {
    /// Layer `l`'s edges (1-based): rows in and out (pruned to the hops the layer still needs
    /// when the spec prunes), degrees, features, and a typed batch's split by relation; kernel
    /// plans when the spec asks.
    fn layer(&self, l: usize) -> LayerEdges {
        let (spec, k) = (self.spec, self.rows.k);
        let (rows_in, rows_out) = (self.rows.within(spec.prune, k - l + 1), self.rows.within(spec.prune, k - l));
        let mut lists = self.lists(l);
        let degree: Vec<f32> =
            self.rows.in_degree[..rows_in].iter().map(|&d| spec.layers.degree(l, d.max(0) as u64) as f32).collect();
        let mut e = LayerEdges::new(rows_in, rows_out, lists.src, lists.dst, &degree);
        e.edge_keys = lists.edge_keys;
        let relation_features = match spec.types {
            Some(_) => std::mem::take(&mut lists.features),
            None => Vec::new(),
        };
        (e.edge_dim, e.features) = (spec.edge_dim, lists.features);
        (e.threads, e.attention) = (spec.kernel_threads, spec.attention);
        if let (1, Some(input_row)) = (l, self.input_row) {
            e.read_distinct(input_row, self.distinct);
        }
        if let Some(types) = &spec.types {
            let row_types = &self.row_types[..rows_out];
            let mut split = LayerRelations::split(&e, &lists.relations, types, &relation_features, row_types);
            if spec.kernel_plans {
                split.relations.iter_mut().for_each(|r| r.plans = Some(r.plans()));
            }
            e.typed = Some(Box::new(split));
        }
        if spec.kernel_plans {
            e.plans = Some(e.plans());
        }
        e
    }

    /// The records' edges of batch layer `l` (those whose `edge_layers` bit `l - 1` is set, or
    /// `l - 2` after a dense first layer, which reads none: the records have no hop for it,
    /// `Layers::has_dense_first`), record by record. Panics on a record whose edge features
    /// are not the spec's width.
    fn lists(&self, l: usize) -> LayerLists {
        let spec = self.spec;
        let mut lists = LayerLists::default();
        let dense = usize::from(spec.layers.has_dense_first());
        let Some(bit) = (l - 1).checked_sub(dense) else { return lists };
        for (r, rec) in self.records.iter().enumerate() {
            let widths_match = spec.edge_dim == 0 || rec.num_edges() == 0 || rec.edge_dim() == spec.edge_dim;
            assert!(
                widths_match,
                "root {}: edge features of width {}, the batch reads {}",
                rec.root,
                rec.edge_dim(),
                spec.edge_dim
            );
            let row_of = &self.rows.row_of[r];
            let drawn = spec.redraw.filter(|_| l == spec.layers.hops()).map(|d| drawn(rec, bit, d));
            for j in 0..rec.edge_src.len() {
                if rec.edge_layers[j] & (1 << bit) == 0 || drawn.as_ref().is_some_and(|keep| !keep[j]) {
                    continue;
                }
                lists.src.push(i64::from(row_of[rec.edge_src[j] as usize]));
                lists.dst.push(i64::from(row_of[rec.edge_dst[j] as usize]));
                lists.edge_keys.push((rec.root, j as u32));
                if let Some(&relation) = rec.edge_relations.get(j) {
                    lists.relations.push(relation);
                    push_relation_edge_row(spec, rec, j, relation, &mut lists.features);
                }
                if spec.edge_dim > 0 {
                    let row = rec.edge_features_of(j);
                    crate::features::push_edge_row(row, spec.edge_stats.as_ref(), &mut lists.features);
                }
            }
        }
        lists
    }
}

/// Which of `rec`'s edges the last layer (record layer bit `bit`) keeps under `redraw`: of the
/// root's marked in-edges, the `fanout` with the smallest hashes; no other edge.
fn drawn(rec: &Record, bit: usize, redraw: Redraw) -> Vec<bool> {
    let mut marked: Vec<(u64, usize)> = (0..rec.num_edges())
        .filter(|&j| rec.edge_layers[j] & (1 << bit) != 0 && rec.edge_dst[j] == 0)
        .map(|j| {
            let src = rec.node_ids[rec.edge_src[j] as usize];
            (crate::rng::Stream::new(&[redraw.key, rec.root as u64, src as u64, j as u64]).next_u64(), j)
        })
        .collect();
    marked.sort_unstable();
    let mut keep = vec![false; rec.num_edges()];
    marked.iter().take(redraw.fanout).for_each(|&(_, j)| keep[j] = true);
    keep
}

/// Appends edge `j` of typed record `rec` (of relation `r`) to `out` as the model reads it:
/// its features when the model reads the relation's, standardized with its statistics when
/// the spec has them; nothing otherwise.
fn push_relation_edge_row(spec: &BatchSpec, rec: &Record, j: usize, r: u8, out: &mut Vec<f32>) {
    let Some(types) = &spec.types else { return };
    let width = types.relations[usize::from(r)].edge_dim;
    if width == 0 {
        return;
    }
    let row = rec.edge_features_of(j);
    assert_eq!(row.len(), width, "root {}: edge {j} has {} features, the batch reads {width}", rec.root, row.len());
    let stats = spec.relation_edge_stats.get(usize::from(r)).and_then(Option::as_ref);
    crate::features::push_edge_row(row, stats, out);
}

impl TypedInputs {
    fn empty(types: &GraphTypes) -> TypedInputs {
        let count = types.node_types.len();
        TypedInputs {
            groups: TypeGroups { rows: vec![Vec::new(); count] },
            features: vec![Vec::new(); count],
            widths: types.node_types.iter().map(|t| t.width).collect(),
            types: Vec::new(),
            learned: types.node_types.iter().map(|t| t.learned > 0).collect(),
        }
    }

    /// Appends the next input row: a node of type `t` with features `x`.
    fn push(&mut self, t: u8, x: &[f32], normalize: bool) {
        let row = self.types.len() as i64;
        self.groups.rows[usize::from(t)].push(row);
        crate::features::push_row(x, normalize, &mut self.features[usize::from(t)]);
        self.types.push(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two records of a 2-hop graph: 0 <- 1 <- 2 and 5 <- 6.
    pub fn two_records() -> Vec<Record> {
        vec![
            Record {
                root: 0,
                node_ids: vec![0, 1, 2],
                label: Some(Label::Class(1)),
                split: Some(Split::Train),
                hops: vec![0, 1, 2],
                in_degrees: vec![1, 1, 0],
                features: vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0],
                edge_src: vec![1, 2],
                edge_dst: vec![0, 1],
                edge_weights: vec![1.0, 1.0],
                edge_layers: vec![0b11, 0b01],
                edge_features: Vec::new(),
                ..Record::default()
            },
            Record {
                root: 5,
                node_ids: vec![5, 6],
                label: Some(Label::Class(0)),
                split: Some(Split::Train),
                hops: vec![0, 1],
                in_degrees: vec![1, 0],
                features: vec![2.0, 2.0, 0.0, 3.0],
                edge_src: vec![1],
                edge_dst: vec![0],
                edge_weights: vec![1.0],
                edge_layers: vec![0b11],
                edge_features: Vec::new(),
                ..Record::default()
            },
        ]
    }

    #[test]
    fn rows_follow_hops_and_layers_prune_to_prefixes() {
        let spec = BatchSpec::plain(Layers::every(2));
        let b = Batch::build(&two_records(), &spec);
        // Rows: roots (0, 5), hop 1 (node 1 of each), hop 2 (node 2 of record 0).
        assert_eq!(b.row_keys, vec![(0, 0), (5, 0), (0, 1), (5, 1), (0, 2)]);
        assert_eq!(&b.features[..4], &[1.0, 0.0, 2.0, 2.0]);
        // Layer 1 computes hop <= 1 (4 rows) from all 5; layer 2 the 2 roots from 4.
        assert_eq!((b.layers[0].rows_in, b.layers[0].rows_out), (5, 4));
        assert_eq!((b.layers[1].rows_in, b.layers[1].rows_out), (4, 2));
        // Layer 1: 2->1 and 1->0 in record 0, 1->0 in record 1; layer 2: the two root edges.
        assert_eq!((b.layers[0].src.clone(), b.layers[0].dst.clone()), (vec![2, 4, 3], vec![0, 2, 1]));
        assert_eq!((b.layers[1].src.clone(), b.layers[1].dst.clone()), (vec![2, 3], vec![0, 1]));
        // GCN: root 0 has in-degree 1, node 1 in-degree 1: 1/sqrt(2*2).
        assert_eq!(b.layers[1].gcn_coef, vec![0.5, 1.0 / 2f32.sqrt()]);
        assert_eq!(b.layers[1].gcn_self, vec![0.5, 0.5]);

        let unpruned = Batch::build(&two_records(), &BatchSpec { prune: false, ..spec });
        assert!(unpruned.layers.iter().all(|l| (l.rows_in, l.rows_out) == (5, 5)));
    }

    #[test]
    fn a_dense_first_layer_reads_no_edge_and_the_records_layers_follow_it() {
        let plain = Batch::build(&two_records(), &BatchSpec::plain(Layers::every(2)));
        let spec = BatchSpec::plain(Layers::every(2).dense_first());
        let dense = Batch::build(&two_records(), &spec);
        assert_eq!(
            (dense.layers.len(), dense.row_keys.clone(), dense.features.clone()),
            (3, plain.row_keys, plain.features)
        );
        // Layer 1: every row from itself, weighing 1 (GCN's is then x W + b).
        let first = &dense.layers[0];
        assert_eq!((first.rows_in, first.rows_out, first.src.len()), (5, 5, 0));
        assert_eq!(first.gcn_self, vec![1.0; 5]);
        // Then the records' layers, as a plain batch has them.
        for (d, p) in dense.layers[1..].iter().zip(&plain.layers) {
            assert_eq!((d.rows_in, d.rows_out, &d.src, &d.dst), (p.rows_in, p.rows_out, &p.src, &p.dst));
            assert_eq!((&d.gcn_coef, &d.gcn_self), (&p.gcn_coef, &p.gcn_self));
        }
        // A model over precomputed features reads it so from the records' rule.
        let spec: ModelSpec = serde_json::from_str(
            r#"{"kind": "gcn", "input_dim": 2, "hidden": 4, "classes": 2, "layers": 3, "heads": 1,
                "output_heads": 1, "activation": "relu", "normalize_features": false, "precomputed": 1, "seed": 0}"#,
        )
        .unwrap();
        let read = BatchSpec::plain(Layers::every(2)).reading(&spec);
        assert_eq!((read.layers.hops(), read.layers.has_dense_first()), (3, true));
        // Read twice, it has still one.
        assert_eq!(read.reading(&spec).layers.hops(), 3);
    }

    #[test]
    fn distinct_inputs_keep_each_node_once_and_remap_layer_one() {
        // Record 5 also holds node 1 (same features as in record 0) and node 2 with other
        // features than record 0's copy: node 1 is kept once, node 2 twice.
        let mut records = two_records();
        records[1].node_ids = vec![5, 1, 2];
        records[1].hops = vec![0, 1, 1];
        records[1].in_degrees = vec![2, 1, 0];
        records[1].features = vec![2.0, 2.0, 0.0, 1.0, 9.0, 9.0];
        records[1].edge_src = vec![1, 2];
        records[1].edge_dst = vec![0, 0];
        records[1].edge_weights = vec![1.0, 1.0];
        records[1].edge_layers = vec![0b11, 0b11];
        let spec = BatchSpec { kernel_plans: true, kernel_threads: 1, ..BatchSpec::plain(Layers::every(2)) };
        let repeated = Batch::build(&records, &spec);
        let distinct = Batch::build(&records, &BatchSpec { distinct_inputs: true, ..spec });
        // Rows: (0,0) (5,0) | (0,1) (5,1) (5,2) | (0,2): node 1 twice, node 2 twice with other features.
        assert_eq!(repeated.rows(), 6);
        assert_eq!((distinct.rows(), distinct.input_rows()), (6, 5));
        let row = |b: &Batch, r: usize| b.features[r * 2..r * 2 + 2].to_vec();
        let own = distinct.layers[0].own_rows();
        for (r, &input) in own.iter().enumerate().take(distinct.layers[0].rows_out) {
            assert_eq!(row(&distinct, input as usize), row(&repeated, r), "output row {r} reads its own input");
        }
        // Each layer-1 edge reads the same features as before, and the coefficients stay.
        let (a, b) = (&repeated.layers[0], &distinct.layers[0]);
        assert_eq!(
            (a.dst.clone(), a.gcn_coef.clone(), a.gcn_self.clone()),
            (b.dst.clone(), b.gcn_coef.clone(), b.gcn_self.clone())
        );
        for (s_a, s_b) in a.src.iter().zip(&b.src) {
            assert_eq!(row(&distinct, *s_b as usize), row(&repeated, *s_a as usize));
        }
        assert_eq!(b.rows_in, 5);
        assert_eq!(b.plans.as_ref().map(|p| p.edges.rows_in), Some(5));
        // Layer 2 is untouched.
        assert_eq!(repeated.layers[1], distinct.layers[1]);
    }

    #[test]
    fn edge_features_follow_each_layers_edges_standardized_as_the_model_reads_them() {
        let mut records = two_records();
        records[0].edge_features = vec![1.0, 2.0, 3.0, 4.0];
        records[1].edge_features = vec![5.0, 6.0];
        let plain = BatchSpec { kernel_plans: true, ..BatchSpec::plain(Layers::every(2)) };
        // Without an edge width the records' edge features are left out.
        let b = Batch::build(&records, &plain);
        assert!(b.layers.iter().all(|e| e.edge_dim == 0 && e.features.is_empty()));
        assert!(b.layers.iter().all(|e| e.plans.as_ref().is_some_and(|p| p.edge_rows.is_none())));

        let raw = BatchSpec { edge_dim: 2, ..plain };
        let b = Batch::build(&records, &raw);
        // Layer 1: record 0's edges 0 and 1, record 1's edge 0; layer 2: the two root edges.
        assert_eq!(b.layers[0].features, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(
            (b.layers[1].features.clone(), b.layers[1].edge_row(1)),
            (vec![1.0, 2.0, 5.0, 6.0], &[5.0, 6.0][..])
        );
        let rows = b.layers[0].plans.as_ref().and_then(|p| p.edge_rows.clone()).expect("an edge-row plan");
        assert_eq!((rows.rows_in, rows.rows_out, rows.by_dst.other.clone()), (3, 4, vec![0, 2, 1]));

        // Standardized: (v - 1) / 2 and v - 2 (a column of std 0 is only centered).
        let stats = EdgeStats { mean: vec![1.0, 2.0], std: vec![2.0, 0.0] };
        let b = Batch::build(&records, &BatchSpec { edge_stats: Some(stats), ..raw });
        assert_eq!(b.layers[0].features, vec![0.0, 0.0, 1.0, 2.0, 2.0, 4.0]);
    }

    #[test]
    fn fanouts_cap_the_degrees() {
        let mut records = two_records();
        records[0].in_degrees = vec![40, 1, 0];
        let spec = BatchSpec {
            layers: Layers::recorded(2, &[3, 2]),
            prune: true,
            normalize_features: true,
            kernel_plans: true,
            kernel_threads: 2,
            attention: false,
            distinct_inputs: false,
            edge_dim: 0,
            edge_stats: None,
            relation_edge_stats: Vec::new(),
            types: None,
            redraw: None,
        };
        let b = Batch::build(&records, &spec);
        // Layer 2 uses fanout 3 at the root: degree min(40, 3) = 3.
        assert_eq!(b.layers[1].gcn_self[0], 0.25);
        // Layer 1 uses fanout 2: degree 2.
        assert!((b.layers[0].gcn_self[0] - 1.0 / 3.0).abs() < 1e-6);
        // Row-normalized features.
        assert_eq!(&b.features[4..6], &[0.0, 1.0]);
    }

    /// A redraw keeps, of each root's in-edges of the last layer, the fanout asked for (all of
    /// them where there are fewer), chosen by the key alone; the other layers keep every edge.
    #[test]
    fn a_redraw_keeps_that_many_of_each_roots_in_edges_by_its_key() {
        let root = |n: usize| Record {
            root: 9,
            node_ids: (9..9 + n as i64 + 1).collect(),
            label: Some(Label::Class(0)),
            split: Some(Split::Train),
            hops: std::iter::once(0).chain(std::iter::repeat_n(1, n)).collect(),
            in_degrees: vec![n as i64; n + 1],
            features: vec![1.0; n + 1],
            edge_src: (1..=n as i32).collect(),
            edge_dst: vec![0; n],
            edge_weights: vec![1.0; n],
            edge_layers: vec![1; n],
            ..Record::default()
        };
        let spec =
            |key| BatchSpec { redraw: Some(Redraw { fanout: 2, key }), ..BatchSpec::plain(Layers::recorded(1, &[6])) };
        let sources = |b: &Batch| {
            let mut s = b.layers[0].src.clone();
            s.sort_unstable();
            s
        };
        let records = [root(6)];
        let first = Batch::build(&records, &spec(1));
        assert_eq!(first.layers[0].src.len(), 2);
        assert_eq!(sources(&first), sources(&Batch::build(&records, &spec(1))), "the same key, the same draw");
        let draws: std::collections::BTreeSet<Vec<i64>> =
            (0..20).map(|k| sources(&Batch::build(&records, &spec(k)))).collect();
        assert!(draws.len() > 5, "keys draw different in-edges: {draws:?}");
        assert_eq!(Batch::build(&[root(1)], &spec(3)).layers[0].src.len(), 1, "fewer than the fanout: all of them");
        // A 2-hop record: the draw is of the last layer's (the root's) in-edges only.
        let mut two = two_records();
        two[0].edge_layers = vec![0b11, 0b01];
        let b = Batch::build(
            &two,
            &BatchSpec { redraw: Some(Redraw { fanout: 0, key: 5 }), ..BatchSpec::plain(Layers::recorded(2, &[3, 2])) },
        );
        assert_eq!((b.layers[0].src.len(), b.layers[1].src.len()), (3, 0));
    }
}
