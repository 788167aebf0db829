//! splitmix64, the one bit mixer every hash and random stream of the project derives from:
//! node owners and sampling keys (`cluster::hash`), dropout masks and initial weights
//! (`gnn::rng`). Its outputs are part of the contract: records, models and scores depend on
//! these exact bits, so the constants never change.

/// splitmix64's increment (2^64 over the golden ratio): the step between a stream's states.
pub const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finalizer: a bijective mix of 64 bits.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_splitmix64() {
        // splitmix64 seeded with 0: its first output is mix64(GAMMA).
        assert_eq!(mix64(GAMMA), 0xe220_a839_7b1d_cdaf);
        assert_eq!(mix64(0), 0);
    }
}
