//! `graphflat import ogb`: OGB's raw node-property layout into the node and edge tables.
//!
//! ```text
//! raw/edge.csv.gz          src,dst per line, no header
//! raw/node-feat.csv.gz     one node per line: comma-separated floats (node id = line number)
//! raw/node-label.csv.gz    one class id per line (optional)
//! split/<name>/{train,valid,test}.csv.gz   node ids, one per line (optional)
//! ```

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field};
use flate2::read::MultiGzDecoder;
use schemas::edges::edge_schema;
use schemas::nodes::node_schema;
use schemas::{BadInput, Location, Split};

use crate::error::Error;
use crate::store::{Io, Place};
use crate::table::{part_name, schema_ref, write_file, write_table};

const ROWS_PER_PART: usize = 1 << 17;

#[derive(Debug, Clone)]
pub struct Imported {
    pub nodes: u64,
    pub edges: u64,
    pub feature_dim: usize,
    pub split: Option<String>,
}

/// Each line of a gzipped CSV (or plain, if the name does not end in .gz), with its 0-based number.
fn lines(path: &Path) -> Result<impl Iterator<Item = Result<(u64, String), Error>>, Error> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| Error::job(format!("{shown}: {e}")))?;
    let reader: Box<dyn std::io::Read> =
        if shown.ends_with(".gz") { Box::new(MultiGzDecoder::new(file)) } else { Box::new(file) };
    Ok(BufReader::with_capacity(1 << 20, reader)
        .lines()
        .enumerate()
        .map(move |(i, l)| l.map(|l| (i as u64, l)).map_err(|e| Error::job(format!("{shown}, line {}: {e}", i + 1)))))
}

fn bad(path: &Path, line: u64, column: &str, problem: String) -> Error {
    BadInput::new(Location::file(path.display().to_string()).row(line).column(column), problem).into()
}

fn parse_i64(path: &Path, line: u64, column: &str, text: &str) -> Result<i64, Error> {
    text.trim().parse().map_err(|_| bad(path, line, column, format!("not an integer: {text:?}")))
}

/// Reads `dir` (an OGB dataset folder) and writes `<out>/nodes/` and `<out>/edges/`.
/// `split`: the folder under `split/` to use; `None` picks the only one there, if any.
pub fn import_ogb(io: &Io, dir: &Path, out: &str, split: Option<&str>) -> Result<Imported, Error> {
    let raw = dir.join("raw");
    let feat_path = raw.join("node-feat.csv.gz");
    let mut features: Vec<f32> = Vec::new();
    let mut dim = None;
    let mut nodes = 0usize;
    for line in lines(&feat_path)? {
        let (i, text) = line?;
        let before = features.len();
        for value in text.split(',') {
            let v: f32 =
                value.trim().parse().map_err(|_| bad(&feat_path, i, "features", format!("not a number: {value:?}")))?;
            if !v.is_finite() {
                return Err(bad(&feat_path, i, "features", format!("not finite: {value}")));
            }
            features.push(v);
        }
        let len = features.len() - before;
        match dim {
            None => dim = Some(len),
            Some(d) if d != len => {
                return Err(bad(&feat_path, i, "features", format!("{len} values, but the first line has {d}")));
            }
            _ => {}
        }
        nodes += 1;
    }
    let dim = dim.ok_or_else(|| Error::job(format!("{}: no nodes (an empty table)", feat_path.display())))?;

    let label_path = raw.join("node-label.csv.gz");
    let labels: Vec<Option<i64>> = if label_path.exists() {
        let mut labels = Vec::with_capacity(nodes);
        for line in lines(&label_path)? {
            let (i, text) = line?;
            let t = text.trim();
            // OGB marks unlabeled nodes as nan in some datasets.
            labels.push(if t.is_empty() || t.eq_ignore_ascii_case("nan") {
                None
            } else {
                Some(parse_i64(&label_path, i, "label", t)?)
            });
        }
        if labels.len() != nodes {
            return Err(Error::job(format!("{}: {} labels for {} nodes", label_path.display(), labels.len(), nodes)));
        }
        labels
    } else {
        vec![None; nodes]
    };

    let split_name = match split {
        Some(s) => Some(s.to_owned()),
        None => {
            let mut names: Vec<String> = std::fs::read_dir(dir.join("split"))
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            names.sort();
            if names.len() > 1 {
                return Err(Error::job(format!(
                    "{}: several splits ({}); choose one with --split",
                    dir.display(),
                    names.join(", ")
                )));
            }
            names.pop()
        }
    };
    let mut splits: Vec<Option<Split>> = vec![None; nodes];
    if let Some(name) = &split_name {
        for split in [Split::Train, Split::Valid, Split::Test] {
            let path = dir.join("split").join(name).join(format!("{}.csv.gz", split.name()));
            for line in lines(&path)? {
                let (i, text) = line?;
                let id = parse_i64(&path, i, "node_id", &text)?;
                let slot = usize::try_from(id)
                    .ok()
                    .filter(|&s| s < nodes)
                    .ok_or_else(|| bad(&path, i, "node_id", format!("unknown node {id}")))?;
                splits[slot] = Some(split);
            }
        }
    }

    let outp = Place::parse(out)?;
    let nodes_dir = outp.child("nodes");
    write_table(io, &nodes_dir, || {
        for (part, lo) in (0..nodes).step_by(ROWS_PER_PART).enumerate() {
            let hi = (lo + ROWS_PER_PART).min(nodes);
            let item = Arc::new(Field::new("item", DataType::Float32, false));
            let feats = ListArray::new(
                item,
                OffsetBuffer::from_lengths(std::iter::repeat_n(dim, hi - lo)),
                Arc::new(Float32Array::from(features[lo * dim..hi * dim].to_vec())),
                None,
            );
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values((lo..hi).map(|v| v as i64))),
                Arc::new(feats),
                Arc::new(Int64Array::from(labels[lo..hi].to_vec())),
                Arc::new(StringArray::from_iter(splits[lo..hi].iter().map(|s| s.map(Split::name)))),
            ];
            let batch =
                RecordBatch::try_new(schema_ref(node_schema()), columns).expect("columns match the node schema");
            write_file(io, &nodes_dir.child(&part_name(part)), batch.schema(), &[batch])?;
        }
        Ok(())
    })?;

    let edge_path = raw.join("edge.csv.gz");
    let edges_dir = outp.child("edges");
    let mut edges = 0u64;
    write_table(io, &edges_dir, || {
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        let mut part = 0;
        let flush = |src: &mut Vec<i64>, dst: &mut Vec<i64>, part: &mut usize| -> Result<(), Error> {
            if src.is_empty() {
                return Ok(());
            }
            let weight = Float32Array::from(vec![1.0f32; src.len()]);
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(std::mem::take(src))),
                Arc::new(Int64Array::from(std::mem::take(dst))),
                Arc::new(weight),
            ];
            let batch =
                RecordBatch::try_new(schema_ref(edge_schema()), columns).expect("columns match the edge schema");
            write_file(io, &edges_dir.child(&part_name(*part)), batch.schema(), &[batch])?;
            *part += 1;
            Ok(())
        };
        for line in lines(&edge_path)? {
            let (i, text) = line?;
            let (s, d) =
                text.split_once(',').ok_or_else(|| bad(&edge_path, i, "src", format!("expected src,dst: {text:?}")))?;
            src.push(parse_i64(&edge_path, i, "src", s)?);
            dst.push(parse_i64(&edge_path, i, "dst", d)?);
            edges += 1;
            if src.len() == ROWS_PER_PART {
                flush(&mut src, &mut dst, &mut part)?;
            }
        }
        flush(&mut src, &mut dst, &mut part)
    })?;
    Ok(Imported { nodes: nodes as u64, edges, feature_dim: dim, split: split_name })
}
