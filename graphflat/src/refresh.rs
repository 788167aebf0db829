//! The refresh of a node job's records (`incremental = true`, `docs/refresh.md`): over the
//! version of the output that this stage committed with the same settings, only the records
//! that today's graph can change are computed again; the others are carried over.
//!
//! **The phases**, every worker in step:
//!
//! 1. **the previous version** ([`open_previous`]): every process opens the version the output
//!    holds (and holds it, `tables::pin`); all must have opened the same one. It qualifies
//!    ([`qualifies`]) when this stage wrote it with the same settings (paths, `overwrite`,
//!    batch and part sizes aside: they change no row), its records' schema and metadata are
//!    today's, and it kept its digests;
//! 2. **the affected set** (`sampling::affected`, on differential-dataflow): yesterday's digests
//!    against today's, then k hops downstream over today's sampled edges;
//! 3. **the parts** ([`carry_parts`]): of yesterday's parts, one with no affected root is
//!    carried into the new version as it is (a hard link on a local disk, nothing at all on a
//!    store: the manifest lists it again); one with some is written again without them, row
//!    group by row group (a row group still holds one split); the affected targets go through
//!    the rounds into new parts, as in a full run;
//! 4. **the state**: every run with `incremental` keeps today's digests in a table of its own
//!    beside the output, `.<output>.graphflat-state` ([`state_uri`], [`write_state`]),
//!    committed with the output as its extra output (`stage::extra_output`). Not inside it:
//!    polars reads every file below the directory it is given, hidden folders included. A
//!    refresh reads the digests only when their run is the output's.
//!
//! The new version holds exactly one record per target, each what a full run writes: the
//! affected set's are new, the others yesterday's, which `sampling::affected` argues equal.
//! A run that cannot refresh runs in full and says why in its summary.

use std::sync::Arc;

use arrow_array::{Array, BooleanArray, FixedSizeBinaryArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use sampling::affected::Affected;
use sampling::digest::Digest;
use sampling::{NodeStore, agree};
use schemas::FlattenConfig;
use stage::Worker;
use tables::commit::{PartEntry, Stage};
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::staging::StagedPart;
use tables::{Io, ParquetFile, Place, Version};

use crate::error::Error;
use crate::sink::{Encoder, Piece};
use crate::writer_thread::WriterThread;

/// Settings that change no record: the tables' and the output's places, how the work is cut
/// and how the commit treats an output. Every other key must equal the previous run's.
const NOT_IN_RECORDS: &[&str] = &[
    "nodes",
    "edges",
    "output",
    "overwrite",
    "incremental",
    "partition",
    "batch_size",
    "max_in_flight",
    "part_size_mb",
    "hub_threshold",
];

/// The state's columns: a node's id and its digest's 16 bytes (little-endian).
const NODE_ID: &str = "node_id";
const DIGEST: &str = "digest";

/// What the state's directory adds to the output's name.
const STATE_SUFFIX: &str = ".graphflat-state";

/// Rows of state per batch written.
const STATE_BATCH: usize = 1 << 20;

/// What the refresh did, the same on every worker, for the summary.
#[derive(Debug, Clone, Default)]
pub struct Refreshed {
    /// The run whose version this one refreshed; `None` for a full run.
    pub from: Option<String>,
    /// Why the run was full.
    pub full: Option<String>,
    pub changed: u64,
    pub affected: u64,
    /// Targets today.
    pub targets: u64,
}

impl Refreshed {
    pub fn full(reason: impl Into<String>) -> Self {
        Refreshed { full: Some(reason.into()), ..Refreshed::default() }
    }

    /// This refresh as a full run: more than 1 in `past` records affected.
    fn too_many(self, past: u64) -> Self {
        let share = 100.0 * self.affected as f64 / self.targets.max(1) as f64;
        Refreshed::full(format!(
            "{} nodes changed since run {}, and {} of {} records ({share:.1}%) would be computed again: past 1 in \
             {past}, a full run is cheaper",
            self.changed,
            self.from.as_deref().unwrap_or("?"),
            self.affected,
            self.targets
        ))
    }

    /// The summary's line.
    pub fn line(&self) -> String {
        match (&self.from, &self.full) {
            (Some(from), _) => format!(
                "incremental over run {from}: {} nodes changed, {} of {} records affected ({:.2}%)",
                self.changed,
                self.affected,
                self.targets,
                100.0 * self.affected as f64 / self.targets.max(1) as f64
            ),
            (None, Some(reason)) => format!("full: {reason}"),
            (None, None) => "full".into(),
        }
    }
}

/// The version a refresh starts from, once it qualifies.
pub struct Base {
    pub run: String,
    /// This worker's share of its parts.
    parts: Vec<ParquetFile>,
    /// This worker's share of the parts of the digests that run kept.
    state: Vec<ParquetFile>,
}

/// Where the digests of the output `output` are kept: `.<name>.graphflat-state` beside it;
/// `None` for an output with no directory around it (a bucket).
pub fn state_uri(output: &str) -> Option<String> {
    let trimmed = output.trim_end_matches('/');
    let (parent, name) = match trimmed.rsplit_once('/') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, trimmed),
    };
    let at_root = parent.is_some_and(|p| p.is_empty() || p.ends_with(':') || p.ends_with(":/"));
    if name.is_empty() || matches!(name, "." | "..") || at_root && output.contains("://") {
        return None;
    }
    let state = format!(".{name}{STATE_SUFFIX}");
    Some(parent.map_or(state.clone(), |p| format!("{p}/{state}")))
}

/// Step 1: the version the output holds, and the digests kept beside it (`state`), opened on
/// every process (the same version on all, else a retryable error naming both runs), and
/// whether a refresh can start from them: `Err` says why not.
fn open_previous(
    worker: &mut Worker,
    output: &Place,
    state: &Place,
    config: &FlattenConfig,
    schema: &SchemaRef,
) -> Result<Result<Base, Refreshed>, Error> {
    let version = match open_agreed(worker, output, "the committed version") {
        Ok(Some(version)) => version,
        Ok(None) => return Ok(Err(Refreshed::full("the output holds no committed version yet"))),
        Err(Unreadable(reason)) => return Ok(Err(Refreshed::full(reason))),
        Err(Failed(e)) => return Err(e),
    };
    if let Err(reason) = qualifies(&version, config, schema) {
        return Ok(Err(Refreshed::full(reason)));
    }
    let run = version.manifest.run.clone();
    let digests = match open_agreed(worker, state, "the digests kept beside the output") {
        Ok(Some(digests)) if digests.manifest.run == run => digests,
        Ok(Some(digests)) => {
            let other = digests.manifest.run;
            return Ok(Err(Refreshed::full(format!(
                "the digests beside the output are run {other}'s, not run {run}'s"
            ))));
        }
        Ok(None) => return Ok(Err(Refreshed::full(format!("no digests of run {run} are kept beside the output")))),
        Err(Unreadable(reason)) => return Ok(Err(Refreshed::full(reason))),
        Err(Failed(e)) => return Err(e),
    };
    let (index, peers) = (worker.timely.index(), worker.timely.peers());
    let share = |files: Vec<ParquetFile>| files.into_iter().skip(index).step_by(peers).collect();
    Ok(Ok(Base { run, parts: share(version.parts), state: share(digests.parts) }))
}

/// Why [`open_agreed`] has no version: one that does not read (a refresh then runs in full,
/// saying this), or a failure that ends the job.
enum NotOpened {
    Unreadable(String),
    Failed(Error),
}
use NotOpened::{Failed, Unreadable};

/// The version `place` holds, opened by every worker; every process must have opened the same
/// one (else a retryable error naming both runs, as `sampling::open_agreed` says it).
fn open_agreed(worker: &mut Worker, place: &Place, what: &str) -> Result<Option<Version>, NotOpened> {
    let version = match agree(worker.timely, tables::open_version(worker.io, place)) {
        Ok(version) => version,
        Err(e) if e.cause() == schemas::Cause::BadData => {
            return Err(Unreadable(format!("{what} cannot be read: {e}")));
        }
        Err(e) => return Err(Failed(e)),
    };
    let run = version.as_ref().map(|v| v.manifest.run.clone()).unwrap_or_default();
    let mut runs = cluster::all_gather(worker.timely, vec![run]);
    runs.dedup();
    if runs.len() > 1 {
        return Err(Failed(Error::Retry(format!(
            "{}: the job's processes opened different versions of it (runs {}): it was replaced as the job \
             started; run it again",
            place.shown(),
            runs.join(", ")
        ))));
    }
    Ok(version)
}

/// Whether a refresh can start from `version` (see the module doc); `Err` says why not.
fn qualifies(version: &Version, config: &FlattenConfig, schema: &SchemaRef) -> Result<(), String> {
    let manifest = &version.manifest;
    if manifest.stage != Stage::Flatten {
        return Err(format!("the output holds a {} output", manifest.stage.name()));
    }
    let today = serde_json::to_value(config).unwrap_or_default();
    if let Some(key) = differing_setting(&manifest.settings, &today) {
        return Err(format!("run {} was written with another `{key}`", manifest.run));
    }
    match version.parts.first() {
        Some(part) if part.arrow.schema() == schema => Ok(()),
        Some(_) => Err(format!(
            "the records' schema or metadata changed since run {} (feature width, label kind, edge feature \
             statistics)",
            manifest.run
        )),
        None => Err(format!("run {} lists no parts", manifest.run)),
    }
}

/// The first setting (of those that shape records) whose value differs between `before` and
/// `now`, each as the job's section serialized.
fn differing_setting(before: &serde_json::Value, now: &serde_json::Value) -> Option<String> {
    let keys = |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    let mut all = keys(before);
    all.extend(keys(now));
    all.sort();
    all.dedup();
    all.into_iter().filter(|k| !NOT_IN_RECORDS.contains(&k.as_str())).find(|k| before.get(k) != now.get(k))
}

/// A refresh that would compute more than 1 in this many records again runs in full: it writes
/// again, without their affected records, the parts it does not carry, which costs about what
/// writing them anew costs, and computes most records besides (BENCHMARKS.md, section 25: at
/// 24% affected a refresh took 0.86x a full run; at 74%, before this rule, 1.38x).
const FULL_PAST: u64 = 4;

/// Steps 1 and 2 for the output (`output`, and the place of its digests), today's `nodes` with
/// their `digests` and this worker's `targets`: what the refresh is, and, unless it runs in
/// full, the version it starts from and the affected set.
pub fn plan(
    worker: &mut Worker,
    (output, kept): (&PartsOf, &Place),
    config: &FlattenConfig,
    schema: &SchemaRef,
    (nodes, digests): (&NodeStore, &[Digest]),
    targets: &[i64],
) -> Result<(Refreshed, Option<(Base, Affected)>), Error> {
    let base = match open_previous(worker, &output.dir, kept, config, schema)? {
        Err(full) => return Ok((full, None)),
        Ok(base) => base,
    };
    let affected = match affected_set(worker, &base, nodes, digests, config.hops) {
        Err(e) if e.cause() == schemas::Cause::BadData => {
            return Ok((Refreshed::full(format!("the digests run {} kept cannot be read: {e}", base.run)), None));
        }
        Err(e) => return Err(e),
        Ok(affected) => affected,
    };
    let mine = targets.iter().filter(|&&t| affected.contains(t)).count() as u64;
    let counts = cluster::all_gather(worker.timely, vec![(mine, targets.len() as u64)]);
    let (hit, all) = counts.iter().fold((0, 0), |(h, a), &(m, t)| (h + m, a + t));
    let refreshed =
        Refreshed { from: Some(base.run.clone()), full: None, changed: affected.changed, affected: hit, targets: all };
    Ok(match hit > all / FULL_PAST {
        true => (refreshed.too_many(FULL_PAST), None),
        false => (refreshed, Some((base, affected))),
    })
}

/// Step 2: yesterday's digests from `base`'s state, today's of `nodes` (`digests`, by slot),
/// and the nodes a change can reach within `hops`. State that fails its checks is an error
/// (the caller runs in full).
fn affected_set(
    worker: &mut Worker,
    base: &Base,
    nodes: &NodeStore,
    digests: &[Digest],
    hops: usize,
) -> Result<Affected, Error> {
    let old = agree(worker.timely, read_digests(worker.io, &base.state))?;
    let new = nodes.ids.iter().copied().zip(digests.iter().copied());
    let edges = (0..nodes.len()).flat_map(|slot| nodes.sampled(slot).iter().map(move |e| (e.src, nodes.ids[slot])));
    Ok(sampling::affected::affected(worker.timely, old, new, edges, hops))
}

/// The `(id, digest)` rows of `files`, checked.
fn read_digests(io: &Io, files: &[ParquetFile]) -> Result<Vec<(i64, Digest)>, Error> {
    let mut out = Vec::new();
    for file in files {
        for rg in 0..file.row_groups() {
            file.read_row_group(io, rg, |batch, _| {
                let bad = || Error::BadData(format!("{}: not a table of node digests", file.name()));
                let ids = batch.column_by_name(NODE_ID).and_then(|c| c.as_any().downcast_ref::<Int64Array>());
                let sums = batch.column_by_name(DIGEST).and_then(|c| c.as_any().downcast_ref::<FixedSizeBinaryArray>());
                let (Some(ids), Some(sums)) = (ids, sums) else { return Err(bad()) };
                if sums.value_length() != 16 || ids.null_count() + sums.null_count() > 0 {
                    return Err(bad());
                }
                let digest = |i| Digest::from_le_bytes(sums.value(i).try_into().expect("16 bytes, checked above"));
                out.extend(ids.values().iter().enumerate().map(|(i, &id)| (id, digest(i))));
                Ok(())
            })?;
        }
    }
    Ok(out)
}

/// What [`carry_parts`] did on this worker.
#[derive(Debug, Default)]
pub struct Carried {
    /// Parts carried as they are.
    pub carried: Vec<PartEntry>,
    /// Parts written again without their affected rows.
    pub rewritten: Vec<StagedPart>,
    /// Rows those hold.
    pub kept_rows: u64,
    pub bytes: u64,
}

/// Step 3 for this worker's share of `base`'s parts: each carried, or written again without
/// the rows whose root `affected` holds (named as worker `peers + index` of this run, apart
/// from the rounds' parts). A part of no rows goes.
pub fn carry_parts(
    worker: &mut Worker,
    base: Base,
    affected: &Affected,
    output: &PartsOf,
    schema: &SchemaRef,
    part_limit: u64,
) -> Result<Carried, Error> {
    let (index, peers) = (worker.timely.index(), worker.timely.peers());
    let to = PartsOf { worker: peers + index, ..output.clone() };
    let encoder = Encoder::new(worker.io.clone(), to, schema.clone(), part_limit);
    let mut done = Carried::default();
    // The encoder on a thread of its own, as the rounds' is: decoding and filtering a part
    // runs beside encoding the one before.
    let written = WriterThread::spawn(encoder, format!("graphflat:rewriter-{index}")).and_then(|mut thread| {
        let mut carry = || {
            for part in &base.parts {
                let touched = touched_row_groups(worker.io, part, affected)?;
                match touched.iter().any(|&t| t) {
                    false if part.rows() > 0 => done.carried.push(part.listed_entry().expect("a listed part")),
                    false => {}
                    true => done.kept_rows += rewrite(worker.io, part, affected, schema, &mut thread)?,
                }
            }
            Ok::<(), Rewrite>(())
        };
        match carry() {
            Ok(()) | Err(Rewrite::Stopped) => thread.finish(),
            // The thread stops without closing its part (see crate::writer_thread).
            Err(Rewrite::Failed(e)) => Err(e),
        }
    });
    let written = agree(worker.timely, written)?;
    done.rewritten = written.entries;
    done.bytes = written.bytes_written;
    Ok(done)
}

/// Why writing a part again stopped: the writer's thread stopped (its error comes with
/// [`WriterThread::finish`]), or a part did not read.
enum Rewrite {
    Stopped,
    Failed(Error),
}

impl From<Error> for Rewrite {
    fn from(e: Error) -> Self {
        Rewrite::Failed(e)
    }
}

/// Whether each row group of `part` holds a root that `affected` holds (its `root_id` column
/// alone read).
fn touched_row_groups(io: &Io, part: &ParquetFile, affected: &Affected) -> Result<Vec<bool>, Error> {
    let root = [schemas::record::ROOT_ID];
    (0..part.row_groups())
        .map(|rg| {
            let mut touched = false;
            part.read_columns(io, rg, Some(&root), |batch, _| {
                touched |= roots(&batch, part)?.values().iter().any(|&r| affected.contains(r));
                Ok(())
            })?;
            Ok(touched)
        })
        .collect()
}

/// The `root_id` column of a batch of records.
fn roots<'a>(batch: &'a RecordBatch, part: &ParquetFile) -> Result<&'a Int64Array, Error> {
    batch
        .column_by_name(schemas::record::ROOT_ID)
        .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        .ok_or_else(|| Error::BadData(format!("{}: records without an int64 root_id", part.name())))
}

/// Writes `part`'s records whose root `affected` does not hold into `encoder`, row group by
/// row group; returns how many.
fn rewrite(
    io: &Io,
    part: &ParquetFile,
    affected: &Affected,
    schema: &SchemaRef,
    writer: &mut WriterThread,
) -> Result<u64, Rewrite> {
    let mut kept = 0u64;
    let mut stopped = false;
    for rg in 0..part.row_groups() {
        part.read_row_group(io, rg, |batch, _| {
            let keep: BooleanArray =
                roots(&batch, part)?.values().iter().map(|&r| Some(!affected.contains(r))).collect();
            let rows = arrow_select::filter::filter_record_batch(&batch, &keep)
                .and_then(|rows| RecordBatch::try_new(schema.clone(), rows.columns().to_vec()))
                .map_err(|e| Error::BadData(format!("{}: row group {rg}: {e}", part.name())))?;
            kept += rows.num_rows() as u64;
            // No batch of no rows: a part whose every record is affected is not written at all.
            if rows.num_rows() > 0 {
                let bytes = rows.get_array_memory_size();
                stopped |= !stopped && writer.push(vec![Piece::Batch(rows, bytes)]).is_err();
            }
            Ok(())
        })?;
        stopped |= !stopped && writer.push(vec![Piece::EndRowGroup]).is_err();
        if stopped {
            return Err(Rewrite::Stopped);
        }
    }
    Ok(kept)
}

/// Step 4: this worker's nodes' digests, as parts of the state table (`to`).
pub fn write_state(
    io: &Arc<Io>,
    to: &PartsOf,
    nodes: &NodeStore,
    digests: &[Digest],
) -> Result<Vec<StagedPart>, Error> {
    let schema = Arc::new(Schema::new(vec![
        Field::new(NODE_ID, DataType::Int64, false),
        Field::new(DIGEST, DataType::FixedSizeBinary(16), false),
    ]));
    let mut writer = PartWriter::new(io.clone(), to.clone(), schema.clone(), part_properties().build(), u64::MAX);
    for (ids, sums) in nodes.ids.chunks(STATE_BATCH).zip(digests.chunks(STATE_BATCH)) {
        let sums = FixedSizeBinaryArray::try_from_iter(sums.iter().map(|d| d.to_le_bytes()))
            .map_err(|e| Error::Internal(format!("the state's digests: {e}")))?;
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(ids.to_vec())), Arc::new(sums)])
                .map_err(|e| Error::Internal(format!("the state's batch: {e}")))?;
        writer.write(&batch)?;
    }
    writer.finish()?;
    Ok(writer.parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_lies_beside_the_output() {
        assert_eq!(state_uri("/data/flat").as_deref(), Some("/data/.flat.graphflat-state"));
        assert_eq!(state_uri("/data/flat/").as_deref(), Some("/data/.flat.graphflat-state"));
        assert_eq!(state_uri("flat").as_deref(), Some(".flat.graphflat-state"));
        assert_eq!(state_uri("s3://bucket/daily/flat").as_deref(), Some("s3://bucket/daily/.flat.graphflat-state"));
        assert_eq!(state_uri("s3://bucket"), None);
        assert_eq!(state_uri("s3://bucket/"), None);
        assert_eq!(state_uri("/"), None);
    }

    #[test]
    fn only_settings_that_shape_records_must_match() {
        let a = serde_json::json!({"nodes": "day1/nodes", "hops": 2, "fanouts": [10, 5], "batch_size": 10});
        let b = serde_json::json!({"nodes": "day2/nodes", "hops": 2, "fanouts": [10, 5], "batch_size": 99});
        assert_eq!(differing_setting(&a, &b), None);
        let c = serde_json::json!({"nodes": "day2/nodes", "hops": 2, "fanouts": [10, 4]});
        assert_eq!(differing_setting(&a, &c).as_deref(), Some("fanouts"));
        let d = serde_json::json!({"hops": 2, "fanouts": [10, 5], "seed": 3});
        assert_eq!(differing_setting(&a, &d).as_deref(), Some("seed"));
    }
}
