//! The commit the binary is built from, for `graphflat --version` and the job's report:
//! `GRAPHFLAT_COMMIT` (from the environment when set, as the Dockerfile sets it; else git's
//! HEAD), "unknown" outside a git checkout.

fn main() {
    // A build without the history (the Dockerfile's) is told the commit.
    println!("cargo:rerun-if-env-changed=GRAPHFLAT_COMMIT");
    if let Some(commit) = std::env::var("GRAPHFLAT_COMMIT").ok().filter(|c| !c.is_empty() && c != "unknown") {
        println!("cargo:rustc-env=GRAPHFLAT_COMMIT={commit}");
        return;
    }
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=GRAPHFLAT_COMMIT={commit}");
    // A new commit moves a branch head (or packed-refs); a checkout moves HEAD.
    for path in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
