//! Software prefetch: a loop that will read a random place of a large array a few iterations
//! later asks for its cache line now, so that the misses of consecutive iterations overlap
//! instead of each stalling the loop in turn (the loops over edges, whose arrays span
//! gigabytes at 10M nodes). A hint only: it never faults and changes nothing a program sees.

/// Asks for the cache line holding `place` (x86-64; elsewhere nothing).
#[inline(always)]
pub fn read<T>(place: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching an address is allowed for any address, and this one is a live
    // reference's.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((place as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = place;
}
