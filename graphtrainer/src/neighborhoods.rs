//! One copy of each endpoint neighborhood among the link records the cache keeps.
//!
//! A link record holds the k-hop neighborhood of its source, its destination and each negative,
//! and the same node is an endpoint of many records: on Cora each of 2,708 nodes is an endpoint
//! of about twelve of the 10,556 records, so the set decodes to 7.4 GB where its distinct
//! neighborhoods take 0.6 GB. The cache keeps one shared copy per distinct neighborhood, so a
//! budget that holds the distinct ones holds the whole set and later epochs decode nothing.
//!
//! Sharing is by value, never by id alone: an endpoint joins a pooled copy only when the two
//! records are equal (with `disjoint_train` a training edge's ends differ from the same nodes'
//! records elsewhere, and a hand-made set may differ anywhere). A root keeps at most
//! [`COPIES_PER_ROOT`] distinct copies, so the equality checks per endpoint are bounded; an
//! endpoint past that stays the record's own.

use std::collections::HashMap;
use std::sync::Arc;

use schemas::Record;
use schemas::record::LinkRecord;

/// Distinct neighborhoods pooled per root node.
pub const COPIES_PER_ROOT: usize = 4;

/// The pooled neighborhoods, by root node.
#[derive(Default)]
pub struct Neighborhoods {
    by_root: HashMap<i64, Vec<Arc<Record>>>,
    bytes: u64,
    /// A unit did not fit: later ones are not compared either (every epoch re-reads the units
    /// the cache could not keep, and comparing them again would only repeat the refusal) until
    /// [`Neighborhoods::prune`] frees room.
    full: bool,
}

/// Where an endpoint's shared copy comes from, decided before anything changes.
enum Copy {
    Pooled(Arc<Record>),
    /// The `i`-th of this call's new copies.
    New(usize),
    Own,
}

impl Neighborhoods {
    /// Bytes of the pooled copies.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Makes `links` share their endpoints with the pool, adding the neighborhoods it lacks,
    /// if the bytes that keeping `links` adds (their own and the pool's new copies) fit in
    /// `room`; returns their own bytes (the pool counts its copies in [`Neighborhoods::bytes`]),
    /// or `None` with nothing changed.
    pub fn share(&mut self, links: &mut [LinkRecord], room: u64) -> Option<u64> {
        if self.full || links.iter().map(own_bytes).sum::<u64>() > room {
            return None; // before comparing any neighborhood
        }
        let mut new: Vec<Arc<Record>> = Vec::new();
        let mut new_by_root: HashMap<i64, Vec<usize>> = HashMap::new();
        let (mut own, mut added) = (0u64, 0u64);
        let mut copies = Vec::with_capacity(links.iter().map(|l| l.endpoints.len()).sum());
        for link in links.iter() {
            own += own_bytes(link);
            for e in &link.endpoints {
                let pooled = self.by_root.get(&e.root).map_or(&[][..], Vec::as_slice);
                let fresh = new_by_root.get(&e.root).map_or(&[][..], Vec::as_slice);
                let copy = if let Some(p) = pooled.iter().find(|p| ***p == **e) {
                    Copy::Pooled(p.clone())
                } else if let Some(&i) = fresh.iter().find(|&&i| *new[i] == **e) {
                    Copy::New(i)
                } else if pooled.len() + fresh.len() < COPIES_PER_ROOT {
                    new_by_root.entry(e.root).or_default().push(new.len());
                    new.push(e.clone());
                    added += e.size_bytes() as u64;
                    Copy::New(new.len() - 1)
                } else {
                    own += e.size_bytes() as u64;
                    Copy::Own
                };
                copies.push(copy);
            }
        }
        if own + added > room {
            self.full = true;
            return None;
        }
        let mut copies = copies.into_iter();
        for e in links.iter_mut().flat_map(|l| l.endpoints.iter_mut()) {
            match copies.next() {
                Some(Copy::Pooled(p)) => *e = p,
                Some(Copy::New(i)) => *e = new[i].clone(),
                _ => {}
            }
        }
        self.bytes += added;
        for r in new {
            self.by_root.entry(r.root).or_default().push(r);
        }
        Some(own)
    }

    /// Drops the copies no kept record holds any more.
    pub fn prune(&mut self) {
        let mut freed = 0u64;
        self.by_root.retain(|_, copies| {
            copies.retain(|c| {
                let used = Arc::strong_count(c) > 1;
                if !used {
                    freed += c.size_bytes() as u64;
                }
                used
            });
            !copies.is_empty()
        });
        self.bytes -= freed;
        self.full = false;
    }
}

/// What a link record takes besides its endpoints' neighborhoods.
fn own_bytes(link: &LinkRecord) -> u64 {
    (8 * link.negatives.len() + 32 + 8 * link.endpoints.len()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn neighborhood(root: i64, feature: f32) -> Arc<Record> {
        Arc::new(Record {
            root,
            node_ids: vec![root, root + 1],
            hops: vec![0, 1],
            features: vec![feature; 4],
            ..Record::default()
        })
    }

    fn link(src: i64, dst: i64, dst_feature: f32) -> LinkRecord {
        let endpoints = vec![neighborhood(src, 1.0), neighborhood(dst, dst_feature)];
        LinkRecord { src, dst, split: None, negatives: vec![], endpoints }
    }

    #[test]
    fn equal_neighborhoods_share_one_copy_and_unequal_ones_stay_apart() {
        let mut pool = Neighborhoods::default();
        // Node 2 as a destination twice alike, once with other features (a disjoint_train end).
        let mut links = vec![link(1, 2, 0.5), link(3, 2, 0.5), link(4, 2, 0.25)];
        let before = links.clone();
        let own = pool.share(&mut links, u64::MAX).unwrap();
        assert_eq!(links, before, "sharing changes no record's value");
        assert!(Arc::ptr_eq(&links[0].endpoints[1], &links[1].endpoints[1]));
        assert!(!Arc::ptr_eq(&links[0].endpoints[1], &links[2].endpoints[1]));
        let distinct = 5; // roots 1, 3 and 4, and root 2 twice
        assert_eq!(pool.bytes(), distinct * before[0].endpoints[0].size_bytes() as u64);
        assert_eq!(own, links.iter().map(own_bytes).sum::<u64>());

        // A later unit finds the pooled copies.
        let mut later = vec![link(1, 2, 0.25)];
        pool.share(&mut later, u64::MAX).unwrap();
        assert!(Arc::ptr_eq(&later[0].endpoints[0], &links[0].endpoints[0]));
        assert!(Arc::ptr_eq(&later[0].endpoints[1], &links[2].endpoints[1]));
    }

    #[test]
    fn records_that_do_not_fit_change_nothing() {
        let mut pool = Neighborhoods::default();
        let mut links = vec![link(1, 2, 0.5), link(3, 2, 0.5)];
        // Their own bytes and three distinct neighborhoods (roots 1, 2 and 3).
        let needed = links.iter().map(own_bytes).sum::<u64>() + 3 * links[0].endpoints[0].size_bytes() as u64;
        assert_eq!(pool.share(&mut links, needed - 1), None);
        assert_eq!(pool.bytes(), 0);
        assert!(!Arc::ptr_eq(&links[0].endpoints[1], &links[1].endpoints[1]));
        // Refused once, the pool compares nothing more until pruning frees room.
        assert_eq!(pool.share(&mut links, needed), None);
        pool.prune();
        assert!(pool.share(&mut links, needed).is_some());
    }

    #[test]
    fn a_root_keeps_a_bounded_number_of_copies_and_pruning_drops_unused_ones() {
        let mut pool = Neighborhoods::default();
        let mut links: Vec<LinkRecord> = (0..COPIES_PER_ROOT + 2).map(|i| link(1, 2, i as f32)).collect();
        let own = pool.share(&mut links, u64::MAX).unwrap();
        let size = links[0].endpoints[0].size_bytes() as u64;
        // Root 1 once, root 2 up to the bound; the two past it stay their records' own.
        assert_eq!(pool.bytes(), (1 + COPIES_PER_ROOT as u64) * size);
        assert_eq!(own, links.iter().map(own_bytes).sum::<u64>() + 2 * size);
        drop(links);
        pool.prune();
        assert_eq!(pool.bytes(), 0);
        assert!(pool.by_root.is_empty());
    }
}
