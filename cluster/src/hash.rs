//! Fixed, platform-independent hashing: the owner of a node and every sampling priority derive
//! from these, so results never depend on worker count, process count or message order.

/// splitmix64's finalizer: a bijective mix of 64 bits.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A hash of three words, order-sensitive.
pub fn hash3(a: u64, b: u64, c: u64) -> u64 {
    mix64(mix64(mix64(a ^ 0x9e37_79b9_7f4a_7c15) ^ b) ^ c)
}

/// The routing key of a node: timely sends a record keyed `k` to worker `k % peers`.
pub fn owner_key(node: i64) -> u64 {
    mix64(node as u64 ^ 0x5851_f42d_4c95_7f2d)
}

/// The routing key of a (possibly re-indexed) reducer: salt 0 is the node's owner, so a node
/// that is not a hub is reduced where it lives.
pub fn reducer_key(node: i64, salt: u64) -> u64 {
    owner_key(node).wrapping_add(salt)
}

/// A hash mapped to the open interval (0, 1). (52 bits: with 53, the largest value plus one
/// half rounds up to exactly 1.0.)
pub fn unit_interval(h: u64) -> f64 {
    ((h >> 12) as f64 + 0.5) / (1u64 << 52) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_interval_stays_open() {
        assert!(unit_interval(0) > 0.0);
        assert!(unit_interval(u64::MAX) < 1.0);
    }

    #[test]
    fn owners_spread_evenly() {
        let peers = 4u64;
        let mut counts = [0u32; 4];
        for node in 0..40_000i64 {
            counts[(owner_key(node) % peers) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)), "{counts:?}");
    }
}
