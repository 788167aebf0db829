//! The output table, one row per node:
//!
//! | column | type |
//! | --- | --- |
//! | `node_type` | `utf8`, a typed graph only: the node's type |
//! | `node_id` | `int64` (in a typed graph, the id within its type), or `utf8`: the original strings of a graph keyed by strings |
//! | `part` | `int32`: the node's part, from 0 to `parts` - 1 |
//!
//! The schema's metadata holds the part count and the settings (`graphpartition.*` keys).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use sampling::NodeStore;
use tables::Error;
use tables::parts::{PartWriter, PartsOf, part_properties};

pub use schemas::nodes::NODE_ID;
pub use schemas::parts::PART;
pub use schemas::typed::NODE_TYPE;

/// Rows per batch written.
const BATCH: usize = 65_536;

/// The table's schema for `nodes` (a typed graph names its types; strings keep their kind).
pub fn schema(nodes: &NodeStore, typed: bool, metadata: HashMap<String, String>) -> SchemaRef {
    let mut fields = Vec::new();
    if typed {
        fields.push(Field::new(NODE_TYPE, DataType::Utf8, false));
    }
    let id = if nodes.strings.is_some() { DataType::Utf8 } else { DataType::Int64 };
    fields.push(Field::new(NODE_ID, id, false));
    fields.push(Field::new(PART, DataType::Int32, false));
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// Writes one row per own node (`part_of[slot]`), in slot order; returns the rows written.
pub fn write(
    writer: &mut PartWriter,
    nodes: &NodeStore,
    type_names: Option<&[String]>,
    part_of: &[u32],
) -> Result<u64, Error> {
    let schema = writer.schema().clone();
    for start in (0..nodes.len()).step_by(BATCH) {
        let slots = start..(start + BATCH).min(nodes.len());
        let mut columns: Vec<ArrayRef> = Vec::new();
        let keys: Vec<(u8, i64)> = match type_names {
            Some(_) => slots.clone().map(|s| schemas::typed::unpack(nodes.ids[s])).collect(),
            None => slots.clone().map(|s| (0, nodes.ids[s])).collect(),
        };
        if let Some(names) = type_names {
            columns.push(Arc::new(StringArray::from_iter_values(keys.iter().map(|(t, _)| &names[usize::from(*t)]))));
        }
        let ids: ArrayRef = match nodes.strings {
            Some(_) => Arc::new(slots.clone().map(|s| nodes.key(s)).collect::<StringArray>()),
            None => Arc::new(Int64Array::from_iter_values(keys.iter().map(|(_, id)| *id))),
        };
        columns.push(ids);
        columns.push(Arc::new(Int32Array::from_iter_values(slots.map(|s| part_of[s] as i32))));
        let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| Error::Internal(e.to_string()))?;
        writer.write(&batch)?;
    }
    Ok(nodes.len() as u64)
}

/// A writer of this worker's parts of the output.
pub fn writer(io: &Arc<tables::Io>, output: &PartsOf, schema: SchemaRef, part_size_mb: u64) -> PartWriter {
    PartWriter::new(io.clone(), output.clone(), schema, part_properties().build(), schemas::job::mb_bytes(part_size_mb))
}
