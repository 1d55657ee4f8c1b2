//! What the replicas run as, checked on the node rather than read from the
//! manifest: each replica's process, seen from the host through /proc.

use serde_json::Value;

use crate::install::{NAMESPACE, REPLICAS, ensure, replica_names};
use crate::{Suite, json, same};

/// One replica's process as the kernel sees it.
#[derive(Debug, PartialEq, Eq)]
struct Process {
    /// `Uid:` and `Gid:` of /proc/PID/status (real, effective, saved, fs).
    ids: (String, String),
    /// Effective capabilities, no_new_privs, seccomp mode.
    privileges: (String, String, String),
    /// The options of its root mount (`ro` first when read-only).
    root: String,
    /// Its environment's KUBECONFIG, if any, and the API server address the
    /// kubelet gave it.
    environment: (Option<String>, Option<String>),
    /// The service-account token's mount: (file system type, mount point).
    token_mount: (String, String),
    /// The token's claims: subject, and the Pod it is bound to.
    token: (String, String),
}

/// The processes on this machine whose command line is the image's
/// entrypoint serving: the replicas (the host runs no other `sartor serve`
/// from /usr/local/bin while the suite runs).
fn sartor_processes() -> Result<Vec<u32>, String> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").map_err(|e| e.to_string())? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.starts_with(b"/usr/local/bin/sartor\0serve\0") {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

fn read(pid: u32, file: &str) -> Result<String, String> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .map_err(|e| format!("/proc/{pid}/{file}: {e}"))
}

/// The value after `key:` in /proc/PID/status, whitespace squeezed.
fn status_field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The JWT's claims, decoded from its middle part.
fn claims(token: &str) -> Result<Value, String> {
    use base64::Engine as _;
    let payload = token
        .split('.')
        .nth(1)
        .ok_or_else(|| "the token is not a JWT".to_string())?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| format!("the token's claims: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("the token's claims: {e}"))
}

fn inspect(pid: u32) -> Result<Process, String> {
    let status = read(pid, "status")?;
    let mountinfo = read(pid, "mountinfo")?;
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... - FSTYPE SOURCE SUPER
    let mount = |point: &str| {
        mountinfo.lines().rev().find_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            (fields.get(4) == Some(&point)).then(|| {
                (
                    fields.get(5).copied().unwrap_or_default().to_string(),
                    fields
                        .get(dash + 1)
                        .copied()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
        })
    };
    let environ = read(pid, "environ")?;
    let variable = |name: &str| {
        environ
            .split('\0')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .map(str::to_string)
    };
    let secrets = "/var/run/secrets/kubernetes.io/serviceaccount";
    let token_mount = mount(secrets)
        .map(|(_, fstype)| (fstype, secrets.to_string()))
        .unwrap_or_default();
    let token = read(pid, &format!("root{secrets}/token"))?;
    let claims = claims(&token)?;
    Ok(Process {
        ids: (status_field(&status, "Uid"), status_field(&status, "Gid")),
        privileges: (
            status_field(&status, "CapEff"),
            status_field(&status, "NoNewPrivs"),
            status_field(&status, "Seccomp"),
        ),
        root: mount("/").map(|(options, _)| options).unwrap_or_default(),
        environment: (variable("KUBECONFIG"), variable("KUBERNETES_SERVICE_HOST")),
        token_mount,
        token: (
            claims["sub"].as_str().unwrap_or_default().to_string(),
            claims["kubernetes.io"]["pod"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ),
    })
}

/// Each replica's process runs as 65532:65532 with no capability, no new
/// privileges and the runtime's seccomp filter, on a read-only root, and
/// talks to the API server with the projected, Pod-bound service-account
/// token (no kubeconfig anywhere); and Pod Security `restricted` is
/// enforced in its namespace: the same Pod without its securityContext is
/// refused there.
pub fn replicas_run_restricted_read_only_as_65532_with_the_projected_token(
    suite: &mut Suite,
) -> Result<(), String> {
    ensure(suite)?;
    let node = suite.node()?;
    let pods = replica_names(node, "sartor")?;
    let pids = sartor_processes()?;
    if pids.len() != REPLICAS {
        return Err(format!(
            "{} sartor processes on the node ({pids:?}), want {REPLICAS}",
            pids.len()
        ));
    }
    let mut bound = Vec::new();
    for pid in pids {
        let process = inspect(pid)?;
        bound.push(process.token.1.clone());
        same(
            &format!("the replica process {pid}"),
            Process {
                token: (process.token.0.clone(), String::new()),
                root: process
                    .root
                    .split(',')
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                ..process
            },
            Process {
                ids: (
                    "65532 65532 65532 65532".into(),
                    "65532 65532 65532 65532".into(),
                ),
                privileges: ("0000000000000000".into(), "1".into(), "2".into()),
                root: "ro".into(),
                environment: (None, Some("10.0.0.1".into())),
                token_mount: (
                    "tmpfs".into(),
                    "/var/run/secrets/kubernetes.io/serviceaccount".into(),
                ),
                token: (
                    format!("system:serviceaccount:{NAMESPACE}:sartor"),
                    String::new(),
                ),
            },
        )?;
    }
    bound.sort();
    same("the Pods the tokens are bound to", bound, pods.clone())?;

    // Pod Security: the namespace enforces `restricted`, and it bites.
    let namespace = json(&node.kubectl(&["get", "namespace", NAMESPACE, "-o", "json"])?)?;
    same(
        "the namespace's enforced Pod Security level",
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"].as_str(),
        Some("restricted"),
    )?;
    let pod = json(&node.kubectl(&["get", "pod", &pods[0], "-n", NAMESPACE, "-o", "json"])?)?;
    let mut unsafe_pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "restricted-check", "namespace": NAMESPACE},
        "spec": pod["spec"].clone(),
    });
    unsafe_pod["spec"]["containers"][0]
        .as_object_mut()
        .map(|c| c.remove("securityContext"));
    unsafe_pod["spec"]
        .as_object_mut()
        .map(|s| s.remove("securityContext"));
    match node.kubectl_with_input(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&unsafe_pod.to_string()),
    ) {
        Ok(out) => Err(format!(
            "a Pod without the securityContext was admitted in {NAMESPACE}: {out}"
        )),
        Err(e) if e.contains("violates PodSecurity \"restricted:latest\"") => Ok(()),
        Err(e) => Err(format!("refused, but not by Pod Security: {e}")),
    }
}
