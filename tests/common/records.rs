//! Flatten outputs read back as the contract's own record type, `schemas::Record` (the BFS the
//! tests check records against stays independent).

use std::path::Path;

pub use schemas::Record;
use schemas::record::{LinkRecord, links_from_batch};

use super::{batches_in, parquet_files};

/// Every record of a committed flatten output, from every part file in `dir`, sorted by root id.
pub fn read_records(dir: &Path) -> Vec<Record> {
    assert!(dir.join("_SUCCESS").exists(), "{} has no _SUCCESS", dir.display());
    records_in(dir, parquet_files(dir))
}

/// The records of the parts that `dir`'s manifest lists (what the project's readers take),
/// sorted by root id: for outputs that hold leftovers or others' files beside their parts.
pub fn read_listed_records(dir: &Path) -> Vec<Record> {
    let manifest = manifest(dir);
    let parts = manifest["parts"].as_array().unwrap().iter().map(|p| dir.join(p["name"].as_str().unwrap()));
    records_in(dir, parts.collect())
}

/// The records of the part files `parts` of the output `dir`, sorted by root id.
fn records_in(dir: &Path, parts: Vec<std::path::PathBuf>) -> Vec<Record> {
    let mut records: Vec<Record> = batches_in(parts)
        .iter()
        .flat_map(|b| schemas::record::from_batch(b, &dir.display().to_string(), 0).unwrap())
        .collect();
    records.sort_by_key(|r| r.root);
    records
}

/// An output's manifest (the footer of `_manifest.parquet`) as JSON.
pub fn manifest(dir: &Path) -> serde_json::Value {
    manifest_of(std::fs::read(dir.join("_manifest.parquet")).unwrap())
}

/// The manifest in the bytes of a `_manifest.parquet`, as JSON.
pub fn manifest_of(bytes: Vec<u8>) -> serde_json::Value {
    let reader = parquet::file::reader::SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
    let metadata = parquet::file::reader::FileReader::metadata(&reader).file_metadata().key_value_metadata().cloned();
    let json = metadata.unwrap().into_iter().find(|kv| kv.key == "graphflat.manifest").unwrap().value.unwrap();
    serde_json::from_str(&json).unwrap()
}

/// The committed model's file in `dir` whose name ends in `ending` (`.bpk`: the weights,
/// `.json`: the description), as its manifest lists it.
pub fn model_file(dir: &Path, ending: &str) -> std::path::PathBuf {
    let m = manifest(dir);
    let parts = m["parts"].as_array().unwrap();
    let name =
        parts.iter().map(|p| p["name"].as_str().unwrap()).find(|n| n.starts_with("model") && n.ends_with(ending));
    dir.join(name.unwrap_or_else(|| panic!("{}: no model*{ending} in {m}", dir.display())))
}

/// The file of a committed model directory `dir` that `name` means: `model.bpk` and
/// `model.json` the weights and the description its manifest lists, any other name itself.
pub fn committed(dir: &Path, name: &str) -> std::path::PathBuf {
    match name {
        "model.bpk" => model_file(dir, ".bpk"),
        "model.json" => model_file(dir, ".json"),
        other => dir.join(other),
    }
}

/// Whether `dir` holds a model's weights under any name (committed or not).
pub fn has_weights(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("model") && name.ends_with(".bpk")
        })
    })
}

/// Rewrites the manifest of the output `dir` with `edit` applied to its JSON (a test's way to
/// commit by hand what it changed, or to make a manifest lie); the table's schema is kept.
pub fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut json = manifest(dir);
    edit(&mut json);
    // The totals follow the parts, as a commit writes them: what a test changes is a part.
    let parts = json["parts"].as_array().unwrap();
    let sum = |key: &str| parts.iter().map(|p| p[key].as_u64().unwrap()).sum::<u64>();
    let (rows, bytes) = (sum("rows"), sum("bytes"));
    json["rows"] = rows.into();
    json["bytes"] = bytes.into();
    let manifest: tables::commit::Manifest = serde_json::from_value(json).unwrap();
    let file = std::fs::File::open(dir.join("_manifest.parquet")).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    let meta = parquet::file::reader::FileReader::metadata(&reader).file_metadata().clone();
    let schema = (meta.schema_descr().num_columns() > 0)
        .then(|| (meta.schema_descr(), meta.key_value_metadata().cloned().unwrap_or_default()));
    let bytes = manifest.to_parquet(schema).unwrap();
    std::fs::write(dir.join("_manifest.parquet"), bytes).unwrap();
}

/// A record's edges by global ids: (src, dst, weight bits, layers), sorted.
pub fn global_edges(r: &Record) -> Vec<(i64, i64, u32, u32)> {
    let mut e: Vec<_> = (0..r.num_edges())
        .map(|i| {
            (
                r.node_ids[r.edge_src[i] as usize],
                r.node_ids[r.edge_dst[i] as usize],
                r.edge_weights[i].to_bits(),
                r.edge_layers[i],
            )
        })
        .collect();
    e.sort();
    e
}

/// Every link record of a committed flatten output, sorted by (src, dst, split).
pub fn read_links(dir: &Path) -> Vec<LinkRecord> {
    assert!(dir.join("_SUCCESS").exists(), "{} has no _SUCCESS", dir.display());
    let mut links: Vec<LinkRecord> = batches_in(parquet_files(dir))
        .iter()
        .flat_map(|b| links_from_batch(b, "links", 0, |_| true).unwrap().into_iter().map(|(_, l)| l))
        .collect();
    links.sort_by_key(|l| (l.src, l.dst, l.split));
    links
}
