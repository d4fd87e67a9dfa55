//! The deploy files as shipped: the processes of deploy/compose.yaml and deploy/k8s started
//! from those files — Redis with deploy/redis/users.acl, `delayq serve` and a worker with
//! their environment and secrets (each secret a file with the mode its orchestrator gives it)
//! — connect and run a job. Only the host names and the secrets' mount paths are rewritten
//! (no container runtime runs here).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use delayq_test_support::RedisServer;

use crate::common::{Killed, chmod, delayq, free_port, request, until};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn yaml(path: &Path) -> Vec<serde_yaml_ng::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

fn strings(v: &serde_yaml_ng::Value) -> Vec<String> {
    v.as_sequence()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// Writes a secret as its orchestrator mounts it: `mode`.
fn secret(dir: &Path, name: &str, body: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    chmod(&p, mode);
    p
}

/// Redis as the deploy files run it: `redis_args` with users.acl from deploy/redis.
fn redis(redis_args: &[String]) -> RedisServer {
    let acl = deploy().join("redis/users.acl");
    let args: Vec<String> = redis_args
        .iter()
        .map(|a| {
            if a.ends_with("users.acl") {
                acl.display().to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    RedisServer::start_with(&args)
}

/// Runs `command` with `env`, where `redis:6379` becomes the test's Redis and each mounted
/// secret path its file in `secrets`.
fn start(
    dir: &Path,
    command: &[String],
    env: &BTreeMap<String, String>,
    mounts: &[(String, PathBuf)],
    redis_port: u16,
    extra: &[(&str, String)],
) -> Killed {
    let mut c = delayq(dir);
    c.args(command);
    for (k, v) in env {
        let mut v = v.replace("redis:6379", &format!("127.0.0.1:{redis_port}"));
        for (mounted, file) in mounts {
            if v == *mounted {
                v = file.display().to_string();
            }
        }
        c.env(k, v);
    }
    c.envs(extra.iter().map(|(k, v)| (*k, v.as_str())));
    let log = std::fs::File::create(dir.join(format!("{}.log", command[0]))).unwrap();
    Killed(c.stdout(Stdio::null()).stderr(log).spawn().unwrap())
}

/// Enqueues a job through the API at `addr` with `token` and waits until the worker ran it.
fn runs_a_job(dir: &Path, addr: &str, token: &str) {
    let auth = format!("Bearer {token}");
    let h = [("authorization", auth.as_str())];
    until("serve is ready", || {
        std::net::TcpStream::connect(addr).is_ok()
            && request(addr, "GET", "/readyz", &[], "").0 == 200
    });
    let (s, b) = request(
        addr,
        "POST",
        "/v1/queues/default/jobs",
        &h,
        r#"{"id": "deployed", "payload": {"hello": "world"}}"#,
    );
    assert_eq!(s, 201, "{b}");
    let log = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let mut seen = String::new();
    until("the worker runs the job", || {
        let (s, b) = request(addr, "GET", "/v1/queues/default/jobs/deployed", &h, "");
        seen = b;
        s == 404
    });
    let (s, b) = request(addr, "GET", "/v1/queues/default", &h, "");
    assert_eq!(s, 200, "{b}");
    assert!(
        !log("worker.log").contains("error"),
        "{seen}\n{}",
        log("worker.log")
    );
}

#[test]
fn the_compose_stack_connects_and_runs_a_job_as_shipped() {
    let docs = yaml(&deploy().join("compose.yaml"));
    let services = &docs[0]["services"];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let r = redis(&strings(&services["redis"]["command"])[1..]);
    // Compose bind-mounts a file secret with its host file's mode (it cannot set one).
    let mut mounts = Vec::new();
    for (name, def) in docs[0]["secrets"].as_mapping().unwrap() {
        let name = name.as_str().unwrap();
        let src = deploy().join(def["file"].as_str().unwrap());
        let body = std::fs::read_to_string(&src).unwrap();
        let file = secret(dir, name, &body, 0o644);
        mounts.push((format!("/run/secrets/{name}"), file));
    }
    let env = |svc: &str| -> BTreeMap<String, String> {
        services[svc]["environment"]
            .as_mapping()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap().to_owned(),
                    v.as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let addr = format!("127.0.0.1:{}", free_port());
    let listen = [("DELAYQ_LISTEN", addr.clone())];
    let _processes: Vec<Killed> = [("delayq", &listen[..]), ("worker", &[][..])]
        .into_iter()
        .map(|(svc, extra)| {
            let command = strings(&services[svc]["command"]);
            start(dir, &command, &env(svc), &mounts, r.port(), extra)
        })
        .collect();
    let tokens = std::fs::read_to_string(deploy().join("secrets/delayq_tokens")).unwrap();
    let token = tokens
        .lines()
        .find_map(|l| l.strip_prefix("admin:"))
        .expect("an admin token");
    runs_a_job(dir, &addr, token);
    // The health check carries no password on its command line.
    let check = strings(&services["redis"]["healthcheck"]["test"]).join(" ");
    assert!(!check.contains("change-me"), "{check}");
}

#[test]
fn the_kubernetes_deployments_connect_and_run_a_job_as_shipped() {
    let docs = yaml(&deploy().join("k8s/delayq.yaml"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The Redis of a cluster is the operator's; run it as compose.yaml does.
    let compose = yaml(&deploy().join("compose.yaml"));
    let r = redis(&strings(&compose[0]["services"]["redis"]["command"])[1..]);
    let data = docs[0]["stringData"].as_mapping().unwrap();
    let pod = |i: usize| docs[i]["spec"]["template"]["spec"].clone();
    let mut processes = Vec::new();
    let addr = format!("127.0.0.1:{}", free_port());
    for i in [1, 2] {
        let spec = pod(i);
        let volume = &spec["volumes"][0];
        let mode = volume["secret"]["defaultMode"].as_u64().unwrap_or(0o644) as u32;
        let c = &spec["containers"][0];
        let mount = c["volumeMounts"][0]["mountPath"].as_str().unwrap();
        let own = dir.join(format!("pod{i}"));
        std::fs::create_dir(&own).unwrap();
        let mut mounts = Vec::new();
        for (k, v) in data {
            let k = k.as_str().unwrap();
            let file = secret(&own, k, v.as_str().unwrap(), mode);
            mounts.push((format!("{mount}/{k}"), file));
        }
        let env: BTreeMap<String, String> = c["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_owned(),
                    e["value"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let listen = [("DELAYQ_LISTEN", addr.clone())];
        processes.push(start(
            dir,
            &strings(&c["args"]),
            &env,
            &mounts,
            r.port(),
            if i == 1 { &listen } else { &[] },
        ));
    }
    let token = data["tokens"]
        .as_str()
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("admin:"))
        .expect("an admin token")
        .to_owned();
    runs_a_job(dir, &addr, &token);
}
