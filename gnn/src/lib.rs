//! GNN models over GraphFlat's k-hop records, shared by GraphTrainer and GraphInfer.
//!
//! - [`features`]: a node's input row (row-normalized or not) and an edge's features
//!   (standardized or not), the same in training and inference;
//! - [`batch`]: records of a mini-batch become one block-diagonal graph with its edge features,
//!   nodes ordered by hop so that layer `l`'s outputs are a prefix of the rows (pruning);
//! - [`aggregate`]: a layer's edges on the device, and neighbor aggregation as gather/scatter
//!   over burn tensor ops (the reference, and the GPU path);
//! - [`kernel`]: the edge-partitioned CPU aggregation kernel with its own backward pass;
//! - [`control_variate`]: VR-GCN's estimate of a GCN layer's sum over sampled in-edges from
//!   histories (not called by the trainer yet);
//! - [`layers`], [`model`]: GCN, GraphSAGE, GAT and GINE (the last three read edge features);
//!   the losses and scores (accuracy, micro-F1);
//! - [`hetero`]: the typed models, R-GCN and heterogeneous GraphSAGE, with a projection per node
//!   type and a kernel pass per relation;
//! - [`hub`]: split hubs of GAT and GINE in full-graph training: pieces of a hub's in-edges
//!   that run the layer away from its owner, and their parts merged into its output;
//! - [`link`], [`decoder`]: link models: a batch of link records (their endpoints' records),
//!   the pair decoders (`dot`, `mlp`; also on the host for GraphInfer) and the link loss;
//! - [`params`]: a model's parameters as one flat vector, for the parameter server;
//! - [`rows`]: dropout masks and inputs filled row by row on every core;
//! - [`slice`]: the model sliced by layer (transform, aggregate, finish, post), for GraphInfer;
//! - [`io`], [`device`]: a model's files (`model.bpk`, `model.json`), and the device it runs on.

pub mod aggregate;
pub mod batch;
pub mod control_variate;
pub mod decoder;
pub mod device;
mod error;
pub mod features;
pub mod hetero;
pub mod hub;
pub mod io;
pub mod kernel;
pub mod layers;
pub mod link;
pub mod model;
pub mod params;
mod pieces;
pub mod rng;
pub mod rows;
pub mod slice;

pub use batch::{Batch, LayerEdges};
pub use device::device;
pub use error::Error;
pub use model::Gnn;
pub use slice::LayerSlice;
