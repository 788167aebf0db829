//! The job's report (report.html): its charts carry exactly what the outputs hold, checked
//! against the files and against distributions recomputed here from the tables (a plain count
//! of in-edges, of record sizes, of predictions); the SVG draws those values; a failed job
//! gets a report too, and a report never changes a job's result, never touches foreign files
//! and never goes into a table's directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

/// The `data-chart` values of every chart on a page, with each chart's SVG, in page order.
/// Parsed here by hand: not the writer's own code.
fn charts(page: &str) -> Vec<(Value, String)> {
    let mut charts = Vec::new();
    for piece in page.split("<figure class=\"chart\" data-chart=\"").skip(1) {
        let (attribute, rest) = piece.split_once('"').unwrap();
        let svg = rest.split("</figure>").next().unwrap().to_owned();
        charts.push((serde_json::from_str(&unescape(attribute)).unwrap(), svg));
    }
    charts
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"").replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

/// The chart whose title starts with `title`.
fn chart<'a>(all: &'a [(Value, String)], title: &str) -> &'a (Value, String) {
    all.iter()
        .find(|(c, _)| c["title"].as_str().unwrap().starts_with(title))
        .unwrap_or_else(|| panic!("no chart {title:?}"))
}

/// A line chart's series `name` as points.
fn points(chart: &Value, name: &str) -> Vec<(f64, f64)> {
    let series = chart["series"].as_array().unwrap().iter().find(|s| s["name"] == name);
    let series = series.unwrap_or_else(|| panic!("no series {name} in {chart}"));
    series["points"].as_array().unwrap().iter().map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap())).collect()
}

/// The points of every `<polyline>` of an SVG, in pixels.
fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|p| p.split("points=\"").nth(1)?.split('"').next())
        .map(|points| {
            points
                .split_whitespace()
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

/// Whether some polyline of `svg` draws `values` (the pixel rounding aside): its points are one
/// affine map of them on each axis.
fn draws(svg: &str, values: &[(f64, f64)]) -> bool {
    let affine = |pixels: &[f64], data: &[f64]| {
        let (i, j) = (0, data.len() - 1);
        if data[j] == data[i] {
            return pixels.iter().all(|p| (p - pixels[i]).abs() <= 1.0);
        }
        let scale = (pixels[j] - pixels[i]) / (data[j] - data[i]);
        data.iter().zip(pixels).all(|(d, p)| (pixels[i] + (d - data[i]) * scale - p).abs() <= 1.5)
    };
    polylines(svg).iter().any(|line| {
        line.len() == values.len() && {
            let (px, py): (Vec<f64>, Vec<f64>) = line.iter().copied().unzip();
            let (dx, dy): (Vec<f64>, Vec<f64>) = values.iter().copied().unzip();
            affine(&px, &dx) && affine(&py, &dy)
        }
    })
}

/// Values counted in log2 bins (bin 0 holds 0, bin i holds [2^(i-1), 2^i)), as the charts'
/// points: (lower bound, count) of every bin but 0 that holds any.
fn log2_points(values: impl IntoIterator<Item = u64>) -> Vec<(f64, f64)> {
    let mut bins: BTreeMap<u32, u64> = BTreeMap::new();
    for v in values {
        let bin = if v == 0 { 0 } else { v.ilog2() + 1 };
        *bins.entry(bin).or_default() += 1;
    }
    bins.into_iter().filter(|&(b, _)| b > 0).map(|(b, n)| (2f64.powi(b as i32 - 1), n as f64)).collect()
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn page(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("report.html")).unwrap()
}

/// A graph flattened, trained on and scored by one job, on two workers.
fn whole_job(dir: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let (data, flat, model, scores) = (dir.join("graph"), dir.join("flat"), dir.join("model"), dir.join("scores"));
    generate(&data, 2000, 8, 12, 3);
    let job = Job::cluster()
        .key("workers", 2)
        .and(Job::flatten(&data, &flat).key("fanouts", vec![5, 3]).key("hub_threshold", 40))
        .and(Job::train(&flat, &model).key("epochs", 6).key("batch_size", 256).key("hidden", 8))
        .and(Job::infer(&data, &model, &scores).key("hub_threshold", 40))
        .and(Job::report(dir.join("job-report.html")));
    let summary = run_ok(&job.write(dir, "job"), &[]);
    assert!(summary.contains("report:"), "{summary}");
    (data, flat, model, scores)
}

#[test]
fn a_job_report_carries_exactly_what_its_outputs_hold() {
    let dir = scratch("report");
    let (data, flat, model, scores) = whole_job(&dir);
    // One page, in the model's directory and where [report] output says; none in a table's.
    let html = page(&model);
    assert!(html == std::fs::read_to_string(dir.join("job-report.html")).unwrap());
    assert!(!flat.join("report.html").exists() && !scores.join("report.html").exists());
    assert_every_reader_reads_the_manifest(&[&flat, &scores]);
    assert!(html.contains("succeeded</span> (exit 0)") && html.contains("1 process x 2 workers each"), "{html}");
    // Self-contained: no script, nothing fetched.
    for needle in ["<script", " src=", "href=\"http", "url("] {
        assert!(!html.contains(needle), "the page holds {needle:?}");
    }
    let all = charts(&html);

    the_training_charts_are_the_metrics(&all, &model);
    the_graph_charts_are_the_tables(&all, &data, &flat);
    the_inference_charts_are_the_scores(&all, &scores);
    the_report_command_and_what_it_refuses(&dir, &data, (&flat, &model, &scores));
}

/// `(epoch, value)` of `key` in every line of the model's `metrics.jsonl`.
fn metric(model: &Path, key: &str) -> Vec<(f64, f64)> {
    let metrics = json_lines(&model.join("metrics.jsonl"));
    metrics.iter().map(|m| (m["epoch"].as_f64().unwrap(), m[key].as_f64().unwrap())).collect()
}

/// Training: every epoch's loss and scores exactly, drawn as they are.
fn the_training_charts_are_the_metrics(all: &[(Value, String)], model: &Path) {
    let of = |key: &str| metric(model, key);
    let (loss, loss_svg) = chart(all, "loss per epoch");
    assert_eq!(points(loss, "train_loss"), of("train_loss"));
    assert!(draws(loss_svg, &of("train_loss")), "the loss curve is not drawn from its values");
    let (accuracy, accuracy_svg) = chart(all, "accuracy per epoch");
    for split in ["train", "valid", "test"] {
        let key = format!("{split}_accuracy");
        assert_eq!(points(accuracy, split), of(&key), "{key}");
        assert!(draws(accuracy_svg, &of(&key)), "{key} is not drawn from its values");
    }
    let best =
        of("valid_accuracy").iter().fold((0.0, f64::NEG_INFINITY), |b, &(e, v)| if v > b.1 { (e, v) } else { b });
    assert_eq!(accuracy["marks"][0][1].as_f64(), Some(best.0), "the best epoch is marked");
    let timings = json_lines(&model.join("timings.jsonl"));
    let seconds: Vec<(f64, f64)> =
        timings.iter().map(|t| (t["epoch"].as_f64().unwrap(), t["seconds"].as_f64().unwrap())).collect();
    assert_eq!(points(&chart(all, "time per epoch").0, "epoch"), seconds);
}

/// The graph: in-degrees counted here from the edge table, record sizes from the records.
fn the_graph_charts_are_the_tables(all: &[(Value, String)], data: &Path, flat: &Path) {
    let graph = read_graph(data);
    let mut in_degree: BTreeMap<i64, u64> = graph.features.keys().map(|&id| (id, 0)).collect();
    for &(_, dst, _) in &graph.edges {
        *in_degree.get_mut(&dst).unwrap() += 1;
    }
    let (degrees, degrees_svg) = chart(all, "in-degree");
    let expected = log2_points(in_degree.values().copied());
    assert_eq!(points(degrees, "nodes"), expected);
    assert_eq!(degrees["marks"][0][1].as_f64(), Some(40.0), "the hub threshold is marked");
    assert!(draws(degrees_svg, &expected.iter().map(|&(x, y)| (x.log10(), y.log10())).collect::<Vec<_>>()));
    let records = read_records(flat);
    assert_eq!(
        points(&chart(all, "nodes per record").0, "records"),
        log2_points(records.iter().map(|r| r.node_ids.len() as u64))
    );
    assert_eq!(
        points(&chart(all, "edges per record").0, "records"),
        log2_points(records.iter().map(|r| r.edge_src.len() as u64))
    );
}

/// Inference: the predicted classes counted from the scores table.
fn the_inference_charts_are_the_scores(all: &[(Value, String)], scores: &Path) {
    // Eight classes (generate's default): one bar each, predicted or not.
    let mut predicted = [0.0; 8];
    for (_, class, _) in read_scores(scores).values() {
        predicted[*class as usize] += 1.0;
    }
    let classes = &chart(all, "predicted class").0;
    let values: Vec<f64> = classes["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(values, predicted);
    let phases = &chart(all, "time per phase (rounds").0;
    assert!(phases["labels"].as_array().unwrap().iter().any(|l| l == "layer 1"), "{phases}");
}

/// `inspect` points at the page; `report` builds one from outputs, never over a foreign file,
/// nor inside a table's directory, and takes facts that do not parse as none.
fn the_report_command_and_what_it_refuses(dir: &Path, data: &Path, (flat, model, scores): (&Path, &Path, &Path)) {
    let inspected = graphflat_ok(&["inspect", model.to_str().unwrap()]);
    assert!(inspected.contains(&format!("report: {}", model.join("report.html").display())), "{inspected}");
    let out = dir.join("two.html");
    graphflat_ok(&["report", model.to_str().unwrap(), scores.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let two = std::fs::read_to_string(&out).unwrap();
    assert_eq!(points(&chart(&charts(&two), "loss per epoch").0, "train_loss"), metric(model, "train_loss"));
    std::fs::write(&out, "my notes").unwrap();
    let refused =
        graphflat().args(["report", model.to_str().unwrap(), "--out", out.to_str().unwrap()]).output().unwrap();
    assert_fails(&refused, 73, &["not a graphflat report"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "my notes");
    let missing = graphflat().args(["report", data.join("nowhere").to_str().unwrap()]).output().unwrap();
    assert_fails(&missing, 66, &["no committed output"]);
    // A page inside a table's directory would be read as one of its files, or make polars
    // refuse the directory: refused, whatever its name, from `report` and from a job.
    for name in ["charts.html", "report.html"] {
        let inside = flat.join(name);
        let refused =
            graphflat().args(["report", model.to_str().unwrap(), "--out", inside.to_str().unwrap()]).output().unwrap();
        assert_fails(&refused, 73, &["table's directory"]);
        assert!(!inside.exists());
    }
    let job = Job::flatten(data, flat).key("overwrite", true).and(Job::report(flat.join("report.html")));
    assert_fails(&run(&job.write(dir, "inside"), &[]), 64, &["[report] output", "lies in the table"]);
    // Another job's table (the scores) is refused alike, and left as it was.
    let theirs = scores.join("page.html");
    let job = Job::flatten(data, dir.join("flat-other")).and(Job::report(&theirs));
    assert_fails(&run(&job.write(dir, "theirs"), &[]), 64, &["[report] output", "lies in a table's directory"]);
    assert!(!theirs.exists());
    // Facts that do not parse are none: the page says so, and the output stays readable.
    edit_manifest(flat, |m| m["facts"] = Value::from("garbage <script>"));
    let garbage = dir.join("garbage.html");
    graphflat_ok(&["report", flat.to_str().unwrap(), "--out", garbage.to_str().unwrap()]);
    assert!(std::fs::read_to_string(&garbage).unwrap().contains("carries no run facts"));
    assert!(graphflat_ok(&["inspect", flat.to_str().unwrap()]).contains("2000 rows"));
}

#[test]
fn a_failed_job_has_a_report_and_a_report_never_fails_a_job() {
    let dir = scratch("report-failed");
    let (data, flat) = (dir.join("graph"), dir.join("flat"));
    generate(&data, 300, 5, 6, 2);
    // An edge to a node that is not in the node table: bad data found in the map, after the
    // output check, so the report goes into the output that holds no _SUCCESS.
    let bad = dir.join("bad");
    std::fs::create_dir_all(bad.join("edges")).unwrap();
    std::fs::create_dir_all(bad.join("nodes")).unwrap();
    for entry in std::fs::read_dir(data.join("nodes")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), bad.join("nodes").join(entry.file_name())).unwrap();
    }
    write_edges(&bad.join("edges/part-0.parquet"), &[(0, 1), (1, 999_999)]);
    let report = dir.join("report.html");
    let job = Job::flatten(&bad, &flat).and(Job::train(&flat, dir.join("model"))).and(Job::report(&report));
    let out = run(&job.write(&dir, "bad"), &[]);
    assert_eq!(out.status.code(), Some(65), "{}", text(&out));
    assert!(!flat.join("_SUCCESS").exists() && !flat.join("report.html").exists());
    let html = page(&dir);
    assert!(html.contains("failed</span> (exit 65)"), "{html}");
    assert!(html.contains("failed: flatten failed") && html.contains("999999"), "the error is on the page: {html}");
    assert!(html.contains("<a href=\"#train\">train</a> <span class=\"skipped\">not run</span>"), "{html}");
    assert!(!dir.join("model").exists(), "nothing is written for a stage that did not run");

    // A failed overwrite leaves the earlier commit in place: the page of the failure names it.
    let again = dir.join("again");
    run_ok(&Job::flatten(&data, &again).write(&dir, "again"), &[]);
    let earlier = manifest(&again)["run"].as_str().unwrap().to_owned();
    let job = Job::flatten(&bad, &again).key("overwrite", true).and(Job::report(&report));
    let out = run(&job.write(&dir, "again-bad"), &[]);
    assert_eq!(out.status.code(), Some(65), "{}", text(&out));
    let html = page(&dir);
    assert!(
        html.contains("failed</span> (exit 65)") && html.contains(&format!("the output run {earlier} committed")),
        "{html}"
    );

    let kept = dir.join("kept");
    a_report_in_the_way_never_fails_the_job(&dir, &data, &kept);
    odd_manifests_are_bad_data_everywhere(&dir, &kept);
}

/// A page at `[report] output` that is not ours stays as it is, and the job that writes `kept`
/// succeeds all the same; so does one with a directory or a FIFO in the page's place.
fn a_report_in_the_way_never_fails_the_job(dir: &Path, data: &Path, kept: &Path) {
    let theirs = dir.join("theirs.html");
    std::fs::write(&theirs, "someone's page").unwrap();
    let job = |name: &str| Job::flatten(data, kept).key("overwrite", true).and(Job::report(&theirs)).write(dir, name);
    let out = run(&job("kept"), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("not a graphflat report"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "someone's page");
    // A report that cannot be written (a directory in its place) is a warning, not a failure.
    std::fs::remove_file(&theirs).unwrap();
    std::fs::create_dir_all(&theirs).unwrap();
    let out = run(&job("kept"), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(kept.join("_SUCCESS").exists());
    // Nor does a FIFO in its place block the job or `report` (they never open it).
    std::fs::remove_dir(&theirs).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(&theirs).status().unwrap().success());
    let out = run(&job("kept"), &[]);
    assert!(out.status.success() && text(&out).contains("not a graphflat report"), "{}", text(&out));
    assert!(!graphflat_ok(&["inspect", kept.to_str().unwrap()]).contains("report:"));
    let refused =
        graphflat().args(["report", kept.to_str().unwrap(), "--out", theirs.to_str().unwrap()]).output().unwrap();
    assert_fails(&refused, 73, &["not a graphflat report"]);
}

/// A manifest that is a FIFO or larger than any manifest is bad data, named, for `inspect`,
/// `report` and a stage that reads the output.
fn odd_manifests_are_bad_data_everywhere(dir: &Path, kept: &Path) {
    let manifest = std::fs::read(kept.join("_manifest.parquet")).unwrap();
    std::fs::remove_file(kept.join("_manifest.parquet")).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(kept.join("_manifest.parquet")).status().unwrap().success());
    let sparse = |path: &Path| std::fs::File::create(path).unwrap().set_len((64 << 20) + 1).unwrap();
    for (odd, words) in [("fifo", "not a regular file"), ("huge", "more than any manifest")] {
        if odd == "huge" {
            std::fs::remove_file(kept.join("_manifest.parquet")).unwrap();
            sparse(&kept.join("_manifest.parquet"));
        }
        let inspected = graphflat().args(["inspect", kept.to_str().unwrap()]).output().unwrap();
        assert_fails(&inspected, 65, &["_manifest.parquet", words]);
        let page = dir.join(format!("{odd}.html"));
        let reported =
            graphflat().args(["report", kept.to_str().unwrap(), "--out", page.to_str().unwrap()]).output().unwrap();
        assert_fails(&reported, 65, &["_manifest.parquet", words]);
        let train = Job::train(kept, dir.join(format!("model-{odd}")));
        assert_fails(&run(&train.write(dir, &format!("train-{odd}")), &[]), 65, &["_manifest.parquet", words]);
    }
    std::fs::write(kept.join("_manifest.parquet"), manifest).unwrap();
    graphflat_ok(&["inspect", kept.to_str().unwrap()]);
}
