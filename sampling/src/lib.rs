//! GraphFlat's map and sampling as a library, for every stage that starts from the node and
//! edge tables (GraphFlat, GraphInfer):
//!
//! - [`load`]: each worker reads its share of the tables, checks every row, sends nodes to their
//!   owners (by [`cluster::Owners`]: the hash, or a partition table) and counts in-degrees there;
//! - [`owner_map`]: the partition table a stage routes by, read once per process;
//! - [`graph`]: the part of the graph a worker owns ([`NodeStore`]);
//! - [`sample`]: hash-keyed samplers and the per-layer plan;
//! - [`reindex`]: every node's sampled in-edges, hubs spread over salted reducers and merged;
//! - [`runs`]: the owner's counting sort of the in-edges it samples itself;
//! - [`digest`] and [`affected`]: a refresh's node digests, and the roots a change of the
//!   graph can reach (on differential-dataflow);
//! - [`supervision`]: the link task's supervision edges (those with a split), collected on
//!   request and kept at the owner of their source.
//!
//! Edges whose split is `valid` or `test` are held out of the graph here, for every stage: no
//! in-edge, in-degree, hub count or edge statistic includes them (see [`load`]).
//!
//! Errors are the table layer's ([`tables::Error`]); [`agree`] makes every worker return the
//! same one.

pub mod affected;
pub mod digest;
pub mod graph;
pub mod load;
pub mod negatives;
pub mod owner_map;
pub mod reindex;
pub mod runs;
pub mod same_kind;
pub mod sample;
pub mod supervision;

pub use graph::{ELSEWHERE, InEdge, NodeStore, RelationEdges};
pub use load::{Edge, EdgeRead, ReadEdges, load_edges, load_nodes};
pub use owner_map::{PartitionTable, SharedOwnerMap};
pub use reindex::{SampleSpec, Sampled, sample_in_edges};
pub use supervision::{SupervisionEdge, SupervisionSample};
pub use tables::Error;

use timely::worker::Worker;

/// Every worker gets the same result: the first error any worker had (see [`cluster::agree`]).
pub fn agree<T>(worker: &mut Worker, local: Result<T, Error>) -> Result<T, Error> {
    cluster::agree::<T, Error, tables::error::Report>(worker, local)
}

/// `table` opened by every worker ([`tables::open_table`], failures agreed on), and one version
/// of it on all of them: each process holds the version it opened ([`tables::pin`]), and a
/// table replaced between two processes' opens would have them read two runs' rows. That is a
/// retryable error (75) naming both runs, on every worker alike.
pub fn open_agreed(
    worker: &mut Worker,
    io: &tables::Io,
    table: &tables::Place,
) -> Result<Vec<tables::ParquetFile>, Error> {
    let files = agree(worker, tables::open_table(io, table))?;
    let run = files.first().and_then(|f| f.run()).unwrap_or_default().to_owned();
    one_run(worker, table, run)?;
    Ok(files)
}

/// Checks that every worker opened run `run`'s version of `table` (the empty run: none), else
/// a retryable error (75) naming the runs, on every worker alike: the table was replaced
/// between two processes' opens.
pub fn one_run(worker: &mut Worker, table: &tables::Place, run: String) -> Result<(), Error> {
    let mut runs = cluster::all_gather(worker, vec![run]);
    runs.dedup();
    match runs.len() {
        0 | 1 => Ok(()),
        _ => Err(Error::Retry(format!(
            "{}: the job's processes opened different versions of this table (runs {}): it was replaced as the \
             job started; run again",
            table.shown(),
            runs.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use schemas::{Cause, StorageConfig};
    use tables::commit::Stage;
    use tables::table::TableWriter;
    use tables::{Io, Place};

    use super::open_agreed;

    fn commit(io: &Io, dir: &std::path::Path) {
        let place = Place::parse_output(dir.to_str().unwrap(), &StorageConfig::default()).unwrap();
        let writer = TableWriter::start(io, &place, Stage::Generate, &[], true).unwrap();
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..10));
        let batch = RecordBatch::try_from_iter([("node_id", ids)]).unwrap();
        writer.write(0, batch.schema(), &[batch]).unwrap();
        writer.commit().unwrap();
    }

    /// Workers that opened two versions of a table (here two runs' outputs, as processes would
    /// across a replacement) all fail alike, retryably, naming both runs; one version opens.
    #[test]
    fn workers_that_opened_two_versions_of_a_table_fail_alike() {
        let root = std::env::temp_dir().join(format!("sampling-agreed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let io = Arc::new(Io::new(&StorageConfig::default()).unwrap());
        for name in ["a", "b"] {
            commit(&io, &root.join(name));
        }
        for (names, fails) in [(["a", "a"], false), (["a", "b"], true)] {
            let (io, root) = (io.clone(), root.clone());
            let config = schemas::ClusterConfig { workers: 2, ..schemas::ClusterConfig::default() };
            let outcomes = cluster::execute(&config, move |worker| {
                let dir = root.join(names[worker.index()]);
                let table = Place::parse(dir.to_str().unwrap(), &StorageConfig::default()).unwrap();
                Ok::<_, String>(
                    open_agreed(worker, &io, &table).map(|f| f.len()).map_err(|e| (e.cause(), e.to_string())),
                )
            })
            .map_err(|_| "the cluster failed")
            .unwrap();
            for outcome in outcomes {
                match (outcome, fails) {
                    (Ok(files), false) => assert_eq!(files, 1),
                    (Err((cause, message)), true) => {
                        assert_eq!(cause, Cause::Retry, "{message}");
                        assert!(message.contains("different versions"), "{message}");
                    }
                    (other, _) => panic!("{names:?}: {other:?}"),
                }
            }
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
