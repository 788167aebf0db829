//! `graphflat import ogb`: OGB's raw node-property layout into the node and edge tables.
//!
//! ```text
//! raw/edge.csv.gz          src,dst per line, no header
//! raw/edge-feat.csv.gz     one edge per line, as edge.csv.gz: comma-separated floats (optional)
//! raw/node-feat.csv.gz     one node per line: comma-separated floats (node id = line number)
//! raw/node-label.csv.gz    one class id per line (optional)
//! split/<name>/{train,valid,test}.csv.gz   node ids, one per line (optional)
//! ```

use std::io::{BufRead, BufReader};
use std::path::Path;

use flate2::read::MultiGzDecoder;
use schemas::edges;
use schemas::nodes::NodeRows;
use schemas::{BadInput, Label, LabelKind, Location, Split};

use crate::error::Error;
use crate::table::TableWriter;
use tables::Io;
use tables::commit::Stage;

const ROWS_PER_PART: usize = 1 << 17;

#[derive(Debug, Clone)]
pub struct Imported {
    pub nodes: u64,
    pub edges: u64,
    pub feature_dim: usize,
    /// Width of the edge features (0: the dataset has no `raw/edge-feat.csv.gz`).
    pub edge_feature_dim: usize,
    pub split: Option<String>,
}

/// Each line of a gzipped CSV (or plain, if the name does not end in .gz), with its 0-based number.
fn lines(path: &Path) -> Result<impl Iterator<Item = Result<(u64, String), Error>>, Error> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| Error::Read { file: shown.clone(), source })?;
    let reader: Box<dyn std::io::Read> =
        if shown.ends_with(".gz") { Box::new(MultiGzDecoder::new(file)) } else { Box::new(file) };
    Ok(BufReader::with_capacity(1 << 20, reader).lines().enumerate().map(move |(i, l)| {
        l.map(|l| (i as u64, l)).map_err(|source| Error::Line { file: shown.clone(), line: i as u64 + 1, source })
    }))
}

fn bad(path: &Path, line: u64, column: &str, problem: String) -> Error {
    BadInput::new(Location::file(path.display().to_string()).row(line).column(column), problem).into()
}

fn parse_i64(path: &Path, line: u64, column: &str, text: &str) -> Result<i64, Error> {
    text.trim().parse().map_err(|_| bad(path, line, column, format!("not an integer: {text:?}")))
}

fn parse_f32(path: &Path, line: u64, column: &str, text: &str) -> Result<f32, Error> {
    text.parse().map_err(|_| bad(path, line, column, format!("not a number: {text:?}")))
}

/// Appends line `line` of `path` (comma-separated floats, at least one) to `out`, checking that
/// each is finite and that the line has as many values as the first (`dim`, set by the first
/// line).
fn push_features(path: &Path, line: u64, text: &str, dim: &mut Option<usize>, out: &mut Vec<f32>) -> Result<(), Error> {
    let before = out.len();
    for value in text.split(',') {
        let v: f32 =
            value.trim().parse().map_err(|_| bad(path, line, "features", format!("not a number: {value:?}")))?;
        if !v.is_finite() {
            return Err(bad(path, line, "features", format!("not finite: {value}")));
        }
        out.push(v);
    }
    let len = out.len() - before;
    match *dim {
        None => *dim = Some(len),
        Some(d) if d != len => {
            return Err(bad(path, line, "features", format!("{len} values, but the first line has {d}")));
        }
        _ => {}
    }
    Ok(())
}

/// The labels' kind: targets if any line has several values (all must have as many), else
/// classes.
fn label_kind(path: &Path, labels: &[Option<Label>]) -> Result<LabelKind, Error> {
    let Some(n) = labels.iter().flatten().find_map(|l| l.targets().map(<[f32]>::len)) else {
        return Ok(LabelKind::Class);
    };
    for (line, label) in labels.iter().enumerate() {
        let problem = match label {
            Some(Label::Targets(t)) if t.len() != n => {
                format!("{} targets, but the first multi-value line has {n}", t.len())
            }
            Some(Label::Class(_)) => "one value, but other lines hold several targets".to_owned(),
            _ => continue,
        };
        return Err(bad(path, line as u64, "label", problem));
    }
    Ok(LabelKind::Targets(n))
}

/// Reads `dir` (an OGB dataset folder) and writes `<out>/nodes/` and `<out>/edges/`.
/// `split`: the folder under `split/` to use; `None` picks the only one there, if any.
pub fn import_ogb(io: &Io, dir: &Path, out: &str, split: Option<&str>, overwrite: bool) -> Result<Imported, Error> {
    let raw = dir.join("raw");
    let (features, dim) = node_features(&raw.join("node-feat.csv.gz"))?;
    let nodes = features.len() / dim;
    let label_path = raw.join("node-label.csv.gz");
    let labels = node_labels(&label_path, nodes)?;
    let label_kind = label_kind(&label_path, &labels)?;
    let split_name = match split {
        Some(s) => Some(s.to_owned()),
        None => only_split(dir)?,
    };
    let splits = match &split_name {
        Some(name) => node_splits(&dir.join("split").join(name), nodes)?,
        None => vec![None; nodes],
    };

    // Both tables are written before either commits: a failure leaves neither `_SUCCESS`.
    let outp = io.output(out)?;
    let source = io.output(&dir.to_string_lossy())?;
    let dirs = [outp.child("nodes"), outp.child("edges")];
    let [nodes_table, edges_table]: [TableWriter; 2] =
        TableWriter::start_together(io, &dirs, Stage::Import, &[&source], overwrite)?
            .try_into()
            .map_err(|_| Error::Internal("two tables started, not two writers".into()))?;
    let rows = NodeColumns { features: &features, dim, labels: &labels, label: label_kind, splits: &splits };
    write_nodes(&nodes_table, &rows)?;
    let (edges, edge_dim) = write_edges(&edges_table, &raw)?;
    TableWriter::commit_together(vec![nodes_table, edges_table])?;
    Ok(Imported {
        nodes: nodes as u64,
        edges,
        feature_dim: dim,
        edge_feature_dim: edge_dim.unwrap_or(0),
        split: split_name,
    })
}

/// The node features of `path`, one node a line (the node id is the line number), and their
/// width; an empty file is an error.
fn node_features(path: &Path) -> Result<(Vec<f32>, usize), Error> {
    let mut features: Vec<f32> = Vec::new();
    let mut dim = None;
    for line in lines(path)? {
        let (i, text) = line?;
        push_features(path, i, &text, &mut dim, &mut features)?;
    }
    let dim = dim.ok_or_else(|| Error::BadData(format!("{}: no nodes (an empty table)", path.display())))?;
    Ok((features, dim))
}

/// Each of the `nodes` nodes' label from `path`, one a line: a class id, or (multi-label, as
/// ogbn-proteins) comma-separated 0/1 targets; none where the file is absent, and none for an
/// empty or `nan` line (OGB's unlabeled nodes). The file must have a line per node.
fn node_labels(path: &Path, nodes: usize) -> Result<Vec<Option<Label>>, Error> {
    if !path.exists() {
        return Ok(vec![None; nodes]);
    }
    let mut labels = Vec::with_capacity(nodes);
    for line in lines(path)? {
        let (i, text) = line?;
        let t = text.trim();
        // OGB marks unlabeled nodes as nan in some datasets.
        labels.push(if t.is_empty() || t.eq_ignore_ascii_case("nan") {
            None
        } else if t.contains(',') {
            let targets = t.split(',').map(|v| parse_f32(path, i, "label", v.trim()));
            Some(Label::Targets(targets.collect::<Result<_, _>>()?))
        } else {
            Some(Label::Class(parse_i64(path, i, "label", t)?))
        });
    }
    if labels.len() != nodes {
        return Err(Error::BadData(format!("{}: {} labels for {} nodes", path.display(), labels.len(), nodes)));
    }
    Ok(labels)
}

/// The only folder under `dir/split/`, if any; several are an error (the caller names one).
fn only_split(dir: &Path) -> Result<Option<String>, Error> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("split"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    if names.len() > 1 {
        return Err(Error::BadData(format!(
            "{}: several splits ({}); choose one with --split",
            dir.display(),
            names.join(", ")
        )));
    }
    Ok(names.pop())
}

/// Each of the `nodes` nodes' split from the split folder `dir` (`train.csv.gz`,
/// `valid.csv.gz`, `test.csv.gz`: node ids, one a line, each a known node; a later file's
/// split wins).
fn node_splits(dir: &Path, nodes: usize) -> Result<Vec<Option<Split>>, Error> {
    let mut splits: Vec<Option<Split>> = vec![None; nodes];
    for split in [Split::Train, Split::Valid, Split::Test] {
        let path = dir.join(format!("{}.csv.gz", split.name()));
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
    Ok(splits)
}

/// The node table's columns, a row per node (node `i`'s features are
/// `features[i * dim..(i + 1) * dim]`).
struct NodeColumns<'a> {
    features: &'a [f32],
    dim: usize,
    labels: &'a [Option<Label>],
    label: LabelKind,
    splits: &'a [Option<Split>],
}

/// Writes the node table, `ROWS_PER_PART` rows a part, ids 0, 1, ... in line order.
fn write_nodes(table: &TableWriter<'_>, rows: &NodeColumns) -> Result<(), Error> {
    let (nodes, dim) = (rows.labels.len(), rows.dim);
    for (part, lo) in (0..nodes).step_by(ROWS_PER_PART).enumerate() {
        let hi = (lo + ROWS_PER_PART).min(nodes);
        let batch = NodeRows {
            ids: (lo..hi).map(|v| v as i64).collect(),
            features: rows.features[lo * dim..hi * dim].to_vec(),
            dim,
            labels: &rows.labels[lo..hi],
            label: rows.label,
            splits: &rows.splits[lo..hi],
        }
        .to_batch();
        table.write(part, batch.schema(), &[batch])?;
    }
    Ok(())
}

/// Writes the edge table from `raw/edge.csv.gz` (src,dst a line, weight 1), with the features
/// of `raw/edge-feat.csv.gz` line by line beside the edges when the dataset has them (as many
/// lines as edges). Returns the edges and the features' width (`None`: no features).
fn write_edges(table: &TableWriter<'_>, raw: &Path) -> Result<(u64, Option<usize>), Error> {
    let edge_path = raw.join("edge.csv.gz");
    let edge_feat_path = raw.join("edge-feat.csv.gz");
    let mut edge_feat_lines = if edge_feat_path.exists() { Some(lines(&edge_feat_path)?) } else { None };
    let mut edge_dim = None;
    let mut edges = 0u64;
    let mut parts = EdgeParts { table, part: 0, src: Vec::new(), dst: Vec::new(), features: Vec::new() };
    for line in lines(&edge_path)? {
        let (i, text) = line?;
        let (s, d) =
            text.split_once(',').ok_or_else(|| bad(&edge_path, i, "src", format!("expected src,dst: {text:?}")))?;
        parts.src.push(parse_i64(&edge_path, i, "src", s)?);
        parts.dst.push(parse_i64(&edge_path, i, "dst", d)?);
        if let Some(feat_lines) = &mut edge_feat_lines {
            let (j, text) = feat_lines.next().transpose()?.ok_or_else(|| {
                Error::BadData(format!("{}: {i} lines, fewer than the edges", edge_feat_path.display()))
            })?;
            push_features(&edge_feat_path, j, &text, &mut edge_dim, &mut parts.features)?;
        }
        edges += 1;
        if parts.src.len() == ROWS_PER_PART {
            parts.flush(edge_dim)?;
        }
    }
    parts.flush(edge_dim)?;
    if let Some(extra) = edge_feat_lines.and_then(|mut l| l.next()) {
        let (j, _) = extra?;
        return Err(Error::BadData(format!(
            "{}: line {} has no edge ({} has {edges} lines)",
            edge_feat_path.display(),
            j + 1,
            edge_path.display()
        )));
    }
    Ok((edges, edge_dim))
}

/// The edge rows read since the last part, and the next part's number.
struct EdgeParts<'a> {
    table: &'a TableWriter<'a>,
    part: usize,
    src: Vec<i64>,
    dst: Vec<i64>,
    features: Vec<f32>,
}

impl EdgeParts<'_> {
    /// Writes the rows held as the next part (none if there are none), features `dim` wide.
    fn flush(&mut self, dim: Option<usize>) -> Result<(), Error> {
        if self.src.is_empty() {
            return Ok(());
        }
        let weight = vec![1.0f32; self.src.len()];
        let features = Some((std::mem::take(&mut self.features), dim.unwrap_or(0)));
        let batch =
            edges::to_batch_with(std::mem::take(&mut self.src), std::mem::take(&mut self.dst), weight, features);
        self.table.write(self.part, batch.schema(), &[batch])?;
        self.part += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float32Type;

    #[test]
    fn multi_value_label_lines_are_targets_of_one_length() {
        let path = Path::new("raw/node-label.csv.gz");
        let targets = |v: &[f32]| Some(Label::Targets(v.to_vec()));
        let labels = vec![targets(&[0.0, 1.0, 1.0]), None, targets(&[1.0, 0.0, 0.0])];
        assert_eq!(label_kind(path, &labels).unwrap(), LabelKind::Targets(3));
        let rows = NodeRows {
            ids: vec![0, 1, 2],
            features: Vec::new(),
            dim: 0,
            labels: &labels,
            label: LabelKind::Targets(3),
            splits: &[None; 3],
        };
        let batch = rows.to_batch();
        let list = batch.column_by_name(schemas::nodes::LABEL).unwrap().as_list::<i32>();
        assert!(list.is_null(1) && list.is_valid(2));
        assert_eq!(list.value(2).as_primitive::<Float32Type>().values().to_vec(), vec![1.0, 0.0, 0.0]);

        let classes = vec![Some(Label::Class(3)), None];
        assert_eq!(label_kind(path, &classes).unwrap(), LabelKind::Class);

        let ragged = vec![targets(&[0.0, 1.0]), targets(&[1.0])];
        let message = label_kind(path, &ragged).unwrap_err().to_string();
        assert!(
            message.contains("row 1") && message.contains("1 targets, but the first multi-value line has 2"),
            "{message}"
        );
        let mixed = vec![targets(&[0.0, 1.0]), Some(Label::Class(1))];
        assert!(label_kind(path, &mixed).is_err());
    }
}
