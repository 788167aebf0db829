//! Which sample serves which layer: the one rule every stage follows.
//!
//! A k-layer GNN's layer `l` (1-based, 1 nearest the input) computes the nodes within `k - l`
//! hops of a target and aggregates over their in-edges; the in-edges a node keeps for layer `l`
//! are its best `fanouts[k - l]` by sampling key (`fanouts` lists the hops nearest first). So
//! the last layer, which computes the targets themselves (hop 0), uses the first fanout. A
//! node's sample depends only on `(seed, node)`, so its sample for layer `l` depends only on
//! `(seed, node, l)`: GraphFlat's records, the trainer's degrees and GraphInfer's rounds agree.
//!
//! [`Layers`] holds the rule for one run; GraphFlat builds it from the job
//! (`FlattenConfig::layers`), the trainer and GraphInfer from the recorded metadata
//! ([`Layers::recorded`]). "Every in-edge" is [`Fanout::Every`] inside the program; only the
//! recorded form (record metadata, `model-<run>.json`) spells it as an empty fanout list.

/// How many of a node's in-edges one hop keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fanout {
    /// Every in-edge (`sampler = "all"`).
    Every,
    /// The best this many by sampling key.
    Sample(u32),
}

impl Fanout {
    /// Of `n` in-edges, how many are kept.
    pub fn keep(self, n: u64) -> u64 {
        match self {
            Fanout::Every => n,
            Fanout::Sample(f) => n.min(u64::from(f)),
        }
    }

    /// Whether the in-edge of sampling rank `rank` (0 = best key) is kept.
    fn keeps_rank(self, rank: usize) -> bool {
        match self {
            Fanout::Every => true,
            Fanout::Sample(f) => rank < f as usize,
        }
    }

    /// The most in-edges kept per node (`usize::MAX` for every edge).
    fn limit(self) -> usize {
        match self {
            Fanout::Every => usize::MAX,
            Fanout::Sample(f) => f as usize,
        }
    }
}

/// The layer rule of a `hops()`-layer model: one [`Fanout`] per hop, nearest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    fanouts: Vec<Fanout>,
}

impl Layers {
    /// One fanout per hop, nearest first.
    pub fn new(fanouts: Vec<Fanout>) -> Self {
        Layers { fanouts }
    }

    /// `hops` layers that each keep every in-edge.
    pub fn every(hops: usize) -> Self {
        Layers { fanouts: vec![Fanout::Every; hops] }
    }

    /// The rule from its recorded form (record metadata, `model-<run>.json`): an empty list for every
    /// in-edge, else one fanout per hop. Readers of that form check the length first.
    pub fn recorded(hops: usize, fanouts: &[u32]) -> Self {
        if fanouts.is_empty() {
            return Layers::every(hops);
        }
        assert_eq!(fanouts.len(), hops, "{} recorded fanouts for {hops} hops", fanouts.len());
        Layers { fanouts: fanouts.iter().map(|&f| Fanout::Sample(f)).collect() }
    }

    /// k: the hops of the records, and the layers of the model.
    pub fn hops(&self) -> usize {
        self.fanouts.len()
    }

    /// The fanout of layer `layer` (1-based).
    pub fn fanout(&self, layer: usize) -> Fanout {
        let hops = self.hops();
        assert!((1..=hops).contains(&layer), "layer {layer} of a {hops}-layer model");
        self.fanouts[hops - layer]
    }

    /// In-edges a node with `sampled` stored in-edges aggregates over at `layer`: the first
    /// ones of its sample.
    pub fn count(&self, layer: usize, sampled: usize) -> usize {
        self.fanout(layer).keep(sampled as u64) as usize
    }

    /// A node's in-degree as `layer` counts it (GCN's normalization): the whole graph's,
    /// capped by the layer's fanout.
    pub fn degree(&self, layer: usize, in_degree: u64) -> u64 {
        self.fanout(layer).keep(in_degree)
    }

    /// The layers (bit `l - 1` for layer `l`) that the in-edge of sampling rank `rank` (0 =
    /// best key) of a node at `hop` serves: the layers that compute that node (`l <= k - hop`)
    /// and keep more than `rank` in-edges.
    pub fn mask(&self, rank: usize, hop: usize) -> u32 {
        (1..=self.hops().saturating_sub(hop))
            .filter(|&l| self.fanout(l).keeps_rank(rank))
            .fold(0, |mask, l| mask | 1 << (l - 1))
    }

    /// The rule of a model with one layer more than the records' hops, first: a layer that
    /// keeps no in-edge and counts no degree, for features that hold their neighbors' already
    /// (`[precompute]`'s `Â X`). GCN's layer over it is `x W + b` (its self-loop weighs
    /// `1 / (0 + 1)`); the records' layer `l` is the model's `l + 1`.
    pub fn dense_first(mut self) -> Layers {
        self.fanouts.push(Fanout::Sample(0));
        self
    }

    /// Whether layer 1 is such a dense layer: no record keeps a fanout of 0 (GraphFlat refuses
    /// one, and so does a record set's metadata), so only [`Layers::dense_first`] makes it.
    pub fn has_dense_first(&self) -> bool {
        self.fanouts.last() == Some(&Fanout::Sample(0))
    }

    /// The most in-edges any layer keeps per node: the size of a node's stored sample
    /// (`usize::MAX` when a layer keeps every edge).
    pub fn sample_limit(&self) -> usize {
        self.fanouts.iter().map(|f| f.limit()).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled(fanouts: &[u32]) -> Layers {
        Layers::new(fanouts.iter().map(|&f| Fanout::Sample(f)).collect())
    }

    #[test]
    fn a_dense_first_layer_reads_nothing_and_shifts_the_records_layers() {
        let dense = sampled(&[5, 2]).dense_first();
        assert_eq!(dense.hops(), 3);
        assert!(dense.has_dense_first() && !sampled(&[5, 2]).has_dense_first() && !Layers::every(2).has_dense_first());
        assert_eq!((dense.count(1, 40), dense.degree(1, 40)), (0, 0));
        assert_eq!((dense.fanout(2), dense.fanout(3)), (Fanout::Sample(2), Fanout::Sample(5)));
        assert_eq!(Layers::every(1).dense_first().degree(2, 7), 7);
        // The stored sample is the records' largest fanout.
        assert_eq!(dense.sample_limit(), 5);
    }

    #[test]
    fn the_last_layer_uses_the_first_fanout() {
        assert_eq!(sampled(&[5, 2]).fanout(2), Fanout::Sample(5));
        assert_eq!(sampled(&[5, 2]).fanout(1), Fanout::Sample(2));
        assert_eq!(Layers::every(2).fanout(1), Fanout::Every);
        assert_eq!(sampled(&[5, 2]).degree(1, 40), 2);
        assert_eq!(Layers::every(2).degree(1, 40), 40);
        assert_eq!(Layers::recorded(2, &[5, 2]).fanout(2), Fanout::Sample(5));
        assert_eq!(Layers::recorded(2, &[]).fanout(1), Fanout::Every);
        assert_eq!(Layers::recorded(2, &[5, 2]).degree(1, 40), 2);
    }

    #[test]
    fn masks_follow_the_fanouts() {
        // k = 2, fanouts [5, 2]: layer 2 (computing the root) keeps 5, layer 1 keeps 2.
        let layers = sampled(&[5, 2]);
        assert_eq!(layers.mask(0, 0), 0b11);
        assert_eq!(layers.mask(3, 0), 0b10);
        assert_eq!(layers.mask(5, 0), 0);
        assert_eq!(layers.mask(1, 1), 0b01);
        assert_eq!(layers.mask(2, 1), 0);
        assert_eq!(layers.mask(0, 2), 0, "nodes at hop k need no edges");
        assert_eq!(layers.sample_limit(), 5);
        assert_eq!(Layers::every(2).mask(1000, 0), 0b11, "every edge serves every layer without sampling");
    }

    #[test]
    fn the_recorded_form_spells_every_edge_as_no_fanouts() {
        assert_eq!(Layers::recorded(2, &[]), Layers::every(2));
        assert_eq!(Layers::recorded(2, &[5, 2]), sampled(&[5, 2]));
        assert_eq!(Layers::every(3).sample_limit(), usize::MAX);
        assert_eq!(Layers::recorded(2, &[5, 2]).count(2, 3), 3);
        assert_eq!(Layers::every(1).count(1, 7), 7);
    }
}
