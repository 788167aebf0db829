//! Which worker owns each node: by default the hash of its id ([`owner_key`]), or a partition
//! table's part (`[partition]`'s output) for the nodes the table names.
//!
//! Every message about a node travels to its owner under the routing key [`Owners::key`]:
//! timely sends a record keyed `k` to worker `k % peers`. A node the map names gets the key
//! `worker` itself (`< peers`, so it is its own remainder); any other node keeps its hash, so
//! that without a map every route is the one it always was. Part `p` of `parts` lives on worker
//! `p * peers / parts`: contiguous runs of parts share a worker, which keeps neighboring parts of
//! a recursive bisection together when there are more parts than workers.
//!
//! Outputs never depend on the owner: every result is a function of ids, seeds and sums, which
//! is why the same job gives the same outputs on any cluster shape. An owner map only changes
//! which edges cross workers, and where in its owner's arrays a node lies ([`Owners::order`]).
//!
//! The map is read once per process and shared by its workers (an `Arc`): an [`IdTable`] of
//! 16-byte slots, 4/3 to 8/3 slots a named node (a power of two at most 3/4 full), so 21 to 43
//! bytes a node in every process (268 MB at 10M nodes). A lookup is a random read of it, so the
//! hot loops look a node up once (an endpoint's key is kept beside it in sampling), not once per
//! edge.

use std::sync::Arc;

use crate::hash::owner_key;
use crate::id_table::IdTable;

/// Each named node's part, and the number of parts.
#[derive(Debug, Clone, Default)]
pub struct OwnerMap {
    part_of: IdTable<u32>,
    parts: u32,
}

impl OwnerMap {
    /// An empty map that holds `capacity` nodes before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        OwnerMap { part_of: IdTable::with_capacity(capacity), parts: 0 }
    }

    /// A map of `(node, part)` (a node named twice keeps its first part).
    pub fn new(entries: impl IntoIterator<Item = (i64, u32)>, capacity: usize) -> Self {
        let mut map = OwnerMap::with_capacity(capacity);
        for (node, part) in entries {
            map.insert(node, part);
        }
        map
    }

    /// Names `node`'s part; `false` (and no change) when the map names it already.
    pub fn insert(&mut self, node: i64, part: u32) -> bool {
        let new = self.part_of.get_or_insert_with(node, || part).1;
        if new {
            self.parts = self.parts.max(part + 1);
        }
        new
    }

    /// The nodes it names.
    pub fn len(&self) -> usize {
        self.part_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.part_of.is_empty()
    }

    /// The number of parts (one past the largest).
    pub fn parts(&self) -> u32 {
        self.parts
    }

    /// `node`'s part, when the map names it.
    pub fn part(&self, node: i64) -> Option<u32> {
        self.part_of.get(node)
    }
}

/// The owner of every node, on a cluster of `peers` workers.
#[derive(Debug, Clone)]
pub struct Owners {
    peers: u64,
    map: Option<Arc<OwnerMap>>,
}

/// One worker's owners, until a stage sets the cluster's (a store made outside a stage).
impl Default for Owners {
    fn default() -> Self {
        Owners::hashed(1)
    }
}

impl Owners {
    /// Every node owned by the hash of its id.
    pub fn hashed(peers: usize) -> Self {
        Owners { peers: peers.max(1) as u64, map: None }
    }

    /// The nodes `map` names owned by their part's worker, the others by the hash.
    pub fn mapped(peers: usize, map: Arc<OwnerMap>) -> Self {
        Owners { peers: peers.max(1) as u64, map: Some(map) }
    }

    /// Whether an owner map is in use.
    pub fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// The routing key of `node`: a timely exchange keyed by it sends to [`Owners::of`]. On one
    /// worker every key is 0, and no map is looked up.
    #[inline]
    pub fn key(&self, node: i64) -> u64 {
        if self.peers == 1 {
            return 0;
        }
        match self.map.as_deref().and_then(|m| Some((m.part(node)?, m.parts))) {
            Some((part, parts)) => u64::from(part) * self.peers / u64::from(parts),
            None => owner_key(node),
        }
    }

    /// The worker that owns `node`.
    #[inline]
    pub fn of(&self, node: i64) -> usize {
        (self.key(node) % self.peers) as usize
    }

    /// The routing key of a (possibly re-indexed) reducer of `node`: salt 0 is its owner, so a
    /// node that is not a hub is reduced where it lives; salt `s` is `s` workers further.
    #[inline]
    pub fn reducer_key(&self, node: i64, salt: u64) -> u64 {
        self.key(node).wrapping_add(salt)
    }

    /// Where `node` lies in its owner's arrays, as a sort key: with a map, by part and then by
    /// id (so that a part's nodes lie together, and a fold over a part's edges reads rows near
    /// each other), nodes the map does not name last; without a map, `None` (the arrival order
    /// stands).
    pub fn order(&self, node: i64) -> Option<(u32, i64)> {
        let map = self.map.as_deref()?;
        Some((map.part(node).unwrap_or(u32::MAX), node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_map_every_route_is_the_hash() {
        let owners = Owners::hashed(3);
        for id in [-5i64, 0, 1, 77, i64::MIN, i64::MAX] {
            assert_eq!(owners.key(id), owner_key(id));
            assert_eq!(owners.of(id) as u64, owner_key(id) % 3);
            assert_eq!(owners.reducer_key(id, 2), owner_key(id).wrapping_add(2));
            assert_eq!(owners.order(id), None);
        }
    }

    #[test]
    fn parts_go_to_workers_in_contiguous_runs_and_unnamed_nodes_fall_back_to_the_hash() {
        // 8 parts on 3 workers: parts 0-2 on worker 0, 3-5 on worker 1, 6-7 on worker 2.
        let map = Arc::new(OwnerMap::new((0..8).map(|p| (100 + p as i64, p)), 8));
        let owners = Owners::mapped(3, map);
        let workers: Vec<usize> = (100..108).map(|id| owners.of(id)).collect();
        assert_eq!(workers, [0, 0, 0, 1, 1, 1, 2, 2]);
        for id in 100..108 {
            // A key below `peers` is its own remainder: timely routes it to `of`.
            assert!(owners.key(id) < 3);
            assert_eq!(owners.reducer_key(id, 0), owners.key(id));
        }
        assert_eq!(owners.of(5), (owner_key(5) % 3) as usize);
        assert_eq!(owners.order(103), Some((3, 103)));
        assert_eq!(owners.order(5), Some((u32::MAX, 5)));
    }

    #[test]
    fn every_worker_gets_parts_when_parts_equal_workers() {
        let map = Arc::new(OwnerMap::new((0..4).map(|p| (p as i64, p)), 4));
        let owners = Owners::mapped(4, map.clone());
        assert_eq!((0..4).map(|id| owners.of(id)).collect::<Vec<_>>(), [0, 1, 2, 3]);
        // Fewer parts than workers: some workers own no named node.
        let owners = Owners::mapped(7, map);
        let workers: Vec<usize> = (0..4).map(|id| owners.of(id)).collect();
        assert_eq!(workers, [0, 1, 3, 5]);
    }

    #[test]
    fn a_node_named_twice_keeps_its_first_part() {
        let map = OwnerMap::new([(1, 0), (1, 5), (2, 1)], 2);
        assert_eq!((map.len(), map.part(1), map.parts()), (2, Some(0), 2));
    }
}
