//! The cluster layer: what every stage that runs on timely shares.
//!
//! - [`execute`]: runs a closure on every worker of this process (one thread, several, or one
//!   process of a cluster), and ends the whole job when any worker fails;
//! - [`connect`]: the sockets between processes, made with a deadline;
//! - [`heartbeat`]: the liveness bound on peer processes that stop without dying;
//! - [`wait`]: the only way a worker waits for the dataflow, so that a failure elsewhere ends
//!   the wait within a bounded time;
//! - [`collective`]: small all-worker agreements between phases (exchange, gather, sums, the
//!   same error everywhere) and streamed shuffles;
//! - [`hash`]: the fixed hashes that route nodes to owners and key samples;
//! - [`owners`]: the owner of every node, by the hash or by a partition table;
//! - [`memory`]: the process's peak memory, for summaries;
//! - [`id_table`] and [`prefetch`]: the id lookups made once per edge, and the cache hints that
//!   let a loop's misses overlap.

pub mod collective;
pub mod connect;
pub mod execute;
pub mod hash;
pub mod heartbeat;
pub mod id_table;
pub mod memory;
pub mod owners;
pub mod prefetch;
pub mod wait;

pub use collective::{agree, all_gather, broadcast, exchange, relay, shuffle, sum};
pub use execute::{Failure, execute, install_panic_hook};
pub use hash::owner_key;
pub use id_table::IdTable;
pub use memory::peak_rss_bytes;
pub use owners::{OwnerMap, Owners};
pub use wait::wait_while;
