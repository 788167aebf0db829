//! The partition of the coarsest graph, on one worker: multilevel recursive bisection in the
//! manner of METIS (Karypis and Kumar, 1998), then a k-way pass that moves nodes to the part
//! they have most edges to and brings every part within its cap.
//!
//! A bisection coarsens by heavy-edge matching (each node, in a seeded order, joins its
//! unmatched neighbor of heaviest edge, while the pair stays light enough to balance), splits
//! the coarsest graph by growing a region from several seeds (greedy graph growing) and keeps
//! the best, then refines each level on the way back with Fiduccia-Mattheyses passes (moves by
//! gain, the best prefix kept). Everything is a function of the graph and the seed: the same
//! partition on any cluster shape.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cluster::hash::hash3;

/// A graph in compressed rows: node `u`'s neighbors are `adj[at[u]..at[u + 1]]`, with edge
/// weights `ew` alike, and `vw[u]` is its weight. Symmetric, without self-loops.
#[derive(Debug, Clone, Default)]
pub struct Csr {
    pub at: Vec<usize>,
    pub adj: Vec<u32>,
    pub ew: Vec<u64>,
    pub vw: Vec<u64>,
}

impl Csr {
    pub fn len(&self) -> usize {
        self.vw.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vw.is_empty()
    }

    fn neighbors(&self, u: usize) -> impl Iterator<Item = (usize, u64)> + '_ {
        let range = self.at[u]..self.at[u + 1];
        self.adj[range.clone()].iter().map(|&v| v as usize).zip(self.ew[range].iter().copied())
    }

    fn total(&self) -> u64 {
        self.vw.iter().sum()
    }

    /// The subgraph of `nodes` (numbered by position), edges leaving it dropped.
    fn induced(&self, nodes: &[u32]) -> Csr {
        let mut local = vec![u32::MAX; self.len()];
        nodes.iter().enumerate().for_each(|(i, &u)| local[u as usize] = i as u32);
        let mut g = Csr { at: vec![0], ..Csr::default() };
        for &u in nodes {
            for (v, w) in self.neighbors(u as usize) {
                if local[v] != u32::MAX {
                    g.adj.push(local[v]);
                    g.ew.push(w);
                }
            }
            g.at.push(g.adj.len());
            g.vw.push(self.vw[u as usize]);
        }
        g
    }

    /// The weight of edges whose ends are in different parts (each undirected edge once).
    pub fn cut(&self, part: &[u32]) -> u64 {
        let twice: u64 = (0..self.len())
            .flat_map(|u| self.neighbors(u).filter(move |&(v, _)| part[u] != part[v]).map(|(_, w)| w))
            .sum();
        twice / 2
    }
}

/// A seeded rank of `x`, for orders and ties.
fn rank(seed: u64, x: u64) -> u64 {
    hash3(seed, x, 0x9a71_7e5e_0b15_ec7d)
}

/// `parts` parts of `g`, each of weight at most `cap` where the node weights allow it.
pub fn partition(g: &Csr, parts: usize, cap: u64, seed: u64) -> Vec<u32> {
    let mut part = vec![0u32; g.len()];
    if parts > 1 && !g.is_empty() {
        let total = g.total().max(1);
        let slack = (cap as f64 * parts as f64 / total as f64 - 1.0).max(0.0);
        let depth = (parts as f64).log2().ceil().max(1.0);
        let nodes: Vec<u32> = (0..g.len() as u32).collect();
        split(g, &nodes, 0, parts, slack / depth, seed, &mut part);
        refine_kway(g, &mut part, parts, cap, seed);
    }
    part
}

/// Parts `first..first + parts` for `nodes` of `g`, by recursive bisection.
fn split(g: &Csr, nodes: &[u32], first: u32, parts: usize, eps: f64, seed: u64, out: &mut [u32]) {
    if parts == 1 || nodes.is_empty() {
        nodes.iter().for_each(|&u| out[u as usize] = first);
        return;
    }
    let left = parts / 2;
    let sub = g.induced(nodes);
    let total = sub.total();
    let target = (u128::from(total) * left as u128 / parts as u128) as u64;
    let tol = (target as f64 * eps) as u64;
    let side = bisect(&sub, target, tol, rank(seed, u64::from(first)));
    let on = |want: u8| nodes.iter().zip(&side).filter(|(_, s)| **s == want).map(|(u, _)| *u).collect::<Vec<u32>>();
    let (l, r) = (on(0), on(1));
    split(g, &l, first, left, eps, seed, out);
    split(g, &r, first + left as u32, parts - left, eps, seed, out);
}

/// Side 0 of weight near `target` (within `tol` where possible), side 1 the rest.
fn bisect(g: &Csr, target: u64, tol: u64, seed: u64) -> Vec<u8> {
    // Coarsen: each level's graph and the map from the finer level's nodes to it.
    let limit = tol.max(g.total() / 64).max(1);
    let mut levels: Vec<(Csr, Vec<u32>)> = Vec::new();
    loop {
        let current = levels.last().map_or(g, |(c, _)| c);
        if current.len() <= 64 || levels.len() >= 32 {
            break;
        }
        let (coarse, map) = match_heavy_edges(current, limit, rank(seed, levels.len() as u64));
        if coarse.len() * 20 > current.len() * 19 {
            break;
        }
        levels.push((coarse, map));
    }
    let coarsest = levels.last().map_or(g, |(c, _)| c);
    let mut side = grow_best(coarsest, target, tol, seed);
    // Uncoarsen: project each level's sides to the finer one and refine there.
    for l in (0..levels.len()).rev() {
        let finer = if l == 0 { g } else { &levels[l - 1].0 };
        side = levels[l].1.iter().map(|&c| side[c as usize]).collect();
        fm(finer, &mut side, target, tol);
    }
    side
}

/// Heavy-edge matching: the coarse graph and each node's coarse node.
fn match_heavy_edges(g: &Csr, limit: u64, seed: u64) -> (Csr, Vec<u32>) {
    let n = g.len();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&u| rank(seed, u64::from(u)));
    let mut map = vec![u32::MAX; n];
    let mut groups: Vec<(u32, Option<u32>)> = Vec::new();
    for &u in &order {
        if map[u as usize] != u32::MAX {
            continue;
        }
        let mate = g
            .neighbors(u as usize)
            .filter(|&(v, _)| map[v] == u32::MAX && g.vw[u as usize] + g.vw[v] <= limit)
            .max_by_key(|&(v, w)| (w, Reverse(v)))
            .map(|(v, _)| v as u32);
        let c = groups.len() as u32;
        map[u as usize] = c;
        if let Some(v) = mate {
            map[v as usize] = c;
        }
        groups.push((u, mate));
    }
    // The coarse adjacency, merged through a dense row of the coarse node being built.
    let mut coarse = Csr { at: vec![0], ..Csr::default() };
    let mut slot = vec![usize::MAX; groups.len()];
    for (c, &(u, mate)) in groups.iter().enumerate() {
        let start = coarse.adj.len();
        for x in std::iter::once(u).chain(mate) {
            for (v, w) in g.neighbors(x as usize) {
                let cv = map[v] as usize;
                if cv == c {
                    continue;
                }
                if slot[cv] == usize::MAX || slot[cv] < start {
                    slot[cv] = coarse.adj.len();
                    coarse.adj.push(cv as u32);
                    coarse.ew.push(w);
                } else {
                    coarse.ew[slot[cv]] += w;
                }
            }
        }
        coarse.at.push(coarse.adj.len());
        coarse.vw.push(g.vw[u as usize] + mate.map_or(0, |v| g.vw[v as usize]));
    }
    (coarse, map)
}

/// The best of several grown regions after refinement: fewest excess weight, then cut.
fn grow_best(g: &Csr, target: u64, tol: u64, seed: u64) -> Vec<u8> {
    let mut best: Option<((u64, u64), Vec<u8>)> = None;
    for t in 0..8u64 {
        let start = (0..g.len()).min_by_key(|&u| rank(seed ^ t, u as u64)).unwrap_or(0);
        let mut side = grow(g, start, target, seed ^ t);
        fm(g, &mut side, target, tol);
        let w0: u64 = (0..g.len()).filter(|&u| side[u] == 0).map(|u| g.vw[u]).sum();
        let part: Vec<u32> = side.iter().map(|&s| u32::from(s)).collect();
        let score = (excess(w0, target, tol), g.cut(&part));
        if best.as_ref().is_none_or(|(b, _)| score < *b) {
            best = Some((score, side));
        }
    }
    best.map(|(_, s)| s).unwrap_or_default()
}

/// How far `w0` lies outside `target ± tol`.
fn excess(w0: u64, target: u64, tol: u64) -> u64 {
    w0.abs_diff(target).saturating_sub(tol)
}

/// A region grown from `start` (side 0) by the node with most edges into it, until it weighs
/// `target`; a region that runs out of neighbors restarts from the next node in seeded order.
fn grow(g: &Csr, start: usize, target: u64, seed: u64) -> Vec<u8> {
    let n = g.len();
    let mut side = vec![1u8; n];
    let degree: Vec<i64> = (0..n).map(|u| g.neighbors(u).map(|(_, w)| w as i64).sum()).collect();
    let mut inside = vec![0i64; n];
    let mut heap = BinaryHeap::new();
    let mut restarts: Vec<usize> = (0..n).collect();
    restarts.sort_unstable_by_key(|&u| Reverse(rank(seed, u as u64)));
    heap.push((0i64, 0u64, start));
    let mut w0 = 0;
    while w0 < target {
        let u = match heap.pop() {
            Some((key, _, u)) if side[u] == 1 && key == 2 * inside[u] - degree[u] => u,
            Some(_) => continue,
            None => {
                while restarts.last().is_some_and(|&u| side[u] == 0) {
                    restarts.pop();
                }
                match restarts.pop() {
                    Some(u) => u,
                    None => break,
                }
            }
        };
        side[u] = 0;
        w0 += g.vw[u];
        for (v, w) in g.neighbors(u) {
            if side[v] == 1 {
                inside[v] += w as i64;
                heap.push((2 * inside[v] - degree[v], rank(seed, v as u64), v));
            }
        }
    }
    side
}

/// Fiduccia-Mattheyses passes: moves by best gain (never out of balance further than it is),
/// each node once a pass; the pass keeps its best prefix (least excess, then least cut).
fn fm(g: &Csr, side: &mut [u8], target: u64, tol: u64) {
    let n = g.len();
    for _ in 0..10 {
        let mut gain: Vec<i64> = (0..n)
            .map(|u| g.neighbors(u).map(|(v, w)| if side[v] == side[u] { -(w as i64) } else { w as i64 }).sum())
            .collect();
        let mut w0: u64 = (0..n).filter(|&u| side[u] == 0).map(|u| g.vw[u]).sum();
        let mut heaps = [BinaryHeap::new(), BinaryHeap::new()];
        for u in 0..n {
            heaps[side[u] as usize].push((gain[u], Reverse(u)));
        }
        let mut locked = vec![false; n];
        let mut moves: Vec<usize> = Vec::new();
        let (mut delta, mut best) = (0i64, (excess(w0, target, tol), 0i64, 0usize));
        let patience = 64.max(n / 50);
        loop {
            let mut pick: Option<(i64, usize)> = None;
            for (s, heap) in heaps.iter_mut().enumerate() {
                while let Some(&(key, Reverse(u))) = heap.peek() {
                    if locked[u] || side[u] as usize != s || key != gain[u] {
                        heap.pop();
                        continue;
                    }
                    let after = if s == 0 { w0 - g.vw[u] } else { w0 + g.vw[u] };
                    if excess(after, target, tol) <= excess(w0, target, tol) && pick.is_none_or(|(k, _)| key > k) {
                        pick = Some((key, u));
                    }
                    break;
                }
            }
            let Some((key, u)) = pick else { break };
            heaps[side[u] as usize].pop();
            w0 = if side[u] == 0 { w0 - g.vw[u] } else { w0 + g.vw[u] };
            side[u] ^= 1;
            locked[u] = true;
            delta -= key;
            gain[u] = -gain[u];
            for (v, w) in g.neighbors(u) {
                gain[v] += if side[v] == side[u] { -2 * w as i64 } else { 2 * w as i64 };
                if !locked[v] {
                    heaps[side[v] as usize].push((gain[v], Reverse(v)));
                }
            }
            moves.push(u);
            let now = (excess(w0, target, tol), delta, moves.len());
            if (now.0, now.1) < (best.0, best.1) {
                best = now;
            }
            if moves.len() - best.2 > patience {
                break;
            }
        }
        for &u in &moves[best.2..] {
            side[u] ^= 1;
        }
        if best.2 == 0 {
            break;
        }
    }
}

/// Moves nodes to the part they have most edges to while the part has room, then brings
/// every part within `cap`, moving the nodes that lose least.
fn refine_kway(g: &Csr, part: &mut [u32], parts: usize, cap: u64, seed: u64) {
    let mut sizes = vec![0u64; parts];
    (0..g.len()).for_each(|u| sizes[part[u] as usize] += g.vw[u]);
    let mut order: Vec<usize> = (0..g.len()).collect();
    order.sort_unstable_by_key(|&u| rank(seed, u as u64));
    let mut conn = vec![0u64; parts];
    let mut touched = Vec::new();
    for _ in 0..8 {
        let mut moved = 0;
        for &u in &order {
            connections(g, u, part, &mut conn, &mut touched);
            let p = part[u] as usize;
            let room = |q: usize| sizes[q] + g.vw[u] <= cap;
            let best = touched.iter().copied().filter(|&q| q != p && room(q)).max_by_key(|&q| (conn[q], Reverse(q)));
            if let Some(q) = best.filter(|&q| conn[q] > conn[p]) {
                sizes[p] -= g.vw[u];
                sizes[q] += g.vw[u];
                part[u] = q as u32;
                moved += 1;
            }
            touched.iter().for_each(|&q| conn[q] = 0);
        }
        if moved == 0 {
            break;
        }
    }
    rebalance(g, part, &mut sizes, cap, &order);
}

/// Each part over `cap` gives its nodes that lose least (edges kept minus edges to the
/// target) to parts with room, until it is within `cap` or nothing can move.
fn rebalance(g: &Csr, part: &mut [u32], sizes: &mut [u64], cap: u64, order: &[usize]) {
    let parts = sizes.len();
    let mut conn = vec![0u64; parts];
    let mut touched = Vec::new();
    for p in 0..parts {
        if sizes[p] <= cap {
            continue;
        }
        let mut losses: Vec<(i64, usize)> = Vec::new();
        for (r, &u) in order.iter().enumerate() {
            if part[u] as usize == p {
                connections(g, u, part, &mut conn, &mut touched);
                let best = touched.iter().filter(|&&q| q != p).map(|&q| conn[q]).max().unwrap_or(0);
                losses.push((conn[p] as i64 - best as i64, r));
                touched.iter().for_each(|&q| conn[q] = 0);
            }
        }
        losses.sort_unstable();
        for (_, r) in losses {
            if sizes[p] <= cap {
                break;
            }
            let u = order[r];
            connections(g, u, part, &mut conn, &mut touched);
            let room = |q: usize| q != p && sizes[q] + g.vw[u] <= cap;
            let target = touched
                .iter()
                .copied()
                .filter(|&q| room(q))
                .max_by_key(|&q| (conn[q], Reverse(q)))
                .or_else(|| (0..parts).filter(|&q| room(q)).min_by_key(|&q| (sizes[q], q)));
            touched.iter().for_each(|&q| conn[q] = 0);
            if let Some(q) = target {
                sizes[p] -= g.vw[u];
                sizes[q] += g.vw[u];
                part[u] = q as u32;
            }
        }
    }
}

/// `conn[q]`: the weight of `u`'s edges into part `q`, for the parts in `touched` (own part
/// included); `conn` must be zero elsewhere.
fn connections(g: &Csr, u: usize, part: &[u32], conn: &mut [u64], touched: &mut Vec<usize>) {
    touched.clear();
    touched.push(part[u] as usize);
    for (v, w) in g.neighbors(u) {
        let q = part[v] as usize;
        if conn[q] == 0 && !touched.contains(&q) {
            touched.push(q);
        }
        conn[q] += w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph from undirected edges, each node of weight 1.
    fn graph(n: usize, edges: &[(u32, u32)]) -> Csr {
        let mut rows = vec![Vec::new(); n];
        for &(a, b) in edges {
            rows[a as usize].push(b);
            rows[b as usize].push(a);
        }
        let mut g = Csr { at: vec![0], ..Csr::default() };
        for row in rows {
            g.ew.extend(row.iter().map(|_| 1));
            g.adj.extend(row);
            g.at.push(g.adj.len());
            g.vw.push(1);
        }
        g
    }

    /// `k` cliques of `size` nodes, each joined to the next by one edge.
    fn cliques(k: u32, size: u32) -> (Csr, Vec<(u32, u32)>) {
        let mut edges = Vec::new();
        for c in 0..k {
            let base = c * size;
            for a in 0..size {
                for b in a + 1..size {
                    edges.push((base + a, base + b));
                }
            }
            edges.push((base, ((c + 1) % k) * size + 1));
        }
        (graph((k * size) as usize, &edges), edges)
    }

    #[test]
    fn cliques_are_found_exactly() {
        // The best partition cuts only the k joining edges: a plain check of every part.
        let (g, _) = cliques(8, 20);
        let part = partition(&g, 8, 20, 7);
        assert_eq!(g.cut(&part), 8);
        for c in 0..8 {
            let first = part[c * 20];
            assert!((0..20).all(|i| part[c * 20 + i] == first), "clique {c} split");
        }
    }

    #[test]
    fn parts_stay_within_their_cap_on_a_path() {
        // A path of 1,000 nodes in 7 parts: the best cut is 6 edges; caps hold.
        let edges: Vec<(u32, u32)> = (0..999).map(|i| (i, i + 1)).collect();
        let g = graph(1000, &edges);
        let cap = (1.03f64 * 1000.0 / 7.0) as u64;
        let part = partition(&g, 7, cap, 1);
        let mut sizes = [0u64; 7];
        part.iter().for_each(|&p| sizes[p as usize] += 1);
        assert!(sizes.iter().all(|&s| s <= cap && s > 0), "{sizes:?}");
        assert!(g.cut(&part) <= 12, "cut {}", g.cut(&part));
    }

    #[test]
    fn disconnected_and_tiny_graphs_balance() {
        let g = graph(10, &[]);
        let part = partition(&g, 4, 3, 0);
        let mut sizes = [0u64; 4];
        part.iter().for_each(|&p| sizes[p as usize] += 1);
        assert!(sizes.iter().all(|&s| s <= 3), "{sizes:?}");
        assert_eq!(partition(&graph(3, &[(0, 1)]), 8, 1, 0).iter().collect::<std::collections::HashSet<_>>().len(), 3);
    }
}
