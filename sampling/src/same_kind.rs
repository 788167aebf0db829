//! The check that a table's id columns hold the node table's id kind (integers or strings),
//! shared by the map step (edges), the owner map and GraphInfer's tables (learned rows, pairs).

use schemas::ids::IdKind;
use schemas::{BadInput, Location};
use tables::ParquetFile;

use crate::Error;

/// That the edge (or pair) table's id `columns` hold ids of the node table's `kind`.
pub fn same_id_kind(files: &[ParquetFile], columns: &[&str], kind: IdKind) -> Result<(), Error> {
    for file in files {
        for &column in columns {
            let Some((_, field)) = file.arrow.schema().column_with_name(column) else { continue };
            if IdKind::of(field.data_type()) != Some(kind) {
                let at = Location::file(file.name()).column(column);
                let problem =
                    format!("expected {} as the node table's node_id holds, found {}", kind.name(), field.data_type());
                return Err(BadInput::new(at, problem).into());
            }
        }
    }
    Ok(())
}
