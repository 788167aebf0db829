//! Inputs as data teams write them: Spark's `int32` ids, `uint64` ids below 2^63, pandas'
//! dictionary-encoded (`category`) ids, labels and splits, numpy's `float64` features and
//! weights, `int32` labels, and -1 for an unlabeled node. Each variant of a graph gives the same
//! records as the graph in this project's own types (compared record by record), and what
//! cannot be read as those types is bad input at its row.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, DictionaryArray, Float64Array, Int32Array, ListArray, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field};

use crate::common::*;

/// `batch` with `column` replaced by `f` of it (the schema follows the new type).
fn with(batch: &RecordBatch, column: &str, f: impl Fn(&ArrayRef) -> ArrayRef) -> RecordBatch {
    let schema = batch.schema();
    let (mut fields, mut columns) = (Vec::new(), Vec::new());
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        let array = if field.name() == column { f(array) } else { array.clone() };
        fields.push(Field::new(field.name(), array.data_type().clone(), true));
        columns.push(array);
    }
    RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), columns).unwrap()
}

fn int32(a: &ArrayRef) -> ArrayRef {
    Arc::new(a.as_primitive::<Int64Type>().unary::<_, Int32Type>(|v| v as i32))
}

fn uint64(a: &ArrayRef) -> ArrayRef {
    Arc::new(a.as_primitive::<Int64Type>().iter().map(|v| v.map(|v| v as u64)).collect::<UInt64Array>())
}

/// Integers or strings dictionary-encoded, as pandas writes a `category` column.
fn dictionary(a: &ArrayRef) -> ArrayRef {
    let n = a.len() as i32;
    // Keys in reverse order over values in reverse order: a dictionary that is not the identity.
    let keys = Int32Array::from_iter((0..n).map(|i| a.is_valid(i as usize).then_some(n - 1 - i)));
    let reversed: Vec<usize> = (0..a.len()).rev().collect();
    let indices = arrow_array::UInt32Array::from_iter_values(reversed.iter().map(|&i| i as u32));
    let values = arrow_select::take::take(a.as_ref(), &indices, None).unwrap();
    Arc::new(DictionaryArray::<Int32Type>::try_new(keys, values).unwrap())
}

fn float64_lists(a: &ArrayRef) -> ArrayRef {
    let list = a.as_list::<i32>();
    let values: Float64Array = list.values().as_primitive::<Float32Type>().iter().map(|v| v.map(f64::from)).collect();
    let item = Arc::new(Field::new("item", DataType::Float64, true));
    Arc::new(ListArray::new(item, list.offsets().clone(), Arc::new(values), list.nulls().cloned()))
}

fn float64(a: &ArrayRef) -> ArrayRef {
    Arc::new(a.as_primitive::<Float32Type>().iter().map(|v| v.map(f64::from)).collect::<Float64Array>())
}

/// Null labels as -1.
fn minus_one(a: &ArrayRef) -> ArrayRef {
    let labels = a.as_primitive::<Int64Type>();
    Arc::new(labels.iter().map(|v| Some(v.unwrap_or(-1))).collect::<arrow_array::Int64Array>())
}

/// Writes `batch` as the one file of `dir`.
fn write(dir: &Path, batch: &RecordBatch) {
    std::fs::create_dir_all(dir).unwrap();
    let file = std::fs::File::create(dir.join("part-0.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

/// One table of the graph at `data`, its batches concatenated.
fn table(dir: &Path) -> RecordBatch {
    let batches = read_batches(dir);
    arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap()
}

#[test]
fn every_variant_of_the_input_types_gives_the_canonical_records() {
    let dir = scratch("inputs-variants");
    let data = dir.join("graph");
    generate(&data, 1200, 6, 6, 3);
    let (nodes, edges) = (table(&data.join("nodes")), table(&data.join("edges")));
    // Some nodes unlabeled (null), as the variants' -1 will say.
    let nodes = with(&nodes, "label", |a| {
        let labels = a.as_primitive::<Int64Type>();
        Arc::new(
            labels
                .iter()
                .enumerate()
                .map(|(i, v)| if i % 7 == 0 { None } else { v })
                .collect::<arrow_array::Int64Array>(),
        )
    });
    let settings = |job: Job| job.key("fanouts", vec![4, 3]).key("sampler", "weighted");
    let canonical_data = dir.join("canonical");
    write(&canonical_data.join("nodes"), &nodes);
    write(&canonical_data.join("edges"), &edges);
    let canonical = read_records(&flatten(&dir, &canonical_data, "flat-canonical", &["--workers", "2"], settings));
    assert_eq!(canonical.len(), 1200);
    assert!(canonical.iter().any(|r| r.label.is_none()) && canonical.iter().any(|r| r.label.is_some()));

    type Variant =
        (&'static str, Vec<(&'static str, fn(&ArrayRef) -> ArrayRef)>, Vec<(&'static str, fn(&ArrayRef) -> ArrayRef)>);
    let variants: Vec<Variant> = vec![
        ("int32-ids", vec![("node_id", int32)], vec![("src", int32), ("dst", int32)]),
        ("uint64-ids", vec![("node_id", uint64)], vec![("src", uint64), ("dst", uint64)]),
        ("dictionary-ids", vec![("node_id", dictionary)], vec![("src", dictionary), ("dst", dictionary)]),
        ("dictionary-labels-and-splits", vec![("label", dictionary), ("split", dictionary)], vec![]),
        ("float64", vec![("features", float64_lists)], vec![("weight", float64)]),
        ("int32-labels", vec![("label", int32)], vec![]),
        ("minus-one-unlabeled", vec![("label", minus_one)], vec![]),
    ];
    for (name, node_changes, edge_changes) in variants {
        let variant = dir.join(name);
        let mut n = nodes.clone();
        for (column, f) in node_changes {
            n = with(&n, column, f);
        }
        let mut e = edges.clone();
        for (column, f) in edge_changes {
            e = with(&e, column, f);
        }
        write(&variant.join("nodes"), &n);
        write(&variant.join("edges"), &e);
        let records = read_records(&flatten(&dir, &variant, &format!("flat-{name}"), &["--workers", "2"], settings));
        assert!(records == canonical, "{name}: the records differ from the canonical types'");
    }
}

#[test]
fn what_the_project_types_cannot_hold_is_bad_input_at_its_row() {
    let dir = scratch("inputs-bad");
    let data = dir.join("graph");
    generate(&data, 200, 4, 4, 1);
    let nodes = table(&data.join("nodes"));
    let cases: [(&str, RecordBatch, &str, &str); 4] = [
        (
            "huge-id",
            with(&nodes, "node_id", id_past_i64),
            "row 17, column \"node_id\"",
            "18446744073709551615 is 2^63 or more",
        ),
        (
            "huge-feature",
            with(&nodes, "features", feature_past_f32),
            "row 9, column \"features\"",
            "1e300 is beyond float32's range",
        ),
        ("negative-class", with(&nodes, "label", class_below_minus_one), "row 5, column \"label\"", "class id -3"),
        ("binary-ids", with(&nodes, "node_id", binary_ids), "column \"node_id\"", "expected ids: an integer"),
    ];
    let edges = table(&data.join("edges"));
    for (name, n, at, problem) in cases {
        let variant = dir.join(name);
        write(&variant.join("nodes"), &n);
        write(&variant.join("edges"), &edges);
        let out = run(&Job::flatten(&variant, dir.join(format!("flat-{name}"))).write(&dir, name), &[]);
        let file = variant.join("nodes/part-0.parquet").display().to_string();
        assert_fails(&out, 65, &[&format!("{file}, {at}"), problem]);
    }
}

/// The ids as `uint64`, row 17's past `i64`.
fn id_past_i64(a: &ArrayRef) -> ArrayRef {
    let mut ids: Vec<u64> = a.as_primitive::<Int64Type>().values().iter().map(|&v| v as u64).collect();
    ids[17] = u64::MAX;
    Arc::new(UInt64Array::from(ids))
}

/// The features as `float64`, row 9's third past `f32`.
fn feature_past_f32(a: &ArrayRef) -> ArrayRef {
    let list = float64_lists(a);
    let list = list.as_list::<i32>();
    let mut values: Vec<f64> = list.values().as_primitive::<arrow_array::types::Float64Type>().values().to_vec();
    values[4 * 9 + 2] = 1e300;
    let item = Arc::new(Field::new("item", DataType::Float64, true));
    Arc::new(ListArray::new(item, list.offsets().clone(), Arc::new(Float64Array::from(values)), None))
}

/// The labels, row 5's -3 (below -1, the unlabeled mark).
fn class_below_minus_one(a: &ArrayRef) -> ArrayRef {
    let labels = a.as_primitive::<Int64Type>();
    let labels = labels.iter().enumerate().map(|(i, v)| if i == 5 { Some(-3) } else { v });
    Arc::new(labels.collect::<arrow_array::Int64Array>())
}

/// The ids as bytes: no id type.
fn binary_ids(a: &ArrayRef) -> ArrayRef {
    let bytes = a.as_primitive::<Int64Type>().values().iter().map(|v| v.to_le_bytes());
    Arc::new(arrow_array::BinaryArray::from_iter_values(bytes))
}
