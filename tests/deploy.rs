//! `deploy/kubernetes/graphflat.yaml` against Kubernetes' own schemas (`kubernetes-validate
//! --strict`, from PyPI: the OpenAPI schemas of each Kubernetes release, bundled) and against
//! this project: its job file parses, its process count is the Job's completions and
//! parallelism, its hosts template names the pods behind the headless Service at the Service's
//! port, and the podFailurePolicy fails the Job on exactly the codes a rerun cannot fix and
//! retries on the others (`schemas::exit`). The Python (and its `kubernetes-validate`) comes
//! from the readers' venv (`GRAPHFLAT_PYTHON`; skipped, said so, without one).

use std::path::Path;

use crate::common::*;
use schemas::exit::Cause;

const MANIFEST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes/graphflat.yaml");

/// Python: the manifest's facts this test checks, as JSON.
const FACTS: &str = r#"import sys, json, yaml
docs = {d["kind"]: d for d in yaml.safe_load_all(open(sys.argv[1]))}
job, service = docs["Job"]["spec"], docs["Service"]
pod = job["template"]["spec"]
rules = {r["action"]: r["onExitCodes"]["values"] for r in job["podFailurePolicy"]["rules"] if "onExitCodes" in r}
print(json.dumps({
    "job_toml": docs["ConfigMap"]["data"]["job.toml"],
    "completions": job["completions"], "parallelism": job["parallelism"], "mode": job["completionMode"],
    "service": service["metadata"]["name"], "headless": service["spec"]["clusterIP"],
    "port": service["spec"]["ports"][0]["port"], "job_name": docs["Job"]["metadata"]["name"],
    "subdomain": pod["subdomain"], "restart": pod["restartPolicy"],
    "container": pod["containers"][0]["name"], "rule_containers": sorted({r["onExitCodes"]["containerName"] for r in job["podFailurePolicy"]["rules"] if "onExitCodes" in r}),
    "fail": rules.get("FailJob"), "count": rules.get("Count"),
}))"#;

#[test]
fn the_kubernetes_manifests_validate_and_agree_with_the_job_and_the_exit_codes() {
    let Some(python) = python() else { return };
    let validate = python.with_file_name("kubernetes-validate");
    if !validate.exists() {
        eprintln!("SKIPPED: no kubernetes-validate beside {} (.ci/run installs it)", python.display());
        return;
    }
    let out = std::process::Command::new(&validate).args(["--strict", "--quiet", MANIFEST]).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && !said.contains("ERROR"), "kubernetes-validate: {said}");

    let out = std::process::Command::new(python).args(["-c", FACTS, MANIFEST]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let facts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = schemas::JobFile::parse(facts["job_toml"].as_str().unwrap()).unwrap();
    job.cluster.check().unwrap();
    let processes = job.cluster.processes as u64;
    assert_eq!((facts["completions"].as_u64(), facts["parallelism"].as_u64()), (Some(processes), Some(processes)));
    assert_eq!(facts["mode"], "Indexed", "JOB_COMPLETION_INDEX is set only in an indexed Job");
    // Pod i is <job>-i, named within the Service's subdomain, listening on the Service's port.
    let (service, port) = (facts["service"].as_str().unwrap(), facts["port"].as_u64().unwrap());
    assert_eq!((facts["headless"].as_str(), facts["subdomain"].as_str()), (Some("None"), Some(service)));
    let pods: Vec<String> =
        (0..processes).map(|i| format!("{}-{i}.{service}:{port}", facts["job_name"].as_str().unwrap())).collect();
    assert_eq!(job.cluster.addresses(), pods);
    assert_eq!(facts["restart"], "Never", "podFailurePolicy needs restartPolicy Never");
    assert_eq!(facts["rule_containers"], serde_json::json!([facts["container"]]));
    // Fail at once on what a rerun cannot fix; retry on what may pass, an interrupt (130) and a
    // termination.
    let codes = |causes: &[Cause]| causes.iter().map(|c| c.exit_code()).collect::<Vec<i32>>();
    let fail = codes(&[Cause::Usage, Cause::BadData, Cause::NoInput, Cause::Internal, Cause::CantCreate]);
    let retry = [codes(&[Cause::Retry]), vec![130], codes(&[Cause::Terminated])].concat();
    assert_eq!(facts["fail"], serde_json::json!(fail));
    assert_eq!(facts["count"], serde_json::json!(retry));
    assert!(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile")).exists());
}
