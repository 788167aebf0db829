//! Step 4 of a refresh, and what step 2 reads back: the nodes' digests, kept in a table of
//! their own beside the output (`.<output>.graphflat-state`), committed with it.
//!
//! | column | type |
//! | --- | --- |
//! | `node_id` | `int64`: the node's internal id (a typed graph's packed key) |
//! | `digest` | `fixed_size_binary(16)`: its digest, little-endian (`sampling::digest`) |
//! | `task_digest` | `fixed_size_binary(16)`, nullable, in a stage whose rows are keyed by a source node and read other nodes too (GraphFlat's link records): the digest of the tasks the node is the source of, null for a node that is none's |

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeBinaryArray, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use sampling::NodeStore;
use sampling::digest::Digest;
use tables::parts::{PartWriter, PartsOf, part_properties};
use tables::staging::StagedPart;
use tables::{Error, Io, ParquetFile};

/// The state's columns.
const NODE_ID: &str = "node_id";
const DIGEST: &str = "digest";
const TASK_DIGEST: &str = "task_digest";

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
    // `flat/.` and `flat/./` name `flat`.
    let mut trimmed = output.trim_end_matches('/');
    while let Some(named) = trimmed.strip_suffix("/.") {
        trimmed = named.trim_end_matches('/');
    }
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

/// This worker's nodes' digests (`digests`, by slot of `nodes`), and the digests of the tasks
/// each is the source of (`tasks`, by slot, in a stage that keeps them), as parts of the state
/// table (`to`).
pub fn write_state(
    io: &Arc<Io>,
    to: &PartsOf,
    nodes: &NodeStore,
    digests: &[Digest],
    tasks: Option<&[Option<Digest>]>,
) -> Result<Vec<StagedPart>, Error> {
    let mut fields =
        vec![Field::new(NODE_ID, DataType::Int64, false), Field::new(DIGEST, DataType::FixedSizeBinary(16), false)];
    if tasks.is_some() {
        fields.push(Field::new(TASK_DIGEST, DataType::FixedSizeBinary(16), true));
    }
    let schema = Arc::new(Schema::new(fields));
    let mut writer = PartWriter::new(io.clone(), to.clone(), schema.clone(), part_properties().build(), u64::MAX);
    let internal = |what: &str, e: arrow_schema::ArrowError| Error::Internal(format!("the state's {what}: {e}"));
    for (at, ids) in nodes.ids.chunks(STATE_BATCH).enumerate() {
        let slots = at * STATE_BATCH..at * STATE_BATCH + ids.len();
        let sums = FixedSizeBinaryArray::try_from_iter(digests[slots.clone()].iter().map(|d| d.to_le_bytes()))
            .map_err(|e| internal("digests", e))?;
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ids.to_vec())), Arc::new(sums)];
        if let Some(tasks) = tasks {
            let sums = tasks[slots].iter().map(|d| d.map(|d| d.to_le_bytes()));
            let sums = FixedSizeBinaryArray::try_from_sparse_iter_with_size(sums, 16)
                .map_err(|e| internal("task digests", e))?;
            columns.push(Arc::new(sums));
        }
        writer.write(&RecordBatch::try_new(schema.clone(), columns).map_err(|e| internal("batch", e))?)?;
    }
    writer.finish()?;
    Ok(writer.parts)
}

/// What a run kept: each node's digest, and each source node's tasks' digest (none when that
/// run kept none: [`keeps_tasks`] says which).
pub(super) struct KeptDigests {
    pub nodes: Vec<(i64, Digest)>,
    pub tasks: Vec<(i64, Digest)>,
}

/// Whether the state table whose part is `file` keeps task digests.
pub(super) fn keeps_tasks(file: &ParquetFile) -> bool {
    file.arrow.schema().column_with_name(TASK_DIGEST).is_some()
}

/// The digests of `files`, checked.
pub(super) fn read_digests(io: &Io, files: &[ParquetFile]) -> Result<KeptDigests, Error> {
    let mut kept = KeptDigests { nodes: Vec::new(), tasks: Vec::new() };
    for file in files {
        let bad = || Error::BadData(format!("{}: not a table of node digests", file.name()));
        for rg in 0..file.row_groups() {
            file.read_row_group(io, rg, |batch, _| {
                let ids = batch.column_by_name(NODE_ID).and_then(|c| c.as_any().downcast_ref::<Int64Array>());
                let sums = batch.column_by_name(DIGEST).and_then(|c| c.as_any().downcast_ref::<FixedSizeBinaryArray>());
                let (Some(ids), Some(sums)) = (ids, sums) else { return Err(bad()) };
                if sums.value_length() != 16 || ids.null_count() + sums.null_count() > 0 {
                    return Err(bad());
                }
                kept.nodes.extend(ids.values().iter().enumerate().map(|(i, &id)| (id, digest(sums, i))));
                let Some(tasks) = batch.column_by_name(TASK_DIGEST) else { return Ok(()) };
                let tasks = tasks.as_any().downcast_ref::<FixedSizeBinaryArray>().filter(|t| t.value_length() == 16);
                let tasks = tasks.ok_or_else(bad)?;
                kept.tasks
                    .extend((0..ids.len()).filter(|&i| tasks.is_valid(i)).map(|i| (ids.value(i), digest(tasks, i))));
                Ok(())
            })?;
        }
    }
    Ok(kept)
}

/// Row `i` of a column of 16-byte digests.
fn digest(sums: &FixedSizeBinaryArray, i: usize) -> Digest {
    Digest::from_le_bytes(sums.value(i).try_into().expect("16 bytes, checked by the caller"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_lies_beside_the_output() {
        assert_eq!(state_uri("/data/flat").as_deref(), Some("/data/.flat.graphflat-state"));
        assert_eq!(state_uri("/data/flat/").as_deref(), Some("/data/.flat.graphflat-state"));
        assert_eq!(state_uri("flat").as_deref(), Some(".flat.graphflat-state"));
        assert_eq!(state_uri("/data/flat/./").as_deref(), Some("/data/.flat.graphflat-state"));
        assert_eq!(state_uri("flat/.").as_deref(), Some(".flat.graphflat-state"));
        assert_eq!(state_uri("."), None);
        assert_eq!(state_uri("s3://bucket/daily/flat").as_deref(), Some("s3://bucket/daily/.flat.graphflat-state"));
        assert_eq!(state_uri("s3://bucket"), None);
        assert_eq!(state_uri("s3://bucket/"), None);
        assert_eq!(state_uri("/"), None);
    }
}
