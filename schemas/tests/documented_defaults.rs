//! The job reference in the top-level `README.md` and the comments of `jobs/*.toml` state each
//! default as `key = value  # ... (default X)` under a `[table]`. This holds every such X to the
//! code: a job that sets the key to X must parse to the same job as one that leaves it out. It
//! also checks that each README block is a valid job and that the reference names every key
//! the code has, so a new knob cannot go undocumented.

use std::collections::BTreeSet;

use schemas::JobFile;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Each table's keys that have no default, with placeholder values: a stated default is tried
/// beside them.
const REQUIRED: &[(&str, &str)] = &[
    ("cluster", ""),
    ("storage", ""),
    ("generate", "output = 'o'\n"),
    ("flatten", "nodes = 'n'\nedges = 'e'\noutput = 'o'\n"),
    ("partition", "nodes = 'n'\nedges = 'e'\noutput = 'o'\n"),
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
fn the_readme_states_the_code_defaults() {
    let readme = read("README.md");
    let lines = key_lines("README.md", &toml_blocks(&readme));
    let checked = lines.iter().filter(|line| check_stated_default(line)).count();
    // The parser must keep finding the reference: a change of format would otherwise pass.
    assert!(checked >= 50, "only {checked} defaults found in README.md's job reference");
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

#[test]
fn every_readme_block_is_a_valid_job() {
    let readme = read("README.md");
    for (first, text) in block_texts(&readme) {
        JobFile::parse(&text).unwrap_or_else(|e| panic!("README.md:{first}: the example is not a valid job: {e}"));
    }
}

#[test]
fn the_readme_names_every_key() {
    let readme = read("README.md");
    let documented: BTreeSet<(String, String)> =
        key_lines("README.md", &toml_blocks(&readme)).into_iter().map(|l| (l.table, l.key)).collect();
    // Every table, its paths named and the rest left to the code's defaults.
    let text: String = REQUIRED.iter().map(|(table, required)| format!("[{table}]\n{required}")).collect();
    let everything = JobFile::parse(&text).unwrap();
    let toml::Value::Table(tables) = toml::Value::try_from(&everything).unwrap() else { panic!("not a table") };
    for (table, keys) in &tables {
        for key in keys.as_table().unwrap().keys() {
            let named = documented.contains(&(table.clone(), key.clone()));
            assert!(named, "[{table}] {key} is missing from README.md's job reference");
        }
    }
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
