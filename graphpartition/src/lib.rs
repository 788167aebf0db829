//! The partition stage (`[partition]`): an owner for every node that keeps most edges inside
//! one owner, DistDGL's locality, computed on the job's own timely cluster and written as a
//! table `(node_id, part)`.
//!
//! The scheme is multilevel, in the shape of ParHIP (Meyerhenke, Sanders and Schulz, 2017):
//! - [`level`]: level 0 is the graph made undirected, each node of weight 1, held by the hash
//!   owner as every stage holds it;
//! - [`coarsen`]: size-constrained label propagation groups nodes into clusters, each cluster
//!   a node of the next level, until the level has at most `coarse_nodes` nodes (or stops
//!   shrinking);
//! - [`initial`]: worker 0 gathers the coarsest level and partitions it ([`sequential`]:
//!   multilevel recursive bisection with FM refinement, then a k-way pass);
//! - [`refine`]: each level, from the coarsest back to level 0, takes its clusters' parts and
//!   runs balanced label propagation, whose moves [`quota`] admits so that no part passes its
//!   cap;
//! - [`output`]: one row per node.
//!
//! Cost: each round sends one message per changed node and worker that reads it, and a
//! table of move counts; each level's work is linear in its edges. Memory per worker: its
//! share of the graph's edges at each level (levels shrink geometrically), and on worker 0 the
//! coarsest level. Deterministic: every choice is a function of the graph, the seed and sums
//! over every worker, so the partition is the same on any cluster shape.

pub mod coarsen;
pub mod initial;
pub mod level;
pub mod output;
pub mod partition;
pub mod quota;
pub mod refine;
pub mod sequential;

use std::sync::Arc;

use cluster::Failure;
use cluster::hash::hash3;
use schemas::{ClusterConfig, PartitionConfig};
use stage::{Declared, Progress};
use tables::Io;
use tables::commit::Stage;

pub use partition::{Quality, cap};
pub use tables::Error;

/// The job's summary.
pub type Summary = stage::Summary<Quality>;

/// A seeded rank of `x`, for orders and ties.
pub(crate) fn rank(seed: u64, x: u64) -> u64 {
    hash3(seed, x, 0x7a27_1e1d_0c5e_a11d)
}

/// Runs the partition job on this process's workers. Any worker's failure ends every worker.
pub fn run(io: &Arc<Io>, config: &PartitionConfig, cluster: &ClusterConfig) -> Result<Summary, Failure<Error>> {
    let io = io.clone();
    let config = Arc::new(config.clone());
    let progress = Arc::new(Progress::new("partition", "nodes", vec!["write".to_owned()]));
    let threads = cluster.threads();
    let parts = config.parts_for(cluster.processes * threads);
    let typed = Arc::new(config.typed());
    stage::execute(cluster, move |worker| {
        let declared = Declared::of(Stage::Partition, &*config);
        let body = partition::Partitioner { config: &config, parts, typed: typed.as_ref().as_ref() };
        stage::run(worker, &io, &progress, threads, &declared, body)
    })
}
