//! GraphFlat's side of a refresh (`incremental = true`, `docs/refresh.md`; the phases are
//! `stage::refresh`'s): which settings shape records, the column that names a record's node,
//! the writer thread that yesterday's parts are written again through, and the two refreshes:
//! of node records ([`targets`]) and of link records ([`links`]).
//!
//! **Link records.** A link record is a function of its task (source, destination, split and
//! negatives: `crate::links::Task`) and of its endpoints' node records, nothing else. Its rows
//! are carried and written again by source (`link_src`): a source is **dirty** when the digest
//! of its tasks changed since the base's run (a supervision edge added, removed or given
//! another split, or another negative drawn: the draws depend on every node's weight, and the
//! digest covers the ids drawn, so no rule about the draw is needed), or when an endpoint of
//! one of its tasks is in the affected set (its node record may have changed). Every other
//! source has yesterday's tasks over yesterday's endpoint records, so yesterday's link records,
//! bit for bit; the dirty sources' tasks are computed again.

use arrow_schema::SchemaRef;
use sampling::affected::Affected;
use sampling::agree;
use sampling::digest::Digest;
use schemas::FlattenConfig;
use schemas::layers::Layers;
use stage::refresh::carry::Rewrite;
use stage::refresh::{Base, Found, Key, Qualify, Refreshed, RowSink, TypeOf};
use stage::{Graph, Worker, Written};
use tables::commit::Stage;
use tables::parts::PartsOf;
use tables::staging::StagedPart;

use crate::error::Error;
use crate::links::{self, Task};
use crate::sink::{Encoder, Piece};
use crate::targets::flatten_targets;
use crate::write::RecordStats;
use crate::writer_thread::WriterThread;

/// Settings that change no record besides those no stage compares
/// (`stage::refresh::Qualify::not_compared`): how the work is cut. Every other key must equal
/// the previous run's.
const NOT_IN_RECORDS: &[&str] = &["batch_size", "max_in_flight", "hub_threshold"];

/// What a previous version must be for a refresh of `config`'s records with `schema`.
pub fn qualify<'a>(config: &FlattenConfig, schema: &'a SchemaRef) -> Qualify<'a> {
    Qualify {
        stage: Stage::Flatten,
        settings: serde_json::to_value(config).unwrap_or_default(),
        not_compared: NOT_IN_RECORDS,
        schema,
        schema_holds: "feature width, label kind, edge feature statistics",
        rows: if config.link().is_some() { "link records" } else { "records" },
        full_past: FULL_PAST,
    }
}

/// A refresh of GraphFlat's records that would compute more than 1 in this many again runs in
/// full: it writes again, without their affected records, the parts it does not carry, which
/// costs about what writing them anew costs, and computes most records besides (BENCHMARKS.md,
/// section 25: at 24% of the records affected a refresh took 0.86-1.08x a full run; at 74%,
/// before this rule, 1.38x).
const FULL_PAST: u64 = 4;

/// The node a record is about: its `root_id`, packed with the target type in a typed graph
/// (records hold the id within its type; the affected set, the packed key).
pub fn key(target: Option<u8>) -> Key {
    Key { id: schemas::record::ROOT_ID, node_type: TypeOf::Fixed(target), strings: None }
}

/// The node a link record is keyed by: its source (`link_src`), packed with the link
/// relation's source type in a typed graph.
pub fn link_key(src_type: Option<u8>) -> Key {
    Key { id: schemas::record::LINK_SRC, node_type: TypeOf::Fixed(src_type), strings: None }
}

/// What [`carry_parts`] did on this worker.
#[derive(Debug, Default)]
pub struct Carried {
    /// Parts carried as they are.
    pub carried: Vec<tables::commit::PartEntry>,
    /// Parts written again without their affected records.
    pub rewritten: Vec<StagedPart>,
    /// Records those hold.
    pub kept_rows: u64,
    pub bytes: u64,
}

/// This worker's share of `base`'s parts, each carried or written again without the records
/// whose root `affected` holds (named as worker `peers + index` of this run, apart from the
/// rounds' parts), on a writer thread as the rounds' parts are: decoding and filtering a part
/// runs beside encoding the one before.
pub fn carry_parts(
    worker: &mut Worker,
    (base, key): (Base, &Key),
    affected: &Affected,
    output: &PartsOf,
    schema: &SchemaRef,
    part_limit: u64,
) -> Result<Carried, Error> {
    let (index, peers) = (worker.timely.index(), worker.timely.peers());
    let to = PartsOf { worker: peers + index, ..output.clone() };
    let encoder = Encoder::new(worker.io.clone(), to, schema.clone(), part_limit);
    let mut done = stage::refresh::Carried::default();
    let written = WriterThread::spawn(encoder, format!("graphflat:rewriter-{index}")).and_then(|thread| {
        let mut sink = ThreadSink(thread);
        match stage::refresh::carry_parts(worker.io, &base.parts, key, affected, schema, &mut sink) {
            Ok(carried) => {
                done = carried;
                sink.0.finish()
            }
            Err(Rewrite::Stopped) => sink.0.finish(),
            // The thread stops without closing its part (see crate::writer_thread).
            Err(Rewrite::Failed(e)) => Err(e),
        }
    });
    let written = agree(worker.timely, written)?;
    Ok(Carried {
        carried: done.carried,
        rewritten: written.entries,
        kept_rows: done.kept_rows,
        bytes: written.bytes_written,
    })
}

/// The writer thread as the sink of records written again.
struct ThreadSink(WriterThread);

impl RowSink for ThreadSink {
    fn push(&mut self, rows: arrow_array::RecordBatch) -> Result<(), Rewrite> {
        let bytes = rows.get_array_memory_size();
        self.0.push(vec![Piece::Batch(rows, bytes)]).map_err(|_| Rewrite::Stopped)
    }

    fn end_row_group(&mut self) -> Result<(), Rewrite> {
        self.0.push(vec![Piece::EndRowGroup]).map_err(|_| Rewrite::Stopped)
    }
}

/// A node job with `incremental`: today's digests kept beside the output, then, over a
/// previous version that qualifies, its parts carried or written again and the affected
/// targets through the rounds; otherwise every target, as a full run. Returns what the refresh
/// did, the same on every worker.
pub fn targets(
    worker: &mut Worker,
    config: &FlattenConfig,
    graph: Graph,
    (layers, target): (Vec<Layers>, Option<u8>),
    schema: SchemaRef,
    output: &PartsOf,
) -> Result<(Written<RecordStats>, Refreshed), Error> {
    let nodes = graph.nodes;
    let digests = sampling::digest::digests(&nodes);
    let kept = worker.extra_outputs[0].clone();
    let state = agree(worker.timely, stage::refresh::write_state(worker.io, &kept, &nodes, &digests, None))?;
    worker.clock.lap("digests");
    // Keys: a typed graph's target type is packed in them (`schemas::typed`).
    let mut targets: Vec<i64> = graph.targets.iter().map(|t| t.0).collect();
    let qualify = qualify(config, &schema);
    let places = (&output.dir, &kept.dir);
    let (mut refreshed, base) =
        stage::refresh::plan(worker, places, &qualify, (&nodes, &digests), config.hops, &targets)?;
    worker.clock.lap("affected set");
    drop(digests);
    let mut carried = Carried::default();
    if let Some((base, affected)) = base {
        let to = (output, &schema, config.part_size_mb);
        if let Some(done) = carry(worker, (base, &key(target)), &affected, to, &mut refreshed)? {
            carried = done;
            targets.retain(|&t| affected.contains(t));
        }
    }
    let written = flatten_targets(worker, config, nodes, &targets, layers, schema, output)?;
    Ok((with_carried(written, carried, state), refreshed))
}

/// A link job with `incremental` (see the module doc): today's tasks drawn and their digests
/// kept with the nodes', then, over a previous version that qualifies, its parts carried or
/// written again without the dirty sources' records, and those sources' tasks through the
/// rounds; otherwise every task, as a full run. `src_type` is the link relation's source type
/// in a typed graph. Returns what the refresh did, the same on every worker.
pub fn links(
    worker: &mut Worker,
    config: &FlattenConfig,
    graph: Graph,
    (layers, src_type): (Vec<Layers>, Option<u8>),
    schema: SchemaRef,
    output: &PartsOf,
) -> Result<(Written<RecordStats>, Refreshed), Error> {
    let nodes = graph.nodes;
    let mut tasks = links::tasks(worker, config, &nodes, graph.supervision)?;
    let digests = sampling::digest::digests(&nodes);
    let task_digests = links::task_digests(&nodes, &tasks);
    let kept = worker.extra_outputs[0].clone();
    let written = stage::refresh::write_state(worker.io, &kept, &nodes, &digests, Some(&task_digests));
    let state = agree(worker.timely, written)?;
    worker.clock.lap("digests");
    let qualify = qualify(config, &schema);
    let found = stage::refresh::search(worker, (&output.dir, &kept.dir), &qualify, (&nodes, &digests), config.hops)?;
    drop(digests);
    let today = nodes.ids.iter().zip(task_digests).filter_map(|(&id, d)| d.map(|d| (id, d)));
    let planned = found.and_then(|found| dirty_sources(worker, &qualify, found, &tasks, today));
    worker.clock.lap("affected set");
    let mut carried = Carried::default();
    let refreshed = match planned {
        Err(full) => full,
        Ok((mut refreshed, base, dirty)) => {
            let to = (output, &schema, config.part_size_mb);
            if let Some(done) = carry(worker, (base, &link_key(src_type)), &dirty, to, &mut refreshed)? {
                carried = done;
                tasks.retain(|t| dirty.contains(t.src));
            }
            refreshed
        }
    };
    let written = links::write_links(worker, config, nodes, tasks, layers, schema, output)?;
    Ok((with_carried(written, carried, state), refreshed))
}

/// The sources whose link records a refresh over `found` computes again (see the module
/// doc), on every worker, from this worker's `tasks` and `today`'s digests of its sources'
/// tasks; `Err` when the run is full instead, saying why: the base's run kept no digests of
/// its tasks, or too many records would be computed again ([`stage::refresh::judge`]).
fn dirty_sources(
    worker: &mut Worker,
    qualify: &Qualify,
    found: Found,
    tasks: &[Task],
    today: impl Iterator<Item = (i64, Digest)>,
) -> Result<(Refreshed, Base, Affected), Refreshed> {
    if !found.base.tasks_kept {
        return Err(Refreshed::full(format!("run {} kept no digests of its link tasks", found.base.run)));
    }
    // Sources whose tasks changed, on differential-dataflow as the nodes' changes are.
    let changed = sampling::affected::changed(worker.timely, found.tasks.iter().copied(), today);
    let reaches = |t: &Task| changed.binary_search(&t.src).is_ok() || t.endpoints().any(|e| found.affected.contains(e));
    let (mut dirty, mut hit) = (Vec::new(), 0u64);
    for group in tasks.chunk_by(|a, b| a.src == b.src) {
        if group.iter().any(reaches) {
            dirty.push(group[0].src);
            hit += group.len() as u64;
        }
    }
    let mut refreshed = stage::refresh::judge(worker, qualify, &found, (hit, tasks.len() as u64))?;
    refreshed.changed_tasks = Some(changed.len() as u64);
    // Bounded by the rule above: at most 1 in `full_past` of the records' sources.
    let ids = cluster::all_gather(worker.timely, dirty);
    let dirty = Affected { changed: found.affected.changed, ids, past_limit: false };
    Ok((refreshed, found.base, dirty))
}

/// Step 3 over `base`: [`carry_parts`] into `output` (with `schema`, parts of `part_size_mb`),
/// then `None` where a part of `base` did not read, which makes `refreshed` a full run that
/// says so (`stage::refresh::carried_or_full`).
fn carry(
    worker: &mut Worker,
    (base, key): (Base, &Key),
    affected: &Affected,
    (output, schema, part_size_mb): (&PartsOf, &SchemaRef, u64),
    refreshed: &mut Refreshed,
) -> Result<Option<Carried>, Error> {
    let run = base.run.clone();
    let done = carry_parts(worker, (base, key), affected, output, schema, schemas::job::mb_bytes(part_size_mb));
    let done = stage::refresh::carried_or_full(done, &run, refreshed)?;
    worker.clock.lap("parts carried or rewritten");
    Ok(done)
}

/// A refresh's `written` with yesterday's parts it `carried` (or wrote again) and today's
/// digests (`state`, its extra output).
fn with_carried(mut written: Written<RecordStats>, carried: Carried, state: Vec<StagedPart>) -> Written<RecordStats> {
    written.own.new_parts = written.entries.len() as u64;
    written.own.rewritten = carried.rewritten.len() as u64;
    written.own.kept = carried.kept_rows;
    written.bytes += carried.bytes;
    written.parts += carried.rewritten.len() as u32;
    written.entries.extend(carried.rewritten);
    written.extra_entries = vec![state];
    written.carried = carried.carried;
    written
}
