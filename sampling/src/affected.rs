//! Which outputs a change of the graph can reach: the refresh's changed set, on
//! differential-dataflow, and its affected set.
//!
//! **Changed nodes.** The previous run kept every node's digest ([`crate::digest`]); this run
//! computes today's. Both go into one collection, yesterday's with multiplicity -1 and today's
//! with +1: a node whose digest is the same on both sides cancels out, and what `distinct`
//! keeps is every `(node, digest)` on one side only: a node added, removed, or changed in its
//! features, label, split, in-degree or sampled in-edges. Their ids are the changed set.
//!
//! **Affected roots.** A record rooted at `r` reads the nodes of its sampled tree: `r`, then
//! the sources of the sampled in-edges of each hop's nodes, k hops deep, and of each node its
//! content and its sample. The affected set is every node within k hops downstream of a
//! changed node over today's sampled edges (`src -> dst` for each sampled in-edge of `dst`):
//! k hops of a breadth-first search. Each worker holds its own nodes' sampled in-edges; at each
//! hop it scans them for a source in the frontier (the same on every worker), and the new
//! destinations are gathered into the next frontier. A hop costs one pass over the local edges
//! and the frontier's ids on the wire. The hops ran on differential-dataflow first (a
//! `join_core` with the edges arranged by source, k times): arranging every sampled edge cost
//! 0.7-0.8 s at 1M nodes whatever the change, more than a GraphInfer run's layers, where the
//! scans cost a tenth of it (`BENCHMARKS.md`, section 25).
//!
//! **Why today's graph alone is enough, and the result exact.** Take a root `r` with no changed
//! node within k hops downstream of it in today's sampled graph: every node of its tree today
//! is unchanged. By induction on the hop, its tree is yesterday's tree: hop 0 is `r` in both;
//! the nodes of hop `d + 1` are the sources of the samples of hop `d`'s nodes, which are
//! unchanged, so they are the same nodes, and unchanged in turn. The same nodes with the same
//! content make the same record, bit for bit. So every record outside the affected set is
//! yesterday's, and a refresh that recomputes the affected set and keeps the rest writes what
//! a full run writes. A node removed today has no record; a node that lost an in-edge from it
//! has a new in-degree, so it is changed itself.
//!
//! The set over-approximates: a label is read at hop 0 only, and a changed node's in-edges
//! only below hop k; counting them at every hop keeps the rule one search and costs a little
//! more recomputation, never a wrong record.

use std::cell::RefCell;
use std::rc::Rc;

use differential_dataflow::input::Input;
use schemas::mix::IdSet;
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

use crate::digest::Digest;

/// What [`affected`] found, the same on every worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affected {
    /// Nodes added, removed or changed.
    pub changed: u64,
    /// Every node a change can reach within `hops`, changed ones included, sorted; empty when
    /// `past_limit`.
    pub ids: Vec<i64>,
    /// The search stopped at a hop whose set passed the limit the caller gave: the set is not
    /// known, only that it is larger.
    pub past_limit: bool,
}

impl Affected {
    pub fn contains(&self, id: i64) -> bool {
        self.ids.binary_search(&id).is_ok()
    }
}

/// The changed and affected sets (see the module doc) from this worker's share of
/// yesterday's digests (`old`) and today's (`new`), any share of each (the dataflow routes them
/// by node), and this worker's nodes' sampled in-edges as `(src, dst)`, each call of `edges` a
/// pass over them. The search stops as soon as the set holds more than `limit` nodes (a caller
/// that would then run in full needs no more, and every worker holds the set). Every worker
/// calls it; all get the whole result.
pub fn affected<E: Iterator<Item = (i64, i64)>>(
    worker: &mut Worker,
    (old, new): (impl IntoIterator<Item = (i64, Digest)>, impl IntoIterator<Item = (i64, Digest)>),
    edges: impl Fn() -> E,
    hops: usize,
    limit: usize,
) -> Affected {
    let changed = changed(worker, old, new);
    let past = |changed: &[i64]| Affected { changed: changed.len() as u64, ids: Vec::new(), past_limit: true };
    if changed.len() > limit {
        return past(&changed);
    }
    let mut ids = changed.clone();
    let mut frontier: IdSet<i64> = changed.iter().copied().collect();
    // The frontier is the same on every worker, so all stop at the same hop.
    for _ in 0..hops {
        if frontier.is_empty() {
            break;
        }
        let mut reached: Vec<i64> = edges().filter(|(src, _)| frontier.contains(src)).map(|(_, dst)| dst).collect();
        reached.sort_unstable();
        reached.dedup();
        let mut next = cluster::all_gather(worker, reached);
        next.dedup();
        next.retain(|id| ids.binary_search(id).is_err());
        frontier = next.iter().copied().collect();
        ids.extend(next);
        if ids.len() > limit {
            return past(&changed);
        }
        ids.sort_unstable();
    }
    Affected { changed: changed.len() as u64, ids, past_limit: false }
}

/// The nodes whose digest is on one side only (added, removed or changed), sorted, on every
/// worker: yesterday's digests at -1 and today's at +1 in one collection, and `distinct`. Any
/// digest of a node serves: GraphFlat's link refresh finds with it the sources whose tasks
/// changed.
pub fn changed(
    worker: &mut Worker,
    old: impl IntoIterator<Item = (i64, Digest)>,
    new: impl IntoIterator<Item = (i64, Digest)>,
) -> Vec<i64> {
    let changed: Rc<RefCell<Vec<i64>>> = Rc::default();
    let probe = ProbeHandle::new();
    let (mut old_in, mut new_in) = worker.dataflow::<u64, _, _>(|scope| {
        let (old_in, old) = scope.new_collection::<(i64, Digest), isize>();
        let (new_in, new) = scope.new_collection::<(i64, Digest), isize>();
        // Digests on one side only: `distinct` keeps a -1 as one, as it keeps a +1.
        let changes = new.concat(old.negate()).distinct().map(|(id, _)| id).distinct();
        let c = changed.clone();
        changes
            .inspect(move |(id, _, diff)| {
                if *diff > 0 {
                    c.borrow_mut().push(*id)
                }
            })
            .probe_with(&probe);
        (old_in, new_in)
    });
    old.into_iter().for_each(|d| old_in.insert(d));
    new.into_iter().for_each(|d| new_in.insert(d));
    drop((old_in, new_in));
    while !probe.done() {
        worker.step();
    }
    let mut all = cluster::all_gather(worker, changed.take());
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;

    /// The affected set by a plain BFS from each changed node over `edges` (src -> dst).
    fn by_bfs(changed: &BTreeSet<i64>, edges: &[(i64, i64)], hops: usize) -> Vec<i64> {
        let mut out: HashMap<i64, Vec<i64>> = HashMap::new();
        edges.iter().for_each(|&(s, d)| out.entry(s).or_default().push(d));
        let mut seen = changed.clone();
        let mut frontier: Vec<i64> = changed.iter().copied().collect();
        for _ in 0..hops {
            let next: Vec<i64> = frontier.iter().flat_map(|n| out.get(n).into_iter().flatten()).copied().collect();
            frontier = next.into_iter().filter(|n| seen.insert(*n)).collect();
        }
        seen.into_iter().collect()
    }

    fn run(
        workers: usize,
        old: Vec<(i64, Digest)>,
        new: Vec<(i64, Digest)>,
        edges: Vec<(i64, i64)>,
        (hops, limit): (usize, usize),
    ) -> Affected {
        let results = timely::execute(timely::Config::process(workers), move |worker| {
            let (i, n) = (worker.index(), worker.peers());
            let share = |v: &[(i64, Digest)]| v.iter().skip(i).step_by(n).copied().collect::<Vec<_>>();
            let edges = edges.iter().skip(i).step_by(n).copied().collect::<Vec<_>>();
            affected(worker, (share(&old), share(&new)), || edges.iter().copied(), hops, limit)
        })
        .expect("timely runs")
        .join();
        let all: Vec<Affected> = results.into_iter().map(|r| r.expect("a worker ends")).collect();
        assert!(all.windows(2).all(|w| w[0] == w[1]), "every worker has the same result");
        all[0].clone()
    }

    #[test]
    fn the_affected_set_is_a_bfs_from_the_changed_nodes() {
        // A chain 0 -> 1 -> ... -> 9, a branch 3 -> 20 -> 21, and a cycle 30 <-> 31.
        let mut edges: Vec<(i64, i64)> = (0..9).map(|i| (i, i + 1)).collect();
        edges.extend([(3, 20), (20, 21), (30, 31), (31, 30)]);
        let nodes: Vec<i64> = (0..10).chain([20, 21, 30, 31]).collect();
        let old: Vec<(i64, Digest)> = nodes.iter().map(|&n| (n, n as u128 * 7)).collect();
        let mut new = old.clone();
        new.retain(|&(n, _)| n != 21); // removed
        new.iter_mut().filter(|(n, _)| *n == 2 || *n == 30).for_each(|(_, d)| *d += 1); // changed
        new.push((40, 1)); // added
        let changed: BTreeSet<i64> = [2, 21, 30, 40].into();
        for workers in [1, 3] {
            for hops in 0..4 {
                let want = by_bfs(&changed, &edges, hops);
                let got = run(workers, old.clone(), new.clone(), edges.clone(), (hops, want.len()));
                assert_eq!(got.changed, 4);
                assert_eq!(got.ids, want, "{workers} workers, {hops} hops");
                assert!(!got.past_limit);
                // One node fewer allowed: the search stops, and says so.
                let stopped = run(workers, old.clone(), new.clone(), edges.clone(), (hops, want.len() - 1));
                assert!(stopped.past_limit && stopped.ids.is_empty(), "{workers} workers, {hops} hops");
                assert_eq!(stopped.changed, 4);
            }
        }
    }

    #[test]
    fn no_change_affects_nothing() {
        let old: Vec<(i64, Digest)> = (0..100).map(|n| (n, n as u128)).collect();
        let edges: Vec<(i64, i64)> = (0..99).map(|n| (n, n + 1)).collect();
        let got = run(2, old.clone(), old, edges, (2, 0));
        assert_eq!(got, Affected::default());
    }
}
