//! GraphInfer: scores and embeds every target node from the node and edge tables and a trained
//! model, in k + 1 rounds over the original graph, without k-hop records (AGL's layer-sliced
//! inference). Cost grows with k |E|, not with |V| fanout^k.
//!
//! The job is the `stage` skeleton around this crate's body ([`infer`]); it runs in phases,
//! every worker in step (see `docs/graphinfer.md`):
//! - round 0: map and sampling ([`sampling`], the same library code as GraphFlat, with the
//!   model's flatten settings: the same samples), then the [`plan`]: which nodes each layer
//!   needs, where each aggregation runs (hubs split over salted reducers), which rows cross;
//! - rounds 1 to k: one [`round`] per layer: transform on the device, messages to where they
//!   are aggregated, hub partials merged at the owner, the layer's output per node;
//! - round k + 1: the [`output`] head: scores, predictions and embeddings as Parquet parts;
//! - for a link model given `pairs`, the [`pairs`] round: each candidate pair routed to the
//!   owner of `src`, then of `dst`, and scored there by the decoder, into `pairs_output`;
//! - with `incremental`, the [`refresh`] after round 0: today's digests kept beside the output,
//!   and over yesterday's version the rows a change can reach computed again, the others
//!   carried over (`stage::refresh`);
//! - `_SUCCESS` in the output, then in `pairs_output` (see `stage::extra_output`).
//!
//! Memory per worker: its share of the nodes (features, in-degrees, sampled in-edges), the
//! rows it reads from other workers, and two layers of per-node rows (a layer's input and its
//! transform or output); never a neighborhood. The pairs round adds the pairs the worker
//! scored (its share of the table by `dst`), never another worker's embeddings.

pub mod infer;
pub mod learned;
pub mod model;
pub mod output;
pub mod pairs;
pub mod plan;
pub mod precompute;
pub mod refresh;
pub mod round;
pub mod rule;

pub use infer::{Summary, run};
pub use tables::Error;
