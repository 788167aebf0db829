//! Finds strings whose 54-bit hash `h` (`schemas::ids::StringHash`, reimplemented here so that
//! this file builds alone) agrees: the fixtures of `tests/string_ids.rs`.
//!
//! A birthday search that keeps only the hashes whose top 6 bits are zero (one in 64), so that
//! memory holds 47M of 3 billion: two strings agree in `h` when they agree among those kept.
//!
//!     rustc --edition 2021 -O scripts/string-collisions.rs -o /tmp/collide && /tmp/collide 3000000000
//!
//! (about 3 minutes and 750 MB; it found 5 pairs of `user_<hex>` strings.)
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
fn fold(seed: u64, bytes: &[u8]) -> u64 {
    let mut state = mix64(seed);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words { state = mix64(state ^ u64::from_le_bytes(word.try_into().unwrap())); }
    let rest = words.remainder();
    if !rest.is_empty() { let mut last = [0u8; 8]; last[..rest.len()].copy_from_slice(rest); state = mix64(state ^ u64::from_le_bytes(last)); }
    mix64(state ^ bytes.len() as u64)
}
const H_SEED: u64 = 0x243f_6a88_85a3_08d3;
fn main() {
    let n: u64 = std::env::args().nth(1).unwrap().parse().unwrap();
    let mut kept: Vec<(u64, u64)> = Vec::new();
    let mut buf = String::new();
    for i in 0..n {
        buf.clear();
        use std::fmt::Write; write!(buf, "user_{i:x}").unwrap();
        let h = fold(H_SEED, buf.as_bytes()) >> 10;
        if h >> 48 == 0 { kept.push((h, i)); }
    }
    kept.sort_unstable();
    eprintln!("kept {}", kept.len());
    for w in kept.windows(2) { if w[0].0 == w[1].0 { println!("user_{:x} user_{:x} h={}", w[0].1, w[1].1, w[0].0); } }
}
