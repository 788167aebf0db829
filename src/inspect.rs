//! `graphflat inspect`: what a table, a record set or a model directory holds. Tables are read
//! row group by row group, so memory stays bounded whatever their size.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use gnn::io::ModelFiles;
use schemas::{Cause, StorageConfig};
use tables::{Io, ParquetFile, Place, open_table};

use crate::Result;
use crate::exit::{Exit, WithCause};

/// `println!`, except that a reader that stopped reading (`inspect ... | head`) ends the command
/// quietly, as it ends other tools, instead of a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }};
}

pub fn inspect(target: &str) -> Result<()> {
    // No job file: the environment's store settings.
    let io = Io::new(&StorageConfig::default()).cause(Cause::Internal)?;
    let place = io.place(target).map_err(|e| Exit::new(e.cause(), e))?;
    let manifest = io.block_on(tables::commit::read_manifest(&place)).map_err(|e| Exit::new(e.cause(), e))?;
    let is_model = manifest.as_ref().is_some_and(|m| m.stage == tables::commit::Stage::Train);
    // What a killed switch left beside a local output goes (or comes back: tables::switch).
    let layout = if is_model { gnn::io::LAYOUT } else { tables::names::Layout::TABLE };
    if let Err(e) = io.block_on(tables::commit::settle(&place, &layout)) {
        tracing::warn!("{}: cannot settle what an earlier switch left: {e}", place.shown());
    }
    let manifest = match manifest {
        None => io.block_on(tables::commit::read_manifest(&place)).map_err(|e| Exit::new(e.cause(), e))?,
        read => read,
    };
    if is_model || io.block_on(place.child("model.json").exists()) {
        inspect_model(&io, &place)?;
        return point_at_report(&io, &place);
    }
    if let Some(manifest) = &manifest {
        list_unlisted(&io, &place, manifest)?;
    }
    let files = open_table(&io, &place).map_err(|e| Exit::new(e.cause(), e))?;
    if files.is_empty() {
        say!("{}: a committed table of no rows (its manifest lists no parts)", place.shown());
        return Ok(());
    }
    print_table_head(&io, &place, &files);
    print_contents(&io, &files)?;
    point_at_report(&io, &place)
}

/// A table's rows, files, size and marker, then its schema and the schema's metadata.
fn print_table_head(io: &Io, place: &Place, files: &[ParquetFile]) {
    let marker = io.block_on(place.child(schemas::SUCCESS_MARKER).exists());
    let rows: u64 = files.iter().map(|f| f.rows()).sum();
    let bytes: u64 = files.iter().map(|f| f.meta.size).sum();
    say!(
        "{}: {} rows in {} files, {:.1} MB, _SUCCESS {}",
        place.shown(),
        rows,
        files.len(),
        bytes as f64 / 1e6,
        if marker {
            "present"
        } else {
            "absent (the trainer refuses such a record set; node and edge tables are read whole)"
        }
    );
    let schema = files[0].arrow.schema();
    say!("schema:");
    for field in schema.fields() {
        say!("  {}: {}{}", field.name(), field.data_type(), if field.is_nullable() { " (nullable)" } else { "" });
    }
    let mut metadata: Vec<_> = schema.metadata().iter().collect();
    metadata.sort();
    for (k, v) in metadata {
        say!("  metadata {k} = {v}");
    }
}

/// Every row read (each checked against the manifest as it is): the label and split counts,
/// then the first row, each column shortened to a line.
fn print_contents(io: &Io, files: &[ParquetFile]) -> Result<()> {
    let mut counts = Counts::default();
    let mut first: Option<RecordBatch> = None;
    for file in files {
        for rg in 0..file.row_groups() {
            file.read_row_group(io, rg, |batch, _| {
                counts.add(&batch);
                if first.is_none() && batch.num_rows() > 0 {
                    first = Some(batch.slice(0, 1));
                }
                Ok(())
            })
            .map_err(|e| Exit::new(e.cause(), e))?;
        }
    }
    counts.print();
    if let Some(batch) = first {
        say!("first row:");
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            say!("  {}: {}", field.name(), shorten(&format!("{:?}", column.as_ref()), 160));
        }
    }
    Ok(())
}

/// Prints the files in a committed table's directory that its manifest does not list: the
/// staged files of a run in progress or killed, another tool's files. Readers of this project
/// never read them; a directory reader reads those with data names (not `_` or `.`).
fn list_unlisted(io: &Io, dir: &Place, manifest: &tables::commit::Manifest) -> Result<()> {
    let ours = [schemas::SUCCESS_MARKER, tables::names::MANIFEST];
    let listed: std::collections::HashSet<&str> = manifest.parts.iter().map(|p| p.name.as_str()).chain(ours).collect();
    let found = io.block_on(dir.list_files()).map_err(|e| Exit::new(e.cause(), e))?;
    let prefix = format!("{}/", dir.path);
    let unlisted: Vec<(String, u64)> = found
        .into_iter()
        .filter_map(|m| m.location.as_ref().strip_prefix(&prefix).map(|n| (n.to_owned(), m.size)))
        .filter(|(name, _)| !listed.contains(name.as_str()))
        .collect();
    if unlisted.is_empty() {
        return Ok(());
    }
    let data = |name: &str| !name.split('/').any(|part| part.starts_with(['_', '.']));
    let visible = unlisted.iter().filter(|(n, _)| data(n)).count();
    say!(
        "{}: {} files its manifest (run {}) does not list, {visible} of them with data names that directory readers \
         read (a run in progress or killed, or another tool's); this project's readers read none:",
        dir.shown(),
        unlisted.len(),
        manifest.run
    );
    for (name, size) in unlisted.iter().take(20) {
        say!("  {name} ({size} bytes){}", if data(name) { "" } else { ", hidden" });
    }
    if unlisted.len() > 20 {
        say!("  ... and {} more", unlisted.len() - 20);
    }
    Ok(())
}

/// The job's report beside an output, when one is there.
fn point_at_report(io: &Io, dir: &Place) -> Result<()> {
    let report = dir.child(tables::names::REPORT);
    if dir.local_dir().is_none_or(|d| d.is_dir())
        && io.block_on(tables::report_page::is_report(&report)).unwrap_or(false)
    {
        say!("report: {} (charts of the run that wrote it; open it in a browser)", report.shown());
    }
    Ok(())
}

/// Label, split and size counts over a whole table.
#[derive(Default)]
struct Counts {
    rows: u64,
    labeled: u64,
    splits: BTreeMap<String, u64>,
    /// Per-row list lengths of `node_ids` and `edge_src` (record sets): (sum, max).
    nodes: Option<(u64, u64)>,
    edges: Option<(u64, u64)>,
}

impl Counts {
    fn add(&mut self, batch: &RecordBatch) {
        self.rows += batch.num_rows() as u64;
        if let Some(label) = batch.column_by_name("label") {
            self.labeled += (label.len() - label.null_count()) as u64;
        }
        if let Some(splits) = batch.column_by_name("split").and_then(|c| c.as_string_opt::<i32>()) {
            for i in 0..splits.len() {
                let name = if splits.is_valid(i) { splits.value(i) } else { "(null)" };
                *self.splits.entry(name.to_owned()).or_default() += 1;
            }
        }
        for (column, total) in [("node_ids", &mut self.nodes), ("edge_src", &mut self.edges)] {
            if let Some(list) = batch.column_by_name(column).and_then(|c| c.as_list_opt::<i32>()) {
                let (sum, max) = total.get_or_insert((0, 0));
                for w in list.value_offsets().windows(2) {
                    let len = (w[1] - w[0]) as u64;
                    (*sum, *max) = (*sum + len, (*max).max(len));
                }
            }
        }
    }

    fn print(&self) {
        say!("counts:");
        say!("  labeled rows: {} of {}", self.labeled, self.rows);
        if !self.splits.is_empty() {
            let splits: Vec<String> = self.splits.iter().map(|(k, v)| format!("{k} {v}")).collect();
            say!("  splits:       {}", splits.join(", "));
        }
        for (name, total) in [("record nodes", self.nodes), ("record edges", self.edges)] {
            if let Some((sum, max)) = total {
                say!("  {name}: mean {:.1}, max {max}", sum as f64 / self.rows.max(1) as f64);
            }
        }
    }
}

fn inspect_model(io: &Io, dir: &Place) -> Result<()> {
    let files = ModelFiles::read(io, dir).map_err(|e| Exit::new(e.cause(), e))?;
    let meta = &files.meta;
    let typed = meta.spec.types.as_ref().map_or(String::new(), |t| format!(" of a typed graph ({t})"));
    say!("{}: a {} model{typed}, {} parameters", dir.shown(), meta.spec.kind.name(), meta.parameters);
    say!("  weights: {} ({:.1} kB)", files.weights_place.shown(), files.weight_bytes() as f64 / 1e3);
    let json = serde_json::to_string_pretty(meta).cause(Cause::Internal)?;
    say!("{}:\n{json}", files.meta_place.shown());
    let metrics = dir.child(graphtrainer::metrics::METRICS);
    if let Ok(Some(bytes)) = io.block_on(metrics.get_at_most(tables::names::REPORT_MAX_BYTES)) {
        let text = String::from_utf8_lossy(&bytes);
        say!(
            "{} epochs in {}; the last:\n  {}",
            text.lines().count(),
            metrics.shown(),
            text.lines().last().unwrap_or("")
        );
    }
    Ok(())
}

/// `text` on one line, at most `limit` characters (cut on a character boundary).
fn shorten(text: &str, limit: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}...", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shorten_cuts_on_characters() {
        let text = "é".repeat(200);
        assert_eq!(super::shorten(&text, 160).chars().count(), 163);
        assert_eq!(super::shorten("a  b", 160), "a b");
    }
}
