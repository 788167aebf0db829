//! Tables written as one graph (`generate`, `import`: `crate::table::TableWriter::
//! start_together`), and the check that a process reads them of one run.
//!
//! Such tables share one run id, and each one's manifest lists where the others lie, relative
//! to it (`together`: `../edges` beside `nodes`). Their commit switches them one after the
//! other, so a reader that opens them in the milliseconds between two switches, or after a
//! run killed between them, would find two runs' tables: a node table and an edge table of two
//! different graphs, each whole, read as one. Each table a process opens with a `together` list
//! is noted here ([`opened`]); a table whose partner of the same graph is noted with another
//! run is refused with a retryable error (75): a run that was replacing the graph has finished
//! by the next try; a graph left half replaced says so, and is generated again.
//!
//! Invariant: two tables of one process's notes that name each other hold one run. A table
//! opened again replaces its note (a later stage of the job reads the graph as it is then).

use std::sync::Mutex;

use crate::error::Error;
use crate::manifest::Manifest;
use crate::place::Place;

/// A table a process opened, whose manifest names the tables written with it.
struct Note {
    identity: String,
    run: String,
    partners: Vec<String>,
    shown: String,
}

static OPENED: Mutex<Vec<Note>> = Mutex::new(Vec::new());

/// The `together` list of `table` among `tables` (their places in one commit): the path from
/// `table` to each other one, `/`-separated, `..` for a step up.
pub fn partners_of(table: &Place, tables: &[&Place]) -> Vec<String> {
    let me = table.identity();
    tables.iter().map(|t| t.identity()).filter(|other| *other != me).map(|other| relative(&me, &other)).collect()
}

/// Notes that this process opened run `manifest.run`'s version of `table`; an error when a
/// table of the same graph, noted with another run, names it or is named by it.
pub fn opened(table: &Place, manifest: &Manifest) -> Result<(), Error> {
    if manifest.together.is_empty() {
        return Ok(());
    }
    let identity = normal(&table.identity());
    let partners: Vec<String> = manifest.together.iter().map(|rel| joined(&identity, rel)).collect();
    let mut notes = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    notes.retain(|n| n.identity != identity);
    let mixed = notes
        .iter()
        .find(|n| n.run != manifest.run && (partners.contains(&n.identity) || n.partners.contains(&identity)));
    if let Some(other) = mixed {
        return Err(Error::Retry(format!(
            "{}: run {}'s table, where {} holds run {}'s: they were written as one graph, and one of them was \
             replaced since (a generate or import replacing the graph as this job opened it, or stopped between \
             its tables); run again, and if it says so again, write the graph again",
            table.shown(),
            manifest.run,
            other.shown,
            other.run
        )));
    }
    notes.push(Note { identity, run: manifest.run.clone(), partners, shown: table.shown() });
    Ok(())
}

/// The path from the directory `from` to `to`, both `/`-separated.
fn relative(from: &str, to: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (parts(from), parts(to));
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let up = std::iter::repeat_n("..", a.len() - common);
    up.chain(b[common..].iter().copied()).collect::<Vec<_>>().join("/")
}

/// `base` with the relative path `rel` applied (`..` a step up), in [`normal`] form.
fn joined(base: &str, rel: &str) -> String {
    let mut path = parts(base);
    for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            path.pop();
        } else {
            path.push(part);
        }
    }
    path.join("/")
}

/// A place's identity as [`joined`] gives it: its components joined by one `/` (a URI's `//`
/// and a path's leading `/` dropped alike).
fn normal(identity: &str) -> String {
    parts(identity).join("/")
}

fn parts(path: &str) -> Vec<&str> {
    path.split('/').filter(|p| !p.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partner_is_found_again_from_its_relative_path() {
        for (from, to) in [
            ("/x/g/nodes", "/x/g/edges"),
            ("/x/g/nodes/paper", "/x/g/edges/cites"),
            ("/x/g/nodes/paper", "/x/g/erased/nodes"),
            ("s3://bucket/g/nodes", "s3://bucket/g/edges"),
            ("/a", "/b/c"),
        ] {
            let rel = relative(from, to);
            assert!(!rel.starts_with('/'), "{rel}");
            assert_eq!(joined(&normal(from), &rel), normal(to), "{from} -> {to} via {rel}");
        }
        assert_eq!(relative("/x/g/nodes", "/x/g/edges"), "../edges");
    }

    fn note(dir: &std::path::Path, name: &str, run: &str, together: &[&str]) -> Result<(), Error> {
        let place = Place::parse_output(dir.join(name).to_str().unwrap(), &Default::default()).unwrap();
        let mut manifest = Manifest::new(run, crate::manifest::Stage::Generate, Vec::new(), serde_json::Value::Null);
        manifest.together = together.iter().map(|s| s.to_string()).collect();
        opened(&place, &manifest)
    }

    #[test]
    fn tables_of_one_graph_are_read_of_one_run() {
        let dir = std::env::temp_dir().join(format!("tables-together-{}", std::process::id()));
        // One run: fine; opened again of another run with its partner: fine (the later stage).
        note(&dir, "g/nodes", "r1", &["../edges"]).unwrap();
        note(&dir, "g/edges", "r1", &["../nodes"]).unwrap();
        note(&dir, "g/nodes", "r2", &["../edges"]).expect_err("nodes of r2 beside edges of r1");
        note(&dir, "g/edges", "r2", &["../nodes"]).unwrap();
        // Tables of other graphs, or of no graph, never clash.
        note(&dir, "h/edges", "r3", &["../nodes"]).unwrap();
        note(&dir, "g/other", "r4", &[]).unwrap();
        let error = note(&dir, "h/nodes", "r5", &["../edges"]).unwrap_err();
        assert_eq!(error.cause(), schemas::Cause::Retry);
        assert!(error.to_string().contains("written as one graph"), "{error}");
    }
}
