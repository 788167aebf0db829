//! Parquet tables through `object_store`, for every stage: a table is a directory of part files
//! with a manifest (`_manifest.parquet`, then an empty `_SUCCESS`) written last.
//!
//! - [`place`]: places (local paths and URIs with their exact keys), reading and writing objects;
//! - [`backends`]: the stores behind URIs (S3, HDFS, the local file system) and `[storage]`;
//! - [`io`]: a job's I/O: the async runtime every worker's I/O runs on and the job's `[storage]`,
//!   which every place it parses is opened with;
//! - [`files`]: a table's files (the parts a manifest lists, checked against the directory, or
//!   the data files of a directory);
//! - [`read`]: row groups as units of work, bounded decoded batches, every listed byte checked
//!   against its manifest ([`checksum`]) as it is read;
//! - [`chunks`]: local column chunks read into buffers a table's readers keep between row groups;
//! - [`table`]: writing files and whole tables; [`together`]: the tables of one graph, read of
//!   one run;
//! - [`parts`]: one worker's share of a stage's output as part files;
//! - [`direct`]: a local part written with direct I/O at its staged name;
//! - [`staging`]: where a run's files wait for its commit, and how the commit publishes them;
//! - [`names`]: the names runs give their files, told apart from files this project did not write;
//! - [`lease`]: a run's marker, and whether the run that wrote one is alive;
//! - [`manifest`]: the list of what a run committed, in the footer of `_manifest.parquet`;
//! - [`guard`]: the rule every writer follows before it writes: never another kind's output,
//!   never inside or around another output, the same kind only with overwrite;
//! - [`commit`]: the commit protocol: run-named parts staged, published, the manifest written
//!   last; then the cleanup of ended runs (`cleanup`, over the directory's `entries`);
//! - [`switch`]: on a local disk, the version built beside the output and exchanged with it in
//!   one step; [`stop`]: a signal lets a switch in flight finish and starts none after it;
//!   [`pin`]: a reader holds the version it opened, which stays until its last reader goes.

pub mod backends;
pub mod checksum;
pub mod chunks;
mod cleanup;
pub mod commit;
pub mod direct;
mod entries;
pub mod error;
mod fetch;
pub mod files;
pub mod guard;
pub mod io;
pub mod lease;
pub mod manifest;
pub mod moved;
pub mod names;
pub mod parts;
pub mod pin;
pub mod place;
pub mod read;
pub mod report_page;
pub mod staging;
pub mod stop;
pub mod streamed;
pub mod switch;
pub mod table;
pub mod together;
mod upload;

pub use error::Error;
pub use files::table_files;
pub use io::Io;
pub use place::Place;
pub use read::{ParquetFile, Version, open_listed, open_table, open_version, units};
