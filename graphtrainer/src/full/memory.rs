//! What full-graph training holds, estimated before the first epoch, and the check that the
//! graph fits (a graph that does not fit is refused before it starts, naming the record-based
//! mode, whose memory does not grow with the graph).
//!
//! A worker holds, for its own nodes `n`, its halo rows `h` (remote in-neighbors it reads) and
//! the in-edges `e` of its own nodes (the constants are the arrays' bytes, counted in the code
//! that allocates them; `docs/full-graph.md` gives the arithmetic for a large graph):
//!
//! - **per edge**, [`EDGE_BYTES`]: the in-edge as loaded (16), its source row and destination
//!   (16), its coefficients (8), its dropout key (16), the aggregation kernel's plans (about 16
//!   per plan: by destination and by source; 2 plans, 4 for GAT), the edges on the device for
//!   training and evaluation (48); plus its features, `edge_dim` x 4 bytes (a typed graph's
//!   widest relation's), four times;
//! - **per edge and layer**, what the layer keeps for backward per edge: none for GCN and
//!   GraphSAGE (the kernel sums along edges in place), `6 x 4 x heads` for GAT's attention,
//!   `3 x 4 x width` for GINE's per-edge messages (and SAGE's edge term, `2 x 4 x width`);
//! - **per input row and layer** (`n + h` rows): the input, its dropout mask and the masked
//!   input (`3 x 4 x width_in`) and the transformed rows (`4 x width_out`);
//! - **per own row and layer**: the output, its activation and its gradient (`3 x 4 x
//!   width_out`);
//! - the features layer 0 reads, twice (host and device): the `n + h` input rows', or on a
//!   typed graph the own rows' (their projections cross as a layer's outputs);
//! - split hubs ([`crate::full::hubs`]): a run's virtual row and in-edge at the hub's owner,
//!   counted as a halo row and an in-edge, and its in-edges at its reducer, counted as in-edges
//!   (not counted: the reducer's copy of its source rows' dropout mask, `4 x width_in` per
//!   distinct source row and layer, kept for backward, and GAT's and GINE's copy of the masked
//!   rows as much again; their hubs' merged parts at the owner, a few rows per hub and layer);
//! - with stale copies (`halo_staleness`, [`crate::full::stale`]), per exchanged layer of width
//!   `w` (the outputs of layers `0..k - 1`, and a typed graph's projection): per halo row the
//!   reader's copy, the last gradient it sent and the copy a pull returns (`3 x 4 x w`) and the
//!   gradient's age (4); per row the worker sends a pull ([`Share::sent`]) the owner's last row
//!   sent and the last gradient got (`2 x 4 x w`) and the row's age (4);
//! - **per scored pair** of a link task (`p`: the worker's supervision edges times `1 +
//!   negatives`), [`PAIR_BYTES`] (its rows, label, weight, score and the score's gradient) and at
//!   most one endpoint row and its gradient (`8 x width_out`).

use schemas::model::{ModelKind, ModelSpec};

/// Bytes an in-edge costs besides its features and the layers' per-edge state (see the
/// module doc).
pub const EDGE_BYTES: u64 = 16 + 16 + 8 + 16 + 48;

/// Bytes a link task's scored pair costs besides its endpoint row (see the module doc).
pub const PAIR_BYTES: u64 = 8 + 8 + 4 + 4 + 4 + 4;

/// Bytes of one plan of the aggregation kernel, per edge.
pub const PLAN_BYTES: u64 = 16;

/// A worker's share of the graph, as the estimate reads it.
#[derive(Debug, Clone, Copy)]
pub struct Share {
    pub own: u64,
    pub halo: u64,
    pub edges: u64,
    /// Pairs a link task scores here (0: a node task).
    pub pairs: u64,
    /// Feature values layer 0 reads: `(own + halo) x dim`, or a typed graph's own rows'.
    pub features: u64,
    /// Rows a pull sends from this worker (its readers' lists, together), and whether the
    /// exchange keeps stale copies of them.
    pub sent: u64,
    pub stale: bool,
}

/// The bytes a worker holds while it trains `spec` on `share` (see the module doc).
pub fn estimate(spec: &ModelSpec, share: Share) -> u64 {
    let rows = share.own + share.halo;
    let edge_dim = edge_width(spec) as u64;
    let plans = if spec.kind == ModelKind::Gat { 4 } else { 2 } + u64::from(edge_dim > 0);
    let mut bytes = share.edges * (EDGE_BYTES + plans * PLAN_BYTES + 16 * edge_dim);
    bytes += share.pairs * (PAIR_BYTES + 8 * layer_output(spec, spec.layers - 1) as u64);
    bytes += 2 * 4 * share.features;
    for l in 0..spec.layers {
        let (w_in, w_out) = (spec.layer_input(l) as u64, layer_output(spec, l) as u64);
        bytes += rows * 4 * (3 * w_in + w_out) + share.own * 3 * 4 * w_out;
        bytes += share.edges
            * match spec.kind {
                ModelKind::Gat => 6 * 4 * heads(spec, l) as u64,
                ModelKind::Gine => 3 * 4 * w_in,
                ModelKind::Sage if edge_dim > 0 => 2 * 4 * w_out,
                _ => 0,
            };
    }
    if share.stale {
        bytes += exchanged_widths(spec).map(|w| share.halo * (12 * w + 4) + share.sent * (8 * w + 4)).sum::<u64>();
    }
    bytes
}

/// The widths of the rows a training pass exchanges: a typed graph's projection, then the
/// outputs of every layer but the last.
fn exchanged_widths(spec: &ModelSpec) -> impl Iterator<Item = u64> + '_ {
    let projection = spec.types.as_ref().map(|_| spec.hidden as u64);
    projection.into_iter().chain((1..spec.layers).map(|l| spec.layer_input(l) as u64))
}

/// The edge features' width an edge holds: the graph's, or on a typed graph at most its
/// widest relation's.
fn edge_width(spec: &ModelSpec) -> usize {
    let relations = spec.types.iter().flat_map(|t| &t.relations);
    relations.map(|r| r.edge_dim).fold(spec.edge_dim, usize::max)
}

fn heads(spec: &ModelSpec, l: usize) -> usize {
    if l + 1 == spec.layers { spec.output_heads } else { spec.heads }
}

/// Layer `l`'s output width: the next layer's input, or the classes.
fn layer_output(spec: &ModelSpec, l: usize) -> usize {
    if l + 1 == spec.layers { spec.classes * heads(spec, l).max(1) } else { spec.layer_input(l + 1) }
}

/// The memory this process may use: `memory_mb` when the job sets it, else what the system
/// reports available now (`MemAvailable`); `None` where neither is known.
pub fn budget(memory_mb: Option<u64>) -> Option<u64> {
    memory_mb.map(schemas::job::mb_bytes).or_else(available)
}

fn available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb << 10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemas::model::ModelSpec;

    fn spec(kind: ModelKind) -> ModelSpec {
        ModelSpec {
            kind,
            input_dim: 100,
            hidden: 16,
            classes: 4,
            layers: 2,
            heads: 2,
            output_heads: 1,
            activation: schemas::model::Activation::Relu,
            normalize_features: false,
            multi_label: false,
            edge_dim: 0,
            normalize_edge_features: false,
            edge_stats: None,
            relation_edge_stats: Vec::new(),
            task: schemas::Task::Node,
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
    fn the_estimate_grows_with_every_part_of_the_share() {
        let share =
            Share { own: 1000, halo: 200, edges: 5000, pairs: 0, features: 1200 * 100, sent: 300, stale: false };
        let base = estimate(&spec(ModelKind::Gcn), share);
        let more = [
            Share { own: 2000, ..share },
            Share { halo: 400, ..share },
            Share { edges: 10_000, ..share },
            Share { pairs: 100, ..share },
            Share { features: 2400 * 100, ..share },
        ];
        for more in more {
            assert!(estimate(&spec(ModelKind::Gcn), more) > base);
        }
        // Features dominate a GCN on this share: (1000 + 200) rows x 100 x 4 bytes, twice.
        assert!(base >= 2 * 4 * 1200 * 100);
        // Attention and per-edge messages keep per-edge state a GCN does not.
        assert!(estimate(&spec(ModelKind::Gat), share) > base);
        assert!(estimate(&spec(ModelKind::Gine), share) > base);
        // Stale copies: one exchanged layer of 16, its halo's and its sent rows' copies.
        let stale = Share { stale: true, ..share };
        assert_eq!(estimate(&spec(ModelKind::Gcn), stale) - base, 200 * (12 * 16 + 4) + 300 * (8 * 16 + 4));
        assert!(estimate(&spec(ModelKind::Gcn), Share { sent: 600, ..stale }) > estimate(&spec(ModelKind::Gcn), stale));
    }

    #[test]
    fn a_set_budget_wins_over_the_system() {
        assert_eq!(budget(Some(3)), Some(3 << 20));
    }
}
