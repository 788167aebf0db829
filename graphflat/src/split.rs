//! `graphflat split-edges`: an edge table's rows again, each with a `split` for the link task
//! (`train`, `valid` or `test`; see `schemas::edges` for what a split does in every stage).
//!
//! An edge's split is a pure function of the seed and its endpoints ([`SplitEdges::split_of`]):
//! a uniform draw from a hash of `(seed, src, dst)`, or of `(seed, min, max)` with
//! `undirected`, so that both directions of an undirected edge stored twice (as Cora and OGB
//! store them) land in the same split and neither leaks the other. The draw is below `valid`:
//! `valid`; below `valid + test`: `test`; else `train`. The output is the same whatever reads
//! or writes it, and the same rows in the same order as the input, with every other column as
//! it was (a `split` column the input has is replaced, with a warning). A result without a
//! `train` edge (an empty table, or fractions that leave none) is an error, and nothing is
//! committed.
//!
//! The table streams through in row groups: a part is written once its decoded batches reach
//! [`PART_BYTES`], so memory holds one part's batches, never the whole table. The output is
//! checked against the input (neither may hold the other) and committed with a `_SUCCESS`
//! manifest, as `import` and `generate` write theirs (`tables::table::TableWriter`).

use arrow_array::RecordBatch;
use cluster::hash::{EdgeDraw, edge_draw};
use schemas::Split;
use schemas::edges::{self, EdgeBatch};
use tables::commit::Stage;
use tables::{Io, open_table};

use crate::error::Error;
use crate::table::TableWriter;

/// `--valid`'s default: the share of edges held out for validation.
pub const DEFAULT_VALID: f64 = 0.05;
/// `--test`'s default: the share of edges held out for testing.
pub const DEFAULT_TEST: f64 = 0.1;
/// `--seed`'s default.
pub const DEFAULT_SEED: u64 = 0;
/// Decoded bytes of input batches gathered into one output part.
pub const PART_BYTES: usize = 64 << 20;

/// What `split-edges` does: where it reads and writes, and how it draws.
#[derive(Debug, Clone)]
pub struct SplitEdges {
    /// The edge table (a local path or URI).
    pub edges: String,
    /// The directory that receives the split table.
    pub out: String,
    /// Share of edges in `valid`, in [0, 1).
    pub valid: f64,
    /// Share of edges in `test`, in [0, 1); `valid + test < 1`.
    pub test: f64,
    pub seed: u64,
    /// Whether `src -> dst` and `dst -> src` share one split.
    pub undirected: bool,
    /// Replace an earlier split table there (see `tables::guard`).
    pub overwrite: bool,
}

/// Edges written per split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitCounts {
    pub train: u64,
    pub valid: u64,
    pub test: u64,
}

impl SplitCounts {
    pub fn total(&self) -> u64 {
        self.train + self.valid + self.test
    }

    fn add(&mut self, split: Split) {
        match split {
            Split::Train => self.train += 1,
            Split::Valid => self.valid += 1,
            Split::Test => self.test += 1,
        }
    }
}

impl SplitEdges {
    /// The fractions can work: each in [0, 1), and together below 1 (some edges train).
    pub fn check(&self) -> Result<(), Error> {
        for (name, f) in [("--valid", self.valid), ("--test", self.test)] {
            if !(0.0..1.0).contains(&f) {
                return Err(Error::Usage(format!("{name} must be in [0, 1), found {f}")));
            }
        }
        if self.valid + self.test >= 1.0 {
            return Err(Error::Usage(format!(
                "--valid + --test must be below 1 (some edges must train), found {} + {}",
                self.valid, self.test
            )));
        }
        Ok(())
    }

    /// The split of the edge `src -> dst`.
    pub fn split_of(&self, src: i64, dst: i64) -> Split {
        let (a, b) = if self.undirected { (src.min(dst), src.max(dst)) } else { (src, dst) };
        let u = edge_draw(EdgeDraw::Split, self.seed, a, b);
        if u < self.valid {
            Split::Valid
        } else if u < self.valid + self.test {
            Split::Test
        } else {
            Split::Train
        }
    }
}

/// Reads the edge table part by part and writes it with every edge's split into `out`;
/// returns the edges per split. Checks each row as the map step does (`EdgeBatch`).
pub fn split_edges(io: &Io, config: &SplitEdges) -> Result<SplitCounts, Error> {
    config.check()?;
    let input = io.place(&config.edges)?;
    let table = TableWriter::start(io, &io.output(&config.out)?, Stage::SplitEdges, &[&input], config.overwrite)?;
    let mut counts = SplitCounts::default();
    let mut part = Part::default();
    let files = open_table(io, &input)?;
    // Every part's ids of one kind; each written as int64 or utf8, so that the parts are of one schema.
    sampling::load::id_kind(&files, &[edges::SRC, edges::DST])?;
    if let Some(file) = files.iter().find(|f| f.arrow.schema().column_with_name(edges::SPLIT).is_some()) {
        tracing::warn!("split-edges: {} has a split column; every row's split is drawn anew", file.name());
    }
    for file in files {
        let name = file.name();
        for rg in 0..file.row_groups() {
            file.read_row_group(io, rg, |batch, first_row| {
                let rows = EdgeBatch::from_batch(&batch, &name, first_row, false)?;
                let splits: Vec<Option<Split>> =
                    (0..rows.len()).map(|i| Some(config.split_of(rows.src.hashed(i), rows.dst.hashed(i)))).collect();
                splits.iter().flatten().for_each(|&s| counts.add(s));
                part.push(&table, edges::with_splits(&edges::with_canonical_ids(&batch, &rows), &splits))
            })?;
        }
    }
    if counts.train == 0 {
        // An empty table, or fractions that left no edge to pass messages: no link job can use it.
        let problem = if counts.total() == 0 { "the edge table is empty" } else { "no edge drew the train split" };
        return Err(Error::BadData(format!(
            "{}: {problem} ({} valid, {} test edges); nothing written",
            input.shown(),
            counts.valid,
            counts.test
        )));
    }
    part.flush(&table)?;
    table.commit()?;
    Ok(counts)
}

/// The output part being gathered: batches of one schema, up to [`PART_BYTES`].
#[derive(Default)]
struct Part {
    batches: Vec<RecordBatch>,
    bytes: usize,
    written: usize,
}

impl Part {
    /// Adds `batch`, writing the part first if the batch's schema differs (input parts from
    /// other tools may differ in types) and after if it is full.
    fn push(&mut self, table: &TableWriter, batch: RecordBatch) -> Result<(), Error> {
        if self.batches.first().is_some_and(|b| b.schema() != batch.schema()) {
            self.flush(table)?;
        }
        self.bytes += batch.get_array_memory_size();
        self.batches.push(batch);
        if self.bytes >= PART_BYTES {
            self.flush(table)?;
        }
        Ok(())
    }

    fn flush(&mut self, table: &TableWriter) -> Result<(), Error> {
        let Some(first) = self.batches.first() else { return Ok(()) };
        table.write(self.written, first.schema(), &self.batches)?;
        self.written += 1;
        self.batches.clear();
        self.bytes = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(valid: f64, test: f64, undirected: bool) -> SplitEdges {
        SplitEdges { edges: "in".into(), out: "out".into(), valid, test, seed: 4, undirected, overwrite: false }
    }

    #[test]
    fn fractions_are_checked_and_undirected_edges_share_a_split() {
        assert!(config(0.05, 0.1, false).check().is_ok());
        assert!(config(0.0, 0.0, false).check().is_ok());
        for (valid, test) in [(1.0, 0.0), (-0.1, 0.1), (0.5, 0.5), (0.2, f64::NAN)] {
            let err = config(valid, test, false).check().unwrap_err();
            assert_eq!(err.cause(), schemas::Cause::Usage, "{valid} {test}: {err}");
        }
        let (undirected, directed) = (config(0.3, 0.3, true), config(0.3, 0.3, false));
        assert!((0..2_000).all(|i| undirected.split_of(i, 3 * i + 1) == undirected.split_of(3 * i + 1, i)));
        let apart = (0..2_000).filter(|&i| directed.split_of(i, 3 * i + 1) != directed.split_of(3 * i + 1, i));
        assert!(apart.count() > 500, "directed edges draw each direction apart");
        assert!((0..2_000).all(|i| config(0.0, 0.0, false).split_of(i, -i) == Split::Train));
    }
}
