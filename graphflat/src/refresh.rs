//! GraphFlat's side of a refresh (`incremental = true`, `docs/refresh.md`; the phases are
//! `stage::refresh`'s): which settings shape records, the column that names a record's node,
//! and the writer thread that yesterday's parts are written again through.

use arrow_schema::SchemaRef;
use sampling::affected::Affected;
use sampling::agree;
use schemas::FlattenConfig;
use stage::Worker;
use stage::refresh::carry::Rewrite;
use stage::refresh::{Base, Key, Qualify, RowSink, TypeOf};
use tables::commit::Stage;
use tables::parts::PartsOf;
use tables::staging::StagedPart;

use crate::error::Error;
use crate::sink::{Encoder, Piece};
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
        rows: "records",
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
