//! The page: one self-contained HTML file (inline CSS and SVG, no script, nothing fetched).
//! Every value that comes from a file or the job is escaped ([`escape`]).

use std::fmt::Write;

use schemas::facts::{Bins, Histogram, RunFacts};
use serde_json::{Map, Value};
use tables::commit::Stage;

use crate::chart::{self, Bars, Lines, Series};
use crate::escape::escape;
use crate::run::{Job, Outcome, Report, StageRun};

/// The first line of every report: how a file is known to be one (see [`crate::write`]).
pub const SIGNATURE: &str = tables::names::REPORT_SIGNATURE;

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1340px;color:#222}\
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.15em .8em .15em 0;text-align:left;vertical-align:top}\
th{color:#555;font-weight:normal}.ok{color:#2a7a2a}.failed{color:#b22}.skipped{color:#777}\
figure{display:inline-block;margin:.5em 1em .5em 0}pre{background:#f6f6f6;padding:.8em;overflow:auto}\
.note{color:#8a5a00}.error{background:#fdecec;padding:.8em;white-space:pre-wrap}";

/// The most of the job file's text the page shows.
const MAX_JOB_TEXT: usize = 256 << 10;

/// `text` up to `limit` bytes (on a character boundary), saying so when cut.
fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let end = (0..=limit).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    format!("{}\n... ({} more bytes not shown)", &text[..end], text.len() - end)
}

/// The report as one HTML page.
pub fn render(report: &Report) -> String {
    let mut page = String::new();
    let title = match &report.job {
        Some(job) => format!("graphflat report: {}", job.file),
        None => "graphflat report".to_owned(),
    };
    let _ = write!(
        page,
        "{SIGNATURE}\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    if let Some(job) = &report.job {
        page.push_str(&job_section(job, &report.stages));
    }
    let mut ids: Vec<String> = Vec::new();
    for run in &report.stages {
        // One anchor a section: a second flatten output is #flatten-2.
        let name = run.stage.name();
        let seen = ids.iter().filter(|id| id.as_str() == name || id.starts_with(&format!("{name}-"))).count();
        let id = if seen == 0 { name.to_owned() } else { format!("{name}-{}", seen + 1) };
        page.push_str(&stage_section(run, &id));
        ids.push(id);
    }
    if let Some(job) = &report.job {
        let _ = write!(page, "<h2>Job file</h2>\n<pre>{}</pre>\n", escape(&cut(&job.text, MAX_JOB_TEXT)));
    }
    page.push_str("</body></html>\n");
    page
}

fn job_section(job: &Job, stages: &[StageRun]) -> String {
    let status = match &job.failure {
        None => "<span class=\"ok\">succeeded</span> (exit 0)".to_owned(),
        Some((code, _)) => format!("<span class=\"failed\">failed</span> (exit {code})"),
    };
    let ran: Vec<String> = stages
        .iter()
        .map(|s| {
            let (class, word) = match s.outcome {
                Outcome::Committed => ("ok", "committed"),
                Outcome::Failed(_) => ("failed", "failed"),
                Outcome::NotRun => ("skipped", "not run"),
            };
            format!("<a href=\"#{0}\">{0}</a> <span class=\"{class}\">{word}</span>", s.stage.name())
        })
        .collect();
    let mut html = String::from("<table>\n");
    for (label, value) in [
        ("status", status),
        ("stages", ran.join(", ")),
        ("cluster", escape(&job.cluster)),
        ("job file", escape(&job.file)),
        ("graphflat", escape(&job.version)),
    ] {
        let _ = writeln!(html, "<tr><th>{label}</th><td>{value}</td></tr>");
    }
    html.push_str("</table>\n");
    if let Some((_, error)) = &job.failure {
        let _ = writeln!(html, "<div class=\"error\">error: {}</div>", escape(error));
    }
    html
}

fn stage_section(run: &StageRun, id: &str) -> String {
    let name = run.stage.name();
    let mut html = format!("<section id=\"{id}\">\n<h2>{name}</h2>\n");
    let mut facts: Vec<(String, String)> = vec![("output".into(), run.output.clone())];
    match &run.outcome {
        Outcome::Committed => {}
        Outcome::Failed(error) => {
            let _ = writeln!(html, "<div class=\"error\">failed: {}</div>", escape(error));
        }
        Outcome::NotRun if run.notes.is_empty() => {
            html.push_str("<p class=\"skipped\">not run: the job ended before this stage</p>\n");
        }
        Outcome::NotRun => {}
    }
    if let Some(manifest) = &run.manifest {
        facts.push(("run".into(), manifest.run.clone()));
        facts.push((
            "written".into(),
            format!("{} rows, {} in {} files", manifest.rows, bytes(manifest.bytes), manifest.parts.len()),
        ));
    }
    let run_facts = run.manifest.as_ref().and_then(|m| m.facts.as_ref());
    if let Some(f) = run_facts {
        facts.push(("time".into(), format!("{:.2}s on {} workers", f.seconds, f.workers)));
        let peaks: Vec<String> =
            f.peak_rss.iter().enumerate().map(|(p, b)| format!("process {p}: {}", bytes(*b))).collect();
        facts.push(("peak memory".into(), peaks.join(", ")));
        facts.extend(f.lines.iter().cloned());
    }
    facts.extend(run.lines.iter().cloned());
    html.push_str("<table>\n");
    for (label, value) in &facts {
        let _ = writeln!(html, "<tr><th>{}</th><td>{}</td></tr>", escape(label), escape(value));
    }
    html.push_str("</table>\n");
    for note in &run.notes {
        let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(note));
    }
    if run.stage == Stage::Train {
        html.push_str(&train_charts(&run.metrics, &run.timings));
    }
    if let Some(f) = run_facts {
        html.push_str(&fact_charts(run.stage, f));
    }
    html.push_str("</section>\n");
    html
}

/// Phase times and every distribution the run kept.
fn fact_charts(stage: Stage, facts: &RunFacts) -> String {
    let mut html = String::new();
    if !facts.phases.is_empty() {
        let title = if stage == Stage::Infer { "time per phase (rounds are layers)" } else { "time per phase" };
        html.push_str(&chart::bars(&Bars {
            title: title.into(),
            x: "phase".into(),
            y: "seconds".into(),
            labels: facts.phases.iter().map(|p| p.0.clone()).collect(),
            values: facts.phases.iter().map(|p| p.1).collect(),
        }));
    }
    for histogram in &facts.histograms {
        html.push_str(&histogram_chart(histogram));
    }
    html
}

/// A log2-binned distribution on log-log axes (points at each bin's lower bound), others as bars.
fn histogram_chart(h: &Histogram) -> String {
    let title = format!("{} ({} {})", h.name, h.total(), h.of);
    match &h.bins {
        Bins::Log2 => chart::lines(&Lines {
            title,
            x: format!("{} (bins from 2^k)", h.name),
            y: h.of.clone(),
            series: vec![Series {
                name: h.of.clone(),
                points: (1..h.counts.len())
                    .filter(|&i| h.counts[i] > 0)
                    .map(|i| (h.lower(i), h.counts[i] as f64))
                    .collect(),
            }],
            marks: h.marks.clone(),
            log: true,
        }),
        Bins::Linear { .. } => chart::bars(&Bars {
            title,
            x: h.name.clone(),
            y: h.of.clone(),
            labels: (0..h.counts.len()).map(|i| format!("{:.2}", h.lower(i))).collect(),
            values: h.counts.iter().map(|&c| c as f64).collect(),
        }),
        Bins::Categories(names) => chart::bars(&Bars {
            title,
            x: h.name.clone(),
            y: h.of.clone(),
            labels: names.clone(),
            values: h.counts.iter().map(|&c| c as f64).collect(),
        }),
    }
}

/// The loss, each score over the splits with the best epoch marked, and the time per epoch.
fn train_charts(metrics: &[Map<String, Value>], timings: &[Map<String, Value>]) -> String {
    let mut html = String::new();
    if metrics.is_empty() {
        return html;
    }
    let metric = metrics[0].get("metric").and_then(Value::as_str).unwrap_or("");
    let best = best_epoch(metrics, metric);
    let marks: Vec<(String, f64)> = best.map(|e| vec![(format!("best epoch {e}"), e as f64)]).unwrap_or_default();
    let loss = if metrics[0].contains_key("train_loss") { "train_loss" } else { "loss" };
    html.push_str(&chart::lines(&Lines {
        title: "loss per epoch".into(),
        x: "epoch".into(),
        y: "loss".into(),
        series: vec![series(metrics, loss, loss)],
        marks: marks.clone(),
        log: false,
    }));
    for score in scores(&metrics[0]) {
        let series = ["train", "valid", "test"]
            .iter()
            .map(|split| format!("{split}_{score}"))
            .filter(|key| metrics[0].contains_key(key))
            .map(|key| series(metrics, &key, key.split('_').next().unwrap_or("")))
            .collect();
        html.push_str(&chart::lines(&Lines {
            title: format!("{score} per epoch"),
            x: "epoch".into(),
            y: score.clone(),
            series,
            marks: marks.clone(),
            log: false,
        }));
    }
    if !timings.is_empty() {
        html.push_str(&chart::lines(&Lines {
            title: "time per epoch".into(),
            x: "epoch".into(),
            y: "seconds".into(),
            series: vec![series(timings, "seconds", "epoch"), series(timings, "wait_seconds", "waiting for data")],
            marks: Vec::new(),
            log: false,
        }));
    }
    html
}

/// The scores an epoch line holds: the keys' names after a split prefix, in order.
fn scores(line: &Map<String, Value>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for key in line.keys() {
        if let Some((split, name)) = key.split_once('_')
            && ["train", "valid", "test"].contains(&split)
            && name != "loss"
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_owned());
        }
    }
    // The watched metric first.
    if let Some(metric) = line.get("metric").and_then(Value::as_str)
        && let Some(at) = names.iter().position(|n| n == metric)
    {
        let first = names.remove(at);
        names.insert(0, first);
    }
    names
}

/// `(epoch, line[key])` for every line where both are numbers.
fn series(lines: &[Map<String, Value>], key: &str, name: &str) -> Series {
    let points = lines.iter().filter_map(|l| Some((l.get("epoch")?.as_f64()?, l.get(key)?.as_f64()?))).collect();
    Series { name: name.to_owned(), points }
}

/// The trainer's best epoch: the first with the highest validation score of `metric`.
fn best_epoch(metrics: &[Map<String, Value>], metric: &str) -> Option<u64> {
    let key = format!("valid_{metric}");
    let mut best: Option<(u64, f64)> = None;
    for line in metrics {
        let (Some(epoch), Some(valid)) =
            (line.get("epoch").and_then(Value::as_u64), line.get(&key).and_then(Value::as_f64))
        else {
            continue;
        };
        if best.is_none_or(|(_, b)| valid > b) {
            best = Some((epoch, valid));
        }
    }
    best.map(|(epoch, _)| epoch)
}

fn bytes(b: u64) -> String {
    match b {
        0 => "unknown".into(),
        b if b >= 1 << 30 => format!("{:.2} GB", b as f64 / 1e9),
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / 1e6),
        b => format!("{:.1} kB", b as f64 / 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn sections_have_one_anchor_each_and_long_job_files_are_cut() {
        let run = || StageRun::new(Stage::Flatten, "out", Outcome::NotRun);
        let job = Job { text: "é".repeat(MAX_JOB_TEXT), ..Job::default() };
        let page = render(&Report { job: Some(job), stages: vec![run(), run(), run()] });
        for id in ["id=\"flatten\"", "id=\"flatten-2\"", "id=\"flatten-3\""] {
            assert_eq!(page.matches(id).count(), 1, "{id}");
        }
        assert!(page.contains(&format!("... ({} more bytes not shown)", MAX_JOB_TEXT)), "cut at a character");
    }

    #[test]
    fn the_best_epoch_is_the_first_highest_validation_score() {
        let metrics = [
            line(r#"{"epoch":1,"metric":"accuracy","valid_accuracy":0.5}"#),
            line(r#"{"epoch":2,"metric":"accuracy","valid_accuracy":0.7}"#),
            line(r#"{"epoch":3,"metric":"accuracy","valid_accuracy":0.7}"#),
            line(r#"{"epoch":4,"metric":"accuracy","valid_accuracy":null}"#),
        ];
        assert_eq!(best_epoch(&metrics, "accuracy"), Some(2));
        assert_eq!(best_epoch(&metrics[3..], "accuracy"), None);
    }

    #[test]
    fn link_scores_are_grouped_by_name_with_the_metric_first() {
        let l = line(
            r#"{"epoch":1,"metric":"auc","loss":0.6,"valid_mrr":0.1,"test_mrr":0.1,"valid_auc":0.8,"test_auc":0.7,"valid_hits@10":0.2}"#,
        );
        assert_eq!(scores(&l), ["auc", "mrr", "hits@10"]);
        let n = line(
            r#"{"epoch":1,"metric":"accuracy","train_loss":1.0,"train_accuracy":0.4,"valid_accuracy":0.3,"test_accuracy":0.3}"#,
        );
        assert_eq!(scores(&n), ["accuracy"]);
    }

    #[test]
    fn a_failed_stage_shows_its_error_escaped() {
        let mut run = StageRun::new(Stage::Infer, "out/<scores>", Outcome::Failed("bad <row> 3".into()));
        run.notes.push("a note".into());
        let page = render(&Report { job: None, stages: vec![run] });
        assert!(page.starts_with(SIGNATURE));
        assert!(page.contains("failed: bad &lt;row&gt; 3"), "{page}");
        assert!(page.contains("out/&lt;scores&gt;"), "{page}");
        assert!(!page.contains("<script"), "{page}");
    }
}
