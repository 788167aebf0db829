//! The output reads back through the parquet crate's Arrow reader with the documented schema,
//! and its metadata records the flatten settings.

use crate::common::*;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use schemas::record::{FlattenMeta, record_schema};

#[test]
fn output_reads_back_with_the_documented_schema() {
    let dir = scratch("schema");
    let data = dir.join("graph");
    generate(&data, 500, 5, 6, 2);
    let settings = |job: Job| job.key("hops", 2).key("fanouts", vec![3, 2]).key("seed", 4).key("part_size_mb", 1);
    let out = flatten(&dir, &data, "flat", &["--workers", "2"], settings);

    let expected = record_schema(&FlattenMeta {
        hops: 2,
        fanouts: vec![3, 2],
        sampler: schemas::Sampler::Uniform,
        seed: 4,
        feature_dim: 6,
        label: schemas::LabelKind::Class,
        edge_dim: 0,
        edge_stats: None,
        relation_edge_stats: Vec::new(),
        types: None,
        relation_fanouts: Vec::new(),
        string_ids: false,
        precomputed: None,
        root_neighbors: false,
        link: None,
    });
    let files = parquet_files(&out);
    assert!(!files.is_empty());
    let mut rows = 0;
    for path in files {
        let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!(builder.schema().fields(), expected.fields(), "{}", path.display());
        assert_eq!(builder.schema().metadata(), expected.metadata(), "{}", path.display());
        let meta = FlattenMeta::from_metadata(builder.schema().metadata()).unwrap();
        assert_eq!((meta.hops, meta.fanouts.clone()), (2, vec![3, 2]));
        for batch in builder.build().unwrap() {
            rows += batch.unwrap().num_rows();
        }
    }
    assert_eq!(rows, 500);
    let graph = read_graph(&data);
    for r in read_records(&out) {
        for (i, node) in r.node_ids.iter().enumerate() {
            assert_eq!(r.node_features(i), &graph.features[node][..]);
        }
        assert_eq!(r.label.as_ref().and_then(schemas::Label::class), graph.labels[&r.root]);
    }
}
