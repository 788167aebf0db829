//! Step 4 of a refresh, and what step 2 reads back: the nodes' digests, kept in a table of
//! their own beside the output (`.<output>.graphflat-state`), committed with it.
//!
//! | column | type |
//! | --- | --- |
//! | `node_id` | `int64`: the node's internal id (a typed graph's packed key) |
//! | `digest` | `fixed_size_binary(16)`: its digest, little-endian (`sampling::digest`) |

use std::sync::Arc;

use arrow_array::{Array, FixedSizeBinaryArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use sampling::NodeStore;
use sampling::digest::Digest;
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::staging::StagedPart;
use tables::{Error, Io, ParquetFile};

/// The state's columns.
const NODE_ID: &str = "node_id";
const DIGEST: &str = "digest";

/// What the state's directory adds to the output's name.
const STATE_SUFFIX: &str = ".graphflat-state";

/// Rows of state per batch written.
const STATE_BATCH: usize = 1 << 20;

/// Where the digests of the output `output` are kept: `.<name>.graphflat-state` beside it;
/// `None` for an output with no directory around it (a bucket).
pub fn state_uri(output: &str) -> Option<String> {
    beside(output, STATE_SUFFIX)
}

/// `.<name><suffix>` beside the output `output` (named `<name>`); `None` for an output with
/// no directory around it (a bucket).
pub fn beside(output: &str, suffix: &str) -> Option<String> {
    let trimmed = output.trim_end_matches('/');
    let (parent, name) = match trimmed.rsplit_once('/') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, trimmed),
    };
    let at_root = parent.is_some_and(|p| p.is_empty() || p.ends_with(':') || p.ends_with(":/"));
    if name.is_empty() || matches!(name, "." | "..") || at_root && output.contains("://") {
        return None;
    }
    let hidden = format!(".{name}{suffix}");
    Some(parent.map_or(hidden.clone(), |p| format!("{p}/{hidden}")))
}

/// This worker's nodes' digests (`digests`, by slot of `nodes`), as parts of the state table
/// (`to`).
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

/// The `(id, digest)` rows of `files`, checked.
pub(super) fn read_digests(io: &Io, files: &[ParquetFile]) -> Result<Vec<(i64, Digest)>, Error> {
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
}
