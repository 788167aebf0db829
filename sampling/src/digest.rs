//! A node's digest: 128 bits over everything of the node that a record or a score can take
//! from it, so that two runs whose digests of a node agree read the same node.
//!
//! What it covers, which is all that a round's answer about a node holds (GraphFlat's
//! `round::answer`): its id, type and string key; its features, label and split, bit for bit;
//! its in-degree; and its sampled in-edges in their order (source, weight, relation and edge
//! features). The sample is the one the run's settings give, so that a node whose in-edges
//! changed outside its sample, and whose in-degree did not, keeps its digest.
//!
//! Two independent 64-bit hashes make the digest: a node whose content changed keeps its
//! digest with probability about 2^-128, which at a billion changed nodes a night is never.

use cluster::hash::mix64;
use schemas::label::Label;

use crate::graph::NodeStore;

/// A node's digest (see the module doc).
pub type Digest = u128;

/// The two seeds of the digest's halves.
const SEEDS: [u64; 2] = [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344];

/// Folds 64-bit words into both halves of a digest (a node's, or what else a stage keeps a
/// digest of: GraphFlat's link tasks).
pub struct Hasher([u64; 2]);

impl Default for Hasher {
    fn default() -> Self {
        Hasher::new()
    }
}

impl Hasher {
    pub fn new() -> Self {
        Hasher(SEEDS)
    }

    pub fn word(&mut self, w: u64) {
        self.0[0] = mix64(self.0[0] ^ w);
        self.0[1] = mix64(self.0[1].rotate_left(23) ^ w.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }

    /// A sequence of words, with its length first: `[a] [b, c]` never hashes as `[a, b] [c]`.
    pub fn words(&mut self, words: impl ExactSizeIterator<Item = u64>) {
        self.word(words.len() as u64);
        words.for_each(|w| self.word(w));
    }

    fn floats(&mut self, values: &[f32]) {
        self.words(values.iter().map(|v| u64::from(v.to_bits())));
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        bytes.chunks(8).for_each(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.word(u64::from_le_bytes(w));
        });
    }

    pub fn finish(&self) -> Digest {
        (u128::from(self.0[0]) << 64) | u128::from(self.0[1])
    }
}

/// The digest of the node at `slot` of `nodes`, after sampling.
pub fn node_digest(nodes: &NodeStore, slot: usize) -> Digest {
    let mut h = Hasher::new();
    h.word(nodes.ids[slot] as u64);
    h.word(u64::from(nodes.node_type(slot)));
    h.bytes(nodes.key(slot).unwrap_or_default().as_bytes());
    h.floats(nodes.features(slot));
    match &nodes.labels[slot] {
        None => h.word(0),
        Some(Label::Class(c)) => h.words([1, *c as u64].into_iter()),
        Some(Label::Targets(t)) => {
            h.word(2);
            h.floats(t);
        }
    }
    h.word(nodes.splits[slot].map_or(0, |s| s as u64 + 1));
    h.word(nodes.in_degree[slot]);
    let sampled = nodes.sampled(slot);
    h.words(sampled.iter().map(|e| e.src as u64));
    h.words(sampled.iter().map(|e| (u64::from(e.weight.to_bits()) << 8) | u64::from(e.relation)));
    h.floats(nodes.sampled_features(slot));
    h.finish()
}

/// Every node's digest in `nodes`, by slot.
pub fn digests(nodes: &NodeStore) -> Vec<Digest> {
    (0..nodes.len()).map(|slot| node_digest(nodes, slot)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_hashes_apart_from_its_regrouping() {
        let digest = |groups: &[&[u64]]| {
            let mut h = Hasher::new();
            groups.iter().for_each(|g| h.words(g.iter().copied()));
            h.finish()
        };
        assert_ne!(digest(&[&[1], &[2, 3]]), digest(&[&[1, 2], &[3]]));
        assert_ne!(digest(&[&[], &[0]]), digest(&[&[0], &[]]));
        assert_eq!(digest(&[&[7, 8]]), digest(&[&[7, 8]]));
    }

    #[test]
    fn every_bit_of_a_float_counts() {
        let digest = |v: f32| {
            let mut h = Hasher::new();
            h.floats(&[v]);
            h.finish()
        };
        assert_ne!(digest(0.0), digest(-0.0));
        assert_ne!(digest(1.0), digest(f32::from_bits(1.0f32.to_bits() + 1)));
    }
}
