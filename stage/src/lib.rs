//! The skeleton of a stage over the graph tables. GraphFlat (k-hop records) and GraphInfer
//! (scores and embeddings) run the same sequence on every worker, and so will any stage that
//! reads the node and edge tables and writes a table of parts:
//!
//! 1. parse the places and agree on them; check the output (and any extra output) against
//!    every input and take the run's leases (worker 0), then share the run id ([`skeleton`]);
//! 2. round 0: load this worker's share of the nodes and edges (the map) and sample every
//!    node's in-edges with hub re-indexing ([`sampling`]); edges whose split is `valid` or
//!    `test` are held out of the graph there, and collected as supervision edges (with the
//!    `train` ones) when the body asks ([`Body::supervision`], [`Graph::supervision`]);
//! 3. pick the targets (this worker's nodes in the chosen splits, sorted by id);
//! 4. the stage's own work: a [`Body`], which writes its parts under the run's names;
//! 5. gather every worker's [`WorkerStats`] into the [`Summary`], then commit the manifest
//!    (and those of the body's extra outputs after it, together: [`extra_output`]).
//!
//! A stage run with `incremental` refreshes its output instead ([`refresh`]).
//!
//! A body sees only what it needs: the sampled [`Graph`] and where its parts go. Progress on
//! long work goes through [`Progress`]; phase times through [`Clock`].

pub mod clock;
pub mod day;
pub mod extra_output;
pub mod kept;
pub mod progress;
pub mod refresh;
pub mod skeleton;
pub mod summary;

pub use clock::Clock;
pub use day::Day;
pub use progress::Progress;
pub use skeleton::{Body, Declared, Graph, Loaded, Reads, Section, Worker, execute, graph_inputs, load_graph, run};
pub use summary::{Details, Summary, WorkerStats, Written};
