//! Which sample serves which layer: the one rule every stage follows.
//!
//! A k-layer GNN's layer `l` (1-based, 1 nearest the input) computes the nodes within `k - l`
//! hops of a target and aggregates over their in-edges; the in-edges a node keeps for layer `l`
//! are its best `fanouts[k - l]` by sampling key (`fanouts` lists the hops nearest first). So
//! the last layer, which computes the targets themselves (hop 0), uses the first fanout. A
//! node's sample depends only on `(seed, node)`, so its sample for layer `l` depends only on
//! `(seed, node, l)`: GraphFlat's records, the trainer's degrees and GraphInfer's rounds agree.

/// The fanout of layer `layer` (1-based) of a `hops`-layer model; `None` when every in-edge is
/// kept (`fanouts` empty, as recorded for the `all` sampler).
pub fn layer_fanout(fanouts: &[u32], hops: usize, layer: usize) -> Option<u32> {
    assert!((1..=hops).contains(&layer), "layer {layer} of a {hops}-layer model");
    if fanouts.is_empty() { None } else { Some(fanouts[hops - layer]) }
}

/// The in-edges a node of in-degree `in_degree` aggregates over at `layer`.
pub fn layer_degree(fanouts: &[u32], hops: usize, layer: usize, in_degree: u64) -> u64 {
    layer_fanout(fanouts, hops, layer).map_or(in_degree, |f| in_degree.min(u64::from(f)))
}

/// The layers (bit `l - 1` for layer `l`) that the in-edge of sampling rank `rank` (0 = best
/// key) of a node at `hop` serves: the layers that compute that node (`l <= k - hop`) and keep
/// more than `rank` in-edges.
pub fn layer_mask(fanouts: &[u32], hops: usize, rank: usize, hop: usize) -> u32 {
    (1..=hops.saturating_sub(hop))
        .filter(|&l| layer_fanout(fanouts, hops, l).is_none_or(|f| rank < f as usize))
        .fold(0, |mask, l| mask | 1 << (l - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_layer_uses_the_first_fanout() {
        assert_eq!(layer_fanout(&[5, 2], 2, 2), Some(5));
        assert_eq!(layer_fanout(&[5, 2], 2, 1), Some(2));
        assert_eq!(layer_fanout(&[], 2, 1), None);
        assert_eq!(layer_degree(&[5, 2], 2, 1, 40), 2);
        assert_eq!(layer_degree(&[], 2, 1, 40), 40);
    }

    #[test]
    fn masks_follow_the_fanouts() {
        // k = 2, fanouts [5, 2]: layer 2 (computing the root) keeps 5, layer 1 keeps 2.
        assert_eq!(layer_mask(&[5, 2], 2, 0, 0), 0b11);
        assert_eq!(layer_mask(&[5, 2], 2, 3, 0), 0b10);
        assert_eq!(layer_mask(&[5, 2], 2, 5, 0), 0);
        assert_eq!(layer_mask(&[5, 2], 2, 1, 1), 0b01);
        assert_eq!(layer_mask(&[5, 2], 2, 2, 1), 0);
        assert_eq!(layer_mask(&[5, 2], 2, 0, 2), 0, "nodes at hop k need no edges");
        assert_eq!(layer_mask(&[], 2, 1000, 0), 0b11, "every edge serves every layer without sampling");
    }
}
