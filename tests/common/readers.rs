//! The readers data teams use (pyarrow, pandas, polars, DuckDB, Spark's rule), run on output
//! directories by `python/tests/readers.py`, which compares each one's rows with the manifest's.
//! The Python comes from `GRAPHFLAT_PYTHON` (`.ci/run` sets it to its venv), else
//! `.ci/venv/bin/python`; without one that imports the readers, the checks are skipped with a
//! message, unless `GRAPHFLAT_PYTHON` was set (then it is a failure).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The Python that has the readers, if there is one.
pub fn python() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let given = std::env::var_os("GRAPHFLAT_PYTHON").map(PathBuf::from);
            let python = given.clone().unwrap_or_else(|| Path::new(ROOT).join(".ci/venv/bin/python"));
            let imports = Command::new(&python)
                .args(["-c", "import pyarrow, pandas, polars, duckdb"])
                .output()
                .is_ok_and(|o| o.status.success());
            match (imports, given) {
                (true, _) => Some(python),
                (false, Some(_)) => panic!("GRAPHFLAT_PYTHON={} cannot import pyarrow, pandas, polars and duckdb", python.display()),
                (false, None) => {
                    eprintln!("skipped: the directory readers' checks need a Python with pyarrow, pandas, polars and duckdb (.ci/run installs one)");
                    None
                }
            }
        })
        .as_deref()
}

/// Each reader's result on each of `dirs` (paths, or `s3://` URIs read with the environment
/// `env`): JSON objects as `readers.py` prints them; `None` when there is no Python with the
/// readers.
pub fn read_with_every_reader(dirs: &[&Path], env: &[(&str, String)]) -> Option<Vec<serde_json::Value>> {
    let python = python()?;
    let out = Command::new(python)
        .arg(Path::new(ROOT).join("python/tests/readers.py"))
        .args(dirs)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run readers.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "readers.py failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    Some(stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect())
}

/// Every reader, with no options, reads exactly the rows the manifest of each of `dirs` lists.
pub fn assert_every_reader_reads_the_manifest(dirs: &[&Path]) {
    assert_every_reader_reads_the_manifest_with(dirs, &[]);
}

/// The same, with `env` set for the readers (an S3 server's endpoint and credentials).
pub fn assert_every_reader_reads_the_manifest_with(dirs: &[&Path], env: &[(&str, String)]) {
    let Some(results) = read_with_every_reader(dirs, env) else { return };
    for result in results {
        let rows = &result["manifest_rows"];
        assert!(rows.is_u64(), "{}: no manifest", result["dir"]);
        for (reader, got) in result["readers"].as_object().unwrap() {
            assert!(
                got["equal"] == true && got["rows"] == *rows,
                "{} read by {reader}: {got}, where the manifest lists {rows} rows",
                result["dir"]
            );
        }
    }
}
