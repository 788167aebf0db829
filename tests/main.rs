//! The end-to-end tests, one module a file: each drives the `graphflat` binary as a user would
//! (job files, exit codes, the tables it writes) and checks the outcome against an independent
//! implementation or a property. One test binary, so that the whole program is linked once.
//! Run one file's tests with `cargo test --release --test end_to_end hetero::`.

mod common;

mod bad_input;
mod control_variate;
mod cora_exact;
mod deploy;
mod determinism;
mod edge_features;
mod edge_models;
mod foundations;
mod full_graph;
mod generate;
mod gpu;
mod guard;
mod hdfs;
mod hetero;
mod hetero_link;
mod infer;
mod inputs;
mod jobs;
mod learned;
mod link_models;
mod link_pairs;
mod link_records;
mod link_train;
mod liveness;
mod multilabel;
mod owner_map;
mod partition;
mod precompute;
mod processes;
mod readers;
mod refresh;
mod refresh_delta;
mod refresh_links;
mod refresh_pairs;
mod refresh_strings;
mod report;
mod s3;
mod sampling;
mod schema;
mod split_edges;
mod storage;
mod string_ids;
mod switch;
mod train;
