//! How a `[flatten]` or `[infer]` job's graph arrives on each run (`docs/refresh.md`, "Delta
//! tables"): as a full snapshot (`nodes`, `edges`), or as the changes since the graph a
//! previous run kept beside the output (`delta_nodes`, `delta_edges`, contract in
//! `schemas/README.md`). `keep_graph` keeps a snapshot's graph for the delta days that follow;
//! a delta day keeps the graph it makes.

use super::JobError;

/// The keys of a section that say how its graph arrives.
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    pub nodes: &'a str,
    pub edges: &'a str,
    pub keep_graph: bool,
    pub delta_nodes: Option<&'a str>,
    pub delta_edges: Option<&'a str>,
}

impl Arrival<'_> {
    /// A delta day: the graph is the kept one with the delta tables applied.
    pub fn is_delta(&self) -> bool {
        self.delta_nodes.is_some() || self.delta_edges.is_some()
    }

    /// Checks the keys together; `typed`: the job reads a typed `[graph]`.
    pub fn check(&self, section: &'static str, typed: bool) -> Result<(), JobError> {
        let bad = |problem: String| Err(JobError::invalid(section, problem));
        let keys = [("delta_nodes", self.delta_nodes), ("delta_edges", self.delta_edges)];
        if let Some((key, _)) = keys.iter().find(|(_, path)| path.is_some_and(|p| p.trim().is_empty())) {
            return bad(format!("{key} is empty: name a table of changes, or leave the key out"));
        }
        if typed && (self.is_delta() || self.keep_graph) {
            let key = if self.keep_graph { "keep_graph" } else { "delta_nodes and delta_edges" };
            return bad(format!(
                "{key}: delta tables apply to a graph of nodes and edges tables; a typed [graph] is read as a \
                 full snapshot on every run"
            ));
        }
        if self.is_delta() && (!self.nodes.is_empty() || !self.edges.is_empty()) {
            return bad("names nodes or edges and a delta table: a delta applies to the graph the previous run \
                        kept beside the output; name nodes and edges (with keep_graph = true) on a day that starts \
                        over from a full snapshot, and only the delta tables on the days after"
                .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival<'a>(nodes: &'a str, delta_nodes: Option<&'a str>, keep_graph: bool) -> Arrival<'a> {
        Arrival { nodes, edges: nodes, keep_graph, delta_nodes, delta_edges: None }
    }

    #[test]
    fn a_delta_day_names_no_snapshot() {
        assert!(arrival("", Some("cdc/nodes"), false).check("flatten", false).is_ok());
        assert!(arrival("snap/nodes", None, true).check("flatten", false).is_ok());
        let both = arrival("snap/nodes", Some("cdc/nodes"), false).check("flatten", false).unwrap_err();
        assert!(both.to_string().contains("starts over"), "{both}");
        let empty = arrival("", Some(" "), false).check("infer", false).unwrap_err();
        assert!(empty.to_string().contains("delta_nodes is empty"), "{empty}");
        let typed = arrival("", None, true).check("flatten", true).unwrap_err();
        assert!(typed.to_string().contains("typed [graph]"), "{typed}");
    }
}
