//! Typed (heterogeneous) models: R-GCN and heterogeneous GraphSAGE over records of a typed
//! graph (see `schemas::typed`).
//!
//! A typed node's features have its type's width, so the model starts with a projection per
//! type ([`Projection`]: `x_v P_t + c_t`, to `hidden`) and its layers all read `hidden`-wide
//! rows. Each layer aggregates per relation: `mean_r(w)` is the mean of `h_u` over `w`'s
//! in-edges of relation `r` in the layer (zero without any), and
//!
//! - R-GCN (Schlichtkrull et al. 2018): `h'_w = h_w W_0 + sum_r mean_r(w) W_r + b`, with
//!   `W_r = sum_b a_rb V_b` under basis decomposition (`bases > 0`);
//! - heterogeneous GraphSAGE: `h'_w = h_w S_t + b_t + sum_r mean_r(w) N_r` for `w` of type `t`:
//!   a SAGE layer per relation, summed per destination type. PyG's `to_hetero(SAGE)` gives
//!   each relation its own root weight and bias and sums them over the relations into a type;
//!   a sum of linear maps of `h_w` is one linear map, so one `S_t` and `b_t` per type is the
//!   same family of functions (and a type no relation reaches still keeps its rows).
//!
//! A relation with edge features (`Relation::edge_dim` > 0 in the model's types) adds its edge
//! term to its messages, as homogeneous GraphSAGE does: a message along an in-edge `u -> w`
//! of relation `r` is `h_u W_r + e_uw W_e,r`, so each relation's mean gains `mean_r(e) W_e,r`
//! (the mean of its in-edges' features, one projection per node; R-GCN and heterogeneous
//! GraphSAGE alike).
//!
//! A relation's mean is taken before its weight (`mean_r(h) W_r`, not `mean_r(h W_r)`: equal,
//! and a layer's input rows outnumber its output rows), one kernel pass per relation over the
//! relation's edges ([`crate::batch::LayerRelations`]); a relation without edges in a batch adds
//! zero and is skipped. Rows of one type are computed together ([`GroupTensors`]).

mod groups;
mod layers;

pub use groups::{GroupTensors, TypeGroups};
pub use layers::{HeteroSageLayer, Projection, RgcnLayer};
