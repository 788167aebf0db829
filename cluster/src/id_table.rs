//! A table from node ids to small values, for the lookups made once per edge: the map step's
//! endpoint combiner, the owner's node index, a plan's source rows.
//!
//! Why not [`IdMap`](crate::hash::IdMap): at 10M nodes such a map spans hundreds of
//! megabytes, so every lookup of a random id is a cache miss, and a SwissTable lookup costs two
//! (its control bytes, then its bucket). This table keeps key and value side by side in one
//! array (open addressing, linear probing, at most 3/4 full), so a lookup touches one cache line
//! but rarely two, and [`IdTable::prefetch`] lets a loop ask for the line of an id it will look
//! up a few iterations later: the misses of a loop over edges overlap instead of queueing. With
//! both, the cost per edge stays near its cost at 1M nodes, where the tables fit the caches.
//!
//! Invariants: every key lives in the probe run that starts at its hash's slot (no tombstones:
//! keys are never removed); the empty slot's key is `i64::MIN`, whose own value, when that id is
//! a key, lives beside the array. Iteration order depends only on the keys inserted and their
//! order, so it is the same from run to run.

use crate::hash::mix64;

/// The key of an empty slot.
const EMPTY: i64 = i64::MIN;

/// Slots before the first growth.
const MIN_SLOTS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Slot<V> {
    key: i64,
    value: V,
}

/// A map from `i64` ids to `V` (see the module doc).
#[derive(Debug, Clone)]
pub struct IdTable<V> {
    slots: Vec<Slot<V>>,
    /// The value of the id `i64::MIN`, which cannot live in `slots`.
    min: Option<V>,
    len: usize,
}

impl<V: Copy + Default> Default for IdTable<V> {
    fn default() -> Self {
        IdTable::with_capacity(0)
    }
}

impl<V: Copy + Default> IdTable<V> {
    /// A table that holds `n` ids before it grows.
    pub fn with_capacity(n: usize) -> Self {
        let slots = (n.saturating_mul(4) / 3 + 1).next_power_of_two().max(MIN_SLOTS);
        IdTable { slots: vec![Slot { key: EMPTY, value: V::default() }; slots], min: None, len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes its slots take.
    pub fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot<V>>()
    }

    /// The slot where `key`'s probe run starts.
    fn home(&self, key: i64) -> usize {
        mix64(key as u64) as usize & (self.slots.len() - 1)
    }

    /// `key`'s slot, or the empty slot where it would go.
    fn find(&self, key: i64) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        while self.slots[at].key != key && self.slots[at].key != EMPTY {
            at = (at + 1) & mask;
        }
        at
    }

    pub fn get(&self, key: i64) -> Option<V> {
        if key == EMPTY {
            return self.min;
        }
        let slot = &self.slots[self.find(key)];
        (slot.key == key).then_some(slot.value)
    }

    /// `key`'s value, inserted as `value()` first when the table has none: `(value, true)`
    /// when it was inserted now.
    pub fn get_or_insert_with(&mut self, key: i64, value: impl FnOnce() -> V) -> (&mut V, bool) {
        if key == EMPTY {
            let new = self.min.is_none();
            if new {
                self.len += 1;
            }
            return (self.min.get_or_insert_with(value), new);
        }
        let mut at = self.find(key);
        let new = self.slots[at].key == EMPTY;
        if new {
            if (self.len + 1) * 4 > self.slots.len() * 3 {
                self.grow();
                at = self.find(key);
            }
            self.slots[at] = Slot { key, value: value() };
            self.len += 1;
        }
        (&mut self.slots[at].value, new)
    }

    /// Asks the cache for the line where a lookup of `key` starts (no effect on the contents).
    #[inline]
    pub fn prefetch(&self, key: i64) {
        crate::prefetch::read(&self.slots[self.home(key)]);
    }

    /// Every (id, value), in slot order (`i64::MIN` last).
    pub fn iter(&self) -> impl Iterator<Item = (i64, V)> + '_ {
        let stored = self.slots.iter().filter(|s| s.key != EMPTY).map(|s| (s.key, s.value));
        stored.chain(self.min.map(|v| (EMPTY, v)))
    }

    fn grow(&mut self) {
        let empty = Slot { key: EMPTY, value: V::default() };
        let doubled = vec![empty; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        for slot in old.into_iter().filter(|s| s.key != EMPTY) {
            let at = self.find(slot.key);
            self.slots[at] = slot;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::IdMap;

    /// The table against std's map, over ids that collide in the low bits, negative ids and
    /// `i64::MIN`, through several growths.
    #[test]
    fn holds_what_a_hash_map_holds() {
        let mut table: IdTable<(u32, u32)> = IdTable::default();
        let mut reference: IdMap<i64, (u32, u32)> = IdMap::default();
        let ids = (0..50_000i64).map(|i| match i % 5 {
            0 => i << 20,
            1 => -i,
            2 => i64::MIN + (i % 3),
            3 => i64::MAX - (i % 7),
            _ => i * 7919 % 10_007,
        });
        for (n, id) in ids.enumerate() {
            let (value, new) = table.get_or_insert_with(id, || (n as u32, 0));
            value.1 += 1;
            assert_eq!(new, !reference.contains_key(&id), "id {id}");
            reference.entry(id).or_insert((n as u32, 0)).1 += 1;
        }
        assert_eq!(table.len(), reference.len());
        for (&id, &value) in &reference {
            assert_eq!(table.get(id), Some(value), "id {id}");
        }
        let mut listed: Vec<(i64, (u32, u32))> = table.iter().collect();
        listed.sort_unstable();
        let mut expected: Vec<(i64, (u32, u32))> = reference.into_iter().collect();
        expected.sort_unstable();
        assert_eq!(listed, expected);
        for absent in [1i64 << 62, -3 << 40, 10_008] {
            assert_eq!(table.get(absent), None, "id {absent}");
        }
    }

    #[test]
    fn stays_at_most_three_quarters_full() {
        let mut table: IdTable<u32> = IdTable::with_capacity(100);
        let slots = table.slots.len();
        for id in 0..100 {
            table.get_or_insert_with(id, || id as u32);
        }
        assert_eq!(table.slots.len(), slots, "room for the capacity asked");
        for id in 100..10_000 {
            table.get_or_insert_with(id, || id as u32);
            assert!(table.len() * 4 <= table.slots.len() * 3);
        }
        assert_eq!(table.get(9_999), Some(9_999));
    }
}
