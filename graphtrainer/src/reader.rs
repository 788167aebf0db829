//! Reads GraphFlat's record parts into [`RecordGraph`]s: a worker's share of the row groups,
//! through `object_store` (local paths and URIs alike, as GraphFlat writes them).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int32Type, Int64Type, UInt8Type, UInt32Type};
use arrow_array::{Array, RecordBatch};
use gnn::RecordGraph;
use schemas::record::{self, FlattenMeta};
use schemas::{Label, Split};
use tables::{Io, ParquetFile, Place};

use crate::error::Error;

/// A record set's part files (in name order) and its flatten settings.
#[derive(Clone)]
pub struct RecordSet {
    io: Arc<Io>,
    pub place: Place,
    pub files: Vec<ParquetFile>,
    pub meta: FlattenMeta,
}

/// A table-layer failure as the trainer reports it (the whole chain of causes).
fn input(e: tables::Error) -> Error {
    Error::Input(e.chain())
}

impl RecordSet {
    /// Opens a finished record set (a local path or a URI): it must hold `_SUCCESS`.
    pub fn open(uri: &str) -> Result<Self, Error> {
        let io = Io::new().map_err(input)?;
        let place = Place::parse(uri).map_err(input)?;
        if !io.block_on(place.child(schemas::SUCCESS_MARKER).exists()) {
            return Err(Error::Input(format!(
                "{}: no {} marker; the flatten job that writes it did not finish",
                place.shown(),
                schemas::SUCCESS_MARKER
            )));
        }
        let files = tables::open_table(&io, &place).map_err(input)?;
        let first = &files[0];
        let meta = FlattenMeta::from_metadata(first.arrow.schema().metadata()).ok_or_else(|| {
            Error::Input(format!("{}: not a GraphFlat record table (no flatten metadata)", first.name()))
        })?;
        Ok(RecordSet { io, place, files, meta })
    }

    /// Every (file, row group), numbered alike on every worker.
    pub fn units(&self) -> Vec<(usize, usize)> {
        tables::units(&self.files, 0, 1)
    }

    /// Reads the row groups `units`, keeping records whose split passes `keep`.
    pub fn read(
        &self,
        units: &[(usize, usize)],
        keep: impl Fn(Option<Split>) -> bool,
    ) -> Result<Vec<RecordGraph>, Error> {
        let mut out = Vec::new();
        for &(f, rg) in units {
            let file = &self.files[f];
            let mut failure = None;
            file.read_row_group(&self.io, rg, |batch, _| {
                if let Err(e) = decode(&batch, &mut out, &keep) {
                    failure.get_or_insert(e);
                }
                Ok(())
            })
            .map_err(input)?;
            if let Some(e) = failure {
                return Err(Error::Input(format!("{}: {e}", file.name())));
            }
        }
        Ok(out)
    }
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a dyn Array, String> {
    batch.column_by_name(name).map(|c| c.as_ref()).ok_or_else(|| format!("missing column {name:?}"))
}

/// A `list<primitive>` column, resolved once per batch: each row's values as a slice.
struct ListColumn<'a, T: arrow_array::ArrowPrimitiveType> {
    offsets: &'a [i32],
    values: &'a [T::Native],
}

impl<'a, T: arrow_array::ArrowPrimitiveType> ListColumn<'a, T> {
    fn new(batch: &'a RecordBatch, name: &str) -> Result<Self, String> {
        let list = column(batch, name)?.as_list_opt::<i32>().ok_or_else(|| format!("column {name:?} is not a list"))?;
        let values =
            list.values().as_primitive_opt::<T>().ok_or_else(|| format!("column {name:?} has the wrong item type"))?;
        Ok(ListColumn { offsets: list.value_offsets(), values: values.values() })
    }

    fn row(&self, row: usize) -> Vec<T::Native> {
        self.values[self.offsets[row] as usize..self.offsets[row + 1] as usize].to_vec()
    }
}

/// The label column: class ids, or fixed-size lists of multi-hot targets.
enum Labels<'a> {
    Classes(&'a arrow_array::Int64Array),
    Targets(&'a arrow_array::FixedSizeListArray),
}

impl<'a> Labels<'a> {
    fn new(batch: &'a RecordBatch) -> Result<Self, String> {
        let array = column(batch, record::LABEL)?;
        if let Some(classes) = array.as_primitive_opt::<Int64Type>() {
            return Ok(Labels::Classes(classes));
        }
        let targets = array.as_fixed_size_list_opt().ok_or("label is neither int64 nor fixed_size_list<float32>")?;
        targets.values().as_primitive_opt::<Float32Type>().ok_or("label targets are not float32")?;
        Ok(Labels::Targets(targets))
    }

    fn get(&self, row: usize) -> Option<Label> {
        match self {
            Labels::Classes(c) => c.is_valid(row).then(|| Label::Class(c.value(row))),
            Labels::Targets(t) => {
                t.is_valid(row).then(|| Label::Targets(t.value(row).as_primitive::<Float32Type>().values().to_vec()))
            }
        }
    }
}

fn decode(
    batch: &RecordBatch,
    out: &mut Vec<RecordGraph>,
    keep: &impl Fn(Option<Split>) -> bool,
) -> Result<(), String> {
    let roots = column(batch, record::ROOT_ID)?.as_primitive_opt::<Int64Type>().ok_or("root_id is not int64")?;
    let labels = Labels::new(batch)?;
    let splits = column(batch, record::SPLIT)?.as_string_opt::<i32>().ok_or("split is not utf8")?;
    let features = column(batch, record::NODE_FEATURES)?.as_list_opt::<i32>().ok_or("node_features is not a list")?;
    let hops = ListColumn::<UInt8Type>::new(batch, record::NODE_HOPS)?;
    let in_degrees = ListColumn::<Int64Type>::new(batch, record::NODE_IN_DEGREES)?;
    let edge_src = ListColumn::<Int32Type>::new(batch, record::EDGE_SRC)?;
    let edge_dst = ListColumn::<Int32Type>::new(batch, record::EDGE_DST)?;
    let edge_weights = ListColumn::<Float32Type>::new(batch, record::EDGE_WEIGHTS)?;
    let edge_layers = ListColumn::<UInt32Type>::new(batch, record::EDGE_LAYERS)?;
    for row in 0..batch.num_rows() {
        let split = if splits.is_valid(row) { Split::parse(splits.value(row)) } else { None };
        if !keep(split) {
            continue;
        }
        let per_node = features.value(row);
        let per_node = per_node.as_fixed_size_list_opt().ok_or("node_features items are not fixed-size lists")?;
        let values = per_node.values().as_primitive_opt::<Float32Type>().ok_or("node features are not float32")?;
        let (start, len) =
            (per_node.offset() * per_node.value_length() as usize, per_node.len() * per_node.value_length() as usize);
        out.push(RecordGraph {
            root: roots.value(row),
            label: labels.get(row),
            split,
            hops: hops.row(row),
            in_degrees: in_degrees.row(row),
            features: values.values()[start..start + len].to_vec(),
            edge_src: edge_src.row(row),
            edge_dst: edge_dst.row(row),
            edge_weights: edge_weights.row(row),
            edge_layers: edge_layers.row(row),
        });
    }
    Ok(())
}
