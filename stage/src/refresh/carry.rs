//! Step 3 of a refresh: yesterday's parts, each carried into the new version as it is when it
//! holds no affected row, else written again without its affected rows into a [`RowSink`],
//! row group by row group (a row group of GraphFlat's records still holds one split). A part
//! whose every row is affected is not written again at all.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, BooleanArray, RecordBatch};
use arrow_schema::SchemaRef;
use sampling::affected::Affected;
use schemas::ids::{StringHash, StringIds};
use tables::commit::PartEntry;
use tables::{Error, Io, ParquetFile};

/// Which node a row is about, read from its columns.
#[derive(Debug, Clone)]
pub struct Key {
    /// The column of the node's id (within its type, in a typed graph): `int64`, or `utf8`
    /// holding the node's string in a graph keyed by strings.
    pub id: &'static str,
    pub node_type: TypeOf,
    /// A graph keyed by strings: the day's table that gives each string its internal id
    /// (`schemas::ids`); `None` for integer ids.
    pub strings: Option<StringIds>,
}

/// How a row's node type is known.
#[derive(Debug, Clone)]
pub enum TypeOf {
    /// Every row is of one type (`None`: a homogeneous graph), its ids packed with it
    /// (`schemas::typed::pack`: a typed graph's records of one type, as GraphFlat's).
    Fixed(Option<u8>),
    /// A `utf8` column names each row's type, numbered by `types` (GraphInfer's rows in a
    /// typed graph).
    Column { name: &'static str, types: Vec<String> },
}

impl Key {
    /// The columns [`Key::affected`] reads.
    fn columns(&self) -> Vec<&str> {
        match &self.node_type {
            TypeOf::Fixed(_) => vec![self.id],
            TypeOf::Column { name, .. } => vec![name, self.id],
        }
    }

    /// Whether each row of `batch` (read from `part`) is about a node that `affected` holds.
    fn affected(&self, batch: &RecordBatch, part: &ParquetFile, affected: &Affected) -> Result<Vec<bool>, Error> {
        let bad = |what: &str| Error::BadData(format!("{}: {what}", part.name()));
        let column = |name: &str| batch.column_by_name(name).ok_or_else(|| bad(&format!("no `{name}` column")));
        let kind = if self.strings.is_some() { "utf8 without nulls" } else { "int64" };
        let ids = internal_ids(column(self.id)?, self.strings.as_ref())
            .ok_or_else(|| bad(&format!("`{}` is not {kind}", self.id)))?;
        let packed = |t: u8, id: i64| {
            schemas::typed::pack(t, id).ok_or_else(|| bad(&format!("id {id} is outside a typed graph's range")))
        };
        match &self.node_type {
            TypeOf::Fixed(node_type) => {
                ids.iter().map(|&id| Ok(affected.contains(node_type.map_or(Ok(id), |t| packed(t, id))?))).collect()
            }
            TypeOf::Column { name, types } => {
                let names = column(name)?;
                let names = names.as_string_opt::<i32>().ok_or_else(|| bad(&format!("`{name}` is not utf8")))?;
                let number = |name: &str| types.iter().position(|t| t == name).map(|t| t as u8);
                (0..ids.len())
                    .map(|i| {
                        let t = number(names.value(i))
                            .ok_or_else(|| bad(&format!("unknown node type {:?}", names.value(i))))?;
                        Ok(affected.contains(packed(t, ids[i])?))
                    })
                    .collect()
            }
        }
    }
}

/// A column of node ids as internal ids: `int64` as they are, or strings through the day's
/// `strings` table; `None` when the column is neither (or a string is null).
fn internal_ids(column: &ArrayRef, strings: Option<&StringIds>) -> Option<Vec<i64>> {
    match strings {
        None => column.as_primitive_opt::<Int64Type>().map(|ids| ids.values().to_vec()),
        Some(table) => {
            let keys = column.as_string_opt::<i32>()?;
            keys.iter().map(|key| key.map(|key| table.id(StringHash::of(key)))).collect()
        }
    }
}

/// Where the rows of a part written again go: the stage's own writer.
pub trait RowSink {
    fn push(&mut self, rows: RecordBatch) -> Result<(), Rewrite>;
    /// The end of a row group of the part read (a sink may keep the row groups as they were).
    fn end_row_group(&mut self) -> Result<(), Rewrite>;
}

/// Why writing a part again stopped: the sink stopped (its error comes with its end), or a
/// part did not read or write.
#[derive(Debug)]
pub enum Rewrite {
    Stopped,
    Failed(Error),
}

impl From<Error> for Rewrite {
    fn from(e: Error) -> Self {
        Rewrite::Failed(e)
    }
}

/// What [`carry_parts`] did on this worker.
#[derive(Debug, Default)]
pub struct Carried {
    /// Parts carried as they are.
    pub carried: Vec<PartEntry>,
    /// Rows kept in the parts written again.
    pub kept_rows: u64,
}

/// Each of `parts` carried, or written again into `sink` without the rows whose node (`key`)
/// `affected` holds, with today's `schema`.
pub fn carry_parts(
    io: &Io,
    parts: &[ParquetFile],
    key: &Key,
    affected: &Affected,
    schema: &SchemaRef,
    sink: &mut dyn RowSink,
) -> Result<Carried, Rewrite> {
    let mut done = Carried::default();
    for part in parts {
        let touched = touched_row_groups(io, part, key, affected)?;
        match touched.iter().any(|&t| t) {
            false if part.rows() > 0 => done.carried.push(part.listed_entry().expect("a listed part")),
            false => {}
            true => done.kept_rows += rewrite(io, part, key, affected, schema, sink)?,
        }
    }
    Ok(done)
}

/// Whether each row group of `part` holds an affected row (its key's columns alone read).
fn touched_row_groups(io: &Io, part: &ParquetFile, key: &Key, affected: &Affected) -> Result<Vec<bool>, Error> {
    let columns = key.columns();
    (0..part.row_groups())
        .map(|rg| {
            let mut touched = false;
            part.read_columns(io, rg, Some(&columns), |batch, _| {
                touched |= key.affected(&batch, part, affected)?.into_iter().any(|a| a);
                Ok(())
            })?;
            Ok(touched)
        })
        .collect()
}

/// Writes `part`'s rows that are not affected into `sink`, row group by row group; returns
/// how many.
fn rewrite(
    io: &Io,
    part: &ParquetFile,
    key: &Key,
    affected: &Affected,
    schema: &SchemaRef,
    sink: &mut dyn RowSink,
) -> Result<u64, Rewrite> {
    let mut kept = 0u64;
    for rg in 0..part.row_groups() {
        let mut batches = Vec::new();
        part.read_row_group(io, rg, |batch, _| {
            let keep: BooleanArray = key.affected(&batch, part, affected)?.into_iter().map(|a| Some(!a)).collect();
            let rows = arrow_select::filter::filter_record_batch(&batch, &keep)
                .and_then(|rows| RecordBatch::try_new(schema.clone(), rows.columns().to_vec()))
                .map_err(|e| Error::BadData(format!("{}: row group {rg}: {e}", part.name())))?;
            // No batch of no rows: a part whose every row is affected is not written at all.
            if rows.num_rows() > 0 {
                batches.push(rows);
            }
            Ok(())
        })?;
        for rows in batches {
            kept += rows.num_rows() as u64;
            sink.push(rows)?;
        }
        sink.end_row_group()?;
    }
    Ok(kept)
}
