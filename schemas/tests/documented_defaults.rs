//! The job-file reference, `docs/jobs.md`, and the comments of `jobs/*.toml` state each default
//! as `key = value  # ... (default X)` under a `[table]`. This holds every such X to the code: a
//! job that sets the key to X must parse to the same job as one that leaves it out. It also
//! checks that each block of the reference is a valid job, and that the reference and the code
//! name the same keys, both ways (a key written commented out, `# key = value`, counts as
//! named), so that a new knob cannot go undocumented and a removed one cannot stay documented.

use std::collections::{BTreeMap, BTreeSet};

use schemas::JobFile;
use schemas::job::JobError;
use schemas::job::graph::{NodeTypeConfig, RelationConfig};
use schemas::job::{
    ClusterConfig, FlattenConfig, GenerateConfig, InferConfig, PartitionConfig, PrecomputeConfig, ReportConfig,
    StorageConfig, TrainConfig,
};
use serde::Deserialize;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The job-file reference.
const REFERENCE: &str = "docs/jobs.md";

/// Each table's keys that have no default, with placeholder values: a stated default is tried
/// beside them.
const REQUIRED: &[(&str, &str)] = &[
    ("cluster", ""),
    ("storage", ""),
    ("generate", "output = 'o'\n"),
    ("flatten", "nodes = 'n'\nedges = 'e'\noutput = 'o'\n"),
    ("partition", "nodes = 'n'\nedges = 'e'\noutput = 'o'\n"),
    ("precompute", "nodes = 'n'\nedges = 'e'\noutput = 'o'\n"),
    ("train", "records = 'r'\noutput = 'o'\n"),
    ("infer", "nodes = 'n'\nedges = 'e'\nmodel = 'm'\noutput = 'o'\n"),
    ("report", "output = 'r'\n"),
];

/// One `key = value` line of a TOML example, with the table it sits under.
struct KeyLine {
    at: String,
    table: String,
    key: String,
    comment: String,
}

#[test]
fn the_reference_states_the_code_defaults() {
    let reference = read(REFERENCE);
    let lines = key_lines(REFERENCE, &toml_blocks(&reference));
    let checked = lines.iter().filter(|line| check_stated_default(line)).count();
    // The parser must keep finding the reference: a change of format would otherwise pass.
    assert!(checked >= 50, "only {checked} defaults found in {REFERENCE}");
}

#[test]
fn the_job_files_state_the_code_defaults() {
    for entry in std::fs::read_dir(format!("{ROOT}/jobs")).unwrap() {
        let path = entry.unwrap().path();
        let name = format!("jobs/{}", path.file_name().unwrap().to_string_lossy());
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<(usize, &str)> = text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
        for line in key_lines(&name, &lines) {
            check_stated_default(&line);
        }
    }
}

/// The reference's and the README's blocks are whole jobs; the other pages' may be parts of
/// one (an `[infer]` whose `[graph]` is elsewhere), but every key and value they show is one a
/// job file takes.
#[test]
fn the_docs_show_only_keys_and_values_a_job_takes() {
    for page in ["README.md", REFERENCE] {
        for (first, text) in block_texts(&read(page)) {
            JobFile::parse(&text).unwrap_or_else(|e| panic!("{page}:{first}: the example is not a valid job: {e}"));
        }
    }
    for entry in std::fs::read_dir(format!("{ROOT}/docs")).unwrap() {
        let page = format!("docs/{}", entry.unwrap().file_name().to_string_lossy());
        if page.ends_with(".md") {
            for (first, text) in block_texts(&read(&page)) {
                if let Err(JobError::Syntax(e)) = JobFile::parse(&text) {
                    panic!("{page}:{first}: the example is not a job file's: {e}");
                }
            }
        }
    }
}

#[test]
fn the_reference_and_the_code_name_the_same_keys() {
    let reference = read(REFERENCE);
    let lines = toml_blocks(&reference);
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in key_lines(REFERENCE, &lines).into_iter().chain(commented_key_lines(REFERENCE, &lines)) {
        documented.entry(table_kind(&line.table)).or_default().insert(line.key);
    }
    let code = code_keys();
    for (table, keys) in &code {
        let named = documented.get(table).cloned().unwrap_or_default();
        let missing: Vec<_> = keys.difference(&named).collect();
        assert!(missing.is_empty(), "[{table}] {missing:?}: keys of the code that {REFERENCE} does not name");
        let unknown: Vec<_> = named.difference(keys).collect();
        assert!(unknown.is_empty(), "[{table}] {unknown:?}: keys {REFERENCE} names that the code does not have");
    }
    let tables: BTreeSet<_> = documented.keys().filter(|table| !code.contains_key(*table)).collect();
    assert!(tables.is_empty(), "{REFERENCE} documents tables no job has: {tables:?}");
}

/// Every table of a job file and the keys its type takes.
fn code_keys() -> BTreeMap<String, BTreeSet<String>> {
    [
        ("cluster", keys_of::<ClusterConfig>()),
        ("storage", keys_of::<StorageConfig>()),
        ("generate", keys_of::<GenerateConfig>()),
        ("graph.node_types.*", keys_of::<NodeTypeConfig>()),
        ("graph.relations.*", keys_of::<RelationConfig>()),
        ("partition", keys_of::<PartitionConfig>()),
        ("precompute", keys_of::<PrecomputeConfig>()),
        ("flatten", keys_of::<FlattenConfig>()),
        ("train", keys_of::<TrainConfig>()),
        ("infer", keys_of::<InferConfig>()),
        ("report", keys_of::<ReportConfig>()),
    ]
    .into_iter()
    .map(|(table, keys)| (table.to_owned(), keys))
    .collect()
}

/// A `[graph.node_types.user]` header names one of a kind of tables: `graph.node_types.*`.
fn table_kind(table: &str) -> String {
    match table.split('.').collect::<Vec<_>>().as_slice() {
        ["graph", kind, _] => format!("graph.{kind}.*"),
        _ => table.to_owned(),
    }
}

/// The keys serde's derive reads for `T`: its `Deserialize` hands `deserialize_struct` the list
/// of field names (aliases included), which this deserializer keeps, and refuses the rest.
fn keys_of<T: for<'de> Deserialize<'de>>() -> BTreeSet<String> {
    #[derive(Debug)]
    struct Fields(&'static [&'static str]);
    impl std::fmt::Display for Fields {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "fields {:?}", self.0)
        }
    }
    impl std::error::Error for Fields {}
    impl serde::de::Error for Fields {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Fields(&[])
        }
    }
    struct Capture;
    impl<'de> serde::Deserializer<'de> for Capture {
        type Error = Fields;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
            Err(Fields(&[]))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Fields> {
            Err(Fields(fields))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let Err(Fields(fields)) = T::deserialize(Capture) else { panic!("a table type that is not a struct") };
    assert!(!fields.is_empty(), "{}: no fields found", std::any::type_name::<T>());
    fields.iter().map(|field| (*field).to_owned()).collect()
}

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{name}")).unwrap()
}

/// The lines inside the markdown's ```` ```toml ```` blocks, numbered from 1.
fn toml_blocks(markdown: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut lines = Vec::new();
    for (i, line) in markdown.lines().enumerate() {
        match line.trim() {
            "```toml" => inside = true,
            "```" => inside = false,
            _ if inside => lines.push((i + 1, line)),
            _ => {}
        }
    }
    lines
}

/// Each ```` ```toml ```` block's text, with the number of its first line.
fn block_texts(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks: Vec<(usize, String)> = Vec::new();
    let mut last = 0;
    for (n, line) in toml_blocks(markdown) {
        if n != last + 1 || blocks.is_empty() {
            blocks.push((n, String::new()));
        }
        let text = &mut blocks.last_mut().unwrap().1;
        text.push_str(line);
        text.push('\n');
        last = n;
    }
    blocks
}

/// The `key = value  # comment` lines, each with the `[table]` above it.
fn key_lines(file: &str, lines: &[(usize, &str)]) -> Vec<KeyLine> {
    let mut table = String::new();
    let mut found = Vec::new();
    for &(n, line) in lines {
        let (code, comment) = split_comment(line);
        let code = code.trim();
        if let Some(name) = code.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            table = name.trim().to_owned();
        } else if let Some((key, _)) = code.split_once('=') {
            let at = format!("{file}:{n}");
            found.push(KeyLine { at, table: table.clone(), key: key.trim().to_owned(), comment: comment.to_owned() });
        }
    }
    found
}

/// The keys written commented out, `# key = value`, each with the `[table]` above it: a key
/// the reference names without setting it (a path with no default, an alternative).
fn commented_key_lines(file: &str, lines: &[(usize, &str)]) -> Vec<KeyLine> {
    let mut table = String::new();
    let mut found = Vec::new();
    for &(n, line) in lines {
        let code = split_comment(line).0.trim();
        if let Some(name) = code.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            table = name.trim().to_owned();
            continue;
        }
        let Some(commented) = line.trim().strip_prefix('#') else { continue };
        let Some((key, value)) = split_comment(commented).0.split_once('=') else { continue };
        let key = key.trim();
        let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if is_key && !value.trim().is_empty() {
            let at = format!("{file}:{n}");
            found.push(KeyLine { at, table: table.clone(), key: key.to_owned(), comment: String::new() });
        }
    }
    found
}

/// A TOML line's code and its comment: the text after the first `#` outside a string.
fn split_comment(line: &str) -> (&str, &str) {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') => return (&line[..i], &line[i + 1..]),
            _ => {}
        }
    }
    (line, "")
}

/// The value a comment states as `(default X)`, as TOML: X itself when it is a TOML value, X
/// quoted when it is a bare lowercase word (an enum's name: `uniform`); `None` when the comment
/// states none or describes it in words (`default k - 1`).
fn stated_default(comment: &str) -> Option<String> {
    let rest = &comment[comment.find("(default ")? + "(default ".len()..];
    let stated = rest[..rest.find([')', ',', ';']).unwrap_or(rest.len())].trim();
    if toml::from_str::<toml::Table>(&format!("x = {stated}")).is_ok() {
        Some(stated.to_owned())
    } else if !stated.is_empty() && stated.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        Some(format!("\"{stated}\""))
    } else {
        None
    }
}

/// Checks the default a line states, if any, against the code's; returns whether it stated one.
fn check_stated_default(line: &KeyLine) -> bool {
    let Some(stated) = stated_default(&line.comment) else { return false };
    let required = REQUIRED.iter().find(|(t, _)| *t == line.table).map(|(_, r)| *r);
    let required = required.unwrap_or_else(|| panic!("{}: a key under [{}], a table no job has", line.at, line.table));
    let without = format!("[{}]\n{required}", line.table);
    let with = format!("{without}{} = {stated}\n", line.key);
    let parsed =
        JobFile::parse(&with).unwrap_or_else(|e| panic!("{}: (default {stated}) does not parse: {e}", line.at));
    assert_eq!(
        parsed,
        JobFile::parse(&without).unwrap(),
        "{}: [{}] {} states (default {stated}), which is not the code's default",
        line.at,
        line.table,
        line.key
    );
    true
}
