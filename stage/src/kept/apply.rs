//! The kept tables' new version, one file at a time: a snapshot's files copied, a kept part
//! copied as it is when the delta names none of its rows (else written again without them), and the
//! delta's upserts written as parts of their own.

use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::SchemaRef;
use arrow_select::filter::filter_record_batch;
use parquet::basic::Compression;
use schemas::ids::IdKind;
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::staging::StagedPart;
use tables::{Error, Io, ParquetFile};

use super::delta::{Changes, OP, Op, ids_of, key};

/// Bytes past which a kept table's part closes: small enough that a change concentrated in a
/// few nodes leaves most parts copied as they are, not written again.
const KEPT_PART_BYTES: u64 = 16 << 20;

/// The kept tables' codec: LZ4, where the outputs have zstd. Only this project reads and
/// rewrites them, on every delta day, and at 1M nodes LZ4 took the apply from 1.5-1.6 s to
/// 1.0-1.4 s (the map that reads them back got faster too) for 25% more disk.
const KEPT_CODEC: Compression = Compression::LZ4_RAW;

/// The kept tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Nodes,
    Edges,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::Nodes => "nodes",
            Table::Edges => "edges",
        }
    }

    fn key_columns(self) -> &'static [&'static str] {
        match self {
            Table::Nodes => &["node_id"],
            Table::Edges => &["src", "dst"],
        }
    }

    /// Which rows of `batch` (of `file`, from row `first`) stay after `changes`.
    fn kept(
        self,
        batch: &RecordBatch,
        (file, first): (&str, u64),
        changes: &Changes,
        kind: IdKind,
    ) -> Result<BooleanArray, Error> {
        Ok(match self {
            Table::Nodes => {
                let ids = ids_of(batch, "node_id", file, first, kind)?;
                (0..ids.len()).map(|i| Some(!changes.drops_node(key(&ids, i)))).collect()
            }
            Table::Edges => {
                let (src, dst) = (ids_of(batch, "src", file, first, kind)?, ids_of(batch, "dst", file, first, kind)?);
                (0..src.len()).map(|i| Some(!changes.drops_edge(key(&src, i), key(&dst, i)))).collect()
            }
        })
    }
}

/// What a worker did to one kept table.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Done {
    /// Parts written or copied.
    pub staged: Vec<StagedPart>,
    /// Kept parts copied as they are (a server-side copy, a link on a local disk).
    pub copied: u64,
    /// Kept parts written again, and the kept rows they dropped.
    pub rewritten: u64,
    pub dropped: u64,
}

/// A kept part of the current slot on a delta day: copied into `to` as it is when `changes`
/// names none of its rows, else written again there without them.
pub fn carry_or_rewrite(
    io: &Arc<Io>,
    (file, table): (&ParquetFile, Table),
    (changes, kind): (&Changes, IdKind),
    to: PartsOf,
    done: &mut Done,
) -> Result<(), Error> {
    let name = file.name();
    let mut dropped = 0;
    for rg in 0..file.row_groups() {
        file.read_columns(io, rg, Some(table.key_columns()), |batch, first| {
            let kept = table.kept(&batch, (&name, first), changes, kind)?;
            dropped += kept.false_count() as u64;
            Ok(())
        })?;
    }
    if dropped == 0 {
        done.staged.push(io.block_on(tables::staging::stage_copy(&to.dir, &to.run, file))?);
        done.copied += 1;
        return Ok(());
    }
    let schema = file.arrow.schema().clone();
    let keep = |batch: RecordBatch, first| {
        let kept = table.kept(&batch, (&name, first), changes, kind)?;
        filter_record_batch(&batch, &kept).map_err(|e| Error::Internal(format!("{name}: filtering kept rows: {e}")))
    };
    done.staged.extend(copy(io, file, (to, schema), keep)?);
    done.rewritten += 1;
    done.dropped += dropped;
    Ok(())
}

/// A delta file's upserts, without their `op`, into `to`.
pub fn upserts(io: &Arc<Io>, file: &ParquetFile, to: PartsOf) -> Result<Vec<StagedPart>, Error> {
    let name = file.name();
    let without_op = file.arrow.schema().fields().iter().filter(|f| f.name() != OP).cloned().collect::<Vec<_>>();
    let schema: SchemaRef = Arc::new(arrow_schema::Schema::new(without_op));
    let columns: Vec<usize> =
        (0..file.arrow.schema().fields().len()).filter(|&i| file.arrow.schema().field(i).name() != OP).collect();
    let keep = |batch: RecordBatch, first| {
        let ops = super::delta::ops(&batch, &name, first)?;
        let upsert: BooleanArray = ops.iter().map(|&op| Some(op == Op::Upsert)).collect();
        let shaped = batch.project(&columns).and_then(|b| filter_record_batch(&b, &upsert));
        shaped.map_err(|e| Error::Internal(format!("{name}: a delta's upserts: {e}")))
    };
    copy(io, file, (to, schema), keep)
}

/// A snapshot's file, whole, into `to`.
pub fn whole(io: &Arc<Io>, file: &ParquetFile, to: PartsOf) -> Result<Vec<StagedPart>, Error> {
    copy(io, file, (to, file.arrow.schema().clone()), |batch, _| Ok(batch))
}

/// The rows of `file` as `shape` makes each batch (given its first row), into parts of
/// `schema` in `to`, row group by row group.
fn copy(
    io: &Arc<Io>,
    file: &ParquetFile,
    (to, schema): (PartsOf, SchemaRef),
    shape: impl Fn(RecordBatch, u64) -> Result<RecordBatch, Error>,
) -> Result<Vec<StagedPart>, Error> {
    let props = part_properties().set_compression(KEPT_CODEC).build();
    let mut writer = PartWriter::new(io.clone(), to, schema.clone(), props, KEPT_PART_BYTES);
    for rg in 0..file.row_groups() {
        file.read_row_group(io, rg, |batch, first| {
            let shaped = shape(batch, first)?;
            let rows = RecordBatch::try_new(schema.clone(), shaped.columns().to_vec())
                .map_err(|e| Error::BadData(format!("{}: {e}", file.name())))?;
            match rows.num_rows() {
                0 => Ok(()),
                _ => writer.write(&rows),
            }
        })?;
    }
    writer.finish()?;
    Ok(writer.parts)
}
